//! Looking through a command: the wrappers and shells that run another command, and every
//! command a command runs (through wrappers, `sh -c` scripts, `eval`, `find -exec`, git's
//! scripts, program-valued variables), recursively up to [`MAX_DEPTH`].

use super::argv::{assignment, parse_find, program_name, subcommand_index, PROGRAM_VARS};
use super::compound::segments;
use super::git::git_scripts;
use super::git_config::git_config_script;
use crate::exec::lex::{lex, Lexed};

/// Programs that run another command given as arguments: never keyed on their own name.
pub const WRAPPERS: &[&str] = &[
    "env",
    "nohup",
    "timeout",
    "xargs",
    "sudo",
    "doas",
    "su",
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "eval",
    "exec",
    "command",
    "builtin",
    "nice",
    "ionice",
    "stdbuf",
    "setsid",
    "chroot",
    "strace",
    "ltrace",
    "time",
    "watch",
    "script",
    "busybox",
    "unshare",
    "nsenter",
    "flock",
    "parallel",
    "chrt",
    "taskset",
    "systemd-run",
    "runuser",
    "sg",
    "newgrp",
    "firejail",
    "expect",
    "caffeinate",
    "unbuffer",
    "proxychains",
    "torsocks",
];

/// Shells whose `-c` runs the script text given as an argument.
const SHELLS: &[&str] = &[
    "sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "pdksh", "yash", "posh", "fish",
    "csh", "tcsh",
];

/// How deep wrappers and scripts are looked into; deeper is banned.
const MAX_DEPTH: usize = 8;

/// For a wrapper: (short letters taking a value, long options taking a value, operands before
/// the wrapped command, options whose value is a script).
type WrapperSpec = (
    &'static str,
    &'static [&'static str],
    usize,
    &'static [&'static str],
);

fn wrapper_spec(name: &str) -> WrapperSpec {
    match name {
        "env" => (
            "uCS",
            &["unset", "chdir", "split-string"],
            0,
            &["-S", "--split-string"],
        ),
        "timeout" => ("sk", &["signal", "kill-after"], 1, &[]),
        "xargs" => (
            "IEdLnPsa",
            &[
                "arg-file",
                "delimiter",
                "max-args",
                "max-procs",
                "max-chars",
                "process-slot-var",
            ],
            0,
            &[],
        ),
        "nice" => ("n", &["adjustment"], 0, &[]),
        "ionice" => (
            "cnpPu",
            &["class", "classdata", "pid", "pgid", "uid"],
            0,
            &[],
        ),
        "stdbuf" => ("ioe", &["input", "output", "error"], 0, &[]),
        "flock" => (
            "wEc",
            &["timeout", "wait", "conflict-exit-code", "command"],
            1,
            &["-c", "--command"],
        ),
        "watch" => ("nd", &["interval", "differences"], 0, &[]),
        "time" => ("fo", &["format", "output"], 0, &[]),
        "strace" | "ltrace" => ("eopsuIEaXbPAnDlSL", &["output"], 0, &[]),
        "chrt" => ("T", &[], 1, &[]),
        "taskset" => ("", &[], 1, &[]),
        "exec" => ("a", &[], 0, &[]),
        "script" => (
            "cEIOBTtm",
            &["command", "log-io", "log-in", "log-out"],
            0,
            &["-c", "--command"],
        ),
        "sg" | "su" | "runuser" => (
            "cgGsu",
            &["command", "group", "shell", "user"],
            0,
            &["-c", "--command"],
        ),
        "sudo" | "doas" => (
            "ugChpUrtDRT",
            &["user", "group", "host", "prompt", "chdir"],
            0,
            &[],
        ),
        "unshare" | "nsenter" => ("tSGw", &["target", "setuid", "setgid", "wd"], 0, &[]),
        "systemd-run" => (
            "pEuMHtS",
            &[
                "unit",
                "property",
                "setenv",
                "uid",
                "gid",
                "machine",
                "host",
                "description",
                "slice",
            ],
            0,
            &[],
        ),
        "parallel" => ("jS", &["jobs", "sshlogin"], 0, &[]),
        "proxychains" => ("f", &[], 0, &[]),
        "expect" => ("cfD", &[], 0, &[]),
        _ => ("", &[], 0, &[]),
    }
}

