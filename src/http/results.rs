//! `POST /v1/runs/{id}/results`: the worker's results of the calls a decision released to it (docs/design.md §15).
//! API keys only (`runs:write`), under the poster's live claim (`claim_id`, `http::claims`); the rules and the write
//! are `resume::results`'; the answer is the run as `GET /v1/runs/{id}` shows it.

use axum::extract::State;
use axum::response::IntoResponse;
use serde::Deserialize;
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Authorized, Json, RunId, scope};
use super::runs::run_view;
use crate::domain::token_view::Reader;
use crate::resume::results::{PostedResult, post_results};
use crate::state::AppState;
use crate::storage::runs;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsBody {
    /// The poster's live claim (docs/design.md §15); absent, a result not stored before is refused `claim_required`.
    #[serde(default, deserialize_with = "super::not_null::present")]
    claim_id: Option<Uuid>,
    results: Vec<ResultBody>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultBody {
    call_id: String,
    content: String,
    is_error: bool,
}

pub async fn post(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsWrite>,
    RunId(id): RunId,
    Json(body): Json<ResultsBody>,
) -> Result<impl IntoResponse, ApiError> {
    if body.results.is_empty() {
        return Err(ApiError::unprocessable(
            "invalid_body",
            "results must hold at least one result",
        ));
    }
    let posted: Vec<PostedResult> = body
        .results
        .into_iter()
        .map(|result| PostedResult {
            call_id: result.call_id,
            content: result.content,
            is_error: result.is_error,
        })
        .collect();
    if post_results(&state.resumer, &caller.tenant, id, body.claim_id, &posted).await? {
        state.events.committed();
    }
    let run = runs::find(&state.pool, &caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    Ok(axum::Json(run_view(&state, &run, Reader::Key).await?))
}
