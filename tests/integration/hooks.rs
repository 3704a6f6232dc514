//! PreToolUse hooks through the public API: hooks configured the way a
//! policy's `[[hooks]]` tables configure them, run against a real workspace.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};
use toolgate::gate::hooks::{run_pre_tool_use, HookEvent, HookSpec, HookVerdict};
use toolgate::Status;

#[derive(serde::Deserialize)]
struct PolicyHooks {
    #[serde(default)]
    hooks: Vec<HookSpec>,
}

fn parse(toml_text: &str) -> Vec<HookSpec> {
    toml::from_str::<PolicyHooks>(toml_text).unwrap().hooks
}

/// Write an executable `#!/bin/sh` script at `rel` in the workspace.
fn script(ws: &Ws, rel: &str, body: &str) {
    crate::common::write_script(&ws.path(rel), &format!("#!/bin/sh\n{body}\n"));
}

async fn run(
    ws: &Ws,
    hooks: &[HookSpec],
    tool: &str,
    input: serde_json::Value,
) -> toolgate::gate::hooks::HookOutcome {
    let root = ws.root();
    let event = HookEvent {
        tool,
        key: &format!("{tool}:*"),
        session: SESSION,
        input: &input,
        workspace: &root,
    };
    run_pre_tool_use(hooks, &event).await
}

#[test]
fn hooks_tables_parse_with_defaults_and_reject_unknown_keys() {
    let hooks = parse(
        r#"
        [[hooks]]
        command = ["./hooks/guard.sh", "--strict"]
        tools = ["bash"]

        [[hooks]]
        command = ["./hooks/audit.sh"]
        timeout_ms = 500
        fail_open = true
        "#,
    );
    assert_eq!(hooks.len(), 2);
    assert_eq!(hooks[0].command, vec!["./hooks/guard.sh", "--strict"]);
    assert_eq!(hooks[0].tools, vec!["bash"]);
    assert_eq!(hooks[0].timeout_ms, 10_000);
    assert!(!hooks[0].fail_open);
    assert!(hooks[1].tools.is_empty());
    assert_eq!(hooks[1].timeout_ms, 500);
    assert!(hooks[1].fail_open);

    let bad = toml::from_str::<PolicyHooks>("[[hooks]]\ncommand = [\"x\"]\nfailopen = true\n");
    assert!(bad.is_err());
    let missing = toml::from_str::<PolicyHooks>("[[hooks]]\ntools = [\"bash\"]\n");
    assert!(missing.is_err());
}

#[tokio::test]
async fn configured_hooks_run_relative_to_the_workspace_and_merge() {
    let ws = Ws::new();
    script(
        &ws,
        "hooks/guard.sh",
        r#"input=$(cat)
case "$input" in
  *"rm -rf"*) echo "rm -rf is not allowed" >&2; exit 2 ;;
esac
echo '{"decision":"allow","updated_input":{"timeout":30}}'"#,
    );
    script(
        &ws,
        "hooks/audit.sh",
        "cat >> hooks/seen.log\necho >> hooks/seen.log",
    );
    let hooks = parse(
        r#"
        [[hooks]]
        command = ["./hooks/guard.sh"]
        tools = ["bash"]

        [[hooks]]
        command = ["./hooks/audit.sh"]

        [[hooks]]
        command = ["./hooks/guard.sh"]
        "#,
    );

    let out = run(&ws, &hooks, "bash", json!({"command": "ls"})).await;
    assert_eq!(
        out.verdict,
        HookVerdict::Allow {
            by: "./hooks/guard.sh".into()
        }
    );
    assert_eq!(out.updated_input, Some(json!({"timeout": 30})));
    assert_eq!(out.ran, vec!["./hooks/guard.sh", "./hooks/audit.sh"]);

    let out = run(&ws, &hooks, "bash", json!({"command": "rm -rf /"})).await;
    assert_eq!(
        out.verdict,
        HookVerdict::Deny {
            by: "./hooks/guard.sh".into(),
            reason: "rm -rf is not allowed".into(),
            halt: false,
        }
    );
    assert_eq!(out.updated_input, None);

    // The first table limits the guard to `bash`; without the third one it skips `read`.
    let out = run(&ws, &hooks[..2], "read", json!({"path": "a"})).await;
    assert_eq!(out.verdict, HookVerdict::None);
    assert_eq!(out.ran, vec!["./hooks/audit.sh"]);
    // Tools are filtered before duplicates are dropped: the third table (all tools) applies.
    let out = run(&ws, &hooks, "read", json!({"path": "a"})).await;
    assert_eq!(out.ran, vec!["./hooks/audit.sh", "./hooks/guard.sh"]);

    let seen = std::fs::read_to_string(ws.path("hooks/seen.log")).unwrap();
    let events: Vec<serde_json::Value> = seen
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 4);
    assert_eq!(events[2]["tool"], "read");
    assert_eq!(events[2]["hook_event"], "PreToolUse");
    assert_eq!(events[2]["session"], SESSION);
    assert_eq!(events[2]["input"], json!({"path": "a"}));
}

