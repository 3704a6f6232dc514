//! The shell end to end: exact keying (every bypass from the issue), the banned and
//! read-only lists, the ceiling (nothing persisted ever allows the shell), confinement attacks,
//! `--grant` with the CI preset, background jobs and timeouts.

use crate::common::{cache_dir, code, Ws, SESSION};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::policy::PolicySource;
use toolgate::{Gate, GateOptions, Observation, Status};

struct Always(Answer);

impl Approver for Always {
    fn ask(&self, _request: ApprovalRequest) -> AnswerFuture {
        let a = self.0;
        Box::pin(async move { Some(a) })
    }
}

async fn gate(ws: &Ws, policy: &str, grants: &[&str], approver: Option<Answer>) -> Gate {
    ws.write(".toolgate/policy.toml", policy);
    Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        grants: grants.iter().map(|g| g.to_string()).collect(),
        approver: approver.map(|a| Arc::new(Always(a)) as Arc<dyn Approver>),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(SESSION, "shell", json!({ "command": command }))
        .await
}

async fn sh_with(gate: &Gate, input: Value) -> Observation {
    gate.call(SESSION, "shell", input).await
}

const ASK: &str = "mode = \"ask\"\n";

/// Every bypass from the issue: under a `shell:<program>` grant for each program involved, the
/// command is still denied (headless: it needs its own exact approval) or banned.
#[tokio::test]
async fn bypasses_are_keyed_on_whole_text_or_denied() {
    let ws = Ws::new();
    let grants = [
        "shell:echo",
        "shell:ls",
        "shell:env",
        "shell:nohup",
        "shell:git",
        "shell:find",
        "shell:rg",
        "shell:ec",
        "shell:date",
    ];
    let g = gate(&ws, ASK, &grants, None).await;
    let bypasses = [
        ("newline", "echo hi\nrm -rf x"),
        ("redirect_home", "echo pwned > ~/.bashrc"),
        ("background_operator", "echo hi & rm -rf x"),
        ("process_substitution", "ls <(rm -rf x)"),
        ("env_wrapper", "env rm -rf x"),
        ("nohup_curl", "nohup curl http://example.com"),
        ("env_ld_preload", "env LD_PRELOAD=x.so ls"),
        (
            "env_git_external_diff",
            "env GIT_EXTERNAL_DIFF=/tmp/x git diff",
        ),
        ("git_dash_c", "git -c core.pager=sh git log"),
        ("absolute_program", "/tmp/git status"),
        ("relative_program", "./git status"),
        ("git_diff_textconv", "git diff --textconv"),
        ("find_delete", "find . -delete"),
        ("rg_pre", "rg --pre sh x"),
        ("backslash_escape", "ec\\ho hi"),
        ("date_set", "date -s 2020-01-01"),
    ];
    ws.write("x", "keep me");
    for (name, command) in bypasses {
        let o = sh(&g, command).await;
        assert_eq!(o.status, Status::Denied, "{name}: {command:?} -> {o:#?}");
        let reason = o.reason.clone().unwrap_or_default();
        assert!(
            reason.contains("banned") || reason.contains(&format!("shell:{command}")),
            "{name}: must be banned or keyed on its whole text: {reason}"
        );
    }
    assert_eq!(ws.read("x"), "keep me");
}

#[tokio::test]
async fn banned_is_denied_even_in_allow_all_and_with_a_grant() {
    let ws = Ws::new();
    let g = gate(
        &ws,
        "mode = \"allow-all\"\n",
        &["shell:curl", "shell"],
        None,
    )
    .await;
    for command in [
        "curl http://example.com",
        "sudo ls",
        "go test -exec sh ./...",
        "echo a; wget x",
    ] {
        let o = sh(&g, command).await;
        assert_eq!(o.status, Status::Denied, "{command}: {o:#?}");
        assert_eq!(o.source.as_deref(), Some("banned-list"), "{command}");
    }
}

