//! The worker's results of the calls a decision released to it (docs/design.md §15, `POST /v1/runs/{id}/results`):
//! checked and stored under the run's row lock, the lock every writer of a run takes first (decisions, cancel, the
//! release itself), so that a result is stored exactly once however many posts race, and a cancel and the last
//! result cannot both win. When the last released call gets its result, the same transaction closes the turn: the
//! released calls' tool events at the run's privacy level, the run `resumed`, and `run.resumed`.
//!
//! A client that disconnects never leaves the transaction half-done: the HTTP layer runs the handler to completion
//! in a task of its own (`http::detach`).

use std::collections::HashSet;

use uuid::Uuid;

use super::error::ResumeError;
use super::resumer::Resumer;
use super::turn::{closing_event, stored_results, tool_events};
use crate::domain::event_payloads;
use crate::domain::released::{self, PostedContent};
use crate::domain::results::ToolResult;
use crate::domain::vocabulary::RunStatus;
use crate::storage::decision_statements::{self, ClosingTurn};
use crate::storage::runs::{self, CallRow};
use crate::storage::{StorageError, decision_record, worker_results};

/// One result as the worker posted it.
#[derive(Debug, Clone)]
pub struct PostedResult {
    pub call_id: String,
    pub content: String,
    pub is_error: bool,
}

/// Records the worker's results on `run_id`'s current turn, by the rules of docs/design.md §15 in their order: a
/// cancelled run refuses them, a call named twice is refused, a call that is not released is refused (409 while the
/// turn is still waiting for, or running, its decision), and a call that has a result takes the same one again
/// (nothing is written) but refuses another. Nothing of a refused body is recorded. Answers whether anything was
/// written.
pub async fn post_results(
    resumer: &Resumer,
    tenant: &str,
    run_id: Uuid,
    posted: &[PostedResult],
) -> Result<bool, ResumeError> {
    let sealer = resumer.pool.sealer();
    let mut tx = resumer.pool.begin().await?;
    let run = runs::lock(&mut tx, tenant, run_id)
        .await?
        .ok_or(ResumeError::RunNotFound)?;
    if run.status() == RunStatus::Cancelled {
        return Err(ResumeError::RunCancelled);
    }
    let mut seen = HashSet::new();
    if let Some(repeated) = posted.iter().find(|p| !seen.insert(p.call_id.as_str())) {
        return Err(ResumeError::RepeatedResult(repeated.call_id.clone()));
    }
    let calls = runs::calls(&mut *tx, sealer, run.id, run.turn_index).await?;
    let decision = decision_record::find(&mut *tx, run.id, run.turn_index).await?;
    let decided_by = decision.as_ref().map(|d| d.decided_by()).transpose()?;
    let undecided = matches!(
        run.status(),
        RunStatus::WaitingForApproval | RunStatus::Resuming
    );
    let resumed = matches!(run.status(), RunStatus::Resumed | RunStatus::Completed);
    let mut new: Vec<(i32, ToolResult)> = Vec::new();
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
            return Err(ResumeError::ResultConflict(call.call_id.clone()));
        }
    }
    if new.is_empty() {
        // Every result was stored before: a replay, which writes nothing.
        tx.rollback().await?;
        return Ok(false);
    }
    let positioned: Vec<(i32, &ToolResult)> = new.iter().map(|(p, r)| (*p, r)).collect();
    let last = calls
        .iter()
        .all(|call| call.outcome.is_some() || new.iter().any(|(p, _)| *p == call.position));
    match (last && run.status() == RunStatus::Released, decision) {
        (true, Some(decision)) => {
            let decided_by = decision.decided_by()?;
            // Every call as it is once this commits: the turn's results and the released calls' tool events.
            let mut closed: Vec<CallRow> = calls.clone();
            for (position, result) in &new {
                if let Some(call) = closed.iter_mut().find(|c| c.position == *position) {
                    call.outcome = Some(result.outcome.as_str().to_owned());
                    call.is_error = Some(result.is_error);
                    call.content = Some(result.content.clone());
                }
            }
            let results = stored_results(&closed)?;
            let released: Vec<CallRow> =
                closed.iter().filter(|c| c.is_released()).cloned().collect();
            let released_results = stored_results(&released)?;
            let events =
                tool_events(resumer, &run, &released, &released_results, decided_by).await?;
            let resumed_event = closing_event(
                &run,
                Some(&event_payloads::Verdict {
                    decided_by,
                    decider_uid: decision.decider_uid,
                    approved: decision.approved,
                    outcomes: results.iter().map(|result| result.outcome).collect(),
                }),
            );
            let closing = ClosingTurn {
                run: &run,
                sealer,
                results: &positioned,
                events: &events,
                resumed_event: &resumed_event,
            };
            decision_statements::close_turn(&mut tx, &closing).await?;
            tracing::info!(run_id = %run.id, turn = run.turn_index, "released turn resumed");
        }
        _ => {
            let stored =
                worker_results::store(&mut tx, sealer, run.id, run.turn_index, &positioned).await?;
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
    tx.commit().await?;
    Ok(true)
}
