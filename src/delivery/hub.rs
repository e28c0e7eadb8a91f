//! The wake-up of everything on this instance that waits for new events: long-polling feed readers and the webhook
//! dispatcher.
//!
//! One task per instance polls the readable bound (`storage::outbox::newly_readable`), every poll interval while
//! anyone waits, and soon after a request of this instance commits an event (at most one poll every `LEAST_GAP`,
//! however many commits). Each poll also names the tenants whose events became readable since the previous one, so
//! a feed reader wakes, and reads again, only for its own tenant's events (docs/design.md §17): N waiting requests cost
//! one small query per interval, not N, and one tenant's events never make another tenant's readers query Postgres.
//! The webhook dispatcher, which delivers every tenant's events, wakes for any tenant's. An event committed by
//! another instance is seen within one interval. The nudge after a local commit is a hint that shortens the wait;
//! nothing relies on it.
//!
//! The hub also hands each waiter the readable bound it found, and the waiter reads no lower than that: its own
//! read, a moment later on another connection, can find a lower bound than the hub's (see `storage::outbox`), and a
//! reader that then read nothing would wait for the next event of its tenant, which may not come for the rest of its
//! long poll. The hub keeps the highest bound it found, so what it publishes never moves back.
//!
//! When the hub cannot say whose events are new (its first poll, the first after nobody waited, the first after an
//! error), it wakes every waiter once: a reader that registered before that poll read with a bound the hub did not
//! know, so only a read of its own can tell it whether it missed something.
//!
//! Feed readers are counted per client and per instance (`FeedCaps`, `crate::delivery::feed_waiters`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::storage::Database;
use tokio::sync::{Notify, watch};

use super::feed_waiters::{FeedCaps, FeedWaiters, Refused, Registration};
use crate::metrics::FeedCounts;
use crate::storage::outbox;

/// A handle on this instance's hub; cheap to clone. The polling task ends when the last handle is dropped.
#[derive(Clone)]
pub struct EventsHub {
    inner: Arc<Inner>,
}

struct Inner {
    /// The highest readable bound found; changed (and its waiters woken) when any tenant's events became readable.
    readable: watch::Sender<u64>,
    max_wait: Duration,
    /// Every waiter, of the feed or the dispatcher: while there are any, the hub polls.
    waiters: AtomicUsize,
    nudge: Arc<Notify>,
    feed: FeedWaiters,
}

impl EventsHub {
    /// Starts the polling task of this instance, on the current Tokio runtime, with the default caps on feed
    /// readers. Feed readers may wait up to `max_wait` for an event.
    pub fn start(pool: Database, poll_interval: Duration, max_wait: Duration) -> EventsHub {
        Self::start_with_caps(pool, poll_interval, max_wait, FeedCaps::default())
    }

    /// As [`EventsHub::start`], with at most `caps` feed readers waiting at once.
    pub fn start_with_caps(
        pool: Database,
        poll_interval: Duration,
        max_wait: Duration,
        caps: FeedCaps,
    ) -> EventsHub {
        let (readable, _) = watch::channel(0);
        let nudge = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            readable,
            max_wait,
            waiters: AtomicUsize::new(0),
            nudge: Arc::clone(&nudge),
            feed: FeedWaiters::new(caps),
        });
        tokio::spawn(poll(Arc::downgrade(&inner), nudge, pool, poll_interval));
        EventsHub { inner }
    }

    /// The longest a feed reader may wait (FEED_MAX_WAIT_SECS).
    pub fn max_wait(&self) -> Duration {
        self.inner.max_wait
    }

    /// The highest readable bound found, for a read that does not wait (the `floor` of `storage::outbox::page`).
    pub fn readable_below(&self) -> u64 {
        *self.inner.readable.borrow()
    }

    /// What the feed's readers count now and have counted (`/metrics`).
    pub fn feed_counts(&self) -> FeedCounts {
        self.inner.feed.counts()
    }

    /// Says that this instance just committed an event, so waiters need not wait for the next poll.
    pub fn committed(&self) {
        if self.inner.waiters.load(Ordering::Relaxed) > 0 {
            self.inner.nudge.notify_one();
        }
    }

    /// Registers a feed reader of `client` in `tenant`, unless the client or the instance has as many waiting as
    /// its cap allows (docs/design.md §17). The slot is given back when the [`FeedWaiter`] is dropped: when the long
    /// poll ends, or when the request is dropped because its client hung up.
    pub fn feed_waiter(&self, tenant: &str, client: &str) -> Result<FeedWaiter, Refused> {
        let registration = self.inner.feed.register(tenant, client)?;
        self.inner.waiters.fetch_add(1, Ordering::Relaxed);
        Ok(FeedWaiter {
            registration,
            inner: Arc::clone(&self.inner),
        })
    }

    /// Reads with `read` (given the floor to read below, see [`FeedWaiter::mark_seen`]) until it finds something
    /// or `wait` has passed, reading again each time an event of the waiter's tenant becomes readable: a long poll.
    pub async fn read_or_wait<T, E, F, Fut>(
        &self,
        mut waiter: FeedWaiter,
        wait: Duration,
        mut read: F,
    ) -> Result<Vec<T>, E>
    where
        F: FnMut(u64) -> Fut,
        Fut: Future<Output = Result<Vec<T>, E>>,
    {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Seen before reading: an event that becomes readable during the read wakes the wait below at once.
            let found = read(waiter.mark_seen()).await?;
            if !found.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(found);
            }
            if tokio::time::timeout_at(deadline, waiter.changed())
                .await
                .is_err()
            {
                return Ok(Vec::new());
            }
            self.inner.feed.woken();
        }
    }

    /// Registers a waiter for any tenant's events (the webhook dispatcher's); while it lives, the hub polls.
    pub fn waiter(&self) -> Waiter {
        self.inner.waiters.fetch_add(1, Ordering::Relaxed);
        Waiter {
            readable: self.inner.readable.subscribe(),
            inner: Arc::clone(&self.inner),
        }
    }
}

