//! Approval links (docs/design.md §20): making one for a person who may decide a waiting turn, and finding one from
//! its URL. The API (`http::links`) and the mail sender (`delivery::mail`) make them; the page (`http::link_page`)
//! reads them.
//!
//! A link's URL is `{PUBLIC_URL}/approve/{run id}/{secret}`. The secret is 256 random bits, shown once and stored
//! only as its SHA-256: as for API keys (`keys`), a random secret needs no slow hash, and a copy of the table decides
//! nothing. The run id beside it pins every read of a link to its run (docs/design.md §12).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use rand::RngCore;
use reqwest::Url;
use sha2::{Digest, Sha256};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::storage::StorageError;
use crate::storage::links::{self, NewLink};

/// The path below PUBLIC_URL where pages are served: `approve/{run id}/{secret}`.
pub const PAGE_PATH: &str = "approve";

/// The characters of a secret in a URL: 32 bytes in unpadded base64url.
const SECRET_CHARS: usize = 43;

/// Where people reach the service, and how long a link lasts (PUBLIC_URL, LINK_TTL_SECS).
#[derive(Debug, Clone)]
pub struct LinkSettings {
    pub public_url: Option<Url>,
    pub ttl: Duration,
}

impl LinkSettings {
    /// No PUBLIC_URL: no link can be made.
    pub fn unset() -> LinkSettings {
        LinkSettings {
            public_url: None,
            ttl: Duration::from_secs(86_400),
        }
    }

    /// The origin a page's form must be posted from (`Origin`), PUBLIC_URL's; `None` without it.
    pub fn origin(&self) -> Option<String> {
        self.public_url
            .as_ref()
            .map(|url| url.origin().ascii_serialization())
    }
}

/// The turn a link is for, and who it is for.
pub struct LinkFor<'a> {
    pub tenant: &'a str,
    pub run_id: Uuid,
    pub turn_index: i32,
    pub turn_digest: &'a str,
    pub uid: i64,
    /// The API client that asks for it, or `mail`.
    pub made_by: &'a str,
}

/// A link made: the URL is shown once, here.
#[derive(Debug)]
pub struct MadeLink {
    pub id: Uuid,
    pub url: String,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
pub enum MakeError {
    #[error("PUBLIC_URL is not set")]
    PublicUrlUnset,
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Makes and stores a link for `target`. Whether its person may decide the run is the caller's check (§4).
pub async fn make(
    db: impl PgExecutor<'_>,
    settings: &LinkSettings,
    target: &LinkFor<'_>,
) -> Result<MadeLink, MakeError> {
    let public_url = settings
        .public_url
        .as_ref()
        .ok_or(MakeError::PublicUrlUnset)?;
    let secret = random_text();
    let nonce = hex::encode(random_bytes::<16>());
    let id = Uuid::new_v4();
    let expires_at = links::insert(
        db,
        &NewLink {
            run_id: target.run_id,
            id,
            tenant: target.tenant,
            secret_hash: &secret_hash(&secret),
            uid: target.uid,
            turn_index: target.turn_index,
            turn_digest: target.turn_digest,
            nonce: &nonce,
            made_by: target.made_by,
            ttl_secs: i64::try_from(settings.ttl.as_secs()).unwrap_or(i64::MAX),
        },
    )
    .await?;
    Ok(MadeLink {
        id,
        url: page_url(public_url, target.run_id, &secret),
        expires_at,
    })
}

/// The stored form of a link's secret.
pub fn secret_hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether `text` has the form of a secret; one that has not needs no lookup to be unknown.
pub fn is_well_formed(text: &str) -> bool {
    text.len() == SECRET_CHARS
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// The page's URL: PUBLIC_URL, with its own path kept (a service behind a path prefix), then the page's.
fn page_url(public_url: &Url, run_id: Uuid, secret: &str) -> String {
    let base = public_url.as_str().trim_end_matches('/');
    format!("{base}/{PAGE_PATH}/{run_id}/{secret}")
}

fn random_text() -> String {
    URL_SAFE_NO_PAD.encode(random_bytes::<32>())
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_holds_256_random_bits_in_43_url_safe_characters() {
        let first = random_text();
        let second = random_text();
        assert_eq!(first.len(), SECRET_CHARS);
        assert!(is_well_formed(&first), "{first}");
        assert_ne!(first, second);
        assert!(!is_well_formed(&first[1..]));
        assert!(!is_well_formed(&format!("{}=", &first[1..])));
    }

    #[test]
    fn a_page_url_keeps_the_public_url_s_path_prefix() {
        let run = Uuid::nil();
        let at_root = Url::parse("https://approvals.example.com").unwrap();
        assert_eq!(
            page_url(&at_root, run, "s"),
            format!("https://approvals.example.com/approve/{run}/s")
        );
        let prefixed = Url::parse("https://example.com/approvals/").unwrap();
        assert_eq!(
            page_url(&prefixed, run, "s"),
            format!("https://example.com/approvals/approve/{run}/s")
        );
    }

    #[test]
    fn the_origin_of_a_form_is_public_url_s_scheme_host_and_port() {
        let settings = LinkSettings {
            public_url: Some(Url::parse("http://127.0.0.1:8080/base/").unwrap()),
            ttl: Duration::from_secs(60),
        };
        assert_eq!(settings.origin().as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(LinkSettings::unset().origin(), None);
    }
}
