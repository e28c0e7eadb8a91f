//! Deciding a turn from a read of its run: the usual decision (a waiting turn nobody decided, every rule letting it
//! through) from the read that took no lock, recorded by one write that can tell nothing overtook it; every other case
//! under the run's row lock, by the rules of docs/design.md §4 and §5 in their order, from what is stored then.

use super::error::ResumeError;
use super::record::{ClearedDecision, Through};
use super::remembered::{make_remembered, mark_remembered, refuse_denied_by_rule, refuse_remember};
use super::resumer::Resumer;
use super::rules::{Actor, DecisionRequest, authorize_decider, gate_approval, turn_calls};
use super::sweeper;
use super::turn::{Resumed, load_resumed};
use crate::domain::verdicts::Verdicts;
use crate::domain::vocabulary::RunStatus;
use crate::metrics;
use crate::sealing::Sealer;
use crate::storage::StorageError;
use crate::storage::decision_record::DecisionRow;
use crate::storage::decision_statements;
use crate::storage::run_snapshot::Snapshot;
use crate::storage::runs::{CallRow, RunRow};

/// Records a decision exactly once and resumes the run; the same decision again returns the stored outcome.
///
/// The usual decision, on a waiting turn nobody has decided, is made from `snapshot`, one read of the run that took
/// no lock (`posted::read`), and recorded by one write that moves the run on only while it still waits on the turn
/// that was read: two statements, and no transaction held open between them. Every other case (the same decision
/// again, a conflict, a refusal, a late decision, or a write that a concurrent change came before) is decided under
/// the run's row lock ([`decide_under_lock`]), by the same rules, from what is stored then.
pub async fn decide(
    resumer: &Resumer,
    actor: &Actor,
    request: &DecisionRequest,
    snapshot: Snapshot,
) -> Result<Resumed, ResumeError> {
    let Snapshot {
        run,
        connection,
        run_id,
        decider_uid,
        ..
    } = snapshot;
    if (run_id, decider_uid) != (request.run_id, request.decider_uid)
        || run
            .as_ref()
            .is_some_and(|run| run.facts.run.tenant != actor.tenant)
    {
        return Err(StorageError::Corrupt(format!(
            "a decision on run {} was given the read of run {run_id}",
            request.run_id
        ))
        .into());
    }
    let run = run.ok_or(ResumeError::RunNotFound)?;
    // A decision that remembers its verdicts makes rules under the run's lock, in the decision's transaction.
    if request.remember.is_some() {
        drop(connection);
        return decide_under_lock(resumer, actor, request).await;
    }
    match ClearedDecision::from_read(resumer, actor, request, run) {
        Some(cleared) => {
            let mut connection = connection;
            // An approval is checked against the deny rules first (docs/design.md §18); a denial never is.
            if cleared.verdicts.approves_any() {
                let (tenant, run) = (&actor.tenant, &cleared.facts.run);
                let (calls, verdicts) = (&cleared.calls, &cleared.verdicts);
                match connection.as_mut() {
                    Some(conn) => {
                        refuse_denied_by_rule(conn, resumer, tenant, run, calls, verdicts).await?
                    }
                    None => {
                        let mut tx = resumer.pool.begin().await?;
                        refuse_denied_by_rule(&mut tx, resumer, tenant, run, calls, verdicts)
                            .await?;
                        tx.commit().await?;
                    }
                }
            }
            // The connection goes back to the pool once the write is done (before a deny queues, with DENY_BATCHES),
            // and before an approval's calls run.
            let recorded = cleared
                .record(resumer, actor, request, Through::Unlocked(connection))
                .await?;
            if let Some(recorded) = recorded {
                return recorded.finish(resumer).await;
            }
        }
        // Given back before the lock is taken on a connection of its own: holding one while waiting for another
        // is how as many deciders as the pool has connections would wait for each other forever.
        None => drop(connection),
    }
    decide_under_lock(resumer, actor, request).await
}

