//! The approve path: the turn's calls run one after another through their executors, outside any transaction,
//! each outcome stored as soon as it is known; then one transaction writes the tool events and resumes the run.
//!
//! A `resuming` turn is held by a lease. If the instance holding it dies, the lease runs out and the recovery task
//! of any instance takes the turn over: calls with an outcome keep it, a call that had started but has no outcome
//! gets `interrupted` (it is never sent again), and calls not yet started run.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::{ResumeError, Resumed, Resumer, closing_event, tool_events};
use crate::domain::events;
use crate::domain::results::{self, ToolResult};
use crate::domain::tokens::RunStatus;
use crate::executor::ExecutorCall;
use crate::storage::deciding::{self, ClosingTurn, LockedRun};
use crate::storage::decisions;
use crate::storage::runs::{self, CallRow, RunRow};

/// Runs whatever is left of an approved turn held by this instance, then resumes the run.
pub async fn finish_turn(
    resumer: &Resumer,
    tenant: &str,
    run_id: Uuid,
) -> Result<Resumed, ResumeError> {
    let run = runs::find(&resumer.pool, tenant, run_id)
        .await?
        .ok_or(ResumeError::RunNotFound)?;
    let sealer = resumer.pool.sealer();
    let calls = runs::calls(&resumer.pool, sealer, run.id, run.turn_index).await?;
    // The edit note names who decided; read only when a call still to run was edited.
    let edited_by = if calls
        .iter()
        .any(|call| call.outcome.is_none() && call.edited_arguments.is_some())
    {
        decisions::find(&resumer.pool, run.id, run.turn_index)
            .await?
            .ok_or(ResumeError::NotAwaitingApproval)?
            .decided_by()
            .map(Some)?
    } else {
        None
    };
    for call in calls.iter().filter(|call| call.outcome.is_none()) {
        let mut result = run_call(resumer, &run, call).await?;
        if let (Some(arguments), Some(decided_by)) = (&call.edited_arguments, edited_by) {
            result = results::with_edit_note(result, decided_by, arguments);
        }
        decisions::store_result(
            &resumer.pool,
            sealer,
            run.id,
            run.turn_index,
            call.position,
            &result,
        )
        .await?;
    }

    let mut tx = resumer.pool.begin().await?;
    let locked = deciding::lock_run(&mut tx, sealer, tenant, run_id, None, true)
        .await?
        .ok_or(ResumeError::RunNotFound)?;
    let LockedRun {
        run,
        decision,
        transcript,
        ..
    } = locked;
    let decision = decision.ok_or(ResumeError::NotAwaitingApproval)?;
    if run.status() != RunStatus::Resuming || run.lease_owner != Some(resumer.instance_id) {
        // Another instance took the turn over (our lease ran out) or already finished it.
        tx.rollback().await?;
        return Err(ResumeError::ResumeInProgress);
    }
    let (calls, earlier_calls) =
        deciding::calls_through(&mut tx, sealer, run.id, run.turn_index).await?;
    let results = super::stored_results(&calls)?;
    let decided_by = decision.decided_by()?;
    let events = tool_events(resumer, &run, &calls, &results, decided_by).await?;
    let resumed_event = closing_event(
        &run,
        Some(&events::Verdict {
            decided_by,
            decider_uid: decision.decider_uid,
            approved: decision.approved,
            outcomes: results.iter().map(|result| result.outcome).collect(),
        }),
    );
    let closing = ClosingTurn {
        run: &run,
        sealer,
        results: &[],
        events: &events,
        resumed_event: &resumed_event,
    };
    deciding::close_turn(&mut tx, &closing).await?;
    tx.commit().await?;
    tracing::info!(run_id = %run.id, turn = run.turn_index, calls = calls.len(), "approved turn resumed");
    Resumed::from_reads(run.id, decision, results, transcript, &earlier_calls)
}

/// The outcome of one call that has none yet.
async fn run_call(
    resumer: &Resumer,
    run: &RunRow,
    call: &CallRow,
) -> Result<ToolResult, ResumeError> {
    if call.started_at.is_some() {
        // It was sent once and its outcome never stored: it may have taken effect, so it is never sent again.
        return Ok(results::interrupted(&call.call_id, &call.tool));
    }
    let Some(executor) = resumer.executors.enabled(&call.tool) else {
        return Ok(results::not_permitted(&call.call_id, &call.tool));
    };
    let lease = resumer.lease();
    if !runs::renew_lease(&resumer.pool, run.id, resumer.instance_id, lease).await? {
        return Err(ResumeError::ResumeInProgress);
    }
    if !decisions::mark_started(
        &resumer.pool,
        run.id,
        run.turn_index,
        call.position,
        resumer.instance_id,
    )
    .await?
    {
        return Err(ResumeError::ResumeInProgress);
    }
    let result = executor
        .execute(
            resumer.executors.client(),
            &ExecutorCall {
                run_id: run.id,
                tenant: &run.tenant,
                call_id: &call.call_id,
                tool: &call.tool,
                // The edited arguments, if a decider edited them; the same Idempotency-Key either way.
                arguments: call.effective_arguments(),
                owner_uid: run.owner_uid,
            },
        )
        .await;
    Ok(result)
}

/// Every `interval`, takes over turns whose lease ran out and finishes them. Ends when `shutdown` resolves.
pub fn spawn_recovery(
    resumer: Arc<Resumer>,
    interval: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    super::periodic::spawn_every(resumer, interval, shutdown, |resumer| async move {
        recover_once(&resumer).await
    })
}

/// One sweep: claim expired leases and finish each claimed turn.
pub async fn recover_once(resumer: &Resumer) {
    let claimed =
        match runs::claim_expired_leases(&resumer.pool, resumer.instance_id, resumer.lease(), 16)
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(error = %error, "could not look for abandoned turns");
                return;
            }
        };
    for (run_id, tenant) in claimed {
        tracing::warn!(run_id = %run_id, "taking over an approved turn whose instance stopped");
        if let Err(error) = finish_turn(resumer, &tenant, run_id).await {
            tracing::warn!(run_id = %run_id, error = %error, "could not finish an abandoned turn; will retry");
        }
    }
}
