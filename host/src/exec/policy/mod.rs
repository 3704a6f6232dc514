//! The shell's lists, all argv-aware:
//!
//! - **banned**: denied in every mode, `allow-all` included, whatever a grant says — network
//!   downloaders and remote shells, privilege escalation, global package installs, system
//!   changes, loader-injection variables, and argument combinations such as `go test -exec`;
//!   looked for in every command a text runs: through wrappers (`env`, `timeout`, `xargs`, …),
//!   inside `sh -c`/`bash -c` scripts (and `eval`, `env -S`, `find -exec`, `git -c alias.x=!…`),
//!   recursively;
//! - **exact-text** (wrappers and options that run another program): never keyed on the program
//!   name, always on the whole text — `env`, `nohup`, `timeout`, `xargs`, `sh -c`, `find -exec`,
//!   `git -c`, `git diff --textconv`, `rg --pre`, …, and every git option, subcommand, URL
//!   or config write that runs a program or makes git run one later (`git_exact`);
//! - **dangerous**: always asked, even under a broader session grant for the program —
//!   `git push`, `git reset --hard`, `rm -r`, `kill`, …;
//! - **read-only**: run without a prompt in `ask` mode — an **allowlist**: a program from the
//!   list whose every option is in its table ([`super::option_tables`]) as safe, read the way
//!   the program reads it ([`super::options`]: GNU abbreviations, `--opt=value`, attached short
//!   values, grouped flags). An option the table does not know makes the command `Normal`.
//!
//! Options in the banned, exact-text and dangerous lists are matched the same way: with the
//! program's table when it has one (`date --se=x` is `date --set`), otherwise strictly (a
//! long option counts when it is any prefix of the listed name, a short letter anywhere in a
//! group of short options, attached values included: `rm --rec`, `rm -Rf`, `date -s2030`).
//!
//! A policy may only make these stricter (`[shell] banned = [...]` adds programs).
//!
//! Split by theme, one file each: `argv` (reading a command line: program, subcommand,
//! options, `find`'s expression), `lists` (the banned, exact-text and dangerous argument
//! lists), `commands` (every command a command runs, through wrappers and scripts), `git` and
//! `git_config` (what makes git run another program), `read_only` (the read-only allowlist),
//! `blobs` (the git commands that could print a committed secret's content),
//! `compound` (the segments of a compound text); this file holds the entry points.

mod argv;
mod blobs;
mod commands;
mod compound;
mod git;
mod git_config;
mod lists;
mod read_only;

pub use argv::program_name;
pub use commands::WRAPPERS;
pub use compound::segments;
pub use read_only::read_only_words;

use argv::{injects_loader, table_hit};
use commands::commands;
use git::git_exact;
use lists::{banned_one, dangerous_one, EXACT_TEXT_ARGS};

/// What the lists say about one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    /// Denied in every mode.
    Banned(String),
    /// Runs without a prompt in `ask` mode.
    ReadOnly,
    /// Always asks (unless a grant names exactly this command).
    Dangerous(String),
    /// The ladder decides as for any exec call.
    Normal,
}

/// Why `argv` (one command, program first) is banned, if it is. `extra` are programs the
/// policy bans on top of the built-in list. Every command it runs is checked: through wrappers
/// (`env curl x`, `nohup timeout 5 wget y`, `xargs -I{} ssh {}`), inside shell scripts
/// (`bash -c 'curl x | sh'`, nested ones too) and `find -exec`.
pub fn banned(argv: &[String], extra: &[String]) -> Option<String> {
    if argv.is_empty() {
        return None;
    }
    if let Some(w) = argv.iter().find(|w| injects_loader(w)) {
        return Some(format!("`{w}` injects code into the programs it runs"));
    }
    let mut cmds = Vec::new();
    if let Err(why) = commands(argv, 0, &mut cmds) {
        return Some(why);
    }
    cmds.iter().find_map(|cmd| {
        cmd.iter()
            .find(|w| injects_loader(w))
            .map(|w| format!("`{w}` injects code into the programs it runs"))
            .or_else(|| banned_one(cmd, extra))
    })
}

/// Why a simple command is keyed on its whole text instead of its program, if it is.
pub fn exact_text(argv: &[String]) -> Option<String> {
    let name = program_name(argv.first()?);
    if WRAPPERS.contains(&name) {
        return Some(format!("`{name}` runs another command"));
    }
    if name == "git" {
        if let Some(why) = git_exact(argv) {
            return Some(format!("`git` {why}"));
        }
    }
    for (p, sub, opts) in EXACT_TEXT_ARGS {
        if table_hit(argv, p, *sub, opts) {
            return Some(format!(
                "`{p}` with these options runs or changes more than itself"
            ));
        }
    }
    None
}

/// Why a command is dangerous (always asks), if it is: itself or any command it runs (through
/// wrappers and shell scripts, as for [`banned`]).
pub fn dangerous(argv: &[String]) -> Option<String> {
    let mut cmds = Vec::new();
    // Too deep to inspect is banned; here the command itself is still looked at.
    let _ = commands(argv, 0, &mut cmds);
    if cmds.is_empty() {
        cmds.push(argv.to_vec());
    }
    cmds.iter().find_map(|cmd| dangerous_one(cmd))
}

/// Whether a simple command only reads.
pub fn read_only(argv: &[String]) -> bool {
    read_only_words(argv).is_some()
}

/// Why a git command that would otherwise be read-only is not: it could print or search the
/// content of a blob (a deny-listed file's old content included), which the sandbox's masks do
/// not cover ([`blobs`]). For the ask and `explain` to show.
pub fn git_blob_printer(argv: &[String]) -> Option<String> {
    read_only::git_blob_reason(argv)
}

/// A command text as the lexer reads it (quotes allowed), or its segments' first command
/// when it is compound.
#[cfg(test)]
fn argv(s: &str) -> Vec<String> {
    use super::lex::{lex, Lexed};
    match lex(s) {
        Lexed::Simple(v) => v,
        // `;`, `{}`, `!`, `(`: as argv they are plain words (`find . -exec rm {} ;`).
        Lexed::Compound(_) => s
            .split(' ')
            .map(|w| w.trim_matches(['\'', '"']).to_string())
            .collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod blobs_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod git_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod lists_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod property_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod read_only_tests;
