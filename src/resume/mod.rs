//! Recording a decision and resuming the run: the rules of DESIGN.md §4 and §5 over the run's row lock.
//!
//! A decision is never cancelled half-way, in particular never inside `BEGIN`, where sqlx 0.9 would return the
//! connection to the pool still inside a transaction (transact-rs/sqlx#4393): the HTTP layer runs every handler
//! to completion in a task of its own (`http::detach`), and a client that disconnects or an HTTP timeout only
//! stops the wait for the answer.

pub mod approve;

use std::time::Duration;

use crate::storage::Database;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

pub use approve::{finish_turn, spawn_recovery};

use crate::domain::authorize::{self, DecisionAsk, Refusal};
use crate::domain::events;
use crate::domain::gate;
use crate::domain::privacy;
use crate::domain::results::{self, ToolResult};
use crate::domain::tokens::{DecidedBy, DenialReason, Effect, PrivacyLevel, RunStatus};
use crate::executor::Executors;
use crate::metrics;
use crate::sealing::Sealer;
use crate::storage::StorageError;
use crate::storage::deciding::{self, ClosingTurn, LockedRun};
use crate::storage::decisions::{self, DecisionRow, NewDecision};
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

/// A decision as the client posted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRequest {
    pub run_id: Uuid,
    pub approved: bool,
    pub decider_uid: Option<i64>,
    pub turn_digest: String,
    pub reason: Option<DenialReason>,
}

