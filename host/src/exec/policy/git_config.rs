//! git configuration: which `git -c`/`git config` keys name a program git runs, what a
//! `git config` command writes, and the allowlist of keys whose writes cannot make git run
//! a program.

use crate::exec::option_tables as tables;
use crate::exec::options::{has, parse, Item};

/// The programs `git -c key=value` configures: values that git runs.
pub(super) fn git_config_script(kv: &str) -> Option<&str> {
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

/// Whether a word (or an option's `=value`) is a `<transport>::<address>` URL.
pub(super) fn remote_helper_url(word: &str) -> bool {
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
pub(super) struct ConfigWrite<'a> {
    pub(super) keys: Vec<&'a str>,
    pub(super) value: Option<&'a str>,
}

/// What `git config <args>` writes, read as git 2.47 reads it (legacy `--add`/`--unset`/…
/// actions and the `set`/`unset`/`rename-section`/`remove-section`/`edit` subcommands):
/// `Ok(None)` for a read, `Err(why)` for what is never keyed on the program name.
pub(super) fn git_config_write(args: &[String]) -> Result<Option<ConfigWrite<'_>>, String> {
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
pub(super) fn git_config(args: &[String]) -> Option<String> {
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
