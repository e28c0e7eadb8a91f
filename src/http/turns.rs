//! `POST /v1/runs/{id}/turns`: a resumed run is suspended again on its next assistant turn.

use std::collections::{HashMap, HashSet};

use sqlx::PgConnection;
use uuid::Uuid;

use axum::extract::State;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};

use super::body_budget::LargeBodyPlace;
use super::error::ApiError;
use super::extract::{Authorized, RunId, scope};
use super::format_members::{Members, RawMember, entries_text, well_formed};
use super::notify;
use super::runs::{
    ExpiryBody, actor_of, answer_after_rules, meaning_hash, run_view, with_effects, within_limits,
};
use super::worker_state::{self, JsonWithState};
use crate::domain::model_input::{ModelInputFormat, tool_messages_entries};
use crate::domain::native_input;
use crate::domain::token_view::Reader;
use crate::domain::transcript;
use crate::domain::vocabulary::{Effect, RunStatus};
use crate::resume::remembered::{self, RegisteredTurn};
use crate::resume::{ClosedTurn, load_turn};
use crate::state::AppState;
use crate::storage::runs::RunRow;
use crate::storage::{StorageError, outbox, runs};

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppendTurn {
    /// What followed the resumed model input, ending with the next assistant turn, in the run's format: `messages`
    /// (OpenAI chat, Anthropic), `input` (OpenAI Responses) or `contents` (Gemini), as the loop sent it.
    #[serde(
        default,
        deserialize_with = "super::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    messages: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "super::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    input: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "super::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    contents: Option<RawMember>,
    /// Refused: the system member is registered once, with the run. Named so that the refusal says so.
    #[serde(
        default,
        deserialize_with = "super::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    system: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "super::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    instructions: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "super::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    system_instruction: Option<RawMember>,
    /// When the turn expires: RFC 3339, or `approval_ttl_secs` from now; at most one ([`ExpiryBody`]).
    #[serde(
        default,
        deserialize_with = "super::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    expires_at: Option<String>,
    /// An integer as JSON Schema reads one: `60.0` is 60, as for uids (`http::integer`).
    #[serde(
        default,
        deserialize_with = "super::integer::json_optional",
        skip_serializing_if = "Option::is_none"
    )]
    approval_ttl_secs: Option<i64>,
    /// The worker's state at this turn (docs/design.md §15): replaces the run's; absent, the run has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    worker_state: Option<RawMember>,
    /// The people to mail when the turn waits (docs/design.md §20); left out of the hash when absent.
    #[serde(
        default,
        deserialize_with = "crate::http::integer::json_list_optional",
        skip_serializing_if = "Option::is_none"
    )]
    notify: Option<Vec<i64>>,
}

