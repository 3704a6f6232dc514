//! The argument lists: program + argument combinations that are banned in every mode, keyed
//! on the whole text, or dangerous (always asked), and the checks of one command (no
//! look-through) against them.

use super::argv::{program_name, table_hit};
use crate::exec::catalog::BANNED;
use crate::exec::option_tables as tables;
use crate::exec::options::{parse, Item};

/// Program + argument combinations denied in every mode: (program, subcommand or `None`,
/// options any of which bans it, or none for "the subcommand alone", why).
const BANNED_ARGS: &[(&str, Option<&str>, &[&str], &str)] = &[
    (
        "go",
        Some("test"),
        &["-exec", "-toolexec"],
        "runs an arbitrary program through the test",
    ),
    (
        "go",
        Some("run"),
        &["-exec", "-toolexec"],
        "runs an arbitrary program",
    ),
    (
        "go",
        Some("build"),
        &["-toolexec"],
        "runs an arbitrary program",
    ),
    ("go", Some("install"), &[], "a global package install"),
    ("go", Some("get"), &[], "a global package install"),
    ("cargo", Some("install"), &[], "a global package install"),
    (
        "npm",
        Some("install"),
        &["-g", "--global"],
        "a global package install",
    ),
    (
        "npm",
        Some("i"),
        &["-g", "--global"],
        "a global package install",
    ),
    (
        "npm",
        Some("add"),
        &["-g", "--global"],
        "a global package install",
    ),
    (
        "npm",
        Some("uninstall"),
        &["-g", "--global"],
        "a global package change",
    ),
    (
        "pnpm",
        Some("add"),
        &["-g", "--global"],
        "a global package install",
    ),
    ("yarn", Some("global"), &[], "a global package install"),
    (
        "pip",
        Some("install"),
        &["--user", "--break-system-packages"],
        "a global package install",
    ),
    (
        "pip3",
        Some("install"),
        &["--user", "--break-system-packages"],
        "a global package install",
    ),
    ("gem", Some("install"), &[], "a global package install"),
    ("brew", Some("install"), &[], "a global package install"),
    ("brew", Some("uninstall"), &[], "a global package change"),
    ("brew", Some("upgrade"), &[], "a global package change"),
    ("apt", Some("install"), &[], "a system package install"),
    ("apt", Some("remove"), &[], "a system package change"),
    ("apt", Some("purge"), &[], "a system package change"),
    ("apt", Some("upgrade"), &[], "a system package change"),
    ("apt-get", Some("install"), &[], "a system package install"),
    ("apt-get", Some("remove"), &[], "a system package change"),
    ("apt-get", Some("purge"), &[], "a system package change"),
    ("apt-get", Some("upgrade"), &[], "a system package change"),
    (
        "apt-get",
        Some("dist-upgrade"),
        &[],
        "a system package change",
    ),
    ("dnf", Some("install"), &[], "a system package install"),
    ("yum", Some("install"), &[], "a system package install"),
    (
        "pacman",
        None,
        &["-S", "-Syu", "-R", "-U"],
        "a system package change",
    ),
    ("apk", Some("add"), &[], "a system package install"),
    ("zypper", Some("install"), &[], "a system package install"),
    (
        "git",
        Some("config"),
        &["--global", "--system"],
        "changes configuration outside the workspace",
    ),
    ("date", None, &["-s", "--set"], "changes the system clock"),
];

/// Options that make a command run another program (or write somewhere unexpected): the command
/// is keyed on its whole text. (program, subcommand or `None` (`Some("*")`: any git
/// subcommand, long options only), options.)
pub(super) const EXACT_TEXT_ARGS: &[(&str, Option<&str>, &[&str])] = &[
    (
        "find",
        None,
        &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
    ),
    (
        "rg",
        None,
        &["--pre", "--hostname-bin", "--search-zip", "-z"],
    ),
    ("sort", None, &["--compress-program"]),
    (
        "tar",
        None,
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "-F",
            "--rsh-command",
        ],
    ),
    ("zip", None, &["-TT", "--unzip-command"]),
];

