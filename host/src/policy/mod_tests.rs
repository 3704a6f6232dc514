#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn presets_load() {
    for (name, _) in PRESETS {
        Policy::preset(name).unwrap();
    }
}

#[test]
fn syntax_error_names_the_line() {
    let err = Policy::parse("p.toml", "mode = \"ask\"\n\n[[rules]\nkey = 1\n").unwrap_err();
    assert_eq!(err[0].location, "p.toml:3", "{err:?}");
}

#[test]
fn failing_example_names_the_rule_line() {
    let text = "mode = \"ask\"\n[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\nmatch = [\"write:docs/\"]\n";
    let err = Policy::parse("p.toml", text).unwrap_err();
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].location, "p.toml:2"); // the rule's `[[rules]]` line
    assert!(err[0].message.contains("write:docs/"), "{}", err[0].message);
}

#[test]
fn unknown_fields_and_modes_are_errors() {
    assert!(Policy::parse("p", "mood = \"ask\"").is_err());
    assert!(Policy::parse("p", "mode = \"yolo\"").is_err());
    assert!(Policy::parse("p", "[[rules]]\nkey = \"write\"\ndecision = \"maybe\"").is_err());
}

#[test]
fn telemetry_endpoint_is_checked_and_named() {
    let p = Policy::parse(
        "p",
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/\"\n",
    )
    .unwrap();
    assert_eq!(
        p.telemetry.otlp_endpoint.as_deref(),
        Some("http://127.0.0.1:4318")
    );
    let err = Policy::parse("p", "\n[telemetry]\notlp_endpoint = \"udp://x:1\"\n").unwrap_err();
    assert_eq!(err[0].location, "p:3", "{err:?}");
    assert!(
        err[0].message.contains("[telemetry] otlp_endpoint"),
        "{}",
        err[0].message
    );
    assert!(Policy::parse("p", "[telemetry]\nendpoint = \"http://x\"\n").is_err());
}

#[test]
fn an_untrusted_layer_cannot_redirect_the_audit() {
    let user = Layer::parse(
        "user.toml",
        LayerKind::User,
        "[telemetry]\notlp_endpoint = \"http://10.0.0.1:4318\"\n",
    )
    .unwrap();
    let ws = Layer::parse(
        "ws.toml",
        LayerKind::Workspace,
        "[telemetry]\notlp_endpoint = \"http://evil.example:4318\"\n",
    )
    .unwrap();
    let mut stack = Stack::new();
    stack.push(&user, true);
    stack.push(&ws, false);
    let p = stack.finish();
    assert_eq!(
        p.telemetry.otlp_endpoint.as_deref(),
        Some("http://10.0.0.1:4318")
    );
    assert_eq!(p.ignored.len(), 1, "{:?}", p.ignored);
    assert!(
        p.ignored[0].part.contains("otlp_endpoint"),
        "{:?}",
        p.ignored
    );
    let mut stack = Stack::new();
    stack.push(&user, true);
    stack.push(&ws, true);
    let p = stack.finish();
    assert_eq!(
        p.telemetry.otlp_endpoint.as_deref(),
        Some("http://evil.example:4318")
    );
    assert_eq!(p.telemetry.source.as_deref(), Some("ws.toml"));
}

#[test]
fn a_bad_credential_stops_loading() {
    let text = "[[credentials]]\nname = \"a b\"\nfrom_env = \"X\"\nhosts = [\"x.example\"]\n";
    let err = Policy::parse("p.toml", text).unwrap_err();
    assert!(err[0].message.contains("[[credentials]] `a b`"), "{err:?}");
}

#[test]
fn deny_beats_allow_on_the_same_path() {
    let text = "[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\n[[rules]]\nkey = \"write:src/secret/**\"\ndecision = \"deny\"\n";
    let p = Policy::parse("p", text).unwrap();
    let r = p
        .strictest(&CallKey::with_target("write", "src/secret/"))
        .unwrap();
    assert_eq!(r.decision, RuleDecision::Deny);
    let r = p
        .strictest(&CallKey::with_target("write", "src/other/"))
        .unwrap();
    assert_eq!(r.decision, RuleDecision::Allow);
}
