//! Where webhooks may go. Loopback, private, link-local (cloud metadata), every other
//! special-purpose address ([`super::ranges`]) and this host's own addresses are refused unless `SWITCHYARD_WEBHOOK_ALLOWED_HOSTS` names them. The check runs on
//! the addresses actually connected to — a resolver that drops refused addresses, plus a check of
//! literal IPs before each attempt — so a name that resolves somewhere else later is still caught.
//! Redirects are never followed and proxies never used.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::ranges::{canonical, classify, Kind};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    loopback: bool,
    private: bool,
    link_local: bool,
    /// `only`: public addresses too are refused unless named (a test bed whose hooks must stay
    /// on this machine, like the fuzzer's).
    only: bool,
    nets: Vec<IpNet>,
    hosts: Vec<String>,
}

impl AllowList {
    /// `loopback,private,link-local,10.0.0.0/8,192.168.1.5,hooks.internal`, and `only`.
    pub fn parse(list: &str) -> Result<AllowList, String> {
        let mut allow = AllowList::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry {
                "loopback" => allow.loopback = true,
                "private" => allow.private = true,
                "link-local" => allow.link_local = true,
                "only" => allow.only = true,
                cidr if cidr.contains('/') => {
                    allow.nets.push(cidr.parse().map_err(|_| format!("`{cidr}` is not a CIDR like 10.0.0.0/8"))?)
                }
                ip if ip.parse::<IpAddr>().is_ok() => allow.nets.push(IpNet::from(ip.parse::<IpAddr>().expect("ip"))),
                host if host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') => {
                    allow.hosts.push(host.to_ascii_lowercase())
                }
                other => {
                    return Err(format!(
                        "`{other}` is not loopback, private, link-local, only, a CIDR, an IP or a host"
                    ))
                }
            }
        }
        Ok(allow)
    }

    /// Whether a connection to `ip` is allowed; `Err` says why not.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        self.check_ip_among(ip, &own_addresses())
    }

    /// [`AllowList::check_ip`] with this host's addresses given.
    fn check_ip_among(&self, ip: IpAddr, own: &[IpAddr]) -> Result<(), String> {
        let ip = canonical(ip);
        if self.nets.iter().any(|n| n.contains(&ip)) {
            return Ok(());
        }
        let (kind, allowed) = match classify(ip) {
            None if own.iter().any(|o| canonical(*o) == ip) => ("this host's own", false),
            None if self.only => ("public", false),
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

/// The addresses of this host's network interfaces (none when they cannot be read).
fn own_addresses() -> Vec<IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list that we only read and then free once;
    // each `ifa_addr` is null or points to a sockaddr whose family says which struct it is.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return Vec::new();
        }
        let mut found = Vec::new();
        let mut next = list;
        while let Some(entry) = next.as_ref() {
            if let Some(addr) = entry.ifa_addr.as_ref() {
                match i32::from(addr.sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(entry.ifa_addr as *const libc::sockaddr_in);
                        found.push(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                        found.push(IpAddr::from(v6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            next = entry.ifa_next;
        }
        libc::freeifaddrs(list);
        found
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
    fn every_special_purpose_range_and_embedded_ipv4_form_is_refused() {
        let none = AllowList::default();
        for refused in [
            "::127.0.0.1",         // IPv4-compatible
            "::ffff:127.0.0.1",    // IPv4-mapped
            "::ffff:0:127.0.0.1",  // IPv4-translated
            "::ffff:0:10.0.0.1",   // IPv4-translated, private
            "64:ff9b::a9fe:a9fe",  // NAT64 of 169.254.169.254
            "64:ff9b:1::8.8.8.8",  // local-use NAT64
            "2002:7f00:1::1",      // 6to4
            "2002:808:808::1",     // 6to4 of a public address
            "2001::7f00:1",        // Teredo
            "2001:0:4136:e378::1", // Teredo
            "fec0::1",             // site-local
            "fc00::1",             // unique local
            "fe80::1",             // link-local
            "2001:db8::1",         // documentation
            "3fff::1",             // documentation
            "ff02::1",             // multicast
            "::",                  // unspecified
            "::1",                 // loopback
            "100::1",              // discard-only
            "192.0.2.2",           // TEST-NET-1
            "198.51.100.7",        // TEST-NET-2
            "203.0.113.9",         // TEST-NET-3
            "198.18.0.1",          // benchmarking
            "198.19.255.255",      // benchmarking
            "100.64.0.1",          // carrier-grade NAT
            "100.127.255.254",     // carrier-grade NAT
            "0.1.2.3",             // this network
            "240.0.0.1",           // reserved
            "255.255.255.255",     // broadcast
            "224.0.0.1",           // multicast
            "192.0.0.8",           // protocol assignments
            "192.88.99.1",         // 6to4 relay anycast
            "169.254.169.254",     // link-local, cloud metadata
            "127.1.2.3",           // loopback
        ] {
            assert!(none.check_ip(ip(refused)).is_err(), "{refused} should be refused");
        }
        for allowed in ["8.8.8.8", "::ffff:8.8.8.8", "64:ff9b::808:808", "100.128.0.1", "2a00:1450:4001::1"] {
            assert!(none.check_ip(ip(allowed)).is_ok(), "{allowed} should be allowed");
        }
    }

    #[test]
    fn literal_urls_with_embedded_or_reserved_addresses_are_refused() {
        let none = AllowList::default();
        for url in [
            "http://[::127.0.0.1]/",
            "http://[::ffff:0:127.0.0.1]/",
            "http://[fec0::1]/",
            "http://[2001::7f00:1]/",
            "http://192.0.2.2/",
            "http://[::ffff:7f00:1]:8080/",
        ] {
            assert!(none.check_url(url).is_err(), "{url} should be refused");
        }
    }

    #[test]
    fn an_embedded_ipv4_address_is_allowed_as_that_address_is() {
        let allow = AllowList::parse("loopback,10.0.0.0/8").expect("valid");
        assert!(allow.check_ip(ip("::127.0.0.1")).is_ok());
        assert!(allow.check_ip(ip("::ffff:0:127.0.0.1")).is_ok());
        assert!(allow.check_ip(ip("::ffff:10.1.2.3")).is_ok());
        assert!(allow.check_ip(ip("64:ff9b::10.1.2.3")).is_ok());
        assert!(allow.check_ip(ip("::ffff:192.168.0.1")).is_err());
        let private = AllowList::parse("private").expect("valid");
        assert!(private.check_ip(ip("fec0::1")).is_ok());
        assert!(private.check_ip(ip("100.64.0.1")).is_ok());
        assert!(private.check_ip(ip("2001:db8::1")).is_err());
    }

    #[test]
    fn this_hosts_own_addresses_are_refused_unless_listed() {
        let own = [ip("93.184.216.34"), ip("2606:2800:220:1::1")];
        let none = AllowList::default();
        assert!(none.check_ip_among(ip("93.184.216.34"), &own).is_err());
        assert!(none.check_ip_among(ip("::ffff:93.184.216.34"), &own).is_err());
        assert!(none.check_ip_among(ip("2606:2800:220:1::1"), &own).is_err());
        assert!(none.check_ip_among(ip("93.184.216.35"), &own).is_ok());
        let listed = AllowList::parse("93.184.216.34").expect("valid");
        assert!(listed.check_ip_among(ip("93.184.216.34"), &own).is_ok());
        // The interfaces are read for real: every host has a loopback address.
        assert!(own_addresses().iter().any(IpAddr::is_loopback));
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
    fn only_refuses_public_addresses_too() {
        let allow = AllowList::parse("loopback,only").expect("valid");
        assert!(allow.check_ip(ip("127.0.0.1")).is_ok());
        assert!(allow.check_ip(ip("8.8.8.8")).is_err());
        assert!(allow.check_url("http://93.184.216.34/").is_err());
        assert!(AllowList::parse("only,8.8.8.8").expect("valid").check_ip(ip("8.8.8.8")).is_ok());
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
