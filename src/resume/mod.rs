//! Recording a decision and resuming the run: the rules of docs/design.md §4 and §5, applied to a read of the run that
//! took no lock when the write can tell that nothing overtook it, and under the run's row lock otherwise.
//!
//! A decision is never cancelled half-way, in particular never inside `BEGIN`, where sqlx 0.9 would return the
//! connection to the pool still inside a transaction (transact-rs/sqlx#4393): the HTTP layer runs every handler
//! to completion in a task of its own (`http::detach`), and a client that disconnects or an HTTP timeout only
//! stops the wait for the answer.

pub mod approve;
pub mod denial_writer;
pub mod periodic;
mod record;
pub mod sweeper;

use std::time::Duration;

use crate::storage::Database;
use sqlx::PgConnection;
use uuid::Uuid;

pub use approve::{finish_turn, spawn_recovery};
pub use denial_writer::DenialWriter;
pub use sweeper::spawn_sweeper;

use record::{PlainDecision, Through, plain_decision};

use crate::domain::authorize::{self, DecisionAsk, Refusal};
use crate::domain::event_payloads;
use crate::domain::gate;
use crate::domain::model_input::ModelInputFormat;
use crate::domain::privacy;
use crate::domain::results::ToolResult;
use crate::domain::transcript_text::TranscriptText;
use crate::domain::verdicts::{DecisionForm, TurnCall, VerdictError, Verdicts};
use crate::domain::vocabulary::{DecidedBy, PrivacyLevel, RunStatus};
use crate::executor::Executors;
use crate::metrics;
use crate::sealing::Sealer;
use crate::storage::StorageError;
use crate::storage::decision_record::DecisionRow;
use crate::storage::decision_statements::{self, RunForDecision};
use crate::storage::run_snapshot;
pub use crate::storage::run_snapshot::{KeyHolder, Reader, Snapshot};
use crate::storage::runs::{self, CallRow, RunRow};

/// What the decision path needs, shared by every request and the recovery task.
pub struct Resumer {
    pub pool: Database,
    pub executors: Executors,
    /// The service's privacy level; a run may only make it stricter.
    pub privacy_floor: PrivacyLevel,
    /// Identifies this process as the holder of a `resuming` turn's lease.
    pub instance_id: Uuid,
    /// How much longer than its longest executor call a turn's lease lasts; past it, another instance takes over.
    pub lease_margin: Duration,
    /// Writes the denies decided from a snapshot, together when they arrive together.
    pub denials: DenialWriter,
}

impl Resumer {
    /// How long a `resuming` turn is held before another instance may take it over.
    pub fn lease(&self) -> Duration {
        self.executors.longest_timeout() + self.lease_margin
    }
}

/// The client on whose behalf a decision is made.
#[derive(Debug, Clone)]
pub struct Actor {
    pub tenant: String,
    pub client_name: String,
    pub may_decide_anonymously: bool,
    /// The `kid` of the decision token the decision came with; `None` for an API key.
    pub token_kid: Option<String>,
}

/// A decision as the client posted it, its form already checked ([`DecisionForm::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRequest {
    pub run_id: Uuid,
    pub decider_uid: Option<i64>,
    pub turn_digest: String,
    pub form: DecisionForm,
}

