//! The permission ladder end to end (its stages mode, rules, hooks, grants and ask): a table
//! over mode × rules × grants × hooks × tool class, each row checking the status, the deciding stage and its source, plus
//! the approval broker's behaviour and the attacks on it.

use crate::common::{cache_dir, Ws, SESSION};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use toolgate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::policy::{Mode, PolicySource};
use toolgate::state::AuditQuery;
use toolgate::{Gate, GateOptions, Observation, Status};

/// An approval surface that answers every request with one answer and remembers the requests.
struct Scripted {
    answer: Answer,
    asked: AtomicUsize,
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    fn new(answer: Answer) -> Arc<Self> {
        Arc::new(Scripted {
            answer,
            asked: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
        })
    }
    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Approver for Scripted {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.requests.lock().unwrap().push(request);
        let answer = self.answer;
        Box::pin(async move { Some(answer) })
    }
}

struct Setup<'a> {
    policy: &'a str,
    grants_file: Option<&'a str>,
    cli_grants: &'a [&'a str],
    approver: Option<Arc<dyn Approver>>,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup {
            policy: "mode = \"ask\"\n",
            grants_file: None,
            cli_grants: &[],
            approver: None,
        }
    }
}

async fn gate(ws: &Ws, s: Setup<'_>) -> Gate {
    ws.write(".toolgate/policy.toml", s.policy);
    if let Some(g) = s.grants_file {
        // The user's own hand edit, adopted as theirs (as `toolgate trust` does).
        ws.write(".toolgate/grants.toml", g);
        toolgate::policy::grants::ProjectGrants::signed(
            ws.path(".toolgate/grants.toml"),
            &ws.root(),
            ws.keyring(),
            false,
        )
        .adopt_all()
        // A malformed file stays as it is: the row checks how the gate reports it.
        .ok();
    }
    Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        grants: s.cli_grants.iter().map(|g| g.to_string()).collect(),
        approver: s.approver,
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// The decision event of a call: (decision, stage, source).
fn decision(gate: &Gate, o: &Observation) -> (String, String, String) {
    let events = gate
        .state()
        .audit_events(&AuditQuery {
            call_id: Some(o.audit_id.clone()),
            ..Default::default()
        })
        .unwrap();
    let d = events
        .iter()
        .find(|e| e.event == "decision")
        .unwrap_or_else(|| panic!("no decision event for {o:#?}"));
    let s = |k: &str| d.detail[k].as_str().unwrap_or_default().to_string();
    (s("decision"), s("stage"), s("source"))
}

fn write_new() -> Value {
    json!({"path": "src/new.txt", "content": "hello\n"})
}

fn hook_script(ws: &Ws, name: &str, body: &str) -> String {
    let path = ws.path(&format!("hooks/{name}.sh"));
    crate::common::write_script(&path, &format!("#!/bin/sh\n{body}\n"));
    path.display().to_string()
}

/// One row of the ladder table.
struct Row {
    name: &'static str,
    policy: String,
    grants_file: Option<&'static str>,
    cli_grants: &'static [&'static str],
    tool: &'static str,
    input: Value,
    status: Status,
    stage: &'static str,
    source_contains: &'static str,
}