#[tokio::test]
async fn read_only_commands_need_no_prompt_in_ask_mode() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    let g = gate(&ws, ASK, &[], None).await;
    let o = sh(&g, "cat a.txt").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.content, "hello\n");
    assert_eq!(o.data["class"], "read-only");
    // Not read-only: needs approval (headless: denied with the exact grant as hint).
    let o = sh(&g, "touch b.txt").await;
    assert_eq!(o.status, Status::Denied);
    assert!(o.hint.unwrap_or_default().contains("--grant 'shell:touch'"));
    // A read-only program on a secret or outside the workspace still asks, also when the
    // path is an option's value.
    ws.write(".env", "SECRET=1");
    for command in [
        "cat .env",
        "cat /etc/hostname",
        "diff --from-file=.env a.txt",
        "grep -f.env a.txt",
        "grep --file=/etc/passwd a.txt",
        "sort --files0-from=../x a.txt",
        "cat -- .env",
    ] {
        let o = sh(&g, command).await;
        assert_eq!(o.status, Status::Denied, "{command}: {o:#?}");
    }
    // Options whose values are not paths stay read-only.
    let o = sh(&g, "grep -n --color=never -A1 hello a.txt").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.content, "1:hello\n");
}

#[tokio::test]
async fn dangerous_forms_ask_even_under_a_broader_session_grant() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell:rm", "shell:rm **"], None).await;
    ws.write("d/f", "x");
    let o = sh(&g, "rm -r d").await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert!(ws.path("d/f").exists());
    // An exact grant for this very command allows it.
    let g = gate(&ws, ASK, &["shell:rm -r d"], None).await;
    let o = sh(&g, "rm -r d").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert!(!ws.path("d").exists());
}

#[tokio::test]
async fn ceiling_violation_from_grants_file_policy_rule_and_project_answer() {
    // A hand-edited grants file.
    let ws = Ws::new();
    ws.write(
        ".toolgate/grants.toml",
        "[[grants]]\nkey = \"shell:touch\"\n",
    );
    let g = gate(&ws, ASK, &[], None).await;
    let o = sh(&g, "touch x").await;
    assert_eq!(code(&o), "ceiling-violation", "{o:#?}");
    assert!(!ws.path("x").exists());
    assert!(g
        .check()
        .iter()
        .any(|p| p.message.contains("can only be allowed per session")));

    // A policy allow rule.
    let ws = Ws::new();
    let g = gate(
        &ws,
        "mode = \"ask\"\n[[rules]]\nkey = \"shell:touch **\"\ndecision = \"allow\"\n",
        &[],
        None,
    )
    .await;
    let o = sh(&g, "touch x").await;
    assert_eq!(code(&o), "ceiling-violation", "{o:#?}");
    assert!(!ws.path("x").exists());
    assert!(g
        .check()
        .iter()
        .any(|p| p.message.contains("can only be allowed per session")));

    // A `project` prompt answer.
    let ws = Ws::new();
    let g = gate(&ws, ASK, &[], Some(Answer::Project)).await;
    let o = sh(&g, "touch x").await;
    assert_eq!(code(&o), "ceiling-violation", "{o:#?}");
    assert!(!ws.path("x").exists());
    assert!(!ws.path(".toolgate/grants.toml").exists());
}

#[tokio::test]
async fn ci_preset_with_a_command_line_grant() {
    let ws = Ws::new();
    let g = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        policy: Some(PolicySource::Preset("ci".into())),
        grants: vec!["shell:printf **".into()],
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(g.policy().require_confinement);
    let o = sh(&g, "printf '%s-%s' a b").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.content, "a-b");
    let c = &o.data["confinement"];
    assert_eq!(c["landlock"], true);
    assert_eq!(c["netns"], true);
    assert_eq!(c["env_scrubbed"], true);
    // Started by the spawner, not forked from the host.
    assert_eq!(o.data["spawner"], true, "{o:#?}");
    // Not granted: denied headless, the hint names the grant.
    let o = sh(&g, "touch y").await;
    assert_eq!(o.status, Status::Denied);
    assert!(!ws.path("y").exists());
}

