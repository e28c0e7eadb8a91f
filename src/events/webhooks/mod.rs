//! Webhook delivery: every instance runs a dispatcher that claims subscriptions with events to send and sends
//! them, one subscription's events one at a time and in order, signed (`sign`), under the SSRF guard (`ssrf`) and
//! the request limits (`deliver`), retried with backoff (`retry`).
//!
//! Deliveries never share anything with decisions but the database: a slow or dead receiver holds one delivery
//! task of one instance for at most the request timeout, never a decision, and other subscriptions are sent by
//! other tasks.

pub mod deliver;
pub mod retry;
pub mod sign;
pub mod ssrf;
pub mod subscription;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::storage::Database;
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

use super::{Envelope, EventsHub};
use crate::metrics;
use crate::storage::events::Position;
use crate::storage::webhooks::{self, Claimed};

/// How deliveries run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Subscriptions this instance delivers at once.
    pub concurrency: usize,
    /// How long a claimed subscription is held without news from its holder; longer than one request.
    pub lease: Duration,
    pub limits: deliver::Limits,
    /// First wait after a failure; it doubles with each further failure, up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long deliveries may fail before the subscription is marked `failing` (it is still retried, every
    /// `backoff_max` at most, so a receiver that comes back gets everything).
    pub retry_window: Duration,
    /// How often the dispatcher looks for retries that came due, besides being woken by new events.
    pub sweep_interval: Duration,
}

/// Events one round of a subscription reads at a time.
const BATCH: i64 = 100;

/// How often a delivering instance writes its subscription's cursor at most (see `deliver_subscription`).
const CURSOR_EVERY: Duration = Duration::from_millis(100);

/// Starts this instance's dispatcher; it stops claiming when `shutdown` turns true. Deliveries it started run
/// on; one cut short by the process ending is sent again by another instance once its lease runs out.
pub fn spawn(
    pool: Database,
    hub: EventsHub,
    settings: Settings,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let client = deliver::client(&settings.limits)?;
    let instance = Uuid::new_v4();
    Ok(tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(settings.concurrency));
        let finished = Arc::new(Notify::new());
        let mut waiter = None;
        loop {
            // Only an instance with subscriptions to serve keeps the hub polling for it.
            let mut floor = None;
            match webhooks::any(&pool).await {
                Ok(true) => {
                    floor = Some(waiter.get_or_insert_with(|| hub.waiter()).mark_seen());
                }
                Ok(false) => waiter = None,
                Err(error) => {
                    tracing::warn!(error = %error, "could not look for webhook subscriptions")
                }
            }
            if let Some(floor) = floor {
                let start = Start {
                    pool: &pool,
                    client: &client,
                    settings: &settings,
                    instance,
                    floor,
                };
                claim_and_start(&start, &slots, &finished).await;
            }
            let new_events = async {
                match waiter.as_mut() {
                    Some(waiter) => waiter.changed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = new_events => {}
                () = finished.notified() => {}
                () = tokio::time::sleep(settings.sweep_interval) => {}
                _ = shutdown.changed() => return,
            }
        }
    }))
}

/// What starting deliveries needs, in one place.
struct Start<'a> {
    pool: &'a Database,
    client: &'a reqwest::Client,
    settings: &'a Settings,
    instance: Uuid,
    /// The hub's readable bound when this round began (`storage::events::page` says why reads take one).
    floor: u64,
}

/// Claims as many due subscriptions as there are free slots and starts a delivery task for each.
async fn claim_and_start(start: &Start<'_>, slots: &Arc<Semaphore>, finished: &Arc<Notify>) {
    let free = slots.available_permits();
    if free == 0 {
        return;
    }
    let (pool, instance) = (start.pool, start.instance);
    let claimed = match webhooks::claim(
        pool,
        instance,
        start.settings.lease,
        start.floor,
        free as i64,
    )
    .await
    {
        Ok(claimed) => claimed,
        Err(error) => {
            tracing::warn!(error = %error, "could not claim webhook subscriptions");
            return;
        }
    };
    for subscription in claimed {
        let Ok(slot) = Arc::clone(slots).try_acquire_owned() else {
            // Cannot happen (we claimed at most `free`), but a claimed subscription must not stay held.
            let _ = webhooks::release(pool, subscription.id, instance).await;
            continue;
        };
        let delivery = Delivery {
            pool: pool.clone(),
            client: start.client.clone(),
            settings: start.settings.clone(),
            instance,
            floor: start.floor,
            subscription,
        };
        let finished = Arc::clone(finished);
        tokio::spawn(async move {
            let id = delivery.subscription.id;
            if let Err(error) = delivery.run().await {
                // The lease runs out and the subscription is taken again; nothing is lost.
                tracing::warn!(subscription = %id, error = %error, "webhook delivery stopped");
            }
            drop(slot);
            finished.notify_one();
        });
    }
}