/// What a wrapper's arguments run: the index in `argv` where the wrapped command starts, and the
/// script texts given to options like `env -S`.
fn wrapped(argv: &[String]) -> (Option<usize>, Vec<String>) {
    let name = program_name(&argv[0]);
    let (shorts, longs, mut operands, script_opts) = wrapper_spec(name);
    let mut scripts = Vec::new();
    let mut i = 1;
    while let Some(w) = argv.get(i) {
        i += 1;
        if w == "--" {
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) if script_opts.contains(&format!("--{n}").as_str()) => {
                    scripts.push(v.to_string());
                }
                Some(_) => {}
                None if longs.contains(&long) => {
                    if script_opts.contains(&w.as_str()) {
                        if let Some(v) = argv.get(i) {
                            scripts.push(v.clone());
                        }
                    }
                    i += 1;
                }
                None => {}
            }
            continue;
        }
        if let Some(group) = w.strip_prefix('-').filter(|g| !g.is_empty()) {
            // The first value-taking letter takes the rest of the group or the next word.
            if let Some((at, c)) = group.char_indices().find(|(_, c)| shorts.contains(*c)) {
                let rest = &group[at + c.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    argv.get(i - 1).cloned()
                } else {
                    Some(rest.to_string())
                };
                if script_opts.contains(&format!("-{c}").as_str()) {
                    scripts.extend(value);
                }
            }
            continue;
        }
        if assignment(w).is_some() && name == "env" {
            continue;
        }
        if operands > 0 {
            operands -= 1;
            continue;
        }
        // A duration or a priority before the command (`timeout 5s`, `nice 10`).
        if w.starts_with(|c: char| c.is_ascii_digit())
            && w.chars().all(|c| c.is_ascii_digit() || ".smhd".contains(c))
        {
            continue;
        }
        return (Some(i - 1), scripts);
    }
    let start = (i < argv.len()).then_some(i);
    (start, scripts)
}

/// The script texts a shell runs with `-c` (every operand after a `-c`, erring strict: the
/// ones after the script are its `$0`, `$1`, … and may be run by it too).
fn shell_scripts(argv: &[String]) -> Vec<String> {
    let mut has_c = false;
    let mut scripts = Vec::new();
    let mut options_done = false;
    let mut i = 1;
    while let Some(w) = argv.get(i) {
        i += 1;
        if !options_done {
            if w == "--" || w == "-" {
                options_done = true;
                continue;
            }
            if let Some(long) = w.strip_prefix("--") {
                if let Some(v) = long.strip_prefix("command=") {
                    scripts.push(v.to_string());
                } else if long == "command" {
                    has_c = true;
                } else if long == "rcfile" || long == "init-file" {
                    i += 1;
                }
                continue;
            }
            if let Some(group) = w.strip_prefix(['-', '+']).filter(|g| !g.is_empty()) {
                if group.contains('c') {
                    has_c = true;
                }
                // `-o name` / `-O name` (bash, zsh, ksh): one word per letter.
                i += group.matches(['o', 'O']).count();
                continue;
            }
            options_done = true;
        }
        if has_c {
            scripts.push(w.clone());
        }
    }
    scripts
}

