//! git: the options, subcommands and URLs that make git run a program other than its own
//! (keyed on the whole text), the commands git ships, and the script texts a git command
//! runs besides git.

use super::argv::{args_hit, subcommand_index};
use super::git_config::{git_config, git_config_script, git_config_write, remote_helper_url};
use crate::exec::options::loose_hit;

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

/// Why a `git` command runs (or makes git later run) a program other than git's own, if it
/// does: a global option from [`GIT_GLOBAL_EXACT`], an option from [`GIT_EXEC_ANYWHERE`], a
/// subcommand from [`GIT_EXEC_COMMANDS`], its options from [`GIT_EXEC_ARGS`], a
/// `<transport>::` URL, or a config write [`git_config`] does not know to be harmless.
pub(super) fn git_exact(argv: &[String]) -> Option<String> {
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
pub(super) fn git_scripts(argv: &[String]) -> Vec<String> {
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
