//! `POST /v1/runs/{id}/decision` and `GET /v1/runs/{id}/model-input`: deciding a turn and reading what it resumed.

use axum::extract::State;
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::decision_body::DecisionBody;
use super::decision_credential::{self, DecisionCredential};
use super::error::ApiError;
use super::extract::{Caller, Json, KeyOrToken, Query, RunId, scope};
use super::json_pieces::JsonPieces;
use super::views::{DecisionView, ReleasedCallView, ResultView};
use super::visible;
use crate::domain::model_input::{self, ModelInputFormat, RenderError};
use crate::domain::remembered::Remember;
use crate::domain::results::ToolResult;
use crate::domain::scopes::Scope;
use crate::domain::token_view::Audience;
use crate::domain::transcript;
use crate::domain::transcript_text::TranscriptText;
use crate::domain::verdicts::DecisionForm;
use crate::domain::vocabulary::RunStatus;
use crate::resume::{self, Actor, Posted, Poster, Resumed};
use crate::state::AppState;
use crate::storage::{StorageError, decision_record};
use axum::http::StatusCode;

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
    /// The calls that have results: every call's, but those released to the worker whose results are not posted.
    results: Vec<ResultView>,
    /// The calls released to the worker (docs/design.md §15), present whenever the turn released any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    released_calls: Vec<ReleasedCallView>,
}

/// The whole answer as `audience` sees it (`domain::token_view`): the head, then `model_input` in the asked format,
/// or the run's own. Whole, the stored transcript is spliced in as it is; to a decision token below `full` every
/// text of it is redacted at `redacted`, and it is left out at `metadata` or `none`, as `GET …/model-input` shows
/// it to a token. A replay is answered by this same function from the same rows.
async fn answer(
    resumed: Resumed,
    format: Option<ModelInputFormat>,
    audience: Audience,
) -> Result<JsonPieces, ApiError> {
    // A released turn has no model input until the worker posted its results (docs/design.md §15), nor ever when the
    // run was cancelled before they were.
    if !resumed.has_model_input() || !audience.sees_transcript() {
        return head_only(resumed, audience);
    }
    let format = format.unwrap_or(resumed.transcript.format());
    let model_input = rendered(format, &resumed)?;
    let JsonPieces(shown) = as_seen_by(audience, model_input).await?;
    JsonPieces::object_with(&head_of(resumed, audience)?, "model_input", shown)
        .map_err(|error| ApiError::internal(format!("the decision's answer as JSON: {error}")))
}

/// The answer without `model_input`.
fn head_only(resumed: Resumed, audience: Audience) -> Result<JsonPieces, ApiError> {
    let head = serde_json::to_vec(&head_of(resumed, audience)?)
        .map_err(|error| ApiError::internal(format!("the decision's answer as JSON: {error}")))?;
    Ok(JsonPieces(vec![Bytes::from(head)]))
}

