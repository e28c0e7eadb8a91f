//! The worker's results of the calls a decision released to it (docs/design.md §15, `POST /v1/runs/{id}/results`):
//! checked and stored under the run's row lock, the lock every writer of a run takes first (decisions, cancel, the
//! release itself), so that a result is stored exactly once however many posts race, and a cancel and the last
//! result cannot both win. Results are taken only under the poster's live claim (`claims`), and a lapse found on the
//! way is written first (`lapses`), so a result and the lapse of its claim never both win either. When the last
//! released call gets its result, the same transaction closes the turn (`released_turn`).
//!
//! A client that disconnects never leaves the transaction half-done: the HTTP layer runs the handler to completion
//! in a task of its own (`http::detach`).

use std::collections::HashSet;

use sqlx::PgConnection;
use uuid::Uuid;

use super::claims;
use super::error::ResumeError;
use super::lapses::{self, Found};
use super::released_turn;
use super::resumer::Resumer;
use crate::domain::released::{self, PostedContent};
use crate::domain::results::ToolResult;
use crate::domain::vocabulary::RunStatus;
use crate::storage::runs::{self, RunRow};
use crate::storage::{StorageError, decision_record, worker_results};

/// One result as the worker posted it.
#[derive(Debug, Clone)]
pub struct PostedResult {
    pub call_id: String,
    pub content: String,
    pub is_error: bool,
}

/// Records the worker's results on `run_id`'s current turn, by the rules of docs/design.md §15 in their order: a
/// cancelled run refuses them, a call named twice is refused, a claim found lapsed is written (whatever follows), a
/// call that is not released is refused (409 while the turn is still waiting for, or running, its decision), a body
/// of results all stored before is a replay (nothing is written, whatever the claim), then the poster must hold the
/// turn's live claim (`claim_id`), and a call that has a result refuses another. Nothing of a refused body is
/// recorded. Answers whether anything was written.
pub async fn post_results(
    resumer: &Resumer,
    tenant: &str,
    run_id: Uuid,
    claim_id: Option<Uuid>,
    posted: &[PostedResult],
) -> Result<bool, ResumeError> {
    let mut tx = resumer.pool.begin().await?;
    let mut run = runs::lock(&mut tx, tenant, run_id)
        .await?
        .ok_or(ResumeError::RunNotFound)?;
    if run.status() == RunStatus::Cancelled {
        return Err(ResumeError::RunCancelled);
    }
    let mut seen = HashSet::new();
    if let Some(repeated) = posted.iter().find(|p| !seen.insert(p.call_id.as_str())) {
        return Err(ResumeError::RepeatedResult(repeated.call_id.clone()));
    }
    let found = lapses::find_and_lapse(&mut tx, resumer, &mut run).await?;
    let recorded = record(&mut tx, resumer, &run, &found, claim_id, posted).await;
    // A lapse this transaction wrote is kept whatever the answer: it is the run's state now.
    match recorded {
        Ok(written) if written || found.lapsed_now => {
            tx.commit().await?;
            Ok(true)
        }
        Ok(_) => {
            tx.rollback().await?;
            Ok(false)
        }
        Err(refused) => {
            if found.lapsed_now {
                tx.commit().await?;
            }
            Err(refused)
        }
    }
}

/// The results checked and stored under the run's lock, `found` the turn's claim as this transaction found it.
async fn record(
    tx: &mut PgConnection,
    resumer: &Resumer,
    run: &RunRow,
    found: &Found,
    claim_id: Option<Uuid>,
    posted: &[PostedResult],
) -> Result<bool, ResumeError> {
    let sealer = resumer.pool.sealer();
    let calls = runs::calls(&mut *tx, sealer, run.id, run.turn_index).await?;
    let decision = decision_record::find(&mut *tx, run.id, run.turn_index).await?;
    let decided_by = decision.as_ref().map(|d| d.decided_by()).transpose()?;
    let undecided = matches!(
        run.status(),
        RunStatus::WaitingForApproval | RunStatus::Resuming
    );
    let resumed = matches!(run.status(), RunStatus::Resumed | RunStatus::Completed);
    let mut new: Vec<(i32, ToolResult)> = Vec::new();
    let mut conflict = None;
    for result in posted {
        let call = calls.iter().find(|call| call.call_id == result.call_id);
        let call = match call {
            Some(call) if call.is_released() => call,
            // A call of this turn that may yet be released: asking again later may succeed.
            Some(_) if undecided => return Err(ResumeError::NotReleasedYet(run.status())),
            // Decided and moved on without releasing it (a denial): no result will ever be taken.
            _ if resumed => return Err(ResumeError::AlreadyResumed(run.status())),
            _ => return Err(ResumeError::NotReleased(result.call_id.clone())),
        };
        let edit = decided_by.zip(call.edited_arguments.as_deref());
        let content = PostedContent {
            content: result.content.clone(),
            is_error: result.is_error,
        };
        let stored = released::stored_result(&call.call_id, &call.tool, &content, edit);
        if call.outcome.is_none() {
            new.push((call.position, stored));
        } else if call.content.as_deref() != Some(stored.content.as_str())
            || call.is_error != Some(stored.is_error)
        {
            conflict.get_or_insert_with(|| call.call_id.clone());
        }
    }
    if new.is_empty() && conflict.is_none() {
        // Every result was stored before: a replay, which writes nothing and needs no claim.
        return Ok(false);
    }
    claims::check_poster(&mut *tx, run, found.claim.as_ref(), claim_id).await?;
    if let Some(call_id) = conflict {
        return Err(ResumeError::ResultConflict(call_id));
    }
    let last = calls
        .iter()
        .all(|call| call.outcome.is_some() || new.iter().any(|(p, _)| *p == call.position));
    match (last && run.status() == RunStatus::Released, decision) {
        (true, Some(decision)) => {
            released_turn::close(tx, resumer, run, &calls, &new, &decision).await?;
            tracing::info!(run_id = %run.id, turn = run.turn_index, "released turn resumed");
        }
        _ => {
            let positioned: Vec<(i32, &ToolResult)> = new.iter().map(|(p, r)| (*p, r)).collect();
            let stored =
                worker_results::store(tx, sealer, run.id, run.turn_index, &positioned).await?;
            if stored != new.len() as u64 {
                return Err(StorageError::Corrupt(format!(
                    "run {}: {stored} of {} results stored under the run's lock",
                    run.id,
                    new.len()
                ))
                .into());
            }
        }
    }
    Ok(true)
}
