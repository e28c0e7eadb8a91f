//! The settings of approval links and of the mail that brings them (docs/design.md §20).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use reqwest::Url;

use super::ConfigError;
use crate::delivery::mail::smtp_uses_tls;
use crate::domain::secret::Secret;

/// Where people reach the service, and how long a link lasts.
#[derive(Debug, Clone, Args)]
pub struct LinksConfig {
    /// The service's address as people reach it (`https://approvals.example.com`), the start of every approval
    /// link; a page's form decides only when its `Origin` is this address's. Unset: no link can be made (409
    /// `public_url_unset`) and no mail is sent.
    #[arg(long, env = "PUBLIC_URL", value_name = "PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<Url>,

    /// Seconds an approval link lasts from when it is made.
    #[arg(long, env = "LINK_TTL_SECS", value_name = "LINK_TTL_SECS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(60..=30 * 86_400))]
    pub link_ttl_secs: u64,

    #[command(flatten)]
    pub mail: MailConfig,
}

/// How mail is sent: the SMTP server, the sender, and the caps.
#[derive(Debug, Clone, Args)]
pub struct MailConfig {
    /// The SMTP server mail is sent through: `smtps://user:password@host:465` (TLS from the start) or
    /// `smtp://host:587?tls=required` (STARTTLS). Plain `smtp://` only with SMTP_ALLOW_PLAINTEXT. Unset: no mail.
    /// Held as a secret (it may carry the server's password) and parsed by [`LinksConfig::validate`], so that no
    /// message ever echoes it.
    #[arg(long, env = "SMTP_URL", value_name = "SMTP_URL")]
    pub smtp_url: Option<Secret>,

    /// The sender of every mail (`Approvals <approvals@example.com>`); required with SMTP_URL.
    #[arg(long, env = "MAIL_FROM", value_name = "MAIL_FROM", value_parser = parse_mailbox)]
    pub mail_from: Option<lettre::message::Mailbox>,

    /// Send mail to an SMTP server without TLS: only where the network to it is trusted (a relay on the same host).
    #[arg(long, env = "SMTP_ALLOW_PLAINTEXT", value_name = "SMTP_ALLOW_PLAINTEXT", default_value_t = false,
          action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub smtp_allow_plaintext: bool,

    /// A PEM file of certificate authorities the SMTP server's certificate may chain to, beside the public ones
    /// (a private relay's own authority).
    #[arg(long, env = "SMTP_CA_FILE", value_name = "SMTP_CA_FILE")]
    pub smtp_ca_file: Option<PathBuf>,

    /// Most mails sent for one tenant in an hour; past it, a turn's mail is not sent (counted in /metrics).
    #[arg(long, env = "MAIL_PER_TENANT_PER_HOUR", value_name = "MAIL_PER_TENANT_PER_HOUR",
          default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub mail_per_tenant_per_hour: u32,

    /// Most mails sent to one person in an hour; past it, a turn's mail to them is not sent.
    #[arg(long, env = "MAIL_PER_PERSON_PER_HOUR", value_name = "MAIL_PER_PERSON_PER_HOUR",
          default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub mail_per_person_per_hour: u32,
}

impl LinksConfig {
    pub fn link_ttl(&self) -> Duration {
        Duration::from_secs(self.link_ttl_secs)
    }

    /// The SMTP server's URL, parsed; `None` when SMTP_URL is unset. The error never holds the URL's text.
    pub fn smtp_url(&self) -> Result<Option<Url>, ConfigError> {
        self.mail
            .smtp_url
            .as_ref()
            .map(|url| parse_smtp_url(url.expose()).map_err(|message| refused("SMTP_URL", message)))
            .transpose()
    }

