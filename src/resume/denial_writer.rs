//! The writer of the denies decided from a snapshot. A deny is written at once on the connection it was read on by the
//! single statement (`decision_statements::record_denial`) while few others are being written so ([`BATCH_BEYOND`]);
//! beyond that, Postgres is busy, and the denies queue and are written together (`storage::denials::record_many`), so
//! that a deny shares a statement's start-up and a commit with the others. Nothing waits for a batch to fill: a batch
//! is whatever queued while the writers were writing the previous ones.
//!
//! A few writers take turns at the queue, so that one batch is sent while the next is gathered. A batch never waits
//! for a run's lock: a run another transaction holds is skipped and its deny written on its own, where only it waits.
//! Each batch is one transaction; if the database refuses it, its denies are written again one by one, so that one bad
//! deny costs nobody else their decision; if the database or the pool is unavailable, every deny of the batch is
//! answered so at once. A second deny of a run already in the batch (two clicks at once) is written on its own after
//! it, and finds the run decided.
//!
//! docs/design.md §12 keeps every hot statement addressed to one run so that the tables can be distributed by run id; a
//! batch is addressed to several. `DENY_BATCHES=off` writes every deny by the single statement, as a distributed
//! deployment should.
//!
//! A deny decided under the run's lock is written inside that transaction, never here.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::FutureExt;
use futures_util::future::join_all;
use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use std::panic::AssertUnwindSafe;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::metrics;
use crate::storage::decision_record::DecisionRow;
use crate::storage::decision_statements::{self, DenialWrite};
use crate::storage::{Database, StorageError, denials};

/// How many writers take turns at the queue: enough that a batch is gathered while another is written, few enough
/// that the denies of a busy moment still meet in one statement (BENCHMARKS.md, "Denies written together").
const WRITERS: usize = 2;
/// The fewest denies written by the batch statement; fewer are written by the single statement each, at once. A
/// batch statement's start-up is worth sharing from about this many on: at 8 clients, where batches are two or three
/// denies, writing them together cost Postgres more per deny than the single statements did (BENCHMARKS.md).
const SMALLEST_BATCH: usize = 4;
/// The most denies in one statement: it bounds the statement's size and the time its run locks are held.
const MOST_IN_A_BATCH: usize = 64;
/// Denies waiting for a writer beyond which a request waits to queue: every one is a request in flight, which the
/// HTTP layer already bounds; this only keeps the queue's memory bounded whatever it lets through.
const QUEUE: usize = 4096;

type Answer = Result<Option<DecisionRow>, StorageError>;

/// A deny waiting for its statement, with where its answer goes.
struct Queued {
    write: DenialWrite,
    answer: oneshot::Sender<Answer>,
}

/// How many denies written on their own may be in flight before the next ones are queued to be written together. Below
/// it a deny is written at once on the connection it was read on, as without batches: at half the saturating load a
/// queue only added waiting (p99 55 ms against 10 without, BENCHMARKS.md), while once this many are in flight
/// Postgres is busy enough that sharing statements and commits pays.
pub const BATCH_BEYOND: usize = 4;

/// The queue of denies and the writers that empty it (none with batches off), and the count of denies written on their
/// own now. The writers stop once every handle is dropped.
pub struct DenialWriter {
    queue: Option<mpsc::Sender<Queued>>,
    /// Denies queue only while at least this many are being written on their own.
    batch_beyond: usize,
    in_flight: AtomicUsize,
    db: Database,
}

impl DenialWriter {
    /// Starts the writers on the current runtime, writing through `db`, for denies beyond `batch_beyond` in flight
    /// (`Some(0)`: every deny is queued); with `None` (`DENY_BATCHES=false`), starts none, and every deny is written on
    /// its own.
    pub fn start(db: Database, batch_beyond: Option<usize>) -> Self {
        let queue = batch_beyond.map(|_| {
            let (queue, waiting) = mpsc::channel(QUEUE);
            let waiting = Arc::new(Mutex::new(waiting));
            for _ in 0..WRITERS {
                tokio::spawn(write_batches(db.clone(), Arc::clone(&waiting)));
            }
            queue
        });
        DenialWriter {
            queue,
            batch_beyond: batch_beyond.unwrap_or(usize::MAX),
            in_flight: AtomicUsize::new(0),
            db,
        }
    }

    /// How many denies wait for a writer now.
    pub fn queued(&self) -> usize {
        self.queue
            .as_ref()
            .map_or(0, |queue| queue.max_capacity() - queue.capacity())
    }