/// A resumed turn: everything the answer and the model input are rendered from, all of it as stored.
#[derive(Debug, Clone)]
pub struct Resumed {
    pub run_id: Uuid,
    pub decision: DecisionRow,
    pub results: Vec<ToolResult>,
    /// The transcript through the decided turn's assistant message.
    pub transcript: Vec<Value>,
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
pub async fn decide(
    resumer: &Resumer,
    actor: &Actor,
    request: &DecisionRequest,
) -> Result<Resumed, ResumeError> {
    let mut tx = resumer.pool.begin().await?;
    // A deny answers the transcript from this same read; an approval reads it after its tools ran.
    let locked = deciding::lock_run(
        &mut tx,
        resumer.pool.sealer(),
        &actor.tenant,
        request.run_id,
        request.decider_uid,
        !request.approved,
    )
    .await?
    .ok_or(ResumeError::RunNotFound)?;
    let run = &locked.run;
    // The same decision again is answered from what was recorded, before today's rules about the decider: it was
    // authorized when it won (DESIGN.md §5), and a 403 would say nothing was recorded (§4), which is untrue once the
    // decider has been disabled or lost the grant since.
    if let Some(existing) = &locked.decision
        && is_same_decision(existing, request)?
    {
        let existing = existing.clone();
        tx.rollback().await?;
        return replay(resumer, &locked.run, existing, request).await;
    }
    let decided_by = authorize_decider(actor, &locked, request)?;
    gate_approval(resumer, &locked, request)?;

    if request.turn_digest != run.turn_digest {
        return Err(ResumeError::StaleTurn);
    }
    if let Some(existing) = locked.decision {
        tx.rollback().await?;
        return replay(resumer, &locked.run, existing, request).await;
    }
    if run.status() != RunStatus::WaitingForApproval {
        return Err(ResumeError::NotAwaitingApproval);
    }

    let new_decision = NewDecision {
        run_id: run.id,
        turn_index: run.turn_index,
        approved: request.approved,
        decider_uid: request.decider_uid,
        decided_by,
        reason: request.reason,
        turn_digest: &run.turn_digest,
        client_name: &actor.client_name,
        token_kid: actor.token_kid.as_deref(),
    };

    if request.approved {
        decisions::insert(&mut tx, &new_decision).await?;
        runs::start_resuming(&mut tx, run.id, resumer.instance_id, resumer.lease()).await?;
        tx.commit().await?;
        metrics::decision(true, decided_by.as_str());
        tracing::info!(run_id = %run.id, turn = run.turn_index, decided_by = decided_by.as_str(), "turn approved");
        return finish_turn(resumer, &actor.tenant, run.id).await;
    }

    let (calls, earlier_calls) =
        deciding::calls_through(&mut tx, resumer.pool.sealer(), run.id, run.turn_index).await?;
    let results: Vec<ToolResult> = calls
        .iter()
        .map(|call| {
            results::denied(
                &call.call_id,
                &call.tool,
                resumer.executors.effect(&call.tool, Some(call.effect())),
                decided_by,
                request.reason,
            )
        })
        .collect();
    let positioned: Vec<(i32, &ToolResult)> = calls
        .iter()
        .map(|c| c.position)
        .zip(results.iter())
        .collect();
    let events = tool_events(resumer, run, &calls, &results, decided_by).await?;
    let resumed_event = resumed_event(
        run,
        events::Verdict {
            decided_by,
            decider_uid: request.decider_uid,
            approved: false,
            outcomes: results.iter().map(|result| result.outcome).collect(),
        },
    );
    let closing = ClosingTurn {
        run,
        sealer: resumer.pool.sealer(),
        results: &positioned,
        events: &events,
        resumed_event: &resumed_event,
    };
    let decision = deciding::record_denial(&mut tx, &new_decision, &closing).await?;
    tx.commit().await?;
    metrics::decision(false, decided_by.as_str());
    tracing::info!(run_id = %run.id, turn = run.turn_index, decided_by = decided_by.as_str(), "turn denied");
    Resumed::from_reads(run.id, decision, results, locked.transcript, &earlier_calls)
}

impl Resumed {
    /// A turn resumed by this transaction, answered from what it read under the run's lock, so the answer is built
    /// from the very rows a replay later rebuilds it from ([`load_resumed`]), without reading them again.
    fn from_reads(
        run_id: Uuid,
        decision: DecisionRow,
        results: Vec<ToolResult>,
        transcript: Option<Vec<Value>>,
        earlier_calls: &[CallRow],
    ) -> Result<Self, ResumeError> {
        let transcript = transcript.ok_or_else(|| {
            StorageError::Corrupt("the transcript asked for with the run was not read".into())
        })?;
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
fn authorize_decider(
    actor: &Actor,
    locked: &LockedRun,
    request: &DecisionRequest,
) -> Result<DecidedBy, ResumeError> {
    let decided_by = authorize::authorize(&DecisionAsk {
        decider_uid: request.decider_uid,
        decider: locked.decider,
        owner_uid: locked.run.owner_uid,
        require_second_approver: locked.run.require_second_approver,
        approved: request.approved,
        client_may_decide_anonymously: actor.may_decide_anonymously,
    })?;
    Ok(decided_by)
}

/// The approver tool gate (DESIGN.md §4) over the calls an approval releases, which today is every call of the
/// turn; a denial releases none.
fn gate_approval(
    resumer: &Resumer,
    locked: &LockedRun,
    request: &DecisionRequest,
) -> Result<(), Refusal> {
    if !request.approved {
        return Ok(());
    }
    let released: Vec<gate::ApprovedCall> = locked
        .turn_tools
        .iter()
        .map(|(tool, effect)| gate::ApprovedCall {
            tool,
            effect: resumer.executors.effect(tool, Effect::parse(effect)),
        })
        .collect();
    let approver = match request.decider_uid {
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
    request: &DecisionRequest,
) -> Result<Resumed, ResumeError> {
    let same = is_same_decision(&existing, request)?;
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

/// Whether a request is the recorded decision again: same approved, decider, digest and reason.
fn is_same_decision(
    existing: &DecisionRow,
    request: &DecisionRequest,
) -> Result<bool, ResumeError> {
    Ok(existing.approved == request.approved
        && existing.decider_uid == request.decider_uid
        && existing.turn_digest == request.turn_digest
        && existing.reason()? == request.reason)
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
    let calls = runs::calls(&mut *conn, sealer, run_id, decision.turn_index).await?;
    let results = stored_results(&calls)?;
    let mut transcript = runs::messages(&mut *conn, sealer, run_id).await?;
    truncate_to_turn(&mut transcript, &calls);
    let earlier_results = stored_results(
        &runs::calls_before(&mut *conn, sealer, run_id, decision.turn_index).await?,
    )?;
    Ok(Resumed {
        run_id,
        decision,
        results,
        transcript,
        earlier_results,
    })
}

/// Cuts a transcript back to the assistant message that holds these calls, in case later turns were appended.
fn truncate_to_turn(transcript: &mut Vec<Value>, calls: &[CallRow]) {
    let Some(first) = calls.first() else { return };
    let holds_call = |message: &Value| {
        message["tool_calls"].as_array().is_some_and(|tool_calls| {
            tool_calls
                .iter()
                .any(|call| call["id"] == first.call_id.as_str())
        })
    };
    if let Some(turn_at) = transcript.iter().rposition(holds_call) {
        transcript.truncate(turn_at + 1);
    }
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
    })
}

/// The data of the `run.resumed` event that closes `run`'s turn with these results.
fn resumed_event(run: &RunRow, verdict: events::Verdict) -> Value {
    events::data(
        &events::RunFacts {
            run_id: run.id,
            tenant: &run.tenant,
            status: RunStatus::Resumed,
            turn_index: run.turn_index,
            turn_digest: &run.turn_digest,
        },
        Some(&verdict),
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
            privacy::tool_event(level, &call.arguments, result, decided_by)
                .map(|event| (call.position, event))
        })
        .collect()
}