    /// The settings checked against each other: SMTP_URL well formed, mail with a sender, TLS unless plaintext is
    /// allowed, and PUBLIC_URL (its links start with it).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mail = &self.mail;
        let Some(smtp) = self.smtp_url()? else {
            return Ok(());
        };
        if mail.mail_from.is_none() {
            return Err(refused(
                "MAIL_FROM",
                "SMTP_URL is set: name the sender of the mail",
            ));
        }
        if self.public_url.is_none() {
            return Err(refused(
                "PUBLIC_URL",
                "SMTP_URL is set: a mail's link starts with the service's public address",
            ));
        }
        if !mail.smtp_allow_plaintext && !smtp_uses_tls(&smtp) {
            return Err(refused(
                "SMTP_URL",
                "it sends mail without TLS: use smtps://, or smtp://…?tls=required for STARTTLS, or set \
                 SMTP_ALLOW_PLAINTEXT=true where the network to the server is trusted",
            ));
        }
        Ok(())
    }
}

fn refused(variable: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        variable,
        message: message.into(),
    }
}

fn parse_public_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|error| format!("{text:?} is not a URL: {error}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("{text:?} is not an http(s) address with a host"));
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(format!(
            "{text:?} carries a query, a fragment or credentials; give the address alone"
        ));
    }
    Ok(url)
}

fn parse_smtp_url(text: &str) -> Result<Url, String> {
    // Never echo the text: it may hold the server's password.
    let url = Url::parse(text).map_err(|_| "not a URL".to_owned())?;
    if !matches!(url.scheme(), "smtp" | "smtps") || url.host_str().is_none() {
        return Err("not an smtp:// or smtps:// URL with a host".to_owned());
    }
    Ok(url)
}

fn parse_mailbox(text: &str) -> Result<lettre::message::Mailbox, String> {
    text.parse()
        .map_err(|error| format!("{text:?} is not a mail address: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Command;
    use crate::config::testing::parse;

    fn links(args: &[&str]) -> Result<LinksConfig, String> {
        parse(&[&["serve"], args].concat())
            .map_err(|error| error.to_string())
            .map(|cli| match cli.into_command() {
                Command::Serve(config) => config.links,
                other => panic!("parsed as {other:?}"),
            })
    }

    #[test]
    fn a_public_url_must_be_an_http_address_alone() {
        assert!(links(&["--public-url", "https://approvals.example.com"]).is_ok());
        for bad in [
            "ftp://example.com",
            "https://example.com/?a=1",
            "https://u:p@example.com",
            "approvals",
        ] {
            let error = links(&["--public-url", bad]).unwrap_err();
            assert!(error.contains("PUBLIC_URL"), "{error}");
        }
    }

    #[test]
    fn mail_needs_a_sender_a_public_url_and_tls_unless_plaintext_is_allowed() {
        let base = [
            "--public-url",
            "https://approvals.example.com",
            "--mail-from",
            "Approvals <approvals@example.com>",
        ];
        let with = |extra: &[&str]| {
            links(&[&base[..], extra].concat())
                .unwrap()
                .validate()
                .map_err(|error| error.to_string())
        };
        assert!(with(&["--smtp-url", "smtps://mail.example.com"]).is_ok());
        assert!(with(&["--smtp-url", "smtp://mail.example.com:587?tls=required"]).is_ok());
        let plain = with(&["--smtp-url", "smtp://mail.example.com"]).unwrap_err();
        assert!(plain.contains("SMTP_ALLOW_PLAINTEXT"), "{plain}");
        assert!(
            with(&[
                "--smtp-url",
                "smtp://mail.example.com",
                "--smtp-allow-plaintext",
                "true"
            ])
            .is_ok()
        );
        let no_sender = links(&[
            "--public-url",
            "https://a.example",
            "--smtp-url",
            "smtps://m.example",
        ])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
        assert!(no_sender.contains("MAIL_FROM"), "{no_sender}");
        let no_url = links(&[
            "--mail-from",
            "a@example.com",
            "--smtp-url",
            "smtps://m.example",
        ])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
        assert!(no_url.contains("PUBLIC_URL"), "{no_url}");
    }

    #[test]
    fn an_smtp_url_that_is_refused_never_shows_its_password() {
        let error = links(&["--smtp-url", "imap://user:hunter2@mail.example.com"])
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("SMTP_URL"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }
}
