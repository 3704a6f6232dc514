//! Which addresses are public: the classification every resolved address of a request is
//! checked against, and the IPv4 shorthand spellings that are refused outright.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether an address is on the public internet. Loopback, private ranges, link-local (cloud
/// metadata lives at 169.254.169.254), carrier-grade NAT, multicast, documentation, benchmarking
/// and reserved ranges are not; an IPv6 address that carries an IPv4 address (mapped,
/// translated, compatible, 6to4, Teredo, NAT64) is judged by the IPv4 address inside.
pub fn is_public(ip: IpAddr) -> bool {
    not_public(ip).is_none()
}

/// Why `ip` is not a public address (`None`: it is), in words for a refusal.
pub fn not_public(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => not_public_v4(v4).map(str::to_string),
        IpAddr::V6(v6) => not_public_v6(v6),
    }
}

/// The IPv4 addresses an IPv6 address carries, each with the name of the form. A packet to
/// such an address reaches (or is meant to reach) the IPv4 host, so it is judged as that host.
fn embedded_v4(v6: Ipv6Addr) -> Vec<(&'static str, Ipv4Addr)> {
    let s = v6.segments();
    let v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    let mut out = Vec::new();
    if s[..5] == [0; 5] && s[5] == 0xffff {
        // ::ffff:0:0/96
        out.push(("IPv4-mapped", v4(s[6], s[7])));
    } else if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
        // ::ffff:0:0:0/96 (SIIT)
        out.push(("IPv4-translated", v4(s[6], s[7])));
    } else if s[..6] == [0; 6] {
        // ::/96, deprecated but still routed by some stacks (`::` and `::1` land here too, and
        // read as 0.0.0.0 and 0.0.0.1: never public).
        out.push(("IPv4-compatible", v4(s[6], s[7])));
    } else if s[0] == 0x2002 {
        // 2002::/16: the IPv4 address is bits 16..48.
        out.push(("6to4", v4(s[1], s[2])));
    } else if s[0] == 0x2001 && s[1] == 0 {
        // 2001::/32: the server is bits 32..64, the client the last 32 bits inverted.
        out.push(("Teredo server", v4(s[2], s[3])));
        out.push(("Teredo client", v4(!s[6], !s[7])));
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        // 64:ff9b::/96, the well-known NAT64 prefix.
        out.push(("NAT64", v4(s[6], s[7])));
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        // 64:ff9b:1::/48, local-use NAT64 (RFC 8215): the operator picks the prefix length, so
        // the address is read in every RFC 6052 layout, and any non-public reading refuses.
        let b: Vec<u8> = s.iter().flat_map(|x| x.to_be_bytes()).collect();
        for (name, at) in [
            ("NAT64 /48", [6, 7, 9, 10]),
            ("NAT64 /56", [7, 9, 10, 11]),
            ("NAT64 /64", [9, 10, 11, 12]),
            ("NAT64 /96", [12, 13, 14, 15]),
        ] {
            out.push((name, Ipv4Addr::new(b[at[0]], b[at[1]], b[at[2]], b[at[3]])));
        }
    }
    out
}

fn not_public_v6(v6: Ipv6Addr) -> Option<String> {
    let s = v6.segments();
    if v6.is_unspecified() {
        return Some("the unspecified address".into());
    }
    if v6.is_loopback() {
        return Some("the loopback address".into());
    }
    let embedded = embedded_v4(v6);
    for (form, v4) in &embedded {
        if let Some(why) = not_public_v4(*v4) {
            return Some(format!("the {form} form of {v4}, {why}"));
        }
    }
    // Mapped, translated, compatible and NAT64 addresses lie outside 2000::/3; carrying a
    // public IPv4 address, they are as public as it is.
    if !embedded.is_empty() && (s[0] & 0xe000) != 0x2000 {
        return None;
    }
    let why = if v6.is_multicast() {
        "a multicast address"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "a unique-local address (fc00::/7)"
    } else if (s[0] & 0xffc0) == 0xfe80 {
        "a link-local address (fe80::/10)"
    } else if (s[0] & 0xffc0) == 0xfec0 {
        "a site-local address (fec0::/10)"
    } else if s[0] == 0x2001 && s[1] == 0x0db8 || s[0] == 0x3fff && s[1] < 0x1000 {
        "a documentation address (2001:db8::/32, 3fff::/20)"
    } else if s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0 {
        "a benchmarking address (2001:2::/48)"
    } else if s[0] == 0x2001 && matches!(s[1] & 0xfff0, 0x0010 | 0x0020) {
        "an ORCHID address (2001:10::/28, 2001:20::/28)"
    } else if s[0] == 0x0100 && s[1..4] == [0; 3] {
        "a discard-only address (100::/64)"
    } else if s[0] == 0x5f00 {
        "an SRv6 SID (5f00::/16)"
    } else if (s[0] & 0xe000) != 0x2000 {
        "not a global unicast address (outside 2000::/3)"
    } else {
        return None;
    };
    Some(why.into())
}

