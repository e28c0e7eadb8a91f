//! CORS for the routes a decision token may use (docs/design.md §13): a page may call them from an origin that a live
//! API client allows (`clients add --allow-origin`, `clients set-origins`), with `Authorization` and
//! `Content-Type`, and never with credentials (no cookies are used). Every other route answers no preflight.
//!
//! The origins are read from the database on each cross-origin request rather than cached, so that every
//! instance answers the same the moment a client's origins change; the table is tiny and the query indexed by
//! nothing more than a scan of the live clients.

use std::time::Duration;

use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::storage::{Database, clients};

/// How long a browser may reuse a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The CORS layer of the token routes, deciding origins against the clients in `pool`.
pub fn layer(pool: Database) -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::async_predicate(
            move |origin: HeaderValue, _: &Parts| async move {
                let Ok(origin) = origin.to_str() else {
                    return false;
                };
                match clients::origin_allowed(&pool, origin).await {
                    Ok(allowed) => allowed,
                    Err(error) => {
                        // No CORS headers: the browser refuses the call, which is the safe way to fail.
                        tracing::warn!(error = %error, "could not read the allowed origins");
                        false
                    }
                }
            },
        ))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([AUTHORIZATION, CONTENT_TYPE])
        .expose_headers([HeaderName::from_static("x-request-id")])
        .max_age(PREFLIGHT_MAX_AGE)
}