#[tokio::test]
async fn confinement_blocks_writes_outside_and_to_protected_paths() {
    let ws = Ws::new();
    ws.mkdir(".git/hooks");
    ws.write(".git/config", "[core]\n");
    // The write that must work goes to a subdirectory: without namespaces nothing can be
    // created directly at the workspace root (shell_kernel's
    // `the_workspace_root_takes_no_new_file_in_landlock_only_mode`).
    ws.mkdir("sub");
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped");
    let g = gate(&ws, ASK, &["shell"], None).await;
    let o = sh(
        &g,
        &format!(
            "echo a > sub/inside.txt; echo b > {}; echo c > .toolgate/grants.toml; echo d > .git/hooks/pre-commit; echo e >> .git/config; echo done",
            target.display()
        ),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(ws.read("sub/inside.txt"), "a\n");
    assert!(!target.exists(), "wrote outside the workspace");
    assert!(!ws.path(".toolgate/grants.toml").exists());
    assert!(!ws.path(".git/hooks/pre-commit").exists());
    assert_eq!(ws.read(".git/config"), "[core]\n");
    // Its private TMPDIR is writable.
    let o = sh(&g, "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"").await;
    assert_eq!(o.content, "t\n", "{o:#?}");
}

#[tokio::test]
async fn confinement_blocks_loopback_network_and_scrubs_env() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"], None).await;
    let o = sh(
        &g,
        &format!(
            "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"
        ),
    )
    .await;
    assert_eq!(o.content, "refused\n", "{o:#?}");
    assert!(listener.accept().is_err(), "the listener saw a connection");
    std::env::set_var("LD_PRELOAD", "");
    std::env::set_var("TOOLGATE_TEST_SECRET", "s3cret");
    let o = sh(&g, "env").await;
    assert!(!o.content.contains("LD_PRELOAD"), "{}", o.content);
    assert!(!o.content.contains("s3cret"), "{}", o.content);
    assert!(o.content.contains("TMPDIR="));
}

#[tokio::test]
async fn only_the_approved_command_runs() {
    // The host function refuses anything but the approved text: the gate binds the command
    // into the call's capabilities, so a guest cannot swap it.
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell:echo"], None).await;
    let o = sh(&g, "echo approved").await;
    assert_eq!(o.data["command"], "echo approved");
    assert_eq!(o.data["ran_as"]["argv"], json!(["echo", "approved"]));
}

#[tokio::test]
async fn background_job_lifecycle() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"], None).await;
    let started = Instant::now();
    let o = sh_with(
        &g,
        json!({"command": "echo first; sleep 30; echo never", "run_in_background": true}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let job = o.data["job_id"].as_str().unwrap().to_string();
    assert_eq!(o.data["state"], "running");
    assert_eq!(o.content, "first\n");
    // Incremental: nothing new yet.
    let o = g.call(SESSION, "job_output", json!({"job_id": job})).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.data["state"], "running");
    assert_eq!(o.content, "");
    // Another session cannot see it.
    let o = g.call("other", "job_output", json!({"job_id": job})).await;
    assert_ne!(o.status, Status::Ok);
    let o = g.call(SESSION, "job_kill", json!({"job_id": job})).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.data["state"], "killed");
    assert_eq!(g.exec_host().jobs.running(), 0);
}

#[tokio::test]
async fn auto_background_after_the_threshold() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"], None).await;
    let o = sh_with(
        &g,
        json!({"command": "sleep 0.3; echo late", "auto_background_ms": 100}),
    )
    .await;
    assert_eq!(o.data["state"], "running", "{o:#?}");
    let job = o.data["job_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let o = g.call(SESSION, "job_output", json!({"job_id": job})).await;
    assert_eq!(o.data["state"], "exited", "{o:#?}");
    assert_eq!(o.data["exit_code"], 0);
    assert_eq!(o.content, "late\n");
}

#[tokio::test]
async fn timeout_kills_the_process_group() {
    let ws = Ws::new();
    // In a subdirectory, where a surviving child could write in every mode (without
    // namespaces nothing can be created at the root, which would prove nothing).
    ws.mkdir("sub");
    let g = gate(&ws, ASK, &["shell"], None).await;
    let started = Instant::now();
    let o = sh_with(
        &g,
        json!({"command": "(sleep 2; touch sub/late-child) & sleep 30", "timeout_ms": 300}),
    )
    .await;
    assert_eq!(code(&o), "timeout", "{o:#?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !ws.path("sub/late-child").exists(),
        "a child of the group survived the timeout"
    );
}

#[tokio::test]
async fn big_output_is_previewed_with_totals_and_saved() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"], None).await;
    let o = sh(&g, "seq 1 200000").await;
    assert_eq!(o.status, Status::Ok);
    assert!(o.truncated);
    assert_eq!(o.data["stdout"]["lines"], 200000);
    let saved = o.data["full_output_ref"].as_str().unwrap();
    assert!(saved.starts_with(".toolgate/outputs/"));
    assert!(ws.read(saved).contains("\n199999\n"));
    assert!(o.content.starts_with("1\n2\n"));
}

/// Sixty background `sleep`s: past a limit of 20 processes, dash reports a failed fork at
/// once (bash would retry with growing sleeps).
const FORK_BOMB: &str = "sh -c 'i=0; while [ $i -lt 60 ]; do sleep 1 & i=$((i+1)); done; wait'";

