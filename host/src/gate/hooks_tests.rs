//! Unit tests of the hook runner: exit codes, JSON verdicts, timeouts and process groups, the
//! merge of several hooks, the scrubbed environment and the output cap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Instant;

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    /// Write an executable `#!/bin/sh` script and return its path.
    fn script(&self, name: &str, body: &str) -> String {
        // Never open for writing in this process: a fork by a test on another thread would
        // carry the descriptor, and running the script would fail with "Text file busy". The
        // text goes to a file beside it and a child `cp` makes the script.
        let path = self.root().join(name);
        let src = self.root().join(format!("{name}.src"));
        std::fs::write(&src, format!("#!/bin/sh\n{body}\n")).unwrap();
        let copied = std::process::Command::new("cp")
            .arg(&src)
            .arg(&path)
            .status()
            .unwrap();
        assert!(copied.success());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn hook(&self, name: &str, body: &str) -> HookSpec {
        spec(vec![self.script(name, body)])
    }

    async fn run(&self, hooks: &[HookSpec]) -> HookOutcome {
        self.run_tool(hooks, "bash").await
    }

    async fn run_tool(&self, hooks: &[HookSpec], tool: &str) -> HookOutcome {
        let input = json!({"command": "ls -la", "timeout": 5});
        let root = self.root();
        let event = HookEvent {
            tool,
            key: "bash:ls",
            session: "s1",
            input: &input,
            workspace: &root,
        };
        run_pre_tool_use(hooks, &event).await
    }
}

fn spec(command: Vec<String>) -> HookSpec {
    HookSpec {
        command,
        tools: Vec::new(),
        timeout_ms: DEFAULT_TIMEOUT_MS,
        fail_open: false,
        pins: None,
    }
}

fn deny_reason(outcome: &HookOutcome) -> (String, bool) {
    match &outcome.verdict {
        HookVerdict::Deny { reason, halt, .. } => (reason.clone(), *halt),
        other => panic!("expected deny, got {other:?}"),
    }
}

#[tokio::test]
async fn no_hooks_no_opinion() {
    let f = Fixture::new();
    let out = f.run(&[]).await;
    assert_eq!(out.verdict, HookVerdict::None);
    assert!(out.ran.is_empty());
    assert_eq!(out.updated_input, None);
}

#[tokio::test]
async fn exit_zero_without_output_has_no_opinion() {
    let f = Fixture::new();
    let h = f.hook("quiet.sh", "exit 0");
    let out = f.run(std::slice::from_ref(&h)).await;
    assert_eq!(out.verdict, HookVerdict::None);
    assert_eq!(out.ran, vec![h.name()]);
    assert_eq!(out.updated_input, None);
}