/// Every command `argv` runs: itself, and (recursively) what its wrappers run, the commands of
/// a shell's `-c` script, of `eval`, `env -S`, `watch`, `find -exec`, `python -m pip`,
/// `git -c alias.x=!…`, and of program-valued variables (`GIT_SSH_COMMAND=…`). Leading
/// assignments are dropped from each command. Errs when nested deeper than [`MAX_DEPTH`].
pub(super) fn commands(
    argv: &[String],
    depth: usize,
    out: &mut Vec<Vec<String>>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "commands nested deeper than {MAX_DEPTH} levels (wrappers, `sh -c`) are banned: they cannot be inspected"
        ));
    }
    // Leading assignments: a program-valued variable's value is a command.
    let skip = argv.iter().take_while(|w| assignment(w).is_some()).count();
    for w in &argv[..skip] {
        if let Some((name, value)) = assignment(w) {
            if PROGRAM_VARS.contains(&name) {
                commands_of_text(value, depth + 1, out)?;
            }
        }
    }
    let argv = &argv[skip..];
    let Some(first) = argv.first() else {
        return Ok(());
    };
    out.push(argv.to_vec());
    let name = program_name(first);
    if SHELLS.contains(&name) {
        for s in shell_scripts(argv) {
            commands_of_text(&s, depth + 1, out)?;
        }
    }
    match name {
        "eval" => commands_of_text(&argv[1..].join(" "), depth + 1, out)?,
        "find" => {
            if let Ok(f) = parse_find(&argv[1..]) {
                for cmd in f.commands {
                    commands(&cmd, depth + 1, out)?;
                }
            } else {
                // Best effort: whatever follows an -exec-like word.
                for (i, w) in argv.iter().enumerate() {
                    if matches!(w.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                        let end = argv[i + 1..]
                            .iter()
                            .position(|w| w == ";" || w == "+")
                            .map_or(argv.len(), |p| i + 1 + p);
                        commands(&argv[i + 1..end], depth + 1, out)?;
                    }
                }
            }
        }
        "git" => {
            let mut i = 1;
            while i + 1 < argv.len() && i < subcommand_index(argv) {
                if argv[i] == "-c" {
                    if let Some(script) = git_config_script(&argv[i + 1]) {
                        commands_of_text(script, depth + 1, out)?;
                    }
                }
                i += 1;
            }
            for script in git_scripts(argv) {
                commands_of_text(&script, depth + 1, out)?;
            }
        }
        n if n.starts_with("python") => {
            // `python -m pip …` is pip.
            if let Some(i) = argv.iter().position(|w| w == "-m" || w == "-mpip") {
                let rest = if argv[i] == "-mpip" { i + 1 } else { i + 2 };
                if argv.get(i + 1).is_some_and(|m| m == "pip") || argv[i] == "-mpip" {
                    let mut pip = vec!["pip".to_string()];
                    pip.extend(argv.get(rest..).unwrap_or_default().iter().cloned());
                    commands(&pip, depth + 1, out)?;
                }
            }
        }
        _ => {}
    }
    if WRAPPERS.contains(&name) && !SHELLS.contains(&name) && name != "eval" {
        let (start, scripts) = wrapped(argv);
        for s in scripts {
            commands_of_text(&s, depth + 1, out)?;
        }
        if let Some(start) = start {
            let inner = &argv[start..];
            if name == "watch" && !argv[1..start].iter().any(|w| w == "-x" || w == "--exec") {
                // watch runs its arguments through `sh -c`.
                commands_of_text(&inner.join(" "), depth + 1, out)?;
            }
            commands(inner, depth + 1, out)?;
        }
    } else if SHELLS.contains(&name) && shell_scripts(argv).is_empty() {
        // `sh prog args`: strict, the first operand is looked at as a program too.
        let (start, _) = wrapped(argv);
        if let Some(start) = start {
            commands(&argv[start..], depth + 1, out)?;
        }
    }
    Ok(())
}

/// The commands of a script text: its argv when simple, its segments when compound.
fn commands_of_text(text: &str, depth: usize, out: &mut Vec<Vec<String>>) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "commands nested deeper than {MAX_DEPTH} levels (wrappers, `sh -c`) are banned: they cannot be inspected"
        ));
    }
    match lex(text) {
        Lexed::Simple(argv) => commands(&argv, depth, out),
        Lexed::Compound(_) => {
            for seg in segments(text) {
                commands(&seg, depth, out)?;
            }
            Ok(())
        }
    }
}
