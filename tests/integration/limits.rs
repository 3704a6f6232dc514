//! Per-call limits against the misbehaving test guest: each is stopped with an error naming
//! the limit, and the same gate keeps serving calls afterwards.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};
use toolgate::sandbox::Limits;
use toolgate::{Gate, Status};

/// After a guest was stopped, an ordinary call on the same gate still works.
async fn still_serves(gate: &Gate) {
    let o = ok(gate, "read", json!({"path": "probe.txt"})).await;
    assert_eq!(o.content, "     1\tstill here\n");
}

async fn hostile(limits: Limits, mode: &str) -> (Ws, Gate, toolgate::Observation) {
    let ws = Ws::new();
    ws.write("probe.txt", "still here\n");
    let gate = ws.gate_with(false, limits).await;
    let o = call(&gate, "test-hostile", json!({ "mode": mode })).await;
    (ws, gate, o)
}

#[tokio::test]
async fn infinite_loop_hits_the_timeout() {
    let started = Instant::now();
    let (_ws, gate, o) = hostile(tight_limits(), "loop").await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "limit");
    assert_eq!(o.data, json!({"limit": "timeout_ms"}));
    assert_eq!(
        o.reason.as_deref(),
        Some("the tool ran longer than its 500 ms deadline and was stopped")
    );
    assert_eq!(
        o.hint.as_deref(),
        Some("the `timeout_ms` limit stopped the tool; narrow the request, or raise `limits.timeout_ms` in .toolgate/policy.toml if it is legitimate")
    );
    still_serves(&gate).await;
}

#[tokio::test]
async fn huge_allocation_hits_the_memory_limit() {
    let (_ws, gate, o) = hostile(tight_limits(), "alloc").await;
    assert_eq!(code(&o), "limit", "{o:#?}");
    assert_eq!(o.data, json!({"limit": "max_memory_bytes"}));
    assert_eq!(
        o.reason.as_deref(),
        Some("the tool tried to use more than its 67108864 byte memory limit and was stopped")
    );
    still_serves(&gate).await;
}

#[tokio::test]
async fn huge_result_hits_the_result_limit() {
    // Enough memory and time for the guest to build its 64 MiB answer (a loaded CI machine
    // can take longer than the tight 500 ms); the result cap must refuse it.
    let limits = Limits {
        max_memory_bytes: 512 << 20,
        timeout: std::time::Duration::from_secs(20),
        ..tight_limits()
    };
    let (_ws, gate, o) = hostile(limits, "output").await;
    assert_eq!(code(&o), "limit", "{o:#?}");
    assert_eq!(o.data, json!({"limit": "max_result_bytes"}));
    assert_eq!(
        o.reason.as_deref(),
        Some("the tool returned 67108879 bytes, more than the 1048576 byte result limit")
    );
    still_serves(&gate).await;
}

#[tokio::test]
async fn unbounded_recursion_hits_the_stack_limit() {
    let (_ws, gate, o) = hostile(tight_limits(), "recurse").await;
    assert_eq!(code(&o), "limit", "{o:#?}");
    assert_eq!(o.data, json!({"limit": "stack"}));
    assert_eq!(
        o.reason.as_deref(),
        Some("the tool overflowed its stack (unbounded recursion?) and was stopped")
    );
    // No policy key raises the stack: the hint must not send the user to one.
    let hint = o.hint.as_deref().unwrap_or_default();
    assert!(
        hint.contains("no policy key raises it") && !hint.contains("limits."),
        "{hint}"
    );
    still_serves(&gate).await;
}

#[tokio::test]
async fn a_well_behaved_call_between_hostile_ones_is_unaffected() {
    let (_ws, gate, o) = hostile(tight_limits(), "ok").await;
    assert_eq!(o.status, Status::Ok);
    assert_eq!(o.content, "ok");
    for mode in ["loop", "alloc"] {
        let o = call(&gate, "test-hostile", json!({ "mode": mode })).await;
        assert_eq!(code(&o), "limit", "{mode}");
        let o = call(&gate, "test-hostile", json!({"mode": "ok"})).await;
        assert_eq!(o.status, Status::Ok, "after {mode}");
    }
}

#[tokio::test]
async fn output_over_budget_is_cut_and_saved_whole() {
    // The guest answers with 64 MiB; the model gets a 4 KiB preview and a file to page through.
    let limits = Limits {
        max_memory_bytes: 512 << 20,
        max_result_bytes: 128 << 20,
        max_output_bytes: 4096,
        // Reading back one 64 MiB line takes a while in a loaded debug test run.
        timeout: Duration::from_secs(20),
        ..Limits::default()
    };
    let (ws, gate, o) = hostile(limits, "output").await;
    assert_eq!(o.status, Status::Ok, "{}", o.summary);
    assert!(o.truncated);
    let reference = format!(".toolgate/outputs/{}.txt", o.audit_id);
    assert_eq!(o.full_output_ref.as_deref(), Some(reference.as_str()));
    assert_eq!(o.totals["bytes"].seen, 64 << 20);
    assert_eq!(o.totals["bytes"].returned, o.content.len() as u64);
    assert!(o.content.len() <= 4096, "{}", o.content.len());
    // Head and tail kept, and a marker in between that says how much is missing and where.
    let expected = format!(
        "{}\n[... truncated: 67104968 bytes (1 lines) omitted; the whole output is in {reference}: read it with offset/limit ...]\n{}",
        "x".repeat(2597),
        "x".repeat(1299)
    );
    assert!(
        o.content == expected,
        "{}",
        o.content.replace("xxxxxxxxxx", "")
    );
    let saved = std::fs::read(ws.path(&reference)).unwrap();
    assert_eq!(saved.len(), 64 << 20);
    assert!(saved.iter().all(|&b| b == b'x'));

    // `read` can open the saved output even though it is under .toolgate/.
    let o = ok(&gate, "read", json!({"path": reference, "limit": 1})).await;
    assert_eq!(o.totals["lines"].seen, 1);
    assert!(
        o.content.starts_with("     1\txxxx"),
        "{}",
        &o.content[..40]
    );
    assert!(o
        .content
        .contains("[line cut: 67108864 characters, showing 2000]"));
}

#[tokio::test]
async fn read_of_a_big_file_pages_within_the_output_budget() {
    let ws = Ws::new();
    let text: String = (1..=5000)
        .map(|i| format!("line number {i:05}\n"))
        .collect();
    ws.write("big.txt", &text);
    let limits = Limits {
        max_output_bytes: 4096,
        ..Limits::default()
    };
    let gate = ws.gate_with(false, limits).await;
    let o = ok(&gate, "read", json!({"path": "big.txt"})).await;
    // Every row is 25 bytes; the budget is 4096 minus read's 256-byte note reserve.
    let shown = (4096 - 256) / 25;
    let mut expected: String = (1..=shown)
        .map(|i| format!("{i:>6}\tline number {i:05}\n"))
        .collect();
    expected.push_str(&format!(
        "[truncated by output size budget: showing lines 1-{shown} of 5000; use offset={shown} to read more]\n"
    ));
    assert_eq!(o.content, expected);
    assert!(o.truncated);
    assert_eq!(
        o.totals["lines"],
        toolgate::tools::Total {
            seen: 5000,
            returned: shown as u64
        }
    );
    // `read` paged by itself, so the host had nothing to cut.
    assert_eq!(o.full_output_ref, None);
}
