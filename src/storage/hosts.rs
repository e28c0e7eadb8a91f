//! Multi-host connection URLs, as libpq reads them: `postgres://h1:5432,h2:5433/db?target_session_attrs=read-write`
//! names several servers; they are tried in order, and with `read-write` only one that accepts writes is kept.
//!
//! sqlx parses one host only (transact-rs/sqlx#3333), so this module splits such a URL into one single-host URL per
//! server, each with everything else (user, password, database, parameters) unchanged, and says whether a server
//! must accept writes. `target_session_attrs` is removed from the URLs handed to sqlx, which does not know it.
//! Without `read-write` (or `primary`) the service uses the first server only, where libpq would try the next one
//! when the first cannot be reached: a list of servers is for following a primary.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

/// Postgres's default port, used for a host named without one (as libpq does).
const DEFAULT_PORT: u16 = 5432;

/// What a connection URL names: the servers in the order to try them, and what a server must be to be kept.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// One set of connect options per server, in the URL's order.
    pub servers: Vec<PgConnectOptions>,
    /// `target_session_attrs=read-write` (or `primary`): only a server that accepts writes is kept.
    pub read_write: bool,
}

/// A URL this module cannot read; the message says what is wrong, never the URL (it may hold a password).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct HostsError(String);

/// Splits `url` into its servers. A URL naming one host gives one server, exactly as sqlx alone would read it.
pub fn parse(url: &str) -> Result<Hosts, HostsError> {
    let split = split_hosts(url)?;
    let servers = split
        .urls
        .iter()
        .map(|single| {
            PgConnectOptions::from_str(single)
                .map_err(|error| HostsError(format!("a host of the URL is not valid: {error}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Hosts {
        servers,
        read_write: split.read_write,
    })
}

/// The single-host URLs and the session attribute, before sqlx reads them.
#[derive(Debug, PartialEq, Eq)]
struct Split {
    urls: Vec<String>,
    read_write: bool,
}

fn split_hosts(url: &str) -> Result<Split, HostsError> {
    let (scheme, rest) = url
        .split_once("://")
        .filter(|(scheme, _)| matches!(*scheme, "postgres" | "postgresql"))
        .ok_or_else(|| HostsError("the URL must start with postgres:// or postgresql://".into()))?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    // The user info ends at the last `@`: a password may hold `@` only percent-encoded, but be lenient.
    let (userinfo, host_list) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let (tail, read_write) = without_session_attrs(tail)?;
    let hosts: Vec<&str> = host_list.split(',').collect();
    if hosts.len() > 1 && hosts.iter().any(|host| host.is_empty()) {
        return Err(HostsError("the URL names an empty host in its list".into()));
    }
    let urls = hosts
        .into_iter()
        .map(|host| {
            let host = with_port(host)?;
            Ok(format!("{scheme}://{userinfo}{host}{tail}"))
        })
        .collect::<Result<Vec<_>, HostsError>>()?;
    Ok(Split { urls, read_write })
}

/// `host` with an explicit port, so that each single-host URL says which server it is.
fn with_port(host: &str) -> Result<String, HostsError> {
    if host.is_empty() {
        // No host at all: sqlx's own default (localhost or the socket) applies, as with a single-host URL.
        return Ok(String::new());
    }
    let port_at = if host.starts_with('[') {
        let close = host
            .find(']')
            .ok_or_else(|| HostsError("an IPv6 host lacks its closing ]".into()))?;
        host[close..].find(':').map(|at| close + at)
    } else {
        host.rfind(':')
    };
    match port_at {
        Some(at) => {
            host[at + 1..]
                .parse::<u16>()
                .map_err(|_| HostsError("a host's port is not a number from 0 to 65535".into()))?;
            Ok(host.to_owned())
        }
        None => Ok(format!("{host}:{DEFAULT_PORT}")),
    }
}

/// The path and query without `target_session_attrs`, and whether it asked for a writable server.
fn without_session_attrs(tail: &str) -> Result<(String, bool), HostsError> {
    let Some((path, query)) = tail.split_once('?') else {
        return Ok((tail.to_owned(), false));
    };
    let mut read_write = false;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        match pair.split_once('=') {
            Some(("target_session_attrs", value)) => {
                read_write = match value {
                    "any" => false,
                    "read-write" | "primary" => true,
                    other => {
                        return Err(HostsError(format!(
                            "target_session_attrs={other} is not supported; use read-write, primary or any"
                        )));
                    }
                }
            }
            _ => kept.push(pair),
        }
    }
    let tail = if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    };
    Ok((tail, read_write))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Split {
        split_hosts(url).unwrap()
    }

    #[test]
    fn a_single_host_url_is_one_server_and_asks_for_nothing_more() {
        let split = split("postgres://u:p@db.example:6432/app?sslmode=disable");
        assert_eq!(
            split.urls,
            ["postgres://u:p@db.example:6432/app?sslmode=disable"]
        );
        assert!(!split.read_write);
    }

    #[test]
    fn several_hosts_become_one_url_each_in_order_with_everything_else_kept() {
        let split = split(
            "postgresql://app:s%40cret@h1:5432,h2:5433,[::1]:5434/db?target_session_attrs=read-write&sslmode=prefer",
        );
        assert_eq!(
            split.urls,
            [
                "postgresql://app:s%40cret@h1:5432/db?sslmode=prefer",
                "postgresql://app:s%40cret@h2:5433/db?sslmode=prefer",
                "postgresql://app:s%40cret@[::1]:5434/db?sslmode=prefer",
            ]
        );
        assert!(split.read_write);
    }

    #[test]
    fn a_host_without_a_port_gets_the_default_port_as_libpq_gives_it() {
        assert_eq!(
            split("postgres://h1,h2:6000/db").urls,
            ["postgres://h1:5432/db", "postgres://h2:6000/db"]
        );
        assert_eq!(
            split("postgres://[::1],h2/db").urls,
            ["postgres://[::1]:5432/db", "postgres://h2:5432/db"]
        );
    }

    #[test]
    fn primary_asks_for_a_writable_server_and_any_does_not() {
        assert!(split("postgres://h1,h2/db?target_session_attrs=primary").read_write);
        let any = split("postgres://h1,h2/db?target_session_attrs=any");
        assert!(!any.read_write);
        assert_eq!(any.urls, ["postgres://h1:5432/db", "postgres://h2:5432/db"]);
    }

    #[test]
    fn session_attributes_this_service_cannot_honour_are_refused() {
        let error = split_hosts("postgres://h1,h2/db?target_session_attrs=standby").unwrap_err();
        assert!(error.0.contains("standby"), "{error}");
    }

    #[test]
    fn malformed_host_lists_are_refused_without_echoing_the_url() {
        for url in [
            "postgres://u:hunter2@h1,,h2/db",
            "postgres://u:hunter2@h1:notaport,h2/db",
            "postgres://u:hunter2@[::1,h2/db",
            "mysql://u:hunter2@h1/db",
        ] {
            let error = split_hosts(url).unwrap_err();
            assert!(!error.0.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn every_server_is_read_by_sqlx_with_its_own_host_and_port() {
        let hosts =
            parse("postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write").unwrap();
        let named: Vec<(String, u16, Option<String>)> = hosts
            .servers
            .iter()
            .map(|server| {
                (
                    server.get_host().to_owned(),
                    server.get_port(),
                    server.get_database().map(str::to_owned),
                )
            })
            .collect();
        assert_eq!(
            named,
            [
                ("h1".to_owned(), 5432, Some("db".to_owned())),
                ("h2".to_owned(), 5433, Some("db".to_owned()))
            ]
        );
        assert!(hosts.read_write);
    }
}
