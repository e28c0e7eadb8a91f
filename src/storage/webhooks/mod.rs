//! Webhook subscriptions: managing them, and the claims, cursors and retry state of their delivery.
//!
//! A subscription follows its tenant's events with a cursor, by the same `(xid, id)` rule as the feed
//! (`storage::outbox`), so each event of its types reaches it, in order. One instance at a time holds a subscription
//! (a lease, claimed with `for update skip locked`): one attempt at a time, and when the holder dies, its lease runs
//! out and another instance sends the same event again.
//!
//! Two files, one job each, over the one table `webhook_subscriptions`:
//! - `subscriptions`: what the API and the `webhooks` command do to subscriptions (create, list with the backlog,
//!   rotate the secret, remove, count), and the backlog by state for `/metrics`, which shares the listing's count;
//! - `delivery_state`: what the dispatcher writes while it delivers (claim, cursor, lease renewal, failure and
//!   retry, release), and the signing secrets and pending events it reads.
//!
//! Both are re-exported here, so callers name `storage::webhooks::…` whichever file holds the item.

mod delivery_state;
mod subscriptions;

pub use delivery_state::{
    CLAIM_PAGE, Claimed, SigningSecrets, claim, delivered, failed, pending_events, release, renew,
    signing_secrets,
};
pub use subscriptions::{
    BACKLOG_SCAN, Inserted, NewSubscription, SubscriptionRow, backlog, count, insert, list, remove,
    rotate_secret,
};
