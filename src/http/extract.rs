//! Extractors that answer their own failures as problems: the caller's identity, JSON bodies, run ids and queries.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRef, FromRequest, FromRequestParts, Path, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::error::ApiError;
use crate::app::AppState;
use crate::domain::scopes::Scope;
use crate::keys;
use crate::storage::clients;

/// The authenticated API client making the request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub name: String,
    pub tenant: String,
    scopes: Vec<String>,
}

impl Caller {
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.iter().any(|held| held == scope.as_str())
    }

    /// Refuses the request (403) unless the client holds `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.has(scope) {
            Ok(())
        } else {
            Err(ApiError::missing_scope(scope.as_str()))
        }
    }
}

impl<S> FromRequestParts<S> for Caller
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = AppState::from_ref(state);
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("send Authorization: Bearer <key>"))?;
        // The scheme name is case-insensitive (RFC 9110 §11.1).
        let key = header
            .to_str()
            .ok()
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, key)| key.trim())
            .filter(|key| !key.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized("the Authorization header must be: Bearer <key>")
            })?;
        let client = clients::find_active_by_key_hash(&state.pool, &keys::hash(key))
            .await?
            .ok_or_else(|| ApiError::unauthorized("the key is unknown or revoked"))?;
        tracing::Span::current().record("client", client.name.as_str());
        Ok(Caller {
            name: client.name,
            tenant: client.tenant,
            scopes: client.scopes,
        })
    }
}

/// A JSON body, strictly parsed; its failures answer 400, 413, 415 or 422 as problems.
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(Json(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as Content-Type: application/json",
        ),
        JsonRejection::JsonDataError(error) => {
            ApiError::unprocessable("invalid_body", error.body_text())
        }
        JsonRejection::JsonSyntaxError(error) => {
            ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", error.body_text())
        }
        JsonRejection::BytesRejection(error) if error.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body is larger than MAX_BODY_BYTES",
            )
        }
        other => ApiError::new(StatusCode::BAD_REQUEST, "bad_request", other.body_text()),
    }
}

/// A run id from the path. A text that is no UUID names no run: 404, as for any run the client cannot see.
pub struct RunId(pub Uuid);

impl<S: Send + Sync> FromRequestParts<S> for RunId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found("run"))?;
        Uuid::parse_str(&text)
            .map(RunId)
            .map_err(|_| ApiError::not_found("run"))
    }
}

/// A query string, strictly parsed; failures answer 422.
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|rejection: QueryRejection| {
                ApiError::unprocessable("invalid_query", rejection.body_text())
            })
    }
}
