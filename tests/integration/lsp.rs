//! The language-server tools (issue #21): with Debian's pylsp (installed by
//! tests/scripts/install-pylsp.sh; skipped with the reason elsewhere, required under `CI`),
//! diagnostics before and after a fix made with `edit`, definition, references and symbols on
//! a small project, a rename across two files shown as a diff and refused when a file changed
//! behind the tool's back, a killed server restarted; with small fake servers, a hang and a
//! flood bounded by the call's limits; the session ceiling of the tools that write.

use crate::common::{cache_dir, code, Ws, SESSION};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use toolgate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::{Gate, GateOptions, Observation, Status};

/// Whether pylsp is here (installing it when it can); under CI a missing server fails. The
/// script's text is in the test binary: a test run as nobody (unprivileged.rs, which installs
/// pylsp as root first) may not reach the checkout.
fn pylsp() -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let script = "tests/scripts/install-pylsp.sh";
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(include_str!("../scripts/install-pylsp.sh"))
            .arg(script)
            .output();
        match out {
            Ok(o) if o.status.success() => true,
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
                assert!(std::env::var_os("CI").is_none(), "CI must run the pylsp tests: {why}");
                eprintln!("skipped: the lsp tool tests need pylsp (Debian's python3-pylsp and python3-pyflakes): {why}");
                false
            }
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "CI must run the pylsp tests: {e}");
                eprintln!("skipped: {script} could not run: {e}");
                false
            }
        }
    })
}

/// Answers every request with `answer` and keeps it.
struct Recording {
    answer: Answer,
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Recording {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        self.requests.lock().unwrap().push(request);
        let a = self.answer;
        Box::pin(async move { Some(a) })
    }
}

impl Recording {
    fn descriptions(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.description.clone())
            .collect()
    }
}

