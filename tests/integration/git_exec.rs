//! Attacks on untrusted workspaces (issue #13): git_exec.
//!
//! A session grant for `shell:git **` lets the agent run git without a prompt, but git has many
//! ways to run another program: `clone -u <cmd>`, `submodule foreach <cmd>`, `rebase --exec
//! <cmd>`, `-c core.pager=<cmd>`, a config write of `alias.x = !<cmd>` or `core.fsmonitor`, an
//! `ext::` transport. Each of those is keyed on its exact text, so the grant does not cover it:
//! with no one to ask it is denied and never runs. Ordinary git under the same grant still runs.

use crate::common::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use toolgate::{Gate, Observation, Status};

/// Run git on the host (outside toolgate) in `dir`, with no user or system configuration.
fn host_git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository at `rel` with two commits and its user set in its own config (so a sandboxed
/// `git commit` has an identity without `-c`).
fn repo(ws: &Ws, rel: &str) {
    ws.mkdir(rel);
    let dir = ws.path(rel);
    host_git(&dir, &["init", "-q"]);
    host_git(&dir, &["config", "user.name", "t"]);
    host_git(&dir, &["config", "user.email", "t@example.com"]);
    ws.write(&format!("{rel}/a.txt"), "one\n");
    host_git(&dir, &["add", "a.txt"]);
    host_git(&dir, &["commit", "-q", "-m", "one"]);
    ws.write(&format!("{rel}/a.txt"), "one\ntwo\n");
    host_git(&dir, &["commit", "-q", "-am", "two"]);
}

/// The workspace: a repository at its root with a submodule `mod`, a source repository `src`
/// to clone from, and a nested repository `sub`.
fn workspace() -> Ws {
    let ws = Ws::new();
    repo(&ws, ".");
    repo(&ws, "src");
    repo(&ws, "sub");
    host_git(&ws.root(), &["submodule", "add", "-q", "./src", "mod"]);
    host_git(&ws.root(), &["commit", "-q", "-m", "submodule"]);
    ws
}

/// Every file named `pwned` under `dir`.
fn pwned(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if e.file_name() == "pwned" {
            found.push(p.clone());
        }
        if e.file_type().unwrap().is_dir() {
            found.extend(pwned(&p));
        }
    }
    found
}

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(
        SESSION,
        "shell",
        json!({ "command": command, "timeout_ms": 20_000 }),
    )
    .await
}

/// Under a session grant for `shell:git **` and no one to ask, `command` is not run: it is
/// refused as needing approval, and nothing it would have run left a `pwned` file.
async fn asks_under_git_grant(command: &str) {
    let ws = workspace();
    let g = gate_granting(&ws, &["shell:git **"]).await;
    let o = sh(&g, command).await;
    assert!(
        matches!(o.status, Status::Denied | Status::NeedsApproval),
        "{command}: {o:#?}"
    );
    assert_eq!(
        pwned(&ws.root()),
        Vec::<PathBuf>::new(),
        "{command}: {o:#?}"
    );
}

#[tokio::test]
async fn clone_upload_pack_short() {
    asks_under_git_grant("git clone -u 'touch pwned' ./src ./dst").await;
}

#[tokio::test]
async fn clone_upload_pack_attached_short() {
    asks_under_git_grant("git clone '-utouch pwned' ./src ./dst").await;
}

#[tokio::test]
async fn clone_upload_pack_abbreviated() {
    asks_under_git_grant("git clone --upload-p='touch pwned' ./src ./dst").await;
}

#[tokio::test]
async fn clone_upload_pack_next_word() {
    asks_under_git_grant("git clone --upload-pack 'touch pwned' ./src ./dst").await;
}

#[tokio::test]
async fn clone_upload_pack_after_global_options() {
    asks_under_git_grant("git -C sub --no-pager clone -qu 'touch pwned' ../src ../dst").await;
}

#[tokio::test]
async fn clone_config_sets_a_program() {
    asks_under_git_grant("git clone -c core.fsmonitor='touch pwned' ./src ./dst").await;
}

#[tokio::test]
async fn clone_template_plants_hooks() {
    asks_under_git_grant("git clone --template=sub ./src ./dst").await;
}

#[tokio::test]
async fn fetch_upload_pack() {
    asks_under_git_grant("git fetch --upload-pa='touch pwned' ./src").await;
}

#[tokio::test]
async fn ls_remote_upload_pack() {
    asks_under_git_grant("git ls-remote --upload-pack='touch pwned' ./src").await;
}

#[tokio::test]
async fn fetch_ext_transport() {
    asks_under_git_grant("git fetch 'ext::sh -c touch% pwned'").await;
}

#[tokio::test]
async fn remote_add_ext_transport() {
    asks_under_git_grant("git remote add evil 'ext::sh -c touch% pwned'").await;
}

#[tokio::test]
async fn submodule_foreach() {
    asks_under_git_grant("git submodule foreach 'touch pwned'").await;
}

#[tokio::test]
async fn submodule_quiet_foreach() {
    asks_under_git_grant("git submodule --quiet foreach 'touch pwned'").await;
}

#[tokio::test]
async fn config_alias_with_bang() {
    asks_under_git_grant("git -C sub config alias.x '!touch pwned'").await;
}

#[tokio::test]
async fn config_alias_new_style_set() {
    asks_under_git_grant("git config set alias.x '!touch pwned'").await;
}

#[tokio::test]
async fn config_fsmonitor() {
    asks_under_git_grant("git config core.fsmonitor 'touch pwned'").await;
}

#[tokio::test]
async fn config_add_ssh_command() {
    asks_under_git_grant("git config --ad core.sshCommand 'touch pwned'").await;
}

