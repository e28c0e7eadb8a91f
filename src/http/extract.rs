//! Extractors that answer their own failures as problems: the caller's identity (an API key, or a decision token
//! on the routes a token may use) and scope, JSON bodies, run ids and
//! queries.

use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, MissingJsonContentType, QueryRejection};
use axum::extract::{FromRef, FromRequest, FromRequestParts, Path, Request};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use uuid::Uuid;

use super::body_budget::PlaceAfterArrival;
use super::charged_body::Payer;
use super::decision_tokens::{self, TokenHolder};
use super::error::ApiError;
use crate::domain::limits::SMALL_BODY_BYTES;
use crate::domain::scopes::Scope;
use crate::domain::token_view::Reader;
use crate::keys;
use crate::state::AppState;
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

/// Who is asking: a client with its API key, or a browser with a decision token.
#[derive(Debug, Clone)]
pub enum Credential {
    Key(Caller),
    Token(TokenHolder),
}

impl Credential {
    /// Which reader this is, for what its answers may show of a run's payloads (`domain::token_view`).
    pub fn reader(&self) -> Reader {
        match self {
            Credential::Key(_) => Reader::Key,
            Credential::Token(_) => Reader::Token,
        }
    }
}

/// The bearer credential of a route a decision token may use, authenticated: a key whose client holds at least one
/// of `any_of`, or a verified decision token (its powers are fixed; the handler checks the run).
async fn key_or_token(
    parts: &Parts,
    state: &AppState,
    any_of: &[Scope],
) -> Result<Credential, ApiError> {
    let credential = bearer(parts)?;
    if decision_tokens::looks_like_jwt(credential) {
        return Ok(Credential::Token(verified_token(state, credential).await?));
    }
    client_by_key(state, &keys::hash(credential), any_of)
        .await
        .map(Credential::Key)
}

/// The holder of a decision token, verified now.
pub(super) async fn verified_token(state: &AppState, token: &str) -> Result<TokenHolder, ApiError> {
    let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or_default();
    let holder = decision_tokens::verify(&state.pool, token, now).await?;
    tracing::Span::current().record("client", holder.client_name.as_str());
    Ok(holder)
}

/// The bearer key of a route only a key may use, its client holding at least one of `any_of`.
async fn key_only(parts: &Parts, state: &AppState, any_of: &[Scope]) -> Result<Caller, ApiError> {
    let key = bearer(parts)?;
    // A token is refused here whether or not it verifies: it has no business on this route either way, and
    // refusing it unread spares the database.
    if decision_tokens::looks_like_jwt(key) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "token_not_allowed",
            "a decision token may only read the runs its user may decide and post decisions on them",
        ));
    }
    client_by_key(state, &keys::hash(key), any_of).await
}

/// The live client holding the API key of this hash, if it holds at least one of `any_of`: the one key and scope
/// check of the extractors.
pub(super) async fn client_by_key(
    state: &AppState,
    key_hash: &[u8],
    any_of: &[Scope],
) -> Result<Caller, ApiError> {
    let client = clients::find_active_by_key_hash(&state.pool, key_hash).await?;
    admit(
        client.map(|client| (client.name, client.tenant, client.scopes)),
        any_of,
    )
}

/// The live client `(name, tenant, scopes)` a key's lookup found (`None`: the key is unknown or revoked, 401),
/// admitted if it holds at least one of `any_of` (403 otherwise) and named in the request's span: the one check of a
/// key, whichever statement looked it up.
pub(super) fn admit(
    found: Option<(String, String, Vec<String>)>,
    any_of: &[Scope],
) -> Result<Caller, ApiError> {
    let (name, tenant, scopes) =
        found.ok_or_else(|| ApiError::unauthorized("the key is unknown or revoked"))?;
    tracing::Span::current().record("client", name.as_str());
    let caller = Caller {
        name,
        tenant,
        scopes,
    };
    require_any(&caller, any_of)?;
    Ok(caller)
}

/// The credential of `Authorization: Bearer <credential>`.
pub(super) fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("send Authorization: Bearer <key>"))?;
    // The scheme name is case-insensitive (RFC 9110 §11.1).
    header
        .to_str()
        .ok()
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, key)| key.trim())
        .filter(|key| !key.is_empty())
        .ok_or_else(|| ApiError::unauthorized("the Authorization header must be: Bearer <key>"))
}

