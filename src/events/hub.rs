//! The wake-up of everything on this instance that waits for new events: long-polling feed readers and the webhook
//! dispatcher.
//!
//! One task per instance polls the position of the newest readable event (`storage::events::high_water`), every
//! poll interval while anyone waits, and at once when a request of this instance commits an event. Waiters watch
//! that position and read again when it moves. So N waiting requests cost one small query per interval, not N, and
//! an event committed by another instance is seen within one interval. The nudge after a local commit is a hint
//! that shortens the wait; nothing relies on it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::storage::Database;
use tokio::sync::{Notify, watch};

use crate::storage::events::{self, Position};

/// A handle on this instance's hub; cheap to clone. The polling task ends when the last handle is dropped.
#[derive(Clone)]
pub struct EventsHub {
    inner: Arc<Inner>,
}

struct Inner {
    high_water: watch::Sender<Position>,
    max_wait: Duration,
    waiters: AtomicUsize,
    nudge: Arc<Notify>,
}

impl EventsHub {
    /// Starts the polling task of this instance, on the current Tokio runtime. Feed readers may wait up to
    /// `max_wait` for an event.
    pub fn start(pool: Database, poll_interval: Duration, max_wait: Duration) -> EventsHub {
        let (high_water, _) = watch::channel(Position::START);
        let nudge = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            high_water,
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

    /// Registers a waiter; while it lives, the hub polls.
    pub fn waiter(&self) -> Waiter {
        self.inner.waiters.fetch_add(1, Ordering::Relaxed);
        Waiter {
            high_water: self.inner.high_water.subscribe(),
            inner: Arc::clone(&self.inner),
        }
    }
}

/// One reader waiting for new events.
pub struct Waiter {
    high_water: watch::Receiver<Position>,
    inner: Arc<Inner>,
}

impl Waiter {
    /// Marks the current position as seen. Call it before reading, so that an event readable after the read began
    /// makes [`Waiter::changed`] return at once.
    pub fn mark_seen(&mut self) {
        self.high_water.borrow_and_update();
    }

    /// Resolves when the newest readable event moved since the last [`Waiter::mark_seen`].
    pub async fn changed(&mut self) {
        if self.high_water.changed().await.is_err() {
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

/// The polling task. It holds the hub only weakly, so that dropping the last handle ends it.
async fn poll(inner: Weak<Inner>, nudge: Arc<Notify>, pool: Database, interval: Duration) {
    loop {
        // Woken early by a local commit, or at the interval.
        let _ = tokio::time::timeout(interval, nudge.notified()).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.waiters.load(Ordering::Relaxed) == 0 {
            continue;
        }
        match events::high_water(&pool).await {
            Ok(position) => {
                inner.high_water.send_if_modified(|current| {
                    let moved = *current != position;
                    *current = position;
                    moved
                });
            }
            Err(error) => {
                tracing::warn!(error = %error, "could not poll for new events; trying again in a second");
                drop(inner);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
