#![allow(clippy::unwrap_used)]

use super::super::{Layer, LayerKind, Policy, Stack};
use crate::sandbox::net::HostPattern;

fn layer(origin: &str, kind: LayerKind, text: &str) -> Layer {
    Layer::parse(origin, kind, text).unwrap()
}

/// Stack `(kind, text, trusted)` layers, each file named after its kind.
fn stacked(layers: &[(LayerKind, &str, bool)]) -> Policy {
    let mut stack = Stack::new();
    for (kind, text, trusted) in layers {
        stack.push(
            &layer(&format!("{}.toml", kind.as_str()), *kind, text),
            *trusted,
        );
    }
    stack.finish()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_list_of_hosts_deny_and_mode_parse() {
    let p = Policy::parse(
        "p.toml",
        "[shell]\nnetwork = [\"index.crates.io\", \"*.example.org\", \"git.example.com:22\"]\n\
         network_deny = [\"evil.example.org\"]\nnetwork_mode = \"limited\"\n",
    )
    .unwrap();
    let sh = &p.shell;
    assert!(!sh.network);
    assert_eq!(
        sh.network_allow,
        strings(&["index.crates.io", "*.example.org", "git.example.com:22"])
    );
    assert_eq!(sh.network_deny, strings(&["evil.example.org"]));
    assert!(sh.network_limited);
    let (allow, deny) = sh.egress_patterns();
    assert_eq!(allow.len(), 3);
    assert_eq!(allow[2].port(), Some(22));
    assert_eq!(
        deny.iter().map(HostPattern::as_str).collect::<Vec<_>>(),
        ["evil.example.org"]
    );
    let text = sh.network_text();
    for part in [
        "through the egress proxy to: index.crates.io, *.example.org, git.example.com:22",
        "denied: evil.example.org",
        "limited (GET, HEAD, OPTIONS only)",
        "`net:<host>` (session scope at most",
    ] {
        assert!(text.contains(part), "`{part}` not in {text}");
    }
    let p = Policy::parse("p", "[shell]\nnetwork_mode = \"full\"\n").unwrap();
    assert!(!p.shell.network_limited);
}

#[test]
fn a_bool_still_works() {
    let p = Policy::parse("p", "[shell]\nnetwork = true\n").unwrap();
    assert!(p.shell.network);
    assert!(p.shell.network_allow.is_empty());
    assert!(p.shell.network_text().contains("the whole network"));
    assert!(p.shell.network_text().contains("escape hatch"));
    let p = Policy::parse("p", "[shell]\nnetwork = false\n").unwrap();
    assert!(!p.shell.network);
    assert!(p.shell.network_text().starts_with("no network"));
    assert_eq!(p.layers[0].applied, ["[shell] network = false"]);
}

#[test]
fn bad_patterns_and_values_are_reported() {
    let err = Policy::parse(
        "p.toml",
        "[shell]\nnetwork = [\"ok.example.com\", \"a/b\"]\n",
    )
    .unwrap_err();
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!(err[0].location, "p.toml");
    assert!(err[0].message.starts_with("[shell] network: "), "{err:?}");
    assert!(err[0].message.contains("`a/b`"), "{err:?}");
    let err = Policy::parse(
        "p.toml",
        "[shell]\nnetwork_deny = [\"*.com\"]\nnetwork = [\"ftp://x.example\"]\n",
    )
    .unwrap_err();
    assert_eq!(err.len(), 2, "{err:?}");
    assert!(err
        .iter()
        .any(|e| e.message.starts_with("[shell] network_deny: ") && e.message.contains("*.com")));
    assert!(err
        .iter()
        .any(|e| e.message.starts_with("[shell] network: ") && e.message.contains("ftp")));
    let err = Policy::parse("p.toml", "[shell]\n\nnetwork_mode = \"open\"\n").unwrap_err();
    assert_eq!(err[0].location, "p.toml:3", "{err:?}");
    let m = &err[0].message;
    assert!(
        m.contains("[shell] network_mode") && m.contains("`open`"),
        "{m}"
    );
    assert!(m.contains("\"limited\"") && m.contains("\"full\""), "{m}");
    let err = Policy::parse("p.toml", "[shell]\nnetwork = \"yes\"\n").unwrap_err();
    assert!(err[0].message.contains("true, false or a list"), "{err:?}");
    assert_eq!(err[0].location, "p.toml:2", "{err:?}");
}

#[test]
fn an_untrusted_layer_only_makes_the_network_stricter() {
    let user = "[shell]\nnetwork = [\"a.example.com\"]\n";
    let ws = "[shell]\nnetwork = [\"exfil.example.net\"]\nnetwork_deny = [\"a.example.com\"]\n\
              network_mode = \"limited\"\n";
    let p = stacked(&[
        (LayerKind::User, user, true),
        (LayerKind::Workspace, ws, false),
    ]);
    assert_eq!(p.shell.network_allow, strings(&["a.example.com"]));
    assert_eq!(p.shell.network_deny, strings(&["a.example.com"]));
    assert!(p.shell.network_limited);
    assert_eq!(p.ignored.len(), 1, "{:?}", p.ignored);
    assert!(p.ignored[0].part.contains("exfil.example.net"));
    assert_eq!(p.ignored[0].reason, "gives shell commands hosts to reach");
    // Its `false` applies: the whole network and the list below it are gone.
    let p = stacked(&[
        (LayerKind::User, "[shell]\nnetwork = true\n", true),
        (LayerKind::User, user, true),
        (LayerKind::Workspace, "[shell]\nnetwork = false\n", false),
    ]);
    assert!(!p.shell.network);
    assert!(p.shell.network_allow.is_empty());
    assert!(p.ignored.is_empty(), "{:?}", p.ignored);
    // Its `true` does not.
    let p = stacked(&[(LayerKind::Workspace, "[shell]\nnetwork = true\n", false)]);
    assert!(!p.shell.network);
    assert_eq!(p.ignored[0].part, "[shell] network = true");
    // Trusted, its list is added.
    let p = stacked(&[
        (LayerKind::User, user, true),
        (LayerKind::Workspace, ws, true),
    ]);
    assert_eq!(
        p.shell.network_allow,
        strings(&["a.example.com", "exfil.example.net"])
    );
}

#[test]
fn full_is_ignored_in_an_untrusted_layer_and_cannot_lift_a_managed_limited() {
    let limited = "[shell]\nnetwork_mode = \"limited\"\n";
    let full = "[shell]\nnetwork_mode = \"full\"\n";
    let p = stacked(&[
        (LayerKind::User, limited, true),
        (LayerKind::Workspace, full, false),
    ]);
    assert!(p.shell.network_limited);
    assert_eq!(p.ignored.len(), 1, "{:?}", p.ignored);
    assert_eq!(p.ignored[0].part, "[shell] network_mode = \"full\"");
    assert!(p.ignored[0].reason.contains("would lift `limited`"));
    // A trusted layer may lift it; a managed `limited` stays whatever is below.
    let p = stacked(&[
        (LayerKind::User, limited, true),
        (LayerKind::CommandLine, full, true),
    ]);
    assert!(!p.shell.network_limited);
    let p = stacked(&[
        (LayerKind::CommandLine, full, true),
        (LayerKind::Managed, limited, true),
    ]);
    assert!(p.shell.network_limited);
    let p = stacked(&[
        (LayerKind::User, limited, true),
        (LayerKind::Managed, full, true),
    ]);
    assert!(p.shell.network_limited, "a managed `full` lifts nothing");
}

#[test]
fn a_managed_list_narrows_the_network() {
    let managed = "[shell]\nnetwork = [\"a.example.com\", \"B.example.com\"]\n";
    // Below it a list: only what the ceiling names is kept.
    let p = stacked(&[
        (
            LayerKind::User,
            "[shell]\nnetwork = [\"a.example.com\", \"c.example.com\", \"b.example.com\"]\n",
            true,
        ),
        (LayerKind::Managed, managed, true),
    ]);
    assert!(!p.shell.network);
    assert_eq!(
        p.shell.network_allow,
        strings(&["a.example.com", "b.example.com"])
    );
    let report = p.layers.last().unwrap();
    assert!(
        report.applied.iter().any(|a| a.ends_with("(a ceiling)")),
        "{:?}",
        report.applied
    );
    // Below it the whole network: exactly its list, through the proxy.
    let p = stacked(&[
        (LayerKind::User, "[shell]\nnetwork = true\n", true),
        (LayerKind::Managed, managed, true),
    ]);
    assert!(!p.shell.network);
    assert_eq!(
        p.shell.network_allow,
        strings(&["a.example.com", "B.example.com"])
    );
    // `false` clears both; `true` changes nothing.
    let p = stacked(&[
        (
            LayerKind::User,
            "[shell]\nnetwork = [\"a.example.com\"]\n",
            true,
        ),
        (LayerKind::Managed, "[shell]\nnetwork = false\n", true),
    ]);
    assert!(!p.shell.network && p.shell.network_allow.is_empty());
    let p = stacked(&[
        (
            LayerKind::User,
            "[shell]\nnetwork = [\"a.example.com\"]\n",
            true,
        ),
        (LayerKind::Managed, "[shell]\nnetwork = true\n", true),
    ]);
    assert!(!p.shell.network);
    assert_eq!(p.shell.network_allow, strings(&["a.example.com"]));
}

#[test]
fn deny_lists_are_a_union_of_every_layer() {
    let p = stacked(&[
        (
            LayerKind::User,
            "[shell]\nnetwork_deny = [\"a.example.com\"]\n",
            true,
        ),
        (
            LayerKind::Workspace,
            "[shell]\nnetwork_deny = [\"b.example.com\", \"A.example.com\"]\n",
            false,
        ),
        (
            LayerKind::CommandLine,
            "[shell]\nnetwork_deny = [\"c.example.com\"]\n",
            true,
        ),
        (
            LayerKind::Managed,
            "[shell]\nnetwork_deny = [\"d.example.com\"]\n",
            true,
        ),
    ]);
    assert_eq!(
        p.shell.network_deny,
        strings(&[
            "a.example.com",
            "b.example.com",
            "c.example.com",
            "d.example.com"
        ])
    );
    assert!(p.ignored.is_empty(), "{:?}", p.ignored);
}

#[test]
fn only_the_managed_layer_sets_the_network_ceiling() {
    // `false`: the ceiling is off (no hosts at all), named by its file.
    let p = stacked(&[
        (LayerKind::User, "[shell]\nnetwork = true\n", true),
        (LayerKind::Managed, "[shell]\nnetwork = false\n", true),
    ]);
    let c = p.shell.network_ceiling.clone().unwrap();
    assert_eq!(c.hosts, None);
    assert_eq!(c.origin, "managed.toml");
    assert!(!c.allows("https", "a.example.com", 443));
    assert!(c.refusal("net:a.example.com").contains("managed.toml"));
    assert!(p.shell.network_text().starts_with("managed ceiling"));
    // A list: its patterns, read as the proxy reads them (no port: the web ports only).
    let p = stacked(&[(
        LayerKind::Managed,
        "[shell]\nnetwork = [\"*.example.com\", \"git.example.org:22\"]\n",
        true,
    )]);
    let c = p.shell.network_ceiling.clone().unwrap();
    assert!(c.allows("https", "a.example.com", 443));
    assert!(!c.allows("http", "a.example.com", 8080));
    assert!(c.allows("http", "git.example.org", 22));
    assert!(!c.allows("https", "evil.example.net", 443));
    let text = c.refusal("net:evil.example.net");
    assert!(
        text.contains("`net:evil.example.net`") && text.contains("ceiling"),
        "{text}"
    );
    assert!(p.shell.network_text().contains("managed ceiling"));
    // `true` in the managed layer, and any other layer's `false` or list, set none.
    for (kind, text) in [
        (LayerKind::Managed, "[shell]\nnetwork = true\n"),
        (LayerKind::User, "[shell]\nnetwork = false\n"),
        (
            LayerKind::CommandLine,
            "[shell]\nnetwork = [\"a.example.com\"]\n",
        ),
        (
            LayerKind::Workspace,
            "[shell]\nnetwork = [\"a.example.com\"]\n",
        ),
    ] {
        let p = stacked(&[(kind, text, true)]);
        assert_eq!(p.shell.network_ceiling, None, "{kind:?}: {text}");
    }
}