/// Dangerous forms: (program, subcommand or `None`, options any of which makes it dangerous —
/// empty: the subcommand alone, why).
const DANGEROUS: &[(&str, Option<&str>, &[&str], &str)] = &[
    ("git", Some("push"), &[], "publishes commits"),
    (
        "git",
        Some("reset"),
        &["--hard", "--merge", "--keep"],
        "discards work",
    ),
    ("git", Some("clean"), &[], "deletes untracked files"),
    (
        "git",
        Some("checkout"),
        &["-f", "--force", "--", "."],
        "discards work",
    ),
    ("git", Some("restore"), &[], "discards work"),
    (
        "git",
        Some("branch"),
        &["-D", "-d", "--delete", "-f", "--force"],
        "deletes branches",
    ),
    ("git", Some("stash"), &["drop", "clear"], "discards stashes"),
    ("git", Some("rebase"), &[], "rewrites history"),
    ("git", Some("filter-branch"), &[], "rewrites history"),
    ("git", Some("update-ref"), &[], "rewrites refs"),
    (
        "git",
        Some("reflog"),
        &["expire", "delete"],
        "discards history",
    ),
    ("git", Some("commit"), &["--amend"], "rewrites history"),
    (
        "rm",
        None,
        &["-r", "-R", "--recursive", "-f", "--force"],
        "deletes recursively or by force",
    ),
    ("find", None, &["-delete"], "deletes files"),
    (
        "chmod",
        None,
        &["-R", "--recursive"],
        "changes permissions recursively",
    ),
    (
        "chown",
        None,
        &["-R", "--recursive"],
        "changes ownership recursively",
    ),
    ("kill", None, &[], "signals host processes"),
    ("pkill", None, &[], "signals host processes"),
    ("killall", None, &[], "signals host processes"),
    ("dd", None, &[], "writes raw data"),
    ("shred", None, &[], "destroys files"),
    ("truncate", None, &[], "destroys file contents"),
    ("docker", None, &[], "controls containers on the host"),
    ("podman", None, &[], "controls containers on the host"),
];

/// Why one command (no look-through) is banned, if it is.
pub(super) fn banned_one(cmd: &[String], extra: &[String]) -> Option<String> {
    let name = program_name(cmd.first()?);
    if let Some((_, why)) = BANNED.iter().find(|(p, _)| *p == name) {
        return Some(format!("`{name}` is banned: {why}"));
    }
    if extra.iter().any(|p| p == name) {
        return Some(format!("`{name}` is banned by the policy ([shell] banned)"));
    }
    for (p, sub, opts, why) in BANNED_ARGS {
        if table_hit(cmd, p, *sub, opts) {
            let what = match sub {
                Some(s) => format!("`{p} {s}`"),
                None => format!("`{p}`"),
            };
            let with = if opts.is_empty() {
                String::new()
            } else {
                format!(" with {}", opts.join(" / "))
            };
            return Some(format!("{what}{with} is banned: {why}"));
        }
    }
    if name == "date" {
        // `date MMDDhhmm…` sets the clock too: any operand that is not a `+FORMAT`.
        if let Ok(items) = parse(&tables::DATE, &cmd[1..]) {
            if items
                .iter()
                .any(|i| matches!(i, Item::Operand(w) if !w.starts_with('+')))
            {
                return Some(
                    "`date` with an operand that is not a +FORMAT is banned: it changes the system clock"
                        .into(),
                );
            }
        }
    }
    None
}

pub(super) fn dangerous_one(cmd: &[String]) -> Option<String> {
    for (p, sub, opts, why) in DANGEROUS {
        if table_hit(cmd, p, *sub, opts) {
            let what = match sub {
                Some(s) => format!("{p} {s}"),
                None => p.to_string(),
            };
            return Some(format!("`{what}` {why}"));
        }
    }
    None
}
