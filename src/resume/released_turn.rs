//! Closing a released turn (docs/design.md §15) once every released call has its result, whoever gave it: the
//! worker's last result (`results`), or the `interrupted` results of a lapsed claim (`lapses`). One statement stores
//! the new results, writes every released call's tool event at the run's privacy level, resumes the run and records
//! `run.resumed`; the claim the turn was worked under ends with it. The caller holds the run's row lock.

use sqlx::PgConnection;

use super::error::ResumeError;
use super::resumer::Resumer;
use super::turn::{closing_event, stored_results, tool_events};
use crate::domain::event_payloads;
use crate::domain::results::ToolResult;
use crate::storage::claims;
use crate::storage::decision_record::DecisionRow;
use crate::storage::decision_statements::{self, ClosingTurn};
use crate::storage::runs::{CallRow, RunRow};

/// Closes `run`'s released turn: `calls` as read under the lock, `new` the `(position, result)` of every released
/// call that had none, `decision` the turn's.
pub async fn close(
    conn: &mut PgConnection,
    resumer: &Resumer,
    run: &RunRow,
    calls: &[CallRow],
    new: &[(i32, ToolResult)],
    decision: &DecisionRow,
) -> Result<(), ResumeError> {
    let sealer = resumer.pool.sealer();
    let decided_by = decision.decided_by()?;
    // Every call as it is once this commits: the turn's results and the released calls' tool events.
    let mut closed: Vec<CallRow> = calls.to_vec();
    for (position, result) in new {
        if let Some(call) = closed.iter_mut().find(|c| c.position == *position) {
            call.outcome = Some(result.outcome.as_str().to_owned());
            call.is_error = Some(result.is_error);
            call.content = Some(result.content.clone());
        }
    }
    let results = stored_results(&closed)?;
    let released: Vec<CallRow> = closed.iter().filter(|c| c.is_released()).cloned().collect();
    let released_results = stored_results(&released)?;
    let events = tool_events(resumer, run, &released, &released_results, decided_by).await?;
    let resumed_event = closing_event(
        run,
        Some(&event_payloads::Verdict {
            decided_by,
            decider_uid: decision.decider_uid,
            approved: decision.approved,
            outcomes: results.iter().map(|result| result.outcome).collect(),
        }),
    );
    let positioned: Vec<(i32, &ToolResult)> = new.iter().map(|(p, r)| (*p, r)).collect();
    let closing = ClosingTurn {
        run,
        sealer,
        results: &positioned,
        events: &events,
        resumed_event: &resumed_event,
    };
    decision_statements::close_turn(conn, &closing).await?;
    claims::end(conn, run.id, run.turn_index).await?;
    Ok(())
}
