//! The delivery task of one claimed subscription: it reads the subscription's events as the hub says they become
//! readable, sends them several at once but never two of one run (`window`), takes in each answer, writes the cursor
//! with the lease's renewal (`hold`), and gives the subscription up after a quiet spell, on shutdown, to yield its
//! slot, or on a failure (recorded with its retry). The dispatcher (`super`) claims subscriptions and starts one
//! task for each.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::hold::{self, Hold};
use super::settings::Settings;
use super::window::Window;
use super::{deliver, retry, sign};
use crate::delivery::Envelope;
use crate::delivery::hub::{EventsHub, Waiter};
use crate::metrics;
use crate::storage::Database;
use crate::storage::outbox::{Position, StoredEvent};
use crate::storage::webhooks::{self, Claimed};

/// Events one read of a subscription takes at a time.
const BATCH: i64 = 100;

/// How long a delivery task keeps its subscription once no event is left, waiting for the next one, before giving
/// it up. Short: it holds one of the instance's slots meanwhile (and gives it up at once when every slot is taken),
/// and well within the time a lease stays confirmed (`hold`), so that the next event needs no renewal first.
const IDLE_HOLD: Duration = Duration::from_secs(1);

/// One claimed subscription being delivered by this instance.
pub(super) struct Delivery {
    pub(super) pool: Database,
    pub(super) client: reqwest::Client,
    pub(super) settings: Settings,
    pub(super) hub: EventsHub,
    pub(super) shutdown: watch::Receiver<bool>,
    /// This instance's delivery slots (one of which this delivery holds).
    pub(super) slots: Arc<Semaphore>,
    pub(super) instance: Uuid,
    /// The hub's readable bound when the subscription was claimed; it serves the first read only (`run`).
    pub(super) floor: u64,
    pub(super) subscription: Claimed,
}

/// A request's answer, as its task returns it.
struct Sent {
    position: Position,
    /// The event's public id (`webhook-id`), for the log.
    id: String,
    created_at: chrono::DateTime<chrono::Utc>,
    outcome: Result<(), String>,
}

/// What ended a delivery task's wait for events.
enum Woken {
    /// New events may be readable: read again.
    Events,
    /// Give the subscription up.
    Release,
    /// The subscription is no longer this instance's.
    Lost,
}

impl Delivery {
    /// Sends the subscription's events, each as soon as the hub says it is readable, several at once but never two
    /// of one run (`window`), until the subscription is given up (a quiet spell, a failure, shutdown) or taken over.
    pub(super) async fn run(mut self, mut hold: Hold) -> Result<(), crate::storage::StorageError> {
        let mut waiter = self.hub.waiter();
        let mut window = Window::new(
            self.subscription.cursor,
            self.settings.requests_per_subscription,
        );
        let mut sending: JoinSet<Sent> = JoinSet::new();
        let mut attempts = u32::try_from(self.subscription.attempts).unwrap_or(0);
        let mut failure: Option<String> = None;
        // Whether events may be readable past those read: a read that filled its page leaves more, and the hub says
        // when new ones become readable. Reading only then keeps reads to one per page or wake-up, not one per
        // answer.
        let mut unread = true;
        let held_since = Instant::now();
        loop {
            if self.stopping() || self.yields(held_since) {
                return self.stop(window, sending, hold, failure, attempts).await;
            }
            if !hold.check().await? {
                return self.lost();
            }
            if let Some(error) = &failure
                && window.sending() == 0
            {
                // Everything in flight has answered, and the cursor is past what was delivered before the failure.
                return self.failed(hold, attempts + 1, error).await;
            }
            // Read on while the window has room, something may be unread and nothing failed. Seen before reading:
            // an event that becomes readable during the read ends the wait below at once. The claim's bound serves
            // the first read only: the hub's own may have moved back since (after a database error, perhaps a
            // failover, it starts again from 0), and a held subscription must follow it.
            let room = BATCH - window.len() as i64;
            if failure.is_none() && unread && room > 0 {
                let floor = waiter.mark_seen().max(std::mem::take(&mut self.floor));
                let events = webhooks::pending_events(
                    &self.pool,
                    &self.subscription,
                    window.read_up_to(),
                    floor,
                    room,
                )
                .await?;
                unread = events.len() as i64 == room;
                window.push(events);
            }
            if failure.is_none() {
                let mut secrets_read = false;
                while let Some(event) = window.next_to_send() {
                    if !hold.check().await? || !hold.ensure().await? {
                        return self.lost();
                    }
                    // A rotation may have been committed on any instance since the claim: each batch is signed
                    // with the secrets as they stand when it is sent, not as they were when it was claimed.
                    if !secrets_read {
                        if !self.read_secrets().await? {
                            return self.lost();
                        }
                        secrets_read = true;
                    }
                    sending.spawn(self.send(event)?);
                }
            }
            if window.is_empty() {
                match self.wait(&mut waiter, &mut hold).await? {
                    Woken::Events => {
                        unread = true;
                        continue;
                    }
                    Woken::Release => return hold.release().await,
                    Woken::Lost => return self.lost(),
                }
            }
            let write_due = hold::sleep_until(hold.write_due_at());
            tokio::select! {
                Some(sent) = sending.join_next() => {
                    self.answered(sent, &mut window, &mut hold, &mut failure, &mut attempts);
                }
                () = waiter.changed(), if failure.is_none() && !unread => unread = true,
                () = write_due => hold.write_if_due(),
                held = hold.written() => if !held? {
                    return self.lost();
                },
                _ = self.shutdown.changed() => {}
            }
        }
    }

