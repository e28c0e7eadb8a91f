//! The writer of the denies decided from a snapshot: the denies that arrive while a statement is being written wait
//! for the next one and are written together (`storage::denials::record_many`), so that under load a deny shares a
//! statement's start-up and a commit with the others, and alone it is written at once by the single statement
//! (`deciding::record_denial`). Nothing waits for a batch to fill: a batch is whatever queued meanwhile.
//!
//! A few writers take turns at the queue, so that one batch is sent while the next is gathered. Each batch is one
//! transaction; if it fails, its denies are written again one by one, so that one bad deny (or a deadlock between two
//! batches that both hold a deny of the same two runs) costs nobody else their decision. A second deny of a run
//! already in the batch (two clicks at once) is written on its own after it, and finds the run decided.
//!
//! A deny decided under the run's lock is written inside that transaction, never here.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::join_all;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::metrics;
use crate::storage::deciding::{self, DenialWrite};
use crate::storage::decisions::DecisionRow;
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

/// The queue of denies and the writers that empty it. The writers stop once every handle is dropped.
pub struct DenialWriter {
    queue: mpsc::Sender<Queued>,
}

impl DenialWriter {
    /// Starts the writers on the current runtime, writing through `db`.
    pub fn start(db: Database) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        let waiting = Arc::new(Mutex::new(waiting));
        for _ in 0..WRITERS {
            tokio::spawn(write_batches(db.clone(), Arc::clone(&waiting)));
        }
        DenialWriter { queue }
    }

    /// How many denies wait for a writer now.
    pub fn queued(&self) -> usize {
        self.queue.max_capacity() - self.queue.capacity()
    }

    /// Records the deny as `deciding::record_denial` does (`None`: its run no longer waits on the turn read), in a
    /// statement with whatever other denies are waiting.
    pub async fn record(&self, write: DenialWrite) -> Answer {
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Queued { write, answer })
            .await
            .map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

/// The writers end only when the service stops (their runtime with them): a deny still waiting is refused as by a
/// closed pool.
fn stopped() -> StorageError {
    StorageError::Unavailable(sqlx::Error::PoolClosed)
}

/// One writer: takes what is queued (waiting for the first deny, not for more), writes it, and again.
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
        write(&db, batch).await;
    }
}

/// Writes one batch and answers each of its denies.
async fn write(db: &Database, batch: Vec<Queued>) {
    let mut runs = HashSet::with_capacity(batch.len());
    let (distinct, again): (Vec<Queued>, Vec<Queued>) = batch
        .into_iter()
        .partition(|queued| runs.insert(queued.write.run_id()));
    if distinct.len() < SMALLEST_BATCH {
        join_all(
            distinct
                .into_iter()
                .map(|queued| write_one(db, queued, "single")),
        )
        .await;
    } else {
        let writes: Vec<&DenialWrite> = distinct.iter().map(|queued| &queued.write).collect();
        match denials::record_many(db, &writes).await {
            Ok(mut recorded) => {
                metrics::deny_statement("batch", distinct.len());
                for queued in distinct {
                    let decision = recorded.remove(&queued.write.run_id());
                    let _ = queued.answer.send(Ok(decision));
                }
            }
            Err(error) => {
                tracing::warn!(denies = distinct.len(), error = %error,
                    "a batch of denies failed; writing each on its own");
                join_all(
                    distinct
                        .into_iter()
                        .map(|queued| write_one(db, queued, "retried")),
                )
                .await;
            }
        }
    }
    join_all(
        again
            .into_iter()
            .map(|queued| write_one(db, queued, "single")),
    )
    .await;
}

/// Writes one deny by the single statement and answers it.
async fn write_one(db: &Database, queued: Queued, kind: &'static str) {
    let answer = deciding::record_denial(db, queued.write).await;
    metrics::deny_statement(kind, 1);
    // The request may have stopped waiting (its task ended); the deny is recorded all the same.
    let _ = queued.answer.send(answer);
}
