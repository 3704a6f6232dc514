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
#[path = "lex_tests.rs"]
mod tests;
