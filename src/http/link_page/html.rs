//! The approval page's HTML (templates/link_*.html, compiled in by askama, every value escaped) and the headers it
//! is served with: no script at all, no inline style, never cached, never framed, no referrer beyond its origin.

use askama::Template;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;

/// A waiting turn, and what its person may do about it now.
#[derive(Template)]
#[template(path = "link_form.html")]
pub struct FormPage {
    pub title: &'static str,
    pub stylesheet: String,
    pub decider: String,
    pub owner: String,
    /// Where the run came from (docs/design.md §2), when it said.
    pub source: Option<String>,
    pub run_id: String,
    pub expires_at: Option<String>,
    pub calls: Vec<CallLine>,
    pub nonce: String,
    pub may_approve: bool,
    /// Why Approve is not offered, when it is not.
    pub why_no_approve: &'static str,
}

/// One pending call as the page shows it.
pub struct CallLine {
    pub name: String,
    pub effect: &'static str,
    /// Only where the run's privacy level shows a decision token of this person arguments.
    pub arguments: Option<String>,
    pub rule: Option<&'static str>,
}

/// A turn that no longer waits: the verdict, and for denied and expired calls the text the model reads.
#[derive(Template)]
#[template(path = "link_outcome.html")]
pub struct OutcomePage {
    pub title: &'static str,
    pub stylesheet: String,
    pub summary: String,
    pub texts: Vec<ModelText>,
}

/// A call's fixed text, as its tool result holds it.
pub struct ModelText {
    pub tool: String,
    pub text: String,
}

/// A link that decides nothing, or a post that was refused, and why, in fixed words.
#[derive(Template)]
#[template(path = "link_refused.html")]
pub struct RefusedPage {
    pub title: &'static str,
    pub stylesheet: String,
    pub explanation: &'static str,
}

/// Renders `page` with `status` and the page's headers. `style_origin` is the origin its stylesheet comes from
/// (PUBLIC_URL's), the only thing the page loads.
pub fn respond(status: StatusCode, page: &impl Template, style_origin: &str) -> Response {
    let body = match page.render() {
        Ok(body) => body,
        Err(error) => {
            return ApiError::internal(format!("the approval page: {error}")).into_response();
        }
    };
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    let policy = format!(
        "default-src 'none'; style-src {style_origin}; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    );
    if let Ok(policy) = HeaderValue::from_str(&policy) {
        headers.insert(CONTENT_SECURITY_POLICY, policy);
    }
    response
}
