//! Unit tests of the `Host`/`Origin` allowlist.

use super::*;

#[test]
fn loopback_names_with_the_port_pass() {
    let a = Allowlist::new(8080, &[]);
    assert!(a.allows(Some("localhost:8080"), None));
    assert!(a.allows(Some("127.0.0.1:8080"), Some("http://127.0.0.1:8080")));
    assert!(a.allows(Some("[::1]:8080"), Some("http://localhost:8080/")));
    assert!(a.allows(Some("LOCALHOST:8080"), None));
}

#[test]
fn foreign_hosts_ports_and_origins_are_refused() {
    let a = Allowlist::new(8080, &[]);
    assert!(!a.allows(None, None));
    assert!(!a.allows(Some("evil.example:8080"), None));
    assert!(!a.allows(Some("localhost:9090"), None));
    assert!(!a.allows(Some("localhost"), None));
    assert!(!a.allows(Some("127.0.0.1:8080"), Some("http://evil.example")));
    assert!(!a.allows(Some("127.0.0.1:8080"), Some("null")));
}

#[test]
fn extra_names_get_the_port() {
    let a = Allowlist::new(8080, &["box.lan".into(), "10.0.0.2:9000".into()]);
    assert!(a.allows(Some("box.lan:8080"), Some("https://box.lan:8080")));
    assert!(a.allows(Some("10.0.0.2:9000"), None));
    assert!(!a.allows(Some("box.lan:9000"), None));
}
