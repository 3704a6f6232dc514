//! The `toolgate` command line, run as a separate process like a script or CI job would.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Output, Stdio};

fn run(ws: &Ws, args: &[&str]) -> Output {
    toolgate_command(ws).args(args).output().unwrap()
}

/// The exit code and the observation printed on stdout.
fn observed(out: &Output) -> (i32, Value) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), v)
}

#[test]
fn call_grep_prints_the_observation_and_exits_0() {
    let ws = Ws::new();
    ws.write("src/main.rs", "fn main() {\n    todo!()\n}\n");
    let out = run(&ws, &["call", "grep", r#"{"pattern": "todo"}"#]);
    let (status, mut v) = observed(&out);
    assert_eq!(status, 0);
    assert!(v["audit_id"].as_str().unwrap().starts_with("call-"));
    v["audit_id"] = json!("<audit>");
    assert_eq!(v["content"], json!("src/main.rs:2:    todo!()\n"));
    assert_eq!(v["status"], json!("ok"));
    assert_eq!(
        v["summary"],
        json!("grep `todo`: 1 matching lines in 1 file")
    );
    // Pretty-printed by default, one line with --compact.
    assert!(String::from_utf8_lossy(&out.stdout).lines().count() > 5);
    let out = run(
        &ws,
        &["call", "--compact", "grep", r#"{"pattern": "todo"}"#],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

#[test]
fn exit_codes_say_ok_error_usage_denied() {
    let ws = Ws::new();
    ws.write(".env", "X=1\n");
    let (status, v) = observed(&run(&ws, &["call", "read", r#"{"path": ".env"}"#]));
    assert_eq!(
        (status, v["status"].clone(), v["stage"].clone()),
        (3, json!("denied"), json!("scope"))
    );

    let (status, v) = observed(&run(&ws, &["call", "read", r#"{"path": "missing.txt"}"#]));
    assert_eq!((status, v["error_code"].clone()), (1, json!("not-found")));

    let out = run(&ws, &["call", "read", "{not json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("toolgate: the input is not valid JSON: "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (status, v) = observed(&run(
        &ws,
        &[
            "call",
            "edit",
            r#"{"path": "a.txt", "old_string": "", "new_string": "x"}"#,
        ],
    ));
    assert_eq!((status, v["stage"].clone()), (3, json!("ask")));

    let (status, v) = observed(&run(&ws, &["call", "nope", "{}"]));
    assert_eq!(
        (status, v["error_code"].clone()),
        (1, json!("unknown-tool"))
    );
}

#[test]
fn read_then_edit_in_two_processes_shares_the_default_session() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    let (status, _) = observed(&run(&ws, &["call", "read", r#"{"path": "a.txt"}"#]));
    assert_eq!(status, 0);
    let edit = r#"{"path": "a.txt", "old_string": "hello", "new_string": "bye"}"#;
    let (status, v) = observed(&run(&ws, &["call", "edit", edit, "--allow-write"]));
    assert_eq!(status, 0, "{v:#}");
    assert_eq!(ws.read("a.txt"), "bye\n");

    // Another named session has not read it.
    let (status, v) = observed(&run(
        &ws,
        &[
            "--session",
            "other",
            "call",
            "edit",
            r#"{"path": "a.txt", "old_string": "bye", "new_string": "ciao"}"#,
            "--allow-write",
        ],
    ));
    assert_eq!((status, v["error_code"].clone()), (1, json!("not-read")));

    // Forgetting the session drops its reads.
    let out = run(&ws, &["session", "forget"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "forgot session `default` (1 read records)\n"
    );
    let (status, v) = observed(&run(
        &ws,
        &[
            "call",
            "edit",
            r#"{"path": "a.txt", "old_string": "bye", "new_string": "ciao"}"#,
            "--allow-write",
        ],
    ));
    assert_eq!((status, v["error_code"].clone()), (1, json!("not-read")));
    assert_eq!(ws.read("a.txt"), "bye\n");
}

#[test]
fn tools_json_lists_the_builtins_with_their_risk() {
    let ws = Ws::new();
    let out = run(&ws, &["tools", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<(String, String, String, bool)> = tools
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["risk"].as_str().unwrap().to_string(),
                t["ceiling"].as_str().unwrap().to_string(),
                t["builtin"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, String, String, bool)> = [
        ("download", "network", "project"),
        ("edit", "write", "project"),
        ("fetch", "network", "project"),
        ("glob", "read-only", "project"),
        ("grep", "read-only", "project"),
        ("job_kill", "exec", "session"),
        ("job_output", "exec", "session"),
        ("ls", "read-only", "project"),
        ("lsp_call_hierarchy", "read-only", "session"),
        ("lsp_definition", "read-only", "session"),
        ("lsp_diagnostics", "read-only", "session"),
        ("lsp_references", "read-only", "session"),
        ("lsp_rename", "write", "session"),
        ("lsp_replace_symbol", "write", "session"),
        ("lsp_restart", "read-only", "session"),
        ("lsp_symbols", "read-only", "session"),
        ("multiedit", "write", "project"),
        ("read", "read-only", "project"),
        ("shell", "exec", "session"),
        ("write", "write", "project"),
    ]
    .iter()
    .map(|(n, r, c)| (n.to_string(), r.to_string(), c.to_string(), true))
    .collect();
    assert_eq!(listed, expected);
    for t in &tools {
        assert_eq!(t["input_schema"]["type"], json!("object"), "{}", t["name"]);
        assert_eq!(t["digest"].as_str().unwrap().len(), 64);
        // The host compiles a built-in's schema as draft 7 only when this holds (else as
        // 2020-12, ~8 ms more per one-shot call): keep the built-ins on the fast path.
        assert!(
            toolgate::tools::input_schema::draft_neutral(&t["input_schema"]),
            "{}'s input schema uses a keyword whose meaning differs between JSON Schema draft 7 and 2020-12: {}",
            t["name"],
            t["input_schema"]
        );
    }
}

#[test]
fn call_reads_its_input_from_stdin() {
    let ws = Ws::new();
    ws.write("a.txt", "from stdin\n");
    let mut child = toolgate_command(&ws)
        .args(["call", "read", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"path": "a.txt"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let (status, v) = observed(&out);
    assert_eq!(status, 0);
    assert_eq!(v["content"], json!("     1\tfrom stdin\n"));
}

#[test]
fn audit_json_prints_the_events() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let (_, first) = observed(&run(&ws, &["call", "read", r#"{"path": "a.txt"}"#]));
    let (_, second) = observed(&run(&ws, &["call", "read", r#"{"path": ".env"}"#]));
    let out = run(&ws, &["audit", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["call_id"].as_str().unwrap().to_string(),
                e["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let a = first["audit_id"].as_str().unwrap().to_string();
    let b = second["audit_id"].as_str().unwrap().to_string();
    let expected: Vec<(String, String)> = [
        (&a, "intent"),
        (&a, "decision"),
        (&a, "started"),
        (&a, "completed"),
        (&b, "intent"),
        (&b, "decision"),
        (&b, "completed"),
    ]
    .iter()
    .map(|(c, e)| (c.to_string(), e.to_string()))
    .collect();
    assert_eq!(seen, expected);
    assert_eq!(events[0]["session"], json!("default"));
    assert_eq!(events[0]["detail"]["input"], json!({"path": "a.txt"}));

    // Filters: by decision, by call.
    let out = run(&ws, &["audit", "--json", "--decision", "deny"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
    let out = run(&ws, &["audit", "--json", "--call", &a]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4);
}

/// The ci preset never prompts, even run from a terminal (a developer trying the CI recipe
/// by hand): the call is denied with the hint at once. The default policy on the same
/// terminal does ask, so the check can tell the two apart. Needs `script` (util-linux) for a
/// terminal.
#[test]
fn the_ci_preset_never_prompts_even_on_a_terminal() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: `script` (Debian package util-linux) is not installed");
        return;
    }
    let ws = Ws::new();
    let bin = crate::common::toolgate_bin();
    let bin = bin.display();
    let on_terminal = |preset: &str| {
        let line = format!(
            "{bin} -w '{}' {preset} call write '{{\"path\":\"a.txt\",\"content\":\"x\"}}' --compact",
            ws.root().display()
        );
        let out = std::process::Command::new("timeout")
            .args(["20", "script", "-qec", &line, "/dev/null"])
            .env("TOOLGATE_CACHE_DIR", cache_dir())
            .env("XDG_CONFIG_HOME", ws.user_root().join("xdg-config"))
            .env("XDG_STATE_HOME", ws.user_root().join("xdg-state"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ci = on_terminal("--preset ci");
    assert!(
        ci.contains("\"status\":\"denied\"") && ci.contains("headless"),
        "{ci}"
    );
    assert!(!ci.contains("approve `"), "{ci}");
    let default = on_terminal("");
    assert!(default.contains("approve `write:./`?"), "{default}");
    assert!(!ws.path("a.txt").exists());
}

#[test]
fn a_bad_plugin_name_or_a_taken_directory_is_a_usage_error_not_a_host_failure() {
    let ws = Ws::new();
    let out = run(&ws, &["plugin", "new", "Bad Name!"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a valid plugin name") && err.contains("word-count"),
        "{err}"
    );
    assert!(!ws.path("Bad Name!").exists());
    ws.write("taken/file.txt", "mine\n");
    let taken = ws.path("taken");
    let out = run(
        &ws,
        &["plugin", "new", "ok-name", "--dir", taken.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"));
    assert_eq!(ws.read("taken/file.txt"), "mine\n");
}
