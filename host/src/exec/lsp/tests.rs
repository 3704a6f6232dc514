//! Language servers run confined and bounded: a real `pylsp` (Debian's python3-pylsp, installed
//! by tests/scripts/install-pylsp.sh when missing) for diagnostics, definitions and a restart
//! after it is killed; small fake servers for hangs, floods and crashes.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::exec::ExecConfig;
use std::sync::OnceLock;

fn host(root: &Path) -> ExecHost {
    ExecHost::new(
        root.to_path_buf(),
        ExecConfig {
            output_budget: 10_000,
            max_processes: 256,
            ..ExecConfig::default()
        },
    )
}

/// pylsp's argv, or `None` (with the reason printed) where it cannot be had; under CI a
/// missing server fails the test, since CI can install it.
fn pylsp() -> Option<Vec<String>> {
    static FOUND: OnceLock<Option<String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scripts/install-pylsp.sh");
        let out = std::process::Command::new("bash").arg(&script).output();
        match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .map(str::to_string),
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
                assert!(std::env::var_os("CI").is_none(), "CI must run the pylsp tests: {why}");
                eprintln!("skipped: the language server tests need pylsp (Debian's python3-pylsp and python3-pyflakes): {why}");
                None
            }
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "CI must run the pylsp tests: {e}");
                eprintln!("skipped: {} could not run: {e}", script.display());
                None
            }
        }
    });
    found.as_ref().map(|p| vec![p.clone()])
}

fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    (d, root)
}

#[test]
fn uris_round_trip_odd_names() {
    let p = Path::new("/w/a dir/ü#?.py");
    assert_eq!(path_of(&uri(p)).unwrap(), p);
    assert!(path_of("http://x/y").is_none());
}

#[test]
fn pylsp_reports_an_error_then_clean_after_the_fix_and_finds_a_definition() {
    let Some(argv) = pylsp() else { return };
    let (_d, root) = canonical_tempdir();
    let a = root.join("a.py");
    let broken = "import os\nprint(os.name, undefined_name)\n";
    std::fs::write(&a, broken).unwrap();
    let h = host(&root);
    let servers = Servers::default();
    let (s, restarted) = servers
        .get(&h, "python", &argv, Duration::from_secs(60))
        .unwrap();
    assert!(!restarted);
    let seen = s.publications(&a);
    let (v, _) = s.sync(&a, "python", broken).unwrap();
    let p = s
        .diagnostics_after(&a, seen, v, Duration::from_secs(60))
        .unwrap();
    let text = serde_json::to_string(&p.diagnostics).unwrap();
    assert!(text.contains("undefined name"), "{text}");

    let fixed = "import os\nprint(os.name)\n";
    std::fs::write(&a, fixed).unwrap();
    let seen = s.publications(&a);
    let (v, sent) = s.sync(&a, "python", fixed).unwrap();
    assert!(sent);
    assert_eq!(s.sync(&a, "python", fixed).unwrap(), (v, false));
    let p = s
        .diagnostics_after(&a, seen, v, Duration::from_secs(60))
        .unwrap();
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);

    let b = root.join("b.py");
    let src = "def helper():\n    return 1\n\n\nhelper()\n";
    std::fs::write(&b, src).unwrap();
    s.sync(&b, "python", src).unwrap();
    let r = s
        .request(
            "textDocument/definition",
            json!({"textDocument": {"uri": uri(&b)}, "position": {"line": 4, "character": 1}}),
            Duration::from_secs(60),
        )
        .unwrap();
    let first = if r.is_array() { r[0].clone() } else { r };
    assert_eq!(first["range"]["start"]["line"], 0, "{first}");
    assert_eq!(path_of(first["uri"].as_str().unwrap()).unwrap(), b);
}

#[test]
fn a_killed_server_is_restarted_on_next_use() {
    let Some(argv) = pylsp() else { return };
    let (_d, root) = canonical_tempdir();
    let h = host(&root);
    let servers = Servers::default();
    let (s, _) = servers
        .get(&h, "python", &argv, Duration::from_secs(60))
        .unwrap();
    let pid = s.child.lock().unwrap().id();
    // SAFETY: a signal to the process this test started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(i32::try_from(pid).unwrap(), libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!s.alive());
    let e = s.request(
        "workspace/symbol",
        json!({"query": "x"}),
        Duration::from_secs(5),
    );
    assert!(matches!(e, Err(LspError::Ended(_))), "{e:?}");
    let (s2, restarted) = servers
        .get(&h, "python", &argv, Duration::from_secs(60))
        .unwrap();
    assert!(restarted && s2.alive());
}

/// A fake server written in Python, started confined like a real one.
fn fake(root: &Path, body: &str) -> Vec<String> {
    let script = root.join("fake_server.py");
    let prelude = "import sys, json\n\
def read():\n    n = 0\n    while True:\n        line = sys.stdin.buffer.readline()\n        if not line: sys.exit(0)\n        if line in (b'\\r\\n', b'\\n'): break\n        k, v = line.decode().split(':', 1)\n        if k.lower() == 'content-length': n = int(v)\n    return json.loads(sys.stdin.buffer.read(n))\n\
def write(obj):\n    b = json.dumps(obj).encode()\n    sys.stdout.buffer.write(b'Content-Length: %d\\r\\n\\r\\n' % len(b) + b)\n    sys.stdout.buffer.flush()\n";
    std::fs::write(&script, format!("{prelude}{body}")).unwrap();
    vec!["python3".into(), script.display().to_string()]
}

