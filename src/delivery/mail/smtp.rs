//! The SMTP transport of SMTP_URL (lettre): TLS as the URL asks (`smtps://`, or STARTTLS with `?tls=required`),
//! plaintext only where the settings allowed it, and the certificate authorities of SMTP_CA_FILE beside the public
//! ones for a private relay.

use std::path::Path;
use std::time::Duration;

use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, Tokio1Executor};
use reqwest::Url;

/// How long one SMTP exchange may take before the attempt fails and is tried again later.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum SmtpError {
    #[error("SMTP_URL: {0}")]
    Url(String),
    #[error("SMTP_CA_FILE {path}: {why}")]
    CaFile { path: String, why: String },
}

/// The transport for `url`, trusting `ca_file`'s authorities too when given.
pub fn transport(
    url: &Url,
    ca_file: Option<&Path>,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, SmtpError> {
    // lettre reads the scheme, the credentials, the port and `tls=required` from the URL itself.
    let builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(url.as_str())
        .map_err(|error| SmtpError::Url(without_url(&error.to_string(), url)))?
        .timeout(Some(SMTP_TIMEOUT));
    let Some(ca_file) = ca_file else {
        return Ok(builder.build());
    };
    let refused = |why: String| SmtpError::CaFile {
        path: ca_file.display().to_string(),
        why,
    };
    let pem = std::fs::read(ca_file).map_err(|error| refused(error.to_string()))?;
    let certificate = Certificate::from_pem(&pem).map_err(|error| refused(error.to_string()))?;
    let host = url.host_str().unwrap_or_default().to_owned();
    let parameters = TlsParameters::builder(host)
        .add_root_certificate(certificate)
        .build()
        .map_err(|error| refused(error.to_string()))?;
    let tls = if url.scheme() == "smtps" {
        Tls::Wrapper(parameters)
    } else if smtp_uses_tls(url) {
        Tls::Required(parameters)
    } else {
        // Plaintext allowed (SMTP_ALLOW_PLAINTEXT): STARTTLS where the server offers it.
        Tls::Opportunistic(parameters)
    };
    Ok(builder.tls(tls).build())
}

/// An error's text with the URL (which may hold a password) taken out.
fn without_url(text: &str, url: &Url) -> String {
    text.replace(url.as_str(), "[SMTP_URL]")
        .replace(url.password().unwrap_or("\u{0}"), "[secret]")
}

/// Whether lettre will require TLS of this URL: `smtps://`, or `smtp://` with `tls=required` (STARTTLS).
pub fn smtp_uses_tls(url: &Url) -> bool {
    url.scheme() == "smtps"
        || url
            .query_pairs()
            .any(|(name, value)| name == "tls" && value == "required")
}