#[tokio::test]
async fn failing_hooks_fail_closed_unless_configured_open() {
    let ws = Ws::new();
    script(&ws, "hooks/broken.sh", "exit 1");
    script(&ws, "hooks/slow.sh", "sleep 5");
    let closed = parse(
        r#"
        [[hooks]]
        command = ["./hooks/broken.sh"]

        [[hooks]]
        command = ["./hooks/slow.sh"]
        timeout_ms = 300
        "#,
    );
    let start = Instant::now();
    let out = run(&ws, &closed, "bash", json!({"command": "ls"})).await;
    assert!(start.elapsed() < Duration::from_secs(3));
    match out.verdict {
        HookVerdict::Deny { by, reason, halt } => {
            assert_eq!(by, "./hooks/broken.sh");
            assert!(
                reason.contains("hook `./hooks/broken.sh` exited with code 1"),
                "{reason}"
            );
            assert!(
                reason.contains("hook `./hooks/slow.sh` timed out after 300 ms"),
                "{reason}"
            );
            assert!(!halt);
        }
        other => panic!("expected deny, got {other:?}"),
    }

    let open: Vec<HookSpec> = closed
        .into_iter()
        .map(|mut h| {
            h.fail_open = true;
            h
        })
        .collect();
    let out = run(&ws, &open, "bash", json!({"command": "ls"})).await;
    assert_eq!(out.verdict, HookVerdict::None);
}

#[tokio::test]
async fn halting_hook_halts() {
    let ws = Ws::new();
    script(&ws, "hooks/stop.sh", "echo 'budget exhausted' >&2\nexit 49");
    let hooks = parse("[[hooks]]\ncommand = [\"./hooks/stop.sh\"]\n");
    let out = run(&ws, &hooks, "write", json!({"path": "a", "content": "b"})).await;
    assert_eq!(
        out.verdict,
        HookVerdict::Deny {
            by: "./hooks/stop.sh".into(),
            reason: "budget exhausted".into(),
            halt: true,
        }
    );
}

