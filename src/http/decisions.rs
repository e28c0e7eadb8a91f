//! `POST /v1/runs/{id}/decision` and `GET /v1/runs/{id}/model-input`: deciding a turn and reading what it resumed.

use axum::extract::State;
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::decision_credential::{self, DecisionCredential};
use super::error::ApiError;
use super::extract::{Caller, Credential, Json, KeyOrToken, Query, RunId, scope};
use super::integer;
use super::json_pieces::JsonPieces;
use super::views::DecisionView;
use super::visible;
use crate::domain::model_input::{self, ModelInputFormat, RenderError};
use crate::domain::results::ToolResult;
use crate::domain::scopes::Scope;
use crate::domain::token_view;
use crate::domain::transcript_text::TranscriptText;
use crate::domain::verdicts::{CallVerdict, DecisionForm};
use crate::domain::vocabulary::{DenialReason, PrivacyLevel, RunStatus};
use crate::resume::{self, Actor, DecisionRequest, Reader, Resumed, Snapshot};
use crate::state::AppState;
use crate::storage::{StorageError, decision_record};
use axum::http::StatusCode;

/// The whole-turn form `{approved, reason?, …}` or the per-call form `{calls, …}` (docs/design.md §8); exactly one.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// `null` is refused (422 `invalid_body`), as the spec types it: only an absent member means the other form.
    #[serde(default, deserialize_with = "present_not_null")]
    approved: Option<bool>,
    /// Required with an API key, and `null` on purpose: a decision by nobody must be said, not forgotten. With a
    /// decision token it may be left out: the token's `sub` is the decider (`Some(None)` is an explicit `null`).
    #[serde(default, deserialize_with = "present_json_or_null")]
    decider_uid: Option<Option<i64>>,
    turn_digest: String,
    #[serde(default)]
    reason: Option<DenialReason>,
    /// Like `approved`: `calls: null` is no list, and refused rather than read as absent (schemathesis ST201).
    #[serde(default, deserialize_with = "present_not_null")]
    calls: Option<Vec<CallVerdictBody>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallVerdictBody {
    call_id: String,
    approved: bool,
    #[serde(default)]
    reason: Option<DenialReason>,
    /// Edited arguments: the text of a JSON object, like the model's own arguments.
    #[serde(default)]
    arguments: Option<String>,
}

