//! `GET /v1/events?after={cursor}&wait={seconds}`: the tenant's events after a cursor, long-polled (DESIGN.md §10).
//! Not to be confused with `GET /v1/runs/{id}/events`, the audit record of one run (`super::events`).

use std::time::Duration;

use axum::extract::State;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{Authorized, Query, scope};
use super::integer;
use crate::events::{Envelope, cursor};
use crate::state::AppState;
use crate::storage::events::{self, Position};

const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedParams {
    /// The `next_cursor` of the previous answer; absent: from the oldest event kept.
    after: Option<String>,
    /// Seconds to wait for an event when there is none yet (0: answer at once); cut to FEED_MAX_WAIT_SECS.
    #[serde(default, deserialize_with = "integer::query_optional")]
    wait: Option<i64>,
    #[serde(default, deserialize_with = "integer::query_optional")]
    limit: Option<i64>,
}

#[derive(Debug, Serialize)]
struct FeedPage<'a> {
    events: Vec<Envelope<'a>>,
    /// Pass as `after` next time; the same cursor again when there was nothing new.
    next_cursor: String,
}

pub async fn feed(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::EventsRead>,
    Query(params): Query<FeedParams>,
) -> Result<impl IntoResponse, ApiError> {
    let after = match params.after.as_deref() {
        None => Position::START,
        Some(text) => cursor::decode(text).ok_or_else(|| {
            ApiError::unprocessable(
                "invalid_cursor",
                "after must be a next_cursor this service gave out",
            )
        })?,
    };
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::unprocessable(
            "invalid_query",
            format!("limit must be from 1 to {MAX_LIMIT}"),
        ));
    }
    let wait = params.wait.unwrap_or(0);
    if wait < 0 {
        return Err(ApiError::unprocessable(
            "invalid_query",
            "wait must be a number of seconds, 0 or more",
        ));
    }
    // A longer wait than the service allows is cut to it: the reader asks again, as it would after any answer.
    let wait = Duration::from_secs(wait as u64).min(state.events.max_wait());

    let page = state
        .events
        .read_or_wait(wait, |floor| {
            events::page(&state.pool, &caller.tenant, after, floor, limit)
        })
        .await?;
    let next = page.last().map_or(after, |event| event.position);
    Ok(axum::Json(FeedPage {
        events: page.iter().map(Envelope::of).collect(),
        next_cursor: cursor::encode(next),
    })
    .into_response())
}
