//! The approve path: the decision takes the turn in one statement (with the first call marked started), the turn's
//! calls run one after another through their executors, outside any transaction, each outcome stored as soon as it
//! is known; then one statement writes the tool events and resumes the run, only while this instance still holds the
//! turn's lease. What the decision read (run, calls, transcript) is carried through, so nothing is read again on the
//! way.
//!
//! A `resuming` turn is held by a lease. If the instance holding it dies, the lease runs out and the recovery task
//! of any instance takes the turn over: calls with an outcome keep it, a call that had started but has no outcome
//! gets `interrupted` (it is never sent again), and calls not yet started run.
//!
//! Calls of the worker's tools (docs/design.md §15) are never sent: once the service's calls have their results, the
//! turn is released instead of resumed (`decision_statements::release_held_turn`), under the same lease.
//!
//! Over 400 lines: the take's calls, their close and their recovery share the lease's rules and the carried reads; a
//! split would pass those through a second module's private interface.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::error::ResumeError;
use super::resumer::Resumer;
use super::rules::runs_on_worker;
use super::turn::{Resumed, closing_event, released_calls, stored_results, tool_events};
use crate::domain::event_payloads;
use crate::domain::privacy::ToolEvent;
use crate::domain::results::{self, ToolResult};
use crate::domain::transcript_text::TranscriptText;
use crate::domain::vocabulary::{DecidedBy, RunStatus};
use crate::executor::ExecutorCall;
use crate::storage::decision_record::{self, DecisionRow};
use crate::storage::decision_statements::{self, ClosingTurn, RunForDecision};
use crate::storage::runs::{self, CallRow, RunRow};

/// An approved turn as the decision that took it left it, with what that decision read of the run.
pub(super) struct TakenTurn {
    pub run: RunRow,
    pub decision: DecisionRow,
    /// The turn's calls as stored once the decision committed: denied ones with their results, edited ones with
    /// their edited arguments.
    pub calls: Vec<CallRow>,
    /// The earlier turns' calls that have a result (as `run_snapshot` or [`decision_statements::calls_through`] read
    /// them).
    pub earlier_calls: Vec<CallRow>,
    /// The transcript the decision read, carried as it was read into the answer.
    pub transcript: TranscriptText,
    /// The call the decision marked started (with a fresh lease), if it marked one.
    pub first_started: Option<i32>,
}

/// Runs whatever is left of an approved turn held by this instance, then resumes the run: the recovery task's
/// entry, which has nothing read. It closes the turn under the run's lock, from what is stored then.
pub async fn finish_turn(
    resumer: &Resumer,
    tenant: &str,
    run_id: Uuid,
) -> Result<Resumed, ResumeError> {
    let run = runs::find(&resumer.pool, tenant, run_id)
        .await?
        .ok_or(ResumeError::RunNotFound)?;
    let sealer = resumer.pool.sealer();
    let mut calls = runs::calls(&resumer.pool, sealer, run.id, run.turn_index).await?;
    // The edit note names who decided; read only when a call still to run was edited.
    let edited_by = if calls
        .iter()
        .any(|call| call.outcome.is_none() && call.edited_arguments.is_some())
    {
        decision_record::find(&resumer.pool, run.id, run.turn_index)
            .await?
            .ok_or(ResumeError::NotAwaitingApproval)?
            .decided_by()
            .map(Some)?
    } else {
        None
    };
    run_calls(resumer, &run, &mut calls, edited_by, None, false).await?;
    close_locked(resumer, tenant, run_id).await
}

/// Runs the calls of a turn the decision just took, then closes it in one statement from what was carried through.
pub(super) async fn finish_taken(
    resumer: &Resumer,
    taken: TakenTurn,
) -> Result<Resumed, ResumeError> {
    let TakenTurn {
        run,
        decision,
        mut calls,
        earlier_calls,
        transcript,
        first_started,
    } = taken;
    let decided_by = decision.decided_by()?;
    let ran = run_calls(
        resumer,
        &run,
        &mut calls,
        Some(decided_by),
        first_started,
        true,
    )
    .await?;
    if !ran.all_ours {
        // A call had a result this instance did not store (another instance's, after a takeover): what was carried
        // through is not what is stored, so the turn is closed from a fresh read under the lock.
        store_kept(resumer, &run, &ran.last).await?;
        return close_locked(resumer, &run.tenant, run.id).await;
    }
    let results = match close_taken(resumer, &run, &decision, &mut calls, &ran.last).await {
        Ok(results) => results,
        Err(error) => {
            // Whatever stopped the close, the result it carried may not be stored: store it on its own if the
            // database lets us (it never overwrites one stored meanwhile), so that whoever finishes the turn finds it.
            if let Err(also) = store_kept(resumer, &run, &ran.last).await {
                tracing::warn!(run_id = %run.id, error = %also, "could not store the last call's result either");
            }
            return Err(error);
        }
    };
    tracing::info!(run_id = %run.id, turn = run.turn_index, calls = calls.len(), "approved turn closed");
    let released = released_calls(&calls, Some(decided_by));
    Ok(
        Resumed::from_reads(run.id, decision, results, transcript, &earlier_calls)?
            .with_released(released),
    )
}

