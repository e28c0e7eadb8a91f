//! `GET /v1/events?after={cursor}&wait={seconds}`: the tenant's events after a cursor, long-polled (docs/design.md
//! §10). Not to be confused with `GET /v1/runs/{id}/events`, the audit record of one run (`super::run_events`).
//!
//! A reader that waits holds a slot of its client's and the instance's cap (docs/design.md §17; over it: 429 with
//! `Retry-After`), and stops waiting when its client hangs up: unlike every other route, this one is not run to
//! completion in a task of its own (`app::within_bounds`, `super::detach`). That is safe because nothing here opens a
//! transaction: the key's lookup and each read are single statements, and sqlx tests a connection whose statement
//! was dropped before it goes back to the pool.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{Authorized, Query, scope};
use super::integer;
use crate::delivery::feed_waiters::Refused;
use crate::delivery::{Envelope, cursor};
use crate::state::AppState;
use crate::storage::outbox::{self, Position};

/// The feed's route (as `app::routes` names it); `app::within_bounds` leaves it attached to its connection.
pub const ROUTE: &str = "/v1/events";

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

    let read = |floor| outbox::page(&state.pool, &caller.tenant, after, floor, limit);
    let page = if wait.is_zero() {
        read(state.events.readable_below()).await?
    } else {
        // The slot is taken before the first read, so that a refused reader costs no read of events.
        let waiter = state
            .events
            .feed_waiter(&caller.tenant, &caller.name)
            .map_err(too_many_waiting)?;
        state.events.read_or_wait(waiter, wait, read).await?
    };
    let next = page.last().map_or(after, |event| event.position);
    Ok(axum::Json(FeedPage {
        events: page.iter().map(Envelope::of).collect(),
        next_cursor: cursor::encode(next),
    })
    .into_response())
}

/// The answer to a reader over a cap: 429, with `Retry-After` (`ApiError`), and a code of its own.
fn too_many_waiting(refused: Refused) -> ApiError {
    let whose = match refused {
        Refused::Client => "this client has FEED_MAX_WAITERS_PER_CLIENT readers waiting already",
        Refused::Instance => "this instance has FEED_MAX_WAITERS readers waiting already",
    };
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_waiting_readers",
        format!("{whose}; ask again after the time in Retry-After, or with wait=0"),
    )
}
