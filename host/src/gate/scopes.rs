//! The scopes a shell approval offers for `session`, narrowest first: this exact command, the
//! program with its leading subcommand words (`shell:python3 -m unittest **`), and the
//! program itself (the call's key, what `session` has always granted).
//!
//! Only a simple command keyed on its program gets narrower scopes; a compound command, a
//! wrapper or a dangerous form is keyed on its exact text already and gets none. Every pattern
//! offered is written only with words that [`crate::key::KeyPattern`] reads back as exactly
//! those words (no spaces, no `*`, no shell syntax), so it matches the asked command and, for
//! the narrower ones, nothing the user was not shown.

use crate::exec::confine::Confinement;
use crate::exec::policy::program_name;
use crate::gate::approval::Scope;
use crate::key::CallKey;

/// Most subcommand-like words after the program in the middle pattern.
const MAX_SUBCOMMAND_WORDS: usize = 3;

/// Options that make an interpreter run code given in its arguments: a command with one of
/// them anywhere gets no middle pattern (only the exact command and the program).
const CODE_FLAGS: &[&str] = &["-c", "-e", "--eval", "--exec", "--command"];

/// The scopes for a shell call keyed `key`, run under `confinement`; empty when nothing is
/// narrower than the key.
pub(crate) fn shell_scopes(key: &CallKey, confinement: &Confinement) -> Vec<Scope> {
    let Some(argv) = key.argv.as_deref() else {
        return Vec::new();
    };
    let Some(program) = argv.first() else {
        return Vec::new();
    };
    // Only a key on the program itself has anything narrower.
    if key.tool != "shell" || key.target.as_deref() != Some(program.as_str()) {
        return Vec::new();
    }
    let mut scopes = Vec::new();
    if argv.len() > 1 && argv.iter().all(|w| writable(w)) {
        scopes.push(Scope {
            key: format!("shell:{}", argv.join(" ")),
            allows: "only this exact command".into(),
        });
    }
    if let Some((pattern, allows)) = middle(argv) {
        scopes.push(Scope {
            key: pattern,
            allows,
        });
    }
    if scopes.is_empty() {
        return scopes;
    }
    scopes.push(Scope {
        key: key.to_string(),
        allows: format!(
            "any {} command, whatever its arguments; {}",
            program_name(program),
            confined(confinement)
        ),
    });
    scopes
}

/// Whether `word` can stand in an argv pattern as itself: plain characters only, never a
/// pattern's `*`, nothing a shell would read as syntax (so the pattern's text is also a
/// command with exactly these words).
fn writable(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:@+%".contains(c))
}

/// A subcommand-like word: plain, not an option.
fn subcommand_word(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with('-')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn is_python(program: &str) -> bool {
    program_name(program)
        .strip_prefix("python")
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The middle pattern and what it allows: the program and its leading subcommand words (for
/// python `-m MODULE`), then ` **`.
fn middle(argv: &[String]) -> Option<(String, String)> {
    let program = argv.first()?;
    if !writable(program) || argv.iter().any(|w| CODE_FLAGS.contains(&w.as_str())) {
        return None;
    }
    let rest = &argv[1..];
    let mut words: Vec<&str> = Vec::new();
    let mut module = None;
    if is_python(program) && rest.first().map(String::as_str) == Some("-m") {
        let m = rest.get(1).filter(|m| subcommand_word(m))?;
        words.extend(["-m", m.as_str()]);
        module = Some(m.as_str());
    }
    for w in &rest[words.len()..] {
        if words.len() >= MAX_SUBCOMMAND_WORDS || !subcommand_word(w) {
            break;
        }
        words.push(w);
    }
    if words.is_empty() {
        return None;
    }
    let prefix = format!("{program} {}", words.join(" "));
    let allows = match module {
        Some(m) if words.len() == 2 => format!("also any other {m} run"),
        _ => format!("also `{prefix}` with any other arguments"),
    };
    Some((format!("shell:{prefix} **"), allows))
}

/// What confinement still stops, in one plain clause, from what this host applies (see
/// `exec/confine.rs`): the view masks every deny-listed file and freezes git's config and
/// hooks, Landlock keeps writes in the workspace (and the command's private `/tmp` and
/// `$HOME`), the network namespace leaves no network.
pub(crate) fn confined(c: &Confinement) -> String {
    let mut held = Vec::new();
    let mut open = Vec::new();
    if c.view {
        held.push("secret files stay hidden, .git hooks and config read-only");
    } else {
        open.push("secret files are readable");
    }
    if c.landlock {
        held.push("writes only in the workspace");
    } else {
        open.push("it can write wherever you can");
    }
    if c.netns {
        held.push("no network");
    } else {
        open.push("the network is reachable");
    }
    match (held.is_empty(), open.is_empty()) {
        (false, true) => format!("it still runs confined: {}", held.join(", ")),
        (false, false) => format!(
            "it runs confined ({}), but {}",
            held.join(", "),
            open.join(", ")
        ),
        _ => format!("it runs unconfined here: {}", open.join(", ")),
    }
}

#[cfg(test)]
#[path = "scopes_tests.rs"]
mod tests;