/// Closes a taken turn whose calls all have an outcome (`kept`: the last one's, not stored yet) but those released to
/// the worker, in one statement, only while this instance holds the lease: resumed, or released when it released
/// calls (marked so in `calls`); answers the results of the calls that have one.
async fn close_taken(
    resumer: &Resumer,
    run: &RunRow,
    decision: &DecisionRow,
    calls: &mut [CallRow],
    kept: &Option<(i32, ToolResult)>,
) -> Result<Vec<ToolResult>, ResumeError> {
    let ApprovedClose {
        results,
        events,
        resumed_event,
        released,
    } = approved_close(resumer, run, decision, calls).await?;
    // The last call's result is stored by the closing statement itself, whether or not it closes the turn: one
    // commit fewer per approval, and a turn taken over meanwhile still finds the result stored.
    let last: Vec<(i32, &ToolResult)> = kept.iter().map(|(p, r)| (*p, r)).collect();
    let closing = ClosingTurn {
        run,
        sealer: resumer.pool.sealer(),
        results: &last,
        events: &events,
        resumed_event: &resumed_event,
    };
    let closed = if released.is_empty() {
        decision_statements::close_held_turn(&resumer.pool, &closing, resumer.instance_id).await?
    } else {
        let owner = resumer.instance_id;
        decision_statements::release_held_turn(&resumer.pool, &closing, owner, &released).await?
    };
    if !closed {
        // Our lease ran out and another instance took the turn over (or already finished it).
        return Err(ResumeError::ResumeInProgress);
    }
    mark_released(calls, &released);
    Ok(results)
}

/// Marks the calls at `positions` released, as the statement that released them stored it.
fn mark_released(calls: &mut [CallRow], positions: &[i32]) {
    let now = chrono::Utc::now();
    for call in calls.iter_mut().filter(|c| positions.contains(&c.position)) {
        call.released_at = Some(now);
    }
}

/// What closing an approved turn writes, from its calls as they stand (every one with an outcome but those released
/// to the worker): their results, the tool events at the privacy level, and the `run.resumed` event with the
/// decision's verdict, or `run.released` with the released calls' ids and positions (docs/design.md §15).
struct ApprovedClose {
    results: Vec<ToolResult>,
    events: Vec<(i32, ToolEvent)>,
    resumed_event: event_payloads::EventData,
    released: Vec<i32>,
}

async fn approved_close(
    resumer: &Resumer,
    run: &RunRow,
    decision: &DecisionRow,
    calls: &[CallRow],
) -> Result<ApprovedClose, ResumeError> {
    let decided_by = decision.decided_by()?;
    // Only a turn that released calls to the worker has calls without an outcome here.
    if calls.iter().any(|call| call.outcome.is_none()) {
        let (with_results, released): (Vec<CallRow>, Vec<CallRow>) = calls
            .iter()
            .cloned()
            .partition(|call| call.outcome.is_some());
        let results = stored_results(&with_results)?;
        let events = tool_events(resumer, run, &with_results, &results, decided_by).await?;
        let ids = released.iter().map(|call| call.call_id.clone()).collect();
        return Ok(ApprovedClose {
            results,
            events,
            resumed_event: event_payloads::released_data(&run_facts(run, RunStatus::Released), ids),
            released: released.iter().map(|call| call.position).collect(),
        });
    }
    let results = stored_results(calls)?;
    let events = tool_events(resumer, run, calls, &results, decided_by).await?;
    let resumed_event = closing_event(
        run,
        Some(&event_payloads::Verdict {
            decided_by,
            decider_uid: decision.decider_uid,
            approved: decision.approved,
            outcomes: results.iter().map(|result| result.outcome).collect(),
        }),
    );
    Ok(ApprovedClose {
        results,
        events,
        resumed_event,
        released: Vec::new(),
    })
}

/// The facts of `run` an event tells, in `status`.
fn run_facts(run: &RunRow, status: RunStatus) -> event_payloads::RunFacts<'_> {
    event_payloads::RunFacts {
        run_id: run.id,
        tenant: &run.tenant,
        status,
        format: run.format(),
        turn_index: run.turn_index,
        turn_digest: &run.turn_digest,
        source: run.source.as_deref(),
    }
}

/// What [`run_calls`] did.
struct Ran {
    /// `false` when some call already had a stored outcome this instance did not know of.
    all_ours: bool,
    /// The last call's result, when it was kept for the closing statement to store.
    last: Option<(i32, ToolResult)>,
}

