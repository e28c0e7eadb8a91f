//! The decision route's credential: a decision token, verified at once, or an API key whose lookup waits for the
//! statement that reads the run (`storage::run_snapshot`), so that the busiest route spends no statement of its own
//! on the key.
//!
//! The answers stay those of a key checked first. The key's client is judged before anything the run read says, and
//! when the path, the query or the body is refused, the key is looked up on its own first, so a caller without a
//! valid key (or without a decision scope) is told that and nothing else about its request.
//!
//! Deferring the lookup means the body is read and parsed before the key is checked. So that a caller without a valid
//! key cannot make the service read a body at all, the body is read first only for a key this
//! instance found live, with a decision scope, within the last minute (`crate::admitted_keys`), and only when the
//! body says it is small (`Content-Length` at most [`DEFERRED_KEY_MAX_BODY`], far more than a decision needs). Any
//! other request has its key looked up first, as on every other route: a key not of the form keys have is refused
//! without a statement, an unknown or revoked key or one without a decision scope before its body is read, and a
//! key that passes is remembered, so its next decisions again spend no statement on it.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::CONTENT_LENGTH;
use axum::http::request::Parts;

use super::decision_tokens::{self, TokenHolder};
use super::error::ApiError;
use super::extract::{
    Caller, RequiredScope, bearer, charge_to, client_by_key, scope, verified_token,
};
use crate::admitted_keys::AdmittedKeys;
use crate::keys;
use crate::state::AppState;

/// The largest body whose key's lookup waits for the run's read.
pub const DEFERRED_KEY_MAX_BODY: u64 = 64 * 1024;

/// Who posts a decision.
pub enum DecisionCredential {
    /// A verified decision token; its powers are fixed (the handler checks the run is one its user may decide).
    Token(TokenHolder),
    /// An API key found live lately, not looked up for this request yet: the run's read checks it.
    Key(KeyHash),
    /// An API key looked up already, before its body was read, its client holding a decision scope.
    Caller(Caller),
}

/// The hash of an API key, as `api_clients.key_hash` stores it.
pub struct KeyHash([u8; 32]);

impl KeyHash {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl<S> FromRequestParts<S> for DecisionCredential
where
    AppState: FromRef<S>,
    AdmittedKeys: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let credential = bearer(parts)?;
        if decision_tokens::looks_like_jwt(credential) {
            let state = AppState::from_ref(state);
            let holder = verified_token(&state, credential).await?;
            charge_to(parts, &holder.tenant, &holder.client_name);
            return Ok(DecisionCredential::Token(holder));
        }
        if !keys::is_well_formed(credential) {
            return Err(ApiError::unauthorized("the key is unknown or revoked"));
        }
        let hash = KeyHash(keys::hash(credential));
        let declared = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        let small = declared.is_some_and(|bytes| bytes <= DEFERRED_KEY_MAX_BODY);
        // Only the keys, not the whole state, on the path of every decision.
        let admitted_keys = AdmittedKeys::from_ref(state);
        if small && admitted_keys.recently_admitted(&hash.0) {
            return Ok(DecisionCredential::Key(hash));
        }
        let caller = lookup(&AppState::from_ref(state), &hash).await?;
        charge_to(parts, &caller.tenant, &caller.name);
        admitted_keys.admitted(hash.0);
        Ok(DecisionCredential::Caller(caller))
    }
}

impl DecisionCredential {
    /// The answer to a request whose path, query or body is refused with `refused`: the key's own refusal when it
    /// has one (it is looked up now, on its own), `refused` otherwise.
    pub async fn refuse(&self, state: &AppState, refused: ApiError) -> ApiError {
        match self {
            DecisionCredential::Token(_) | DecisionCredential::Caller(_) => refused,
            DecisionCredential::Key(hash) => match lookup(state, hash).await {
                Ok(_) => refused,
                Err(error) => error,
            },
        }
    }
}

/// The key's client, looked up on its own and holding a decision scope.
pub async fn lookup(state: &AppState, hash: &KeyHash) -> Result<Caller, ApiError> {
    client_by_key(state, hash.as_bytes(), scope::Decisions::ANY_OF).await
}