/// One claimed subscription being delivered by this instance.
struct Delivery {
    pool: Database,
    client: reqwest::Client,
    settings: Settings,
    instance: Uuid,
    floor: u64,
    subscription: Claimed,
}

impl Delivery {
    /// Sends the subscription's pending events in order until none is left, one fails, or the lease is lost.
    ///
    /// The cursor moves after every event delivered, but is written at most every `CURSOR_EVERY` (and before a
    /// wait or a failure): a write per event would cost a commit per event and cap one subscription's rate at the
    /// disk's flushes. An instance that dies in between sends those events again, which at-least-once allows; each
    /// write also renews the lease, and a lease outlasts one request by far more than `CURSOR_EVERY`.
    async fn run(self) -> Result<(), crate::storage::StorageError> {
        let (pool, settings, subscription) = (&self.pool, &self.settings, &self.subscription);
        let mut cursor = subscription.cursor;
        let mut attempts = u32::try_from(subscription.attempts).unwrap_or(0);
        // Delivered but not yet written: how many, and since when.
        let mut unwritten = 0i64;
        let mut written_at = Instant::now();
        loop {
            let events =
                webhooks::pending_events(pool, subscription, cursor, self.floor, BATCH).await?;
            if events.is_empty() {
                if !self.flush(cursor, &mut unwritten).await? {
                    return Ok(());
                }
                return webhooks::release(pool, subscription.id, self.instance).await;
            }
            for event in &events {
                let envelope = Envelope::of(event);
                let body = serde_json::to_vec(&envelope).map_err(|error| {
                    crate::storage::StorageError::Corrupt(format!(
                        "event {}: {error}",
                        event.position.id
                    ))
                })?;
                let timestamp = chrono::Utc::now().timestamp();
                let outcome = match sign::sign(&subscription.secret, &envelope.id, timestamp, &body)
                {
                    Ok(signed) => {
                        let started = Instant::now();
                        let outcome = deliver::post(
                            &self.client,
                            &settings.limits,
                            &subscription.url,
                            &signed,
                            body,
                        )
                        .await;
                        metrics::webhook_attempt(outcome.is_ok(), started.elapsed());
                        outcome.map_err(|error| error.to_string())
                    }
                    Err(error) => Err(error),
                };
                if let Err(error) = outcome {
                    // After deliveries in this round, this failure is the first since a success.
                    let attempts = if unwritten > 0 { 1 } else { attempts + 1 };
                    if !self.flush(cursor, &mut unwritten).await? {
                        return Ok(());
                    }
                    let retry_in = retry::backoff(
                        attempts,
                        settings.backoff_base,
                        settings.backoff_max,
                        retry::jitter(),
                    );
                    tracing::info!(subscription = %subscription.id, event = %envelope.id, attempts,
                        retry_in_ms = retry_in.as_millis() as u64, error = %error, "webhook delivery failed");
                    return webhooks::failed(
                        pool,
                        subscription.id,
                        self.instance,
                        &error,
                        retry_in,
                        settings.retry_window,
                    )
                    .await;
                }
                let lag = (chrono::Utc::now() - event.created_at)
                    .to_std()
                    .unwrap_or_default();
                metrics::webhook_delivered(lag);
                cursor = event.position;
                attempts = 0;
                unwritten += 1;
                if written_at.elapsed() >= CURSOR_EVERY {
                    if !self.flush(cursor, &mut unwritten).await? {
                        tracing::warn!(subscription = %subscription.id, "another instance took the subscription over");
                        return Ok(());
                    }
                    written_at = Instant::now();
                }
            }
        }
    }

    /// Writes the cursor past the `unwritten` events delivered since the last write (nothing when there are none),
    /// renewing the lease. `false`: another instance took the subscription over, so this one stops.
    async fn flush(
        &self,
        cursor: Position,
        unwritten: &mut i64,
    ) -> Result<bool, crate::storage::StorageError> {
        if *unwritten == 0 {
            return Ok(true);
        }
        let held = webhooks::delivered(
            &self.pool,
            self.subscription.id,
            self.instance,
            cursor,
            *unwritten,
            self.settings.lease,
        )
        .await?;
        *unwritten = 0;
        Ok(held)
    }
}
