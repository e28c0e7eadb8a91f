//! Server-side request forgery: a webhook URL is a tenant's text, so the service must not let it reach what only
//! the service can reach (loopback, the cloud metadata address, private networks).
//!
//! The check happens at delivery time, on the addresses the name resolves to then, and the connection goes to
//! exactly those checked addresses: the HTTP client resolves names only through [`GuardedResolver`], so no second
//! lookup can answer differently (DNS rebinding). A URL with an IP address as its host is checked by
//! [`check_host`] before the request, since no lookup happens for it. A subscription's URL is checked the same way
//! when it is created ([`check_url_resolves`]), so a tenant learns at once, not from failed deliveries.
//!
//! What a tenant is told never names an address or what a name resolved to (it would map the service's network
//! for them); the detail is logged for ops.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::lookup::{LookupError, Lookups};

/// Whether a webhook may reach this address. With `allow_private`, everything is allowed (tests, or a service
/// whose receivers live on its private network).
pub fn is_allowed(ip: IpAddr, allow_private: bool) -> bool {
    allow_private || !is_internal(ip)
}

/// Loopback, link-local, private, shared, multicast, unspecified and reserved addresses, in v4 and v6 (including
/// v4 addresses written as v6).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => is_internal_v6(v6),
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.0.0/16: the cloud metadata service lives here
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0 // 0.0.0.0/8: "this network"
        || (a == 192 && b == 0 && c == 0) // 192.0.0.0/24: IETF protocol assignments (DS-Lite, NAT64 discovery)
        || (a == 100 && (64..128).contains(&b)) // 100.64.0.0/10: carrier-grade NAT
        || (a == 198 && (b == 18 || b == 19)) // 198.18.0.0/15: benchmarking
        || a >= 240 // 240.0.0.0/4: reserved
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_internal_v4(v4);
    }
    let segments = ip.segments();
    let octets = ip.octets();
    // 64:ff9b::/96, NAT64: the v4 address in the last 32 bits is where the packet goes.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., a, b, c, d] = octets;
        return is_internal_v4(Ipv4Addr::new(a, b, c, d));
    }
    // 2002::/16, 6to4: the v4 address in bits 16 to 48 is the relay the packet is tunnelled to.
    if segments[0] == 0x2002 {
        return is_internal_v4(Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5]));
    }
    // ::/96 past :: and ::1, IPv4-compatible (deprecated by RFC 4291, still routed by some stacks to the v4 address
    // it ends with); 64:ff9b:1::/48, NAT64 for local use (RFC 8215: any v4 address, the operator's own network
    // included); 2001::/32, Teredo (the v4 addresses inside are obfuscated and lead through a relay). None is a
    // receiver's address on the public internet, so all three are refused whatever they embed.
    let v4_compatible = segments[..6] == [0; 6];
    let local_nat64 = segments[..3] == [0x64, 0xff9b, 1];
    let teredo = segments[..2] == [0x2001, 0];
    v4_compatible
        || local_nat64
        || teredo
        || ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (segments[0] & 0xffc0) == 0xfe80 // fe80::/10 link-local
        || (segments[0] & 0xffc0) == 0xfec0 // fec0::/10 site-local (deprecated, still routed by some)
        || (segments[0] & 0xfe00) == 0xfc00 // fc00::/7 unique local
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // documentation
}

/// Why a URL may not be reached. Its text is for the log only: tenants get [`REFUSED`].
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    #[error("the URL has no host")]
    NoHost,
    #[error("{0} is an internal address")]
    Internal(String),
    #[error("{host} resolves to an internal address ({ip})")]
    Resolves { host: String, ip: IpAddr },
    #[error("{host} does not resolve: {error}")]
    Unresolved { host: String, error: String },
    #[error("{host}: {error}")]
    TimedOut { host: String, error: LookupError },
    /// Not checked at all: every lookup of this process is taken (`lookup`). Not the URL's fault: try again.
    #[error("not checked: {0}")]
    Busy(LookupError),
}

impl Refusal {
    /// What the tenant is told: [`REFUSED`], and that the name took too long where it did (which says nothing of
    /// any address).
    pub fn told(&self) -> String {
        match self {
            Refusal::TimedOut { error, .. } => format!("{REFUSED} ({error})"),
            Refusal::Busy(error) => error.to_string(),
            _ => REFUSED.to_owned(),
        }
    }
}

/// What a tenant is told of any [`Refusal`], at creation or in `last_error`: nothing of the address or the name's
/// resolution.
pub const REFUSED: &str = "the URL's host must be a public address or resolve only to public addresses \
     (unless WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true on every instance)";

/// Refuses a URL whose host is an IP address that may not be reached; names are checked when resolved.
pub fn check_host(url: &reqwest::Url, allow_private: bool) -> Result<(), Refusal> {
    let Some(ip) = ip_host(url)? else {
        return Ok(());
    };
    if is_allowed(ip, allow_private) {
        Ok(())
    } else {
        Err(Refusal::Internal(ip.to_string()))
    }
}