/// A gate whose shell may run at most 20 processes, with `shell` granted.
async fn gate_with_20_processes(ws: &Ws) -> Gate {
    gate(
        ws,
        "mode = \"ask\"\n[shell]\nmax_processes = 20\n",
        &["shell"],
        None,
    )
    .await
}

/// The process limit a command with `max_processes = 20` reports: exactly 20 (a pids cgroup,
/// or `RLIMIT_NPROC` in its own user namespace), except without namespaces, where
/// `RLIMIT_NPROC` counts every task of the user: the tasks it runs now plus 20.
fn assert_limit_of_20(o: &Observation) {
    let c = &o.data["confinement"];
    if crate::modes::without_userns() {
        assert_eq!(c["pids_bound"], json!("rlimit-nproc-user"), "{o:#?}");
        let limit = c["pids_limit"].as_u64();
        assert!(limit.is_some_and(|l| l >= 20), "{o:#?}");
    } else {
        assert_eq!(c["pids_limit"], json!(20), "{o:#?}");
    }
}

/// A fork bomb stops at the pids cgroup's limit instead of taking the machine down.
#[tokio::test]
async fn process_count_is_limited() {
    let ws = Ws::new();
    let g = gate_with_20_processes(&ws).await;
    let o = sh(&g, FORK_BOMB).await;
    assert_limit_of_20(&o);
    assert!(o.content.contains("fork"), "{}", o.content);
    // Everything else runs as usual, and nothing is left in the cgroup afterwards.
    let o = sh(&g, "echo fine").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert!(o.content.contains("fine"));
}

/// A command too large for the spawner's socket (over 128 KiB) is forked from the host: its
/// process limit is still enforced (a cgroup of its own), not only reported.
#[tokio::test]
async fn a_command_too_large_for_the_spawner_still_has_a_process_limit() {
    let ws = Ws::new();
    let g = gate_with_20_processes(&ws).await;
    // The fork bomb of `process_count_is_limited`, padded past the spawner's request size
    // with four 50 KiB arguments (one argument may not pass 128 KiB).
    let word = "a".repeat(50 * 1024);
    let o = sh(&g, &format!("{FORK_BOMB} x {word} {word} {word} {word}")).await;
    assert_eq!(o.data["spawner"], false, "{}", o.summary);
    assert_limit_of_20(&o);
    assert!(
        o.content.contains("fork"),
        "the limit was not enforced: {}",
        o.content
    );
    // A small command afterwards goes through the spawner, under the shared limit (without
    // namespaces too: the spawner builds the Landlock rules the host computed).
    let o = sh(&g, "echo small").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.data["spawner"], true, "{o:#?}");
    assert_limit_of_20(&o);
}

/// The spawner that starts commands can die (killed by the OOM killer, by hand): a command it
/// was running is reported and its group killed instead of waiting forever, and the next
/// command starts a new spawner, confined as before.
#[tokio::test]
async fn a_killed_spawner_is_replaced_and_never_hangs_a_call() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"], None).await;
    // The files go in a subdirectory: without namespaces the workspace root takes none.
    ws.mkdir("sub");
    let o = sh(&g, "echo one").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.data["spawner"], true, "{o:#?}");
    let first = g.exec_host().spawner.pid().expect("a spawner runs");
    // A command runs in the background while its spawner is killed.
    let o = sh_with(
        &g,
        json!({"command": "sleep 2; echo late > sub/late.txt", "run_in_background": true}),
    )
    .await;
    assert!(o.data["job_id"].is_string(), "{o:#?}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(first as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    // Nobody looks at the job: the host notices on its own that it lost it.
    let started = std::time::Instant::now();
    while g.exec_host().jobs.running() > 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the job still looks alive after its spawner died"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The next command gets a new spawner and the same confinement.
    let o = sh(&g, "echo two > sub/two.txt; echo again").await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert!(o.content.contains("again"), "{o:#?}");
    assert_eq!(o.data["spawner"], true, "{o:#?}");
    assert_eq!(o.data["confinement"]["landlock"], true);
    let second = g.exec_host().spawner.pid().expect("a new spawner runs");
    assert_ne!(first, second);
    assert_eq!(ws.read("sub/two.txt"), "two\n");
    // The orphaned job's group was killed, not left to finish on its own.
    tokio::time::sleep(std::time::Duration::from_millis(2500).saturating_sub(started.elapsed()))
        .await;
    assert!(
        !ws.path("sub/late.txt").exists(),
        "the orphaned job kept running"
    );
}
