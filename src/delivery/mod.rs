//! Delivering events after commit (docs/design.md §10): the wake-up of waiting readers, the feed's cursor, mail (§20) and
//! webhooks.
//!
//! Events are written by the transaction of their change (`storage::outbox`); nothing here runs inside one. A
//! decision's commit waits for nobody: readers and deliverers learn of new events by one small poll per instance,
//! nudged by a local commit, never by a notification sent inside the transaction.

pub mod cursor;
pub mod feed_waiters;
pub mod hub;
pub mod mail;
pub mod webhooks;

pub use feed_waiters::FeedCaps;
pub use hub::EventsHub;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::storage::outbox::StoredEvent;

/// An event as consumers receive it, in the feed and as a webhook's body (the Standard Webhooks payload shape:
/// `type`, `timestamp`, `data`, plus the event's `id`, which is also the `webhook-id`).
#[derive(Debug, Clone, Serialize)]
pub struct Envelope<'a> {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// When the change's transaction began.
    pub timestamp: DateTime<Utc>,
    pub data: &'a Value,
}

impl<'a> Envelope<'a> {
    pub fn of(event: &'a StoredEvent) -> Self {
        Envelope {
            id: format!("evt_{}", event.public_id.simple()),
            kind: &event.kind,
            timestamp: event.created_at,
            data: &event.data,
        }
    }
}