/// One waiter for any tenant's new events.
pub struct Waiter {
    readable: watch::Receiver<u64>,
    inner: Arc<Inner>,
}

impl Waiter {
    /// Marks the newest readable events as seen, and returns the bound to read below at least (the `floor` of
    /// `storage::outbox::page`). Call it before reading, so that an event readable after the read began makes
    /// [`Waiter::changed`] return at once, and read with the floor it returns, so that the read sees every event
    /// the hub found readable.
    pub fn mark_seen(&mut self) -> u64 {
        *self.readable.borrow_and_update()
    }

    /// Resolves when events became readable since the last [`Waiter::mark_seen`].
    pub async fn changed(&mut self) {
        if self.readable.changed().await.is_err() {
            // The hub is gone (the service is stopping): nothing will ever move again.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.inner.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One feed reader waiting for its tenant's new events, holding a slot of its client's and the instance's cap.
pub struct FeedWaiter {
    registration: Registration,
    inner: Arc<Inner>,
}

impl FeedWaiter {
    /// As [`Waiter::mark_seen`], for the waiter's tenant. The tenant's wake-up is marked seen before the bound is
    /// read, and the hub publishes the bound before it wakes a tenant, so the bound returned covers every wake-up
    /// marked seen.
    pub fn mark_seen(&mut self) -> u64 {
        self.registration.mark_seen();
        *self.inner.readable.borrow()
    }

    /// Resolves when events of the waiter's tenant became readable since the last [`FeedWaiter::mark_seen`].
    pub async fn changed(&mut self) {
        self.registration.changed().await;
    }
}

impl Drop for FeedWaiter {
    fn drop(&mut self) {
        self.inner.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The least time between two polls. Every local commit nudges the poller, so under load a poll per decision would
/// follow, and each reads the snapshot and `pg_stat_activity` (`events_readable_below`): measured at 1 to 1.8 ms of
/// Postgres CPU per decision while a subscription was held (BENCHMARKS.md), more than the decision's own statements.
/// Nudges that come within the gap are answered together by the next poll, a few milliseconds later.
const LEAST_GAP: Duration = Duration::from_millis(10);

/// The polling task. It holds the hub only weakly, so that dropping the last handle ends it.
async fn poll(inner: Weak<Inner>, nudge: Arc<Notify>, pool: Database, interval: Duration) {
    let gap = LEAST_GAP.min(interval);
    // The bound of the previous poll, below which every tenant's readers were told of their events; `None` when the
    // hub cannot say (see the module's notes).
    let mut told_below: Option<u64> = None;
    loop {
        tokio::time::sleep(gap).await;
        // Woken early by a local commit, or at the interval.
        let _ = tokio::time::timeout(interval, nudge.notified()).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.waiters.load(Ordering::Relaxed) == 0 {
            // Nobody was told anything; a range since the last bound could span hours of events.
            told_below = None;
            continue;
        }
        let floor = *inner.readable.borrow();
        // Without a previous bound nothing is scanned (no xid is at or above the greatest): everyone wakes instead.
        let since = told_below.unwrap_or(u64::MAX);
        match outbox::newly_readable(&pool, floor, since).await {
            Ok(found) => {
                let everyone = told_below.is_none();
                told_below = Some(found.below);
                // The bound first, then the wake-ups: a reader that sees its wake-up sees the bound (FeedWaiter).
                inner.readable.send_if_modified(|current| {
                    *current = found.below;
                    everyone || !found.tenants.is_empty()
                });
                if everyone {
                    inner.feed.wake_all();
                } else {
                    inner.feed.wake(&found.tenants);
                }
            }
            Err(error) => {
                tracing::warn!(error = %error, "could not poll for new events; trying again in a second");
                // A bound is true of the server that gave it; after an error (perhaps a failover to another
                // server) start again from the next read's own, and wake everyone once it is known.
                inner.readable.send_if_modified(|current| {
                    *current = 0;
                    false
                });
                told_below = None;
                drop(inner);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
