//! A command's exit status counts: a non-zero exit, a signal or a
//! timeout is an `error` observation (`exit-status`, `signal`, `timeout`) that still shows the
//! command's output, totals and `data` exactly as an `ok` one would; `toolgate call` exits 1
//! and MCP sets `isError`. A background job reports how it ended through `job_output`.

use crate::common::*;
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use toolgate::{Gate, Observation, Status};

async fn sh(gate: &Gate, input: Value) -> Observation {
    call(gate, "shell", input).await
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

/// Poll `job_output` until the job is no longer running; returns the last observation and
/// everything the job printed on stdout across the polls.
async fn until_finished(gate: &Gate, job: &str) -> (Observation, String) {
    let started = Instant::now();
    let mut printed = String::new();
    loop {
        let o = call(gate, "job_output", json!({ "job_id": job })).await;
        printed.push_str(o.content.split("[stderr]\n").next().unwrap_or_default());
        if o.data["state"] != "running" {
            return (o, printed);
        }
        assert_eq!(o.status, Status::Ok, "a running job is ok: {o:#?}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the job never finished: {o:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn false_is_an_exit_status_error_shown_like_a_success() {
    let ws = Ws::new();
    let g = gate_granting(&ws, &["shell"]).await;
    let ok = sh(&g, json!({"command": "true"})).await;
    assert_eq!(ok.status, Status::Ok, "{ok:#?}");
    assert_eq!(ok.error_code, None);
    assert_eq!(ok.data["exit_code"], 0);

    let o = sh(&g, json!({"command": "false"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "exit-status");
    assert_eq!(o.data["exit_code"], 1);
    assert_eq!(o.data["state"], "exited");
    assert_eq!(o.data["signal"], Value::Null);
    assert!(
        o.summary.starts_with("`false` exited with status 1 after "),
        "{}",
        o.summary
    );
    assert_eq!(o.reason.as_deref(), Some(o.summary.as_str()));
    assert_eq!(o.content, "");
    // The same host facts and totals as the successful command: nothing is lost by failing.
    assert_eq!(keys(&o.data), keys(&ok.data));
    assert_eq!(o.data["confinement"], ok.data["confinement"]);
    assert_eq!(
        o.totals.keys().collect::<Vec<_>>(),
        ok.totals.keys().collect::<Vec<_>>()
    );
    assert!(!o.totals.is_empty());
}

#[tokio::test]
async fn a_compound_command_keeps_its_stdout_stderr_and_status() {
    let ws = Ws::new();
    let g = gate_granting(&ws, &["shell"]).await;
    let o = sh(&g, json!({"command": "echo out; echo err >&2; exit 3"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "exit-status");
    assert_eq!(o.data["exit_code"], 3);
    assert_eq!(o.content, "out\n[stderr]\nerr\n");
    assert!(!o.truncated);
    assert_eq!(o.totals["stdout_bytes"].seen, 4);
    assert_eq!(o.totals["stdout_bytes"].returned, 4);
    assert_eq!(o.totals["stderr_lines"].seen, 1);
    assert_eq!(
        o.data["stdout"],
        json!({"bytes": 4, "lines": 1, "truncated": false})
    );
    assert_eq!(
        o.data["stderr"],
        json!({"bytes": 4, "lines": 1, "truncated": false})
    );
    assert_eq!(o.data["command"], "echo out; echo err >&2; exit 3");
    assert!(
        o.summary
            .starts_with("`echo out; echo err >&2; exit 3` exited with status 3 after "),
        "{}",
        o.summary
    );
}

#[tokio::test]
async fn a_failing_command_with_big_output_is_still_previewed_and_saved() {
    let ws = Ws::new();
    let g = gate_granting(&ws, &["shell"]).await;
    let o = sh(&g, json!({"command": "seq 1 200000; exit 2"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "exit-status");
    assert_eq!(o.data["exit_code"], 2);
    assert!(o.truncated);
    assert_eq!(o.data["stdout"]["lines"], 200000);
    assert!(o.content.starts_with("1\n2\n"));
    let saved = o.data["full_output_ref"].as_str().unwrap();
    assert!(saved.starts_with(".toolgate/outputs/"));
    assert!(ws.read(saved).contains("\n199999\n"));
}

#[tokio::test]
async fn a_command_killed_by_a_signal_is_a_signal_error() {
    let ws = Ws::new();
    // `kill` is dangerous: it asks under a broad grant; this exact text is granted.
    let command = "echo before; kill -9 $$";
    let g = gate_granting(&ws, &[&format!("shell:{command}")]).await;
    let o = sh(&g, json!({ "command": command })).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "signal");
    assert_eq!(o.data["signal"], 9);
    assert_eq!(o.data["exit_code"], Value::Null);
    assert_eq!(o.content, "before\n");
    assert!(o.summary.contains("signal 9 (SIGKILL)"), "{}", o.summary);
}

#[tokio::test]
async fn a_timed_out_command_is_a_timeout_error_with_its_output() {
    let ws = Ws::new();
    let g = gate_granting(&ws, &["shell"]).await;
    let o = sh(
        &g,
        json!({"command": "echo started; sleep 30", "timeout_ms": 300}),
    )
    .await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "timeout");
    assert_eq!(o.data["state"], "timed-out");
    assert_eq!(o.content, "started\n");
    assert!(o.data["confinement"].is_object(), "{o:#?}");
    assert!(o.summary.contains("timed out"), "{}", o.summary);
}

#[tokio::test]
async fn a_background_job_that_fails_says_so_in_job_output_and_job_kill_is_ok() {
    let ws = Ws::new();
    let g = gate_granting(&ws, &["shell"]).await;
    let o = sh(
        &g,
        json!({"command": "sleep 0.5; echo bye; exit 4", "auto_background_ms": 100}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "a job still running is ok: {o:#?}");
    assert_eq!(o.data["state"], "running");
    let job = o.data["job_id"].as_str().unwrap().to_string();
    let (o, printed) = until_finished(&g, &job).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "exit-status");
    assert_eq!(o.data["exit_code"], 4);
    assert_eq!(o.data["state"], "exited");
    assert_eq!(printed, "bye\n");
    assert!(
        o.summary
            .starts_with(&format!("job {job} exited with status 4")),
        "{}",
        o.summary
    );

    // One that succeeds is ok.
    let o = sh(
        &g,
        json!({"command": "sleep 0.5; echo fine", "auto_background_ms": 100}),
    )
    .await;
    let job = o.data["job_id"].as_str().unwrap().to_string();
    let (o, printed) = until_finished(&g, &job).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.data["exit_code"], 0);
    assert_eq!(printed, "fine\n");

    // Killing a running job is ok: the caller asked for its end.
    let o = sh(
        &g,
        json!({"command": "echo up; sleep 30", "run_in_background": true}),
    )
    .await;
    let job = o.data["job_id"].as_str().unwrap().to_string();
    let o = call(&g, "job_kill", json!({ "job_id": job })).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.error_code, None);
    assert_eq!(o.data["state"], "killed");
}

/// What a CI job sees: `toolgate call shell` exits 1 when the command fails, 0 when it passes.
#[test]
fn toolgate_call_exits_1_for_a_failing_command() {
    let ws = Ws::new();
    let run = |command: &str| {
        let out = toolgate_command(&ws)
            .args(["--grant", &format!("shell:{command}")])
            .args(["call", "shell", &json!({ "command": command }).to_string()])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), v)
    };
    let (status, v) = run("false");
    assert_eq!(
        (status, v["status"].clone(), v["error_code"].clone()),
        (Some(1), json!("error"), json!("exit-status")),
        "{v:#}"
    );
    assert_eq!(v["data"]["exit_code"], 1);
    let (status, v) = run("true");
    assert_eq!(
        (status, v["status"].clone()),
        (Some(0), json!("ok")),
        "{v:#}"
    );
}

/// Over MCP a failing command is `isError: true`, with the output and status in the result.
#[tokio::test]
async fn mcp_marks_a_failing_command_is_error() {
    let ws = Ws::new();
    let mut cmd = tokio::process::Command::new(crate::common::toolgate_bin());
    cmd.env("TOOLGATE_CACHE_DIR", cache_dir())
        .env_remove("TOOLGATE_SESSION")
        .env_remove("TOOLGATE_WORKSPACE")
        .env_remove("TOOLGATE_LOG")
        .arg("--workspace")
        .arg(ws.root())
        .args(["serve", "--grant", "shell"]);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let conn = ().serve(transport).await.unwrap();
    let shell = |command: &str| {
        let Value::Object(args) = json!({ "command": command }) else {
            unreachable!()
        };
        conn.call_tool(CallToolRequestParams::new("shell").with_arguments(args))
    };
    let r = shell("echo failing; exit 1").await.unwrap();
    let o = r.structured_content.clone().expect("structuredContent");
    assert_eq!(r.is_error, Some(true), "{o:#}");
    assert_eq!(o["error_code"], "exit-status");
    assert_eq!(o["data"]["exit_code"], 1);
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert!(
        text.starts_with("[shell error: exit-status] `echo failing; exit 1` exited with status 1"),
        "{text}"
    );
    assert!(text.contains("failing\n"), "{text}");
    let r = shell("true").await.unwrap();
    assert_eq!(r.is_error, Some(false));
    conn.cancel().await.unwrap();
}