impl DecisionBody {
    /// The form the body is in, checked by the rules that need no turn; 422 with a stable code otherwise.
    fn form(&mut self, max_arguments_bytes: usize) -> Result<DecisionForm, ApiError> {
        let form = match (self.approved, self.calls.take()) {
            (Some(_), Some(_)) => {
                return Err(ApiError::unprocessable(
                    "approved_and_calls",
                    "give either approved (the whole turn) or calls (a verdict per call), not both",
                ));
            }
            (None, None) => {
                return Err(ApiError::unprocessable(
                    "verdict_required",
                    "give approved (the whole turn) or calls (a verdict per call)",
                ));
            }
            (Some(approved), None) => {
                if approved && self.reason.is_some() {
                    return Err(ApiError::unprocessable(
                        "reason_requires_denial",
                        "a reason is given only with a denial",
                    ));
                }
                DecisionForm::WholeTurn {
                    approved,
                    reason: self.reason,
                }
            }
            (None, Some(calls)) => {
                if self.reason.is_some() {
                    return Err(ApiError::unprocessable(
                        "reason_with_calls",
                        "with calls, each denial carries its own reason",
                    ));
                }
                DecisionForm::PerCall(
                    calls
                        .into_iter()
                        .map(|call| CallVerdict {
                            call_id: call.call_id,
                            approved: call.approved,
                            reason: call.reason,
                            arguments: call.arguments,
                        })
                        .collect(),
                )
            }
        };
        form.check(max_arguments_bytes)
            .map_err(|error| ApiError::unprocessable(error.code(), error.to_string()))?;
        Ok(form)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormatQuery {
    /// Absent: the run's own format (docs/design.md §14).
    #[serde(default)]
    format: Option<ModelInputFormat>,
}

/// The answer to a decision, but its model input: built only from stored rows, so the same decision again gets the
/// same bytes. The model input follows as the last member, `model_input`, spliced in as pieces of text
/// ([`answer`]).
#[derive(Debug, Serialize)]
struct DecisionHead {
    run_id: Uuid,
    /// The status the decision brought the run to.
    status: RunStatus,
    /// The format the run was registered in (docs/design.md §14); `model_input` is in the one asked for.
    format: ModelInputFormat,
    decision: DecisionView,
    results: Vec<ToolResult>,
}

/// The whole answer: the head, then `model_input` in the asked format, or the run's own (the stored transcript spliced
/// in as it is).
fn answer(resumed: Resumed, format: Option<ModelInputFormat>) -> Result<JsonPieces, ApiError> {
    let format = format.unwrap_or(resumed.transcript.format());
    let model_input = rendered(format, &resumed)?;
    JsonPieces::object_with(&head_of(resumed)?, "model_input", model_input)
        .map_err(|error| ApiError::internal(format!("the decision's answer as JSON: {error}")))
}

/// The answer to a decision token on a run below privacy level `full`: the model input with every text redacted at
/// `redacted`, and none at `metadata` or `none` (`domain::token_view`), as `GET …/model-input` shows it to a token.
/// The results stay: they are the texts the decider's own click gave the model.
async fn answer_to_a_token(
    resumed: Resumed,
    format: Option<ModelInputFormat>,
    level: PrivacyLevel,
) -> Result<JsonPieces, ApiError> {
    let format = format.unwrap_or(resumed.transcript.format());
    let as_json = |error: serde_json::Error| {
        ApiError::internal(format!("the decision's answer as JSON: {error}"))
    };
    if !token_view::shows_payloads(level) {
        let head = serde_json::to_vec(&head_of(resumed)?).map_err(as_json)?;
        return Ok(JsonPieces(vec![Bytes::from(head)]));
    }
    let model_input = rendered(format, &resumed)?;
    let JsonPieces(shown) = as_a_token_sees_it(level, model_input).await?;
    JsonPieces::object_with(&head_of(resumed)?, "model_input", shown).map_err(as_json)
}

fn head_of(resumed: Resumed) -> Result<DecisionHead, ApiError> {
    Ok(DecisionHead {
        run_id: resumed.run_id,
        status: RunStatus::Resumed,
        format: resumed.transcript.format(),
        decision: DecisionView::of(&resumed.decision)?,
        results: resumed.results,
    })
}

/// The model input of a resumed turn as JSON text pieces.
fn rendered(format: ModelInputFormat, resumed: &Resumed) -> Result<Vec<Bytes>, ApiError> {
    render_turn(
        format,
        resumed.run_id,
        &resumed.transcript,
        &resumed.results,
        &resumed.earlier_results,
    )
}

/// The model input of `run_id`'s turn as JSON text pieces; a stored transcript that is not one is a 500.
fn render_turn(
    format: ModelInputFormat,
    run_id: Uuid,
    transcript: &TranscriptText,
    results: &[ToolResult],
    earlier_results: &[ToolResult],
) -> Result<Vec<Bytes>, ApiError> {
    model_input::render_text(format, transcript, results, earlier_results).map_err(|error| {
        match error {
            RenderError::NotRepresentable(detail) => {
                ApiError::unprocessable("format_not_representable", detail)
            }
            RenderError::Corrupt(error) => {
                StorageError::Corrupt(format!("run {run_id}: {error}")).into()
            }
        }
    })
}

/// Refuses (422 `format_not_representable`) a model input in `format` that would drop something of a native
/// transcript. Only a run asked for in another format than its own is read for this: the results never decide it.
fn representable(
    format: ModelInputFormat,
    transcript: &TranscriptText,
    run_id: Uuid,
) -> Result<(), ApiError> {
    if format == transcript.format() || transcript.format() == ModelInputFormat::OpenAiChat {
        return Ok(());
    }
    render_turn(format, run_id, transcript, &[], &[]).map(drop)
}

/// `POST /v1/runs/{id}/decision`. With an API key, the key is looked up in the statement that reads the run
/// (`http::decision_credential`); every refusal is still the one a key checked first would get.
pub async fn decide(
    State(state): State<AppState>,
    credential: DecisionCredential,
    run_id: Result<RunId, ApiError>,
    query: Result<Query<FormatQuery>, ApiError>,
    body: Result<Json<DecisionBody>, ApiError>,
) -> Result<impl IntoResponse, ApiError> {
    let run_id = match run_id {
        Ok(RunId(run_id)) => run_id,
        Err(refused) => return Err(credential.refuse(&state, refused).await),
    };
    let query = match query {
        Ok(Query(query)) => query,
        Err(refused) => return Err(credential.refuse(&state, refused).await),
    };
    let mut body = match body {
        Ok(Json(body)) => body,
        Err(refused) => return Err(credential.refuse(&state, refused).await),
    };
    let form = body.form(state.limits.work.max_arguments_bytes);
    let (actor, request, snapshot) = match &credential {
        DecisionCredential::Key(hash) => {
            // A body that is refused anyway is refused after the key's own lookup, in the order of the checks in
            // `keyed`; one that passes them has the key checked by the run's read.
            let read_first = body
                .decider_uid
                .is_some_and(|uid| uid.is_none_or(|uid| uid >= 1))
                && form.is_ok();
            if read_first {
                let decider_uid = body.decider_uid.flatten();
                // The scope the named decider (or nobody) calls for: without it the run is not even read.
                let scope = match decider_uid {
                    Some(_) => Scope::DecisionsWrite,
                    None => Scope::DecisionsAnonymous,
                };
                let reader = Reader::KeyHash {
                    hash: hash.as_bytes(),
                    scope: scope.as_str(),
                };
                let mut snapshot =
                    resume::read(&state.resumer, reader, run_id, decider_uid).await?;
                let caller = decision_credential::caller_of(snapshot.key_holder.take())?;
                keyed(&state, &caller, run_id, body, form, Some(snapshot)).await?
            } else {
                let caller = decision_credential::lookup(&state, hash).await?;
                keyed(&state, &caller, run_id, body, form, None).await?
            }
        }
        DecisionCredential::Caller(caller) => {
            keyed(&state, caller, run_id, body, form, None).await?
        }
        DecisionCredential::Token(holder) => {
            // The decider is the person the token was minted for; the body may only agree (docs/design.md §13).
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
            // A run the token's user may not decide is answered like a missing one (http::visible), judged from
            // the run and the user's row as the decision's own read found them.
            let not_found = || ApiError::not_found("run");
            if holder.run.is_some_and(|bound| bound != run_id) {
                return Err(not_found());
            }
            let reader = Reader::Tenant(&holder.tenant);
            let snapshot = resume::read(&state.resumer, reader, run_id, Some(holder.uid)).await?;
            let may_decide = snapshot.run.as_ref().is_some_and(|run| {
                let facts = &run.facts;
                visible::token_user_may_decide(holder, facts.run.owner_uid, facts.decider.as_ref())
            });
            if !may_decide {
                return Err(not_found());
            }
            let actor = Actor {
                tenant: holder.tenant.clone(),
                client_name: holder.client_name.clone(),
                may_decide_anonymously: false,
                token_kid: Some(holder.kid.clone()),
            };
            let request = decision_request(run_id, Some(holder.uid), body.turn_digest, form)?;
            (actor, request, snapshot)
        }
    };
    // A token is answered the model input as its reads show it (docs/design.md §13), by the level of the run it read.
    let token_level = match &credential {
        DecisionCredential::Token(_) => snapshot.run.as_ref().map(|run| {
            let floor = state.resumer.privacy_floor;
            floor.stricter(run.facts.run.privacy_level())
        }),
        DecisionCredential::Key(_) | DecisionCredential::Caller(_) => None,
    };
    // A native run asked for in a format it cannot be translated to is refused before anything is recorded.
    if let (Some(run), Some(format)) = (&snapshot.run, query.format) {
        representable(format, &run.facts.transcript, run_id)?;
    }
    let resumed = resume::decide(&state.resumer, &actor, &request, snapshot).await?;
    // A replay committed nothing; the nudge is only a hint, so a needless one costs a poll.
    state.events.committed();
    match token_level {
        None | Some(PrivacyLevel::Full) => answer(resumed, query.format),
        Some(level) => answer_to_a_token(resumed, query.format, level).await,
    }
}

/// With an API key whose client is known: the checks in their order, then the run's read unless it was made.
async fn keyed(
    state: &AppState,
    caller: &Caller,
    run_id: Uuid,
    body: DecisionBody,
    form: Result<DecisionForm, ApiError>,
    snapshot: Option<Snapshot>,
) -> Result<(Actor, DecisionRequest, Snapshot), ApiError> {
    let (actor, decider_uid) = key_actor(caller, &body)?;
    let request = decision_request(run_id, decider_uid, body.turn_digest, form)?;
    let snapshot = match snapshot {
        Some(snapshot) => snapshot,
        None => {
            let reader = Reader::Tenant(&actor.tenant);
            resume::read(&state.resumer, reader, run_id, decider_uid).await?
        }
    };
    Ok((actor, request, snapshot))
}

/// With an API key: the decider the body names, which it must (a uid, or `null` for nobody), and the scope that
/// takes (422, then 403).
fn key_actor(caller: &Caller, body: &DecisionBody) -> Result<(Actor, Option<i64>), ApiError> {
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
    Ok((actor, decider_uid))
}

/// The decision as `resume` takes it, once the decider's uid and the body's form pass (422 otherwise).
fn decision_request(
    run_id: Uuid,
    decider_uid: Option<i64>,
    turn_digest: String,
    form: Result<DecisionForm, ApiError>,
) -> Result<DecisionRequest, ApiError> {
    if decider_uid.is_some_and(|uid| uid < 1) {
        return Err(ApiError::unprocessable(
            "invalid_uid",
            "decider_uid must be a uid of at least 1, or null",
        ));
    }
    Ok(DecisionRequest {
        run_id,
        decider_uid,
        turn_digest,
        form: form?,
    })
}

pub async fn model_input(
    State(state): State<AppState>,
    KeyOrToken(credential, _): KeyOrToken<scope::RunsRead>,
    RunId(run_id): RunId,
    Query(query): Query<FormatQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let run = visible::run(&state, &credential, run_id).await?;
    // A decision token sees the transcript only where the run's privacy level shows payloads (docs/design.md §13).
    let token_level = match &credential {
        Credential::Key(_) => None,
        Credential::Token(_) => Some(state.resumer.privacy_floor.stricter(run.privacy_level())),
    };
    if token_level.is_some_and(|level| !token_view::shows_payloads(level)) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "transcript_not_shown",
            "the run's privacy level shows a decision token no transcript; read it with an API key",
        ));
    }
    // The latest turn that ended, by a decision or by expiry.
    let decided = decision_record::latest(&state.pool, run.id)
        .await?
        .map(|decision| decision.turn_index);
    let expired = decision_record::latest_expired_turn(&state.pool, run.id).await?;
    let Some(turn_index) = decided.max(expired) else {
        return Err(ApiError::conflict(
            "not_resumed",
            "the run has not been resumed yet",
        ));
    };
    if turn_index == run.turn_index && run.status() == RunStatus::Resuming {
        return Err(ApiError::conflict(
            "resume_in_progress",
            "the approved turn's tools are still running",
        ));
    }
    // Its reads in one transaction: behind PgBouncer a connection is only kept between statements inside one.
    let mut tx = state.pool.begin().await?;
    let turn = resume::load_turn(&mut tx, state.pool.sealer(), run.id, turn_index).await?;
    tx.commit().await?;
    let model_input = render_turn(
        query.format.unwrap_or(turn.transcript.format()),
        run.id,
        &turn.transcript,
        &turn.results,
        &turn.earlier_results,
    )?;
    match token_level {
        // At `full` a token sees the model input whole: the stored text as it is, never re-serialized (§14).
        None | Some(PrivacyLevel::Full) => Ok(JsonPieces(model_input)),
        Some(level) => as_a_token_sees_it(level, model_input).await,
    }
}