#[tokio::test]
async fn exit_zero_allow() {
    let f = Fixture::new();
    let h = f.hook("allow.sh", r#"echo '{"decision":"allow"}'"#);
    let out = f.run(std::slice::from_ref(&h)).await;
    assert_eq!(out.verdict, HookVerdict::Allow { by: h.name() });
}

#[tokio::test]
async fn exit_zero_ask_is_no_opinion() {
    let f = Fixture::new();
    let h = f.hook("ask.sh", r#"echo '{"decision":"ask"}'"#);
    assert_eq!(f.run(&[h]).await.verdict, HookVerdict::None);
}

#[tokio::test]
async fn exit_zero_json_deny() {
    let f = Fixture::new();
    let h = f.hook(
        "jdeny.sh",
        r#"echo '{"decision":"deny","reason":"policy says no"}'"#,
    );
    let out = f.run(std::slice::from_ref(&h)).await;
    assert_eq!(
        out.verdict,
        HookVerdict::Deny {
            by: h.name(),
            reason: "policy says no".into(),
            halt: false
        }
    );
}

#[tokio::test]
async fn exit_two_denies_with_stderr() {
    let f = Fixture::new();
    let h = f.hook("deny.sh", "echo '  no rm -rf here  ' >&2\nexit 2");
    let out = f.run(std::slice::from_ref(&h)).await;
    assert_eq!(
        out.verdict,
        HookVerdict::Deny {
            by: h.name(),
            reason: "no rm -rf here".into(),
            halt: false
        }
    );
}

#[tokio::test]
async fn exit_two_with_empty_stderr_still_denies() {
    let f = Fixture::new();
    let h = f.hook("mute.sh", "exit 2");
    let out = f.run(std::slice::from_ref(&h)).await;
    let (reason, halt) = deny_reason(&out);
    assert_eq!(
        reason,
        format!("hook `{}` denied without a reason", h.name())
    );
    assert!(!halt);
}

#[tokio::test]
async fn exit_49_denies_and_halts() {
    let f = Fixture::new();
    let h = f.hook("halt.sh", "echo 'stop the turn' >&2\nexit 49");
    let out = f.run(&[h]).await;
    assert_eq!(deny_reason(&out), ("stop the turn".to_string(), true));
}

#[tokio::test]
async fn other_exit_code_fails_closed() {
    let f = Fixture::new();
    let h = f.hook("crash.sh", "echo oops >&2\nexit 3");
    let out = f.run(std::slice::from_ref(&h)).await;
    let (reason, halt) = deny_reason(&out);
    assert!(reason.contains(&h.name()), "{reason}");
    assert!(reason.contains("exited with code 3"), "{reason}");
    assert!(!halt);
}

#[tokio::test]
async fn fail_open_lets_a_crash_through() {
    let f = Fixture::new();
    let mut h = f.hook("crash.sh", "exit 3");
    h.fail_open = true;
    let out = f.run(std::slice::from_ref(&h)).await;
    assert_eq!(out.verdict, HookVerdict::None);
    assert_eq!(out.ran, vec![h.name()]);
}

#[tokio::test]
async fn fail_open_does_not_soften_exit_two() {
    let f = Fixture::new();
    let mut h = f.hook("deny.sh", "exit 2");
    h.fail_open = true;
    assert!(matches!(
        f.run(&[h]).await.verdict,
        HookVerdict::Deny { .. }
    ));
}

#[tokio::test]
async fn missing_program_fails_closed() {
    let f = Fixture::new();
    let h = spec(vec![f
        .root()
        .join("nope.sh")
        .to_string_lossy()
        .into_owned()]);
    let (reason, _) = deny_reason(&f.run(&[h]).await);
    assert!(reason.contains("could not be started"), "{reason}");
}

#[tokio::test]
async fn killed_by_signal_fails_closed() {
    let f = Fixture::new();
    let h = f.hook("sig.sh", "kill -KILL $$");
    let (reason, _) = deny_reason(&f.run(&[h]).await);
    assert!(reason.contains("signal 9"), "{reason}");
}

#[tokio::test]
async fn timeout_denies_and_kills_promptly() {
    let f = Fixture::new();
    let mut h = f.hook("slow.sh", "sleep 5");
    h.timeout_ms = 300;
    let start = Instant::now();
    let out = f.run(std::slice::from_ref(&h)).await;
    let elapsed = start.elapsed();
    let (reason, halt) = deny_reason(&out);
    assert!(reason.contains("timed out after 300 ms"), "{reason}");
    assert!(reason.contains(&h.name()), "{reason}");
    assert!(!halt);
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let f = Fixture::new();
    let marker = f.root().join("survived");
    // A background grandchild keeps the pipes open and would write the marker later.
    let mut h = f.hook(
        "bg.sh",
        &format!("(sleep 1; touch '{}') &\nsleep 5", marker.display()),
    );
    h.timeout_ms = 300;
    let start = Instant::now();
    let out = f.run(&[h]).await;
    assert!(matches!(out.verdict, HookVerdict::Deny { .. }));
    assert!(start.elapsed() < Duration::from_secs(3));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "grandchild outlived the timeout");
}

#[tokio::test]
async fn leftover_process_holding_output_times_out() {
    let f = Fixture::new();
    let marker = f.root().join("survived");
    let mut h = f.hook(
        "daemon.sh",
        &format!("(sleep 1; touch '{}') &\nexit 0", marker.display()),
    );
    h.timeout_ms = 300;
    let start = Instant::now();
    let (reason, _) = deny_reason(&f.run(&[h]).await);
    assert!(reason.contains("kept its output open"), "{reason}");
    assert!(start.elapsed() < Duration::from_secs(3));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "left-behind process outlived the timeout");
}

