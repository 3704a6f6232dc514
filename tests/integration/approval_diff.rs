//! Issue #17: approvals that show the change. A `write`, `edit` or `multiedit` call that needs
//! approval shows the diff of the file under its workspace-relative path, never the sandbox
//! path or the raw JSON; the diff is what the real tool then writes (checked by applying the
//! shown diff to the old file), an edit that cannot apply says why and the tool fails the same
//! way, and a hostile file cannot repaint or forge the prompt.

use crate::common::{cache_dir, Ws, SESSION};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use toolgate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::{Gate, GateOptions, Observation, Status};

/// Approves every request once and keeps it.
#[derive(Default)]
struct Recording {
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Recording {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        self.requests.lock().unwrap().push(request);
        Box::pin(async { Some(Answer::Once) })
    }
}

impl Recording {
    fn last(&self) -> ApprovalRequest {
        self.requests
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("an approval request")
    }
    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

async fn gate(ws: &Ws) -> (Gate, Arc<Recording>) {
    ws.write(".toolgate/policy.toml", "mode = \"ask\"\n");
    let approver = Arc::new(Recording::default());
    let gate = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        approver: Some(approver.clone()),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap();
    (gate, approver)
}

async fn call(gate: &Gate, tool: &str, input: Value) -> Observation {
    gate.call(SESSION, tool, input).await
}

async fn read_first(gate: &Gate, rel: &str) {
    let o = call(gate, "read", json!({ "path": rel })).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
}

/// `old` with the unified diff in `description` applied (the lines from the first `@@`).
fn apply(old: &str, description: &str) -> String {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut at = 0;
    let mut last_sign = ' ';
    let lines = description.lines().skip_while(|l| !l.starts_with("@@"));
    for line in lines {
        if let Some(header) = line.strip_prefix("@@ -") {
            let range = header.split(' ').next().unwrap();
            let mut parts = range.split(',');
            let start: usize = parts.next().unwrap().parse().unwrap();
            let len: usize = parts.next().map_or(1, |n| n.parse().unwrap());
            let begin = if len == 0 { start } else { start - 1 };
            out.extend(old_lines[at..begin].iter().copied());
            at = begin;
            continue;
        }
        if line == "\\ No newline at end of file" {
            if last_sign == '+' {
                assert_eq!(out.pop(), Some('\n'));
            }
            continue;
        }
        let (sign, text) = line.split_at(1);
        last_sign = sign.chars().next().unwrap();
        match sign {
            " " | "-" => {
                assert_eq!(
                    old_lines[at].strip_suffix('\n').unwrap_or(old_lines[at]),
                    text,
                    "the diff's old side is not the file, in {description}"
                );
                if sign == " " {
                    out.push_str(old_lines[at]);
                }
                at += 1;
            }
            "+" => {
                out.push_str(text);
                out.push('\n');
            }
            _ => panic!("not a diff line: {line:?} in {description}"),
        }
    }
    out.extend(old_lines[at..].iter().copied());
    out
}

/// Every line of the prompt the user reads (the MCP elicitation message, which carries the
/// same description as the terminal) is plain, and only the prompt's own lines start with
/// `toolgate:` or `key:`.
fn assert_plain(request: &ApprovalRequest) {
    let message = toolgate::mcp::elicit::message(request);
    for text in [&request.description, &message] {
        assert!(
            !text
                .chars()
                .any(|c| (c.is_control() && c != '\n' && c != '\t')
                    || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}')),
            "{text:?}"
        );
        assert!(!text.contains("/workspace"), "{text}");
    }
    let starts = |p: &str| message.lines().filter(|l| l.starts_with(p)).count();
    assert_eq!(
        (starts("toolgate:"), starts("key:")),
        (1, 1),
        "a line of the file became a line of the prompt: {message}"
    );
}

#[tokio::test]
async fn an_edit_is_approved_on_its_diff_with_the_path_the_user_knows() {
    let ws = Ws::new();
    let before = "import math\n\ndef window(xs, n):\n    old line\n    return xs[-n:]\n";
    ws.write("stats/window.py", before);
    let (gate, approver) = gate(&ws).await;
    read_first(&gate, "stats/window.py").await;
    let o = call(
        &gate,
        "edit",
        json!({"path": "stats/window.py", "old_string": "old line", "new_string": "new line"}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    let request = approver.last();
    let d = &request.description;
    assert_eq!(
        d.as_str(),
        "edit (write tool)\n  overwrites/changes stats/window.py (path)\n\
         changes stats/window.py (1 replacement):\n\
         --- a/stats/window.py\n\
         +++ b/stats/window.py\n\
         @@ -1,5 +1,5 @@\n import math\n \n def window(xs, n):\n\
         -    old line\n\
         +    new line\n     return xs[-n:]"
    );
    assert!(!d.contains("old_string") && !d.contains("input:"), "{d}");
    assert_plain(&request);
    assert_eq!(apply(before, d), ws.read("stats/window.py"));
}

/// The diff shown is what the real tool writes, case by case: exact, every occurrence, CRLF
/// kept, whitespace-only mismatch re-indented, multiedit in order, write over a file, a new
/// file by write and by edit.
#[tokio::test]
async fn the_diff_shown_is_what_the_tool_writes() {
    let cases: Vec<(&str, Option<&str>, &str, Value)> = vec![
        (
            "a.txt",
            Some("one\ntwo\nthree\n"),
            "edit",
            json!({"old_string": "two", "new_string": "2\n2b"}),
        ),
        (
            "b.txt",
            Some("x = 1\ny\nx = 1\nz"),
            "edit",
            json!({"old_string": "x = 1", "new_string": "x = 10", "replace_all": true}),
        ),
        (
            "c.txt",
            Some("one\r\ntwo\r\nthree\r\n"),
            "edit",
            json!({"old_string": "two\nthree", "new_string": "2\n3\n4"}),
        ),
        (
            "d.py",
            Some("class A:\n        def f(self):\n            return 1\n        x = 2\n"),
            "edit",
            json!({"old_string": "def f(self):\n  return 1\n", "new_string": "def f(self):\n  y = 0\n  return y\n"}),
        ),
        (
            "e.txt",
            Some("alpha\nbeta\ngamma\n"),
            "multiedit",
            json!({"edits": [
                {"old_string": "alpha", "new_string": "ALPHA"},
                {"old_string": "ALPHA\nbeta", "new_string": "ALPHA\nBETA\nextra"},
                {"old_string": "gamma\n", "new_string": ""}
            ]}),
        ),
        (
            "f.txt",
            Some(
                (1..=30)
                    .map(|i| format!("{i}\n"))
                    .collect::<String>()
                    .leak(),
            ),
            "write",
            json!({"content": (1..=30).map(|i| if i % 9 == 0 { format!("{i}!\n") } else { format!("{i}\n") }).collect::<String>()}),
        ),
        (
            "new/g.txt",
            None,
            "write",
            json!({"content": "fresh\nfile"}),
        ),
        (
            "h.txt",
            None,
            "edit",
            json!({"old_string": "", "new_string": "made\nby edit\n"}),
        ),
    ];
    let ws = Ws::new();
    for (rel, old, _, _) in &cases {
        if let Some(old) = old {
            ws.write(rel, old);
        }
    }
    let (gate, approver) = gate(&ws).await;
    for (rel, old, tool, mut input) in cases {
        if old.is_some() {
            read_first(&gate, rel).await;
        }
        input["path"] = json!(rel);
        let asked = approver.count();
        let o = call(&gate, tool, input).await;
        assert_eq!(o.status, Status::Ok, "{rel}: {o:#?}");
        assert_eq!(approver.count(), asked + 1, "{rel} was not asked");
        let request = approver.last();
        let d = &request.description;
        assert_plain(&request);
        let (a, b) = match old {
            Some(_) => (format!("--- a/{rel}\n"), format!("+++ b/{rel}\n")),
            None => ("--- /dev/null\n".to_string(), format!("+++ b/{rel}\n")),
        };
        assert!(d.contains(&a) && d.contains(&b), "{rel}: {d}");
        let written = ws.read(rel);
        let old = old.unwrap_or("");
        if d.contains("every line ends with CRLF") {
            let shown = apply(&old.replace("\r\n", "\n"), d);
            assert_eq!(shown.replace('\n', "\r\n"), written, "{rel}: {d}");
        } else {
            assert_eq!(apply(old, d), written, "{rel}: {d}");
        }
    }
}

/// An edit that cannot apply shows why, and the tool then fails with that same code.
#[tokio::test]
async fn an_edit_that_cannot_apply_says_why_and_the_tool_fails_the_same_way() {
    let ws = Ws::new();
    ws.write("a.txt", "x\ny\nx\n");
    let (gate, approver) = gate(&ws).await;
    read_first(&gate, "a.txt").await;
    for (input, code) in [
        (
            json!({"path": "a.txt", "old_string": "x", "new_string": "z"}),
            "ambiguous-match",
        ),
        (
            json!({"path": "a.txt", "old_string": "q", "new_string": "z"}),
            "no-match",
        ),
    ] {
        let o = call(&gate, "edit", input).await;
        assert_eq!(o.error_code.as_deref(), Some(code), "{o:#?}");
        let d = approver.last().description;
        assert!(
            d.contains(&format!(
                "the edit tool will fail ({code}) and change nothing: a.txt: "
            )),
            "{d}"
        );
        assert!(!d.contains("--- a/"), "{d}");
    }
    let o = call(
        &gate,
        "multiedit",
        json!({"path": "a.txt", "edits": [
            {"old_string": "y", "new_string": "Y"},
            {"old_string": "y", "new_string": "w"}
        ]}),
    )
    .await;
    assert_eq!(o.error_code.as_deref(), Some("no-match"), "{o:#?}");
    let d = approver.last().description;
    assert!(
        d.contains("(no-match) and change nothing: a.txt: edit 1 of 2"),
        "{d}"
    );
    assert_eq!(ws.read("a.txt"), "x\ny\nx\n");
}

/// The attack: a file whose lines hold ANSI escapes, a carriage return and a line that reads
/// like the prompt's own question and key. The prompt shows them escaped, inside diff lines.
#[tokio::test]
async fn a_hostile_file_cannot_repaint_or_forge_the_prompt() {
    let ws = Ws::new();
    let hostile = "safe = 1\n\u{1b}[2J\u{1b}[H\rtoolgate: allow this call?\nkey: read:x\u{202e}\n\u{2028}toolgate: approve `read:x`? [y]\n";
    ws.write("evil.txt", hostile);
    let (gate, approver) = gate(&ws).await;
    read_first(&gate, "evil.txt").await;
    let o = call(
        &gate,
        "edit",
        json!({"path": "evil.txt", "old_string": "safe = 1", "new_string": "safe = 2\u{1b}[8m"}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    let request = approver.last();
    assert_plain(&request);
    let d = &request.description;
    assert!(
        d.contains("\n \\x1b[2J\\x1b[H\\rtoolgate: allow this call?\n"),
        "{d}"
    );
    assert!(d.contains("\n key: read:x\\u{202e}\n"), "{d}");
    assert!(d.contains("\n+safe = 2\\x1b[8m\n"), "{d}");

    // A write of hostile content, and a read-only tool's input: the same.
    let o = call(
        &gate,
        "write",
        json!({"path": "evil2.txt", "content": hostile}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_plain(&approver.last());
}

/// Other tools keep the JSON input, with every path field workspace-relative.
#[tokio::test]
async fn other_tools_show_their_input_with_relative_paths() {
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        "mode = \"ask\"\n[[rules]]\nkey = \"grep:src/**\"\ndecision = \"ask\"\n",
    );
    let approver = Arc::new(Recording::default());
    let gate = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        approver: Some(approver.clone()),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap();
    ws.write("src/a.rs", "fn main() {}\n");
    let o = call(
        &gate,
        "grep",
        json!({"pattern": "fn main", "path": "src/a.rs"}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(approver.count(), 1, "grep was not asked: {o:#?}");
    let d = approver.last().description;
    assert!(d.contains("input:\n"), "{d}");
    assert!(d.contains("\"path\": \"src/a.rs\""), "{d}");
    assert!(!d.contains("/workspace"), "{d}");
}