/// The URL's host if it is an IP address; `None` for a name.
fn ip_host(url: &reqwest::Url) -> Result<Option<IpAddr>, Refusal> {
    let host = url.host_str().ok_or(Refusal::NoHost)?;
    // An IPv6 host is written in brackets.
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    Ok(literal.parse::<IpAddr>().ok())
}

/// Checks a new subscription's URL now: an IP host as [`check_host`] does, a name by resolving it (bounded, `lookup`)
/// and refusing it if it does not resolve or any of its addresses may not be reached. Deliveries check again (a name
/// may resolve differently later).
pub async fn check_url_resolves(url: &reqwest::Url, allow_private: bool) -> Result<(), Refusal> {
    check_host(url, allow_private)?;
    if ip_host(url)?.is_some() {
        return Ok(());
    }
    let host = url.host_str().ok_or(Refusal::NoHost)?;
    let addresses = Lookups::system()
        .lookup(host)
        .await
        .map_err(|error| match error {
            LookupError::Busy { .. } => Refusal::Busy(error),
            LookupError::TimedOut(_) => Refusal::TimedOut {
                host: host.to_owned(),
                error,
            },
            LookupError::Failed(error) => Refusal::Unresolved {
                host: host.to_owned(),
                error,
            },
        })?;
    first_internal(host, addresses, allow_private)
}

/// Refuses a name if any of its addresses may not be reached (or it has none).
fn first_internal(
    host: &str,
    addresses: impl IntoIterator<Item = SocketAddr>,
    allow_private: bool,
) -> Result<(), Refusal> {
    let mut any = false;
    for address in addresses {
        any = true;
        if !is_allowed(address.ip(), allow_private) {
            return Err(Refusal::Resolves {
                host: host.to_owned(),
                ip: address.ip(),
            });
        }
    }
    if any {
        Ok(())
    } else {
        Err(Refusal::Unresolved {
            host: host.to_owned(),
            error: "no address".into(),
        })
    }
}

/// The HTTP client's resolver: the system's lookup (bounded, `lookup`), refusing a name if any of its addresses is
/// internal. A lookup that is busy or slow is a connection's failure, retried as one, not a refusal.
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: the client sets the URL's port on the addresses it gets.
            let addresses: Vec<SocketAddr> = Lookups::system().lookup(&host).await?;
            // A `Refusal` (found again by `deliver::classify`), so that the tenant is told only `REFUSED`.
            first_internal(&host, addresses.iter().copied(), allow_private)?;
            let addresses: Addrs = Box::new(addresses.into_iter());
            Ok(addresses)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn internal_addresses_of_both_families_are_refused() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "192.0.0.1",
            "192.0.0.170",
            "::127.0.0.1",
            "::10.0.0.1",
            "::8.8.8.8",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2002:c0a8:101::1",
            "64:ff9b:1::a9fe:a9fe",
            "64:ff9b:1::808:808",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        ] {
            assert!(is_internal(ip(text)), "{text} is internal");
            assert!(!is_allowed(ip(text), false), "{text} is refused");
            assert!(
                is_allowed(ip(text), true),
                "{text} is allowed when private addresses are"
            );
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for text in [
            "93.184.215.14",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "192.0.1.1",
            "2001:4860:4860::8888",
        ] {
            assert!(is_allowed(ip(text), false), "{text} is public");
        }
    }

    #[test]
    fn a_url_naming_an_internal_ip_is_refused_before_any_request() {
        let url = |text: &str| reqwest::Url::parse(text).unwrap();
        assert!(check_host(&url("http://169.254.169.254/latest/meta-data"), false).is_err());
        assert!(check_host(&url("http://[::1]:8080/hook"), false).is_err());
        assert!(check_host(&url("http://[::127.0.0.1]:8080/hook"), false).is_err());
        assert!(check_host(&url("http://[2002:7f00:1::1]/hook"), false).is_err());
        assert!(check_host(&url("http://127.0.0.1:8080/hook"), true).is_ok());
        assert!(check_host(&url("https://hooks.example.com/x"), false).is_ok());
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let resolver = GuardedResolver {
            allow_private: false,
        };
        let refused = resolver.resolve("localhost".parse().unwrap()).await;
        assert!(refused.is_err());
        let url = reqwest::Url::parse("http://localhost:9/hook").unwrap();
        assert!(matches!(
            check_url_resolves(&url, false).await,
            Err(Refusal::Resolves { .. })
        ));
        assert!(check_url_resolves(&url, true).await.is_ok());
        let unknown = reqwest::Url::parse("http://no-such-host.invalid/hook").unwrap();
        assert!(matches!(
            check_url_resolves(&unknown, true).await,
            Err(Refusal::Unresolved { .. })
        ));
        let allowed = GuardedResolver {
            allow_private: true,
        };
        assert!(allowed.resolve("localhost".parse().unwrap()).await.is_ok());
    }
}