pub async fn append_turn(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsWrite>,
    RunId(id): RunId,
    place: LargeBodyPlace,
    JsonWithState(mut body): JsonWithState<AppendTurn>,
) -> Result<impl IntoResponse, ApiError> {
    well_formed(&[
        &body.messages,
        &body.system,
        &body.instructions,
        &body.input,
        &body.system_instruction,
        &body.contents,
    ])?;
    let expiry = ExpiryBody {
        expires_at: body.expires_at.clone(),
        approval_ttl_secs: body.approval_ttl_secs,
    }
    .resolve(state.limits.work.default_approval_ttl_secs)?;
    worker_state::within_limit(&state.limits, body.worker_state.as_ref())?;
    // Held to its limit first: the check parses it. A state serde_json reads as JSON but not into a value (a number
    // beyond a double, a lone surrogate) is refused as any other member is, not left to fail the body's hash.
    well_formed(&[&body.worker_state])?;
    let request_hash = meaning_hash(&body)?;
    let notify_uids = notify::checked(body.notify.as_deref())?.to_vec();
    let members = Members {
        messages: body.messages.take(),
        system: body.system.take(),
        instructions: body.instructions.take(),
        input: body.input.take(),
        system_instruction: body.system_instruction.take(),
        contents: body.contents.take(),
    };

    // A large body's handler runs at the lowest CPU priority (`large_body_threads`): what it does while it holds the
    // run's row lock, a cancel, claim or decision on the run waits for, and under a full CPU an idle-priority
    // thread gets a sliver of it. So the stored transcript is read and parsed, and the new turn checked against
    // it, before the lock is taken; under the lock the earlier work is used if the run is still at the turn it
    // was read at (a resumed turn's transcript and results change only with a new turn), else done again there.
    let earlier = match place.0 {
        Some(_) => earlier_turn(&state, &caller.tenant, id).await?,
        None => None,
    };
    let early_check = earlier.as_ref().map(|earlier| {
        let checked = members.check(earlier.format, false, &earlier.ids, earlier.calls);
        (earlier.turn_index, checked)
    });

    let mut tx = state.pool.begin().await?;
    let run = runs::lock(&mut tx, &caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    if run.turn_request_hash.as_deref() == Some(&request_hash[..]) {
        // The same append again, after it succeeded: answer the run as it stands, whatever its status (a turn its
        // remembered decisions decided at once has moved on), and never apply rules twice (docs/design.md §18).
        tx.rollback().await?;
        return Ok(axum::Json(run_view(&state, &run, Reader::Key).await?));
    }
    if run.status() != RunStatus::Resumed {
        return Err(ApiError::conflict(
            "not_resumed",
            format!(
                "a new turn follows a resumed run; this one is {}",
                run.status().as_str()
            ),
        ));
    }
    let format = run.format();
    let (resumed, checked) = match (earlier, early_check) {
        (Some(earlier), Some((turn_index, checked))) if turn_index == run.turn_index => {
            (earlier.resumed, checked?)
        }
        _ => {
            let earlier = read_earlier_turn(&mut tx, &state, &run).await?;
            let checked = members.check(format, false, &earlier.ids, earlier.calls)?;
            (earlier.resumed, checked)
        }
    };
    within_limits(&state, &checked.calls)?;
    let declared: HashMap<&str, Effect> = run
        .tools
        .0
        .iter()
        .map(|tool| (tool.name.as_str(), tool.effect))
        .collect();
    let calls = with_effects(&state, &declared, checked.calls);
    let digest = transcript::turn_digest(
        &calls
            .iter()
            .map(|(call, _)| call.clone())
            .collect::<Vec<_>>(),
    );

    // The results in the run's format, then what the loop sent, as it sent it.
    let results = match format {
        ModelInputFormat::OpenAiChat => tool_messages_entries(&resumed.results),
        _ => native_input::results_text(format, &resumed.results),
    };
    let entries = entries_text(checked.list);
    let mut appended = String::with_capacity(results.len() + entries.len() + 3);
    appended.push('[');
    appended.push_str(std::str::from_utf8(&results).map_err(ApiError::internal)?);
    appended.push(',');
    appended.push_str(entries);
    appended.push(']');
    let turn_index = run.turn_index + 1;
    let run = runs::append_turn(
        &mut tx,
        state.pool.sealer(),
        run.id,
        &appended,
        runs::NextTurn {
            turn_index,
            turn_digest: &digest,
            request_hash: &request_hash,
            expiry,
        },
    )
    .await?;
    runs::insert_calls(&mut tx, state.pool.sealer(), run.id, turn_index, &calls).await?;
    worker_state::replace_on_turn(&mut tx, &state, run.id, body.worker_state.as_ref()).await?;
    let tools: Vec<&str> = calls.iter().map(|(call, _)| call.name.as_str()).collect();
    let by_rules = remembered::decide_by_rules(
        &mut tx,
        &state.resumer,
        &actor_of(&caller),
        &run,
        &tools,
        RegisteredTurn::NextTurn,
    )
    .await?;
    let mut notified = None;
    if by_rules.is_none() {
        outbox::record_status(&mut tx, &run).await?;
        notified = notify::queue(&mut tx, &run, &notify_uids).await?;
    }
    tx.commit().await?;
    state.events.committed();
    tracing::info!(run_id = %run.id, turn = turn_index, calls = calls.len(), "run suspended on a new turn");
    let mut view = answer_after_rules(&state, &caller, run, by_rules, place).await?;
    view.notify = notified;
    Ok(axum::Json(view))
}

/// A resumed run's last turn as a new turn follows it: its transcript and results, and the run's call ids so far.
struct EarlierTurn {
    turn_index: i32,
    format: ModelInputFormat,
    resumed: ClosedTurn,
    ids: HashSet<String>,
    calls: usize,
}

/// The run's last turn, read without a lock, if the run is resumed (else the lock's checks answer).
async fn earlier_turn(
    state: &AppState,
    tenant: &str,
    id: Uuid,
) -> Result<Option<EarlierTurn>, ApiError> {
    let Some(run) = runs::find(&state.pool, tenant, id).await? else {
        return Ok(None);
    };
    if run.status() != RunStatus::Resumed {
        return Ok(None);
    }
    // A transaction of its own, as every read of several statements here (behind a pooler, one connection).
    let mut tx = state.pool.begin().await?;
    let earlier = read_earlier_turn(&mut tx, state, &run).await?;
    tx.rollback().await?;
    Ok(Some(earlier))
}

/// The run's last turn, read through `conn`.
async fn read_earlier_turn(
    conn: &mut PgConnection,
    state: &AppState,
    run: &RunRow,
) -> Result<EarlierTurn, ApiError> {
    // The turn ended by a decision or by expiry; either way every call has its stored result.
    let resumed = load_turn(
        &mut *conn,
        state.pool.sealer(),
        run.id,
        run.turn_index,
        None,
    )
    .await?;
    let format = run.format();
    let (ids, calls) = if format == ModelInputFormat::OpenAiChat {
        let earlier = resumed
            .transcript
            .values()
            .map_err(|error| StorageError::Corrupt(format!("run {}: {error}", run.id)))?;
        (transcript::call_ids(&earlier), 0)
    } else {
        // A native transcript is not parsed: the run's calls so far are its stored ones.
        let ids = runs::call_ids(&mut *conn, run.id).await?;
        let count = ids.len();
        (ids.into_iter().collect(), count)
    };
    Ok(EarlierTurn {
        turn_index: run.turn_index,
        format,
        resumed,
        ids,
        calls,
    })
}
