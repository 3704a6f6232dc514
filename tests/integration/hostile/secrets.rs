//! Issue #49 item 10: secrets are denied by identity, and their known values are redacted by
//! value.
//!
//! - A secret directory exchanged with a plain one by a process outside toolgate
//!   (`renameat2(RENAME_EXCHANGE)` in a loop) is still the secret under the plain name: grep,
//!   ls and read never show what it holds (host/src/workspace/view/remember.rs, the walk and the
//!   filesystem guard check the identity of what they opened).

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What only the secret directory holds.
const MARKER: &str = "MARKER-ssh-9fQ2vLx7Wc4Zt8Rb";
/// A file name both directories have.
const NAME: &str = "config";

/// `.ssh/config` (deny-listed, holding the marker) and `plain/config` (a plain file that
/// matches the same grep).
fn exchange_workspace() -> Ws {
    let ws = Ws::new();
    ws.write(
        &format!(".ssh/{NAME}"),
        format!("Host x\n  token {MARKER}\n"),
    )
    .write(".ssh/deeper/id_note", format!("token {MARKER}\n"))
    .write(&format!("plain/{NAME}"), "Host x\n  token nothing-here\n")
    .write("plain/deeper/id_note", "token nothing-here\n")
    .write("other.txt", "token nothing-here\n");
    ws
}

#[cfg(target_os = "linux")]
fn exchange(root: &Path) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        root.join("plain"),
        rustix::fs::CWD,
        root.join(".ssh"),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
}

/// A thread exchanging `plain` and `.ssh` as fast as it can until stopped (at most
/// `bound`). It touches only the test's temporary workspace.
struct Exchanger {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exchanger {
    fn start(root: PathBuf, bound: Duration) -> Exchanger {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            let began = Instant::now();
            while !s.load(Ordering::Relaxed) && began.elapsed() < bound {
                exchange(&root);
                n.fetch_add(1, Ordering::Relaxed);
            }
        });
        Exchanger {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Exchanger {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn shown(o: &toolgate::Observation) -> String {
    format!("{}\n{}", o.content, o.data)
}

/// The calls that could show the secret directory's contents under the plain name.
fn probes() -> Vec<(&'static str, Value)> {
    vec![
        ("grep", json!({"pattern": "token"})),
        ("grep", json!({"pattern": "token", "path": "plain"})),
        ("read", json!({"path": format!("plain/{NAME}")})),
        ("read", json!({"path": "plain/deeper/id_note"})),
        ("ls", json!({"path": ".", "depth": 3})),
    ]
}

/// Once exchanged (the gate saw the secret under its own name when it opened), the secret is
/// refused under the plain name, by every tool, and the plain directory now under the secret's
/// name is refused by name.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn an_exchanged_secret_directory_is_refused_under_its_new_name() {
    let ws = exchange_workspace();
    let gate = ws.gate(false).await;
    exchange(&ws.root());
    assert!(ws.read(&format!("plain/{NAME}")).contains(MARKER));
    for (tool, input) in probes() {
        let o = call(&gate, tool, input.clone()).await;
        let text = shown(&o);
        assert!(
            !text.contains(MARKER),
            "{tool} {input} showed the secret directory under its new name: {o:#?}"
        );
        if tool == "ls" {
            // Skipped like a secret by name: not listed, not shown as an empty directory.
            assert!(!text.contains("plain"), "{text}");
            assert!(text.contains("other.txt"), "{text}");
        }
        if tool == "grep" && input.get("path").is_none() {
            assert_eq!(o.status, toolgate::Status::Ok, "{o:#?}");
        }
    }
    // A second exchange puts the names back: the secret is refused by name again, and the
    // plain directory (for a while the secret's name) stays refused rather than trusted.
    exchange(&ws.root());
    for (tool, input) in probes() {
        let o = call(&gate, tool, input.clone()).await;
        assert!(!shown(&o).contains(MARKER), "{tool} {input}: {o:#?}");
    }
}

/// The attack: a process outside toolgate exchanges the directories in a loop while
/// grep (and read, ls) run, 25 rounds: the marker never appears.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn grep_never_shows_a_secret_directory_exchanged_in_a_loop() {
    let ws = exchange_workspace();
    let gate = ws.gate(false).await;
    let exchanger = Exchanger::start(ws.root(), Duration::from_secs(60));
    let mut leaked = Vec::new();
    let mut calls = 0;
    let mut greps_ok = 0;
    let began = Instant::now();
    'rounds: for _ in 0..25 {
        for (tool, input) in probes() {
            let o = call(&gate, tool, input.clone()).await;
            calls += 1;
            if tool == "grep" && o.status == toolgate::Status::Ok {
                greps_ok += 1;
            }
            if shown(&o).contains(MARKER) {
                leaked.push(format!("{tool} {input}: {}", shown(&o)));
            }
            if began.elapsed() > Duration::from_secs(40) {
                break 'rounds;
            }
        }
    }
    let swaps = exchanger.finish();
    assert!(swaps > 100, "the exchanger hardly ran ({swaps} exchanges)");
    assert!(
        greps_ok >= 25,
        "grep failed too often ({greps_ok} ok of {calls} calls)"
    );
    eprintln!("{calls} calls, {greps_ok} greps ok, {swaps} exchanges");
    assert!(
        leaked.is_empty(),
        "{} of {calls} calls showed the secret ({swaps} exchanges; {} of them grep), e.g.:\n{}",
        leaked.len(),
        leaked.iter().filter(|l| l.starts_with("grep")).count(),
        leaked.first().map(String::as_str).unwrap_or("")
    );
}

