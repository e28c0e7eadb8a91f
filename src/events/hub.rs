//! The wake-up of everything on this instance that waits for new events: long-polling feed readers and the webhook
//! dispatcher.
//!
//! One task per instance polls the position of the newest readable event (`storage::events::readable`), every
//! poll interval while anyone waits, and soon after a request of this instance commits an event (at most one poll
//! every `LEAST_GAP`, however many commits). Waiters watch
//! that position and read again when it moves. So N waiting requests cost one small query per interval, not N, and
//! an event committed by another instance is seen within one interval. The nudge after a local commit is a hint
//! that shortens the wait; nothing relies on it.
//!
//! The hub also hands each waiter the readable bound it found (`storage::events::Readable`), and the waiter reads
//! no lower than that: its own read, a moment later on another connection, can find a lower bound than the hub's
//! (see `storage::events`), and a reader that then read nothing would wait for the next change of the newest
//! event, which may not come for the rest of its long poll. The hub keeps the highest bound it found, so what it
//! publishes never moves back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::storage::Database;
use tokio::sync::{Notify, watch};

use crate::storage::events::{self, Readable};

/// A handle on this instance's hub; cheap to clone. The polling task ends when the last handle is dropped.
#[derive(Clone)]
pub struct EventsHub {
    inner: Arc<Inner>,
}

struct Inner {
    readable: watch::Sender<Readable>,
    max_wait: Duration,
    waiters: AtomicUsize,
    nudge: Arc<Notify>,
}

impl EventsHub {
    /// Starts the polling task of this instance, on the current Tokio runtime. Feed readers may wait up to
    /// `max_wait` for an event.
    pub fn start(pool: Database, poll_interval: Duration, max_wait: Duration) -> EventsHub {
        let (readable, _) = watch::channel(Readable::default());
        let nudge = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            readable,
            max_wait,
            waiters: AtomicUsize::new(0),
            nudge: Arc::clone(&nudge),
        });
        tokio::spawn(poll(Arc::downgrade(&inner), nudge, pool, poll_interval));
        EventsHub { inner }
    }

    /// The longest a feed reader may wait (FEED_MAX_WAIT_SECS).
    pub fn max_wait(&self) -> Duration {
        self.inner.max_wait
    }

    /// Says that this instance just committed an event, so waiters need not wait for the next poll.
    pub fn committed(&self) {
        if self.inner.waiters.load(Ordering::Relaxed) > 0 {
            self.inner.nudge.notify_one();
        }
    }

    /// Reads with `read` (given the floor to read below, see [`Waiter::mark_seen`]) until it finds something or
    /// `wait` has passed, reading again each time the newest readable event moves: a long poll.
    pub async fn read_or_wait<T, E, F, Fut>(&self, wait: Duration, mut read: F) -> Result<Vec<T>, E>
    where
        F: FnMut(u64) -> Fut,
        Fut: Future<Output = Result<Vec<T>, E>>,
    {
        let deadline = tokio::time::Instant::now() + wait;
        let mut waiter = self.waiter();
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
        }
    }

    /// Registers a waiter; while it lives, the hub polls.
    pub fn waiter(&self) -> Waiter {
        self.inner.waiters.fetch_add(1, Ordering::Relaxed);
        Waiter {
            readable: self.inner.readable.subscribe(),
            inner: Arc::clone(&self.inner),
        }
    }
}

/// One reader waiting for new events.
pub struct Waiter {
    readable: watch::Receiver<Readable>,
    inner: Arc<Inner>,
}

impl Waiter {
    /// Marks the newest readable event as seen, and returns the bound to read below at least (the `floor` of
    /// `storage::events::page`). Call it before reading, so that an event readable after the read began makes
    /// [`Waiter::changed`] return at once, and read with the floor it returns, so that the read sees every event
    /// the hub found readable.
    pub fn mark_seen(&mut self) -> u64 {
        self.readable.borrow_and_update().below
    }

    /// Resolves when the newest readable event moved since the last [`Waiter::mark_seen`].
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

/// The least time between two polls. Every local commit nudges the poller, so under load a poll per decision would
/// follow, and each reads the snapshot and `pg_stat_activity` (`events_readable_below`): measured at 1 to 1.8 ms of
/// Postgres CPU per decision while a subscription was held (BENCHMARKS.md), more than the decision's own statements.
/// Nudges that come within the gap are answered together by the next poll, a few milliseconds later.
const LEAST_GAP: Duration = Duration::from_millis(10);

/// The polling task. It holds the hub only weakly, so that dropping the last handle ends it.
async fn poll(inner: Weak<Inner>, nudge: Arc<Notify>, pool: Database, interval: Duration) {
    let gap = LEAST_GAP.min(interval);
    loop {
        tokio::time::sleep(gap).await;
        // Woken early by a local commit, or at the interval.
        let _ = tokio::time::timeout(interval, nudge.notified()).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.waiters.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let floor = inner.readable.borrow().below;
        match events::readable(&pool, floor).await {
            Ok(found) => {
                // Waiters wake only when the newest event moves; a higher bound alone is kept for the next reads.
                inner.readable.send_if_modified(|current| {
                    let moved = current.newest != found.newest;
                    *current = found;
                    moved
                });
            }
            Err(error) => {
                tracing::warn!(error = %error, "could not poll for new events; trying again in a second");
                // A bound is true of the server that gave it; after an error (perhaps a failover to another
                // server) start again from the next read's own.
                inner.readable.send_if_modified(|current| {
                    current.below = 0;
                    false
                });
                drop(inner);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