    /// Reads the subscription's signing secrets again; `false` when the subscription is gone.
    async fn read_secrets(&mut self) -> Result<bool, crate::storage::StorageError> {
        let current =
            webhooks::signing_secrets(&self.pool, self.pool.sealer(), self.subscription.id).await?;
        let Some(current) = current else {
            return Ok(false);
        };
        self.subscription.secret = current.secret;
        self.subscription.previous = current.previous;
        Ok(true)
    }

    /// Signs one event and returns its request, to run as a task of its own.
    fn send(
        &self,
        event: StoredEvent,
    ) -> Result<impl Future<Output = Sent> + Send + 'static, crate::storage::StorageError> {
        let envelope = Envelope::of(&event);
        let body = serde_json::to_vec(&envelope).map_err(|error| {
            crate::storage::StorageError::Corrupt(format!("event {}: {error}", event.position.id))
        })?;
        let timestamp = chrono::Utc::now().timestamp();
        let secrets = self.subscription.signing_secrets(chrono::Utc::now());
        let signed = sign::sign_with_each(&secrets, &envelope.id, timestamp, &body);
        let id = envelope.id;
        let (client, limits, url, subscription) = (
            self.client.clone(),
            self.settings.limits,
            self.subscription.url.clone(),
            self.subscription.id,
        );
        Ok(async move {
            let request = async {
                match signed {
                    Ok(signed) => {
                        let started = Instant::now();
                        let outcome = deliver::post(&client, &limits, &url, &signed, body).await;
                        metrics::webhook_attempt(outcome.is_ok(), started.elapsed());
                        if let Err(error) = &outcome
                            && let Some(detail) = error.detail()
                        {
                            // For ops only: the tenant's `last_error` says that it was refused, not why.
                            tracing::warn!(subscription = %subscription, detail = %detail,
                                "a webhook URL was refused");
                        }
                        outcome.map_err(|error| error.to_string())
                    }
                    Err(error) => Err(error),
                }
            };
            // A request that panicked failed like any other: the delivery goes on to record it and retry.
            let outcome = AssertUnwindSafe(request)
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err("the request failed inside the service".to_owned()));
            Sent {
                position: event.position,
                id,
                created_at: event.created_at,
                outcome,
            }
        })
    }

    /// Takes in one request's answer: the window, the metrics or the log, the first failure kept, and the cursor
    /// moved past what is now delivered with everything before it (which also clears the attempts of a retry).
    fn answered(
        &self,
        sent: Result<Sent, tokio::task::JoinError>,
        window: &mut Window,
        hold: &mut Hold,
        failure: &mut Option<String>,
        attempts: &mut u32,
    ) {
        // A request's task is never aborted and catches its own panics (`send`), so it always answers.
        let sent = sent.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
        window.finished(sent.position, sent.outcome.is_ok());
        match sent.outcome {
            Ok(()) => {
                let lag = (chrono::Utc::now() - sent.created_at)
                    .to_std()
                    .unwrap_or_default();
                metrics::webhook_delivered(lag);
            }
            Err(error) => {
                tracing::info!(subscription = %self.subscription.id, event = %sent.id, error = %error,
                    "webhook delivery failed");
                failure.get_or_insert(error);
            }
        }
        if let Some((position, count)) = window.take_delivered() {
            *attempts = 0;
            hold.delivered(position, count);
        }
    }

    /// Records a failed delivery once nothing is in flight: the cursor written up to the events delivered before
    /// it, and the subscription given up until its retry falls due.
    async fn failed(
        &self,
        mut hold: Hold,
        attempts: u32,
        error: &str,
    ) -> Result<(), crate::storage::StorageError> {
        if !hold.flush().await? {
            return self.lost();
        }
        let settings = &self.settings;
        let retry_in = retry::backoff(
            attempts,
            settings.backoff_base,
            settings.backoff_max,
            retry::jitter(),
        );
        tracing::info!(subscription = %self.subscription.id, attempts,
            retry_in_ms = retry_in.as_millis() as u64, "webhook delivery will be retried");
        webhooks::failed(
            &self.pool,
            self.subscription.id,
            self.instance,
            error,
            retry_in,
            settings.retry_window,
        )
        .await
    }

    /// Stops for shutdown or to yield the slot: waits for the requests in flight (each within its timeout), moves the
    /// cursor past what they delivered, and gives the subscription up, recording a failure if one came (so that its
    /// retry keeps its backoff). Events read and not sent are read again by the next holder.
    async fn stop(
        &self,
        mut window: Window,
        mut sending: JoinSet<Sent>,
        mut hold: Hold,
        mut failure: Option<String>,
        mut attempts: u32,
    ) -> Result<(), crate::storage::StorageError> {
        while let Some(sent) = sending.join_next().await {
            self.answered(sent, &mut window, &mut hold, &mut failure, &mut attempts);
        }
        match failure {
            Some(error) => self.failed(hold, attempts + 1, &error).await,
            None => hold.release().await,
        }
    }

    /// Waits, with no event left to send, for the hub to report new ones, writing the cursor meanwhile when that
    /// falls due; gives the subscription up after `IDLE_HOLD`, on shutdown, or at once when every slot of this
    /// instance is taken (another subscription may be waiting for one).
    async fn wait(
        &mut self,
        waiter: &mut Waiter,
        hold: &mut Hold,
    ) -> Result<Woken, crate::storage::StorageError> {
        let until = tokio::time::Instant::now() + IDLE_HOLD;
        loop {
            if self.stopping()
                || tokio::time::Instant::now() >= until
                || self.slots.available_permits() == 0
            {
                return Ok(Woken::Release);
            }
            let write_due = hold::sleep_until(hold.write_due_at());
            tokio::select! {
                () = waiter.changed() => return Ok(Woken::Events),
                () = tokio::time::sleep_until(until) => {}
                () = write_due => hold.write_if_due(),
                held = hold.written() => if !held? {
                    return Ok(Woken::Lost);
                },
                _ = self.shutdown.changed() => {}
            }
        }
    }

    /// Whether this task has held its subscription for `max_hold` while every slot of this instance is taken: then it
    /// gives its slot up, and the next claim takes tenants in turns. With a slot free nobody waits here, so a steady
    /// stream keeps its subscription.
    fn yields(&self, held_since: Instant) -> bool {
        held_since.elapsed() >= self.settings.max_hold && self.slots.available_permits() == 0
    }

    /// Whether this instance is stopping (its dispatcher's sender says so, or is gone).
    fn stopping(&self) -> bool {
        self.shutdown.has_changed().is_err() || *self.shutdown.borrow()
    }

    /// Notes that the subscription is no longer this instance's (removed, or taken over by another instance after
    /// this one outlived its lease); it stops.
    fn lost(&self) -> Result<(), crate::storage::StorageError> {
        tracing::warn!(subscription = %self.subscription.id,
            "the webhook subscription is no longer held here (removed, or taken over by another instance)");
        Ok(())
    }
}
