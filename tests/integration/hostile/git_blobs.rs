//! Issue #49, item 10: git's blob printers. The sandbox masks a deny-listed `.env` in the
//! working tree, but git's object database keeps what was committed or staged; a git command
//! that prints (or searches) blobs must not run as read-only. With only read-only commands
//! allowed (`ask` mode, no one to ask) each is refused and the secret never comes back; the
//! commands that print names and metadata still run.

use crate::common::*;
use serde_json::json;
use toolgate::{Gate, GateOptions, Observation, Status};

const SESSION: &str = "hostile-git-blobs";
const SECRET: &str = "sk_live_49blobC0FFEE";
const STAGED: &str = "sk_live_49stagedBEEF";

/// Run git on the host in the workspace, with no user or system configuration.
fn git(ws: &Ws, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(ws.root())
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository that committed `.env` (and `config/.env`) twice, with a third value staged.
fn workspace() -> Ws {
    let ws = Ws::new();
    ws.write(".env", format!("API_KEY={SECRET}-old\n"))
        .write("config/.env", format!("DB={SECRET}-db\n"))
        .write("src/main.rs", "fn main() {}\n");
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-f", ".env", "config/.env", "src/main.rs"]);
    git(&ws, &["commit", "-q", "-m", "one"]);
    ws.write(".env", format!("API_KEY={SECRET}\n"))
        .write("src/main.rs", "fn main() { run() }\n");
    git(&ws, &["commit", "-q", "-am", "two"]);
    ws.write(".env", format!("API_KEY={STAGED}\n"));
    git(&ws, &["add", ".env"]);
    for f in [".env", "config/.env", "src/main.rs"] {
        ws.age(f, 3600);
    }
    git(&ws, &["status", "--porcelain"]);
    ws
}

/// `ask` mode and no approval surface: only read-only commands run.
async fn ask_gate(ws: &Ws) -> Gate {
    ws.write(".toolgate/policy.toml", "mode = \"ask\"\n");
    Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(
        SESSION,
        "shell",
        json!({ "command": command, "timeout_ms": 20_000 }),
    )
    .await
}

fn leaks(o: &Observation) -> bool {
    let text = serde_json::to_string(o).unwrap();
    text.contains("sk_live_49")
}

/// Every blob printer, with only read-only commands allowed: refused, the secret never shown.
#[tokio::test]
async fn git_blob_printers_never_show_a_committed_secret() {
    let ws = workspace();
    let g = ask_gate(&ws).await;
    let blob = git(&ws, &["rev-parse", "HEAD:.env"]);
    let short = &blob[..8];
    let commands = [
        "git log -p".to_string(),
        "git log --patch --oneline".into(),
        "git log -u -1".into(),
        "git log --stat -p".into(),
        "git log -p -- config".into(),
        "git log -p -- src".into(),
        "git log -p --all".into(),
        "git log --cc -1".into(),
        "git log --word-diff".into(),
        "git log --color-words".into(),
        "git log -U0".into(),
        "git log --patch-with-stat".into(),
        "git log --binary -1".into(),
        "git log -W -1".into(),
        format!("git log -S{SECRET} --oneline"),
        "git log -G 'API_KEY=sk_' --oneline".into(),
        "git rev-list -p HEAD".into(),
        "git diff".into(),
        "git diff --cached".into(),
        "git diff --staged".into(),
        "git diff HEAD~1".into(),
        "git diff HEAD~1 HEAD".into(),
        "git diff --exit-code HEAD~1".into(),
        "git diff --stat -I API_KEY HEAD~1".into(),
        "git show".into(),
        "git show HEAD".into(),
        "git show --oneline".into(),
        format!("git show {blob}"),
        format!("git show --stat {short}"),
        format!("git show -s {short}"),
        "git status -v".into(),
        "git status -vv".into(),
        format!("git cat-file -p {short}"),
        format!("git cat-file blob {blob}"),
        "git cat-file --batch --batch-all-objects".into(),
        "git cat-file --batch-command".into(),
        "git grep --cached API_KEY".into(),
        "git grep API_KEY HEAD".into(),
        "git grep -e API_KEY HEAD~1".into(),
        "git grep -- API_KEY HEAD".into(),
        "git grep -h API_KEY main".into(),
        "git tag --format=%(raw)".into(),
        // Not read-only before either: the class, whole.
        "git show HEAD:.env".into(),
        "git whatchanged -p".into(),
        "git format-patch --stdout -1".into(),
        "git archive HEAD".into(),
        "git blame HEAD -- .env".into(),
        "git blame HEAD -- config/.env".into(),
        "git range-diff HEAD~1 HEAD HEAD".into(),
        "git stash show -p".into(),
    ];
    for command in &commands {
        let o = sh(&g, command).await;
        assert!(
            matches!(o.status, Status::Denied | Status::NeedsApproval),
            "{command} ran without approval: {o:#?}"
        );
        assert!(!leaks(&o), "{command} showed the secret: {o:#?}");
    }

    // The control group: names, ids and metadata run read-only, and show no secret either
    // (the working tree's `.env` is masked by the kernel).
    for command in [
        "git status",
        "git status --porcelain",
        "git log --oneline",
        "git log --stat",
        "git log --name-status --format=%H",
        "git diff --stat",
        "git diff --cached --name-only",
        "git diff --numstat HEAD~1",
        "git show --stat",
        "git show -s --format=%H%n%B HEAD",
        "git ls-files -s",
        "git ls-tree -r HEAD",
        "git rev-list --objects --all",
        "git cat-file -t HEAD",
        "git cat-file -p HEAD",
        "git grep -n API_KEY",
        "git grep -n fn -- src",
        "git blame HEAD -- src/main.rs",
    ] {
        let o = sh(&g, command).await;
        // Run without a prompt (a non-zero exit is fine: `.env` masked, grep finds nothing).
        assert!(
            matches!(o.status, Status::Ok | Status::Error),
            "{command}: {o:#?}"
        );
        assert_eq!(o.data["class"], "read-only", "{command}: {o:#?}");
        assert!(!leaks(&o), "{command} showed the secret: {o:#?}");
    }
    // The reason the classifier gives names the risk.
    let why = toolgate::exec::policy::git_blob_printer(&["git".into(), "log".into(), "-p".into()])
        .unwrap();
    assert!(why.contains("deny-listed secrets"), "{why}");
}

mod unprivileged {
    // The `in a::b, test` arm names the module `a :: b` (stringify! spaces a path), which
    // matches no test: the module's path is given as a string instead.
    in_modes!(
        @wrap git_blob_printers_never_show_a_committed_secret,
        "hostile::git_blobs",
        crate::modes::nothing
    );
}

/// `policy explain` says why a git blob printer asks: it could print committed secrets.
#[test]
fn explain_names_why_a_blob_printer_is_not_read_only() {
    let ws = workspace();
    let out = toolgate_command(&ws)
        .args(["policy", "explain", "shell", r#"{"command":"git log -p"}"#])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not read-only") && text.contains("committed content"),
        "{text}"
    );
    let out = toolgate_command(&ws)
        .args([
            "policy",
            "explain",
            "shell",
            r#"{"command":"git log --oneline"}"#,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("not read-only"), "{text}");
}

/// Denies every request and keeps what it was asked.
struct Recording(std::sync::Mutex<Vec<toolgate::gate::approval::ApprovalRequest>>);

impl toolgate::gate::approval::Approver for Recording {
    fn ask(
        &self,
        request: toolgate::gate::approval::ApprovalRequest,
    ) -> toolgate::gate::approval::AnswerFuture {
        self.0.lock().unwrap().push(request);
        Box::pin(async { Some(toolgate::gate::approval::Answer::Deny) })
    }
}

/// The approval a blob printer asks for says why a person is asked at all.
#[tokio::test]
async fn the_approval_of_a_blob_printer_says_it_could_print_committed_content() {
    let ws = workspace();
    ws.write(".toolgate/policy.toml", "mode = \"ask\"\n");
    let approver = std::sync::Arc::new(Recording(Default::default()));
    let gate = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        approver: Some(approver.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    let o = sh(&gate, "git log -p").await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    let asked = approver.0.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].description.contains("committed content"),
        "{}",
        asked[0].description
    );
}
