//! Issue #17: see docs/decisions.md. `toolgate audit` reads one line per call (time,
//! session, tool, key, decision@stage, status, duration, call id), filters whole calls,
//! follows new calls live, escapes hostile names, and keeps `--json` as events.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use toolgate::state::StateDb;

fn run(ws: &Ws, args: &[&str]) -> Output {
    toolgate_command(ws).args(args).output().unwrap()
}

/// Make a call in its own process; its `audit_id`.
fn call(ws: &Ws, args: &[&str]) -> String {
    let out = run(ws, &[&["call", "--compact"][..], args].concat());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["audit_id"].as_str().unwrap().to_string()
}

fn stdout(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A table line's cells (columns are separated by at least two spaces; a cell has at most
/// one space in a row: `2026-01-02 03:04:05`, `12 ms`).
fn cells(line: &str) -> Vec<String> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// The cells a test can predict: session, tool, key, decision@stage, status, call id.
fn fixed(line: &str) -> Vec<String> {
    let c = cells(line);
    assert_eq!(c.len(), 8, "{line:?}");
    let time = c[0].as_bytes();
    assert!(
        time.len() == 19
            && time.iter().enumerate().all(|(i, b)| match i {
                4 | 7 => *b == b'-',
                10 => *b == b' ',
                13 | 16 => *b == b':',
                _ => b.is_ascii_digit(),
            }),
        "time {:?}",
        c[0]
    );
    assert!(
        c[6].ends_with(" ms") || c[6].ends_with(" s"),
        "duration {:?}",
        c[6]
    );
    [&c[1..6], &c[7..]].concat()
}

fn table(ws: &Ws, args: &[&str]) -> Vec<Vec<String>> {
    stdout(&run(ws, &[&["audit"][..], args].concat()))
        .lines()
        .map(fixed)
        .collect()
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Three calls: an allowed read, a read refused by the scope, a write allowed for the run in
/// session `other`.
fn three_calls(ws: &Ws) -> [String; 3] {
    ws.write("a.txt", "x\n");
    [
        call(ws, &["read", r#"{"path": "a.txt"}"#]),
        call(ws, &["read", r#"{"path": ".env"}"#]),
        call(
            ws,
            &[
                "--session",
                "other",
                "write",
                r#"{"path": "b.txt", "content": "y"}"#,
                "--allow-write",
            ],
        ),
    ]
}

#[test]
fn audit_prints_one_line_per_call_with_its_decision_and_status() {
    let ws = Ws::new();
    let [read, denied, write] = three_calls(&ws);
    let missing = call(&ws, &["read", r#"{"path": "missing.txt"}"#]);
    assert_eq!(
        table(&ws, &[]),
        vec![
            row(&[
                "default",
                "read",
                "read:a.txt",
                "allow@no-permission",
                "ok",
                &read
            ]),
            row(&["default", "read", "-", "deny@scope", "denied", &denied]),
            row(&[
                "other",
                "write",
                "write:./",
                "allow@session-allowlist",
                "ok",
                &write
            ]),
            row(&[
                "default",
                "read",
                "read:missing.txt",
                "allow@no-permission",
                "error:not-found",
                &missing
            ]),
        ]
    );
    // Aligned: every line has its call id at the same column (the ids are the same length).
    let text = stdout(&run(&ws, &["audit"]));
    let at: Vec<usize> = text.lines().map(|l| l.rfind("call-").unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] == w[1]), "{text}");
}

#[test]
fn audit_time_is_the_local_time_zone() {
    let ws = Ws::new();
    three_calls(&ws);
    let time_in = |tz: &str| {
        let out = toolgate_command(&ws)
            .env("TZ", tz)
            .args(["audit", "--limit", "1"])
            .output()
            .unwrap();
        let line = stdout(&out);
        let hm = &cells(&line)[0][11..16];
        let (h, m) = hm.split_once(':').unwrap();
        h.parse::<i32>().unwrap() * 60 + m.parse::<i32>().unwrap()
    };
    // POSIX TZ strings (no tz database needed): UTC, and UTC+5:30.
    let utc = time_in("UTC0");
    let india = time_in("IST-5:30");
    assert_eq!((india - utc).rem_euclid(24 * 60), 5 * 60 + 30);
}

#[test]
fn audit_filters_apply_to_whole_calls() {
    let ws = Ws::new();
    let [read, denied, write] = three_calls(&ws);
    let ids = |args: &[&str]| -> Vec<String> {
        table(&ws, args)
            .into_iter()
            .map(|r| r.last().unwrap().clone())
            .collect()
    };
    // The newest call, not the newest event.
    assert_eq!(ids(&["--limit", "1"]), vec![write.clone()]);
    assert_eq!(ids(&["--limit", "2"]), vec![denied.clone(), write.clone()]);
    assert_eq!(ids(&["--tool", "read"]), vec![read.clone(), denied.clone()]);
    assert_eq!(ids(&["--decision", "deny"]), vec![denied.clone()]);
    assert_eq!(
        ids(&["--tool", "read", "--limit", "1"]),
        vec![denied.clone()]
    );
    assert_eq!(ids(&["--call", &read]), vec![read.clone()]);
    assert_eq!(ids(&["--since", "3600"]), vec![read, denied, write]);
    assert_eq!(ids(&["--tool", "nope"]), Vec::<String>::new());
}

#[test]
fn audit_of_a_call_that_does_not_exist_says_so_and_exits_2() {
    let ws = Ws::new();
    three_calls(&ws);
    for json in [false, true] {
        let mut args = vec!["audit", "--call", "call-0000000000000000"];
        if json {
            args.push("--json");
        }
        let out = run(&ws, &args);
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "toolgate: the audit of this workspace has no call `call-0000000000000000`; \
             `toolgate audit` lists the calls, each with its id last\n"
        );
    }
}

#[test]
fn hostile_tool_session_and_key_names_do_not_forge_lines_or_colours() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let forged_tool = "evil\n2026-01-01 00:00:00  default  read  read:a.txt  allow@no-permission  ok  1 ms  call-forged";
    let red_session = "\u{1b}[31mred\u{1b}]0;title\u{7}";
    let ids = [
        call(&ws, &[forged_tool, "{}"]),
        call(
            &ws,
            &["--session", red_session, "read", r#"{"path": "a.txt"}"#],
        ),
    ];
    // A key with a newline, as a forged or hostile database row has it.
    {
        let db = StateDb::open(&ws.path(".toolgate/state.db")).unwrap();
        db.audit(
            "call-hostilekey",
            "default",
            "edit",
            &[
                ("intent", json!({})),
                (
                    "decision",
                    json!({"decision": "allow", "stage": "ask\r\u{1b}[2K", "permission": "edit:a\nb.txt"}),
                ),
                ("started", json!({})),
                ("completed", json!({"status": "ok", "duration_us": 5})),
            ],
        )
        .unwrap();
    }
    let text = stdout(&run(&ws, &["audit"]));
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, id) in lines
        .iter()
        .zip([&ids[0], &ids[1], &"call-hostilekey".to_string()])
    {
        assert!(line.ends_with(id.as_str()), "{line:?}");
    }
    assert!(
        lines[0].contains(r#""evil\n2026-01-01 00:00:00  default  read"#),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(r#""\x1b[31mred\x1b]0;title\x07""#),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains(r#""edit:a\nb.txt"  allow@"ask\r\x1b[2K""#),
        "{}",
        lines[2]
    );
}

#[test]
fn audit_json_still_prints_every_event() {
    let ws = Ws::new();
    let [read, denied, _] = three_calls(&ws);
    let events = |args: &[&str]| -> Vec<(String, String)> {
        stdout(&run(&ws, &[&["audit", "--json"][..], args].concat()))
            .lines()
            .map(|l| {
                let e: Value = serde_json::from_str(l).unwrap();
                (
                    e["call_id"].as_str().unwrap().into(),
                    e["event"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let of = |id: &String, names: &[&str]| -> Vec<(String, String)> {
        names.iter().map(|n| (id.clone(), n.to_string())).collect()
    };
    assert_eq!(
        events(&["--tool", "read"]),
        [
            of(&read, &["intent", "decision", "started", "completed"]),
            of(&denied, &["intent", "decision", "completed"])
        ]
        .concat()
    );
    // As before: `--limit` counts events here.
    assert_eq!(events(&["--limit", "2"]).len(), 2);
}

/// A `toolgate audit` child whose stdout lines arrive on a channel.
struct Follower {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Follower {
    fn start(ws: &Ws, args: &[&str]) -> Follower {
        let mut child = toolgate_command(ws)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Follower { child, lines }
    }

    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line from `toolgate audit --follow` within 60 s")
    }

    fn nothing_for(&self, wait: Duration) {
        if let Ok(line) = self.lines.recv_timeout(wait) {
            panic!("unexpected line {line:?}");
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn follow_prints_the_calls_so_far_then_each_new_call_once_it_completes() {
    let ws = Ws::new();
    let [read, _, _] = three_calls(&ws);
    let f = Follower::start(&ws, &["audit", "--follow", "--tool", "read"]);
    assert!(f.next().ends_with(&read));
    let _ = f.next();
    // A call by another process: a write (filtered out), then a read.
    call(
        &ws,
        &[
            "write",
            r#"{"path": "c.txt", "content": "z"}"#,
            "--allow-write",
        ],
    );
    let new = call(&ws, &["read", r#"{"path": "a.txt"}"#]);
    let line = f.next();
    assert_eq!(
        fixed(&line),
        row(&[
            "default",
            "read",
            "read:a.txt",
            "allow@no-permission",
            "ok",
            &new
        ])
    );
    f.nothing_for(Duration::from_millis(600));
}

#[test]
fn follow_prints_a_running_call_when_it_completes_and_plain_audit_shows_it_running() {
    let ws = Ws::new();
    let db = StateDb::open(&ws.path(".toolgate/state.db")).unwrap();
    // Signed as the user's own, as a gate would (an unsigned database with rows is quarantined).
    db.authenticate(&ws.keyring(), &ws.root()).unwrap();
    let begun = [
        ("intent", json!({})),
        (
            "decision",
            json!({"decision": "allow", "stage": "ask", "permission": "shell:make"}),
        ),
        ("started", json!({})),
    ];
    db.audit("call-long", "default", "shell", &begun).unwrap();
    db.flush_audit();
    let text = stdout(&run(&ws, &["audit"]));
    let c = cells(text.trim_end());
    assert_eq!(
        c[1..],
        row(&[
            "default",
            "shell",
            "shell:make",
            "allow@ask",
            "running",
            "-",
            "call-long"
        ])[..]
    );
    // Followed, the running call is not printed yet: each call is printed once, complete.
    let f = Follower::start(&ws, &["audit", "--follow"]);
    f.nothing_for(Duration::from_millis(600));
    db.audit(
        "call-long",
        "default",
        "shell",
        &[(
            "completed",
            json!({"status": "ok", "duration_us": 1_400_000}),
        )],
    )
    .unwrap();
    db.flush_audit();
    let c = cells(&f.next());
    assert_eq!(
        c[1..],
        row(&[
            "default",
            "shell",
            "shell:make",
            "allow@ask",
            "ok",
            "1.4 s",
            "call-long"
        ])[..]
    );
}

#[test]
fn follow_call_ends_once_that_call_has_completed() {
    let ws = Ws::new();
    let [read, _, _] = three_calls(&ws);
    let text = stdout(&run(&ws, &["audit", "--follow", "--call", &read]));
    assert_eq!(text.lines().count(), 1);
    assert!(text.trim_end().ends_with(&read));
    let text = stdout(&run(&ws, &["audit", "--json", "--follow", "--call", &read]));
    assert_eq!(text.lines().count(), 4);

    // A call still running: its line once it completes (not another call's), then the end.
    let db = StateDb::open(&ws.path(".toolgate/state.db")).unwrap();
    let begun = [
        ("intent", json!({})),
        ("decision", json!({"decision": "allow", "stage": "ask"})),
        ("started", json!({})),
    ];
    db.audit("call-long", "default", "shell", &begun).unwrap();
    db.flush_audit();
    let mut f = Follower::start(&ws, &["audit", "--follow", "--call", "call-long"]);
    f.nothing_for(Duration::from_millis(400));
    call(&ws, &["read", r#"{"path": "a.txt"}"#]);
    f.nothing_for(Duration::from_millis(400));
    db.audit(
        "call-long",
        "default",
        "shell",
        &[(
            "completed",
            json!({"status": "error", "error_code": "cancelled"}),
        )],
    )
    .unwrap();
    db.flush_audit();
    let c = cells(&f.next());
    assert_eq!(c[5..6], row(&["error:cancelled"])[..]);
    assert_eq!(c.last().unwrap(), "call-long");
    let began = Instant::now();
    while f.child.try_wait().unwrap().is_none() {
        assert!(began.elapsed() < Duration::from_secs(20), "still following");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn follow_json_streams_the_new_calls_events() {
    let ws = Ws::new();
    three_calls(&ws);
    let f = Follower::start(&ws, &["audit", "--json", "--follow", "--decision", "deny"]);
    let first: Value = serde_json::from_str(&f.next()).unwrap();
    assert_eq!(first["event"], json!("intent"));
    let _ = (f.next(), f.next());
    call(&ws, &["read", r#"{"path": "a.txt"}"#]);
    let denied = call(&ws, &["read", r#"{"path": ".env"}"#]);
    let seen: Vec<(String, String)> = (0..3)
        .map(|_| {
            let e: Value = serde_json::from_str(&f.next()).unwrap();
            (
                e["call_id"].as_str().unwrap().into(),
                e["event"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        ["intent", "decision", "completed"]
            .map(|e| (denied.clone(), e.to_string()))
            .to_vec()
    );
    f.nothing_for(Duration::from_millis(600));
}

#[test]
fn follow_ends_quietly_with_exit_0_when_its_reader_closes() {
    let ws = Ws::new();
    three_calls(&ws);
    let mut child = toolgate_command(&ws)
        .args(["audit", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close the pipe (as `| head -1` does) while nothing new is written.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("call-"), "{line:?}");
    drop(out);
    let began = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if began.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`toolgate audit --follow` still runs 20 s after its reader closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!((status.code(), err), (Some(0), String::new()));
}
