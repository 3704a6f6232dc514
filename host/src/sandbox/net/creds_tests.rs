//! Unit tests of `sandbox/net/creds.rs`.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::sandbox::net::scrub::scrub;

fn cred(name: &str, value: &str, hosts: &[&str], header: Option<&str>) -> Credential {
    Credential {
        name: name.into(),
        value: Ok(value.into()),
        hosts: hosts
            .iter()
            .map(|h| HostPattern::parse(h).unwrap())
            .collect(),
        header: header.map(|h| {
            let (n, t) = h.split_once(':').unwrap();
            (n.trim().to_string(), t.trim().to_string())
        }),
        env: None,
    }
}

#[test]
fn the_placeholder_is_replaced_for_a_bound_host_only() {
    let creds = [cred("gh", "ghp_realrealreal", &["api.github.com"], None)];
    let mut h = vec![(
        "Authorization".to_string(),
        format!("token {}", placeholder("gh")),
    )];
    let used = broker(&creds, "https", "api.github.com", 443, "/user", &mut h).unwrap();
    assert_eq!(used, ["gh"]);
    assert_eq!(h[0].1, "token ghp_realrealreal");

    let mut h = vec![("X-Token".to_string(), placeholder("gh"))];
    let r = broker(&creds, "https", "evil.example", 443, "/", &mut h).unwrap_err();
    assert!(
        r.leak && r.why.contains("`gh`") && r.why.contains("evil.example"),
        "{r:?}"
    );
    assert_eq!(h[0].1, placeholder("gh"), "nothing was substituted");

    let mut h = vec![];
    let url = format!("/?t={}", placeholder("gh"));
    let r = broker(&creds, "https", "api.github.com", 443, &url, &mut h).unwrap_err();
    assert!(r.leak, "{r:?}");
}

#[test]
fn the_header_is_added_for_bound_hosts_and_a_missing_value_refuses() {
    let creds = [cred(
        "npm",
        "npm_secretsecret",
        &["registry.npmjs.org"],
        Some("Authorization: Bearer {}"),
    )];
    let mut h = vec![];
    broker(&creds, "https", "registry.npmjs.org", 443, "/", &mut h).unwrap();
    assert_eq!(
        h,
        [("Authorization".into(), "Bearer npm_secretsecret".into())]
    );
    let mut h = vec![];
    assert!(broker(&creds, "https", "other.example", 443, "/", &mut h)
        .unwrap()
        .is_empty());
    assert!(h.is_empty());
    let mut missing = creds[0].clone();
    missing.value = Err("NPM_TOKEN is not set".into());
    let mut h = vec![];
    let r = broker(&[missing], "https", "registry.npmjs.org", 443, "/", &mut h).unwrap_err();
    assert!(!r.leak && r.why.contains("NPM_TOKEN is not set"), "{r:?}");
}

#[test]
fn scrub_takes_the_value_out_of_returned_text() {
    let creds = [cred("gh", "ghp_realrealreal", &["api.github.com"], None)];
    let echoed = "{\"headers\":{\"Authorization\":\"token ghp_realrealreal\"}}";
    let clean = scrub(&creds, echoed).unwrap();
    assert!(!clean.contains("ghp_realrealreal"));
    assert!(clean.contains(&placeholder("gh")));
    assert!(scrub(&creds, "nothing here").is_none());
    register(&creds);
    let audited = crate::state::secrets::scrub_known(echoed).unwrap();
    assert!(!audited.contains("ghp_realrealreal"), "{audited}");
}
