//! `POST /v1/runs/{id}/links` and `DELETE /v1/runs/{id}/links/{link_id}`: approval links made and revoked by a key
//! holding `decisions:write` (docs/design.md §20). The URL is in the answer that made the link, and nowhere else.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Authorized, Json, RunId, scope};
use crate::approval_links::{self, LinkFor, MakeError};
use crate::domain::authorize::{DecisionAsk, authorize};
use crate::domain::vocabulary::RunStatus;
use crate::state::AppState;
use crate::storage::links;
use crate::storage::runs;
use crate::storage::users;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MakeLink {
    /// The person the link decides as; an integer as JSON Schema reads one (`7.0` is 7).
    #[serde(deserialize_with = "super::integer::json")]
    uid: i64,
}

#[derive(Debug, Serialize)]
pub struct LinkView {
    id: Uuid,
    /// Shown only in this answer: whoever holds it decides as `uid`. Never put it where a model can read it.
    url: String,
    expires_at: DateTime<Utc>,
}

/// `POST /v1/runs/{id}/links`: a link for `uid`, who must be allowed to decide the run now (docs/design.md §4), to
/// its waiting turn.
pub async fn make(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::DecisionsWrite>,
    RunId(run_id): RunId,
    Json(body): Json<MakeLink>,
) -> Result<impl IntoResponse, ApiError> {
    if state.links.public_url.is_none() {
        return Err(public_url_unset());
    }
    if body.uid < 1 {
        return Err(ApiError::unprocessable(
            "invalid_uid",
            "uid must be a uid of at least 1",
        ));
    }
    let run = runs::find(&state.pool, &caller.tenant, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    if run.status() != RunStatus::WaitingForApproval {
        return Err(ApiError::conflict(
            "not_awaiting_approval",
            "the run is not waiting for approval: a link decides only a waiting turn",
        )
        .with_member("run_status", run.status()));
    }
    let user = users::find(&state.pool, &caller.tenant, body.uid).await?;
    // The right to decide the run at all (§4), as a decision by that person would be judged; what they may approve
    // is the page's to show and the decision's to check.
    authorize(&DecisionAsk {
        decider_uid: Some(body.uid),
        decider: user.as_ref().map(|user| user.facts()),
        owner_uid: run.owner_uid,
        require_second_approver: false,
        approved: false,
        client_may_decide_anonymously: false,
    })?;
    let made = approval_links::make(
        &state.pool,
        &state.links,
        &LinkFor {
            tenant: &caller.tenant,
            run_id,
            turn_index: run.turn_index,
            turn_digest: &run.turn_digest,
            uid: body.uid,
            made_by: &caller.name,
        },
    )
    .await
    .map_err(|error| match error {
        MakeError::PublicUrlUnset => public_url_unset(),
        MakeError::Storage(error) => error.into(),
    })?;
    Ok((
        StatusCode::CREATED,
        axum::Json(LinkView {
            id: made.id,
            url: made.url,
            expires_at: made.expires_at,
        }),
    ))
}

/// `DELETE /v1/runs/{id}/links/{link_id}`: the link decides nothing from now on. 204, also when it was revoked
/// already; 404 for a link of another run or tenant.
pub async fn revoke(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::DecisionsWrite>,
    Path((run_id, link_id)): Path<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let not_found = || ApiError::not_found("link");
    let run_id = Uuid::parse_str(&run_id).map_err(|_| not_found())?;
    let link_id = Uuid::parse_str(&link_id).map_err(|_| not_found())?;
    if links::revoke(&state.pool, &caller.tenant, run_id, link_id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found())
    }
}

fn public_url_unset() -> ApiError {
    ApiError::conflict(
        "public_url_unset",
        "PUBLIC_URL is not set: the service does not know the address people reach it at, so it makes no links",
    )
}
