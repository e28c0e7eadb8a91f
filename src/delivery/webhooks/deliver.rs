//! One webhook request: POST the signed body to the subscription's URL, under the limits that keep a slow,
//! hostile or misdirected receiver from costing the service more than one bounded attempt.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderValue};

use super::sign::Signed;
use super::ssrf::{self, GuardedResolver};

/// The limits of every delivery.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole request, connect to last byte read.
    pub timeout: Duration,
    /// Most bytes of the answer read; the rest is dropped (the answer's content is not used anyway).
    pub max_response_bytes: usize,
    /// Whether loopback, link-local and private addresses may be reached.
    pub allow_private: bool,
}

/// The HTTP client of deliveries: names resolved only through the SSRF guard, no redirects, no proxy from the
/// environment, a timeout on every request.
pub fn client(limits: &Limits) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver {
            allow_private: limits.allow_private,
        }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(limits.timeout)
        .connect_timeout(limits.timeout)
        .user_agent(concat!(
            "approval-resume/",
            env!("CARGO_PKG_VERSION"),
            " (webhooks)"
        ))
        .build()
        .map_err(|error| format!("cannot build the webhook client: {error}"))
}

/// Why an attempt failed, in words that hold no payload (they are stored and listed), and never an address or what
/// a name resolved to (a refusal's detail is for the log: [`DeliveryError::detail`]).
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("refused: {}", ssrf::REFUSED)]
    Refused(ssrf::Refusal),
    #[error("refused: {0}")]
    Invalid(&'static str),
    #[error("the receiver answered {0}")]
    Status(u16),
    #[error("no answer within the timeout")]
    Timeout,
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("the request failed: {0}")]
    Request(String),
}

/// Sends one signed body; `Ok` when the receiver answered 2xx.
pub async fn post(
    client: &reqwest::Client,
    limits: &Limits,
    url: &str,
    signed: &Signed,
    body: Vec<u8>,
) -> Result<(), DeliveryError> {
    let url = reqwest::Url::parse(url).map_err(|_| DeliveryError::Invalid("not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(DeliveryError::Invalid("only http and https URLs"));
    }
    ssrf::check_host(&url, limits.allow_private).map_err(DeliveryError::Refused)?;
    let header = |text: String| {
        HeaderValue::try_from(text).map_err(|_| DeliveryError::Invalid("a header is not valid"))
    };
    let response = client
        .post(url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header("webhook-id", header(signed.id.clone())?)
        .header("webhook-timestamp", header(signed.timestamp.to_string())?)
        .header("webhook-signature", header(signed.signature.clone())?)
        .body(body)
        .send()
        .await
        .map_err(classify)?;
    let status = response.status();
    drain(response, limits.max_response_bytes).await;
    if status.is_success() {
        Ok(())
    } else {
        Err(DeliveryError::Status(status.as_u16()))
    }
}

/// Reads at most `cap` bytes of the answer, so that the connection can be reused when the answer is small, and an
/// endless answer costs no more than `cap`.
async fn drain(mut response: reqwest::Response, cap: usize) {
    let mut read = 0;
    while read <= cap {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            _ => return,
        }
    }
}

impl DeliveryError {
    /// What ops may read in the log: a refusal's address or name; `None` when the stored text says it all.
    pub fn detail(&self) -> Option<String> {
        match self {
            DeliveryError::Refused(refusal) => Some(refusal.to_string()),
            _ => None,
        }
    }
}

fn classify(error: reqwest::Error) -> DeliveryError {
    // The guarded resolver's refusal arrives as a connect error: found by its type, so its text stays in the log.
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(inner) = source {
        if let Some(refusal) = inner.downcast_ref::<ssrf::Refusal>() {
            return DeliveryError::Refused(refusal.clone());
        }
        source = inner.source();
    }
    if error.is_timeout() {
        DeliveryError::Timeout
    } else if error.is_connect() {
        DeliveryError::Connect(source_text(&error))
    } else {
        DeliveryError::Request(source_text(&error))
    }
}

/// The innermost cause of an error, which says what went wrong (the outer texts repeat the URL).
fn source_text(error: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = error;
    while let Some(inner) = source.source() {
        source = inner;
    }
    source.to_string()
}
