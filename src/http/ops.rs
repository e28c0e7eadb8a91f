//! Ops endpoints: liveness, readiness, metrics and the OpenAPI document. Liveness, readiness and the document need
//! no key (probes cannot send one, and they reveal nothing of any run); metrics do.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::error::ApiError;
use super::extract::{Authorized, scope};
use crate::state::AppState;
use crate::storage;

/// The contract, compiled in so the served document is always the one the binary was built with.
pub const OPENAPI_YAML: &str = include_str!("../../openapi.yaml");

pub async fn healthz() -> impl IntoResponse {
    (
        StatusCode::OK,
        axum::Json(serde_json::json!({"status": "ok"})),
    )
}

pub async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    if storage::is_ready(&state.pool).await? {
        Ok(axum::Json(serde_json::json!({"status": "ready"})))
    } else {
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_migrated",
            "the database is not fully migrated",
        ))
    }
}

/// Prometheus metrics; scraping needs a key with `metrics:read`, like every other route that reveals activity.
pub async fn metrics(
    State(state): State<AppState>,
    _: Authorized<scope::MetricsRead>,
) -> Result<impl IntoResponse, ApiError> {
    let mut text = crate::metrics::render(state.pool.pool().size(), state.pool.pool().num_idle());
    text.push_str(&crate::metrics::render_webhook_gauges(
        &storage::webhooks::backlog(&state.pool).await?,
    ));
    text.push_str(&crate::metrics::render_feed_gauges(
        state.events.feed_counts(),
    ));
    text.push_str(&crate::metrics::render_encryption_gauge(
        state.pool.sealer().is_enabled(),
    ));
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    ))
}

pub async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI_YAML)
}
