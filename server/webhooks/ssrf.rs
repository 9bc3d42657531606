//! Where webhooks may go. Loopback, private, link-local (cloud metadata) and other special
//! addresses are refused unless `SWITCHYARD_WEBHOOK_ALLOWED_HOSTS` names them. The check runs on
//! the addresses actually connected to — a resolver that drops refused addresses, plus a check of
//! literal IPs before each attempt — so a name that resolves somewhere else later is still caught.
//! Redirects are never followed and proxies never used.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    loopback: bool,
    private: bool,
    link_local: bool,
    nets: Vec<IpNet>,
    hosts: Vec<String>,
}

impl AllowList {
    /// `loopback,private,link-local,10.0.0.0/8,192.168.1.5,hooks.internal`.
    pub fn parse(list: &str) -> Result<AllowList, String> {
        let mut allow = AllowList::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry {
                "loopback" => allow.loopback = true,
                "private" => allow.private = true,
                "link-local" => allow.link_local = true,
                cidr if cidr.contains('/') => {
                    allow.nets.push(cidr.parse().map_err(|_| format!("`{cidr}` is not a CIDR like 10.0.0.0/8"))?)
                }
                ip if ip.parse::<IpAddr>().is_ok() => allow.nets.push(IpNet::from(ip.parse::<IpAddr>().expect("ip"))),
                host if host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') => {
                    allow.hosts.push(host.to_ascii_lowercase())
                }
                other => {
                    return Err(format!("`{other}` is not loopback, private, link-local, a CIDR, an IP or a host"))
                }
            }
        }
        Ok(allow)
    }

    /// Whether a connection to `ip` is allowed; `Err` says why not.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        let ip = canonical(ip);
        if self.nets.iter().any(|n| n.contains(&ip)) {
            return Ok(());
        }
        let (kind, allowed) = match classify(ip) {
            None => return Ok(()),
            Some(Kind::Loopback) => ("loopback", self.loopback),
            Some(Kind::Private) => ("private", self.private),
            Some(Kind::LinkLocal) => ("link-local (cloud metadata)", self.link_local),
            Some(Kind::Special) => ("reserved", false),
        };
        if allowed {
            Ok(())
        } else {
            Err(format!("{ip} is a {kind} address; SWITCHYARD_WEBHOOK_ALLOWED_HOSTS does not allow it"))
        }
    }

    fn allows_host(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// The URL's scheme and, for a literal IP, its address. Names are checked when resolved.
    pub fn check_url(&self, url: &str) -> Result<reqwest::Url, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("must be http:// or https://".into());
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("must not carry credentials; the signature authenticates deliveries".into());
        }
        let host = parsed.host_str().ok_or("has no host")?;
        match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(ip) => self.check_ip(ip).map(|_| parsed.clone()),
            Err(_) => Ok(parsed.clone()),
        }
    }
}

enum Kind {
    Loopback,
    Private,
    LinkLocal,
    Special,
}

/// IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

fn classify(ip: IpAddr) -> Option<Kind> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            if v4.is_loopback() {
                Some(Kind::Loopback)
            } else if v4.is_private() || (a == 100 && (64..128).contains(&b)) {
                Some(Kind::Private)
            } else if v4.is_link_local() {
                Some(Kind::LinkLocal)
            } else if a == 0 || a >= 224 || (a == 192 && b == 0 && c == 0) || (a == 198 && (b == 18 || b == 19)) {
                Some(Kind::Special)
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some(Kind::Loopback)
            } else if first & 0xfe00 == 0xfc00 {
                Some(Kind::Private)
            } else if first & 0xffc0 == 0xfe80 {
                Some(Kind::LinkLocal)
            } else if v6.is_unspecified() || v6.is_multicast() || first == 0x0064 || first == 0x2002 {
                // NAT64 and 6to4 can smuggle any IPv4 address.
                Some(Kind::Special)
            } else {
                None
            }
        }
    }
}

/// A resolver that hands reqwest only addresses the allow-list accepts.
struct GuardedResolver(Arc<AllowList>);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if allow.allows_host(&host) {
                return Ok(Box::new(found.into_iter()) as Addrs);
            }
            let mut refusals = Vec::new();
            let usable: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match allow.check_ip(a.ip()) {
                    Ok(()) => true,
                    Err(why) => {
                        refusals.push(why);
                        false
                    }
                })
                .collect();
            if usable.is_empty() {
                let why = refusals.first().cloned().unwrap_or_else(|| "no address".into());
                return Err(format!("refused to connect to {host}: {why}").into());
            }
            Ok(Box::new(usable.into_iter()) as Addrs)
        })
    }
}

/// The HTTP client for deliveries: guarded resolver, no redirects, no proxy, bounded time.
pub fn client(allow: Arc<AllowList>, timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver(allow)))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .user_agent(concat!("Switchyard-Webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("a client with these options always builds")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn special_ranges_are_refused_by_default_and_public_ones_allowed() {
        let none = AllowList::default();
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
            "64:ff9b::7f00:1",
        ] {
            assert!(none.check_ip(ip(refused)).is_err(), "{refused}");
        }
        for allowed in ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"] {
            assert!(none.check_ip(ip(allowed)).is_ok(), "{allowed}");
        }
    }

    #[test]
    fn the_allow_list_opens_named_ranges_only() {
        let allow = AllowList::parse("loopback, 10.0.0.0/8").expect("valid");
        assert!(allow.check_ip(ip("127.0.0.1")).is_ok());
        assert!(allow.check_ip(ip("::1")).is_ok());
        assert!(allow.check_ip(ip("10.9.9.9")).is_ok());
        assert!(allow.check_ip(ip("192.168.1.1")).is_err());
        assert!(allow.check_ip(ip("169.254.169.254")).is_err());
        assert!(AllowList::parse("10.0.0.0/99").is_err());
    }

    #[test]
    fn urls_need_http_and_an_allowed_literal_address() {
        let none = AllowList::default();
        assert!(none.check_url("https://hooks.example.com/x").is_ok());
        assert!(none.check_url("ftp://example.com").is_err());
        assert!(none.check_url("http://169.254.169.254/latest/meta-data").is_err());
        assert!(none.check_url("http://[::1]:8080/").is_err());
        assert!(none.check_url("http://user:pw@example.com/").is_err());
    }
}
