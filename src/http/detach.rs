//! Every request's handler runs to completion in a task of its own (a large body's: on a thread of its own).
//!
//! A client that disconnects, or the request timeout, drops the future that serves the request. A handler dropped
//! inside `BEGIN` would hand its connection back to the pool still inside a transaction (transact-rs/sqlx#4393),
//! and one dropped between two statements of a transaction leaves it to be rolled back later. Run in a task of its
//! own, the handler always finishes: its transaction commits or rolls back as written, and only the wait for the
//! answer is given up. Writes are idempotent (registration, turns, decisions), so asking again returns the outcome.
//! The feed's long poll alone is served attached (`app::within_bounds`, `events_feed`). The task holds what the
//! request's body was charged until the handler ends, and runs where its size says: on the runtime's workers, and for
//! a large body, once it has arrived, on a thread at the lowest CPU priority (`body_budget::Admitted::spawn`,
//! `large_body_threads`).

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::body_budget::Admitted;
use super::error::{ApiError, REQUEST_ID};

/// Serves the request in a spawned task, carrying over the request id and the request's log span.
pub async fn run_to_completion(request: Request, next: Next, admitted: Admitted) -> Response {
    let request_id = REQUEST_ID.try_with(Clone::clone).unwrap_or_default();
    let handler = REQUEST_ID
        .scope(request_id, next.run(request))
        .instrument(tracing::Span::current());
    match admitted.spawn(handler).await {
        Ok(response) => response,
        Err(failed) => {
            ApiError::internal(format!("the request's task failed: {failed}")).into_response()
        }
    }
}
