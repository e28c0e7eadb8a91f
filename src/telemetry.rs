//! Logging: a `tracing` subscriber in JSON or readable text, and the span every request is logged in.
//!
//! Logs carry method, matched route, request id, client, status and latency, never a body: arguments, results and
//! transcripts stay out of logs at every level.

use std::io::IsTerminal;
use std::time::Duration;

use axum::extract::MatchedPath;
use axum::http::{Request, Response};
use tracing::Span;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use crate::http::error::InternalCause;

/// Installs the global subscriber; the filter was checked by `Config::validate`.
pub fn init(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Pretty => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests that start several services in one process) keeps the first subscriber.
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.try_init()
    };
}

/// The span of one request. `client` is filled in once the key is checked.
pub fn request_span<B>(request: &Request<B>) -> Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str)
        .unwrap_or("unmatched");
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    tracing::info_span!(
        "request",
        // A made-up method may be kilobytes long; the log names it `other`, as the metrics do.
        method = crate::metrics::method_label(request.method().as_str()),
        route,
        request_id,
        client = tracing::field::Empty,
    )
}

/// Logs the end of a request once; a 5xx also logs its cause, which the client never sees.
pub fn on_response<B>(response: &Response<B>, latency: Duration, _span: &Span) {
    let status = response.status().as_u16();
    let latency_ms = latency.as_secs_f64() * 1000.0;
    match response.extensions().get::<InternalCause>() {
        Some(InternalCause(cause)) => {
            tracing::error!(status, latency_ms, cause = %cause, "request failed")
        }
        None if status >= 500 => tracing::error!(status, latency_ms, "request failed"),
        None => tracing::info!(status, latency_ms, "request served"),
    }
}