/// A gate in `ask` mode (plus `policy`) whose prompts are answered with `answer`.
async fn gate(ws: &Ws, policy: &str, answer: Answer) -> (Gate, Arc<Recording>) {
    ws.write(".toolgate/policy.toml", format!("mode = \"ask\"\n{policy}"));
    let approver = Arc::new(Recording {
        answer,
        requests: Mutex::default(),
    });
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

async fn call(g: &Gate, tool: &str, input: Value) -> Observation {
    g.call(SESSION, tool, input).await
}

async fn ok(g: &Gate, tool: &str, input: Value) -> Observation {
    let o = call(g, tool, input).await;
    assert_eq!(o.status, Status::Ok, "{tool}: {o:#?}");
    o
}

/// The diagnostics of the one file an `lsp_diagnostics` answer is about.
fn diagnostics(o: &Observation) -> Vec<Value> {
    o.data["files"][0]["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

const BROKEN: &str =
    "import os\n\n\ndef area(r):\n    return 3.14 * r * radius\n\n\nprint(os.name, area(2))\n";

#[tokio::test]
async fn diagnostics_show_the_error_then_clean_once_edit_fixes_it_and_edit_can_append_them() {
    if !pylsp() {
        return;
    }
    let ws = Ws::new();
    ws.write("geo.py", BROKEN);
    let (g, _) = gate(&ws, "[lsp]\ndiagnostics_after_edit = true\n", Answer::Once).await;
    let o = ok(&g, "lsp_diagnostics", json!({"path": "geo.py"})).await;
    let d = diagnostics(&o);
    assert!(
        d.iter().any(|d| d["message"]
            .as_str()
            .unwrap()
            .contains("undefined name 'radius'")
            && d["line"] == 5
            && d["severity"] == "error"),
        "{o:#?}"
    );
    assert!(o.content.contains("geo.py:5:"), "{}", o.content);
    assert_eq!(o.data["servers"][0]["server"], "pylsp", "{o:#?}");

    // The whole workspace: every Python file is checked, the clean ones are counted, the
    // broken one is listed.
    ws.write("clean.py", "print(1)\n");
    ws.write("notes.txt", "not python\n");
    let o = ok(&g, "lsp_diagnostics", json!({})).await;
    assert_eq!(o.data["checked"], 2, "{o:#?}");
    let listed: Vec<&str> = o.data["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec!["geo.py"], "{o:#?}");

    // Fixed with `edit`: the edit's own observation carries the new (empty) diagnostics, and
    // asking again says the file is clean.
    ok(&g, "read", json!({"path": "geo.py"})).await;
    let e = ok(
        &g,
        "edit",
        json!({"path": "geo.py", "old_string": "* radius", "new_string": "* r"}),
    )
    .await;
    assert!(
        e.content
            .contains("diagnostics after the change: none in geo.py"),
        "{}",
        e.content
    );
    let o = ok(&g, "lsp_diagnostics", json!({"path": "geo.py"})).await;
    assert!(diagnostics(&o).is_empty(), "{o:#?}");

    // Broken again behind the server's back (no tool wrote it): the server is sent the file
    // as it is now, so the answer is current.
    ws.write("geo.py", BROKEN.replace("* r\n", "* radius\n"));
    let o = ok(&g, "lsp_diagnostics", json!({"path": "geo.py"})).await;
    assert!(!diagnostics(&o).is_empty(), "{o:#?}");

    // Secrets stay out of reach: the tools refuse them like any other tool.
    ws.write(".env", "TOKEN=x\n");
    let o = call(&g, "lsp_diagnostics", json!({"path": ".env"})).await;
    assert_ne!(o.status, Status::Ok, "{o:#?}");
}

/// A small project: a package with a function and a class, used from a second file.
fn project(ws: &Ws) {
    ws.write("pkg/__init__.py", "");
    ws.write(
        "pkg/util.py",
        "def helper(x):\n    return x + 1\n\n\nclass Box:\n    def size(self):\n        return helper(2)\n",
    );
    ws.write(
        "main.py",
        "from pkg.util import helper\n\nprint(helper(1))\n",
    );
}

#[tokio::test]
async fn definition_references_and_symbols_on_a_small_project() {
    if !pylsp() {
        return;
    }
    let ws = Ws::new();
    project(&ws);
    let (g, asked) = gate(&ws, "", Answer::Once).await;
    let o = ok(
        &g,
        "lsp_definition",
        json!({"path": "main.py", "line": 3, "symbol": "helper"}),
    )
    .await;
    let loc = &o.data["locations"][0];
    assert_eq!(loc["path"], "pkg/util.py", "{o:#?}");
    assert_eq!(loc["line"], 1, "{o:#?}");
    assert_eq!(loc["outside"], false);
    assert!(o.content.contains("pkg/util.py:1:"), "{}", o.content);

    let o = ok(
        &g,
        "lsp_references",
        json!({"path": "pkg/util.py", "line": 1, "symbol": "helper"}),
    )
    .await;
    let mut at: Vec<String> = o.data["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{}:{}", l["path"].as_str().unwrap(), l["line"]))
        .collect();
    at.sort();
    assert!(
        at.contains(&"main.py:3".to_string()) && at.contains(&"pkg/util.py:7".to_string()),
        "{at:?}"
    );

    let o = ok(&g, "lsp_symbols", json!({"path": "pkg/util.py"})).await;
    let symbols: Vec<(String, u64)> = o.data["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["depth"].as_u64().unwrap(),
            )
        })
        .collect();
    for want in [("helper", 0), ("Box", 0), ("size", 1)] {
        assert!(
            symbols.contains(&(want.0.to_string(), want.1)),
            "{want:?} in {symbols:?}"
        );
    }
    // Reading tools ask nobody.
    assert!(
        asked.descriptions().is_empty(),
        "{:?}",
        asked.descriptions()
    );

    // A place that is not there is named in words.
    let o = call(
        &g,
        "lsp_definition",
        json!({"path": "main.py", "line": 3, "symbol": "nothing_here"}),
    )
    .await;
    assert_ne!(o.status, Status::Ok);
    assert!(
        o.reason
            .as_deref()
            .unwrap_or("")
            .contains("`nothing_here` is not on line 3 of main.py"),
        "{o:#?}"
    );
}

#[tokio::test]
async fn a_rename_across_two_files_is_shown_as_a_diff_applied_whole_and_refused_when_stale() {
    if !pylsp() {
        return;
    }
    let ws = Ws::new();
    project(&ws);
    let (g, asked) = gate(&ws, "", Answer::Once).await;
    let rename =
        json!({"path": "pkg/util.py", "line": 1, "symbol": "helper", "new_name": "assist"});

    // Read-before-write covers every file the rename touches, not only `path`.
    ok(&g, "read", json!({"path": "pkg/util.py"})).await;
    let o = call(&g, "lsp_rename", rename.clone()).await;
    assert_eq!(code(&o), "not-read", "{o:#?}");
    assert!(o.reason.as_deref().unwrap().contains("main.py"), "{o:#?}");
    assert!(ws.read("main.py").contains("helper"));

    ok(&g, "read", json!({"path": "main.py"})).await;
    let o = ok(&g, "lsp_rename", rename.clone()).await;
    let shown = asked.descriptions().last().cloned().unwrap();
    for needle in [
        "a/main.py",
        "+print(assist(1))",
        "a/pkg/util.py",
        "+def assist(x):",
    ] {
        assert!(
            shown.contains(needle),
            "{needle} not in the prompt:\n{shown}"
        );
    }
    assert_eq!(
        ws.read("main.py"),
        "from pkg.util import assist\n\nprint(assist(1))\n"
    );
    assert!(ws.read("pkg/util.py").contains("return assist(2)"));
    assert_eq!(o.data["files"].as_array().unwrap().len(), 2, "{o:#?}");

    // The written files count as read; one changed behind the tool's back is refused, and
    // nothing is written anywhere.
    ws.write(
        "main.py",
        "from pkg.util import assist\n\nprint(assist(2))\n",
    );
    let before = ws.read("pkg/util.py");
    let o = call(
        &g,
        "lsp_rename",
        json!({"path": "pkg/util.py", "line": 1, "symbol": "assist", "new_name": "aid"}),
    )
    .await;
    assert_eq!(code(&o), "stale", "{o:#?}");
    assert!(o.reason.as_deref().unwrap().contains("main.py"), "{o:#?}");
    assert_eq!(ws.read("pkg/util.py"), before);

    // `lsp_replace_symbol` replaces one definition, shown the same way.
    ok(&g, "read", json!({"path": "main.py"})).await;
    let o = ok(
        &g,
        "lsp_replace_symbol",
        json!({"path": "pkg/util.py", "symbol": "Box.size", "new_text": "def size(self):\n        return 42"}),
    )
    .await;
    assert!(
        ws.read("pkg/util.py").contains("return 42"),
        "{}",
        ws.read("pkg/util.py")
    );
    assert!(asked
        .descriptions()
        .last()
        .unwrap()
        .contains("+        return 42"));

    // The history has it: `toolgate undo` puts the file back like any other write.
    let undo = crate::common::toolgate_command(&ws)
        .args(["undo", &o.audit_id])
        .output()
        .unwrap();
    assert!(
        undo.status.success(),
        "{}",
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(ws.read("pkg/util.py"), before);
}

#[tokio::test]
async fn the_tools_that_write_are_capped_at_session_scope() {
    let ws = Ws::new();
    project(&ws);
    let (g, _) = gate(&ws, "", Answer::Project).await;
    ok(&g, "read", json!({"path": "pkg/util.py"})).await;
    ok(&g, "read", json!({"path": "main.py"})).await;
    let tools = g.tools().collect::<Vec<_>>();
    for name in ["lsp_rename", "lsp_replace_symbol", "lsp_diagnostics"] {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        assert_eq!(t.ceiling, toolgate::tools::Ceiling::Session, "{name}");
    }
    if !pylsp() {
        return;
    }
    let before = ws.read("main.py");
    let o = call(
        &g,
        "lsp_rename",
        json!({"path": "pkg/util.py", "line": 1, "symbol": "helper", "new_name": "assist"}),
    )
    .await;
    assert_eq!(code(&o), "ceiling-violation", "{o:#?}");
    assert_eq!(ws.read("main.py"), before);
    assert!(!ws.path(".toolgate/grants.toml").exists());
}

#[tokio::test]
async fn a_killed_server_is_started_again_and_the_answer_says_so() {
    if !pylsp() {
        return;
    }
    let ws = Ws::new();
    ws.write("geo.py", BROKEN);
    let (g, _) = gate(&ws, "", Answer::Once).await;
    ok(&g, "lsp_diagnostics", json!({"path": "geo.py"})).await;
    let pid = g.lsp().server_pid("python").expect("pylsp runs");
    // SAFETY: a signal to the server this test's gate started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(i32::try_from(pid).unwrap(), libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while g.lsp().server_pid("python").is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = ok(&g, "lsp_diagnostics", json!({"path": "geo.py"})).await;
    assert_eq!(o.data["servers"][0]["restarted"], true, "{o:#?}");
    assert!(o.content.contains("restarted"), "{}", o.content);
    assert!(!diagnostics(&o).is_empty(), "{o:#?}");

    // `lsp_restart` stops it; the next question starts a fresh one.
    let o = ok(&g, "lsp_restart", json!({"language": "python"})).await;
    assert_eq!(o.data["restarted"], json!(["python"]), "{o:#?}");
    assert!(g.lsp().server_pid("python").is_none());
    let o = call(&g, "lsp_restart", json!({"language": "cobol"})).await;
    assert_ne!(o.status, Status::Ok);
}

/// A fake server (Python) for `.fk` files, from the workspace policy.
fn fake_policy(ws: &Ws, body: &str) -> String {
    // In the workspace: the server's view has a private /tmp.
    let script = ws.path("fake_lsp.py");
    let prelude = "import sys, json\n\
def read():\n    n = 0\n    while True:\n        line = sys.stdin.buffer.readline()\n        if not line:\n            sys.exit(0)\n        if line in (b'\\r\\n', b'\\n'):\n            break\n        if line.lower().startswith(b'content-length:'):\n            n = int(line.split(b':')[1])\n    return json.loads(sys.stdin.buffer.read(n))\n\
def write(obj):\n    b = json.dumps(obj).encode()\n    sys.stdout.buffer.write(b'Content-Length: %d\\r\\n\\r\\n' % len(b) + b)\n    sys.stdout.buffer.flush()\n\
m = read()\nwrite({'jsonrpc': '2.0', 'id': m['id'], 'result': {'capabilities': {'definitionProvider': True}}})\n";
    std::fs::write(&script, format!("{prelude}{body}")).unwrap();
    format!(
        "[lsp.fake]\ncommand = [\"python3\", {:?}]\nextensions = [\"fk\"]\n",
        script.to_string_lossy()
    )
}

#[tokio::test]
async fn a_server_that_hangs_or_floods_is_bounded_by_the_call() {
    let ws = Ws::new();
    ws.write("a.fk", "x\n");
    // Hangs: answers `initialize`, then reads for ever and never publishes anything.
    let policy = fake_policy(&ws, "import time\nwhile True:\n    read()\n");
    let (g, _) = gate(&ws, &policy, Answer::Once).await;
    let started = Instant::now();
    let o = ok(
        &g,
        "lsp_diagnostics",
        json!({"path": "a.fk", "timeout_ms": 1500}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o.data["timed_out"], json!(["a.fk"]), "{o:#?}");
    assert!(o.content.contains("a.fk"), "{}", o.content);

    // Floods: a message larger than any the host reads; the server is cut off, in words.
    let ws = Ws::new();
    ws.write("a.fk", "x\n");
    let policy = fake_policy(
        &ws,
        "read()\nread()\nsys.stdout.buffer.write(b'Content-Length: 999999999\\r\\n\\r\\n')\nwhile True:\n    sys.stdout.buffer.write(b'x' * 65536)\n",
    );
    let (g, _) = gate(&ws, &policy, Answer::Once).await;
    let started = Instant::now();
    let o = call(&g, "lsp_definition", json!({"path": "a.fk", "line": 1})).await;
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    assert_ne!(o.status, Status::Ok, "{o:#?}");
    assert!(
        o.reason
            .as_deref()
            .unwrap_or("")
            .contains("language server"),
        "{o:#?}"
    );
}
