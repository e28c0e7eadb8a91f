//! What a subscription may be: its URL and its event types, checked the same way by the API and the subcommand.

use std::time::Duration;

use crate::domain::event_payloads::EventType;

/// What a tenant may subscribe and how secrets rotate (docs/design.md §17), the same for the API and the subcommand.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Most subscriptions one tenant may have.
    pub max_per_tenant: i64,
    /// Whether a URL may be or resolve to loopback, link-local and private addresses (`ssrf`).
    pub allow_private: bool,
    /// How long a rotated secret signs beside its successor at most (and by default).
    pub secret_overlap: Duration,
}

/// Why a subscription is refused.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error("url must be an absolute http or https URL with a host, of at most 2048 characters")]
    Url,
    #[error("url must not carry a user name or password")]
    Credentials,
    #[error("unknown event type {0:?}; the types are {1}")]
    EventType(String, String),
    #[error("event_types must name at least one type")]
    NoEventTypes,
}

/// Refuses a URL that is not http(s) with a host. Where it points is checked by address when the subscription is
/// created (`ssrf::check_url_resolves`) and again at each delivery, since a name may resolve differently later.
pub fn check_url(text: &str) -> Result<(), Invalid> {
    if text.len() > 2048 {
        return Err(Invalid::Url);
    }
    let url = reqwest::Url::parse(text).map_err(|_| Invalid::Url)?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(Invalid::Url);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid::Credentials);
    }
    Ok(())
}

/// The event types as stored: the given ones, sorted and without repeats, or all of them when none are given.
pub fn event_types(given: Option<&[String]>) -> Result<Vec<String>, Invalid> {
    let Some(given) = given else {
        return Ok(EventType::ALL
            .iter()
            .map(|kind| kind.as_str().to_owned())
            .collect());
    };
    let mut types = Vec::with_capacity(given.len());
    for text in given {
        let kind = EventType::parse(text).ok_or_else(|| {
            let all: Vec<&str> = EventType::ALL.iter().map(|kind| kind.as_str()).collect();
            Invalid::EventType(text.clone(), all.join(", "))
        })?;
        types.push(kind.as_str().to_owned());
    }
    types.sort();
    types.dedup();
    if types.is_empty() {
        return Err(Invalid::NoEventTypes);
    }
    Ok(types)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_with_a_host_are_accepted() {
        assert!(check_url("https://hooks.example.com/approval").is_ok());
        assert!(check_url("http://127.0.0.1:9000/hook").is_ok());
        for text in [
            "ftp://example.com/x",
            "file:///etc/passwd",
            "gopher://x",
            "/relative",
            "http://",
            "x",
        ] {
            assert!(check_url(text).is_err(), "{text}");
        }
        assert!(matches!(
            check_url("https://user:pw@example.com/"),
            Err(Invalid::Credentials)
        ));
    }

    #[test]
    fn event_types_default_to_all_and_refuse_unknown_ones() {
        assert_eq!(event_types(None).unwrap().len(), EventType::ALL.len());
        assert_eq!(
            event_types(Some(&[
                "run.resumed".into(),
                "run.waiting".into(),
                "run.resumed".into()
            ]))
            .unwrap(),
            vec!["run.resumed", "run.waiting"]
        );
        assert!(event_types(Some(&["run.deleted".into()])).is_err());
        assert!(event_types(Some(&[])).is_err());
    }
}
