//! Ops endpoints: liveness, readiness, and the OpenAPI document. They need no key: they reveal nothing of any run.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::error::ApiError;
use crate::app::AppState;
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

pub async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI_YAML)
}