#[tokio::test]
async fn ladder_table() {
    let rule = |key: &str, decision: &str| {
        format!("[[rules]]\nkey = \"{key}\"\ndecision = \"{decision}\"\n")
    };
    let read = json!({"path": "src/a.txt"});
    let rows = vec![
        Row {
            name: "read needs no grant",
            policy: "mode = \"ask\"\n".into(),
            grants_file: None,
            cli_grants: &[],
            tool: "read",
            input: read.clone(),
            status: Status::Ok,
            stage: "no-permission",
            source_contains: "read-only",
        },
        Row {
            name: "deny rule beats a read",
            policy: format!("mode = \"ask\"\n{}", rule("read:src/**", "deny")),
            grants_file: None,
            cli_grants: &[],
            tool: "read",
            input: read.clone(),
            status: Status::Denied,
            stage: "rules",
            source_contains: "policy.toml:2",
        },
        Row {
            name: "headless write is denied",
            policy: "mode = \"ask\"\n".into(),
            grants_file: None,
            cli_grants: &[],
            tool: "write",
            input: write_new(),
            status: Status::Denied,
            stage: "ask",
            source_contains: "headless",
        },
        Row {
            name: "safe mode blocks writes",
            policy: "mode = \"safe\"\n".into(),
            grants_file: None,
            cli_grants: &["write"],
            tool: "write",
            input: write_new(),
            status: Status::Denied,
            stage: "mode",
            source_contains: "safe",
        },
        Row {
            name: "allow-all approves",
            policy: "mode = \"allow-all\"\n".into(),
            grants_file: None,
            cli_grants: &[],
            tool: "write",
            input: write_new(),
            status: Status::Ok,
            stage: "mode",
            source_contains: "allow-all",
        },
        Row {
            name: "allow-all still obeys deny rules",
            policy: format!("mode = \"allow-all\"\n{}", rule("write:src/**", "deny")),
            grants_file: None,
            cli_grants: &[],
            tool: "write",
            input: write_new(),
            status: Status::Denied,
            stage: "rules",
            source_contains: "policy.toml:2",
        },
        Row {
            name: "policy allow rule",
            policy: format!("mode = \"ask\"\n{}", rule("write:src/**", "allow")),
            grants_file: None,
            cli_grants: &[],
            tool: "write",
            input: write_new(),
            status: Status::Ok,
            stage: "project-allowlist",
            source_contains: "policy.toml:2",
        },
        Row {
            name: "allow and deny on the same path: deny wins",
            policy: format!(
                "mode = \"ask\"\n{}{}",
                rule("write:src/**", "allow"),
                rule("write:src/**", "deny")
            ),
            grants_file: None,
            cli_grants: &[],
            tool: "write",
            input: write_new(),
            status: Status::Denied,
            stage: "rules",
            source_contains: "policy.toml:5",
        },
        Row {
            name: "ask rule beats a session grant",
            policy: format!("mode = \"ask\"\n{}", rule("write:src/**", "ask")),
            grants_file: None,
            cli_grants: &["write"],
            tool: "write",
            input: write_new(),
            status: Status::Denied,
            stage: "ask",
            source_contains: "headless",
        },
        Row {
            name: "project grant from grants.toml",
            policy: "mode = \"ask\"\n".into(),
            grants_file: Some("[[grants]]\nkey = \"write:src/**\"\n"),
            cli_grants: &[],
            tool: "write",
            input: write_new(),
            status: Status::Ok,
            stage: "project-allowlist",
            // The adopted file is rewritten with its header: the entry is below it.
            source_contains: "grants.toml:",
        },
        Row {
            name: "grant for another directory does not apply",
            policy: "mode = \"ask\"\n".into(),
            grants_file: Some("[[grants]]\nkey = \"write:docs/**\"\n"),
            cli_grants: &[],
            tool: "write",
            input: write_new(),
            status: Status::Denied,
            stage: "ask",
            source_contains: "headless",
        },
        Row {
            name: "session grant from the command line",
            policy: "mode = \"ask\"\n".into(),
            grants_file: None,
            cli_grants: &["write:src/**"],
            tool: "write",
            input: write_new(),
            status: Status::Ok,
            stage: "session-allowlist",
            source_contains: "--grant 'write:src/**'",
        },
        Row {
            name: "malformed grants file fails closed",
            policy: "mode = \"ask\"\n".into(),
            grants_file: Some("[[grants]\nkey = 1"),
            cli_grants: &["write"],
            tool: "write",
            input: write_new(),
            status: Status::Error,
            stage: "project-allowlist",
            source_contains: "",
        },
    ];
    for row in rows {
        let ws = Ws::new();
        ws.write("src/a.txt", "a\n");
        let g = gate(
            &ws,
            Setup {
                policy: &row.policy,
                grants_file: row.grants_file,
                cli_grants: row.cli_grants,
                approver: None,
            },
        )
        .await;
        let o = g.call(SESSION, row.tool, row.input.clone()).await;
        assert_eq!(o.status, row.status, "{}: {o:#?}", row.name);
        let (_, stage, source) = decision(&g, &o);
        assert_eq!(stage, row.stage, "{}: {o:#?}", row.name);
        assert!(
            source.contains(row.source_contains),
            "{}: source `{source}`",
            row.name
        );
        if o.status == Status::Denied {
            assert_eq!(o.stop_turn, Some(true), "{}", row.name);
            assert!(
                o.hint.as_deref().is_some_and(|h| !h.is_empty()),
                "{}",
                row.name
            );
        }
    }
}

