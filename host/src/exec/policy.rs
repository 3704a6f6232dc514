//! The shell's lists (SPEC §6), all argv-aware:
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

use super::catalog::{self, BANNED};
use super::lex::{lex, Lexed};
use super::option_tables::{self as tables, find_primary, FindArgs};
use super::options::{has, loose_hit, parse, Item, Table};

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
const EXACT_TEXT_ARGS: &[(&str, Option<&str>, &[&str])] = &[
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

/// git's options before the subcommand that change what git runs: keyed on the whole text.
/// `-c`/`--config-env` set any configuration (`core.pager`, `core.sshCommand`,
/// `core.fsmonitor`, `diff.external`, `credential.helper`, aliases… run programs);
/// `--exec-path` picks where git's own programs come from; `--git-dir`, `--work-tree` and
/// `--bare` point git at a repository (and its config and hooks) the kernel does not freeze;
/// `-p`/`--paginate` runs the pager.
const GIT_GLOBAL_EXACT: &[&str] = &[
    "-c",
    "--config-env",
    "--exec-path",
    "--git-dir",
    "--work-tree",
    "--bare",
    "-p",
    "--paginate",
];

/// git options that run a program, whatever the subcommand (long options only; also looked
/// for before the subcommand and after an alias): `--upload-pack`/`--receive-pack`/`--exec`
/// name the program run at the other end (`sh -c` locally), `--textconv`/`--ext-diff` run
/// configured diff programs, `--extcmd` a diff tool, `--open-files-in-pager` a pager.
const GIT_EXEC_ANYWHERE: &[&str] = &[
    "--textconv",
    "--ext-diff",
    "--upload-pack",
    "--receive-pack",
    "--exec",
    "--extcmd",
    "--open-files-in-pager",
];

/// git subcommands with options (or words) that run a program or make git run one later:
/// (subcommand, spellings — read with git's table when there is one, strictly otherwise —,
/// why).
const GIT_EXEC_ARGS: &[(&str, &[&str], &str)] = &[
    (
        "clone",
        &[
            "-u",
            "--upload-pack",
            "-c",
            "--config",
            "--template",
            "--separate-git-dir",
        ],
        "runs the given upload-pack, or sets up the new repository's config, hooks or git dir",
    ),
    (
        "init",
        &["--template", "--separate-git-dir"],
        "plants the new repository's hooks or puts its git dir where it is not frozen",
    ),
    ("fetch", &["--upload-pack"], "runs the given upload-pack"),
    ("pull", &["--upload-pack"], "runs the given upload-pack"),
    (
        "ls-remote",
        &["--upload-pack"],
        "runs the given upload-pack",
    ),
    (
        "push",
        &["--receive-pack", "--exec"],
        "runs the given receive-pack",
    ),
    ("archive", &["--exec"], "runs the given upload-archive"),
    (
        "rebase",
        &["-x", "--exec", "-i", "--interactive", "--edit-todo"],
        "runs exec lines or an editable todo list",
    ),
    (
        "grep",
        &["-O", "--open-files-in-pager"],
        "runs the given pager",
    ),
    (
        "submodule",
        &["foreach"],
        "runs a command in every submodule",
    ),
    ("bisect", &["run"], "runs a command at every step"),
    ("help", &["-w", "--web"], "runs a browser"),
    (
        "maintenance",
        &["start", "register"],
        "schedules git to run later",
    ),
];

/// git subcommands that run other programs whatever their options: keyed on the whole text.
const GIT_EXEC_COMMANDS: &[(&str, &str)] = &[
    ("difftool", "runs the configured or given diff tool"),
    ("difftool--helper", "runs the configured or given diff tool"),
    ("mergetool", "runs the configured or given merge tool"),
    ("filter-branch", "runs its filters as shell commands"),
    ("daemon", "serves repositories and runs its access hook"),
    ("instaweb", "starts a web server and a browser"),
    ("web--browse", "runs a browser"),
    ("credential", "runs credential helpers"),
    ("credential-store", "reads and writes stored credentials"),
    ("credential-cache", "runs a credential daemon"),
    ("credential-cache--daemon", "runs a credential daemon"),
    ("hook", "runs hooks"),
    (
        "send-email",
        "sends mail (`--smtp-server` may be a program)",
    ),
    ("imap-send", "runs `imap.tunnel`"),
    ("shell", "runs commands"),
    ("remote-ext", "runs its command"),
    ("submodule--helper", "runs `foreach` commands"),
    ("receive-pack", "runs the target repository's hooks"),
    ("p4", "runs another version-control program"),
    ("svn", "runs another version-control program"),
    ("cvsimport", "runs another version-control program"),
    ("cvsexportcommit", "runs another version-control program"),
    ("cvsserver", "runs another version-control program"),
    ("archimport", "runs another version-control program"),
    ("merge-index", "runs the given merge program"),
    ("merge-one-file", "is run by merge-index"),
    (
        "for-each-repo",
        "runs git commands in the repositories a config lists",
    ),
];

/// The commands git 2.47 ships (`git --list-cmds=main`) that are not in [`GIT_EXEC_COMMANDS`]:
/// any other subcommand is an alias (which may be `!<command>`, or expand to `-c …`) or a
/// `git-<name>` program, and is keyed on the whole text.
const GIT_COMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "fmt-merge-msg",
    "for-each-ref",
    "format-patch",
    "fsck",
    "fsck-objects",
    "gc",
    "get-tar-commit-id",
    "grep",
    "hash-object",
    "help",
    "http-backend",
    "http-fetch",
    "http-push",
    "index-pack",
    "init",
    "init-db",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-octopus",
    "merge-ours",
    "merge-recursive",
    "merge-recursive-ours",
    "merge-recursive-theirs",
    "merge-resolve",
    "merge-subtree",
    "merge-tree",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "quiltimport",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "refs",
    "remote",
    "remote-fd",
    "remote-ftp",
    "remote-ftps",
    "remote-http",
    "remote-https",
    "repack",
    "replace",
    "replay",
    "request-pull",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-pack",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-archive",
    "upload-pack",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// git subcommands that take a repository URL: a `<transport>::<address>` URL runs
/// `git-remote-<transport>` (`ext::sh -c …` runs the command).
const GIT_URL_COMMANDS: &[&str] = &[
    "clone",
    "fetch",
    "pull",
    "push",
    "ls-remote",
    "archive",
    "remote",
    "submodule",
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
fn subcommand_index(argv: &[String]) -> usize {
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
fn args_hit(program: &str, sub: Option<&str>, args: &[String], listed: &[&str]) -> bool {
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
fn table_hit(cmd: &[String], program: &str, sub: Option<&str>, opts: &[&str]) -> bool {
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
fn injects_loader(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with("LD_") || name.starts_with("DYLD_") || name == "BASH_ENV"
    })
}

/// Environment variables whose value is a command some program runs.
const PROGRAM_VARS: &[&str] = &[
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
fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    (!name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some((name, value))
}

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

/// The programs `git -c key=value` configures: values that git runs.
fn git_config_script(kv: &str) -> Option<&str> {
    let (key, value) = kv.split_once('=')?;
    let key = key.to_ascii_lowercase();
    if key.starts_with("alias.") {
        return value.strip_prefix('!');
    }
    let runs = [
        "core.pager",
        "core.editor",
        "core.sshcommand",
        "core.fsmonitor",
        "core.askpass",
        "diff.external",
        "gpg.program",
        "sequence.editor",
        "credential.helper",
    ]
    .contains(&key.as_str())
        || key.starts_with("pager.")
        || [
            ".textconv",
            ".command",
            ".cmd",
            ".driver",
            ".clean",
            ".smudge",
            ".process",
            ".program",
        ]
        .iter()
        .any(|s| key.ends_with(s));
    runs.then_some(value)
}

/// Options of git subcommands whose value is a command git runs: (subcommand, spellings).
const GIT_SCRIPT_OPTS: &[(&str, &[&str])] = &[
    ("clone", &["-u", "--upload-pack"]),
    ("fetch", &["--upload-pack"]),
    ("pull", &["--upload-pack"]),
    ("ls-remote", &["--upload-pack"]),
    ("push", &["--receive-pack", "--exec"]),
    ("archive", &["--exec"]),
    ("rebase", &["-x", "--exec"]),
    ("difftool", &["-x", "--extcmd"]),
    (
        "filter-branch",
        &[
            "--env-filter",
            "--tree-filter",
            "--index-filter",
            "--parent-filter",
            "--msg-filter",
            "--commit-filter",
            "--tag-name-filter",
        ],
    ),
];

/// The values of the listed options in `args`, read strictly: for any prefix of a listed
/// long name `--name=v` or `--name v`, for a listed short letter anywhere in a group the rest
/// of the group or the next word.
fn loose_values(args: &[String], listed: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let next = || args.get(i + 1).cloned();
        for l in listed {
            if !loose_hit(a, l) {
                continue;
            }
            if l.starts_with("--") {
                out.extend(a.split_once('=').map(|(_, v)| v.to_string()).or_else(next));
            } else if let Some(c) = l.chars().nth(1) {
                let rest = a[1..].split_once(c).map_or("", |(_, r)| r);
                out.extend(if rest.is_empty() {
                    next()
                } else {
                    Some(rest.to_string())
                });
            }
        }
    }
    out
}

/// The command of an `ext::` URL (`ext::sh -c touch% x`: `% ` is a space, `%%` a `%`).
fn ext_command(word: &str) -> Option<String> {
    let url = word.split_once('=').map_or(word, |(_, v)| v);
    let cmd = url.strip_prefix("ext::")?;
    Some(cmd.replace("% ", " ").replace("%%", "%"))
}

/// The script texts a git command runs besides git: `rebase --exec`, `submodule foreach`,
/// `bisect run`, `clone -u`, `filter-branch` filters, `clone -c` and `config` writes of
/// program-valued keys, `ext::` URLs.
fn git_scripts(argv: &[String]) -> Vec<String> {
    let sub = subcommand_index(argv);
    let Some(name) = argv.get(sub).map(String::as_str) else {
        return Vec::new();
    };
    let args = &argv[sub + 1..];
    let mut out = Vec::new();
    for (s, opts) in GIT_SCRIPT_OPTS {
        if *s == name {
            out.extend(loose_values(args, opts));
        }
    }
    let words_after = |word: &str| {
        args.iter()
            .position(|a| a == word)
            .map(|i| {
                args[i + 1..]
                    .iter()
                    .filter(|a| !a.starts_with('-'))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|s| !s.is_empty())
    };
    match name {
        "submodule" | "submodule--helper" => out.extend(words_after("foreach")),
        "bisect" => out.extend(words_after("run")),
        "clone" => out.extend(
            loose_values(args, &["-c", "--config"])
                .iter()
                .filter_map(|kv| git_config_script(kv).map(str::to_string)),
        ),
        "config" => {
            if let Ok(Some(w)) = git_config_write(args) {
                for k in &w.keys {
                    if let Some(v) = w.value {
                        out.extend(git_config_script(&format!("{k}={v}")).map(str::to_string));
                    }
                }
            }
        }
        _ => {}
    }
    out.extend(args.iter().filter_map(|a| ext_command(a)));
    out
}

/// Every command `argv` runs: itself, and (recursively) what its wrappers run, the commands of
/// a shell's `-c` script, of `eval`, `env -S`, `watch`, `find -exec`, `python -m pip`,
/// `git -c alias.x=!…`, and of program-valued variables (`GIT_SSH_COMMAND=…`). Leading
/// assignments are dropped from each command. Errs when nested deeper than [`MAX_DEPTH`].
fn commands(argv: &[String], depth: usize, out: &mut Vec<Vec<String>>) -> Result<(), String> {
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

/// Why one command (no look-through) is banned, if it is.
fn banned_one(cmd: &[String], extra: &[String]) -> Option<String> {
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

/// Why a `git` command runs (or makes git later run) a program other than git's own, if it
/// does: a global option from [`GIT_GLOBAL_EXACT`], an option from [`GIT_EXEC_ANYWHERE`], a
/// subcommand from [`GIT_EXEC_COMMANDS`], its options from [`GIT_EXEC_ARGS`], a
/// `<transport>::` URL, or a config write [`git_config`] does not know to be harmless.
fn git_exact(argv: &[String]) -> Option<String> {
    let sub = subcommand_index(argv);
    let listed = GIT_GLOBAL_EXACT.iter().chain(GIT_EXEC_ANYWHERE);
    if argv[1..sub]
        .iter()
        .any(|a| listed.clone().any(|o| loose_hit(a, o)))
    {
        return Some("with these global options runs or changes more than itself".into());
    }
    let name = argv.get(sub)?;
    let args = &argv[sub + 1..];
    if args_hit("git", Some(name), args, GIT_EXEC_ANYWHERE) {
        return Some("with these options runs another program".into());
    }
    if let Some((_, why)) = GIT_EXEC_COMMANDS.iter().find(|(s, _)| s == name) {
        return Some(format!("{name} {why}"));
    }
    for (s, opts, why) in GIT_EXEC_ARGS {
        if s == name && args_hit("git", Some(name), args, opts) {
            return Some(format!("{name} with these options {why}"));
        }
    }
    if GIT_URL_COMMANDS.contains(&name.as_str()) {
        if let Some(url) = args.iter().find(|a| remote_helper_url(a)) {
            return Some(format!(
                "{name} `{url}` runs a remote helper (`ext::` runs a command)"
            ));
        }
    }
    if name == "config" {
        return git_config(args).map(|why| format!("config {why}"));
    }
    if !GIT_COMMANDS.contains(&name.as_str()) {
        return Some(format!(
            "`{name}` is not a command git ships: an alias or a `git-{name}` program runs"
        ));
    }
    None
}

/// Whether a word (or an option's `=value`) is a `<transport>::<address>` URL.
fn remote_helper_url(word: &str) -> bool {
    let url = match word.strip_prefix('-') {
        Some(_) => match word.split_once('=') {
            Some((_, v)) => v,
            None => return false,
        },
        None => word,
    };
    url.split_once("::").is_some_and(|(t, _)| {
        !t.is_empty()
            && t.starts_with(|c: char| c.is_ascii_alphanumeric())
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    })
}

/// A config write: its key and value (`None` for an unset or a section change).
struct ConfigWrite<'a> {
    keys: Vec<&'a str>,
    value: Option<&'a str>,
}

/// What `git config <args>` writes, read as git 2.47 reads it (legacy `--add`/`--unset`/…
/// actions and the `set`/`unset`/`rename-section`/`remove-section`/`edit` subcommands):
/// `Ok(None)` for a read, `Err(why)` for what is never keyed on the program name.
fn git_config_write(args: &[String]) -> Result<Option<ConfigWrite<'_>>, String> {
    let items = parse(&tables::GIT_CONFIG, args).map_err(|e| format!("with {e}"))?;
    if has(&items, "--edit") {
        return Err("--edit runs an editor on the config".into());
    }
    let operands: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Operand(w) => Some(*w),
            Item::Opt(_) => None,
        })
        .collect();
    let legacy_write = ["--add", "--replace-all", "--unset", "--unset-all"]
        .iter()
        .any(|o| has(&items, o));
    if has(&items, "--rename-section") || has(&items, "--remove-section") {
        return Err("renames or removes a section".into());
    }
    let write = match operands.first().copied() {
        _ if legacy_write => Some(ConfigWrite {
            keys: operands.first().copied().into_iter().collect(),
            value: if has(&items, "--unset") || has(&items, "--unset-all") {
                None
            } else {
                operands.get(1).copied()
            },
        }),
        Some("edit") => return Err("edit runs an editor on the config".into()),
        Some("rename-section" | "remove-section") => {
            return Err("renames or removes a section".into())
        }
        Some("set") => Some(ConfigWrite {
            keys: operands.get(1).copied().into_iter().collect(),
            value: operands.get(2).copied(),
        }),
        Some("unset") => Some(ConfigWrite {
            keys: operands.get(1).copied().into_iter().collect(),
            value: None,
        }),
        Some("list" | "get") => None,
        _ if [
            "--get",
            "--get-all",
            "--get-regexp",
            "--get-urlmatch",
            "--list",
            "--get-color",
            "--get-colorbool",
        ]
        .iter()
        .any(|o| has(&items, o)) =>
        {
            None
        }
        Some(key) if operands.len() >= 2 => Some(ConfigWrite {
            keys: vec![key],
            value: operands.get(1).copied(),
        }),
        _ => None,
    };
    if let Some(w) = &write {
        if has(&items, "--file") || has(&items, "--blob") {
            return Err("--file writes a config file git may be pointed at later".into());
        }
        if w.keys.is_empty() {
            return Err("writes without a key".into());
        }
    }
    Ok(write)
}

/// Why a `git config` command is keyed on its whole text, if it is: an editor, a section
/// change, a `--file` write, a value with a `<transport>::` URL, or a write (or unset) of a
/// key that is not known to be harmless ([`git_config_key_harmless`]: `alias.*`, `core.*`,
/// `*.command`, `include.*`, … are not).
fn git_config(args: &[String]) -> Option<String> {
    let write = match git_config_write(args) {
        Ok(w) => w?,
        Err(why) => return Some(why),
    };
    if write.value.is_some_and(remote_helper_url) {
        return Some("writes a remote-helper URL".into());
    }
    write
        .keys
        .iter()
        .find(|k| !git_config_key_harmless(k))
        .map(|k| format!("writes `{k}`, which may run a program or change what git runs"))
}

/// Whether writing the config key `key` cannot make git run a program: an **allowlist** of
/// sections and variables (identity, colors, advice, log/status/format display, branch and
/// remote tracking, …). Everything else — `alias.*`, `core.*`, `include.*`, `includeIf.*`,
/// `credential.*`, `filter.*`, `diff.<driver>.*`, `*.command`, `*.cmd`, `*.helper`,
/// `*.program`, `*.sshCommand`, `*.textconv`, `url.*.insteadOf`, `protocol.*.allow`,
/// `remote.*.uploadpack`, `sendemail.*`, `gpg.*`, `pager.*`, … — is keyed on the whole text.
fn git_config_key_harmless(key: &str) -> bool {
    let Some((section, rest)) = key.split_once('.') else {
        return false;
    };
    let section = section.to_ascii_lowercase();
    let (subsection, var) = match rest.rsplit_once('.') {
        Some((s, v)) => (Some(s), v.to_ascii_lowercase()),
        None => (None, rest.to_ascii_lowercase()),
    };
    if var.is_empty() {
        return false;
    }
    match (section.as_str(), subsection) {
        (
            "user" | "author" | "committer" | "advice" | "status" | "log" | "format" | "tag"
            | "commit" | "push" | "pull" | "fetch" | "rebase" | "rerere" | "column" | "grep"
            | "i18n" | "blame" | "pack" | "index" | "feature",
            None,
        ) => true,
        ("color" | "branch" | "gc", _) => true,
        ("init", None) => var == "defaultbranch",
        ("merge", None) => !matches!(var.as_str(), "tool" | "guitool"),
        ("diff", None) => !matches!(var.as_str(), "external" | "tool" | "guitool"),
        ("remote", None) => var == "pushdefault",
        ("remote", Some(_)) => matches!(
            var.as_str(),
            "url"
                | "pushurl"
                | "fetch"
                | "push"
                | "mirror"
                | "prune"
                | "prunetags"
                | "tagopt"
                | "skipdefaultupdate"
                | "skipfetchall"
        ),
        ("submodule", None) => true,
        ("submodule", Some(_)) => matches!(
            var.as_str(),
            "url" | "path" | "branch" | "active" | "ignore" | "shallow" | "fetchrecursesubmodules"
        ),
        ("protocol", None) => var == "version",
        _ => false,
    }
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

fn dangerous_one(cmd: &[String]) -> Option<String> {
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

/// Whether a simple command only reads.
pub fn read_only(argv: &[String]) -> bool {
    read_only_words(argv).is_some()
}

/// For a read-only command, the words the program may read as files — its operands and its
/// options' values, exactly as it parses them (`sort -S 64K -k2 x` → `64K`, `2`, `x`); `None`
/// when the command is not read-only. The gate checks each against the scope.
pub fn read_only_words(argv: &[String]) -> Option<Vec<&str>> {
    let (program, args) = argv.split_first()?;
    match program.as_str() {
        // They print their arguments and read nothing.
        "echo" | "true" | "false" => Some(args.iter().map(String::as_str).collect()),
        // coreutils printf reads no options but --help/--version; a first argument like `-v`
        // (bash's builtin would assign a variable) is not read-only.
        "printf" => match args.first().map(String::as_str) {
            Some(f) if f.starts_with('-') && !matches!(f, "--" | "--help" | "--version") => None,
            _ => Some(args.iter().map(String::as_str).collect()),
        },
        "git" => git_read_only(args),
        "find" => {
            let f = parse_find(args).ok()?;
            f.primaries
                .iter()
                .all(|(p, _)| find_primary(p).is_some_and(|(_, _, safe)| safe))
                .then_some(f.words)
        }
        name => {
            let t = catalog::table(name)?;
            let items = parse(t, args).ok()?;
            let words = safe_words(&items)?;
            if name == "date" {
                // Only a +FORMAT operand; anything else sets the clock.
                let operands: Vec<_> = items
                    .iter()
                    .filter_map(|i| match i {
                        Item::Operand(w) => Some(*w),
                        Item::Opt(_) => None,
                    })
                    .collect();
                if operands.len() > 1 || operands.iter().any(|w| !w.starts_with('+')) {
                    return None;
                }
            }
            Some(words)
        }
    }
}

/// The operands and option values of parsed items when every option is safe. A value that may
/// name a file must be spelled where the gate looks for it: in its own word, after `=`, or
/// right after its letter (`-f.env`, not `-rf.env`).
fn safe_words<'a>(items: &[Item<'a>]) -> Option<Vec<&'a str>> {
    let mut words = Vec::new();
    for item in items {
        match item {
            Item::Operand(w) => words.push(*w),
            Item::Opt(f) => {
                if !f.opt.safe {
                    return None;
                }
                if f.opt.path && f.attached_at.is_some_and(|at| at != 2) {
                    return None;
                }
                words.extend(f.values.iter().copied());
            }
        }
    }
    Some(words)
}

/// `git <sub> …` (args without `git`): read-only subcommands with only safe options. Global
/// options before the subcommand are never read-only; nor is a `<rev>:<path>` operand (it
/// reads a file's content from history, which the scope check cannot see) or `log -L`.
fn git_read_only(args: &[String]) -> Option<Vec<&str>> {
    let (sub, rest) = args.split_first()?;
    let t = catalog::git_table(sub)?;
    let items = parse(t, rest).ok()?;
    let words = safe_words(&items)?;
    let operands: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Operand(w) => Some(*w),
            Item::Opt(_) => None,
        })
        .collect();
    if operands.iter().any(|w| w.contains(':')) {
        return None;
    }
    match sub.as_str() {
        "log" | "show" | "rev-list" | "shortlog" if has(&items, "-L") => return None,
        // Names after `branch`/`tag` create one unless listing.
        "branch" | "tag" if !operands.is_empty() && !has(&items, "--list") => return None,
        "remote" if !operands.is_empty() => return None,
        _ => {}
    }
    Some(words)
}

