//! A lapsed claim (docs/design.md §15, "A lapsed claim"): a claim whose `until` passed with released calls still
//! unposted ends them. Each gets the `interrupted` result of §3 (the service cannot know whether the worker started
//! it; an edited call's carries the edit note first, as any edited call's result does), every released call's tool
//! event is recorded at the run's privacy level, the run resumes and `run.resumed` is recorded, in one transaction
//! under the run's row lock. Such a call is never released again: it has a result.
//!
//! Written exactly once, by whoever finds the lapse first (the expiry rule of §5): a claim or a results post that
//! finds it under the run's lock ([`find_and_lapse`]), or the sweeper ([`sweep_once`]), which every instance runs
//! and which skips runs another transaction holds. The claim's `lapsed_at`, set only while it is null, is the
//! record that it was written; on a cancelled run nothing is written (the run is not `released`).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgConnection;

use super::error::ResumeError;
use super::released_turn;
use super::resumer::Resumer;
use crate::domain::results::{self, ToolResult};
use crate::domain::vocabulary::RunStatus;
use crate::storage::claims::{self, ClaimRow};
use crate::storage::runs::{self, RunRow, StoredStatus};
use crate::storage::{StorageError, decision_record};

/// Runs lapsed per transaction, and batches per tick, at most: as the expiry sweeper bounds its own.
const BATCH: i64 = 32;
const BATCHES_PER_TICK: usize = 8;

/// The claim of `run`'s current turn as found under the run's lock, its lapse written if it was due: then `run`
/// reads `resumed`, and the claim its `lapsed_at`. `lapsed_now` tells the caller that its transaction wrote
/// something, to commit even when its own answer is a refusal.
pub struct Found {
    pub claim: Option<ClaimRow>,
    pub lapsed_now: bool,
}

/// Reads the claim of `run`'s current turn, the one judgment of its lapse this transaction makes, and writes the
/// lapse if it is due. The caller holds the run's row lock.
pub async fn find_and_lapse(
    conn: &mut PgConnection,
    resumer: &Resumer,
    run: &mut RunRow,
) -> Result<Found, ResumeError> {
    let claim = claims::of_turn(&mut *conn, run.id, run.turn_index).await?;
    match claim {
        Some(claim) if run.status() == RunStatus::Released && claim.lapse_due() => {
            let lapsed = write(conn, resumer, run, &claim).await?;
            run.status = StoredStatus(RunStatus::Resumed);
            Ok(Found {
                claim: Some(lapsed),
                lapsed_now: true,
            })
        }
        claim => Ok(Found {
            claim,
            lapsed_now: false,
        }),
    }
}

/// Writes the lapse of `claim` on `run`, released, which the caller locked and found the claim due on.
async fn write(
    conn: &mut PgConnection,
    resumer: &Resumer,
    run: &RunRow,
    claim: &ClaimRow,
) -> Result<ClaimRow, ResumeError> {
    let corrupt = |what: &str| {
        ResumeError::Storage(StorageError::Corrupt(format!(
            "run {} turn {}: {what}",
            run.id, run.turn_index
        )))
    };
    // Under the run's lock nobody else writes the claim: found open, it is open.
    let lapsed = claims::mark_lapsed(&mut *conn, run.id, claim.claim_id)
        .await?
        .ok_or_else(|| corrupt("a claim found due under the lock was not open"))?;
    let sealer = resumer.pool.sealer();
    let calls = runs::calls(&mut *conn, sealer, run.id, run.turn_index).await?;
    let decision = decision_record::find(&mut *conn, run.id, run.turn_index)
        .await?
        .ok_or_else(|| corrupt("a released turn has no decision"))?;
    let decided_by = decision.decided_by()?;
    let interrupted: Vec<(i32, ToolResult)> = calls
        .iter()
        .filter(|call| call.is_released() && call.outcome.is_none())
        .map(|call| {
            let result = results::interrupted(&call.call_id, &call.tool);
            let result = match call.edited_arguments.as_deref() {
                Some(arguments) => results::with_edit_note(result, decided_by, arguments),
                None => result,
            };
            (call.position, result)
        })
        .collect();
    released_turn::close(conn, resumer, run, &calls, &interrupted, &decision).await?;
    tracing::info!(
        run_id = %run.id,
        turn = run.turn_index,
        interrupted = interrupted.len(),
        "a worker's claim lapsed; its unposted calls ended interrupted"
    );
    Ok(lapsed)
}

/// One batch: writes the lapse of up to [`BATCH`] lapsed claims in one transaction; returns how many it wrote.
pub async fn sweep_once(resumer: &Resumer) -> Result<usize, ResumeError> {
    let mut tx = resumer.pool.begin().await?;
    let due = claims::lock_lapsed(&mut tx, BATCH).await?;
    let mut lapsed = 0;
    for (run_id, tenant) in &due {
        // Read again under the lock this transaction now holds: a renewal or the last result may have committed
        // between the candidates' snapshot and the lock.
        let Some(mut run) = runs::lock(&mut tx, tenant, *run_id).await? else {
            continue;
        };
        if find_and_lapse(&mut tx, resumer, &mut run).await?.lapsed_now {
            lapsed += 1;
        }
    }
    tx.commit().await?;
    Ok(lapsed)
}

/// Every `interval`, writes the lapses of lapsed claims. Ends when `shutdown` resolves.
pub fn spawn_lapse_sweeper(
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
            Ok(lapsed) if lapsed as i64 == BATCH => continue,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(error = %error, "could not write lapsed claims; will retry");
                return;
            }
        }
    }
}