/// A model input filtered for a decision token (`domain::token_view`). Redacting a whole transcript is CPU work:
/// off the async workers, as the inbox's redaction is.
async fn as_a_token_sees_it(
    level: PrivacyLevel,
    pieces: Vec<Bytes>,
) -> Result<JsonPieces, ApiError> {
    let filtered = tokio::task::spawn_blocking(move || {
        let text: Vec<u8> = pieces.concat();
        let value: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|error| ApiError::internal(format!("a rendered model input: {error}")))?;
        let shown = token_view::model_input(level, value)
            .ok_or_else(|| ApiError::internal("a model input shown at a level that shows none"))?;
        serde_json::to_vec(&shown)
            .map_err(|error| ApiError::internal(format!("a model input as JSON: {error}")))
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(JsonPieces(vec![Bytes::from(filtered)]))
}

/// A member that may be absent (`None`), `null` (`Some(None)`) or a uid (`Some(Some(uid))`).
fn present_json_or_null<'de, D>(deserializer: D) -> Result<Option<Option<i64>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    integer::json_or_null(deserializer).map(Some)
}

/// A member that may be absent (`None`, with `#[serde(default)]`) but, when present, must be a `T`: `null` is
/// refused, where a plain `Option` would take it for absent. No more work than the `Option` for a present value.
fn present_not_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}