/// Decides under the run's row lock: every case, in the order of docs/design.md §4 and §5.
async fn decide_under_lock(
    resumer: &Resumer,
    actor: &Actor,
    request: &DecisionRequest,
) -> Result<Resumed, ResumeError> {
    let approves = request.form.approves_any();
    refuse_remember(actor, request)?;
    let mut tx = resumer.pool.begin().await?;
    // Both answer the transcript from this same read: a deny at once, an approval after its tools ran.
    let locked = decision_statements::lock_run(
        &mut tx,
        resumer.pool.sealer(),
        &actor.tenant,
        request.run_id,
        request.decider_uid,
    )
    .await?
    .ok_or(ResumeError::RunNotFound)?;
    let run = &locked.run;
    let current_turn = request.turn_digest == run.turn_digest;
    // The verdicts are resolved against the calls of the turn the digest names; for another turn, the answer is
    // a conflict whatever the verdicts say.
    let (calls, earlier_calls, verdicts) = if current_turn {
        let (calls, earlier_calls) = decision_statements::calls_through(
            &mut tx,
            resumer.pool.sealer(),
            run.id,
            run.turn_index,
        )
        .await?;
        let mut verdicts = Verdicts::resolve(&request.form, &turn_calls(resumer, run, &calls))?;
        mark_remembered(request, &mut verdicts);
        (calls, earlier_calls, Some(verdicts))
    } else {
        (Vec::new(), Vec::new(), None)
    };
    // The same decision again is answered from what was recorded, before today's rules about the decider: it was
    // authorized when it won (docs/design.md §5), and a 403 would say nothing was recorded (§4), which is untrue once
    // the decider has been disabled or lost the grant since.
    if let (Some(existing), Some(verdicts)) = (&locked.decision, &verdicts)
        && is_same_decision(existing, request, verdicts, &calls)?
    {
        let existing = existing.clone();
        tx.rollback().await?;
        return replay(resumer, &locked.run, existing, true).await;
    }
    let decided_by = authorize_decider(actor, &locked, request.decider_uid, approves)?;

    let Some(verdicts) = verdicts else {
        return Err(ResumeError::StaleTurn(run.status()));
    };
    if let Some(existing) = locked.decision {
        tx.rollback().await?;
        return replay(resumer, &locked.run, existing, false).await;
    }
    if locked.expired {
        return Err(ResumeError::Expired);
    }
    if run.status() != RunStatus::WaitingForApproval {
        return Err(ResumeError::NotAwaitingApproval);
    }
    if locked.past_expiry {
        return Err(expire_late(tx, resumer.pool.sealer(), run, &calls).await?);
    }
    // Nothing has been recorded yet: a write released by someone who could not run it is refused here (§4).
    gate_approval(&locked, request.decider_uid, &verdicts)?;
    if verdicts.approves_any() {
        refuse_denied_by_rule(&mut tx, resumer, &actor.tenant, run, &calls, &verdicts).await?;
    }
    make_remembered(&mut tx, resumer, actor, run, request, &verdicts).await?;

    // Kept for the one way the write below can still record nothing under the lock.
    let (expiring_run, expiring_calls) = (run.clone(), calls.clone());
    let cleared = ClearedDecision {
        facts: locked,
        calls,
        earlier_calls,
        verdicts,
        decided_by,
    };
    let Some(recorded) = cleared
        .record(resumer, actor, request, Through::Locked(&mut tx))
        .await?
    else {
        // Under the lock only the clock moved on: the turn's expiry passed between the read and the write.
        let sealer = resumer.pool.sealer();
        return Err(expire_late(tx, sealer, &expiring_run, &expiring_calls).await?);
    };
    tx.commit().await?;
    recorded.finish(resumer).await
}

/// A decision that came too late, and the sweeper has not come by yet: the locked transaction writes the expiry
/// exactly as the sweeper would, commits it, and only then is the answer 409 (docs/design.md §5).
async fn expire_late(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    sealer: &Sealer,
    run: &RunRow,
    calls: &[CallRow],
) -> Result<ResumeError, ResumeError> {
    sweeper::expire_turn(&mut tx, sealer, run, calls).await?;
    tx.commit().await?;
    metrics::expired(1);
    tracing::info!(run_id = %run.id, turn = run.turn_index, "turn expired before a late decision");
    Ok(ResumeError::Expired)
}

/// A decided turn asked again: the same decision gets the stored outcome, any other one a conflict.
async fn replay(
    resumer: &Resumer,
    run: &RunRow,
    existing: DecisionRow,
    same: bool,
) -> Result<Resumed, ResumeError> {
    if run.status() == RunStatus::Resuming {
        return Err(ResumeError::ResumeInProgress);
    }
    if !same {
        return Err(ResumeError::AlreadyDecided);
    }
    // Its reads in one transaction: behind PgBouncer a connection is only kept between statements inside one.
    let mut tx = resumer.pool.begin().await?;
    let resumed = load_resumed(&mut tx, resumer.pool.sealer(), run.id, existing).await?;
    tx.commit().await?;
    // A run cancelled while released is answered as it is: a worker driven by the answer runs nothing.
    Ok(resumed.in_run(run.status()))
}

/// Whether a request is the recorded decision again: same decider and digest, and per call the same verdict,
/// reason and edited arguments (as JSON values), whatever the order of `calls` or the form it was posted in.
fn is_same_decision(
    existing: &DecisionRow,
    request: &DecisionRequest,
    verdicts: &Verdicts,
    calls: &[CallRow],
) -> Result<bool, ResumeError> {
    existing.reason()?;
    Ok(existing.decider_uid == request.decider_uid
        && existing.turn_digest == request.turn_digest
        && verdicts.same_as(&existing.calls.0, |call_id| {
            calls
                .iter()
                .find(|call| call.call_id == call_id)
                .and_then(|call| call.edited_arguments.as_deref())
        }))
}
