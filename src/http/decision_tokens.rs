//! Decision tokens (docs/design.md §13): a short-lived JWT, signed with Ed25519 by the host application's backend for
//! one of its users, that lets a browser read and decide that user's runs and nothing else.
//!
//! `jsonwebtoken` checks the signature and the registered claims; this module picks the key by the token's
//! issuer and `kid`, and names each refusal with its own `code`, so that a host can tell a clock problem from a
//! key problem.

use axum::http::StatusCode;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use uuid::Uuid;

use super::error::ApiError;
use crate::storage::{Database, token_keys};

/// The `aud` every token must carry.
pub const AUDIENCE: &str = "approval-resume";
/// The clock skew tolerated between the host's clock and this service's, on `exp`, `nbf` and `iat`.
pub const LEEWAY_SECS: u64 = 30;
/// The longest a token may live: `exp` at most this long after `iat`.
pub const MAX_LIFETIME_SECS: u64 = 15 * 60;

/// A verified token: who it speaks for.
#[derive(Debug, Clone)]
pub struct TokenHolder {
    pub client_name: String,
    pub tenant: String,
    pub kid: String,
    /// The backend user (`sub`): the decider of every decision posted with the token.
    pub uid: i64,
    /// The one run the token works for, when it names one.
    pub run: Option<Uuid>,
}

#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    iat: u64,
    exp: u64,
    #[serde(default)]
    run: Option<Uuid>,
}

/// Whether a bearer credential is a JWT (three base64url segments) rather than an API key. API keys contain no
/// dot, so the two never overlap.
pub fn looks_like_jwt(credential: &str) -> bool {
    let segments: Vec<&str> = credential.split('.').collect();
    segments.len() == 3
        && segments.iter().all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

fn refused(code: &'static str, detail: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, code, detail)
}

/// Verifies a token against its client's registered key, at `now` (seconds since the epoch).
pub async fn verify(pool: &Database, token: &str, now: u64) -> Result<TokenHolder, ApiError> {
    let malformed = || {
        refused(
            "token_invalid",
            "the token is not a well-formed decision token",
        )
    };
    let header = jsonwebtoken::decode_header(token).map_err(|_| malformed())?;
    if header.alg != Algorithm::EdDSA {
        return Err(refused(
            "token_bad_signature",
            "decision tokens are signed with EdDSA (Ed25519)",
        ));
    }
    let kid = header.kid.ok_or_else(|| {
        refused(
            "token_unknown_kid",
            "the token's header names no kid; name the key it was signed with",
        )
    })?;
    // The issuer picks the key; nothing the unverified claims say is trusted beyond that choice, which the
    // signature check below then confirms (the issuer is also validated as a signed claim).
    let unverified: Claims =
        jsonwebtoken::dangerous::insecure_decode_claims(token).map_err(|_| malformed())?;
    let Some(key) = token_keys::find(pool, &unverified.iss, &kid).await? else {
        return Err(
            match token_keys::client_revoked(pool, &unverified.iss).await? {
                Some(true) => refused("token_client_revoked", "the token's client is revoked"),
                _ => refused(
                    "token_unknown_kid",
                    "the token's issuer has no key of that kid",
                ),
            },
        );
    };
    if key.client_revoked {
        return Err(refused(
            "token_client_revoked",
            "the token's client is revoked",
        ));
    }
    if key.retired {
        return Err(refused(
            "token_unknown_kid",
            "the key of that kid is retired",
        ));
    }
    // Checked here as well as when the key was added: the client's scopes may have changed since (docs/design.md §13).
    if !key.client_may_decide {
        return Err(refused(
            "token_client_lacks_scope",
            "the token's client does not hold decisions:write, which a token's client needs",
        ));
    }
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.leeway = LEEWAY_SECS;
    validation.validate_nbf = true;
    validation.set_audience(&[AUDIENCE]);
    validation.set_issuer(&[&key.client_name]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss", "sub"]);
    let claims = jsonwebtoken::decode::<Claims>(
        token,
        &DecodingKey::from_ed_der(&key.public_key),
        &validation,
    )
    .map_err(|error| match error.kind() {
        ErrorKind::ExpiredSignature => refused("token_expired", "the token has expired"),
        ErrorKind::ImmatureSignature => {
            refused("token_not_yet_valid", "the token is not valid yet (nbf)")
        }
        ErrorKind::InvalidSignature | ErrorKind::InvalidEddsaKey => refused(
            "token_bad_signature",
            "the token's signature does not verify with the key of its kid",
        ),
        ErrorKind::InvalidAudience => refused(
            "token_wrong_audience",
            "the token's aud is not approval-resume",
        ),
        _ => malformed(),
    })?
    .claims;
    check_times(claims.iat, claims.exp, now)?;
    let uid = claims
        .sub
        .parse::<i64>()
        .ok()
        .filter(|uid| *uid >= 1 && claims.sub == uid.to_string())
        .ok_or_else(|| {
            refused(
                "token_invalid",
                "the token's sub must be a backend user's uid, as a decimal string",
            )
        })?;
    Ok(TokenHolder {
        client_name: key.client_name,
        tenant: key.tenant,
        kid,
        uid,
        run: claims.run,
    })
}

/// What `jsonwebtoken` does not check: `iat` not in the future, and a lifetime of at most 15 minutes.
fn check_times(iat: u64, exp: u64, now: u64) -> Result<(), ApiError> {
    if iat > now + LEEWAY_SECS {
        return Err(refused(
            "token_not_yet_valid",
            "the token's iat is in the future",
        ));
    }
    if exp.saturating_sub(iat) > MAX_LIFETIME_SECS {
        return Err(refused(
            "token_lifetime_too_long",
            "a token's exp may be at most 15 minutes after its iat",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwt_is_told_from_an_api_key_by_its_three_base64url_segments() {
        assert!(looks_like_jwt(
            "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiI3In0.c2ln-_"
        ));
        assert!(!looks_like_jwt("ar_live_0123456789abcdef"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a..c"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a.b+.c"));
    }

    #[test]
    fn an_iat_in_the_future_beyond_the_leeway_is_not_yet_valid() {
        assert!(check_times(1_000 + LEEWAY_SECS, 1_100 + LEEWAY_SECS, 1_000).is_ok());
        let error = check_times(1_001 + LEEWAY_SECS, 1_100 + LEEWAY_SECS, 1_000).unwrap_err();
        assert_eq!(error.code, "token_not_yet_valid");
    }

    #[test]
    fn a_token_may_live_fifteen_minutes_and_no_longer() {
        assert!(check_times(1_000, 1_000 + 900, 1_000).is_ok());
        let error = check_times(1_000, 1_000 + 901, 1_000).unwrap_err();
        assert_eq!(error.code, "token_lifetime_too_long");
    }
}