#[tokio::test]
async fn config_filter_driver() {
    asks_under_git_grant("git config filter.x.smudge 'touch pwned'").await;
}

#[tokio::test]
async fn config_include_path() {
    asks_under_git_grant("git config include.path ../evil.cfg").await;
}

#[tokio::test]
async fn config_file_write() {
    asks_under_git_grant("git config --file sub/x.cfg user.name t").await;
}

#[tokio::test]
async fn config_edit_runs_an_editor() {
    asks_under_git_grant("git config -e").await;
}

#[tokio::test]
async fn top_level_config_pager() {
    asks_under_git_grant("git -c core.pager='touch pwned' log").await;
}

#[tokio::test]
async fn top_level_paginate() {
    asks_under_git_grant("git -p log").await;
}

#[tokio::test]
async fn rebase_exec() {
    asks_under_git_grant("git rebase --exec 'touch pwned' HEAD~1").await;
}

#[tokio::test]
async fn rebase_exec_short_attached() {
    asks_under_git_grant("git rebase '-xtouch pwned' HEAD~1").await;
}

#[tokio::test]
async fn bisect_run() {
    asks_under_git_grant("git bisect run touch pwned").await;
}

#[tokio::test]
async fn difftool_extcmd() {
    asks_under_git_grant("git difftool -y -x 'touch pwned' HEAD~1").await;
}

#[tokio::test]
async fn hook_run() {
    asks_under_git_grant("git hook run pre-commit").await;
}

#[tokio::test]
async fn filter_branch() {
    asks_under_git_grant("git filter-branch -f --tree-filter 'touch pwned' HEAD").await;
}

#[tokio::test]
async fn archive_remote_exec() {
    asks_under_git_grant("git archive --remote=./src --exec='touch pwned' HEAD").await;
}

#[tokio::test]
async fn send_email_smtp_server_program() {
    asks_under_git_grant("git send-email --smtp-server='touch pwned' HEAD~1").await;
}

/// An alias defined before (here by the host, as a user or an earlier approved command would)
/// runs whatever it says: a subcommand git does not ship is never covered by the grant.
#[tokio::test]
async fn running_an_alias_asks() {
    let ws = workspace();
    host_git(&ws.path("sub"), &["config", "alias.x", "!touch pwned"]);
    let g = gate_granting(&ws, &["shell:git **"]).await;
    let o = sh(&g, "git -C sub x").await;
    assert!(
        matches!(o.status, Status::Denied | Status::NeedsApproval),
        "{o:#?}"
    );
    assert_eq!(pwned(&ws.root()), Vec::<PathBuf>::new(), "{o:#?}");
}

/// `GIT_*` variables that name programs, set before git: the command is compound (keyed on its
/// whole text), so the program grant does not cover it either.
#[tokio::test]
async fn git_env_prefixes_are_compound() {
    for command in [
        "GIT_SSH_COMMAND='touch pwned' git fetch ./src",
        "GIT_EXTERNAL_DIFF='touch pwned' git diff HEAD~1",
        "GIT_PAGER='touch pwned' git log",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch pwned' git status",
        "env GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='touch pwned'\" git status",
    ] {
        asks_under_git_grant(command).await;
    }
}

/// The control group: ordinary git under the same grant runs without a prompt.
#[tokio::test]
async fn ordinary_git_still_runs_under_the_grant() {
    let ws = workspace();
    let g = gate_granting(&ws, &["shell:git **"]).await;
    for command in [
        "git status",
        "git log -p",
        "git diff HEAD~1",
        "git config --get user.name",
        "git -C sub log --oneline",
        "git add a.txt",
    ] {
        let o = sh(&g, command).await;
        assert_eq!(o.status, Status::Ok, "{command}: {o:#?}");
    }
    ws.write("b.txt", "b\n");
    let o = sh(&g, "git add b.txt").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    let o = sh(&g, "git commit -q -m x").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    // A plain config write is not asked; the kernel keeps `.git/config` read-only, so it may
    // fail, but it is run, not refused.
    let o = sh(&g, "git config user.name t").await;
    assert!(matches!(o.status, Status::Ok | Status::Error), "{o:#?}");
    assert_eq!(pwned(&ws.root()), Vec::<PathBuf>::new());
}

/// A grant of the exact text still runs it.
#[tokio::test]
async fn an_exact_grant_still_runs_the_command() {
    let ws = workspace();
    let command = "git -c core.pager=cat log --oneline";
    let g = gate_granting(&ws, &[&format!("shell:{command}")]).await;
    let o = sh(&g, command).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
}

/// A repository can ship a directory that looks like a bare repository, with a config whose
/// `core.sshCommand` is a program: an ordinary `git fetch` inside it under `shell:git **` must
/// not obey it (git runs with `safe.bareRepository=explicit`).
#[tokio::test]
async fn an_embedded_bare_repository_config_is_not_obeyed() {
    let ws = workspace();
    let evil = ws.path("vendor/evil");
    std::fs::create_dir_all(&evil).unwrap();
    let out = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&evil)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mark = ws.path("vendor/pwned");
    std::fs::write(
        evil.join("config"),
        format!(
            "[core]\n\tbare = true\n\tsshCommand = touch {}\n[remote \"o\"]\n\turl = ssh://example.invalid/x\n",
            mark.display()
        ),
    )
    .unwrap();
    let g = gate_granting(&ws, &["shell:git **"]).await;
    let o = sh(&g, "git -C vendor/evil fetch o").await;
    assert_eq!(pwned(&ws.root()), Vec::<PathBuf>::new(), "{o:#?}");
    assert_ne!(o.status, Status::Ok, "{o:#?}");
}
