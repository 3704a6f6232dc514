//! Unit tests of `plugins/manifest.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

const GOOD: &str = r#"
name = "word-count"
version = "0.1.0"
wit = "toolgate:tool@0.1.0"
[capabilities]
fs_read = ["."]
http = ["api.example.com"]
env = ["LANG"]
[limits]
timeout_ms = 1000
"#;

#[test]
fn a_good_manifest_parses() {
    let m = Manifest::parse("m.toml", GOOD).unwrap();
    assert_eq!(m.name, "word-count");
    assert_eq!(m.capabilities.fs_read, ["."]);
    assert_eq!(m.limits.timeout_ms, Some(1000));
}

#[test]
fn bad_manifests_name_the_problem() {
    let cases = [
        (GOOD.replace("word-count", "Word Count"), "name"),
        (GOOD.replace("@0.1.0", "@9.0.0"), "not supported"),
        (
            GOOD.replace("fs_read = [\".\"]", "fs_read = [\"../up\"]"),
            "leaves the workspace",
        ),
        (
            GOOD.replace("fs_read = [\".\"]", "fs_read = [\"/etc\"]"),
            "relative",
        ),
        (GOOD.replace("api.example.com", "ftp://x.com"), "http"),
        (GOOD.replace("LANG", "A B"), "env"),
        (
            GOOD.replace("[limits]", "sockets = true\n[limits]"),
            "sockets",
        ),
        (GOOD.replace("[limits]", "exec = true\n[limits]"), "exec"),
        (
            GOOD.replace("timeout_ms = 1000", "timeout_ms = 0"),
            "timeout_ms",
        ),
    ];
    for (text, needle) in cases {
        let err = Manifest::parse("m.toml", &text).unwrap_err();
        assert!(err.contains(needle), "{needle}: {err}");
        assert!(err.starts_with("m.toml"), "{err}");
    }
}

#[test]
fn path_intersection_keeps_the_narrower_path() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(intersect_paths(&s(&["."]), &s(&["src"])), ["src"]);
    assert_eq!(intersect_paths(&s(&["src/a"]), &s(&["src"])), ["src/a"]);
    assert!(intersect_paths(&s(&["src"]), &s(&["docs"])).is_empty());
    assert!(intersect_paths(&s(&["src"]), &s(&[])).is_empty());
    assert!(intersect_paths(&s(&["srcx"]), &s(&["src"])).is_empty());
    assert_eq!(normalize_rel("./a//b/").unwrap(), "a/b");
    assert_eq!(normalize_rel("./").unwrap(), ".");
}
