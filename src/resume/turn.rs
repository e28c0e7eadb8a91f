//! A turn as its decision or expiry leaves it: the resumed turn an answer is built from, read back byte for byte
//! as it was first answered ([`load_resumed`], [`load_turn`]), and what closing a turn writes besides its results
//! (the closing event, the tool events at the run's privacy level). The approve path, the deny's write and the
//! sweeper close turns with these; the model-input route reads them back.

use sqlx::PgConnection;
use uuid::Uuid;

use super::error::ResumeError;
use super::resumer::Resumer;
use crate::domain::event_payloads;
use crate::domain::model_input::ModelInputFormat;
use crate::domain::privacy;
use crate::domain::released::{self, PostedContent, ReleasedCall};
use crate::domain::results::ToolResult;
use crate::domain::transcript_text::TranscriptText;
use crate::domain::vocabulary::{DecidedBy, PrivacyLevel, RunStatus};
use crate::sealing::Sealer;
use crate::storage::StorageError;
use crate::storage::decision_record::DecisionRow;
use crate::storage::runs::{self, CallRow, RunRow};

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
    /// The turn's calls released to the worker (docs/design.md §15), each with its result once posted; `results`
    /// holds only the calls that have one. Empty for a turn that released nothing.
    pub released: Vec<ReleasedCall>,
    /// The run was cancelled while its released calls waited: nothing of the turn is to be run any more.
    pub cancelled: bool,
}

impl Resumed {
    /// `released` while a released call waits for its result, `resumed` once every call has one; `cancelled` for a
    /// run cancelled while a released call waited, whose calls nobody may run any more (docs/design.md §15).
    pub fn status(&self) -> RunStatus {
        match self.released.iter().any(|call| call.result.is_none()) {
            true if self.cancelled => RunStatus::Cancelled,
            true => RunStatus::Released,
            false => RunStatus::Resumed,
        }
    }

    /// This turn in a run whose status is `run`: cancelled while released, if it was.
    pub(super) fn in_run(self, run: RunStatus) -> Self {
        Resumed {
            cancelled: run == RunStatus::Cancelled,
            ..self
        }
    }

    /// Whether the turn has a model input: not while released calls wait for results that may never come.
    pub fn has_model_input(&self) -> bool {
        self.released.iter().all(|call| call.result.is_some())
    }

    /// A turn resumed by this decision, answered from what it read of the run, so the answer is built
    /// from the very rows a replay later rebuilds it from ([`load_resumed`]), without reading them again.
    pub(super) fn from_reads(
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
            released: Vec::new(),
            cancelled: false,
        })
    }

    /// This turn with the calls it released.
    pub(super) fn with_released(self, released: Vec<ReleasedCall>) -> Self {
        Resumed { released, ..self }
    }
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
    let edited_by = Some(decision.decided_by()?);
    let turn = load_turn(conn, sealer, run_id, decision.turn_index, edited_by).await?;
    Ok(Resumed {
        run_id,
        decision,
        results: turn.results,
        transcript: turn.transcript,
        earlier_results: turn.earlier_results,
        released: turn.released,
        cancelled: false,
    })
}

/// A turn with every result stored (decided or expired), as the model input is rendered from it; or a released turn
/// (docs/design.md §15), whose released calls may still wait for theirs.
#[derive(Debug, Clone)]
pub struct ClosedTurn {
    /// The results of the calls that have one, in the turn's order: every call's, but while released calls wait.
    pub results: Vec<ToolResult>,
    /// The transcript through the turn's assistant message.
    pub transcript: TranscriptText,
    pub earlier_results: Vec<ToolResult>,
    /// The calls the turn released to the worker.
    pub released: Vec<ReleasedCall>,
}

/// Reads a closed (or released) turn through the caller's connection (see [`load_resumed`]). `edited_by`, who decided
/// the turn, shows an edited released call's result without its edit note; `None` where the released calls are not
/// looked at.
pub async fn load_turn(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
    edited_by: Option<DecidedBy>,
) -> Result<ClosedTurn, ResumeError> {
    let calls = runs::calls(&mut *conn, sealer, run_id, turn_index).await?;
    let released = released_calls(&calls, edited_by);
    // A call without a result is a corrupt row, but a released one whose result the worker has not posted.
    let results = calls
        .iter()
        .filter(|call| call.outcome.is_some() || !call.is_released())
        .map(stored_result)
        .collect::<Result<Vec<_>, _>>()?;
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
        released,
    })
}

/// The calls of `calls` released to the worker, as they are shown (docs/design.md §15): the arguments to run, and the
/// worker's result once posted (without the edit note of an edited call, when `edited_by` says who decided).
pub fn released_calls(calls: &[CallRow], edited_by: Option<DecidedBy>) -> Vec<ReleasedCall> {
    calls
        .iter()
        .filter(|call| call.is_released())
        .map(|call| {
            let edit = edited_by.zip(call.edited_arguments.as_deref());
            let result = call
                .content
                .as_deref()
                .zip(call.is_error)
                .map(|(content, is_error)| PostedContent {
                    content: released::posted_content(content, edit).to_owned(),
                    is_error,
                });
            ReleasedCall {
                call_id: call.call_id.clone(),
                tool: call.tool.clone(),
                arguments: Some(call.effective_arguments().to_owned()),
                edited: call.edited_arguments.is_some(),
                result,
            }
        })
        .collect()
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

/// The results a turn's calls hold so far, in the turn's order: none while it waits, every call's once it is resumed,
/// and, while it is released, the calls it did not release and those whose worker result is posted.
pub fn recorded_results(calls: &[CallRow]) -> Result<Vec<ToolResult>, StorageError> {
    calls
        .iter()
        .filter(|call| call.outcome.is_some())
        .map(stored_result)
        .collect()
}

pub(super) fn stored_results(calls: &[CallRow]) -> Result<Vec<ToolResult>, StorageError> {
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
pub(super) fn closing_event(
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
            source: run.source.as_deref(),
        },
        verdict,
    )
}

/// One tool event per call, filtered by the stricter of the service's and the run's privacy level. Redaction reads
/// every argument and result text, which is CPU work: at `redacted` it runs off the async workers.
pub(super) async fn tool_events(
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
