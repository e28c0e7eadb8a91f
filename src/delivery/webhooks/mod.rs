//! Webhook delivery: every instance runs a dispatcher that claims subscriptions with events to send and sends
//! them, signed (`sign`), under the SSRF guard (`ssrf`) and the request limits (`deliver`), retried with backoff
//! (`retry`). A subscription is held by one instance at a time, which sends several of its events at once but never
//! two of one run, so each run's events arrive in order (`window`).
//!
//! A claimed subscription stays with its delivery task while events keep coming: the task sends the next events as
//! soon as the events hub says they are readable, writes the cursor with the lease's renewal in one statement in the
//! background (`hold`), and gives the subscription up only after a short quiet spell (`task::IDLE_HOLD`), on
//! shutdown, or on a failure (then retried with backoff). So a steady stream costs one read per wake-up and a write per
//! `hold::CURSOR_EVERY`, and no commit stands between an event and its delivery.
//!
//! Deliveries never share anything with decisions but the database: a slow or dead receiver holds one delivery
//! task of one instance for at most the request timeout, never a decision, and other subscriptions are sent by
//! other tasks.
//!
//! Slots are shared between tenants (docs/design.md §17): claims take tenants in turns (`storage::webhooks::claim`),
//! and a task that has held its subscription for `Settings::max_hold` while every slot of its instance is taken gives
//! it up once its requests in flight have answered, so a tenant whose many subscriptions always have events waiting
//! cannot keep the slots from another's.
//!
//! This file is the dispatcher: it claims subscriptions while this instance has free slots and starts a delivery
//! task for each (`task`); both read their `Settings` from `settings`.

pub mod deliver;
mod hold;
pub mod lookup;
pub mod retry;
mod settings;
pub mod sign;
pub mod ssrf;
pub mod subscription;
mod task;
mod window;

pub use settings::Settings;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::storage::Database;
use tokio::sync::{Notify, Semaphore, watch};
use uuid::Uuid;

use super::EventsHub;
use crate::storage::webhooks;
use hold::Hold;
use task::Delivery;

/// How long a stopping dispatcher waits for its delivery tasks to give their subscriptions up. One in the middle of
/// a request is left behind: its lease runs out and another instance sends that event again.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Starts this instance's dispatcher; it stops claiming when `shutdown` turns true (or its sender is dropped), and
/// its delivery tasks give their subscriptions up.
pub fn spawn(
    pool: Database,
    hub: EventsHub,
    settings: Settings,
    mut shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let client = deliver::client(&settings.limits)?;
    let instance = Uuid::new_v4();
    Ok(tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(settings.concurrency));
        let finished = Arc::new(Notify::new());
        let mut waiter = None;
        // How many subscriptions exist, looked up at start and at each sweep, not at every new event.
        let mut subscriptions = 0i64;
        let mut looked_up: Option<Instant> = None;
        loop {
            let sweep = looked_up.is_none_or(|at| at.elapsed() >= settings.sweep_interval);
            if sweep {
                match webhooks::count(&pool).await {
                    Ok(count) => subscriptions = count,
                    Err(error) => {
                        tracing::warn!(error = %error, "could not look for webhook subscriptions")
                    }
                }
                looked_up = Some(Instant::now());
            }
            // Only an instance with subscriptions to serve keeps the hub polling for it.
            if subscriptions == 0 {
                waiter = None;
            }
            let floor =
                (subscriptions > 0).then(|| waiter.get_or_insert_with(|| hub.waiter()).mark_seen());
            // A subscription held here is followed by its own task; claim when some may be held by nobody (the
            // sweep claims anyway: retries that came due, subscriptions added since the last look).
            let held = settings.concurrency - slots.available_permits();
            if let Some(floor) = floor
                && (sweep || (held as i64) < subscriptions)
            {
                let start = Start {
                    pool: &pool,
                    client: &client,
                    settings: &settings,
                    hub: &hub,
                    shutdown: &shutdown,
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
                _ = shutdown.changed() => {
                    let all = u32::try_from(settings.concurrency).unwrap_or(u32::MAX);
                    let _ = tokio::time::timeout(STOP_WAIT, slots.acquire_many(all)).await;
                    return;
                }
            }
        }
    }))
}

/// What starting deliveries needs, in one place.
struct Start<'a> {
    pool: &'a Database,
    client: &'a reqwest::Client,
    settings: &'a Settings,
    hub: &'a EventsHub,
    shutdown: &'a watch::Receiver<bool>,
    instance: Uuid,
    /// The hub's readable bound when this round began (`storage::outbox::page` says why reads take one).
    floor: u64,
}

/// Claims as many due subscriptions as there are free slots and starts a delivery task for each.
async fn claim_and_start(start: &Start<'_>, slots: &Arc<Semaphore>, finished: &Arc<Notify>) {
    let free = slots.available_permits();
    if free == 0 {
        return;
    }
    let (pool, instance) = (start.pool, start.instance);
    let claimed_at = Instant::now();
    let claimed = match webhooks::claim(
        pool,
        pool.sealer(),
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
        let hold = Hold::new(
            pool.clone(),
            subscription.id,
            instance,
            start.settings.lease,
            subscription.cursor,
            claimed_at,
        );
        let delivery = Delivery {
            pool: pool.clone(),
            client: start.client.clone(),
            settings: start.settings.clone(),
            hub: start.hub.clone(),
            shutdown: start.shutdown.clone(),
            slots: Arc::clone(slots),
            instance,
            floor: start.floor,
            subscription,
        };
        let finished = Arc::clone(finished);
        tokio::spawn(async move {
            let id = delivery.subscription.id;
            if let Err(error) = delivery.run(hold).await {
                // The lease runs out and the subscription is taken again; nothing is lost.
                tracing::warn!(subscription = %id, error = %error, "webhook delivery stopped");
            }
            drop(slot);
            finished.notify_one();
        });
    }
}
