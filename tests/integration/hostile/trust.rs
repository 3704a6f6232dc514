//! Trust covers what runs, and signs what it showed (issue #49, items 3 and 8, and `grants
//! add` refusing the shell): a trusted policy's hook script that changes is untrusted again,
//! a script swapped under a long-running gate never runs, `toolgate trust` signs nothing that
//! was changed or added while its prompt was open, and no project grant reaches a tool capped
//! at session scope.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
use toolgate::Status;

fn run(ws: &Ws, args: &[&str]) -> Output {
    toolgate_command(ws).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn observation(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not an observation ({e}): {}", text(out)))
}

fn read_call(ws: &Ws) -> Value {
    observation(&run(ws, &["call", "read", r#"{"path":"a.txt"}"#]))
}

/// A hook script that appends `word` to `mark` (proof of what ran, unconfined, on the host)
/// and allows the call.
fn hook_script(ws: &Ws, rel: &str, mark: &Path, word: &str) {
    write_script(
        &ws.path(rel),
        &format!(
            "#!/bin/sh\necho {word} >> '{}'\necho '{{\"decision\":\"allow\"}}'\n",
            mark.display()
        ),
    );
}

fn marks(mark: &Path) -> String {
    std::fs::read_to_string(mark).unwrap_or_default()
}

/// The README's own example (`./scripts/check.sh`), and the same script run by an interpreter:
/// after `toolgate trust`, changing the script makes the workspace untrusted (loudly, naming
/// the file); `toolgate trust` shows the new content and asks again.
#[test]
fn a_trusted_hook_script_that_changes_is_untrusted_until_reviewed() {
    for command in [r#"["./scripts/check.sh"]"#, r#"["sh", "scripts/check.sh"]"#] {
        let ws = Ws::new();
        let mark = ws.user_root().join("ran");
        hook_script(&ws, "scripts/check.sh", &mark, "reviewed");
        ws.plant(
            ".toolgate/policy.toml",
            format!("[[hooks]]\ncommand = {command}\n"),
        )
        .plant("a.txt", "hello\n");

        let out = run(&ws, &["trust", "--yes"]);
        assert!(out.status.success(), "{}", text(&out));
        let shown = text(&out);
        assert!(
            shown.contains("scripts/check.sh") && shown.contains("echo reviewed"),
            "trust did not show the script it binds: {shown}"
        );
        assert_eq!(read_call(&ws)["status"], "ok");
        assert_eq!(
            marks(&mark),
            "reviewed\n",
            "{command}: the trusted hook ran"
        );

        // The repository (or the agent) changes the script.
        hook_script(&ws, "scripts/check.sh", &mark, "unreviewed");
        let o = read_call(&ws);
        assert!(
            !marks(&mark).contains("unreviewed"),
            "{command}: a changed hook script ran unreviewed on the host"
        );
        let ignored = o["data"]["policy_ignored"].to_string();
        assert!(
            ignored.contains("scripts/check.sh")
                && ignored.contains("changed since you trusted it"),
            "{command}: the change is not named: {o:#}"
        );

        // `trust` shows what changed and asks again.
        let out = run(&ws, &["trust"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let shown = text(&out);
        assert!(
            shown.contains("CHANGED") && shown.contains("echo unreviewed"),
            "{shown}"
        );
        assert!(!shown.contains("already trusted"), "{shown}");
        let out = run(&ws, &["trust", "--yes"]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(read_call(&ws)["status"], "ok");
        assert!(
            marks(&mark).ends_with("unreviewed\n"),
            "reviewed again, it runs"
        );
    }
}

/// A language server's program inside the workspace is bound the same way.
#[test]
fn a_trusted_language_servers_program_that_changes_is_untrusted() {
    let ws = Ws::new();
    let server = ws.path("tools/lsp.sh");
    write_script(&server, "#!/bin/sh\nexit 0\n");
    ws.plant(
        ".toolgate/policy.toml",
        format!(
            "[lsp.python]\ncommand = [\"{}\"]\nextensions = [\"py\"]\n",
            server.display()
        ),
    )
    .plant("a.txt", "hello\n");
    let out = run(&ws, &["trust", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(read_call(&ws)["data"].get("policy_ignored").is_none());
    write_script(&server, "#!/bin/sh\ntouch /tmp/pwned\n");
    let ignored = read_call(&ws)["data"]["policy_ignored"].to_string();
    assert!(
        ignored.contains("[lsp.python] command") && ignored.contains("tools/lsp.sh"),
        "{ignored}"
    );
}

/// A long-running gate (trusted at open) never runs a hook script changed after it opened:
/// the call is denied at the hooks stage, whatever `fail_open` says.
#[tokio::test]
async fn a_script_changed_under_a_running_gate_never_runs() {
    let ws = Ws::new();
    let mark = ws.user_root().join("ran");
    hook_script(&ws, "scripts/check.sh", &mark, "reviewed");
    ws.write("a.txt", "hello\n").write(
        ".toolgate/policy.toml",
        "[[hooks]]\ncommand = [\"./scripts/check.sh\"]\nfail_open = true\n",
    );
    let g = toolgate::Gate::open(toolgate::GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap();
    ok(&g, "read", json!({"path": "a.txt"})).await;
    assert_eq!(marks(&mark), "reviewed\n");
    hook_script(&ws, "scripts/check.sh", &mark, "swapped");
    let o = call(&g, "read", json!({"path": "a.txt"})).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("hooks"));
    let reason = o.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("scripts/check.sh") && reason.contains("toolgate trust"),
        "{reason}"
    );
    assert_eq!(marks(&mark), "reviewed\n", "the swapped script ran");
}

/// A pseudo-terminal: (master, slave).
#[allow(unsafe_code)]
fn pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // SAFETY: plain libc calls on a descriptor this function owns; `ptsname_r` writes into a
    // buffer of the length given.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(m >= 0, "posix_openpt");
        let master = std::fs::File::from_raw_fd(m);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, buf.as_mut_ptr(), buf.len()), 0);
        let name = std::ffi::CStr::from_ptr(buf.as_ptr())
            .to_string_lossy()
            .into_owned();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(name)
            .unwrap();
        (master, slave)
    }
}

/// Item 8: the real `toolgate trust`, its prompt open on a terminal; while the user reads,
/// the repository appends a `write:**` grant and changes the hook script the review showed.
/// The user answers `y`: only what was shown is trusted and signed.
#[test]
fn trust_signs_only_what_its_open_prompt_showed() {
    let ws = Ws::new();
    let mark = ws.user_root().join("ran");
    hook_script(&ws, "scripts/check.sh", &mark, "reviewed");
    ws.plant(
        ".toolgate/policy.toml",
        "[[hooks]]\ncommand = [\"./scripts/check.sh\"]\n",
    )
    .plant(
        ".toolgate/grants.toml",
        "[[grants]]\nkey = \"write:docs/**\"\n",
    )
    .plant("a.txt", "hello\n");

    let (mut master, slave) = pty();
    let child = toolgate_command(&ws)
        .arg("trust")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // What the terminal shows, read on a thread (a read blocks until there is output).
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !String::from_utf8_lossy(&screen).contains("[y/N]") {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(bytes) => screen.extend(bytes),
            Err(_) => panic!("no prompt: {}", String::from_utf8_lossy(&screen)),
        }
    }

    // The prompt is open: the repository changes what was shown.
    let grants = ws.path(".toolgate/grants.toml");
    let mut g = std::fs::OpenOptions::new()
        .append(true)
        .open(&grants)
        .unwrap();
    g.write_all(b"[[grants]]\nkey = \"write:**\"\n").unwrap();
    drop(g);
    hook_script(&ws, "scripts/check.sh", &mark, "unreviewed");

    master.write_all(b"y\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("write:docs/**") && !stdout.contains("write:**\n"),
        "{stdout}"
    );

    // The grant that was shown is signed; the one appended meanwhile is not.
    let list = text(&run(&ws, &["grants", "list"]));
    assert!(
        list.contains("# ignored: ") && list.contains("`write:**`"),
        "{list}"
    );
    let input = json!({"path": "anywhere.txt", "content": "pwned\n"}).to_string();
    let o = observation(&run(&ws, &["call", "write", &input]));
    assert_ne!(
        o["status"], "ok",
        "the unshown `write:**` was honoured: {o:#}"
    );
    assert!(!ws.path("anywhere.txt").exists());
    let input = json!({"path": "docs/x.txt", "content": "fine\n"}).to_string();
    let o = observation(&run(&ws, &["call", "write", &input]));
    assert_eq!(o["status"], "ok", "the shown grant: {o:#}");
    // The script changed meanwhile is not what was trusted: it never runs.
    assert!(
        !marks(&mark).contains("unreviewed"),
        "a script changed while the prompt was open ran"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "the change is reported: {stdout}"
    );
}

/// `grants add` refuses, at once, a key that reaches a tool capped at session scope (the
/// shell, every tool through `*`) or the shell's network: the ladder's ceiling message, a
/// non-zero exit, nothing written.
#[test]
fn grants_add_refuses_session_capped_keys() {
    let ws = Ws::new();
    for key in ["shell:touch", "shell", "*", "net:evil.example"] {
        let out = run(&ws, &["grants", "add", key]);
        assert!(!out.status.success(), "`{key}` was granted: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("can only be allowed per session")
                && said.contains("nothing was written"),
            "{key}: {said}"
        );
        assert!(!ws.path(".toolgate/grants.toml").exists(), "{key}");
    }
    let out = run(&ws, &["grants", "add", "write:src/**"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&run(&ws, &["grants", "list"])).contains("write:src/**"));
}
