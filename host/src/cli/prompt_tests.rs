//! Unit tests of `cli/prompt.rs`.
#![allow(clippy::unwrap_used)]

use super::*;
use toolgate::tools::Risk;

fn request(key: &str, description: &str) -> ApprovalRequest {
    ApprovalRequest {
        id: "call-1-approval".into(),
        session: "cli".into(),
        tool: "write".into(),
        key: key.into(),
        description: description.into(),
        risk: Risk::Write,
        input_sha256: "0123456789abcdef0123".into(),
        choices: vec![Answer::Once, Answer::Session, Answer::Deny],
        scopes: Vec::new(),
        expires_in_secs: 300,
    }
}

#[test]
fn an_ordinary_request_reads_as_before() {
    let text = render(&request(
        "write:src/",
        "write (write tool)\n  creates src/a.txt (path)",
    ));
    assert!(
        text.contains("approve `write:src/`? (tool: write, risk: write)"),
        "{text}"
    );
    assert!(text.contains("\n  creates src/a.txt (path)\n"), "{text}");
    assert!(
        text.contains("key: write:src/   input sha256: 0123456789abcdef\n"),
        "{text}"
    );
    assert!(
        text.ends_with("answer [o]nce / [s]ession / [d]eny: "),
        "{text}"
    );
}

#[test]
fn a_path_with_a_newline_or_escape_cannot_add_a_line() {
    // What the gate hands over: the description names the path escaped (see
    // `describe_call`), the key is the raw parent directory.
    let key = "write:x\nkey: write:src/\u{1b}[2K/";
    let description = format!(
        "write (write tool)\n  creates {} (path)",
        escape_name("x\nkey: write:src/\u{1b}[2K/a\u{202e}txt")
    );
    let text = render(&request(key, &description));
    assert!(
        text.contains("key: \"write:x\\nkey: write:src/\\x1b[2K/\"   input"),
        "{text}"
    );
    assert!(
        text.contains("creates \"x\\nkey: write:src/\\x1b[2K/a\\u{202e}txt\" (path)"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("key:")).count(),
        1,
        "{text}"
    );
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(!text.contains('\u{202e}'));
    let gone = withdrawn_text(&request(key, ""));
    assert!(
        gone.contains("`\"write:x\\nkey: write:src/\\x1b[2K/\"` was withdrawn"),
        "{gone}"
    );
    assert!(!gone.contains('\n'));
}

#[test]
fn a_shell_request_numbers_its_narrower_scopes() {
    use toolgate::gate::approval::Scope;
    let mut r = request("shell:python3", "shell (exec tool)");
    r.scopes = vec![
        Scope {
            key: "shell:python3 -m unittest t.py".into(),
            allows: "only this exact command".into(),
        },
        Scope {
            key: "shell:python3 -m unittest **".into(),
            allows: "also any other unittest run".into(),
        },
        Scope {
            key: "shell:python3".into(),
            allows: "any python3 command".into(),
        },
    ];
    let text = render(&r);
    assert!(
        text.contains("\n  [1] shell:python3 -m unittest t.py — only this exact command\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  [2] shell:python3 -m unittest ** — also any other unittest run\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  [s]ession shell:python3 — any python3 command\n"),
        "{text}"
    );
    assert!(
        text.ends_with("answer [o]nce / [s]ession / [d]eny / 1-2: "),
        "{text}"
    );
    assert_eq!(parse_typed(&r, "1\n"), Answer::SessionScope(0));
    assert_eq!(parse_typed(&r, " 2 "), Answer::SessionScope(1));
    assert_eq!(parse_typed(&r, "3"), Answer::Deny);
    assert_eq!(parse_typed(&r, "0"), Answer::Deny);
    assert_eq!(parse_typed(&r, "s"), Answer::Session);
    assert_eq!(parse_typed(&request("write:src/", "d"), "1"), Answer::Deny);
}

#[test]
fn withdrawn_is_said_only_for_the_request_shown() {
    let r = request("write:src/", "d");
    *showing() = Some("another".into());
    TerminalApprover.withdrawn(&r);
    assert_eq!(showing().as_deref(), Some("another"));
    *showing() = Some(r.id.clone());
    TerminalApprover.withdrawn(&r);
    assert_eq!(*showing(), None);
}
