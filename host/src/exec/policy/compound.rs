//! Compound texts: their commands, best effort, split at operators.

use super::argv::{assignment, injects_loader, PROGRAM_VARS};

/// The commands of a compound text, best effort: split at operators, each segment's words with
/// quotes stripped. Used only to make compound commands stricter (banned / dangerous); a
/// compound command is always keyed on its whole text and confined when it runs. Leading
/// assignments are dropped, except when one injects a loader or names a program
/// (`GIT_SSH_COMMAND=…`): then the segment is kept whole for [`banned`](super::banned) to
/// look at.
pub fn segments(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let flush_word = |word: &mut String, cur: &mut Vec<String>| {
        if !word.is_empty() {
            cur.push(std::mem::take(word));
        }
    };
    for c in text.chars() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else {
                word.push(c);
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            ' ' | '\t' => flush_word(&mut word, &mut cur),
            ';' | '|' | '&' | '(' | ')' | '\n' | '`' | '{' | '}' | '<' | '>' | '$' => {
                flush_word(&mut word, &mut cur);
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            '\\' => {}
            c => word.push(c),
        }
    }
    flush_word(&mut word, &mut cur);
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|seg| {
            let leading = seg.iter().take_while(|w| assignment(w).is_some()).count();
            let keep = seg.iter().any(|w| injects_loader(w))
                || seg[..leading]
                    .iter()
                    .any(|w| assignment(w).is_some_and(|(n, _)| PROGRAM_VARS.contains(&n)));
            if keep {
                seg
            } else {
                seg[leading..].to_vec()
            }
        })
        .filter(|seg| !seg.is_empty())
        .collect()
}
