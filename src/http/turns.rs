//! `POST /v1/runs/{id}/turns`: a resumed run is suspended again on its next assistant turn.

use std::collections::HashMap;

use axum::extract::State;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::extract::{Authorized, Json, RunId, scope};
use super::runs::{ExpiryBody, run_view, with_effects, within_limits};
use crate::domain::model_input::tool_messages;
use crate::domain::tokens::{Effect, RunStatus};
use crate::domain::transcript;
use crate::resume::load_turn;
use crate::state::AppState;
use crate::storage::{StorageError, events, runs};

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppendTurn {
    /// What followed the resumed model input, ending with the next assistant turn.
    messages: Vec<Value>,
    /// When the turn expires: RFC 3339, or `approval_ttl_secs` from now; at most one ([`ExpiryBody`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    /// An integer as JSON Schema reads one: `60.0` is 60, as for uids (`http::integer`).
    #[serde(
        default,
        deserialize_with = "super::integer::json_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    approval_ttl_secs: Option<i64>,
}

pub async fn append_turn(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsWrite>,
    RunId(id): RunId,
    Json(body): Json<AppendTurn>,
) -> Result<impl IntoResponse, ApiError> {
    let expiry = ExpiryBody {
        expires_at: body.expires_at.clone(),
        approval_ttl_secs: body.approval_ttl_secs,
    }
    .resolve(state.limits.work.default_approval_ttl_secs)?;
    let request_hash: [u8; 32] =
        Sha256::digest(serde_json::to_vec(&body).map_err(ApiError::internal)?).into();

    let mut tx = state.pool.begin().await?;
    let run = runs::lock(&mut tx, &caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    if run.status() == RunStatus::WaitingForApproval
        && run.turn_request_hash.as_deref() == Some(&request_hash[..])
    {
        // The same append again, after it succeeded: answer the run as it stands.
        tx.rollback().await?;
        return Ok(axum::Json(run_view(&state, &run).await?));
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
    // The turn ended by a decision or by expiry; either way every call has its stored result.
    let resumed = load_turn(&mut tx, state.pool.sealer(), run.id, run.turn_index).await?;
    let earlier = resumed
        .transcript
        .values()
        .map_err(|error| StorageError::Corrupt(format!("run {}: {error}", run.id)))?;
    let earlier_ids = transcript::call_ids(&earlier);
    let pending = transcript::validate(&body.messages, &earlier_ids)
        .map_err(|error| ApiError::unprocessable("invalid_transcript", error.to_string()))?;
    within_limits(&state, &pending)?;
    let declared: HashMap<&str, Effect> = run
        .tools
        .0
        .iter()
        .map(|tool| (tool.name.as_str(), tool.effect))
        .collect();
    let calls = with_effects(&state, &declared, pending);
    let digest = transcript::turn_digest(
        &calls
            .iter()
            .map(|(call, _)| call.clone())
            .collect::<Vec<_>>(),
    );

    let mut appended = tool_messages(&resumed.results);
    appended.extend(body.messages);
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
    events::record_status(&mut tx, &run).await?;
    tx.commit().await?;
    state.events.committed();
    tracing::info!(run_id = %run.id, turn = turn_index, calls = calls.len(), "run suspended on a new turn");
    Ok(axum::Json(run_view(&state, &run).await?))
}