#[tokio::test]
async fn timeout_fail_open_is_no_opinion() {
    let f = Fixture::new();
    let mut h = f.hook("slow.sh", "sleep 5");
    h.timeout_ms = 200;
    h.fail_open = true;
    assert_eq!(f.run(&[h]).await.verdict, HookVerdict::None);
}

#[tokio::test]
async fn deny_beats_allow() {
    let f = Fixture::new();
    let allow = f.hook("allow.sh", r#"echo '{"decision":"allow"}'"#);
    let deny = f.hook("deny.sh", "echo nope >&2\nexit 2");
    let out = f.run(&[allow.clone(), deny.clone()]).await;
    assert_eq!(
        out.verdict,
        HookVerdict::Deny {
            by: deny.name(),
            reason: "nope".into(),
            halt: false
        }
    );
    assert_eq!(out.ran, vec![allow.name(), deny.name()]);
}

#[tokio::test]
async fn reasons_are_joined_and_halt_is_sticky() {
    let f = Fixture::new();
    let a = f.hook("a.sh", "echo first >&2\nexit 2");
    let b = f.hook("b.sh", "echo second >&2\nexit 49");
    let out = f.run(&[a.clone(), b]).await;
    assert_eq!(
        out.verdict,
        HookVerdict::Deny {
            by: a.name(),
            reason: "first; second".into(),
            halt: true
        }
    );
}

#[tokio::test]
async fn allow_beats_none() {
    let f = Fixture::new();
    let none = f.hook("none.sh", "exit 0");
    let allow = f.hook("allow.sh", r#"echo '{"decision":"allow"}'"#);
    let out = f.run(&[none, allow.clone()]).await;
    assert_eq!(out.verdict, HookVerdict::Allow { by: allow.name() });
}

#[tokio::test]
async fn duplicate_commands_run_once() {
    let f = Fixture::new();
    let counter = f.root().join("count");
    let h = f.hook("count.sh", &format!("echo x >> '{}'", counter.display()));
    let mut other = h.clone();
    other.timeout_ms = 5_000;
    let out = f.run(&[h.clone(), other, h.clone()]).await;
    assert_eq!(out.ran, vec![h.name()]);
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "x\n");
}

#[tokio::test]
async fn hooks_run_in_parallel() {
    let f = Fixture::new();
    let a = f.hook("a.sh", "sleep 1");
    let b = f.hook("b.sh", "sleep 1");
    let c = f.hook("c.sh", "sleep 1");
    let start = Instant::now();
    let out = f.run(&[a, b, c]).await;
    assert_eq!(out.verdict, HookVerdict::None);
    assert!(
        start.elapsed() < Duration::from_millis(2500),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn updated_inputs_are_shallow_merged_in_order() {
    let f = Fixture::new();
    let a = f.hook(
        "a.sh",
        r#"echo '{"updated_input":{"command":"ls","timeout":1,"opts":{"x":1}}}'"#,
    );
    let b = f.hook(
        "b.sh",
        r#"echo '{"decision":"allow","updated_input":{"timeout":2,"opts":{"y":2}}}'"#,
    );
    let out = f.run(&[a, b.clone()]).await;
    assert_eq!(out.verdict, HookVerdict::Allow { by: b.name() });
    assert_eq!(
        out.updated_input,
        Some(json!({"command": "ls", "timeout": 2, "opts": {"y": 2}}))
    );
}

#[tokio::test]
async fn updated_input_from_denying_hook_is_ignored() {
    let f = Fixture::new();
    let a = f.hook("a.sh", r#"echo '{"updated_input":{"a":1}}'"#);
    let b = f.hook(
        "b.sh",
        r#"echo '{"decision":"deny","updated_input":{"b":2}}'"#,
    );
    let out = f.run(&[a, b]).await;
    assert!(matches!(out.verdict, HookVerdict::Deny { .. }));
    assert_eq!(out.updated_input, Some(json!({"a": 1})));
}

#[tokio::test]
async fn invalid_json_on_exit_zero_fails_closed() {
    let f = Fixture::new();
    let h = f.hook("bad.sh", "echo 'this is not json'");
    let (reason, _) = deny_reason(&f.run(std::slice::from_ref(&h)).await);
    assert!(reason.contains(&h.name()), "{reason}");
    assert!(reason.contains("invalid JSON"), "{reason}");

    let mut open = f.hook("bad2.sh", "echo '[1,2]'");
    assert!(matches!(
        f.run(std::slice::from_ref(&open)).await.verdict,
        HookVerdict::Deny { .. }
    ));
    open.fail_open = true;
    assert_eq!(f.run(&[open]).await.verdict, HookVerdict::None);
}

#[tokio::test]
async fn bad_fields_on_exit_zero_fail_closed() {
    let f = Fixture::new();
    let a = f.hook("a.sh", r#"echo '{"decision":"maybe"}'"#);
    let (reason, _) = deny_reason(&f.run(&[a]).await);
    assert!(reason.contains("unknown decision"), "{reason}");
    let b = f.hook("b.sh", r#"echo '{"updated_input":[1]}'"#);
    let (reason, _) = deny_reason(&f.run(&[b]).await);
    assert!(reason.contains("not an object"), "{reason}");
}

#[tokio::test]
async fn tools_filter_skips_other_tools() {
    let f = Fixture::new();
    let mut h = f.hook("deny.sh", "exit 2");
    h.tools = vec!["write".into(), "edit".into()];
    let out = f.run_tool(std::slice::from_ref(&h), "bash").await;
    assert_eq!(out.verdict, HookVerdict::None);
    assert!(out.ran.is_empty());
    let out = f.run_tool(&[h], "edit").await;
    assert!(matches!(out.verdict, HookVerdict::Deny { .. }));
}

#[tokio::test]
async fn hook_sees_the_event_on_stdin_in_the_workspace() {
    let f = Fixture::new();
    let dump = f.root().join("event.json");
    let cwd = f.root().join("cwd.txt");
    let h = f.hook(
        "dump.sh",
        &format!(
            "cat > '{}'\npwd > '{}'\necho \"$TOOLGATE_HOOK_EVENT\" >> '{}'",
            dump.display(),
            cwd.display(),
            cwd.display()
        ),
    );
    let out = f.run(&[h]).await;
    assert_eq!(out.verdict, HookVerdict::None);
    let event: Value = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    assert_eq!(event["hook_event"], "PreToolUse");
    assert_eq!(event["tool"], "bash");
    assert_eq!(event["key"], "bash:ls");
    assert_eq!(event["session"], "s1");
    assert_eq!(event["input"], json!({"command": "ls -la", "timeout": 5}));
    assert_eq!(event["workspace"], f.root().to_string_lossy().as_ref());
    let cwd = std::fs::read_to_string(&cwd).unwrap();
    let mut lines = cwd.lines();
    assert_eq!(lines.next(), Some(f.root().to_string_lossy().as_ref()));
    assert_eq!(lines.next(), Some("PreToolUse"));
}

#[tokio::test]
async fn hook_that_ignores_stdin_is_fine() {
    let f = Fixture::new();
    // A big input the hook never reads: writing it must not hang or fail the hook.
    let input = json!({"content": "x".repeat(1 << 20)});
    let root = f.root();
    let event = HookEvent {
        tool: "write",
        key: "write:a",
        session: "s1",
        input: &input,
        workspace: &root,
    };
    let h = f.hook("allow.sh", r#"echo '{"decision":"allow"}'"#);
    let out = run_pre_tool_use(std::slice::from_ref(&h), &event).await;
    assert_eq!(out.verdict, HookVerdict::Allow { by: h.name() });
}

#[tokio::test]
async fn environment_is_scrubbed() {
    // Set once by this test only; no other test reads or writes it.
    std::env::set_var("TOOLGATE_SECRET_TEST", "1");
    let f = Fixture::new();
    let dump = f.root().join("env.txt");
    let h = f.hook("env.sh", &format!("env > '{}'", dump.display()));
    assert_eq!(f.run(&[h]).await.verdict, HookVerdict::None);
    let env = std::fs::read_to_string(&dump).unwrap();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    assert!(!names.contains(&"TOOLGATE_SECRET_TEST"), "{env}");
    assert!(names.contains(&"TOOLGATE_HOOK_EVENT"), "{env}");
    // Only the allowlist plus what sh itself adds.
    for name in names {
        assert!(
            ENV_ALLOWLIST.contains(&name)
                || [EVENT_ENV, "PWD", "OLDPWD", "SHLVL", "_"].contains(&name),
            "unexpected variable {name} in {env}"
        );
    }
}

#[tokio::test]
async fn huge_output_is_capped_and_drained() {
    let f = Fixture::new();
    // 1 MiB on stderr then exit 2: must not block, reason is capped.
    let h = f.hook(
        "loud.sh",
        "head -c 1048576 /dev/zero | tr '\\0' 'a' >&2\nexit 2",
    );
    let (reason, _) = deny_reason(&f.run(&[h]).await);
    assert_eq!(reason.len(), OUTPUT_CAP);
}

#[test]
fn strict_parse_rejects_duplicate_keys_at_any_depth() {
    let dup = |text: &str| parse_strict(text).unwrap_err().to_string();
    assert!(dup(r#"{"decision":"deny","decision":"allow"}"#).contains("duplicate key `decision`"));
    assert!(dup(r#"{"updated_input":{"path":"a","path":"b"}}"#).contains("duplicate key `path`"));
    assert!(dup(r#"{"a":[1,{"b":{"c":1,"c":1}}]}"#).contains("duplicate key `c`"));
    // Escapes are decoded before comparing: `\u0061` is `a`.
    assert!(dup(r#"{"a":1,"\u0061":2}"#).contains("duplicate key `a`"));
    // A hostile key is shown escaped and cut short.
    let long = format!(
        r#"{{"{k}":1,"{k}":2}}"#,
        k = format!("\\n{}", "x".repeat(500))
    );
    let msg = dup(&long);
    assert!(!msg.contains('\n') && msg.len() < 200, "{msg}");

    let text = r#"{"decision":"allow","n":[1,-2,3.5,true,null,"s"],"o":{"a":{"a":{}}}}"#;
    assert_eq!(
        parse_strict(text).unwrap(),
        serde_json::from_str::<Value>(text).unwrap()
    );
    assert!(parse_strict(r#"{"a":1} {"a":2}"#).is_err());
    assert!(parse_strict(&"[".repeat(1000)).is_err());
}

#[tokio::test]
async fn duplicate_keys_fail_closed_unless_open() {
    let f = Fixture::new();
    let mut h = f.hook("dup.sh", r#"echo '{"decision":"deny","decision":"allow"}'"#);
    let (reason, halt) = deny_reason(&f.run(std::slice::from_ref(&h)).await);
    assert!(reason.contains(&h.name()), "{reason}");
    assert!(reason.contains("duplicate key `decision`"), "{reason}");
    assert!(!halt);
    // The invalid-output policy: a fail-open hook has no opinion (it does not allow).
    h.fail_open = true;
    assert_eq!(f.run(&[h]).await.verdict, HookVerdict::None);

    let nested = f.hook(
        "nested.sh",
        r#"echo '{"decision":"allow","updated_input":{"path":"a","path":"b"}}'"#,
    );
    let out = f.run(&[nested]).await;
    let (reason, _) = deny_reason(&out);
    assert!(reason.contains("duplicate key `path`"), "{reason}");
    assert_eq!(out.updated_input, None);
}

#[test]
fn spec_deserializes_with_defaults() {
    let spec: HookSpec = serde_json::from_value(json!({"command": ["./check.sh", "-v"]})).unwrap();
    assert_eq!(
        spec,
        HookSpec {
            command: vec!["./check.sh".into(), "-v".into()],
            tools: vec![],
            timeout_ms: 10_000,
            fail_open: false,
            pins: None,
        }
    );
    assert_eq!(spec.name(), "./check.sh -v");
    assert!(serde_json::from_value::<HookSpec>(json!({"command": ["x"], "bogus": 1})).is_err());
}