/// Runs every call of `calls` that has no outcome, in order, storing each outcome as soon as it is known and
/// keeping it in `calls`. With `keep_last`, the last call's outcome is not stored but handed back, for the statement
/// that closes the turn to store: a service that dies between the two answers that call `interrupted` (it was sent,
/// its outcome is unknown), as it does for one that dies while the call runs; it is never sent again.
async fn run_calls(
    resumer: &Resumer,
    run: &RunRow,
    calls: &mut [CallRow],
    edited_by: Option<DecidedBy>,
    first_started: Option<i32>,
    keep_last: bool,
) -> Result<Ran, ResumeError> {
    let mut ran = Ran {
        all_ours: true,
        last: None,
    };
    // An approved call of a worker's tool is released, never sent (docs/design.md §15).
    let to_run = |call: &CallRow| call.outcome.is_none() && !runs_on_worker(resumer, run, call);
    let last_to_run = calls
        .iter()
        .rev()
        .find(|call| to_run(call))
        .map(|call| call.position);
    for call in calls.iter_mut().filter(|call| to_run(call)) {
        let started = first_started == Some(call.position);
        // Only a result of a call this instance sends is kept back: one answered without being sent (no executor)
        // is stored at once, so that nobody finishing the turn sends it after all.
        let sends = call.started_at.is_none() && resumer.executors.enabled(&call.tool).is_some();
        let mut result = run_call(resumer, run, call, started).await?;
        if let (Some(arguments), Some(decided_by)) = (&call.edited_arguments, edited_by) {
            result = results::with_edit_note(result, decided_by, arguments);
        }
        let kept = keep_last && sends && last_to_run == Some(call.position);
        let stored = kept
            || decision_record::store_result(
                &resumer.pool,
                resumer.pool.sealer(),
                run.id,
                run.turn_index,
                call.position,
                &result,
            )
            .await?;
        if stored {
            call.outcome = Some(result.outcome.as_str().to_owned());
            call.is_error = Some(result.is_error);
            call.content = Some(result.content.clone());
            if kept {
                ran.last = Some((call.position, result));
            }
        } else {
            ran.all_ours = false;
        }
    }
    Ok(ran)
}

/// Stores the result [`run_calls`] kept for the closing statement, when the turn is closed otherwise (or not at all).
async fn store_kept(
    resumer: &Resumer,
    run: &RunRow,
    kept: &Option<(i32, ToolResult)>,
) -> Result<(), ResumeError> {
    if let Some((position, result)) = kept {
        decision_record::store_result(
            &resumer.pool,
            resumer.pool.sealer(),
            run.id,
            run.turn_index,
            *position,
            result,
        )
        .await?;
    }
    Ok(())
}

/// Closes a turn whose calls all have a stored result, under the run's lock and from what is stored then.
async fn close_locked(
    resumer: &Resumer,
    tenant: &str,
    run_id: Uuid,
) -> Result<Resumed, ResumeError> {
    let sealer = resumer.pool.sealer();
    let mut tx = resumer.pool.begin().await?;
    let locked = decision_statements::lock_run(&mut tx, sealer, tenant, run_id, None)
        .await?
        .ok_or(ResumeError::RunNotFound)?;
    let RunForDecision {
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
    let (mut calls, earlier_calls) =
        decision_statements::calls_through(&mut tx, sealer, run.id, run.turn_index).await?;
    let ApprovedClose {
        results,
        events,
        resumed_event,
        released,
    } = approved_close(resumer, &run, &decision, &calls).await?;
    let closing = ClosingTurn {
        run: &run,
        sealer,
        results: &[],
        events: &events,
        resumed_event: &resumed_event,
    };
    if released.is_empty() {
        decision_statements::close_turn(&mut tx, &closing).await?;
    } else {
        // Under the lock, with the lease seen ours: the release's condition holds.
        let owner = resumer.instance_id;
        decision_statements::release_held_turn(&mut *tx, &closing, owner, &released).await?;
        mark_released(&mut calls, &released);
    }
    tx.commit().await?;
    tracing::info!(run_id = %run.id, turn = run.turn_index, calls = calls.len(), "approved turn closed");
    let released = released_calls(&calls, Some(decision.decided_by()?));
    Ok(
        Resumed::from_reads(run.id, decision, results, transcript, &earlier_calls)?
            .with_released(released),
    )
}

/// The outcome of one call that has none yet. `started`: this instance marked it started when it took the turn,
/// with a lease that is still fresh, so it is sent without another round trip.
async fn run_call(
    resumer: &Resumer,
    run: &RunRow,
    call: &CallRow,
    started: bool,
) -> Result<ToolResult, ResumeError> {
    if call.started_at.is_some() {
        // It was sent once and its outcome never stored: it may have taken effect, so it is never sent again.
        return Ok(results::interrupted(&call.call_id, &call.tool));
    }
    let Some(executor) = resumer.executors.enabled(&call.tool) else {
        return Ok(results::not_permitted(&call.call_id, &call.tool));
    };
    if !started
        && !decision_record::start_call(
            &resumer.pool,
            run.id,
            run.turn_index,
            call.position,
            resumer.instance_id,
            resumer.lease(),
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

/// The call an approved turn sends first: the first without an outcome whose tool has an enabled executor and is not
/// the worker's (the calls before it get a result without being sent). `calls` are as the decision leaves them.
pub(super) fn first_sent(resumer: &Resumer, run: &RunRow, calls: &[CallRow]) -> Option<i32> {
    calls
        .iter()
        .filter(|call| call.outcome.is_none() && !runs_on_worker(resumer, run, call))
        .find(|call| call.started_at.is_none() && resumer.executors.enabled(&call.tool).is_some())
        .map(|call| call.position)
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
