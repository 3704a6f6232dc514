//! Unit tests of `key.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

fn argv(s: &str) -> CallKey {
    let mut k = CallKey::with_target("shell", s.split(' ').next().unwrap());
    k.argv = Some(s.split(' ').map(str::to_string).collect());
    k
}

#[test]
fn table() {
    let cases: &[(&str, CallKey, bool)] = &[
        ("write", CallKey::with_target("write", "src/"), true),
        ("write:src/**", CallKey::with_target("write", "src/"), true),
        (
            "write:src/**",
            CallKey::with_target("write", "src/a/b/"),
            true,
        ),
        (
            "write:src/**",
            CallKey::with_target("write", "docs/"),
            false,
        ),
        (
            "write:src/*",
            CallKey::with_target("write", "src/a/b/"),
            false,
        ),
        ("edit:src/**", CallKey::with_target("write", "src/"), false),
        ("*:src/**", CallKey::with_target("edit", "src/x/"), true),
        (
            "fetch:*.github.com",
            CallKey::with_target("fetch", "api.github.com"),
            true,
        ),
        (
            "fetch:*.github.com",
            CallKey::with_target("fetch", "github.com.evil.io"),
            false,
        ),
        (
            "read:**/.env*",
            CallKey::with_target("read", "a/.env.local"),
            true,
        ),
        ("shell:cargo test **", argv("cargo test"), true),
        ("shell:cargo test **", argv("cargo test --all x"), true),
        ("shell:cargo test **", argv("cargo build"), false),
        ("shell:cargo test *", argv("cargo test"), false),
        ("shell:cargo test *", argv("cargo test a"), true),
        ("shell:cargo test *", argv("cargo test a b"), false),
        ("shell:cargo", argv("cargo test"), true),
        ("shell:git status", argv("git status"), true),
        ("shell:git status", argv("git status --porcelain"), false),
    ];
    for (pattern, key, expected) in cases {
        let p = KeyPattern::parse(pattern).unwrap();
        assert_eq!(p.matches(key), *expected, "{pattern} vs {key}");
    }
}

#[test]
fn bad_patterns() {
    assert!(KeyPattern::parse("Write").is_err());
    assert!(KeyPattern::parse("write:").is_err());
    assert!(KeyPattern::parse("shell:cargo ** test").is_err());
    assert!(KeyPattern::parse("write:src/[").is_err());
}

#[test]
fn a_leading_dot_slash_means_the_workspace() {
    let key = |t: &str| CallKey::with_target("edit", t);
    let all = KeyPattern::parse("edit:./**").unwrap();
    assert!(all.matches(&key("sub/deep/")));
    assert!(all.matches(&key("./")));
    let src = KeyPattern::parse("edit:./src/**").unwrap();
    assert!(src.matches(&key("src/a/")));
    assert!(!src.matches(&key("docs/")));
    // `./` alone is the top directory's files only, as before.
    let top = KeyPattern::parse("edit:./").unwrap();
    assert!(top.matches(&key("./")));
    assert!(!top.matches(&key("sub/")));
    assert_eq!(all.as_str(), "edit:./**");
}
