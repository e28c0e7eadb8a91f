//! The worker's state on the wire (docs/design.md §15, docs/design.md §15): `worker_state` taken by a registration and
//! by `POST /v1/runs/{id}/turns`, held to MAX_WORKER_STATE_BYTES, and given back only by
//! `GET /v1/runs/{id}?include=worker_state` to an API key (which holds `runs:read`, as the route requires).
//!
//! The state is the text the worker sent, byte for byte: it is read as a `RawValue`, stored as that text, and
//! spliced into the one answer that gives it back, never parsed into a tree and written again. Nothing else reads it:
//! the inbox, events, webhooks, decisions and decision tokens never see it, and nothing logs it.

use axum::extract::{FromRef, FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sqlx::PgConnection;
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{json_shape, json_text};
use super::format_members::RawMember;
use super::views::RunView;
use crate::state::{AppState, Limits};
use crate::storage::{StorageError, worker_state};

/// The query of `GET /v1/runs/{id}`: `include=worker_state` asks for the state. Anything else is 422 `invalid_query`,
/// as an unknown `format` is on the model input.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunQuery {
    #[serde(default)]
    include: Option<Include>,
}

/// What `include` may add to a run's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Include {
    WorkerState,
}

/// The run as an API key reads it: with its `worker_state` (the text as sent, `null` when it has none) when the
/// query asks for it.
pub async fn run_answer(
    state: &AppState,
    view: RunView,
    query: &RunQuery,
) -> Result<Response, ApiError> {
    if query.include != Some(Include::WorkerState) {
        return Ok(axum::Json(view).into_response());
    }
    let text = stored(state, view.id).await?;
    let worker_state = text
        .as_deref()
        .map(|text| {
            // The service stored this text from a parsed body (and a sealed one is authenticated): if it is no JSON,
            // the row was written by something else, and no answer splices it in.
            serde_json::from_str::<&RawValue>(text).map_err(|error| {
                StorageError::Corrupt(format!("run {}: worker_state: {error}", view.id))
            })
        })
        .transpose()?;
    Ok(axum::Json(WithWorkerState {
        run: &view,
        worker_state,
    })
    .into_response())
}

/// A run's answer with the state as its last member.
#[derive(Serialize)]
struct WithWorkerState<'a> {
    #[serde(flatten)]
    run: &'a RunView,
    worker_state: Option<&'a RawValue>,
}

async fn stored(state: &AppState, run_id: Uuid) -> Result<Option<String>, ApiError> {
    let mut tx = state.pool.begin().await?;
    let text = worker_state::find(&mut tx, state.pool.sealer(), run_id).await?;
    tx.commit().await?;
    Ok(text)
}

/// Holds the state a body carries to MAX_WORKER_STATE_BYTES: 413 `worker_state_too_large` over it. Checked before
/// the body is hashed, which parses the state.
pub fn within_limit(limits: &Limits, member: Option<&RawMember>) -> Result<(), ApiError> {
    let Some(text) = text(member) else {
        return Ok(());
    };
    limits.work.check_worker_state(text.len()).map_err(|over| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "worker_state_too_large",
            over.to_string(),
        )
    })
}

/// The text of the state a body carries, as the worker sent it. JSON `null` is no state, as is a body without the
/// member (serde reads `null` as `None`).
fn text(member: Option<&RawMember>) -> Option<&str> {
    member.map(|RawMember(text)| text.get())
}

/// Stores the state a registration carries, in its transaction; a run registered without one is not written again.
pub async fn store_registered(
    conn: &mut PgConnection,
    state: &AppState,
    run_id: Uuid,
    member: Option<&RawMember>,
) -> Result<(), ApiError> {
    if let Some(text) = text(member) {
        worker_state::replace(conn, state.pool.sealer(), run_id, Some(text)).await?;
    }
    Ok(())
}

/// Replaces the run's state with the one a new turn carries, in its transaction (which holds the run's lock): a turn
/// without one leaves the run without one, since a state belongs to the turn it was suspended on.
pub async fn replace_on_turn(
    conn: &mut PgConnection,
    state: &AppState,
    run_id: Uuid,
    member: Option<&RawMember>,
) -> Result<(), ApiError> {
    worker_state::replace(conn, state.pool.sealer(), run_id, text(member)).await?;
    Ok(())
}

/// The JSON body of a route that takes a `worker_state`. The route reads up to MAX_BODY_BYTES plus
/// MAX_WORKER_STATE_BYTES (`app::routes`), so that a transcript of up to MAX_BODY_BYTES still fits beside a state;
/// what is not the state stays within MAX_BODY_BYTES (413 `payload_too_large`), checked here before the body's
/// shape, as the body limit is checked before it on every other route.
pub struct JsonWithState<T>(pub T);

impl<S, T> FromRequest<S> for JsonWithState<T>
where
    AppState: FromRef<S>,
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limits = AppState::from_ref(state).limits;
        let raw = json_text(request, state).await?;
        let bytes = raw.get().len();
        if bytes > limits.max_body_bytes && bytes - state_bytes(&raw) > limits.max_body_bytes {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body is larger than MAX_BODY_BYTES (its worker_state aside)",
            ));
        }
        json_shape(&raw).map(JsonWithState)
    }
}

/// The body limit of a route that takes a `worker_state`: room for a body of MAX_BODY_BYTES and a state.
pub fn body_limit(limits: &Limits) -> usize {
    limits.largest_body()
}

/// The routes that take a `worker_state`, and so read bodies of [`body_limit`]: a registration and a new turn, as
/// `app::routes` names them (the `MatchedPath` of their requests).
pub const ROUTES: [&str; 2] = ["/v1/runs", "/v1/runs/{id}/turns"];

/// The length of the body's top-level `worker_state` text; 0 when it has none, or is no object that could have one
/// (its shape is refused later, if it is not over the limit first).
fn state_bytes(body: &RawValue) -> usize {
    #[derive(Deserialize)]
    struct Outline<'a> {
        #[serde(default, borrow)]
        worker_state: Option<&'a RawValue>,
    }
    serde_json::from_str::<Outline>(body.get())
        .ok()
        .and_then(|outline| outline.worker_state)
        .map_or(0, |state| state.get().len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn the_state_counted_apart_is_its_text_as_sent() {
        let state = r#"{"b": 1.50,  "a": [true]}"#;
        let body = raw(&format!(r#"{{"id": 1, "worker_state":   {state} }}"#));
        assert_eq!(state_bytes(&body), state.len());
    }

    #[test]
    fn a_body_without_a_state_or_not_an_object_counts_none() {
        for body in [r#"{"messages": []}"#, "[1, 2]", r#"{"worker_state": null}"#] {
            assert_eq!(state_bytes(&raw(body)), 0, "{body}");
        }
    }

    #[test]
    fn a_nested_worker_state_member_is_not_the_body_s() {
        let body = raw(r#"{"messages": [{"worker_state": "xxxxxxxx"}]}"#);
        assert_eq!(state_bytes(&body), 0);
    }
}
