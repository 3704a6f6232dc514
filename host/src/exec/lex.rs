//! The host-side lexer: is a command text *simple* (plain words, run as argv with no
//! shell) or *compound* (keyed by its whole text, run by `bash -c` with exactly that text)?
//!
//! Simple means: words separated by spaces or tabs; each word is unquoted plain characters or
//! single-quoted text or double-quoted text without `$`, `` ` ``, `\` or `!`; no unquoted
//! operator (`| & ; ( )`), redirection (`< >`), substitution (`$`, `` ` ``), glob (`* ? [ ]`),
//! brace (`{ }`), tilde, comment, history (`!`), backslash escape, newline or control
//! character; the first word is not an assignment (`NAME=value`) and is a bare program name
//! (unquoted, no `/`). Anything else is compound. The lexer errs towards compound: a text it
//! is unsure about is keyed by its whole text and needs that exact approval.

/// The lexer's verdict on a command text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lexed {
    /// Plain words: the argv that will run, program first.
    Simple(Vec<String>),
    /// Shell syntax or a program path: why it is compound.
    Compound(&'static str),
}

/// Characters that make an unquoted word shell syntax.
fn special(c: char) -> Option<&'static str> {
    Some(match c {
        '|' | '&' | ';' | '(' | ')' => "an operator",
        '<' | '>' => "a redirection",
        '$' | '`' => "a substitution or variable",
        '*' | '?' | '[' | ']' => "a glob",
        '{' | '}' => "a brace expansion",
        '\\' => "a backslash escape",
        '\n' | '\r' => "a newline",
        '!' => "a history or negation operator",
        c if c.is_control() && c != '\t' => "a control character",
        _ => return None,
    })
}

/// Lex `text` into simple argv or say why it is compound.
pub fn lex(text: &str) -> Lexed {
    let mut words: Vec<String> = Vec::new();
    // Per word: its text, and whether any part of it was quoted.
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut first_quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    if words.is_empty() {
                        first_quoted = quoted;
                    }
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                    quoted = false;
                }
            }
            '\'' => {
                in_word = true;
                quoted = true;
                let mut closed = false;
                for q in chars.by_ref() {
                    if q == '\'' {
                        closed = true;
                        break;
                    }
                    if q == '\n' || q == '\r' || (q.is_control() && q != '\t') {
                        return Lexed::Compound("a newline or control character");
                    }
                    word.push(q);
                }
                if !closed {
                    return Lexed::Compound("an unclosed quote");
                }
            }
            '"' => {
                in_word = true;
                quoted = true;
                let mut closed = false;
                for q in chars.by_ref() {
                    match q {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '$' | '`' => return Lexed::Compound("a substitution or variable"),
                        '\\' => return Lexed::Compound("a backslash escape"),
                        '!' => return Lexed::Compound("a history or negation operator"),
                        q if q == '\n' || q == '\r' || (q.is_control() && q != '\t') => {
                            return Lexed::Compound("a newline or control character")
                        }
                        q => word.push(q),
                    }
                }
                if !closed {
                    return Lexed::Compound("an unclosed quote");
                }
            }
            c => {
                if let Some(why) = special(c) {
                    return Lexed::Compound(why);
                }
                if !in_word && (c == '~' || c == '#') {
                    return Lexed::Compound(if c == '~' {
                        "a tilde expansion"
                    } else {
                        "a comment"
                    });
                }
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        if words.is_empty() {
            first_quoted = quoted;
        }
        words.push(word);
    }
    let Some(program) = words.first() else {
        return Lexed::Compound("an empty command");
    };
    if first_quoted {
        return Lexed::Compound("a quoted program name");
    }
    if program.contains('/') {
        return Lexed::Compound("a program path (not a bare name)");
    }
    if let Some((name, _)) = program.split_once('=') {
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Lexed::Compound("an assignment prefix");
        }
    }
    if program == "." || program == ".." || program.is_empty() {
        return Lexed::Compound("not a program name");
    }
    Lexed::Simple(words)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
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
}