/// A `find` command line as find reads it.
struct FindLine<'a> {
    /// The primaries in order, with the words they take.
    primaries: Vec<(&'a str, &'a [String])>,
    /// The commands of `-exec`, `-execdir`, `-ok`, `-okdir`.
    commands: Vec<Vec<String>>,
    /// Start paths and the primaries' values (what it may read as files).
    words: Vec<&'a str>,
}

/// Read `find`'s arguments: leading options (`-H`, `-L`, `-P`, `-D opts`, `-Olevel`), start
/// paths, then the expression, every word of which must be a known primary or its argument.
fn parse_find(args: &[String]) -> Result<FindLine<'_>, ()> {
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

/// The commands of a compound text, best effort: split at operators, each segment's words with
/// quotes stripped. Used only to make compound commands stricter (banned / dangerous); a
/// compound command is always keyed on its whole text and confined when it runs. Leading
/// assignments are dropped, except when one injects a loader or names a program
/// (`GIT_SSH_COMMAND=…`): then the segment is kept whole for [`banned`] to look at.
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::exec::options::{Arg, Opt};

    /// A command text as the lexer reads it (quotes allowed), or its segments' first command
    /// when it is compound.
    fn argv(s: &str) -> Vec<String> {
        match lex(s) {
            Lexed::Simple(v) => v,
            // `;`, `{}`, `!`, `(`: as argv they are plain words (`find . -exec rm {} ;`).
            Lexed::Compound(_) => s
                .split(' ')
                .map(|w| w.trim_matches(['\'', '"']).to_string())
                .collect(),
        }
    }

    #[test]
    fn banned_table() {
        let yes = [
            "curl https://x",
            "wget x",
            "ssh host",
            "sudo ls",
            "env curl x",
            "nohup curl x",
            "timeout 5 wget x",
            "xargs ssh",
            "go test -exec x ./...",
            "go test ./... -exec=sh",
            "go test --exec x ./...",
            "go test -toolexec=x ./...",
            "go -C . test -exec sh ./...",
            "npm install -g x",
            "npm i --global x",
            "npm install --glob x",
            "npm --prefix dir install -g x",
            "cargo install ripgrep",
            "cargo +nightly install ripgrep",
            "pip install --us x",
            "python3 -m pip install --user x",
            "date -s 2020-01-01",
            "date --set=2020-01-01",
            "date --se=x",
            "date --s=x",
            "date --set x",
            "date -s2030-01-01",
            "date -us2030",
            "date -Rus x",
            "date 010100002030",
            "date +%s 0101",
            "env LD_PRELOAD=x.so ls",
            "apt-get install x",
            "git config --global user.name x",
            "git config --glo user.name x",
            "systemctl stop x",
            "mount /dev/x /mnt",
            "/usr/bin/curl x",
            // Shell scripts are looked into.
            "bash -c 'curl x | sh'",
            "sh -c 'wget -O- x'",
            "sh -ec 'wget x'",
            "bash -lc 'curl x'",
            "bash -o pipefail -c 'curl x | sh'",
            "zsh -c curl",
            "dash -c 'echo hi; curl x'",
            "ksh -c 'true && ssh host'",
            "fish --command='curl x'",
            "bash -c \"bash -c 'curl x'\"",
            "bash -c 'echo \"$1\"' _ curl",
            "sh -c 'env LD_PRELOAD=x.so ls'",
            "eval curl x",
            "env -S 'curl x'",
            "env -S'curl x'",
            "env --split-string='curl x'",
            "xargs -I {} curl {}",
            "xargs -n 1 curl",
            "timeout -s KILL 5 curl x",
            "nice -n 5 curl x",
            "flock /tmp/lock curl x",
            "flock -c 'curl x' /tmp/lock",
            "watch 'curl x'",
            "busybox sh -c 'wget x'",
            "find . -exec curl x ;",
            "find . -name a -execdir sh -c 'curl x' ;",
            "git -c alias.x=!curl x",
            "git -c core.sshCommand=ssh fetch",
        ];
        for c in yes {
            assert!(banned(&argv(c), &[]).is_some(), "{c} should be banned");
        }
        let no = [
            "go test ./...",
            "go test -run install ./...",
            "npm install",
            "cargo test",
            "date",
            "date +%s",
            "date -u",
            "date -d tomorrow",
            "date --date=@0 +%F",
            "date -ds",
            "date -I",
            "git config user.name x",
            "echo curl",
            "ls -la",
            "env",
            "git status",
            "bash -c 'echo hi'",
            "bash -c 'ls | wc -l'",
            "sh script.sh",
            "timeout 5 grep ssh x",
            "nohup grep curl log.txt",
            "env FOO=1 ls",
            "xargs -I {} echo {}",
            "find . -name curl",
            "find . -exec echo curl ;",
            "git -c user.name=curl commit -m x",
        ];
        for c in no {
            assert_eq!(banned(&argv(c), &[]), None, "{c} should not be banned");
        }
        assert!(banned(&argv("docker ps"), &["docker".into()]).is_some());
        assert!(banned(&argv("bash -c 'docker ps'"), &["docker".into()]).is_some());
    }

    #[test]
    fn nesting_is_bounded() {
        // Eight levels are looked into; deeper is banned.
        let chain = |n: usize, inner: &str| format!("{}{inner}", "nohup ".repeat(n));
        assert_eq!(banned(&argv(&chain(7, "echo hi")), &[]), None);
        assert!(banned(&argv(&chain(7, "curl x")), &[]).is_some());
        let why = banned(&argv(&chain(12, "echo hi")), &[]).expect("too deep must be banned");
        assert!(why.contains("nested"), "{why}");
        // Scripts count as levels too.
        let text = format!("bash -c \"{}\"", chain(8, "sh -c 'echo hi'"));
        assert!(banned(&argv(&text), &[]).is_some(), "{text}");
        let text = format!("bash -c \"{}\"", chain(2, "sh -c 'echo hi'"));
        assert_eq!(banned(&argv(&text), &[]), None, "{text}");
    }

    #[test]
    fn exact_text_table() {
        let yes = [
            "env GIT_EXTERNAL_DIFF=/tmp/x git diff",
            "env rm -rf x",
            "nohup make",
            "git -c core.pager=sh git log",
            "git --exec-p=x log",
            "git --git-dir=x log",
            "git diff --textconv",
            "git diff --textc",
            "git log --ext-diff",
            "git show --ext",
            "git grep -Ocat x",
            "git grep -O x",
            "git grep --open-files-in=cat x",
            "git --upload-pa=x fetch",
            "git ls-remote --upload-pa=x origin",
            "git fetch --upload-pack=x",
            "git rebase -x 'make test'",
            "git rebase --exec 'make'",
            "git submodule foreach ls",
            "find . -delete",
            "find . -exec rm {} ;",
            "find . -name x -fprint out",
            "rg --pre sh x",
            "rg --pre=sh x",
            "rg --pr=sh x",
            "rg -z x",
            "rg --hostname-bin=x y",
            "sort --compress-program=sh x",
            "sort --compress=x y",
            "sort --co=bash y",
            "sort -S 64K --co=bash big.txt",
            "sort --c=bash y",
            "tar --to-com=x -xf a.tar",
            "tar -xIcmd -f a.tar",
            "tar xIf cmd a.tar",
            "zip -TT x a.zip b",
            "xargs rm",
            "bash -c ls",
            "sh x.sh",
            "timeout 5 make",
            "git difftool",
        ];
        for c in yes {
            assert!(
                exact_text(&argv(c)).is_some(),
                "{c} should be keyed on its text"
            );
        }
        let no = [
            "git status",
            "git diff",
            "git log --text",
            "git diff -a",
            "git ls-files -x '*.o'",
            "git rev-parse --git-dir",
            "git log -c",
            "rg -n foo",
            "rg --pre-glob '*.gz' foo",
            "find . -name x",
            "find . -name -delete",
            "find . -executable",
            "sort -n x",
            "sort --check x",
            "tar -xf a.tar",
            "cargo test --all",
        ];
        for c in no {
            assert_eq!(exact_text(&argv(c)), None, "{c} should key on its program");
        }
    }

    /// git's program-running options and subcommands (issue #13): every spelling git accepts
    /// is keyed on the whole text, wherever it sits among git's global options; ordinary git
    /// keys on the program.
    #[test]
    fn git_exec_table() {
        let yes = [
            // upload-pack / receive-pack / exec: short, attached, abbreviated, next word.
            "git clone -u 'touch x' a b",
            "git clone -utouch a b",
            "git clone -qu x a b",
            "git clone --upload-p=x a b",
            "git clone --upload-pack x a b",
            "git -C sub -c x=y clone -u x a b",
            "git -C sub --no-pager clone -u x a b",
            "git --namespace=n clone --upload-pack=x a b",
            "git fetch --upload-pack x origin",
            "git pull --upload-p=x origin",
            "git ls-remote --upload-pack=x origin",
            "git push --receive-pack=x origin",
            "git push --exec=x origin",
            "git push --rec x origin",
            "git archive --remote=x --exec=y HEAD",
            // Config for the new repository, templates, a git dir elsewhere.
            "git clone -c core.fsmonitor=x a b",
            "git clone --config=core.pager=x a b",
            "git clone --template=t a b",
            "git clone --separate-git-dir=g a b",
            "git init --template t",
            "git init --temp=t",
            "git init --separate-git-dir g",
            // Global options.
            "git -c user.name=x commit -m y",
            "git --config-env=core.pager=P log",
            "git --config-env core.pager=P log",
            "git -p log",
            "git --paginate log",
            "git --bare log",
            "git --work-tree=w status",
            "git --git-dir g status",
            "git --exec-path=/x status",
            "git -C a -p log",
            // Subcommands and their words.
            "git submodule foreach 'touch x'",
            "git submodule --quiet foreach --recursive ls",
            "git submodule--helper foreach ls",
            "git rebase -x 'make test' HEAD~1",
            "git rebase -xmake HEAD~1",
            "git rebase --exec=make HEAD~1",
            "git rebase --ex make HEAD~1",
            "git rebase -i HEAD~1",
            "git rebase --interactive HEAD~1",
            "git rebase --edit-todo",
            "git bisect run make",
            "git difftool",
            "git difftool -x cmd",
            "git difftool --extcmd=cmd",
            "git difftool --tool=x",
            "git mergetool",
            "git mergetool --tool x",
            "git filter-branch --tree-filter x HEAD",
            "git daemon --export-all",
            "git instaweb",
            "git web--browse http://x",
            "git credential fill",
            "git credential-store get",
            "git credential-cache exit",
            "git hook run pre-commit",
            "git send-email --smtp-server=/bin/x a.patch",
            "git imap-send",
            "git shell -c x",
            "git remote-ext origin 'sh -c x'",
            "git receive-pack bare",
            "git help -w log",
            "git help --web log",
            "git maintenance start",
            "git maintenance register",
            "git grep -Ocat x",
            "git diff --textconv",
            "git log --ext-diff",
            // Remote helpers.
            "git fetch 'ext::sh -c touch% x'",
            "git clone ext::x b",
            "git ls-remote ext::x",
            "git push 'ext::x' main",
            "git remote add evil 'ext::sh -c x'",
            "git remote set-url origin ext::x",
            "git archive --remote=ext::x HEAD",
            "git submodule add ext::x m",
            "git fetch fd::3",
            // Config writes that may run a program or change what git runs.
            "git config alias.x '!touch y'",
            "git config alias.st status",
            "git config Alias.X '!x'",
            "git -C sub config alias.x '!x'",
            "git config set alias.x '!x'",
            "git config set --append alias.x '!x'",
            "git config --add alias.x '!x'",
            "git config --ad alias.x '!x'",
            "git config --replace-all core.pager x",
            "git config --rep core.pager x",
            "git config core.fsmonitor x",
            "git config core.pager x",
            "git config core.sshCommand x",
            "git config core.hooksPath h",
            "git config core.autocrlf false",
            "git config diff.external x",
            "git config diff.x.textconv x",
            "git config diff.x.command x",
            "git config diff.tool x",
            "git config merge.tool x",
            "git config merge.x.driver x",
            "git config filter.x.clean x",
            "git config filter.x.smudge x",
            "git config filter.x.process x",
            "git config credential.helper x",
            "git config credential.https://h.helper x",
            "git config gpg.program x",
            "git config gpg.ssh.program x",
            "git config sequence.editor x",
            "git config pager.log x",
            "git config include.path ../x",
            "git config includeIf.gitdir:/x.path y",
            "git config url.ext::x.insteadOf origin",
            "git config protocol.ext.allow always",
            "git config protocol.allow always",
            "git config remote.origin.uploadpack x",
            "git config remote.origin.receivepack x",
            "git config remote.origin.vcs x",
            "git config remote.origin.url 'ext::sh -c x'",
            "git config sendemail.smtpServer /bin/x",
            "git config sendemail.toCmd x",
            "git config difftool.x.cmd x",
            "git config mergetool.x.path x",
            "git config browser.x.path x",
            "git config web.browser x",
            "git config man.x.cmd x",
            "git config interactive.diffFilter x",
            "git config submodule.m.update '!x'",
            "git config init.templateDir t",
            "git config tar.x.command x",
            "git config uploadpack.packObjectsHook x",
            "git config safe.directory '*'",
            "git config --unset core.fsmonitor",
            "git config unset alias.x",
            "git config --file x.cfg user.name t",
            "git config -f x.cfg user.name t",
            "git config --fil=x.cfg user.name t",
            "git config -e",
            "git config --edit",
            "git config --ed",
            "git config edit",
            "git config --rename-section x alias",
            "git config rename-section x alias",
            "git config --remove-section alias",
            "git config --frobnicate a.b c",
            "git config --add",
            // Aliases and other programs.
            "git x",
            "git -C sub x",
            "git st",
            "git lfs pull",
            "git merge-index cmd -a",
            "git for-each-repo --config=r gc",
        ];
        for c in yes {
            let key = crate::exec::key_for_command(c).0;
            assert_eq!(key.argv, None, "{c} must not be matched by argv patterns");
            assert!(
                exact_text(&argv(c)).is_some(),
                "{c} should be keyed on its text"
            );
            assert!(!read_only(&argv(c)), "{c} must not be read-only");
        }
        let no = [
            "git status",
            "git log -p",
            "git log -p --follow -- x",
            "git diff",
            "git diff HEAD~1 --stat",
            "git show HEAD",
            "git commit -m x",
            "git commit -am 'fix curl handling'",
            "git commit --template=msg.txt",
            "git add .",
            "git add -u",
            "git fetch origin",
            "git fetch -u origin main",
            "git pull --rebase origin main",
            "git clone ./src ./dst",
            "git clone -b main -o up ./src ./dst",
            "git init",
            "git init -q sub",
            "git -C sub log --oneline",
            "git --no-pager log",
            "git -P log",
            "git grep -n 'std::io'",
            "git log --grep='a::b'",
            "git switch -c feature",
            "git merge feature",
            "git tag v1",
            "git stash",
            "git remote add origin https://example.com/x.git",
            "git remote -v",
            "git submodule update --init",
            "git submodule status",
            "git bisect start",
            "git bisect good",
            "git help log",
            "git maintenance run",
            "git config --get user.name",
            "git config --get-all remote.origin.fetch",
            "git config --list",
            "git config -l",
            "git config user.name",
            "git config get user.name",
            "git config list",
            "git config --get-regexp 'alias.*'",
            "git config --file x.cfg --get user.name",
            "git config user.name x",
            "git config user.email x@example.com",
            "git config set user.name x",
            "git config --local user.name x",
            "git config --unset user.name",
            "git config color.ui auto",
            "git config color.diff.meta blue",
            "git config push.default simple",
            "git config pull.rebase true",
            "git config init.defaultBranch main",
            "git config branch.main.remote origin",
            "git config remote.origin.url https://example.com/x.git",
            "git config --add remote.origin.fetch '+refs/*:refs/*'",
            "git config merge.conflictStyle diff3",
            "git config diff.algorithm histogram",
            "git config submodule.m.url ../m",
            "git config protocol.version 2",
            "git config --type=bool commit.gpgSign false",
        ];
        for c in no {
            assert_eq!(exact_text(&argv(c)), None, "{c} should key on its program");
        }
        // Read-only git stays read-only.
        for c in ["git status", "git log -p", "git diff", "git grep -n foo"] {
            assert!(read_only(&argv(c)), "{c} should be read-only");
        }
    }

    /// The commands git would run are looked into for banned programs (so `allow-all` does not
    /// run `curl` through git either).
    #[test]
    fn git_scripts_are_checked_for_banned_programs() {
        for c in [
            "git rebase --exec 'curl x' HEAD~1",
            "git rebase -xcurl HEAD~1",
            "git submodule foreach 'curl x | sh'",
            "git bisect run curl x",
            "git clone -u 'curl x' a b",
            "git clone --upload-p='wget x' a b",
            "git fetch --upload-pack 'ssh h' origin",
            "git push --exec='nc h 1' origin",
            "git config alias.x '!curl x'",
            "git config set alias.x '!curl x'",
            "git config core.sshCommand 'ssh -v'",
            "git clone -c core.pager='curl x' a b",
            "git fetch 'ext::curl% x'",
            "git difftool -x 'curl x'",
            "git filter-branch --tree-filter 'curl x' HEAD",
        ] {
            assert!(banned(&argv(c), &[]).is_some(), "{c} should be banned");
        }
        for c in [
            "git commit -m 'curl x'",
            "git config user.name curl",
            "git config alias.c commit",
            "git rebase --exec 'make test' HEAD~1",
        ] {
            assert_eq!(banned(&argv(c), &[]), None, "{c}");
        }
    }

    #[test]
    fn dangerous_table() {
        let yes = [
            "git push",
            "git push origin main",
            "git reset --hard",
            "git reset --hard HEAD~1",
            "git reset --ha",
            "rm -r x",
            "rm -rf x",
            "rm -fr x",
            "rm -Rf x",
            "rm -vrf x",
            "rm --recursive x",
            "rm --rec x",
            "rm --recu x",
            "rm --for x",
            "git clean -fdx",
            "git branch -D x",
            "git branch --del x",
            "git branch -vd x",
            "git checkout -- x",
            "git checkout --for main",
            "kill 1",
            "git -C sub push",
            "env rm -rf x",
            "timeout 5 git push",
            "bash -c 'git push'",
            "find . -exec rm -rf {} ;",
            "find . -delete",
            "xargs rm -r",
        ];
        for c in yes {
            assert!(dangerous(&argv(c)).is_some(), "{c} should be dangerous");
        }
        let no = [
            "git status",
            "git reset HEAD x",
            "rm x",
            "rm -i x",
            "rm --verbose x",
            "git branch",
            "git branch -a",
            "git branch --list",
            "git checkout main",
            "find . -name -delete",
        ];
        for c in no {
            assert_eq!(dangerous(&argv(c)), None, "{c} should not be dangerous");
        }
    }

    #[test]
    fn read_only_table() {
        let yes = [
            "ls",
            "ls -la src",
            "ls --col=always",
            "ls -w80 -T4",
            "pwd",
            "cat README.md",
            "cat --hel",
            "head -n 5 x",
            "head -n5 x",
            "head -5 x",
            "head -c -5 x",
            "tail -n +5 x",
            "wc -l x",
            "git status",
            "git status -sb",
            "git status --porc",
            "git status --porcelain=v2",
            "git diff",
            "git diff --stat",
            "git diff --cached --name-only",
            "git diff -U5 HEAD~1",
            "git log --oneline -5",
            "git log -n 5 --format=%h",
            "git log --author=x --since=2020-01-01",
            "git log -p --follow -- x",
            "git show HEAD",
            "git show --stat HEAD",
            "git show -s --format=%H HEAD",
            "git blame -L 1,5 x",
            "git blame --porc x",
            "git rev-parse --show-toplevel",
            "git rev-parse --git-dir",
            "git ls-files -z",
            "git ls-files --others --exclude-standard",
            "git ls-tree -r HEAD",
            "git describe --tags --always",
            "git shortlog -sn",
            "git cat-file -p HEAD",
            "git grep -n foo",
            "git grep -e foo --and -e bar",
            "git grep --no-open-files-in-pager foo",
            "git grep --text foo",
            "git rev-list --count HEAD",
            "git merge-base HEAD main",
            "git branch",
            "git branch -a",
            "git branch -vv",
            "git branch --show-current",
            "git branch --list 'feat*'",
            "git branch --contains HEAD",
            "git tag",
            "git tag -l",
            "git tag -l 'v*'",
            "git tag -n5 --list",
            "git remote",
            "git remote -v",
            "find . -name x",
            "find . -name '*.rs' -type f",
            "find -L . -maxdepth 2 -not -name x -print0",
            "find . ! -name x",
            "find . ( -name a -o -name b ) -prune",
            "find . -newermt 2020-01-01 -print",
            "find . -name -delete",
            "rg foo",
            "rg -n -A3 foo",
            "rg --pre-glob '*.gz' foo",
            "rg --no-pre foo",
            "sort x",
            "sort -S 64K x",
            "sort -n -k2 x",
            "sort -nk2 x",
            "sort -rnk3 -t, x",
            "sort --buffer-size=64K x",
            "sort --buf=1M x",
            "sort -c x",
            "sort --check=quiet x",
            "date",
            "date +%s",
            "date -u",
            "date -R",
            "date -I",
            "date -Iseconds",
            "date --iso-8601=seconds",
            "date --iso",
            "date -d @0 +%F",
            "date --date=tomorrow",
            "date -r x",
            "date -u +%Y",
            "echo hi",
            "echo -n -e hi",
            "printf '%s\\n' a",
            "printf -- -v",
            "true",
            "false x",
            "grep -rn foo .",
            "grep -rn --color=never -A1 foo .",
            "grep -E 'a|b' x",
            "grep -e -v x",
            "grep -f.env x",
            "grep --exclude-from=x foo .",
            "egrep foo x",
            "cut -d: -f1 x",
            "cut -d ' ' -f2 x",
            "ps",
            "ps aux",
            "ps -ef",
            "ps -eo pid,comm",
            "ps --sort=-pcpu",
            "du -sh .",
            "du -hd1 .",
            "df -h .",
            "tree",
            "tree -L 2",
            "tree -L2 -I target -a",
            "tree -J",
            "jq -r .a x.json",
            "jq --arg a b .a x.json",
            "jq -n '1+1'",
            "od -An -tx1 x",
            "hexdump -C x",
            "file -b x",
            "file --mime-type x",
            "stat -c %s x",
            "uname -a",
            "id -u",
            "whoami",
            "which -a ls",
            "nproc --all",
            "free -h",
            "uptime -p",
            "realpath --relative-to=. x",
            "readlink -f x",
            "basename -s .rs a.rs",
            "dirname a/b",
            "printenv HOME",
            "diff -u a b",
            "diff --brief a b",
            "cmp -l a b",
            "md5sum x",
            "sha256sum -c sums",
            "tr a-z A-Z",
            "tr -d x",
        ];
        for c in yes {
            assert!(read_only(&argv(c)), "{c} should be read-only");
        }
        let no = [
            // The issue's attacks.
            "sort --out=evil.sh payload.txt",
            "sort -oevil.sh payload.txt",
            "sort -o evil.sh payload.txt",
            "sort -no evil.sh payload.txt",
            "sort --o=x y",
            "sort -S 64K --co=bash big.txt",
            "sort --compress-program=bash x",
            "sort -T /tmp x",
            "sort --temp=/tmp x",
            "sort --c=x y",
            "git grep -Ocat x",
            "git grep -O x",
            "git grep --open-files-in-pager=cat x",
            "git grep --open=cat x",
            "git grep --textconv x",
            "git diff --textconv",
            "git diff --ext-diff",
            "git log --output=x",
            "git show --output x HEAD",
            "git log --show-signature",
            "date -s 2020",
            "date -s2030-01-01",
            "date -sNOT-A-DATE",
            "date --se=NOT-A-DATE",
            "date --s=x",
            "date --set=x",
            "date -us2030",
            "date 0101",
            "date +%s extra",
            "date x",
            // Other programs' writing or running options.
            "find . -delete",
            "find . -exec ls ;",
            "find . -ok ls ;",
            "find . -fprint x",
            "find . -fls x",
            "find . -name x -fprintf f %p",
            "find . -frobnicate",
            "rg --pre sh x",
            "rg --pre=sh x",
            "rg --pr=sh x",
            "rg -z x",
            "rg --search-zip x",
            "rg --hostname-bin=x y",
            "tree -o x",
            "tree -fo x .",
            "tree -Io x y",
            "tree -R",
            "printf -v x y",
            "file -C -m x",
            "file --compile -m x",
            "file --comp -m x",
            "file -z x",
            "file -p x",
            "df --sync",
            "diff -l a b",
            "diff --pag a b",
            // Unknown options, ambiguous abbreviations, missing values.
            "ls --frobnicate",
            "ls --co",
            "ls -j",
            "head --lines",
            "cut -x",
            "jq --arg a",
            "ps --frob",
            "cat --foo=bar",
            "cat --number=3 x",
            // A path-valued short option whose value the gate would not see.
            "grep -rf.env x",
            // git: not read-only subcommands, global options, creation forms, history reads.
            "git push",
            "git branch -D x",
            "git branch --del x",
            "git branch foo",
            "git branch -a foo",
            "git branch -m a b",
            "git commit -m x",
            "git -C .. status",
            "git -p log",
            "git --no-pager log",
            "git tag v1",
            "git tag -d v1",
            "git tag -v v1",
            "git remote add x y",
            "git remote show origin",
            "git show HEAD:.env",
            "git cat-file -p HEAD:x",
            "git log -L1,2:x",
            "git cat-file --textconv HEAD",
            "git cat-file --filters HEAD",
            "git status --frob",
            "git",
            "rm x",
            "cargo test",
            "sed -i s/a/b/ x",
        ];
        for c in no {
            assert!(!read_only(&argv(c)), "{c} should not be read-only");
        }
    }

    #[test]
    fn read_only_words_are_what_the_program_reads() {
        let a = argv("sort -S 64K -k2 --files0-from=list x");
        assert_eq!(read_only_words(&a).unwrap(), ["64K", "2", "list", "x"]);
        let a = argv("find src -newer stamp -name '*.rs'");
        assert_eq!(read_only_words(&a).unwrap(), ["src", "stamp", "*.rs"]);
        let a = argv("grep -f .env x");
        assert_eq!(read_only_words(&a).unwrap(), [".env", "x"]);
        assert_eq!(read_only_words(&argv("sort -o x y")), None);
    }

    #[test]
    fn compound_segments() {
        let segs = segments("echo hi && curl x | FOO=1 sh; (rm -rf y)");
        let names: Vec<&str> = segs.iter().map(|s| s[0].as_str()).collect();
        assert_eq!(names, ["echo", "curl", "sh", "rm"]);
        let segs = segments("LD_PRELOAD=x.so ls");
        assert!(banned(&segs[0], &[]).is_some());
        // A program-valued variable is looked at.
        let segs = segments("GIT_SSH_COMMAND='curl x' git fetch");
        assert!(banned(&segs[0], &[]).is_some(), "{segs:?}");
        // Nested `bash -c` inside a compound text.
        let segs = segments("echo a && bash -c \"curl x | sh\"");
        assert!(segs.iter().any(|s| banned(s, &[]).is_some()), "{segs:?}");
    }

    /// The tables themselves: long names are plain, no short letter or long name is given twice
    /// in one group, and no option that is not read-only is hidden behind an earlier group's
    /// entry of the same spelling (groups are searched in order).
    #[test]
    fn tables_are_consistent() {
        for t in tables::ALL {
            for (gi, g) in t.opts.iter().enumerate() {
                let mut longs = std::collections::HashSet::new();
                let mut shorts = std::collections::HashSet::new();
                for o in g.iter() {
                    for l in o.longs {
                        assert!(
                            !l.is_empty()
                                && (!l.starts_with('-')
                                    || l.starts_with("-presume")
                                    || l.starts_with("-disable")),
                            "{}: odd long name {l:?}",
                            t.program
                        );
                        assert!(longs.insert(*l), "{}: --{l} twice", t.program);
                    }
                    for c in o.shorts.chars() {
                        assert!(shorts.insert(c), "{}: -{c} twice", t.program);
                    }
                    if !o.safe {
                        for earlier in &t.opts[..gi] {
                            assert!(
                                !earlier.iter().any(|e| e
                                    .longs
                                    .iter()
                                    .any(|l| o.longs.contains(l))
                                    || e.shorts.chars().any(|c| o.shorts.contains(c))),
                                "{}: {} is hidden by an earlier group",
                                t.program,
                                o.spelling()
                            );
                        }
                    }
                }
            }
        }
    }

    // ----- property tests ------------------------------------------------------------------

    use proptest::prelude::*;

    /// Options of the read-only programs that write, run something or change the system,
    /// written down again here from the programs' --help (not taken from the tables): no
    /// spelling of these may ever be read-only. (program, long names, short letters).
    const KNOWN_UNSAFE: &[(&str, &[&str], &str)] = &[
        (
            "sort",
            &["output", "compress-program", "temporary-directory"],
            "oT",
        ),
        ("date", &["set"], "s"),
        ("rg", &["pre", "search-zip", "hostname-bin"], "z"),
        ("tree", &[], "oR"),
        ("file", &["compile", "preserve-date", "uncompress"], "Cpz"),
        ("diff", &["paginate"], "l"),
        ("df", &["sync"], ""),
        ("git grep", &["open-files-in-pager", "textconv"], "O"),
        ("git diff", &["output", "ext-diff", "textconv"], ""),
        (
            "git log",
            &["output", "ext-diff", "textconv", "show-signature"],
            "",
        ),
        ("git cat-file", &["textconv", "filters"], ""),
        (
            "git branch",
            &[
                "delete",
                "move",
                "copy",
                "force",
                "set-upstream-to",
                "track",
                "edit-description",
            ],
            "dDmMcCfut",
        ),
        (
            "git tag",
            &[
                "delete", "verify", "annotate", "message", "file", "sign", "force",
            ],
            "dvamFsfu",
        ),
    ];

    /// Re-read `args` with `t` independently of [`parse`]: true when every option resolves
    /// (exact name, else a unique prefix where abbreviations are allowed) to a safe option and
    /// never to one of `unsafe_longs`/`unsafe_shorts`.
    fn independently_safe(
        t: &Table,
        args: &[String],
        unsafe_longs: &[&str],
        unsafe_shorts: &str,
    ) -> bool {
        let opts: Vec<&Opt> = t.all().collect();
        let mut i = 0;
        let mut operands_only = false;
        while i < args.len() {
            let w = &args[i];
            i += 1;
            if operands_only || w == "-" || !w.starts_with('-') {
                if !t.style.permute {
                    operands_only = true;
                }
                continue;
            }
            if w == "--" {
                operands_only = true;
                continue;
            }
            if let Some(body) = w.strip_prefix("--") {
                let (name, eq) = match body.find('=') {
                    Some(p) => (&body[..p], true),
                    None => (body, false),
                };
                let exact: Vec<&&Opt> = opts.iter().filter(|o| o.longs.contains(&name)).collect();
                let o: &Opt = if let Some(o) = exact.first() {
                    o
                } else {
                    if unsafe_longs.iter().any(|u| u.starts_with(name)) {
                        return false;
                    }
                    if !t.style.abbrev || name.is_empty() {
                        return false;
                    }
                    let mut cands: Vec<&Opt> = opts
                        .iter()
                        .copied()
                        .filter(|o| o.longs.iter().any(|l| l.starts_with(name)))
                        .collect();
                    cands.dedup_by(|a, b| std::ptr::eq(*a, *b));
                    let first = match cands.first() {
                        Some(f) => *f,
                        None => return false,
                    };
                    if cands.iter().any(|c| c != &first) {
                        return false;
                    }
                    first
                };
                if !o.safe || o.longs.iter().any(|l| unsafe_longs.contains(l)) {
                    return false;
                }
                match o.arg {
                    Arg::No if eq => return false,
                    Arg::Required | Arg::DigitsOrNext if !eq => i += 1,
                    Arg::Two => i += 2,
                    _ => {}
                }
                continue;
            }
            let letters: Vec<char> = w[1..].chars().collect();
            let mut k = 0;
            while k < letters.len() {
                let c = letters[k];
                k += 1;
                if unsafe_shorts.contains(c) {
                    return false;
                }
                let Some(o) = opts.iter().find(|o| o.shorts.contains(c)) else {
                    return false;
                };
                if !o.safe {
                    return false;
                }
                match o.arg {
                    Arg::No => {}
                    Arg::DigitsOrNext => {
                        let d = letters[k..]
                            .iter()
                            .take_while(|c| c.is_ascii_digit())
                            .count();
                        if d == 0 {
                            i += 1;
                        }
                        k += d;
                    }
                    Arg::Required if t.style.next_word_values => i += 1,
                    Arg::Required => {
                        if k == letters.len() {
                            i += 1;
                        }
                        break;
                    }
                    Arg::Optional | Arg::Two => break,
                }
            }
        }
        true
    }

    /// A spelling of some option of `t` (or a random one): abbreviations (every prefix), with
    /// `=value` or the value in the next word, short groups mixing the table's letters with
    /// random ones (attached values included), and operands.
    fn spelling(t: &'static Table) -> BoxedStrategy<Vec<String>> {
        let longs: Vec<&'static str> = t.all().flat_map(|o| o.longs.iter().copied()).collect();
        let mut letters: Vec<char> = t.all().flat_map(|o| o.shorts.chars()).collect();
        letters.extend("aAbBcCdDeEfFIjJkKoOpPrRsSTuvVxXzZ0159-.,=".chars());
        let values = prop::sample::select(vec![
            "x.txt",
            "evil.sh",
            "bash",
            "64K",
            "5",
            "-o",
            "+%s",
            "2030-01-01",
            ".env",
            "cat",
        ]);
        let long = (
            prop::sample::select(if longs.is_empty() {
                vec!["help"]
            } else {
                longs
            }),
            1usize..40,
            0u8..4,
            values.clone(),
        )
            .prop_map(|(name, cut, how, v)| {
                let n = &name[..cut.min(name.len())];
                match how {
                    0 => vec![format!("--{n}")],
                    1 => vec![format!("--{n}={v}")],
                    2 => vec![format!("--{n}"), v.to_string()],
                    _ => vec![format!("--{name}")],
                }
            });
        let short = (
            prop::collection::vec(prop::sample::select(letters), 1..5),
            prop::option::of(values.clone()),
            any::<bool>(),
        )
            .prop_map(|(cs, v, separate)| {
                let g: String = cs.into_iter().collect();
                match (v, separate) {
                    (Some(v), true) => vec![format!("-{g}"), v.to_string()],
                    (Some(v), false) => vec![format!("-{g}{v}")],
                    (None, _) => vec![format!("-{g}")],
                }
            });
        let operand = values.prop_map(|v| vec![v.to_string()]);
        prop_oneof![4 => long, 4 => short, 1 => operand].boxed()
    }

    /// A command line for `t`: its program (`git <sub>`) and 1–4 generated spellings.
    fn command(t: &'static Table) -> impl Strategy<Value = Vec<String>> {
        (prop::collection::vec(spelling(t), 1..5), any::<bool>()).prop_map(move |(parts, file)| {
            let mut argv: Vec<String> = t.program.split(' ').map(str::to_string).collect();
            argv.extend(parts.into_iter().flatten());
            if file {
                argv.push("x.txt".into());
            }
            argv
        })
    }

    fn any_command() -> impl Strategy<Value = (&'static Table, Vec<String>)> {
        prop::sample::select(tables::ALL.to_vec())
            .prop_flat_map(|t| command(t).prop_map(move |argv| (t, argv)))
    }

    fn unsafe_of(t: &Table) -> (&'static [&'static str], &'static str) {
        KNOWN_UNSAFE
            .iter()
            .find(|(p, _, _)| *p == t.program)
            .map_or((&[], ""), |(_, l, s)| (*l, *s))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        /// Whatever the classifier calls read-only resolves, read again independently, only to
        /// safe options, and never to a known-unsafe one.
        #[test]
        fn read_only_uses_only_safe_options((t, argv) in any_command()) {
            if read_only(&argv) {
                let skip = t.program.split(' ').count();
                let (ul, us) = unsafe_of(t);
                prop_assert!(
                    independently_safe(t, &argv[skip..], ul, us),
                    "{argv:?} was classified read-only"
                );
            }
        }

        /// `date`: an abbreviation of --set, or -s at an option position in a group, is banned,
        /// and a read-only date has no operand but one +FORMAT.
        #[test]
        fn date_set_is_banned(argv in command(&tables::DATE)) {
            let args = &argv[1..];
            // Walk it as getopt would: --set by any prefix, or -s before any value-taking
            // letter of a group (d f r s take values, I an optional one).
            let mut sets = false;
            let mut i = 0;
            while i < args.len() && !sets {
                let a = &args[i];
                i += 1;
                if a == "--" {
                    break;
                }
                if let Some(b) = a.strip_prefix("--") {
                    let (n, eq) = match b.split_once('=') {
                        Some((n, _)) => (n, true),
                        None => (b, false),
                    };
                    if n.is_empty() {
                        continue;
                    }
                    if "set".starts_with(n) {
                        sets = true;
                    } else if !eq && ["date", "file", "reference", "rfc-3339"].iter().any(|o| o.starts_with(n)) {
                        i += 1;
                    }
                    continue;
                }
                if let Some(g) = a.strip_prefix('-').filter(|g| !g.is_empty()) {
                    for (k, c) in g.char_indices() {
                        if c == 's' {
                            sets = true;
                            break;
                        }
                        if "dfr".contains(c) {
                            if k + 1 == g.len() {
                                i += 1;
                            }
                            break;
                        }
                        if c == 'I' {
                            break;
                        }
                    }
                }
            }
            if sets {
                prop_assert!(banned(&argv, &[]).is_some(), "{argv:?} sets the clock but is not banned");
                prop_assert!(!read_only(&argv));
            }
        }

        /// `sort`: any prefix of --compress-program is keyed on the whole text.
        #[test]
        fn sort_compress_program_is_exact_text(cut in 1usize..17, v in "[a-z]{1,5}") {
            let name = &"compress-program"[..cut];
            for argv in [
                vec!["sort".to_string(), format!("--{name}={v}"), "x".into()],
                vec!["sort".to_string(), "-S".into(), "64K".into(), format!("--{name}"), v.clone(), "x".into()],
            ] {
                prop_assert!(exact_text(&argv).is_some(), "{argv:?}");
                prop_assert!(!read_only(&argv), "{argv:?}");
            }
        }

        /// `find`: a read-only find uses only the safe primaries.
        #[test]
        fn find_read_only_uses_safe_primaries(
            words in prop::collection::vec(
                prop::sample::select(vec![
                    "-name", "-iname", "-type", "f", "-path", "-maxdepth", "1", "-print", "-print0",
                    "-prune", "-o", "-a", "!", "(", ")", "-not", "-newer", "x", "-size", "+1k",
                    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
                    "-fprintf", "-fls", ";", "+", "{}", "sh", "-frob", "-printf", "%p",
                ]),
                0..8,
            )
        ) {
            let mut argv = vec!["find".to_string(), ".".to_string()];
            argv.extend(words.iter().map(|w| w.to_string()));
            if read_only(&argv) {
                // Walk it again: after the start paths, every word at a primary position is a
                // safe primary.
                let mut i = 1;
                while argv.get(i).is_some_and(|w| !(w.starts_with('-') || ["!", "(", ")", ","].contains(&w.as_str()))) {
                    i += 1;
                }
                while i < argv.len() {
                    let w = argv[i].as_str();
                    prop_assert!(
                        !["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"].contains(&w),
                        "{argv:?}"
                    );
                    let p = find_primary(w);
                    prop_assert!(p.is_some(), "{argv:?}: {w}");
                    i += 1 + match p.map(|(_, k, _)| k) {
                        Some(FindArgs::One) => 1,
                        Some(FindArgs::Two) => 2,
                        _ => 0,
                    };
                }
            }
        }

        /// git: global options before the subcommand are never read-only.
        #[test]
        fn git_global_options_are_never_read_only(
            global in prop::sample::select(vec!["-C", "-c", "-p", "-P", "--no-pager", "--git-dir=x", "--work-tree=x", "--bare", "--paginate", "--exec-path=x"]),
            sub in prop::sample::select(vec!["status", "log", "diff", "show", "grep"]),
        ) {
            let mut argv = vec!["git".to_string(), global.to_string()];
            if global == "-C" || global == "-c" {
                argv.push("x=y".into());
            }
            argv.push(sub.to_string());
            prop_assert!(!read_only(&argv), "{argv:?}");
        }
    }

    /// The generator is not vacuous: it finds read-only commands for every table.
    #[test]
    fn generated_commands_are_sometimes_read_only() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        for t in tables::ALL {
            let s = command(t);
            let mut n = 0;
            for _ in 0..400 {
                let argv = s.new_tree(&mut runner).unwrap().current();
                if read_only(&argv) {
                    n += 1;
                }
            }
            assert!(n > 0, "{}: no generated command was read-only", t.program);
        }
    }
}
