//! Unit tests of `exec/lex.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

fn s(words: &[&str]) -> Lexed {
    Lexed::Simple(words.iter().map(|w| w.to_string()).collect())
}

#[test]
fn table() {
    let cases: &[(&str, Lexed)] = &[
        ("ls", s(&["ls"])),
        ("  ls   -la\tsrc ", s(&["ls", "-la", "src"])),
        ("cargo test --all", s(&["cargo", "test", "--all"])),
        (
            "git commit -m 'fix: a b'",
            s(&["git", "commit", "-m", "fix: a b"]),
        ),
        ("echo \"hello world\"", s(&["echo", "hello world"])),
        ("echo ''", s(&["echo", ""])),
        ("echo a'b'c", s(&["echo", "abc"])),
        ("grep --foo=bar x", s(&["grep", "--foo=bar", "x"])),
        ("echo a=b", s(&["echo", "a=b"])),
        ("echo a~b a#b", s(&["echo", "a~b", "a#b"])),
        ("echo hi\nrm -rf x", Lexed::Compound("a newline")),
        ("echo pwned > ~/.bashrc", Lexed::Compound("a redirection")),
        ("echo hi & rm -rf x", Lexed::Compound("an operator")),
        ("echo hi && rm -rf x", Lexed::Compound("an operator")),
        ("echo hi; rm -rf x", Lexed::Compound("an operator")),
        ("echo hi | sh", Lexed::Compound("an operator")),
        ("ls <(rm -rf x)", Lexed::Compound("a redirection")),
        (
            "echo $(rm -rf x)",
            Lexed::Compound("a substitution or variable"),
        ),
        ("echo `id`", Lexed::Compound("a substitution or variable")),
        (
            "echo \"$HOME\"",
            Lexed::Compound("a substitution or variable"),
        ),
        (
            "echo \"`id`\"",
            Lexed::Compound("a substitution or variable"),
        ),
        ("echo $HOME", Lexed::Compound("a substitution or variable")),
        ("ls *.rs", Lexed::Compound("a glob")),
        ("ls a?", Lexed::Compound("a glob")),
        ("ls [ab]", Lexed::Compound("a glob")),
        ("echo {a,b}", Lexed::Compound("a brace expansion")),
        ("ls ~", Lexed::Compound("a tilde expansion")),
        ("ls # comment", Lexed::Compound("a comment")),
        ("ec\\ho hi", Lexed::Compound("a backslash escape")),
        ("echo \"a\\b\"", Lexed::Compound("a backslash escape")),
        ("FOO=1 ls", Lexed::Compound("an assignment prefix")),
        (
            "/tmp/git status",
            Lexed::Compound("a program path (not a bare name)"),
        ),
        (
            "./git status",
            Lexed::Compound("a program path (not a bare name)"),
        ),
        ("'ls' -la", Lexed::Compound("a quoted program name")),
        ("! ls", Lexed::Compound("a history or negation operator")),
        ("echo 'unclosed", Lexed::Compound("an unclosed quote")),
        (
            "echo 'a\nb'",
            Lexed::Compound("a newline or control character"),
        ),
        ("", Lexed::Compound("an empty command")),
        ("   ", Lexed::Compound("an empty command")),
        ("echo\u{0}x", Lexed::Compound("a control character")),
        ("echo a\rb", Lexed::Compound("a newline")),
    ];
    for (text, expected) in cases {
        assert_eq!(&lex(text), expected, "{text:?}");
    }
}
