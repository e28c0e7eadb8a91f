//! Logging: a `tracing` subscriber in JSON or readable text, and the span every request is logged in.
//!
//! Logs carry method, matched route, request id, client, status and latency, never a body: arguments, results and
//! transcripts stay out of logs at every level.

mod json_line;
mod timestamp;

use std::io::IsTerminal;
use std::time::Duration;

use axum::extract::MatchedPath;
use axum::http::{Request, Response};
use tracing::{Span, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

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
    // A second init (tests that start several services in one process) keeps the first subscriber. Both kinds
    // also forward the `log` crate's records (`try_init` installs tracing-log's bridge).
    if json {
        let _ = json_subscriber(filter, std::io::stderr).try_init();
    } else {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// The JSON-lines subscriber `init` installs, writing to `writer`; tests capture what it logs.
///
/// Its lines are those of tracing-subscriber's `fmt().json().flatten_event(true).with_current_span(true)
/// .with_span_list(false)`, written by `json_line` at a fraction of the cost.
pub fn json_subscriber<W>(filter: EnvFilter, writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::registry()
        .with(filter)
        .with(json_line::JsonLine::new(writer))
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
