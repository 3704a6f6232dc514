//! Unit tests of the guard's policy: lexical joins, the deny table, preopen paths.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::workspace::{Access, Workspace};
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

pub(super) fn deny(dir: &std::path::Path) -> FsDeny {
    FsDeny::new(Workspace::new(dir, &["config/secrets.yaml".to_string()]).unwrap())
}

#[test]
fn join_resolves_dots_and_refuses_escapes() {
    let mut out = String::new();
    assert_eq!(join(&mut out, "", "a/./b//c"), Ok(0));
    assert_eq!(out, "a/b/c");
    assert_eq!(join(&mut out, "src", "x.rs"), Ok(3));
    assert_eq!(out, "src/x.rs");
    assert_eq!(join(&mut out, "src/sub", "../.env"), Ok(3));
    assert_eq!(out, "src/.env");
    assert_eq!(join(&mut out, "src/a", "../../.env"), Ok(0));
    assert_eq!(out, ".env");
    assert_eq!(
        join(&mut out, "src", "../../.env"),
        Err(ErrorCode::NotPermitted)
    );
    assert_eq!(join(&mut out, "src", "."), Ok(3));
    assert_eq!(out, "src");
    assert_eq!(join(&mut out, "", "../x"), Err(ErrorCode::NotPermitted));
    assert_eq!(
        join(&mut out, "src", "/etc/passwd"),
        Err(ErrorCode::NotPermitted)
    );
}

#[test]
fn deny_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = deny(dir.path());
    let cases: &[(&str, Access, bool)] = &[
        ("", Access::Read, false),
        ("src/main.rs", Access::Read, false),
        ("src/main.rs", Access::Write, false),
        (".env", Access::Read, true),
        ("a/b/.env.local", Access::Read, true),
        (".ssh", Access::Read, true),
        (".ssh/config", Access::Read, true),
        ("deep/.aws/x/y", Access::Read, true),
        ("keys/server.pem", Access::Read, true),
        ("src/id_map.rs", Access::Read, false),
        ("config/secrets.yaml", Access::Read, true),
        ("config/other.yaml", Access::Read, false),
        (".toolgate", Access::Read, true),
        (".toolgate/grants.toml", Access::Read, true),
        (".toolgate/grants.toml", Access::Write, true),
        (".toolgate/outputs", Access::Read, true),
        (".toolgate/outputs/x.txt", Access::Read, false),
        (".toolgate/outputs/x.txt", Access::Write, true),
        (".toolgatex/y", Access::Write, false),
        ("x.toolgate/y", Access::Write, false),
        (".toolgate/outputsx", Access::Read, true),
        ("alias/.toolgate/grants.toml", Access::Write, true),
        ("alias/.toolgate/outputs/x.txt", Access::Read, false),
        ("alias/.toolgate/outputs/x.txt", Access::Write, true),
    ];
    for (rel, access, denied) in cases {
        assert_eq!(d.denied(rel, 0, *access), *denied, "{rel} {access:?}");
    }
    // Git internals: never written (any `.git` component, any case), still read.
    for rel in [
        ".git",
        ".git/hooks/pre-commit",
        ".git/config",
        "src/.git/config",
        "vendor/lib/.git",
        ".GIT/config",
        "a/.Git",
    ] {
        assert!(d.denied(rel, 0, Access::Write), "{rel}");
        assert!(!d.denied(rel, 0, Access::Read), "{rel}");
    }
    for rel in [
        ".gitignore",
        ".github/ci.yml",
        "src/.gitkeep",
        "x.git/y",
        "git/x",
    ] {
        assert!(!d.denied(rel, 0, Access::Write), "{rel}");
    }
    // An already verified prefix is not matched again.
    assert!(d.denied("keys.pem/readme", 0, Access::Read));
    assert!(!d.denied("keys.pem/readme", 8, Access::Read));
}

#[test]
fn preopen_paths() {
    let dir = tempfile::tempdir().unwrap();
    let d = deny(dir.path());
    assert_eq!(d.preopen_rel("/workspace").as_deref(), Some(""));
    assert_eq!(d.preopen_rel("/workspace/src/a").as_deref(), Some("src/a"));
    assert_eq!(d.preopen_rel("/workspacex"), None);
    assert_eq!(d.preopen_rel("/tmp"), None);
}
