//! `GET /ui/approval-card.js`: the approval card (docs/design.md §13), a dependency-free ES module compiled into the
//! binary from `ui/approval-card.js`, so that the card always speaks the API of the service that serves it.
//!
//! It is served to pages of any origin: a module script loaded from another origin is fetched with CORS, and the
//! file is public and carries no credential. Browsers revalidate it with its ETag, so a new release reaches them
//! within the `max-age`.

use std::sync::LazyLock;

use axum::http::header::{
    ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// The card's source.
pub const APPROVAL_CARD_JS: &str = include_str!("../../ui/approval-card.js");

/// A strong ETag of the source: the first 16 bytes of its SHA-256, quoted.
static ETAG_VALUE: LazyLock<String> = LazyLock::new(|| {
    let digest = Sha256::digest(APPROVAL_CARD_JS.as_bytes());
    format!("\"{}\"", hex::encode(&digest[..16]))
});

pub async fn approval_card(headers: HeaderMap) -> Response {
    let etag = ETAG_VALUE.as_str();
    let fresh = headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| matches!(tag.trim(), "*") || tag.trim() == etag);
    let common = [
        (CACHE_CONTROL, "public, max-age=300"),
        (ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        (
            HeaderName::from_static("cross-origin-resource-policy"),
            "cross-origin",
        ),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // Applies only where the file opened as a document: then nothing of it may run or load.
        (CONTENT_SECURITY_POLICY, "default-src 'none'; sandbox"),
        (ETAG, etag),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [(CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APPROVAL_CARD_JS,
    )
        .into_response()
}

/// The approval page's stylesheet (docs/design.md §20), the card's look for a page of its own.
pub const APPROVAL_PAGE_CSS: &str = include_str!("../../ui/approval-page.css");

/// `GET /ui/approval-page.css`: public, carries nothing secret; served from the binary so that the page's
/// Content-Security-Policy allows no inline style.
pub async fn approval_page_css() -> Response {
    (
        [
            (CACHE_CONTROL, "public, max-age=300"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (CONTENT_TYPE, "text/css; charset=utf-8"),
        ],
        APPROVAL_PAGE_CSS,
    )
        .into_response()
}
