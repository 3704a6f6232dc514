//! Unit tests of `sandbox::net`.

use super::*;

fn p(s: &str) -> HostPattern {
    match HostPattern::parse(s) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn patterns_match_host_scheme_and_port() {
    assert!(p("api.github.com").matches("https", "API.github.com", 443));
    assert!(p("api.github.com").matches("http", "api.github.com", 8080));
    assert!(!p("api.github.com").matches("https", "github.com", 443));
    assert!(!p("api.github.com").matches("https", "api.github.com.evil.com", 443));
    assert!(p("*.github.com").matches("https", "api.github.com", 443));
    assert!(!p("*.github.com").matches("https", "github.com", 443));
    assert!(!p("*.github.com").matches("https", "evilgithub.com", 443));
    assert!(p("https://x.dev").matches("https", "x.dev", 443));
    assert!(!p("https://x.dev").matches("http", "x.dev", 80));
    assert!(p("127.0.0.1:8080").matches("http", "127.0.0.1", 8080));
    assert!(!p("127.0.0.1:8080").matches("http", "127.0.0.1", 8081));
    assert!(p("[::1]:80").matches("http", "::1", 80));
    assert!(p("::1").matches("http", "::1", 1234));
}

#[test]
fn bad_patterns_say_why() {
    for bad in [
        "ftp://x.com",
        "x.com/path",
        "*.com",
        "*",
        "x.com:0",
        "x.com:http",
        "a b",
        "*x.com",
    ] {
        assert!(HostPattern::parse(bad).is_err(), "{bad} should not parse");
    }
}

#[test]
fn private_addresses_are_not_public() {
    for ip in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        // Every IPv6 form that carries 127.0.0.1 or 169.254.169.254.
        "::ffff:0:127.0.0.1",
        "::127.0.0.1",
        "::a9fe:a9fe",
        "2002:7f00:1::",
        "2002:a9fe:a9fe:1234::1",
        "2001:0:4136:e378:8000:63bf:80ff:fffe", // Teredo client 127.0.0.1
        "2001:0:7f00:1:0:0:f7f7:f7f7",          // Teredo server 127.0.0.1
        "64:ff9b::127.0.0.1",
        "64:ff9b:1::7f00:1",
        "64:ff9b:1:7f00:1::",
        // Ranges with no IPv4 inside.
        "100::1",
        "2001:2::1",
        "2001:10::1",
        "2001:20::1",
        "2001:db8::1",
        "3fff::1",
        "5f00::1",
        "ff02::1",
        "fec0::1",
        "4000::1",
        "192.88.99.1",
        "198.18.0.1",
        "192.0.0.8",
        "240.0.0.1",
        "224.0.0.1",
    ] {
        let ip: IpAddr = ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"));
        assert!(!is_public(ip), "{ip} must not count as public");
    }
    for ip in [
        "8.8.8.8",
        "140.82.112.3",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "2002:808:808::1",
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7", // Teredo client 8.8.8.8
        "64:ff9b::8.8.8.8",
    ] {
        let ip: IpAddr = ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"));
        assert!(is_public(ip), "{ip} is public");
    }
}

#[test]
fn ipv4_shorthands_are_recognised() {
    let lo = Some(Some(Ipv4Addr::LOCALHOST));
    for host in [
        "2130706433",
        "0x7f.1",
        "0177.0.0.1",
        "127.1",
        "127.0.1",
        "0x7f000001",
        "127.0.0.1.",
        "0x7F.0.0.1",
    ] {
        assert_eq!(ipv4_shorthand(host), lo, "{host}");
    }
    assert_eq!(ipv4_shorthand("1.2.3.4.5"), Some(None));
    assert_eq!(ipv4_shorthand("4294967296"), Some(None));
    assert_eq!(ipv4_shorthand("08.0.0.1"), Some(None));
    for name in [
        "127.0.0.1",
        "example.com",
        "1.example",
        "::ffff:0:127.0.0.1",
        "::1",
        "0x7f.example",
    ] {
        assert_eq!(ipv4_shorthand(name), None, "{name}");
    }
}

#[test]
fn allow_private_without_a_port_means_the_default_port() {
    assert!(p("127.0.0.1").matches_private("http", "127.0.0.1", 80));
    assert!(!p("127.0.0.1").matches_private("http", "127.0.0.1", 8080));
    assert!(p("127.0.0.1").matches_private("https", "127.0.0.1", 443));
    assert!(!p("127.0.0.1").matches_private("https", "127.0.0.1", 80));
    assert!(p("127.0.0.1:8080").matches_private("http", "127.0.0.1", 8080));
    assert!(!p("127.0.0.1:8080").matches_private("http", "127.0.0.1", 8081));
    assert!(p("[::1]:8080").matches_private("http", "::1", 8080));
    assert!(p("localhost:3000").matches_private("http", "localhost", 3000));
    assert!(!p("https://localhost:3000").matches_private("http", "localhost", 3000));
}

#[test]
fn every_list_must_match() {
    let grant = NetGrant {
        allow: vec![vec![p("*.example.com")], vec![p("api.example.com")]],
        also: None,
        allow_private: vec![],
        max_response_bytes: 1,
        timeout: Duration::from_secs(1),
        deadline: None,
        refusals: Default::default(),
        credentials: Default::default(),
        leaks: Default::default(),
    };
    assert!(grant.host_allowed("https", "api.example.com", 443));
    assert!(!grant.host_allowed("https", "www.example.com", 443));
    let none = NetGrant {
        allow: vec![],
        ..grant.clone()
    };
    assert!(!none.host_allowed("https", "api.example.com", 443));
    let also = NetGrant {
        also: Some(Arc::new(|h: &str| h == "other.org")),
        ..none
    };
    assert!(also.host_allowed("https", "other.org", 443));
    assert!(!also.host_allowed("https", "api.example.com", 443));
}
