//! Which addresses are not the public internet: IANA's special-purpose registries for IPv4 and
//! IPv6, in the classes the allow-list speaks of. An IPv6 address that carries an IPv4 address a
//! host reaches directly (IPv4-mapped, IPv4-compatible, IPv4-translated, the well-known NAT64
//! prefix) is judged as that IPv4 address; tunnel forms (6to4, Teredo, local NAT64) are refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Loopback,
    Private,
    LinkLocal,
    /// Reserved, documentation, benchmarking, multicast, tunnels and the like: never a webhook.
    Special,
}

/// The IPv4 address an IPv6 address stands for, when it stands for one; other addresses as
/// they are.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// What `ip` is, or `None` for a public address.
pub fn classify(ip: IpAddr) -> Option<Kind> {
    match canonical(ip) {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// `::ffff:a.b.c.d`, `::ffff:0:a.b.c.d`, `::a.b.c.d` (not `::` or `::1`) and `64:ff9b::a.b.c.d`.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let carries = match s[..6] {
        [0, 0, 0, 0, 0, 0xffff] | [0, 0, 0, 0, 0xffff, 0] | [0x64, 0xff9b, 0, 0, 0, 0] => true,
        [0, 0, 0, 0, 0, 0] => u32::from(tail) > 1,
        _ => false,
    };
    carries.then_some(tail)
}

fn classify_v4(v4: Ipv4Addr) -> Option<Kind> {
    let [a, b, c, _] = v4.octets();
    if a == 127 {
        Some(Kind::Loopback)
    } else if a == 10
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 100 && (64..128).contains(&b))
    {
        // RFC 1918 and the carrier-grade NAT range 100.64.0.0/10.
        Some(Kind::Private)
    } else if a == 169 && b == 254 {
        Some(Kind::LinkLocal)
    } else if a == 0 // "this network"
        || a >= 224 // multicast, 240.0.0.0/4 and the broadcast address
        || (a == 192 && b == 0 && (c == 0 || c == 2)) // protocol assignments, TEST-NET-1
        || (a == 192 && b == 31 && c == 196) // AS112
        || (a == 192 && b == 52 && c == 193) // AMT
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 192 && b == 175 && c == 48) // AS112 direct delegation
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113)
    // TEST-NET-3
    {
        Some(Kind::Special)
    } else {
        None
    }
}

fn classify_v6(v6: Ipv6Addr) -> Option<Kind> {
    let s = v6.segments();
    if v6.is_loopback() {
        Some(Kind::Loopback)
    } else if s[0] & 0xfe00 == 0xfc00 || s[0] & 0xffc0 == 0xfec0 {
        // Unique local addresses and the deprecated site-local ones.
        Some(Kind::Private)
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some(Kind::LinkLocal)
    } else if s[0] & 0xe000 != 0x2000 // outside global unicast: ::/8, 64:ff9b:1::/48, 100::/64, multicast, …
        || (s[0] == 0x2001 && s[1] < 0x0200) // protocol assignments 2001::/23: Teredo, benchmarking, ORCHID
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || s[0] == 0x2002 // 6to4
        || (s[0] == 0x2620 && s[1] == 0x004f && s[2] == 0x8000) // AS112 direct delegation
        || s[0] & 0xfff0 == 0x3ff0 // documentation 3fff::/20
        || s[0] == 0x5f00
    // SRv6 SIDs
    {
        Some(Kind::Special)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn embedded_ipv4_addresses_are_read_out_of_their_ipv6_forms() {
        for form in ["::ffff:127.0.0.1", "::ffff:0:127.0.0.1", "::127.0.0.1", "64:ff9b::127.0.0.1"] {
            assert_eq!(canonical(ip(form)), ip("127.0.0.1"), "{form}");
        }
        assert_eq!(canonical(ip("::1")), ip("::1"));
        assert_eq!(canonical(ip("::")), ip("::"));
        assert_eq!(canonical(ip("2606:2800::1")), ip("2606:2800::1"));
    }

    #[test]
    fn each_address_falls_in_its_class() {
        assert_eq!(classify(ip("::127.0.0.1")), Some(Kind::Loopback));
        assert_eq!(classify(ip("::ffff:10.0.0.1")), Some(Kind::Private));
        assert_eq!(classify(ip("fec0::1")), Some(Kind::Private));
        assert_eq!(classify(ip("64:ff9b::169.254.169.254")), Some(Kind::LinkLocal));
        assert_eq!(classify(ip("2001::7f00:1")), Some(Kind::Special));
        assert_eq!(classify(ip("::ffff:8.8.8.8")), None);
        assert_eq!(classify(ip("2a00:1450:4001::1")), None);
    }
}