/// A resumed turn: everything the answer and the model input are rendered from, all of it as stored.
#[derive(Debug, Clone)]
pub struct Resumed {
    pub run_id: Uuid,
    pub decision: DecisionRow,
    pub results: Vec<ToolResult>,
    /// The transcript through the decided turn's assistant message.
    pub transcript: TranscriptText,
    /// The results this service wrote for the run's earlier turns (their tool messages are in `transcript`).
    pub earlier_results: Vec<ToolResult>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("no such run")]
    RunNotFound,
    #[error("decision refused: {0}")]
    Refused(#[from] Refusal),
    #[error("the turn digest is not the current turn's")]
    StaleTurn,
    #[error("this turn was already decided differently")]
    AlreadyDecided,
    #[error("the run is not waiting for approval")]
    NotAwaitingApproval,
    #[error("the approved turn's tools are still running")]
    ResumeInProgress,
    #[error("the turn expired before it was decided")]
    Expired,
    #[error("{0}")]
    Verdicts(#[from] VerdictError),
    #[error("the redaction of the tool events failed: {0}")]
    Redaction(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<sqlx::Error> for ResumeError {
    fn from(error: sqlx::Error) -> Self {
        ResumeError::Storage(error.into())
    }
}

/// Records a decision exactly once and resumes the run; the same decision again returns the stored outcome.
///
/// The usual decision, on a waiting turn nobody has decided, is made from `snapshot`, one read of the run that took
/// no lock ([`read`]), and recorded by one write that moves the run on only while it still waits on the turn that was
/// read: two statements, and no transaction held open between them. Every other case (the same decision again, a
/// conflict, a refusal, a late decision, or a write that a concurrent change came before) is decided under the run's
/// row lock ([`decide_under_lock`]), by the same rules, from what is stored then.
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
    match plain_decision(resumer, actor, request, run) {
        Some(plain) => {
            // The connection goes back to the pool once the write is done (before a deny queues, with DENY_BATCHES),
            // and before an approval's calls run.
            let recorded = plain
                .record(resumer, actor, request, Through::Snapshot(connection))
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

/// Reads the run for a decision without its lock, and the key's client with it ([`decide`]'s first statement).
pub async fn read(
    resumer: &Resumer,
    reader: Reader<'_>,
    run_id: Uuid,
    decider_uid: Option<i64>,
) -> Result<Snapshot, ResumeError> {
    Ok(run_snapshot::read(&resumer.pool, reader, run_id, decider_uid).await?)
}

/// Decides under the run's row lock: every case, in the order of docs/design.md §4 and §5.
async fn decide_under_lock(
    resumer: &Resumer,
    actor: &Actor,
    request: &DecisionRequest,
) -> Result<Resumed, ResumeError> {
    let approves = request.form.approves_any();
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
        let verdicts = Verdicts::resolve(&request.form, &turn_calls(resumer, &calls))?;
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
        return Err(ResumeError::StaleTurn);
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

    // Kept for the one way the write below can still record nothing under the lock.
    let (expiring_run, expiring_calls) = (run.clone(), calls.clone());
    let plain = PlainDecision {
        facts: locked,
        calls,
        earlier_calls,
        verdicts,
        decided_by,
    };
    let Some(recorded) = plain
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

/// The pending calls as the verdicts are resolved against them, each with the effect that applies.
fn turn_calls<'a>(resumer: &Resumer, calls: &'a [CallRow]) -> Vec<TurnCall<'a>> {
    calls
        .iter()
        .map(|call| TurnCall {
            position: call.position,
            call_id: &call.call_id,
            tool: &call.tool,
            arguments: &call.arguments,
            effect: resumer.executors.effect(&call.tool, Some(call.effect())),
        })
        .collect()
}

impl Resumed {
    /// A turn resumed by this decision, answered from what it read of the run, so the answer is built
    /// from the very rows a replay later rebuilds it from ([`load_resumed`]), without reading them again.
    fn from_reads(
        run_id: Uuid,
        decision: DecisionRow,
        results: Vec<ToolResult>,
        transcript: TranscriptText,
        earlier_calls: &[CallRow],
    ) -> Result<Self, ResumeError> {
        Ok(Resumed {
            run_id,
            decision,
            results,
            transcript,
            earlier_results: stored_results(earlier_calls)?,
        })
    }
}

/// Applies §4 with the decider's row, read with the run under its lock.
/// A decision that approves one call is an approval for these rules (docs/design.md §4).
fn authorize_decider(
    actor: &Actor,
    locked: &RunForDecision,
    decider_uid: Option<i64>,
    approves: bool,
) -> Result<DecidedBy, ResumeError> {
    let decided_by = authorize::authorize(&DecisionAsk {
        decider_uid,
        decider: locked.decider,
        owner_uid: locked.run.owner_uid,
        require_second_approver: locked.run.require_second_approver,
        approved: approves,
        client_may_decide_anonymously: actor.may_decide_anonymously,
    })?;
    Ok(decided_by)
}

/// The approver tool gate (docs/design.md §4) over the calls this decision approves; denied calls release nothing.
fn gate_approval(
    locked: &RunForDecision,
    decider_uid: Option<i64>,
    verdicts: &Verdicts,
) -> Result<(), Refusal> {
    let released: Vec<gate::ApprovedCall> = verdicts
        .approved()
        .map(|verdict| gate::ApprovedCall {
            tool: &verdict.tool,
            effect: verdict.effect,
            edited: verdict.edited_arguments.is_some(),
        })
        .collect();
    let approver = match decider_uid {
        None => gate::Approver::Anonymous,
        Some(_) => gate::Approver::User {
            approvable_tools: locked.approvable_tools.as_deref(),
        },
    };
    gate::check(approver, &released)
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
    Ok(resumed)
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

/// Rebuilds a resumed turn from what is stored, byte for byte what its first answer was built from.
///
/// It reads through the caller's connection: a caller inside a transaction that holds a pool connection must not
/// wait for a second one, or as many such callers as the pool has connections wait for each other forever.
pub async fn load_resumed(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
    decision: DecisionRow,
) -> Result<Resumed, ResumeError> {
    let turn = load_turn(conn, sealer, run_id, decision.turn_index).await?;
    Ok(Resumed {
        run_id,
        decision,
        results: turn.results,
        transcript: turn.transcript,
        earlier_results: turn.earlier_results,
    })
}

/// A turn with every result stored (decided or expired), as the model input is rendered from it.
#[derive(Debug, Clone)]
pub struct ClosedTurn {
    pub results: Vec<ToolResult>,
    /// The transcript through the turn's assistant message.
    pub transcript: TranscriptText,
    pub earlier_results: Vec<ToolResult>,
}

/// Reads a closed turn through the caller's connection (see [`load_resumed`]).
pub async fn load_turn(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
) -> Result<ClosedTurn, ResumeError> {
    let calls = runs::calls(&mut *conn, sealer, run_id, turn_index).await?;
    let results = stored_results(&calls)?;
    let stored = runs::transcript_with_turns(&mut *conn, sealer, run_id).await?;
    let mut transcript = stored.transcript;
    if transcript.format() == ModelInputFormat::OpenAiChat {
        truncate_to_turn(&mut transcript, &calls)?;
    } else if turn_index < stored.turn_index {
        // A native transcript is not parsed to find the turn (docs/design.md §14): only the turn before the current one
        // is ever read while a later one is stored, and the append recorded where it ends.
        let end = stored
            .previous_turn_end
            .filter(|_| turn_index + 1 == stored.turn_index);
        let end = end.ok_or_else(|| {
            StorageError::Corrupt(format!(
                "run {run_id}: where turn {turn_index} ends is not recorded"
            ))
        })?;
        transcript
            .cut_at(end)
            .map_err(|error| StorageError::Corrupt(format!("run {run_id}: {error}")))?;
    }
    let earlier_results =
        stored_results(&runs::calls_before(&mut *conn, sealer, run_id, turn_index).await?)?;
    Ok(ClosedTurn {
        results,
        transcript,
        earlier_results,
    })
}

/// Cuts a transcript back to the assistant message that holds these calls, in case later turns were appended.
fn truncate_to_turn(
    transcript: &mut TranscriptText,
    calls: &[CallRow],
) -> Result<(), StorageError> {
    let Some(first) = calls.first() else {
        return Ok(());
    };
    transcript
        .truncate_to_call(&first.call_id)
        .map_err(|error| StorageError::Corrupt(error.to_string()))
}

fn stored_results(calls: &[CallRow]) -> Result<Vec<ToolResult>, StorageError> {
    calls.iter().map(stored_result).collect()
}

fn stored_result(call: &CallRow) -> Result<ToolResult, StorageError> {
    let missing = || {
        StorageError::Corrupt(format!(
            "call {} of a resumed turn has no result",
            call.call_id
        ))
    };
    Ok(ToolResult {
        call_id: call.call_id.clone(),
        tool: call.tool.clone(),
        outcome: call.outcome()?.ok_or_else(missing)?,
        is_error: call.is_error.ok_or_else(missing)?,
        content: call.content.clone().ok_or_else(missing)?,
        edited: call.edited_arguments.is_some(),
    })
}

/// The data of the event that closes `run`'s turn: `run.resumed` with the decision's verdict, or `run.expired`
/// with none (nobody decided).
fn closing_event(
    run: &RunRow,
    verdict: Option<&event_payloads::Verdict>,
) -> event_payloads::EventData {
    event_payloads::data(
        &event_payloads::RunFacts {
            run_id: run.id,
            tenant: &run.tenant,
            status: RunStatus::Resumed,
            format: run.format(),
            turn_index: run.turn_index,
            turn_digest: &run.turn_digest,
        },
        verdict,
    )
}

/// One tool event per call, filtered by the stricter of the service's and the run's privacy level. Redaction reads
/// every argument and result text, which is CPU work: at `redacted` it runs off the async workers.
async fn tool_events(
    resumer: &Resumer,
    run: &RunRow,
    calls: &[CallRow],
    results: &[ToolResult],
    decided_by: DecidedBy,
) -> Result<Vec<(i32, privacy::ToolEvent)>, ResumeError> {
    let level = resumer.privacy_floor.stricter(run.privacy_level());
    if level != PrivacyLevel::Redacted {
        return Ok(filtered_events(level, calls, results, decided_by));
    }
    let (calls, results) = (calls.to_vec(), results.to_vec());
    tokio::task::spawn_blocking(move || filtered_events(level, &calls, &results, decided_by))
        .await
        .map_err(|error| ResumeError::Redaction(error.to_string()))
}

fn filtered_events(
    level: PrivacyLevel,
    calls: &[CallRow],
    results: &[ToolResult],
    decided_by: DecidedBy,
) -> Vec<(i32, privacy::ToolEvent)> {
    calls
        .iter()
        .zip(results)
        .filter_map(|(call, result)| {
            // What ran: the edited arguments, if a decider edited them (payload, filtered like the proposed ones).
            privacy::tool_event(level, call.effective_arguments(), result, decided_by)
                .map(|event| (call.position, event))
        })
        .collect()
}