    /// How many denies are being written on their own now (at once, not queued).
    pub fn written_on_their_own(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Records the deny as `decision_statements::record_denial` does (`None`: its run no longer waits on the turn
    /// read): at once on `connection` (the one it was read on; `None` behind a transaction pooler: on any) while fewer
    /// than `batch_beyond` denies are being written so, and otherwise in a statement with whatever other denies are
    /// waiting, the connection given back first.
    pub async fn record(
        &self,
        connection: Option<PoolConnection<Postgres>>,
        write: DenialWrite,
    ) -> Answer {
        let queue = match &self.queue {
            Some(queue) if self.in_flight.load(Ordering::Relaxed) >= self.batch_beyond => queue,
            _ => {
                self.in_flight.fetch_add(1, Ordering::Relaxed);
                let _written = InFlight(&self.in_flight);
                let answer = match connection {
                    Some(mut conn) => decision_statements::record_denial(&mut *conn, write).await,
                    None => decision_statements::record_denial(&self.db, write).await,
                };
                metrics::deny_statement("single", 1);
                return answer;
            }
        };
        drop(connection);
        let (answer, answered) = oneshot::channel();
        queue
            .send(Queued { write, answer })
            .await
            .map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

/// A deny being written on its own, counted while it is (also when its future is dropped).
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A deny whose writer is gone is refused as by a crashed worker: the writers stop only with the service (their
/// runtime with them), or a writer panicked while writing its batch, whose outcome is then unknown.
fn stopped() -> StorageError {
    StorageError::Unavailable(sqlx::Error::WorkerCrashed)
}

/// One writer: takes what is queued (waiting for the first deny, not for more), writes it, and again. A panic while
/// writing a batch drops its denies' answers (each is refused, `stopped`) but not the writer.
async fn write_batches(db: Database, waiting: Arc<Mutex<mpsc::Receiver<Queued>>>) {
    loop {
        let batch = {
            let mut waiting = waiting.lock().await;
            let Some(first) = waiting.recv().await else {
                return;
            };
            let mut batch = vec![first];
            while batch.len() < MOST_IN_A_BATCH {
                match waiting.try_recv() {
                    Ok(queued) => batch.push(queued),
                    Err(_) => break,
                }
            }
            batch
        };
        let denies = batch.len();
        if AssertUnwindSafe(write(&db, batch))
            .catch_unwind()
            .await
            .is_err()
        {
            tracing::error!(
                denies,
                "the deny writer panicked while writing a batch; its denies are refused"
            );
        }
    }
}

/// Writes one batch and answers each of its denies: the batch statement for `SMALLEST_BATCH` distinct runs or more,
/// then the single statement for whatever it left (fewer runs, a second deny of a run, a run it skipped as locked,
/// or all of them again when the statement failed).
async fn write(db: &Database, batch: Vec<Queued>) {
    let mut runs = HashSet::with_capacity(batch.len());
    let (distinct, again): (Vec<Queued>, Vec<Queued>) = batch
        .into_iter()
        .partition(|queued| runs.insert(queued.write.run_id()));
    let mut singles = Vec::with_capacity(distinct.len() + again.len());
    let mut kind = "single";
    if distinct.len() < SMALLEST_BATCH {
        singles.extend(distinct);
    } else {
        let writes: Vec<&DenialWrite> = distinct.iter().map(|queued| &queued.write).collect();
        match denials::record_many(db, &writes).await {
            Ok(mut outcome) => {
                metrics::deny_statement("batch", outcome.locked.len());
                for queued in distinct {
                    let run_id = queued.write.run_id();
                    if outcome.locked.contains(&run_id) {
                        let _ = queued.answer.send(Ok(outcome.recorded.remove(&run_id)));
                    } else {
                        singles.push(queued);
                    }
                }
            }
            Err(error @ StorageError::Unavailable(_)) => {
                // The database or the pool is what failed, not a deny: each on its own would only wait for it again.
                tracing::warn!(denies = distinct.len() + again.len(), error = %error,
                    "a batch of denies could not be written");
                for queued in distinct.into_iter().chain(again) {
                    let _ = queued
                        .answer
                        .send(Err(StorageError::Unavailable(sqlx::Error::Io(
                            std::io::Error::other(error.to_string()),
                        ))));
                }
                return;
            }
            Err(error) => {
                tracing::warn!(denies = distinct.len(), error = %error,
                    "a batch of denies failed; writing each on its own");
                singles.extend(distinct);
                kind = "retried";
            }
        }
    }
    join_all(
        singles
            .into_iter()
            .map(|queued| write_one(db, queued, kind)),
    )
    .await;
    join_all(
        again
            .into_iter()
            .map(|queued| write_one(db, queued, "single")),
    )
    .await;
}

/// Writes one deny by the single statement and answers it.
async fn write_one(db: &Database, queued: Queued, kind: &'static str) {
    let answer = decision_statements::record_denial(db, queued.write).await;
    metrics::deny_statement(kind, 1);
    // The request may have stopped waiting (its task ended); the deny is recorded all the same.
    let _ = queued.answer.send(answer);
}