fn not_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(if ip.is_loopback() {
        "a loopback address"
    } else if a == 169 && b == 254 {
        "a link-local address (cloud metadata lives at 169.254.169.254)"
    } else if ip.is_private() {
        "a private address"
    } else if a == 100 && (64..128).contains(&b) {
        "a carrier-grade NAT address (100.64.0.0/10)"
    } else if a == 0 {
        "an address on \"this network\" (0.0.0.0/8)"
    } else if ip.is_broadcast() {
        "the broadcast address"
    } else if ip.is_multicast() {
        "a multicast address"
    } else if ip.is_documentation() {
        "a documentation address"
    } else if a == 192 && b == 0 && c == 0 {
        "an IETF protocol assignment (192.0.0.0/24)"
    } else if a == 192 && b == 88 && c == 99 {
        "a 6to4 relay anycast address (192.88.99.0/24)"
    } else if a == 198 && (18..20).contains(&b) {
        "a benchmarking address (198.18.0.0/15)"
    } else if a >= 240 {
        "a reserved address (240.0.0.0/4)"
    } else {
        return None;
    })
}

/// If `host` is an IPv4 address in one of the shorthand forms URL parsers and `inet_aton`
/// accept (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, a trailing dot) rather than four
/// plain decimal numbers, the address it means (or `None` inside when it means none). Such a
/// host is refused outright: the allowlist, the gate's `fetch:HOST` key and `allow_private`
/// are all written with the plain form, so a second spelling would be a second key.
pub(super) fn ipv4_shorthand(host: &str) -> Option<Option<Ipv4Addr>> {
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    let last = trimmed.rsplit('.').next().unwrap_or("");
    let numeric = |p: &str| {
        !p.is_empty()
            && (p.bytes().all(|c| c.is_ascii_digit())
                || p.strip_prefix("0x")
                    .or_else(|| p.strip_prefix("0X"))
                    .is_some_and(|h| h.bytes().all(|c| c.is_ascii_hexdigit())))
    };
    // A name whose last label is a number is an IPv4 address to a URL parser (WHATWG "ends in
    // a number"); anything else is a name.
    if host.contains(':') || !numeric(last) || host.parse::<Ipv4Addr>().is_ok() {
        return None;
    }
    let parts: Vec<&str> = trimmed.split('.').collect();
    if parts.len() > 4 || !parts.iter().all(|p| numeric(p)) {
        return Some(None);
    }
    let mut values = Vec::new();
    for p in &parts {
        let v = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            if h.is_empty() {
                Some(0)
            } else {
                u64::from_str_radix(h, 16).ok()
            }
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()
        } else {
            p.parse::<u64>().ok()
        };
        match v {
            Some(v) => values.push(v),
            None => return Some(None),
        }
    }
    let (last, head) = values.split_last()?;
    if head.iter().any(|v| *v > 255) || *last >= 1u64 << (8 * (5 - values.len())) {
        return Some(None);
    }
    let mut n: u64 = *last;
    for (i, v) in head.iter().enumerate() {
        n += v << (8 * (3 - i));
    }
    Some(u32::try_from(n).ok().map(Ipv4Addr::from))
}

/// `host[:port]` or `[v6]:port`.
pub(crate) fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = rest[..end].to_string();
        let after = &rest[end + 1..];
        return match after.strip_prefix(':') {
            Some(p) => Some((host, Some(parse_port(p)?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match s.rsplit_once(':') {
        // A bare IPv6 address has several colons and no port.
        Some((h, _)) if h.contains(':') => Some((s.to_string(), None)),
        Some((h, p)) => Some((h.to_string(), Some(parse_port(p)?))),
        None => Some((s.to_string(), None)),
    }
}

/// The port a URL without one means.
pub(crate) fn default_port(scheme: &str) -> u16 {
    if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    }
}

fn parse_port(p: &str) -> Option<u16> {
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

pub(crate) fn valid_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}
