//! Expiry (docs/design.md §5): a turn nobody decided before its `expires_at` ends with the expired text on every call,
//! the run `resumed`, the expiry recorded (never as a decision or a denial) and `run.expired` in the outbox.
//!
//! Every instance sweeps. A sweep locks a bounded batch of due runs with `for update skip locked`, so instances
//! never wait for each other and never expire the same turn twice: a run another transaction holds is skipped (a
//! decision holding it wins or loses under the lock; the next sweep sees what it left). A decision that arrives
//! after `expires_at` writes the expiry itself through [`expire_turn`], under the same lock, exactly as a sweep
//! would.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgConnection;

use super::error::ResumeError;
use super::resumer::Resumer;
use super::turn::closing_event;
use crate::domain::results::{self, ToolResult};
use crate::metrics;
use crate::sealing::Sealer;
use crate::storage::decision_statements::{self, ClosingTurn};
use crate::storage::runs::{self, CallRow, RunRow};

/// Runs expired per transaction: bounds the time a sweep holds row locks and the size of one transaction.
const BATCH: i64 = 32;
/// Batches per tick, at most: a backlog drains over several ticks rather than in one long loop.
const BATCHES_PER_TICK: usize = 8;

/// Expires the current turn of `run`, which the caller has locked and found waiting past its `expires_at`.
/// No tool event is written: tool events record what a decision did to a call, and nobody decided.
pub async fn expire_turn(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run: &RunRow,
    calls: &[CallRow],
) -> Result<(), ResumeError> {
    let results: Vec<ToolResult> = calls
        .iter()
        .map(|call| results::expired(&call.call_id, &call.tool))
        .collect();
    let positioned: Vec<(i32, &ToolResult)> = calls
        .iter()
        .map(|call| call.position)
        .zip(results.iter())
        .collect();
    let expired_event = closing_event(run, None);
    let closing = ClosingTurn {
        run,
        sealer,
        results: &positioned,
        events: &[],
        resumed_event: &expired_event,
    };
    decision_statements::record_expiry(conn, &closing).await?;
    Ok(())
}

/// One batch: expires up to [`BATCH`] due turns in one transaction; returns how many.
pub async fn sweep_once(resumer: &Resumer) -> Result<usize, ResumeError> {
    let mut tx = resumer.pool.begin().await?;
    let due = runs::lock_expired(&mut tx, BATCH).await?;
    for run in &due {
        let sealer = resumer.pool.sealer();
        let calls = runs::calls(&mut *tx, sealer, run.id, run.turn_index).await?;
        expire_turn(&mut tx, sealer, run, &calls).await?;
    }
    tx.commit().await?;
    if !due.is_empty() {
        metrics::expired(due.len());
        tracing::info!(turns = due.len(), "expired turns nobody decided");
    }
    Ok(due.len())
}

/// Every `interval`, expires due turns. Ends when `shutdown` resolves.
pub fn spawn_sweeper(
    resumer: Arc<Resumer>,
    interval: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    super::periodic::spawn_every(resumer, interval, shutdown, |resumer| async move {
        sweep(&resumer).await
    })
}

async fn sweep(resumer: &Resumer) {
    for _ in 0..BATCHES_PER_TICK {
        match sweep_once(resumer).await {
            Ok(expired) if expired as i64 == BATCH => continue,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(error = %error, "could not expire due turns; will retry");
                return;
            }
        }
    }
}
