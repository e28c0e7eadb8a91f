//! `POST /v1/runs/{id}/decision` and `GET /v1/runs/{id}/model-input`: deciding a turn and reading what it resumed.

use axum::extract::State;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Credential, Json, KeyOrToken, Query, RunId, scope};
use super::integer;
use super::views::DecisionView;
use super::visible;
use crate::domain::model_input::{self, ModelInputFormat};
use crate::domain::results::ToolResult;
use crate::domain::scopes::Scope;
use crate::domain::tokens::{DenialReason, RunStatus};
use crate::resume::{self, Actor, DecisionRequest, Resumed};
use crate::state::AppState;
use crate::storage::decisions;
use axum::http::StatusCode;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    approved: bool,
    /// Required with an API key, and `null` on purpose: a decision by nobody must be said, not forgotten. With a
    /// decision token it may be left out: the token's `sub` is the decider (`Some(None)` is an explicit `null`).
    #[serde(default, deserialize_with = "present_json_or_null")]
    decider_uid: Option<Option<i64>>,
    turn_digest: String,
    #[serde(default)]
    reason: Option<DenialReason>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormatQuery {
    #[serde(default)]
    format: ModelInputFormat,
}

/// The answer to a decision: built only from stored rows, so the same decision again gets the same bytes.
#[derive(Debug, Serialize)]
pub struct DecisionAnswer {
    run_id: Uuid,
    /// The status the decision brought the run to.
    status: RunStatus,
    decision: DecisionView,
    results: Vec<ToolResult>,
    model_input: Value,
}

impl DecisionAnswer {
    fn of(resumed: Resumed, format: ModelInputFormat) -> Result<Self, ApiError> {
        let model_input = model_input::render(
            format,
            &resumed.transcript,
            &resumed.results,
            &resumed.earlier_results,
        );
        Ok(DecisionAnswer {
            run_id: resumed.run_id,
            status: RunStatus::Resumed,
            decision: DecisionView::of(&resumed.decision)?,
            results: resumed.results,
            model_input,
        })
    }
}

pub async fn decide(
    State(state): State<AppState>,
    KeyOrToken(credential, _): KeyOrToken<scope::Decisions>,
    RunId(run_id): RunId,
    Query(query): Query<FormatQuery>,
    Json(body): Json<DecisionBody>,
) -> Result<impl IntoResponse, ApiError> {
    let (actor, decider_uid) = match &credential {
        Credential::Key(caller) => {
            let decider_uid = body.decider_uid.ok_or_else(|| {
                ApiError::unprocessable(
                    "decider_uid_required",
                    "with an API key, name the decider: a uid, or null for a decision by nobody",
                )
            })?;
            match decider_uid {
                Some(_) => caller.require(Scope::DecisionsWrite)?,
                None => caller.require(Scope::DecisionsAnonymous)?,
            }
            let actor = Actor {
                tenant: caller.tenant.clone(),
                client_name: caller.name.clone(),
                may_decide_anonymously: caller.has(Scope::DecisionsAnonymous),
                token_kid: None,
            };
            (actor, decider_uid)
        }
        Credential::Token(holder) => {
            // The decider is the person the token was minted for; the body may only agree (DESIGN.md §13).
            if body
                .decider_uid
                .is_some_and(|named| named != Some(holder.uid))
            {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "decider_mismatch",
                    "decider_uid must be left out or equal to the token's sub",
                ));
            }
            visible::run(&state, &credential, run_id).await?;
            let actor = Actor {
                tenant: holder.tenant.clone(),
                client_name: holder.client_name.clone(),
                may_decide_anonymously: false,
                token_kid: Some(holder.kid.clone()),
            };
            (actor, Some(holder.uid))
        }
    };
    if decider_uid.is_some_and(|uid| uid < 1) {
        return Err(ApiError::unprocessable(
            "invalid_uid",
            "decider_uid must be a uid of at least 1, or null",
        ));
    }
    if body.approved && body.reason.is_some() {
        return Err(ApiError::unprocessable(
            "reason_requires_denial",
            "a reason is given only with a denial",
        ));
    }
    let request = DecisionRequest {
        run_id,
        approved: body.approved,
        decider_uid,
        turn_digest: body.turn_digest,
        reason: body.reason,
    };
    let resumed = resume::decide(&state.resumer, &actor, &request).await?;
    // A replay committed nothing; the nudge is only a hint, so a needless one costs a poll.
    state.events.committed();
    Ok(axum::Json(DecisionAnswer::of(resumed, query.format)?))
}

pub async fn model_input(
    State(state): State<AppState>,
    KeyOrToken(credential, _): KeyOrToken<scope::RunsRead>,
    RunId(run_id): RunId,
    Query(query): Query<FormatQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let run = visible::run(&state, &credential, run_id).await?;
    let Some(decision) = decisions::latest(&state.pool, run.id).await? else {
        return Err(ApiError::conflict(
            "not_resumed",
            "the run has not been resumed yet",
        ));
    };
    if decision.turn_index == run.turn_index && run.status() == RunStatus::Resuming {
        return Err(ApiError::conflict(
            "resume_in_progress",
            "the approved turn's tools are still running",
        ));
    }
    // Its reads in one transaction: behind PgBouncer a connection is only kept between statements inside one.
    let mut tx = state.pool.begin().await?;
    let resumed = resume::load_resumed(&mut tx, state.pool.sealer(), run.id, decision).await?;
    tx.commit().await?;
    let model_input = model_input::render(
        query.format,
        &resumed.transcript,
        &resumed.results,
        &resumed.earlier_results,
    );
    Ok(axum::Json(model_input))
}

/// A member that may be absent (`None`), `null` (`Some(None)`) or a uid (`Some(Some(uid))`).
fn present_json_or_null<'de, D>(deserializer: D) -> Result<Option<Option<i64>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    integer::json_or_null(deserializer).map(Some)
}
