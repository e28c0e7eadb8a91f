//! `POST /v1/runs/{id}/claim`: a worker's claim on the calls a decision released to it, or the renewal of its claim
//! (docs/design.md §15, "Claims"). API keys only (`runs:write`), like the results it covers; the rules and the write
//! are `resume::claims`'.

use axum::extract::State;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Authorized, Json, RunId, scope};
use super::views::ReleasedCallView;
use crate::domain::token_view::Audience;
use crate::resume::claims::{Claimed, claim};
use crate::state::AppState;

/// `{}` for a new claim, `{"claim_id": …}` to renew that one.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    #[serde(default, deserialize_with = "super::not_null::present")]
    claim_id: Option<Uuid>,
}

/// A claim granted or renewed.
#[derive(Debug, Serialize)]
pub struct ClaimView {
    pub claim_id: Uuid,
    /// When the claim lapses unless renewed, on the database's clock (RFC 3339, UTC).
    pub until: DateTime<Utc>,
    /// The calls the claim covers, as `GET /v1/runs/{id}` shows them.
    pub released_calls: Vec<ReleasedCallView>,
}

pub async fn post(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsWrite>,
    RunId(id): RunId,
    Json(body): Json<ClaimBody>,
) -> Result<impl IntoResponse, ApiError> {
    let claimed = claim(&state.resumer, &caller.tenant, id, body.claim_id).await;
    // A refusal may follow a lapse the claim wrote (`run.resumed`): feed readers are nudged either way, a needless
    // nudge costing one poll.
    state.events.committed();
    let Claimed {
        claim_id,
        until,
        released_calls,
    } = claimed?;
    // Only API keys claim: a key sees the calls whole, at every privacy level.
    Ok(axum::Json(ClaimView {
        claim_id,
        until,
        released_calls: ReleasedCallView::all(released_calls, Audience::KEY),
    }))
}