/// On a route a decision token may use: the client holding the scope `R` names, or a verified token, whose
/// powers are fixed (the handler checks the run is one its user may decide).
pub struct KeyOrToken<R>(pub Credential, pub PhantomData<fn() -> R>);

impl<S, R> FromRequestParts<S> for KeyOrToken<R>
where
    AppState: FromRef<S>,
    S: Send + Sync,
    R: RequiredScope,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = AppState::from_ref(state);
        let credential = key_or_token(parts, &state, R::ANY_OF).await?;
        match &credential {
            Credential::Key(caller) => charge_to(parts, &caller.tenant, &caller.name),
            Credential::Token(holder) => charge_to(parts, &holder.tenant, &holder.client_name),
        }
        Ok(KeyOrToken(credential, PhantomData))
    }
}

/// Names the client the request's body is charged to, once its key or token is checked (`charged_body::Payer`): a
/// request with a body has a payer, one without has nothing to charge.
pub(super) fn charge_to(parts: &Parts, tenant: &str, client: &str) {
    if let Some(payer) = parts.extensions.get::<Payer>() {
        payer.is_client(tenant, client);
    }
}

fn require_any(caller: &Caller, any_of: &[Scope]) -> Result<(), ApiError> {
    if any_of.iter().any(|scope| caller.has(*scope)) {
        Ok(())
    } else {
        let names: Vec<&str> = any_of.iter().map(|scope| scope.as_str()).collect();
        Err(ApiError::missing_scope(&names.join(" or ")))
    }
}

/// The scopes a route requires, named by a type so that the check is an extractor of its own.
pub trait RequiredScope {
    /// The client must hold at least one of these.
    const ANY_OF: &'static [Scope];
}

/// The caller, holding the scope `R` names. Handlers take it first, so the scope is checked right after the key,
/// before the path, the query or the body are read: a client without the scope learns nothing from how the rest
/// of its request would have been refused, and its body is never parsed.
pub struct Authorized<R>(pub Caller, pub PhantomData<fn() -> R>);

impl<S, R> FromRequestParts<S> for Authorized<R>
where
    AppState: FromRef<S>,
    S: Send + Sync,
    R: RequiredScope,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = AppState::from_ref(state);
        let caller = key_only(parts, &state, R::ANY_OF).await?;
        charge_to(parts, &caller.tenant, &caller.name);
        Ok(Authorized(caller, PhantomData))
    }
}

/// The scope each route requires, as types for `Authorized`.
pub mod scope {
    use super::RequiredScope;
    use crate::domain::scopes::Scope;

    macro_rules! required_scopes {
        ($($(#[$doc:meta])* $name:ident => [$($scope:ident),+];)*) => {$(
            $(#[$doc])*
            pub struct $name;

            impl RequiredScope for $name {
                const ANY_OF: &'static [Scope] = &[$(Scope::$scope),+];
            }
        )*};
    }

    required_scopes! {
        UsersWrite => [UsersWrite];
        RunsWrite => [RunsWrite];
        RunsRead => [RunsRead];
        /// Either decision scope: which one a decision needs depends on its body, so that one is checked after the
        /// body is read.
        Decisions => [DecisionsWrite, DecisionsAnonymous];
        ApprovalsRead => [ApprovalsRead];
        MetricsRead => [MetricsRead];
        EventsRead => [EventsRead];
        WebhooksWrite => [WebhooksWrite];
        /// Making and revoking remembered decisions (docs/design.md §18) with a key.
        DecisionsWrite => [DecisionsWrite];
        /// Listing remembered decisions.
        RulesRead => [RunsRead, DecisionsWrite];
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
        let raw = json_text(request, state).await?;
        json_shape(&raw).map(Json)
    }
}

/// A body's JSON text, before its shape is looked at. The whole body must be JSON (UTF-8, well formed, nothing after
/// it) first: parsed straight into a shape, a body would be refused 422 for an unknown member it names before the
/// bytes that make it no JSON at all are read, and the same broken body would get 400 or 422 by where it breaks.
///
/// A large body takes its place among those parsed at once (`body_budget::PlaceAfterArrival`) between its arrival
/// and its parsing: the wait for a place holds no connection's worth of unsent bytes, and the parsing is what the
/// places bound. Taking it moves the handler to its low-priority thread (`large_body_threads`) before it parses.
pub(super) async fn json_text<S: Send + Sync>(
    request: Request,
    state: &S,
) -> Result<Box<RawValue>, ApiError> {
    if !declares_json(request.headers()) {
        return Err(json_rejection(MissingJsonContentType::default().into()));
    }
    let place = request.extensions().get::<PlaceAfterArrival>().cloned();
    let bytes = Bytes::from_request(request, state)
        .await
        .map_err(|rejection| json_rejection(rejection.into()))?;
    // A body sent in chunks is counted as large before it arrives; arrived small, it has no parsing worth a place.
    if let Some(place) = place.filter(|_| bytes.len() > SMALL_BODY_BYTES) {
        place.take().await?;
    }
    let raw = match axum::Json::<Box<RawValue>>::from_bytes(&bytes) {
        Ok(axum::Json(raw)) => raw,
        Err(rejection) => return Err(json_rejection(rejection)),
    };
    if nesting_depth(raw.get()) > MAX_NESTING {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("the body nests arrays and objects deeper than {MAX_NESTING} levels"),
        ));
    }
    Ok(raw)
}