#[test]
fn a_server_that_never_answers_is_bounded_by_the_timeout() {
    let (_d, root) = canonical_tempdir();
    let argv = fake(&root, "while True:\n    read()\n");
    let t = Instant::now();
    let e = Server::start(&host(&root), &argv, Duration::from_secs(2))
        .err()
        .unwrap();
    assert!(e.contains("did not answer within 2000 ms"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

#[test]
fn a_server_that_floods_is_cut_off_in_words() {
    let (_d, root) = canonical_tempdir();
    let argv = fake(
        &root,
        "m = read()\nwrite({'jsonrpc': '2.0', 'id': m['id'], 'result': {}})\nread()\nm = read()\n\
sys.stdout.buffer.write(b'Content-Length: 999999999\\r\\n\\r\\n')\nsys.stdout.buffer.write(b'x' * 65536)\nsys.stdout.buffer.flush()\nimport time\ntime.sleep(30)\n",
    );
    let s = Server::start(&host(&root), &argv, Duration::from_secs(20)).unwrap();
    let e = s
        .request(
            "workspace/symbol",
            json!({"query": ""}),
            Duration::from_secs(20),
        )
        .unwrap_err();
    assert!(
        matches!(&e, LspError::Ended(w) if w.contains("MiB limit")),
        "{e:?}"
    );
    assert!(!s.alive());
}

#[test]
fn a_server_asking_for_configuration_gets_an_answer_and_diagnostics_are_kept() {
    let (_d, root) = canonical_tempdir();
    let argv = fake(
        &root,
        "m = read()\nwrite({'jsonrpc': '2.0', 'id': m['id'], 'result': {'capabilities': {}}})\nread()\n\
write({'jsonrpc': '2.0', 'id': 'cfg', 'method': 'workspace/configuration', 'params': {'items': [{}, {}]}})\n\
got = {}\n\
while len(got) < 2:\n    m = read()\n    got['answer' if m.get('id') == 'cfg' else m.get('method')] = m\n\
assert got['answer']['result'] == [None, None], got\n\
u = got['textDocument/didOpen']['params']['textDocument']['uri']\n\
write({'jsonrpc': '2.0', 'method': 'textDocument/publishDiagnostics', 'params': {'uri': u, 'version': 1, 'diagnostics': [{'message': 'configured'}]}})\n\
import time\ntime.sleep(30)\n",
    );
    let s = Server::start(&host(&root), &argv, Duration::from_secs(20)).unwrap();
    let f = root.join("x.txt");
    let (v, _) = s.sync(&f, "plaintext", "x").unwrap();
    let p = s
        .diagnostics_after(&f, 0, v, Duration::from_secs(20))
        .unwrap();
    assert_eq!(p.diagnostics[0]["message"], "configured");
}

/// The server sees the shell's read-only view: a deny-listed file is empty to it, and it can
/// write neither outside the workspace nor inside it (a hostile build script changes nothing).
#[test]
fn a_server_sees_secrets_masked_and_cannot_write_anywhere_in_the_workspace_or_outside() {
    let (_d, root) = canonical_tempdir();
    std::fs::write(root.join(".env"), "TOKEN=lsp-secret-value").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let escaped = outside.path().join("escaped");
    let argv = fake(
        &root,
        &format!(
            "m = read()\nwrite({{'jsonrpc': '2.0', 'id': m['id'], 'result': {{'capabilities': {{}}}}}})\nread()\n\
try:\n    secret = open({env:?}).read()\nexcept Exception as e:\n    secret = 'unreadable: %s' % e\n\
try:\n    open({esc:?}, 'w').write('x')\n    wrote = 'wrote'\nexcept Exception as e:\n    wrote = 'refused'\n\
for target in ({inside:?}, {existing:?}):\n    try:\n        open(target, 'a').write('x')\n        wrote += '|wrote'\n    except Exception as e:\n        wrote += '|refused'\n\
o = read()\nu = o['params']['textDocument']['uri']\n\
write({{'jsonrpc': '2.0', 'method': 'textDocument/publishDiagnostics', 'params': {{'uri': u, 'diagnostics': [{{'message': secret + '|' + wrote}}]}}}})\n\
import time\ntime.sleep(30)\n",
            env = root.join(".env").display().to_string(),
            esc = escaped.display().to_string(),
            inside = root.join("planted.py").display().to_string(),
            existing = root.join("x.txt").display().to_string(),
        ),
    );
    let h = host(&root).with_secrets(Box::new(|rel: &str| rel == ".env"));
    let f = root.join("x.txt");
    std::fs::write(&f, "x").unwrap();
    let s = Server::start(&h, &argv, Duration::from_secs(20)).unwrap();
    let (v, _) = s.sync(&f, "plaintext", "x").unwrap();
    let p = s
        .diagnostics_after(&f, 0, v, Duration::from_secs(20))
        .unwrap();
    let msg = p.diagnostics[0]["message"].as_str().unwrap();
    assert!(!msg.contains("lsp-secret-value"), "{msg}");
    assert!(msg.ends_with("|refused|refused|refused"), "{msg}");
    assert!(!escaped.exists());
    assert!(!root.join("planted.py").exists());
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "x");
}
