//! Reading a command line: the program's name, where its subcommand is, whether it uses one
//! of a list of options (with its option table when it has one, strictly otherwise),
//! environment assignments, and `find`'s expression.

use crate::exec::catalog;
use crate::exec::option_tables::{find_primary, FindArgs};
use crate::exec::options::{has, loose_hit, parse, Table};

/// The basename of a program word (`/usr/bin/curl` → `curl`).
pub fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Options before a program's subcommand that take the next word as their value.
fn global_value_opts(program: &str) -> &'static [&'static str] {
    match program {
        "git" => &[
            "-C",
            "-c",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--config-env",
            "--super-prefix",
            "--list-cmds",
            "--attr-source",
        ],
        "go" => &["-C"],
        "cargo" => &["-C", "-Z", "--config", "--color"],
        "npm" | "pnpm" => &["-C", "--prefix", "--workspace", "-w", "--loglevel"],
        "yarn" => &["--cwd"],
        "pip" | "pip3" => &[
            "--log",
            "--proxy",
            "--retries",
            "--timeout",
            "--exists-action",
            "--cert",
            "--client-cert",
            "--cache-dir",
            "--python",
        ],
        _ => &[],
    }
}

/// Where `argv`'s subcommand is: the first word after the program that is not an option or the
/// value of one (git's `-C dir`, `-c x=y`), nor a toolchain (`cargo +nightly`).
pub(super) fn subcommand_index(argv: &[String]) -> usize {
    let program = program_name(&argv[0]);
    let values = global_value_opts(program);
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        if values.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        if a.starts_with('-') || (program == "cargo" && a.starts_with('+')) {
            i += 1;
            continue;
        }
        return i;
    }
    argv.len()
}

/// The option table for `program` (or `git <sub>`), when there is one.
fn table_for(program: &str, sub: Option<&str>) -> Option<&'static Table> {
    match (program, sub) {
        ("git", Some(s)) => catalog::git_table(s),
        (p, None) => catalog::table(p),
        _ => None,
    }
}

/// Whether one of the listed spellings is among `args` for `program` (`sub`: the git
/// subcommand the args follow): read with the program's table when it parses, strictly
/// otherwise.
pub(super) fn args_hit(program: &str, sub: Option<&str>, args: &[String], listed: &[&str]) -> bool {
    if program == "find" {
        return match parse_find(args) {
            Ok(f) => listed
                .iter()
                .any(|l| f.primaries.iter().any(|(p, _)| p == l)),
            Err(()) => args.iter().any(|a| listed.contains(&a.as_str())),
        };
    }
    if let Some(t) = table_for(program, sub) {
        if let Ok(items) = parse(t, args) {
            return listed.iter().any(|l| has(&items, l));
        }
    }
    args.iter().enumerate().any(|(i, a)| {
        listed.iter().any(|l| {
            loose_hit(a, l)
                // tar's old style: the first argument is a group of letters without a dash.
                || (program == "tar" && i == 0 && !a.starts_with('-') && loose_hit(&format!("-{a}"), l))
        })
    })
}

/// Whether `cmd` is `program` (with `sub`) using one of `opts` (or any options when empty).
pub(super) fn table_hit(cmd: &[String], program: &str, sub: Option<&str>, opts: &[&str]) -> bool {
    if cmd.is_empty() || program_name(&cmd[0]) != program {
        return false;
    }
    let (args, sub_name) = match sub {
        None => (&cmd[1..], None),
        Some(s) => {
            let i = subcommand_index(cmd);
            let Some(actual) = cmd.get(i) else {
                return false;
            };
            if s != "*" && actual != s {
                return false;
            }
            (&cmd[i + 1..], Some(actual.as_str()))
        }
    };
    if opts.is_empty() {
        return true;
    }
    args_hit(program, sub_name, args, opts)
}

/// Whether a word assigns a loader-injection variable (`LD_PRELOAD=x.so`, `DYLD_…=`).
pub(super) fn injects_loader(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with("LD_") || name.starts_with("DYLD_") || name == "BASH_ENV"
    })
}

/// Environment variables whose value is a command some program runs.
pub(super) const PROGRAM_VARS: &[&str] = &[
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_ASKPASS",
    "GIT_PROXY_COMMAND",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "PROMPT_COMMAND",
    "RSYNC_RSH",
    "CVS_RSH",
    "ENV",
];

/// `NAME=value` as (name, value), when `word` is an assignment.
pub(super) fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    (!name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some((name, value))
}

/// A `find` command line as find reads it.
pub(super) struct FindLine<'a> {
    /// The primaries in order, with the words they take.
    pub(super) primaries: Vec<(&'a str, &'a [String])>,
    /// The commands of `-exec`, `-execdir`, `-ok`, `-okdir`.
    pub(super) commands: Vec<Vec<String>>,
    /// Start paths and the primaries' values (what it may read as files).
    pub(super) words: Vec<&'a str>,
}

/// Read `find`'s arguments: leading options (`-H`, `-L`, `-P`, `-D opts`, `-Olevel`), start
/// paths, then the expression, every word of which must be a known primary or its argument.
pub(super) fn parse_find(args: &[String]) -> Result<FindLine<'_>, ()> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            o if o.starts_with("-O") && o[2..].bytes().all(|b| b.is_ascii_digit()) => i += 1,
            _ => break,
        }
    }
    let mut words = Vec::new();
    let expression =
        |w: &str| (w.starts_with('-') && w.len() > 1) || matches!(w, "!" | "(" | ")" | ",");
    while let Some(a) = args.get(i) {
        if expression(a) {
            break;
        }
        words.push(a.as_str());
        i += 1;
    }
    let mut primaries = Vec::new();
    let mut commands = Vec::new();
    while let Some(a) = args.get(i) {
        i += 1;
        let (_, kind, _) = find_primary(a).ok_or(())?;
        let n = match kind {
            FindArgs::Zero => 0,
            FindArgs::One => 1,
            FindArgs::Two => 2,
            FindArgs::Command => {
                let end = args[i..]
                    .iter()
                    .position(|w| w == ";" || w == "+")
                    .ok_or(())?;
                commands.push(args[i..i + end].to_vec());
                end + 1
            }
        };
        let values = args.get(i..i + n).ok_or(())?;
        if kind != FindArgs::Command {
            words.extend(values.iter().map(String::as_str));
        }
        primaries.push((a.as_str(), values));
        i += n;
    }
    Ok(FindLine {
        primaries,
        commands,
        words,
    })
}