/// Whether the request says its body is JSON (`application/json`, or any `application/…+json`), as axum's `Json`
/// asks; [`json_text`] reads the bytes and the JSON apart, so it asks first, as `Json` does.
fn declares_json(headers: &HeaderMap) -> bool {
    let Some(mime) = headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<mime::Mime>().ok())
    else {
        return false;
    };
    mime.type_() == "application"
        && (mime.subtype() == "json" || mime.suffix().is_some_and(|suffix| suffix == "json"))
}

/// The body's text ([`json_text`]) read into its shape `T`; what does not fit is 422 `invalid_body`.
pub(super) fn json_shape<T: DeserializeOwned>(raw: &RawValue) -> Result<T, ApiError> {
    axum::Json::<T>::from_bytes(raw.get().as_bytes())
        .map(|axum::Json(value)| value)
        .map_err(json_rejection)
}

/// The deepest nesting of arrays and objects a body may have: serde_json's own limit, which guards the stack of
/// every recursive walk over a parsed value. Checked on the text first, so that a body nested deeper is refused
/// 400 whatever its shape, not 422 for whichever member the parser happened to read first.
const MAX_NESTING: usize = 127;

/// The deepest nesting of arrays and objects in a JSON text that was already checked to be JSON. Most of a large
/// body's bytes are inside strings, so a string is crossed by a vectorized search for its closing quote (a backslash
/// and the byte it escapes are stepped over), and only the text between strings is read byte by byte.
fn nesting_depth(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut depth, mut deepest, mut at) = (0usize, 0usize, 0usize);
    while let Some(&byte) = bytes.get(at) {
        at += 1;
        match byte {
            b'"' => at = after_string(bytes, at),
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Where the string whose contents start at `at` (just after its opening quote) ends: just after its closing quote,
/// or the text's end if it has none.
fn after_string(bytes: &[u8], mut at: usize) -> usize {
    while let Some(found) = bytes
        .get(at..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        at += found;
        if bytes[at] == b'"' {
            return at + 1;
        }
        at += 2;
    }
    bytes.len()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nesting_depth_counts_arrays_and_objects_but_not_brackets_inside_strings() {
        assert_eq!(nesting_depth("1"), 0);
        assert_eq!(nesting_depth("[]"), 1);
        assert_eq!(nesting_depth(r#"{"a": [1, {"b": []}], "c": {}}"#), 4);
        assert_eq!(nesting_depth(r#"["[[[{{{", "\"[[[", "\\"]"#), 1);
        assert_eq!(
            nesting_depth(&format!("{}{}", "[".repeat(500), "]".repeat(500))),
            500
        );
    }

    #[test]
    fn the_nesting_depth_steps_over_escapes_at_the_ends_of_strings_and_of_the_text() {
        assert_eq!(nesting_depth(r#"["\\", ["\\\"]", {}]]"#), 3);
        assert_eq!(nesting_depth(r#"[["\u005b\"", "a\\"], "\\\\"]"#), 2);
        assert_eq!(nesting_depth(r#"["\""#), 1);
        assert_eq!(nesting_depth("[\"\\"), 1);
        assert_eq!(nesting_depth(r#"["#), 1);
    }

    #[test]
    fn the_nesting_limit_is_the_one_serde_json_parses_up_to() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(serde_json::from_str::<serde_json::Value>(&nested(MAX_NESTING)).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&nested(MAX_NESTING + 1)).is_err());
    }
}
