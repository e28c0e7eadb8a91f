//! Server-side request forgery: a webhook URL is a tenant's text, so the service must not let it reach what only
//! the service can reach (loopback, the cloud metadata address, private networks).
//!
//! The check happens at delivery time, on the addresses the name resolves to then, and the connection goes to
//! exactly those checked addresses: the HTTP client resolves names only through [`GuardedResolver`], so no second
//! lookup can answer differently (DNS rebinding). A URL with an IP address as its host is checked by
//! [`check_host`] before the request, since no lookup happens for it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

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
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.0.0/16: the cloud metadata service lives here
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0 // 0.0.0.0/8: "this network"
        || (a == 100 && (64..128).contains(&b)) // 100.64.0.0/10: carrier-grade NAT
        || (a == 198 && (b == 18 || b == 19)) // 198.18.0.0/15: benchmarking
        || a >= 240 // 240.0.0.0/4: reserved
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_internal_v4(v4);
    }
    let segments = ip.segments();
    // 64:ff9b::/96, NAT64: the v4 address in the last 32 bits is where the packet goes.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., a, b, c, d] = ip.octets();
        return is_internal_v4(Ipv4Addr::new(a, b, c, d));
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (segments[0] & 0xffc0) == 0xfe80 // fe80::/10 link-local
        || (segments[0] & 0xffc0) == 0xfec0 // fec0::/10 site-local (deprecated, still routed by some)
        || (segments[0] & 0xfe00) == 0xfc00 // fc00::/7 unique local
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // documentation
}

/// Refuses a URL whose host is an IP address that may not be reached; names are checked when resolved.
pub fn check_host(url: &reqwest::Url, allow_private: bool) -> Result<(), String> {
    let host = url.host_str().ok_or("the URL has no host")?;
    // An IPv6 host is written in brackets.
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(ip) = literal.parse::<IpAddr>() else {
        return Ok(());
    };
    if is_allowed(ip, allow_private) {
        Ok(())
    } else {
        Err(format!("{ip} is an internal address"))
    }
}

/// The HTTP client's resolver: the system's lookup, refusing a name if any of its addresses is internal.
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: the client sets the URL's port on the addresses it gets.
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            // The error is shown to the subscription's tenant: it names no address, so the service's internal
            // names cannot be mapped through it.
            if addresses
                .iter()
                .any(|address| !is_allowed(address.ip(), allow_private))
            {
                return Err(format!("{host} resolves to an internal address").into());
            }
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
        ] {
            assert!(is_allowed(ip(text), false), "{text} is public");
        }
    }

    #[test]
    fn a_url_naming_an_internal_ip_is_refused_before_any_request() {
        let url = |text: &str| reqwest::Url::parse(text).unwrap();
        assert!(check_host(&url("http://169.254.169.254/latest/meta-data"), false).is_err());
        assert!(check_host(&url("http://[::1]:8080/hook"), false).is_err());
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
        let allowed = GuardedResolver {
            allow_private: true,
        };
        assert!(allowed.resolve("localhost".parse().unwrap()).await.is_ok());
    }
}