#[tokio::test]
async fn headless_denial_names_the_rule_that_would_allow_it() {
    let ws = Ws::new();
    let g = gate(&ws, Setup::default()).await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied);
    let hint = o.hint.unwrap();
    assert!(hint.contains("--grant 'write:src/'"), "{hint}");
    assert!(
        hint.contains("key = \"write:src/\" decision = \"allow\""),
        "{hint}"
    );
    assert!(!ws.path("src/new.txt").exists());
}

#[tokio::test]
async fn hooks_in_the_ladder() {
    // exit 2 with empty stderr still denies
    let ws = Ws::new();
    let deny = hook_script(&ws, "deny", "exit 2");
    let g = gate(
        &ws,
        Setup {
            policy: &format!("mode = \"allow-all\"\n[[hooks]]\ncommand = [\"{deny}\"]\n"),
            ..Default::default()
        },
    )
    .await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("hooks"));
    assert!(!ws.path("src/new.txt").exists());

    // a hook allow skips the prompt...
    let ws = Ws::new();
    let allow = hook_script(&ws, "allow", "echo '{\"decision\":\"allow\"}'");
    let g = gate(
        &ws,
        Setup {
            policy: &format!("mode = \"ask\"\n[[hooks]]\ncommand = [\"{allow}\"]\n"),
            ..Default::default()
        },
    )
    .await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(decision(&g, &o).1, "hooks");

    // ...but never overrides a deny rule or the scope
    let ws = Ws::new();
    let allow = hook_script(&ws, "allow", "echo '{\"decision\":\"allow\"}'");
    let policy = format!("mode = \"ask\"\n[[rules]]\nkey = \"write:src/**\"\ndecision = \"deny\"\n[[hooks]]\ncommand = [\"{allow}\"]\n");
    let g = gate(
        &ws,
        Setup {
            policy: &policy,
            ..Default::default()
        },
    )
    .await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied);
    assert_eq!(o.stage.as_deref(), Some("rules"));

    // a hook that sleeps past its timeout denies
    let ws = Ws::new();
    let slow = hook_script(&ws, "slow", "sleep 10");
    let g = gate(
        &ws,
        Setup {
            policy: &format!(
                "mode = \"allow-all\"\n[[hooks]]\ncommand = [\"{slow}\"]\ntimeout_ms = 300\n"
            ),
            ..Default::default()
        },
    )
    .await;
    let t = std::time::Instant::now();
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert!(o.reason.unwrap().contains("timed out"));
    assert!(t.elapsed() < std::time::Duration::from_secs(5));

    // updated_input that moves the path outside the workspace is re-validated: scope denies
    let ws = Ws::new();
    let mover = hook_script(
        &ws,
        "mover",
        "echo '{\"decision\":\"allow\",\"updated_input\":{\"path\":\"../outside.txt\"}}'",
    );
    let g = gate(
        &ws,
        Setup {
            policy: &format!("mode = \"ask\"\n[[hooks]]\ncommand = [\"{mover}\"]\n"),
            ..Default::default()
        },
    )
    .await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("scope"));
    assert!(!ws.root().parent().unwrap().join("outside.txt").exists());
}

#[tokio::test]
async fn session_answer_is_not_asked_again() {
    let ws = Ws::new();
    let approver = Scripted::new(Answer::Session);
    let g = gate(
        &ws,
        Setup {
            approver: Some(approver.clone()),
            ..Default::default()
        },
    )
    .await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(
        decision(&g, &o),
        ("allow".into(), "ask".into(), "user: session".into())
    );
    let o = g
        .call(
            SESSION,
            "write",
            json!({"path": "src/other.txt", "content": "x"}),
        )
        .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(decision(&g, &o).1, "session-allowlist");
    assert_eq!(approver.asked(), 1);
    // another session has no such grant
    let o = g
        .call_with(
            "other-session",
            "write",
            json!({"path": "src/third.txt", "content": "x"}),
            None,
        )
        .await;
    assert_eq!(o.status, Status::Denied);
}

#[tokio::test]
async fn project_answer_is_saved_and_seen_by_a_new_gate() {
    let ws = Ws::new();
    let approver = Scripted::new(Answer::Project);
    let g = gate(
        &ws,
        Setup {
            approver: Some(approver.clone()),
            ..Default::default()
        },
    )
    .await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert!(ws
        .read(".toolgate/grants.toml")
        .contains("key = \"write:src/\""));
    drop(g);
    let g = gate(&ws, Setup::default()).await;
    let o = g
        .call(
            "fresh-session",
            "write",
            json!({"path": "src/again.txt", "content": "x"}),
        )
        .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    let (_, stage, source) = decision(&g, &o);
    assert_eq!(stage, "project-allowlist");
    assert!(source.contains("grants.toml"), "{source}");
}

