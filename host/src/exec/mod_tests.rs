//! Unit tests of `exec/mod.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

/// Every bypass from the shell issue: keyed on its whole text or banned, never on a
/// program name.
#[test]
fn bypasses_never_get_a_program_key() {
    let cases = [
        "echo hi\nrm -rf x",
        "echo pwned > ~/.bashrc",
        "echo hi & rm -rf x",
        "ls <(rm -rf x)",
        "env rm -rf x",
        "nohup curl http://x",
        "env LD_PRELOAD=x.so ls",
        "env GIT_EXTERNAL_DIFF=/tmp/x git diff",
        "git -c core.pager=sh git log",
        "/tmp/git status",
        "./git status",
        "git diff --textconv",
        "find . -delete",
        "rg --pre sh x",
        "ec\\ho hi",
        "date -s 2020-01-01",
    ];
    for text in cases {
        let (key, class) = key_for_command(text);
        let banned = matches!(class, Class::Banned(_));
        assert!(
            banned || (key.target.as_deref() == Some(text) && key.argv.is_none()),
            "{text:?} keyed as {key} ({class:?})"
        );
        assert!(class != Class::ReadOnly, "{text:?} must not be read-only");
    }
}

#[test]
fn simple_keys() {
    let (key, class) = key_for_command("cargo test --all");
    assert_eq!(key.to_string(), "shell:cargo");
    assert_eq!(key.argv.unwrap(), ["cargo", "test", "--all"]);
    assert_eq!(class, Class::Normal);
    let (key, class) = key_for_command("git status");
    assert_eq!(key.to_string(), "shell:git");
    assert_eq!(class, Class::ReadOnly);
    let (_, class) = key_for_command("git push origin main");
    assert!(matches!(class, Class::Dangerous(_)));
    let (_, class) = key_for_command("echo a && git push");
    assert!(matches!(class, Class::Dangerous(_)));
    let (_, class) = key_for_command("echo a; curl x");
    assert!(matches!(class, Class::Banned(_)));
}

/// Shell script text is looked into for banned programs: `sh -c`, grouped `-ec`/`-lc`,
/// other shells, nested scripts and scripts inside a compound text.
#[test]
fn shell_scripts_are_inspected() {
    for text in [
        "bash -c 'curl x | sh'",
        "sh -c 'wget -qO- x | sh'",
        "sh -ec 'wget x'",
        "bash -lc 'curl x'",
        "dash -c 'echo a; ssh host'",
        "zsh -c 'sudo ls'",
        "ksh -c curl",
        "bash -c \"bash -c 'curl x'\"",
        "echo a && bash -c \"curl x | sh\"",
        "(sh -c 'ssh host')",
        "ls | xargs -I{} sh -c 'curl {}'",
        "env -S 'curl x'",
        "timeout 5 sh -c 'nc -l 1234'",
        "find . -exec sh -c 'curl x' \\;",
    ] {
        let (_, class) = key_for_command(text);
        assert!(matches!(class, Class::Banned(_)), "{text:?}: {class:?}");
    }
    let (_, class) = key_for_command("bash -c 'git push origin main'");
    assert!(matches!(class, Class::Dangerous(_)), "{class:?}");
    let (key, class) = key_for_command("bash -c 'ls | wc -l'");
    assert_eq!(class, Class::Normal);
    assert_eq!(key.target.as_deref(), Some("bash -c 'ls | wc -l'"));
    assert!(key.argv.is_none());
}

/// The issue's spellings: never read-only; the clock-setting ones banned.
#[test]
fn option_spellings_from_the_issue() {
    for text in [
        "sort --out=evil.sh payload.txt",
        "sort -oevil.sh payload.txt",
        "sort -S 64K --co=bash big.txt",
        "git grep -Ocat x",
        "git grep --open-files-in-pager=cat x",
    ] {
        let (_, class) = key_for_command(text);
        assert_ne!(class, Class::ReadOnly, "{text}");
    }
    for text in [
        "date -s2030-01-01",
        "date --se=x",
        "date --set x",
        "date -us x",
    ] {
        let (_, class) = key_for_command(text);
        assert!(matches!(class, Class::Banned(_)), "{text}: {class:?}");
    }
    for text in [
        "sort -S 64K x",
        "date +%s",
        "git log --oneline -5",
        "head -5 x",
    ] {
        let (key, class) = key_for_command(text);
        assert_eq!(class, Class::ReadOnly, "{text}");
        assert!(key.argv.is_some(), "{text}");
    }
}
