//! One error type for every HTTP answer that is not a success: `application/problem+json` (RFC 9457) with a
//! stable `code` member and the request id. 5xx bodies never carry internal text; the cause is attached to the
//! response for the trace layer to log once.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::domain::authorize::Refusal;
use crate::resume::ResumeError;
use crate::storage::StorageError;

tokio::task_local! {
    /// The id of the request being served, so that an error built anywhere in its handler can name it.
    pub static REQUEST_ID: String;
}

/// Seconds a client is told to wait when the database is unavailable, or a cap is reached (429).
const RETRY_AFTER_SECS: &str = "2";

/// A failed request, as the client will see it.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, machine-readable: clients switch on it.
    pub code: &'static str,
    /// For a person reading the answer; never internal text on a 5xx.
    pub detail: String,
    /// The cause of a 5xx, logged by the trace layer and never sent.
    internal: Option<String>,
    /// Members of the problem beyond the standard ones, for a client to act on (`until` of a claim, a run's
    /// `run_status`; `status` is the problem's own, the HTTP status): never internal text.
    extra: Option<(&'static str, serde_json::Value)>,
}

/// The cause of a 5xx, carried in the response's extensions to the trace layer.
#[derive(Debug, Clone)]
pub struct InternalCause(pub Arc<str>);

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
    #[serde(flatten)]
    extra: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            internal: None,
            extra: None,
        }
    }

    /// This problem with one more member, `name`, for a client to act on. Never `status`, which RFC 9457 gives the
    /// HTTP status: a run's status is `run_status`.
    pub fn with_member(self, name: &'static str, value: impl Serialize) -> Self {
        ApiError {
            extra: serde_json::to_value(value).ok().map(|value| (name, value)),
            ..self
        }
    }

    pub fn unauthorized(detail: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }

    pub fn missing_scope(scope: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "missing_scope",
            format!("this client lacks the scope {scope}"),
        )
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no such {what}"),
        )
    }

    pub fn unprocessable(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, detail)
    }

    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, detail)
    }

    pub fn unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            "the database is unavailable; retry after the time in Retry-After",
        )
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        ApiError {
            internal: Some(cause.to_string()),
            ..Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "an internal error occurred; it was logged",
            )
        }
    }
}

impl From<StorageError> for ApiError {
    fn from(error: StorageError) -> Self {
        match error {
            StorageError::Unavailable(cause) => ApiError {
                internal: Some(cause.to_string()),
                ..ApiError::unavailable()
            },
            // Logged where it was found, with the run and key id (storage::sealed): not a second time here.
            StorageError::Undecryptable { .. } => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "undecryptable",
                "a stored value of this run does not decrypt with the configured ENCRYPTION_KEYS; it was logged",
            ),
            other => ApiError::internal(other),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, refusal.code(), refusal.to_string())
    }
}

impl From<ResumeError> for ApiError {
    fn from(error: ResumeError) -> Self {
        let detail = error.to_string();
        match error {
            ResumeError::UnknownKey => ApiError::unauthorized("the key is unknown or revoked"),
            ResumeError::MissingScope(scope) => ApiError::missing_scope(&scope),
            ResumeError::RunNotFound => ApiError::not_found("run"),
            ResumeError::NotRepresentable(detail) => {
                ApiError::unprocessable("format_not_representable", detail)
            }
            ResumeError::Refused(refusal) => refusal.into(),
            ResumeError::StaleTurn(status) => ApiError::conflict(
                "stale_turn",
                format!(
                    "turn_digest is not the digest of the run's current turn (the run is {}); read the run again",
                    status.as_str()
                ),
            )
            .with_member("run_status", status),
            ResumeError::AlreadyDecided => ApiError::conflict(
                "already_decided",
                "this turn was already decided, differently",
            ),
            ResumeError::NotAwaitingApproval => ApiError::conflict(
                "not_awaiting_approval",
                "the run is not waiting for approval",
            ),
            ResumeError::ResumeInProgress => ApiError::conflict(
                "resume_in_progress",
                "the approved turn's tools are still running; ask again shortly",
            ),
            ResumeError::Expired => ApiError::conflict(
                "expired",
                "the turn expired before it was decided; every call has the expired result",
            ),
            ResumeError::DeniedByRule { .. } => ApiError::conflict("denied_by_rule", detail),
            ResumeError::Remember(refused) => refused.into(),
            ResumeError::RunCancelled => ApiError::conflict(
                "run_cancelled",
                "the run was cancelled; it takes no results",
            ),
            ResumeError::RepeatedResult(_) => ApiError::unprocessable("repeated_call", detail),
            ResumeError::NotReleased(_) => ApiError::unprocessable("call_not_released", detail),
            ResumeError::NotReleasedYet(status) => {
                ApiError::conflict("not_released", detail).with_member("run_status", status)
            }
            ResumeError::AlreadyResumed(status) => {
                ApiError::conflict("run_resumed", detail).with_member("run_status", status)
            }
            ResumeError::ResultConflict(_) => ApiError::conflict("result_conflict", detail),
            ResumeError::Verdicts(error) => {
                ApiError::unprocessable(error.code(), error.to_string())
            }
            ResumeError::Claimed { until } => ApiError::conflict(
                "claimed",
                "another worker's claim on the released calls is live: run nothing; it lapses at until",
            )
            .with_member("until", until),
            ResumeError::ClaimLapsed => ApiError::conflict(
                "claim_lapsed",
                "the claim lapsed: its unposted calls ended interrupted and the run resumed without them",
            ),
            ResumeError::ClaimRequired => ApiError::conflict("claim_required", detail),
            ResumeError::UnknownClaim => ApiError::conflict("claim_required", detail),
            ResumeError::NotClaimable(status) => {
                ApiError::conflict("not_released", detail).with_member("run_status", status)
            }
            ResumeError::Redaction(cause) => ApiError::internal(cause),
            ResumeError::Storage(storage) => storage.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let problem = Problem {
            kind: format!("urn:approval-resume:problem:{}", self.code),
            title,
            status: self.status.as_u16(),
            detail: &self.detail,
            code: self.code,
            request_id: REQUEST_ID.try_with(Clone::clone).ok(),
            extra: self
                .extra
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        };
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        if let Some(cause) = self.internal {
            response
                .extensions_mut()
                .insert(InternalCause(cause.into()));
        }
        response
    }
}

/// The whole HTTP/1.1 answer to a connection over MAX_CONNECTIONS (`crate::listen`), written before any request
/// is read: 503 `too_many_connections` as problem+json, with `Retry-After`, and the connection closed.
pub fn too_many_connections() -> Vec<u8> {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_connections",
        "this instance serves MAX_CONNECTIONS connections already; retry after the time in Retry-After",
    )
    .into_closing_http1()
}

impl ApiError {
    /// The problem as a whole HTTP/1.1 answer that closes its connection, for a connection no request was read
    /// from (so there is no request id to name).
    fn into_closing_http1(self) -> Vec<u8> {
        let problem = Problem {
            kind: format!("urn:approval-resume:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error"),
            status: self.status.as_u16(),
            detail: &self.detail,
            code: self.code,
            request_id: None,
            extra: serde_json::Map::new(),
        };
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut answer = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/problem+json\r\nretry-after: {RETRY_AFTER_SECS}\r\n\
             connection: close\r\ncontent-length: {}\r\n\r\n",
            self.status.as_u16(),
            problem.title,
            body.len()
        )
        .into_bytes();
        answer.extend_from_slice(&body);
        answer
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        StorageError::from(error).into()
    }
}