#[tokio::test]
async fn approval_binds_to_the_input() {
    let ws = Ws::new();
    let approver = Scripted::new(Answer::Once);
    let g = gate(
        &ws,
        Setup {
            approver: Some(approver.clone()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        g.call(SESSION, "write", write_new()).await.status,
        Status::Ok
    );
    // `once` covers that call only: a different input is asked again
    let o = g
        .call(
            SESSION,
            "write",
            json!({"path": "src/b.txt", "content": "other"}),
        )
        .await;
    assert_eq!(o.status, Status::Ok);
    assert_eq!(approver.asked(), 2);
    let requests = approver.requests.lock().unwrap();
    assert_ne!(requests[0].input_sha256, requests[1].input_sha256);
    assert_eq!(requests[0].key, "write:src/");
    assert!(requests[0].choices.contains(&Answer::Project));
}

#[tokio::test]
async fn denied_answer_and_prompt_text_is_plain() {
    let ws = Ws::new();
    let approver = Scripted::new(Answer::Deny);
    let g = gate(
        &ws,
        Setup {
            approver: Some(approver.clone()),
            ..Default::default()
        },
    )
    .await;
    let o = g
        .call(
            SESSION,
            "write",
            json!({"path": "src/x.txt", "content": "\u{1b}[2J\u{1b}[31mrm -rf /\u{7}"}),
        )
        .await;
    assert_eq!(o.status, Status::Denied);
    assert_eq!(o.source.as_deref(), Some("user"));
    let requests = approver.requests.lock().unwrap();
    let d = &requests[0].description;
    assert!(!d.chars().any(|c| c == '\u{1b}' || c == '\u{7}'), "{d:?}");
    assert!(d.contains("creates src/x.txt"), "{d}");
}

#[tokio::test]
async fn mode_is_read_at_decision_time() {
    let ws = Ws::new();
    let g = gate(
        &ws,
        Setup {
            policy: "mode = \"allow-all\"\n",
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        g.call(SESSION, "write", write_new()).await.status,
        Status::Ok
    );
    g.set_mode(Mode::Safe);
    let o = g
        .call(
            SESSION,
            "write",
            json!({"path": "src/y.txt", "content": "y"}),
        )
        .await;
    assert_eq!(o.status, Status::Denied);
    assert_eq!(o.stage.as_deref(), Some("mode"));
    let names: Vec<_> = g.visible_tools().iter().map(|t| t.name.clone()).collect();
    // The language-server tools that only read stay: their servers run read-only confined.
    assert_eq!(
        names,
        vec![
            "glob",
            "grep",
            "ls",
            "lsp_call_hierarchy",
            "lsp_definition",
            "lsp_diagnostics",
            "lsp_references",
            "lsp_restart",
            "lsp_symbols",
            "read"
        ]
    );
}

#[tokio::test]
async fn malformed_policy_stops_the_gate_with_file_and_line() {
    let ws = Ws::new();
    ws.write(".toolgate/policy.toml", "mode = \"ask\"\n[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\nmatch = [\"write:docs/\"]\n");
    let err = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .err()
    .expect("a policy whose example fails must not load");
    let text = err.to_string();
    assert!(text.contains("policy.toml:2"), "{text}");
    assert!(text.contains("write:docs/"), "{text}");

    let ws = Ws::new();
    ws.write(".toolgate/policy.toml", "mode = \"ask\"\nrules = 3\n");
    assert!(Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .is_err());
}

#[tokio::test]
async fn grants_file_replaced_by_a_symlink_is_refused() {
    let ws = Ws::new();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        elsewhere.path().join("g.toml"),
        "[[grants]]\nkey = \"write\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.path(".toolgate")).unwrap();
    std::os::unix::fs::symlink(
        elsewhere.path().join("g.toml"),
        ws.path(".toolgate/grants.toml"),
    )
    .unwrap();
    let g = gate(&ws, Setup::default()).await;
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(o.error_code.as_deref(), Some("grants-file"));
    assert!(o.reason.unwrap().contains("symlink"));
    assert!(!ws.path("src/new.txt").exists());
}

#[tokio::test]
async fn ci_preset_denies_ci_config_and_allows_grants() {
    let ws = Ws::new();
    let g = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        policy: Some(PolicySource::Preset("ci".into())),
        grants: vec!["write".into()],
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap();
    let o = g
        .call(
            SESSION,
            "write",
            json!({"path": ".github/workflows/x.yml", "content": "x"}),
        )
        .await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("rules"));
    let o = g.call(SESSION, "write", write_new()).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
}

fn toolgate(ws: &Ws, args: &[&str]) -> std::process::Output {
    crate::common::toolgate_command(ws)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn policy_check_reports_every_problem_with_file_and_line() {
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        "mode = \"ask\"\n[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\nmatch = [\"write:docs/\"]\n[[rules]]\nkey = \"edit:x/**\"\ndecision = \"deny\"\nnot_match = [\"edit:x/y/\"]\n",
    );
    let out = toolgate(&ws, &["policy", "check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let policy = ws.path(".toolgate/policy.toml").display().to_string();
    assert!(text.contains(&format!("{policy}:2: error: rule `write:src/**` does not match its own `match` example `write:docs/`")), "{text}");
    assert!(
        text.contains(&format!(
            "{policy}:6: error: rule `edit:x/**` matches its own `not_match` example `edit:x/y/`"
        )),
        "{text}"
    );

    // a rule for a tool that does not exist is an error (a typo would silently allow or deny
    // nothing), with the nearest real name when there is one; a clean policy says ok
    ws.write(
        ".toolgate/policy.toml",
        "mode = \"ask\"\n[[rules]]\nkey = \"frobnicate\"\ndecision = \"deny\"\n[[rules]]\nkey = \"eddit:src/**\"\ndecision = \"allow\"\n",
    );
    let out = toolgate(&ws, &["policy", "check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{policy}:2: error: rule `frobnicate` names the unknown tool `frobnicate`; `toolgate tools` lists the tools")),
        "{text}"
    );
    assert!(
        text.contains("rule `eddit:src/**` names the unknown tool `eddit` (did you mean `edit`?)"),
        "{text}"
    );
    // the same typo in --grant stops the run as a user mistake, before anything runs
    let out = toolgate(
        &ws,
        &["--grant", "edt:stats/**", "call", "read", r#"{"path":"x"}"#],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--grant `edt:stats/**` names the unknown tool `edt` (did you mean `edit`?)"),
        "{err}"
    );
    assert!(!err.contains("cannot open the gate"), "{err}");
    // without a policy file, check says so instead of naming a file of toolgate's source
    std::fs::remove_file(ws.path(".toolgate/policy.toml")).unwrap();
    let out = toolgate(&ws, &["policy", "check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no .toolgate/policy.toml, the built-in default preset: ok"),
        "{text}"
    );
    assert!(!text.contains("policies/default.toml"), "{text}");
    ws.write(".toolgate/policy.toml", "mode = \"safe\"\n");
    let out = toolgate(&ws, &["policy", "check"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (0 rules, mode safe)"));
}

#[test]
fn grants_list_and_revoke_from_the_command_line() {
    let ws = Ws::new();
    ws.write(
        ".toolgate/grants.toml",
        "[[grants]]\nkey = \"write:src/**\"\n\n[[grants]]\nkey = \"edit\"\n",
    );
    // Written by hand, they are listed as ignored until the user adopts them.
    let out = toolgate(&ws, &["grants", "list"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.starts_with("# ignored: "), "{text}");
    assert!(text.contains("grant `write:src/**` (line 1)"), "{text}");
    let out = toolgate(&ws, &["trust", "--yes"]);
    assert_eq!(out.status.code(), Some(0));
    let out = toolgate(&ws, &["grants", "list"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let file = ws.path(".toolgate/grants.toml").display().to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with(&format!("write:src/**\t{file}:")),
        "{text}"
    );
    assert!(lines[1].starts_with(&format!("edit\t{file}:")), "{text}");
    let out = toolgate(&ws, &["grants", "revoke", "write:src/**"]);
    assert_eq!(out.status.code(), Some(0));
    let out = toolgate(&ws, &["grants", "revoke", "write:src/**"]);
    assert_eq!(out.status.code(), Some(1));
    let out = toolgate(&ws, &["grants", "list"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("edit\t"));
}
