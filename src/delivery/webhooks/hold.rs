//! A claimed subscription as its holder keeps it: the lease, renewed by the statement that writes the cursor, and
//! those writes themselves, one at a time and off the delivery's path.
//!
//! One attempt at a time across instances rests on one rule: a holder starts a request only while the lease it last
//! saw confirmed outlasts that request by a wide margin ([`Hold::ensure`]). It reckons on its own clock from the
//! moment it *sent* the confirming statement (the claim, then each write); the database set the lease's end from its
//! own `now()`, which is later, so the reckoning errs early, never late. A holder that cannot confirm its lease in
//! time waits for a write before sending; one that finds the lease taken over stops.
//!
//! The cursor is written at most every `CURSOR_EVERY` and in the background, while the next events are sent: a
//! write per event would cost a commit per event, and waiting for one would put a commit between two events. Each
//! write renews the lease, so a holder of a steady stream never has to wait for one. An instance that dies before a
//! write sends the events delivered since the last one again (at least once allows it; `webhook-id` is stable).

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::storage::outbox::Position;
use crate::storage::webhooks;
use crate::storage::{Database, StorageError};

/// How often a holder writes its subscription's cursor at most.
pub(super) const CURSOR_EVERY: Duration = Duration::from_millis(100);

/// The longest since a confirmation of the lease that a holder still starts a request without a fresh one: two
/// seconds, or a quarter of the lease if that is shorter. The lease outlasts a request by ten seconds
/// (`config::EventsConfig::webhook_settings`), so a request started within this always ends before the lease does.
fn confirmed_within(lease: Duration) -> Duration {
    (lease / 4).min(Duration::from_secs(2))
}

/// Sleeps until `due` (a holder's [`Hold::write_due_at`]), or for ever when it is `None`.
pub(super) async fn sleep_until(due: Option<tokio::time::Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What a write answers: whether this instance still held the subscription.
type Write = JoinHandle<Result<bool, StorageError>>;

/// This instance's hold on one subscription.
pub(super) struct Hold {
    pool: Database,
    id: Uuid,
    owner: Uuid,
    lease: Duration,
    /// When the statement that last confirmed the lease was sent.
    confirmed_at: Instant,
    /// The last event delivered, and how many were delivered since the last write began.
    delivered: Position,
    unwritten: i64,
    /// When the last write began (the claim counts as one).
    last_write: Instant,
    /// The write running, with when it was sent.
    writing: Option<(Instant, Write)>,
}

impl Hold {
    /// The hold a claim gave: `claimed_at` is when the claim was sent.
    pub(super) fn new(
        pool: Database,
        id: Uuid,
        owner: Uuid,
        lease: Duration,
        cursor: Position,
        claimed_at: Instant,
    ) -> Self {
        Hold {
            pool,
            id,
            owner,
            lease,
            confirmed_at: claimed_at,
            delivered: cursor,
            unwritten: 0,
            last_write: claimed_at,
            writing: None,
        }
    }

    /// Records `count` more events delivered, the last at `position`, and starts writing the cursor if a write is
    /// due.
    pub(super) fn delivered(&mut self, position: Position, count: i64) {
        self.delivered = position;
        self.unwritten += count;
        self.write_if_due();
    }

    /// Starts writing the cursor if events wait to be written, none is being written and the last write began
    /// `CURSOR_EVERY` ago.
    pub(super) fn write_if_due(&mut self) {
        if self.unwritten > 0 && self.writing.is_none() && self.last_write.elapsed() >= CURSOR_EVERY
        {
            self.start_write(Some(self.lease));
        }
    }

    /// When a write will fall due if nothing else happens (for a holder waiting for events); `None` if none will.
    pub(super) fn write_due_at(&self) -> Option<tokio::time::Instant> {
        (self.unwritten > 0 && self.writing.is_none())
            .then(|| tokio::time::Instant::from_std(self.last_write + CURSOR_EVERY))
    }

    /// Sends the cursor and the lease (renewed for `hold`, or given up when `None`) in one statement, in the
    /// background; a lease without events to write is renewed alone.
    fn start_write(&mut self, hold: Option<Duration>) {
        let (pool, id, owner) = (self.pool.clone(), self.id, self.owner);
        let (position, count) = (self.delivered, self.unwritten);
        let sent = Instant::now();
        let write = tokio::spawn(async move {
            match (count, hold) {
                (0, Some(hold)) => webhooks::renew(&pool, id, owner, hold).await,
                (0, None) => webhooks::release(&pool, id, owner).await.map(|()| true),
                _ => webhooks::delivered(&pool, id, owner, position, count, hold).await,
            }
        });
        self.unwritten = 0;
        self.last_write = sent;
        self.writing = Some((sent, write));
    }

    /// Waits for the running write, if any. `false`: the subscription was taken over, so the holder stops.
    pub(super) async fn settle(&mut self) -> Result<bool, StorageError> {
        let Some((sent, write)) = self.writing.take() else {
            return Ok(true);
        };
        // The write's task is never aborted, so it either answers or panicked; a panic goes on up.
        let held = write
            .await
            .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))?;
        if held {
            self.confirmed_at = self.confirmed_at.max(sent);
        }
        Ok(held)
    }

    /// Takes the running write's answer if it has come, without waiting. `false` as for [`Hold::settle`].
    pub(super) async fn check(&mut self) -> Result<bool, StorageError> {
        match &self.writing {
            Some((_, write)) if write.is_finished() => self.settle().await,
            _ => Ok(true),
        }
    }

    /// Resolves when the running write answers (never when none runs), with its answer as for [`Hold::settle`].
    pub(super) async fn written(&mut self) -> Result<bool, StorageError> {
        if self.writing.is_none() {
            std::future::pending::<()>().await;
        }
        self.settle().await
    }

    /// Makes sure the lease outlasts the next request, renewing it first (and waiting for that) when its last
    /// confirmation is too old. `false`: the subscription was taken over, so the holder must not send.
    pub(super) async fn ensure(&mut self) -> Result<bool, StorageError> {
        let fresh = |hold: &Hold| hold.confirmed_at.elapsed() < confirmed_within(hold.lease);
        if fresh(self) {
            return Ok(true);
        }
        if !self.settle().await? {
            return Ok(false);
        }
        if fresh(self) {
            return Ok(true);
        }
        self.start_write(Some(self.lease));
        self.settle().await
    }

    /// Writes what is delivered and not written yet, and waits for it (before recording a failure, which is of the
    /// next event). `false` as for [`Hold::settle`].
    pub(super) async fn flush(&mut self) -> Result<bool, StorageError> {
        if !self.settle().await? {
            return Ok(false);
        }
        if self.unwritten > 0 {
            self.start_write(Some(self.lease));
        }
        self.settle().await
    }

    /// Gives the subscription up so that any instance may take it at once: the cursor left to write and the release
    /// in one statement. Nothing to give up if it was taken over meanwhile.
    pub(super) async fn release(mut self) -> Result<(), StorageError> {
        if self.settle().await? {
            self.start_write(None);
            self.settle().await?;
        }
        Ok(())
    }
}