fn head_of(resumed: Resumed, audience: Audience) -> Result<DecisionHead, ApiError> {
    Ok(DecisionHead {
        run_id: resumed.run_id,
        status: resumed.status(),
        format: resumed.transcript.format(),
        decision: DecisionView::of(&resumed.decision)?,
        results: ResultView::all(&resumed.results, audience),
        released_calls: ReleasedCallView::all(resumed.released, audience),
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

/// `POST /v1/runs/{id}/decision`. The checks that need no run are made here, in the order a key checked first makes
/// them; `resume` reads the run (with a key not looked up yet, the key's client in the same statement), checks the
/// key's holder or the token's user, and decides.
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
    let work = state.limits.work;
    let form = body.form(work.max_arguments_bytes, work.max_rule_ttl_days);
    let (poster, posted) = match &credential {
        DecisionCredential::Key(hash) => {
            // A body that is refused anyway is refused after the key's own lookup, in the order of the checks in
            // `keyed`; one that passes them has the key checked by the run's read.
            let read_first = body
                .decider_uid
                .is_some_and(|uid| uid.is_none_or(|uid| uid >= 1))
                && form.is_ok();
            if read_first {
                let decider_uid = body.decider_uid.flatten();
                let poster = Poster::Key {
                    hash: hash.as_bytes(),
                    decider_uid,
                };
                (poster, checked(decider_uid, body.turn_digest, form))
            } else {
                let caller = decision_credential::lookup(&state, hash).await?;
                keyed(&caller, body, form)?
            }
        }
        DecisionCredential::Caller(caller) => keyed(caller, body, form)?,
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
            let poster = Poster::Token {
                actor: Actor {
                    tenant: holder.tenant.clone(),
                    client_name: holder.client_name.clone(),
                    may_decide_anonymously: false,
                    token_kid: Some(holder.kid.clone()),
                },
                uid: holder.uid,
                run: holder.run,
            };
            // Refused, if at all, once the run is known to be one the token's user may decide (`resume`).
            let posted = checked(Some(holder.uid), body.turn_digest, form);
            (poster, posted)
        }
    };
    let decided =
        resume::posted::decide_posted(&state.resumer, poster, run_id, posted, query.format).await?;
    // A replay committed nothing; the nudge is only a hint, so a needless one costs a poll.
    state.events.committed();
    // A token is answered as its reads show the run (docs/design.md §13), by the level of the run it read.
    answer(decided.resumed, query.format, decided.audience).await
}

/// With an API key whose client is known: the checks in their order, all made before the run is read.
fn keyed(
    caller: &Caller,
    body: DecisionBody,
    form: Result<(DecisionForm, Option<Remember>), ApiError>,
) -> Result<(Poster<'static>, Result<Posted, ApiError>), ApiError> {
    let (actor, decider_uid) = key_actor(caller, &body)?;
    let posted = checked(decider_uid, body.turn_digest, form)?;
    let poster = Poster::Client { actor, decider_uid };
    Ok((poster, Ok(posted)))
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
fn checked(
    decider_uid: Option<i64>,
    turn_digest: String,
    form: Result<(DecisionForm, Option<Remember>), ApiError>,
) -> Result<Posted, ApiError> {
    if decider_uid.is_some_and(|uid| uid < 1) {
        return Err(ApiError::unprocessable(
            "invalid_uid",
            "decider_uid must be a uid of at least 1, or null",
        ));
    }
    // Not a digest at all (`"null"`, which `jq -r .turn.digest` prints after a failed registration, `""`) is a
    // mistake in the body, not a turn that moved on: 422, so that a client never reads it as "read the run again".
    if !transcript::is_turn_digest(&turn_digest) {
        return Err(ApiError::unprocessable(
            "invalid_turn_digest",
            "turn_digest must be a turn's digest as GET /v1/runs/{id} shows it (turn.digest, 64 lowercase hex \
             digits); this is not one",
        ));
    }
    let (form, remember) = form?;
    Ok(Posted {
        turn_digest,
        form,
        remember,
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
    let level = state.resumer.privacy_floor.stricter(run.privacy_level());
    let audience = Audience::of(credential.reader(), level);
    if !audience.sees_transcript() {
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
    if turn_index == run.turn_index && run.status() == RunStatus::Released {
        return Err(ApiError::conflict(
            "results_pending",
            "the turn released calls to the worker, whose results are not all posted yet",
        ));
    }
    // Its reads in one transaction: behind PgBouncer a connection is only kept between statements inside one.
    let mut tx = state.pool.begin().await?;
    let turn = resume::load_turn(&mut tx, state.pool.sealer(), run.id, turn_index, None).await?;
    tx.commit().await?;
    // A run cancelled while released keeps released calls without results: it has no model input either.
    if turn.released.iter().any(|call| call.result.is_none()) {
        return Err(ApiError::conflict(
            "results_pending",
            "the turn released calls to the worker whose results were never posted",
        ));
    }
    let model_input = render_turn(
        query.format.unwrap_or(turn.transcript.format()),
        run.id,
        &turn.transcript,
        &turn.results,
        &turn.earlier_results,
    )?;
    as_seen_by(audience, model_input).await
}

/// A model input as `audience` sees it (`domain::token_view`): whole, the stored text as it is, never
/// re-serialized (§14); else filtered. Redacting a whole transcript is CPU work: off the async workers, as the
/// inbox's redaction is.
async fn as_seen_by(audience: Audience, pieces: Vec<Bytes>) -> Result<JsonPieces, ApiError> {
    if audience.sees_whole() {
        return Ok(JsonPieces(pieces));
    }
    let filtered = tokio::task::spawn_blocking(move || {
        let text: Vec<u8> = pieces.concat();
        let value: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|error| ApiError::internal(format!("a rendered model input: {error}")))?;
        let shown = audience
            .model_input(value)
            .ok_or_else(|| ApiError::internal("a model input shown at a level that shows none"))?;
        serde_json::to_vec(&shown)
            .map_err(|error| ApiError::internal(format!("a model input as JSON: {error}")))
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(JsonPieces(vec![Bytes::from(filtered)]))
}
