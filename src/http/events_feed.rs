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
    /// Seconds to wait for an event when there is none yet (0: answer at once).
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
    let max_wait = state.events.max_wait().as_secs() as i64;
    let wait = params.wait.unwrap_or(0);
    if !(0..=max_wait).contains(&wait) {
        return Err(ApiError::unprocessable(
            "invalid_query",
            format!("wait must be from 0 to {max_wait} seconds (FEED_MAX_WAIT_SECS)"),
        ));
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait as u64);
    let mut waiter = state.events.waiter();
    let page = loop {
        // Seen before reading: an event that becomes readable during the read wakes the wait below at once.
        waiter.mark_seen();
        let page = events::page(&state.pool, &caller.tenant, after, limit).await?;
        if !page.is_empty() || tokio::time::Instant::now() >= deadline {
            break page;
        }
        if tokio::time::timeout_at(deadline, waiter.changed())
            .await
            .is_err()
        {
            break Vec::new();
        }
    };
    let next = page.last().map_or(after, |event| event.position);
    Ok(axum::Json(FeedPage {
        events: page.iter().map(Envelope::of).collect(),
        next_cursor: cursor::encode(next),
    })
    .into_response())
}