// Known secret values: the values of the workspace's deny-listed files are redacted by value,
// in every form, from the audit and from observations (host/src/state/secrets.rs).

/// A value no pattern finds (words, no secret-looking name next to it where it is used).
const VALUE: &str = "correct-horse-battery-staple-42";
const PLACEHOLDER: &str = "[secret value from .env:API_KEY]";

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// `toolgate audit --json` for `ws`.
fn audit_json(ws: &Ws) -> String {
    let out = toolgate_command(ws)
        .args(["audit", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_dotenv_value_in_a_tool_input_never_reaches_the_audit() {
    let ws = Ws::new();
    ws.write(".env", format!("# local\nAPI_KEY=\"{VALUE}\"\nDEBUG=1\n"));
    let gate = ws.gate(true).await;
    let encoded = b64(&format!("user:{VALUE}"));
    let content = format!("remember {VALUE} and {encoded}\n");
    let o = call(
        &gate,
        "write",
        json!({"path": "notes.txt", "content": content}),
    )
    .await;
    assert_eq!(o.status, toolgate::Status::Ok, "{o:#?}");
    // A short input (not file text): stored whole, scrubbed by value.
    call(&gate, "grep", json!({"pattern": VALUE})).await;
    gate.state().flush_audit();
    let events = gate
        .state()
        .audit_events(&toolgate::state::AuditQuery::default())
        .unwrap();
    drop(gate);
    let rows =
        serde_json::to_string(&events.iter().map(|e| &e.detail).collect::<Vec<_>>()).unwrap();
    let printed = audit_json(&ws);
    for (what, text) in [("audit rows", &rows), ("audit --json", &printed)] {
        for form in [VALUE, encoded.as_str()] {
            assert!(!text.contains(form), "`{form}` in the {what}:\n{text}");
        }
        assert!(text.contains(PLACEHOLDER), "{what}:\n{text}");
    }
}

#[tokio::test]
async fn grep_of_a_file_holding_a_dotenv_value_shows_the_placeholder() {
    let ws = Ws::new();
    ws.write(".env", format!("API_KEY={VALUE}\n"))
        .write("notes/copied.txt", format!("launch code: {VALUE}\n"));
    let gate = ws.gate(false).await;
    let o = ok(&gate, "grep", json!({"pattern": "launch code"})).await;
    let shown = format!("{}\n{}", o.content, o.data);
    assert!(!shown.contains(VALUE), "{shown}");
    assert!(shown.contains(PLACEHOLDER), "{shown}");
    // The file changes while the gate is open: its new value is redacted too.
    let second = "another-plain-words-value-77";
    ws.write(".env", format!("API_KEY={second}\n"))
        .write("notes/second.txt", format!("launch code: {second}\n"));
    std::thread::sleep(toolgate::state::secrets::REFRESH + Duration::from_millis(200));
    let o = ok(&gate, "grep", json!({"pattern": "launch code"})).await;
    let shown = format!("{}\n{}", o.content, o.data);
    assert!(!shown.contains(second), "{shown}");
    assert!(shown.contains(PLACEHOLDER), "{shown}");
}