/// A gate over `ws` with `policy` as the (trusted) workspace policy and no approval surface.
async fn headless_gate(ws: &Ws, policy: &str) -> toolgate::Gate {
    ws.write(".toolgate/policy.toml", policy);
    toolgate::Gate::open(toolgate::GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// A policy running `./hooks/NAME.sh` for every tool, in `mode`, plus `extra` tables.
fn hook_policy(mode: &str, name: &str, extra: &str) -> String {
    format!("mode = \"{mode}\"\n{extra}\n[[hooks]]\ncommand = [\"./hooks/{name}.sh\"]\n")
}

/// The audit's decision event of a call: (decision, stage, source).
fn audited(gate: &toolgate::Gate, o: &toolgate::Observation) -> (String, String, String) {
    let events = gate
        .state()
        .audit_events(&toolgate::state::AuditQuery {
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

fn write_new() -> serde_json::Value {
    json!({"path": "src/new.txt", "content": "hello\n"})
}

#[tokio::test]
async fn allow_with_updated_input_skips_the_prompt_for_the_patched_call() {
    let ws = Ws::new();
    script(
        &ws,
        "hooks/mover.sh",
        r#"echo '{"decision":"allow","updated_input":{"path":"src/patched.txt"}}'"#,
    );
    // `ask` and no approval surface: without the hook's allow this call would be denied.
    let g = headless_gate(&ws, &hook_policy("ask", "mover", "")).await;
    let o = ok(&g, "write", write_new()).await;
    assert_eq!(ws.read("src/patched.txt"), "hello\n");
    assert!(!exists(&ws.path("src/new.txt")));
    assert_eq!(
        audited(&g, &o),
        (
            "allow".into(),
            "hooks".into(),
            "hook `./hooks/mover.sh`".into()
        )
    );
}

#[tokio::test]
async fn allow_with_updated_input_outside_the_workspace_is_denied_at_scope() {
    let ws = Ws::new();
    script(
        &ws,
        "hooks/mover.sh",
        r#"echo '{"decision":"allow","updated_input":{"path":"../outside.txt"}}'"#,
    );
    let g = headless_gate(&ws, &hook_policy("ask", "mover", "")).await;
    let o = call(&g, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("scope"));
    assert!(!exists(&ws.root().parent().unwrap().join("outside.txt")));
    assert!(!exists(&ws.path("src/new.txt")));
}

#[tokio::test]
async fn allow_with_updated_input_onto_a_denied_key_is_denied_by_the_rule() {
    let ws = Ws::new();
    script(
        &ws,
        "hooks/mover.sh",
        r#"echo '{"decision":"allow","updated_input":{"path":"secret/x.txt"}}'"#,
    );
    let rule = "[[rules]]\nkey = \"write:secret/**\"\ndecision = \"deny\"\n";
    for mode in ["ask", "allow-all"] {
        let g = headless_gate(&ws, &hook_policy(mode, "mover", rule)).await;
        let o = call(&g, "write", write_new()).await;
        assert_eq!(o.status, Status::Denied, "{mode}: {o:#?}");
        assert_eq!(o.stage.as_deref(), Some("rules"), "{mode}");
        assert!(!exists(&ws.path("secret/x.txt")));
        assert!(!exists(&ws.path("src/new.txt")));
    }
}

#[tokio::test]
async fn duplicate_decision_key_is_invalid_and_denies() {
    let ws = Ws::new();
    script(
        &ws,
        "hooks/dup.sh",
        r#"echo '{"decision":"deny","decision":"allow"}'"#,
    );
    // `allow-all`, so a hook read as "allow" (or as no opinion) would let the write run.
    let g = headless_gate(&ws, &hook_policy("allow-all", "dup", "")).await;
    let o = call(&g, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("hooks"));
    let reason = o.reason.clone().unwrap_or_default();
    assert!(reason.contains("duplicate key `decision`"), "{reason}");
    assert!(reason.contains("./hooks/dup.sh"), "{reason}");
    assert!(!exists(&ws.path("src/new.txt")));
    assert_eq!(audited(&g, &o).2, "hook `./hooks/dup.sh`");
}

#[tokio::test]
async fn duplicate_keys_nested_in_updated_input_deny() {
    let ws = Ws::new();
    // Last-key-wins would write inside the workspace; first-key-wins would aim outside it.
    script(
        &ws,
        "hooks/dup.sh",
        r#"echo '{"updated_input":{"path":"../outside.txt","path":"src/b.txt"}}'"#,
    );
    let g = headless_gate(&ws, &hook_policy("allow-all", "dup", "")).await;
    let o = call(&g, "write", write_new()).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("hooks"));
    let reason = o.reason.clone().unwrap_or_default();
    assert!(reason.contains("duplicate key `path`"), "{reason}");
    assert!(!exists(&ws.path("src/b.txt")));
    assert!(!exists(&ws.path("src/new.txt")));
}
