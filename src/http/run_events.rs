//! `GET /v1/runs/{id}/events`: the approval and tool events of a run as stored, for an auditor.

use axum::extract::State;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Authorized, RunId, scope};
use crate::domain::verdicts::RecordedVerdict;
use crate::state::AppState;
use crate::storage::decision_record::{self, StoredExpiry, StoredToolEvent};
use crate::storage::runs;

#[derive(Debug, Serialize)]
struct EventsView {
    run_id: Uuid,
    approval_events: Vec<ApprovalEventView>,
    tool_events: Vec<StoredToolEvent>,
    /// Turns that expired without a decision: not decisions, so not approval events.
    expiries: Vec<StoredExpiry>,
}

#[derive(Debug, Serialize)]
struct ApprovalEventView {
    turn_index: i32,
    /// `null` for a decision that approved some calls and denied others.
    approved: Option<bool>,
    decider_uid: Option<i64>,
    decided_by: String,
    reason: Option<String>,
    turn_digest: String,
    client_name: String,
    /// `api_key` or `token`: the credential the decision was posted with.
    credential: &'static str,
    /// The `kid` of the token's signing key, for a decision posted with a token.
    token_kid: Option<String>,
    decided_at: DateTime<Utc>,
    /// Per call: verdict, reason, whether edited and the SHA-256 of the edited arguments; never the arguments.
    calls: Vec<RecordedVerdict>,
}

pub async fn list_events(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsRead>,
    RunId(run_id): RunId,
) -> Result<impl IntoResponse, ApiError> {
    let run = runs::find(&state.pool, &caller.tenant, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    let approval_events = decision_record::all_of_run(&state.pool, run.id)
        .await?
        .into_iter()
        .map(|row| ApprovalEventView {
            turn_index: row.turn_index,
            approved: row.approved,
            decider_uid: row.decider_uid,
            decided_by: row.decided_by,
            reason: row.reason,
            turn_digest: row.turn_digest,
            client_name: row.client_name,
            credential: if row.token_kid.is_some() {
                "token"
            } else {
                "api_key"
            },
            token_kid: row.token_kid,
            decided_at: row.decided_at,
            calls: row.calls.0,
        })
        .collect();
    let tool_events =
        decision_record::tool_events_of_run(&state.pool, state.pool.sealer(), run.id).await?;
    let expiries = decision_record::expiries_of_run(&state.pool, run.id).await?;
    Ok(axum::Json(EventsView {
        run_id: run.id,
        approval_events,
        tool_events,
        expiries,
    }))
}
