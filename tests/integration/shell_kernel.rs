//! The shell's boundary is the kernel's (issue: "read-only means nothing can be written,
//! secrets are not there, and a confined root has no power"). Every test is an attack run
//! through the real gate, the real spawner and the real confinement: what the command's text
//! says never matters here, only what the kernel lets the process do.

use crate::common::{gate_granting, Ws, SESSION};
use crate::modes::{self, Mode};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use toolgate::exec::{confine, ApprovedCommand, ExecConfig, ExecHost, Plan};
use toolgate::{Gate, Observation, Status};

async fn gate(ws: &Ws, policy: &str, grants: &[&str]) -> Gate {
    ws.write(".toolgate/policy.toml", policy);
    gate_granting(ws, grants).await
}

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(SESSION, "shell", json!({ "command": command }))
        .await
}

/// The command really ran (it was not denied before it could try).
fn assert_ran(o: &Observation) {
    assert!(
        o.data.get("command").is_some() && o.data.get("confinement").is_some(),
        "the command did not run: {o:#?}"
    );
}

/// Whether the command ran: it must have, except on a host without user namespaces
/// ([`Mode::NobodyWithoutUserns`]), which may refuse it instead, naming the namespace layer it
/// lacks (a refusal runs nothing, so it can leak nothing either).
fn ran(o: &Observation) -> bool {
    if modes::without_userns() && modes::refused_for_a_missing_layer(o) {
        return false;
    }
    assert_ran(o);
    true
}

/// stdout and stderr together, as the model reads them.
fn text(o: &Observation) -> String {
    o.content.clone()
}

const ASK: &str = "mode = \"ask\"\n";

/// Whether one line of `out` holds every one of `parts` (an error message, whatever quotes
/// the locale puts around the name in it).
fn a_line_has(out: &str, parts: &[&str]) -> bool {
    out.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}

/// Every layer this machine kind offers is applied and reported, and how the namespaces were
/// made: by the host itself (root with CAP_SYS_ADMIN), or inside a user namespace of the
/// command's own (anyone else). Without user namespaces there are no namespaces at all: the
/// command is refused, naming what is missing, or runs in `landlock-only` mode, which says so
/// and claims no namespace.
#[tokio::test]
async fn the_observation_reports_every_layer_and_require_confinement_runs() {
    let ws = Ws::new();
    let g = gate(
        &ws,
        "mode = \"ask\"\n[shell]\nrequire_confinement = true\n",
        &["shell"],
    )
    .await;
    let o = sh(&g, "true").await;
    let c = &o.data["confinement"];
    match modes::current() {
        Some(Mode::NobodyWithoutUserns) => {
            if !ran(&o) {
                return;
            }
            assert_eq!(o.status, Status::Ok, "{o:#?}");
            assert_eq!(c["mode"], json!("landlock-only"), "{c}");
            for layer in [
                "landlock",
                "scopes",
                "caps_dropped",
                "seccomp",
                "env_scrubbed",
            ] {
                assert_eq!(c[layer], json!(true), "{layer} missing: {c}");
            }
            for layer in ["netns", "mountns", "view", "pidns"] {
                assert_ne!(c[layer], json!(true), "{layer} without namespaces: {c}");
            }
            assert!(c["landlock_abi"].as_u64().unwrap() >= 6, "{c}");
            return;
        }
        Some(mode) => assert_eq!(c["mode"], json!(mode.confinement_mode()), "{c}"),
        // Before the mode was reported (an older host) there is nothing to compare.
        None if c.get("mode").is_some() => {
            let expected = if modes::privileged() {
                "privileged"
            } else {
                "user-namespace"
            };
            assert_eq!(c["mode"], json!(expected), "{c}");
        }
        None => {}
    }
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    for layer in [
        "landlock",
        "scopes",
        "netns",
        "mountns",
        "view",
        "pidns",
        "caps_dropped",
        "seccomp",
        "env_scrubbed",
    ] {
        assert_eq!(c[layer], json!(true), "{layer} missing: {c}");
    }
    assert!(c["landlock_abi"].as_u64().unwrap() >= 6, "{c}");
}

/// `cat .env` under a grant for `cat`, a read-only `grep -r`, and a granted `grep -ra` over
/// the host's own database: the secrets and the state are not in the command's view. This
/// holds in every mode: a host that cannot hide them refuses the command instead.
#[tokio::test]
async fn secrets_and_host_state_are_absent_from_the_shell() {
    let ws = Ws::new();
    ws.write(".env", "AWS_SECRET=AKIAEXAMPLEEXAMPLE\n")
        .write("config/.env.local", "TOKEN=ghp_localsecretlocalsecret\n")
        .write(
            "deploy/server.pem",
            "-----BEGIN PRIVATE KEY----- pemsecret\n",
        )
        .write(
            "home/.aws/credentials",
            "aws_secret_access_key=awsdirsecret\n",
        )
        .write("home/.ssh/id_ed25519", "sshkeysecret\n")
        .write("src/main.rs", "fn main() {} // AWS mention\n");
    let g = gate(&ws, ASK, &["shell:cat", "shell:grep"]).await;
    // Leave a secret-looking value in the host's state (the audit of a write call).
    let o = g
        .call(
            SESSION,
            "write",
            json!({"path": "notes.txt", "content": "ghp_inthestatedbinthestatedb"}),
        )
        .await;
    let _ = o;
    let o = sh(&g, "cat .env").await;
    let runs = ran(&o);
    assert!(!text(&o).contains("AKIA"), "{o:#?}");
    for cmd in [
        "grep -r AWS .",
        "grep -ra ghp_ .",
        "grep -ra secret .",
        "cat config/.env.local deploy/server.pem home/.aws/credentials home/.ssh/id_ed25519",
        "cat .toolgate/state.db",
    ] {
        let o = sh(&g, cmd).await;
        assert_eq!(ran(&o), runs, "{o:#?}");
        let out = text(&o);
        for secret in [
            "AKIA",
            "ghp_local",
            "pemsecret",
            "awsdirsecret",
            "sshkeysecret",
            "ghp_inthestatedb",
        ] {
            assert!(!out.contains(secret), "`{cmd}` printed {secret}: {o:#?}");
        }
    }
    // The ordinary file is still there, and the masks are counted.
    let o = sh(&g, "grep -r AWS .").await;
    if runs {
        assert!(text(&o).contains("src/main.rs"), "{o:#?}");
        assert!(
            o.data["confinement"]["masks"].as_u64().unwrap() >= 4,
            "{o:#?}"
        );
    }
    // A secret created by one command is hidden from the next (the plan is refreshed).
    let g2 = gate(&ws, ASK, &["shell"]).await;
    // In a subdirectory made beforehand: without namespaces nothing can be created directly
    // at the workspace root (see `the_workspace_root_takes_no_new_file_in_landlock_only_mode`).
    ws.mkdir("deep");
    let o = sh(
        &g2,
        "mkdir -p deep/er && echo LATE_SECRET_VALUE > deep/er/.env",
    )
    .await;
    if ran(&o) {
        assert_eq!(o.status, Status::Ok, "{o:#?}");
    } else {
        // Planted by hand where the host refuses commands: it must stay hidden all the same.
        ws.write("deep/er/.env", "LATE_SECRET_VALUE\n");
    }
    let o = sh(&g2, "cat deep/er/.env; cat deep/er/.env | wc -c").await;
    assert_eq!(ran(&o), runs, "{o:#?}");
    assert!(!text(&o).contains("LATE_SECRET_VALUE"), "{o:#?}");
    // Writing to a masked secret fails and leaves it unchanged.
    let o = sh(&g2, "echo overwritten > .env; echo x > home/.aws/new").await;
    assert_eq!(ran(&o), runs, "{o:#?}");
    assert_eq!(ws.read(".env"), "AWS_SECRET=AKIAEXAMPLEEXAMPLE\n", "{o:#?}");
    assert!(!ws.path("home/.aws/new").exists());
    // The saved outputs stay readable, read-only; the rest of `.toolgate/` is not there.
    ws.write(".toolgate/outputs/call-x.txt", "saved output\n");
    let o = sh(&g2, "cat .toolgate/outputs/call-x.txt; ls -a .toolgate; echo y > .toolgate/outputs/call-x.txt; echo z > .toolgate/grants.toml").await;
    let out = text(&o);
    let runs = ran(&o);
    if runs {
        assert!(out.contains("saved output"), "{o:#?}");
    }
    if modes::without_userns() && runs {
        // Without a mount namespace Landlock alone hides `.toolgate`: a split directory can be
        // listed, so the names in it show, never what they hold (exec/confine/linux/
        // readrules.rs). A read of the state fails outright.
        let o = sh(&g2, "cat .toolgate/state.db").await;
        assert_ran(&o);
        assert!(
            a_line_has(&text(&o), &[".toolgate/state.db", "Permission denied"]),
            "{o:#?}"
        );
    } else {
        assert!(!out.contains("state.db"), "{o:#?}");
    }
    assert_eq!(ws.read(".toolgate/outputs/call-x.txt"), "saved output\n");
    assert!(!ws.path(".toolgate/grants.toml").exists());
}

/// `CapEff: 000001fffeffffff` was the finding: now every set is empty.
#[tokio::test]
async fn confined_root_has_no_capabilities() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell:grep"]).await;
    let o = sh(&g, "grep ^Cap /proc/self/status").await;
    if !ran(&o) {
        return;
    }
    let out = text(&o);
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        // Without a user namespace an unprivileged process cannot shrink its bounding set (that
        // takes CAP_SETPCAP); with no_new_privs (below) nothing in it can ever be gained.
        if set == "CapBnd" && modes::without_userns() {
            continue;
        }
        assert!(
            out.contains(&format!("{set}:\t0000000000000000")),
            "{set} not empty: {out}"
        );
    }
    // No setuid way back either.
    let o = sh(&g, "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status").await;
    assert!(text(&o).contains("NoNewPrivs:\t1"), "{o:#?}");
    assert!(text(&o).contains("Seccomp:\t2"), "{o:#?}");
}

/// `mknod` made a character device in the workspace whose writes reached the kernel log.
/// In a subdirectory, where every mode lets a command create files (the FIFO shows it), so
/// only the device is refused.
#[tokio::test]
async fn a_device_node_cannot_be_made() {
    let ws = Ws::new();
    ws.mkdir("dev");
    let g = gate(&ws, ASK, &["shell"]).await;
    let o = sh(
        &g,
        "cd dev; mknod kmsg c 1 11; mknod null2 c 1 3; mknod blk b 7 0; mkfifo fifo && echo fifo-ok",
    )
    .await;
    assert!(!ws.path("dev/kmsg").exists(), "{o:#?}");
    assert!(!ws.path("dev/null2").exists(), "{o:#?}");
    assert!(!ws.path("dev/blk").exists(), "{o:#?}");
    // A FIFO is not a device: that still works.
    if ran(&o) {
        assert!(text(&o).contains("fifo-ok"), "{o:#?}");
    }
}

/// `os.kill(PID, 9)` from Python killed a host process.
#[tokio::test]
async fn a_host_process_cannot_be_signalled() {
    let mut victim = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid = victim.id();
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"]).await;
    ws.write(
        "kill.py",
        format!(
            "import os\nfor sig in (9, 15):\n    try:\n        os.kill({pid}, sig); print('SENT', sig)\n    except OSError as e:\n        print('refused', e.errno)\n"
        ),
    );
    let o = sh(&g, "python3 kill.py; ls /proc | grep -c '^[0-9]'").await;
    let runs = ran(&o);
    assert!(!text(&o).contains("SENT"), "{o:#?}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the host's `sleep` was killed from inside: {o:#?}"
    );
    // Only the command's own namespace is visible (init, bash, grep, ls at most). Without
    // user namespaces there is no PID namespace: Landlock's signal scope alone refuses them.
    if runs && !modes::without_userns() {
        let visible: u32 = text(&o)
            .lines()
            .find_map(|l| l.trim().parse().ok())
            .unwrap_or(999);
        assert!(visible <= 6, "the command sees {visible} processes: {o:#?}");
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
}

/// A double-forked `setsid` process outlived its one-shot call.
#[tokio::test]
async fn a_double_forked_setsid_child_does_not_outlive_the_call() {
    let ws = Ws::new();
    // The child's heartbeat goes to a subdirectory: in every mode a command can create a file
    // there (not at the root without namespaces).
    ws.mkdir("beat");
    let g = gate(&ws, ASK, &["shell"]).await;
    let attack = "( setsid sh -c 'while true; do date +%s%N > beat/alive; sleep 0.05; done' & ) ; sleep 0.3; echo started";
    let mut o = sh(&g, attack).await;
    if !ran(&o) {
        assert!(!ws.path("beat/alive").exists(), "{o:#?}");
        return;
    }
    if modes::without_userns() && text(&o).contains("setsid failed") {
        // Without a PID namespace the filter keeps a command in its process group (no new
        // session): the same double fork without setsid must not outlive the call either.
        assert!(!ws.path("beat/alive").exists(), "{o:#?}");
        o = sh(&g, &attack.replace("setsid ", "")).await;
        assert_ran(&o);
    }
    assert!(text(&o).contains("started"), "{o:#?}");
    assert!(
        ws.path("beat/alive").exists(),
        "the child never ran: {o:#?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let first = ws.read("beat/alive");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        ws.read("beat/alive"),
        first,
        "the setsid child is still running"
    );
}

/// A unix socket on the host filesystem (think ssh-agent, docker.sock), an abstract one, and
/// the host's /tmp are not reachable.
#[tokio::test]
async fn host_unix_sockets_and_tmp_are_unreachable() {
    let outside = tempfile::tempdir().unwrap();
    let path = outside.path().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = format!("toolgate-test-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    abstract_listener.set_nonblocking(true).unwrap();
    std::fs::write(outside.path().join("host-file"), "host tmp file\n").unwrap();
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"]).await;
    let script = format!(
        "import socket\nfor a in [{path:?}, '\\0{abstract_name}']:\n    try:\n        s = socket.socket(socket.AF_UNIX)\n        s.connect(a); print('CONNECTED', repr(a))\n    except OSError as e:\n        print('refused', e.errno)\n",
        path = path.display().to_string()
    );
    ws.write("probe.py", script);
    let o = sh(
        &g,
        &format!(
            "python3 probe.py; cat {}; ls /run /var/run 2>&1 | head -3",
            outside.path().join("host-file").display()
        ),
    )
    .await;
    let out = text(&o);
    if ran(&o) {
        assert!(out.contains("refused"), "{o:#?}");
    }
    assert!(!out.contains("CONNECTED"), "{o:#?}");
    assert!(!out.contains("host tmp file"), "{o:#?}");
    assert!(
        listener.accept().is_err(),
        "the host socket saw a connection"
    );
    assert!(
        abstract_listener.accept().is_err(),
        "the abstract socket saw a connection"
    );
}

/// `mv .git .git-old && mkdir .git && cp -a …` planted a hook that then ran outside any
/// sandbox at the next `git commit`; a submodule's config was writable.
#[tokio::test]
async fn git_internals_cannot_be_subverted_from_inside() {
    let ws = Ws::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(ws.root())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    git(&["config", "user.email", "t@example.com"]);
    git(&["config", "user.name", "t"]);
    ws.write("a.txt", "a\n");
    // A submodule's git dir and a nested repository.
    ws.write(".git/modules/sub/config", "[core]\n\tbare = false\n")
        .write(".git/modules/sub/HEAD", "ref: refs/heads/main\n")
        .mkdir(".git/modules/sub/hooks")
        .mkdir(".git/modules/sub/objects")
        .mkdir(".git/modules/sub/refs");
    std::process::Command::new("git")
        .args(["init", "-q", "vendor/nested"])
        .current_dir(ws.root())
        .output()
        .unwrap();
    let config_before = ws.read(".git/config");
    let nested_before = ws.read("vendor/nested/.git/config");
    let g = gate(&ws, ASK, &["shell"]).await;
    let o = sh(
        &g,
        "mv .git .git-old; mkdir -p .git/hooks; echo 'touch PWNED' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
         echo '[core] fsmonitor = touch PWNED' >> .git/config; \
         echo '[core] fsmonitor = touch PWNED' >> .git/modules/sub/config; echo x > .git/modules/sub/hooks/post-checkout; \
         echo '[core] fsmonitor = touch PWNED' >> vendor/nested/.git/config; echo x > vendor/nested/.git/hooks/pre-commit; \
         mv vendor/nested/.git vendor/nested/.git-old; mv vendor vendor-old; \
         echo ../../planted > .git/commondir; echo '[core] fsmonitor = touch PWNED' > .git/config.worktree; echo ran",
    )
    .await;
    let runs = ran(&o);
    assert!(!ws.path(".git/commondir").exists(), "{o:#?}");
    assert!(!ws.path(".git/config.worktree").exists(), "{o:#?}");
    assert!(!ws.path("vendor-old").exists(), "{o:#?}");
    if runs {
        let reverted = o.data["git_reverted"].to_string();
        // Without namespaces the host may refuse the write outright instead of reverting it.
        let refused =
            modes::without_userns() && text(&o).contains(".git/commondir: Permission denied");
        assert!(reverted.contains(".git/commondir") || refused, "{o:#?}");
    }
    assert!(ws.path(".git/HEAD").exists(), "{o:#?}");
    assert!(!ws.path(".git-old").exists(), "{o:#?}");
    assert!(!ws.path(".git/hooks/pre-commit").exists(), "{o:#?}");
    assert_eq!(ws.read(".git/config"), config_before, "{o:#?}");
    assert_eq!(
        ws.read(".git/modules/sub/config"),
        "[core]\n\tbare = false\n"
    );
    assert!(!ws.path(".git/modules/sub/hooks/post-checkout").exists());
    assert_eq!(ws.read("vendor/nested/.git/config"), nested_before);
    assert!(!ws.path("vendor/nested/.git/hooks/pre-commit").exists());
    assert!(!ws.path("vendor/nested/.git-old").exists());
    if modes::without_userns() {
        // Without namespaces nothing is ever created in a `.git` directory (its config, hooks
        // and pointers are readable, never written): git reads the repository, and cannot
        // take the index lock a commit needs.
        let o = sh(
            &g,
            "git status --short && echo status-ok; git add a.txt && git commit -qm first && echo committed",
        )
        .await;
        if ran(&o) {
            let out = text(&o);
            assert!(
                out.contains("?? a.txt") && out.contains("status-ok"),
                "{o:#?}"
            );
            assert!(
                a_line_has(&out, &[".git/index.lock", "Permission denied"]),
                "{o:#?}"
            );
            assert!(!out.contains("committed"), "{o:#?}");
        }
        assert!(!ws.path(".git/index.lock").exists());
        let head = std::process::Command::new("git")
            .args(["rev-parse", "--verify", "-q", "HEAD"])
            .current_dir(ws.root())
            .output()
            .unwrap();
        assert!(!head.status.success(), "a commit was made: {head:?}");
    } else {
        // Ordinary git work still works confined.
        let o = sh(
            &g,
            "git add a.txt && git commit -qm first && git checkout -qb topic && git status --short && echo git-ok",
        )
        .await;
        if ran(&o) {
            assert!(text(&o).contains("git-ok"), "{o:#?}");
        }
    }
    assert!(!ws.path("PWNED").exists());
}

/// Setting the clock is refused by the filter itself. Only an invalid time is ever passed:
/// without the filter the kernel would answer "invalid argument" and set nothing.
#[tokio::test]
async fn the_clock_cannot_be_set() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"]).await;
    ws.write(
        "clock.py",
        "import time, errno\ntry:\n    time.clock_settime(time.CLOCK_REALTIME, -1.0)\n    print('SET')\nexcept OSError as e:\n    print('refused', errno.errorcode[e.errno])\n",
    );
    let o = sh(&g, "python3 clock.py").await;
    if ran(&o) {
        assert!(text(&o).contains("refused EPERM"), "{o:#?}");
    }
}

/// The read-only class runs in a read-only view: even a command the classifier got wrong
/// cannot write anything but its private /tmp. The command here is handed to the exec host
/// as read-only directly, the way a misclassification would.
#[test]
fn a_misclassified_read_only_command_cannot_write() {
    let ws = Ws::new();
    // At the root and in a subdirectory: without namespaces no command can create anything
    // at the root, so only the subdirectory shows that read-only is what refuses it there.
    ws.write("keep.txt", "original\n")
        .write("sub/keep.txt", "original\n");
    let root = ws.root().canonicalize().unwrap();
    let host = ExecHost::new(
        root.clone(),
        ExecConfig {
            output_budget: 10_000,
            max_processes: 64,
            ..ExecConfig::default()
        },
    );
    // The private /tmp: without namespaces (no view) it is the one TMPDIR names, and the
    // host's own /tmp must stay out of reach.
    let host_tmp = format!("/tmp/toolgate-ro-probe-{}", std::process::id());
    let tmp = if modes::without_userns() {
        format!("touch {host_tmp}; touch \"$TMPDIR/ok\" && echo tmp-ok")
    } else {
        "touch /tmp/ok && echo tmp-ok".to_string()
    };
    let text = format!(
        "echo evil > evil.sh; sort -oevil2.sh keep.txt; echo x >> keep.txt; mkdir d; \
         echo evil > sub/evil.sh; echo x >> sub/keep.txt; mkdir sub/d; \
         {tmp}; ln -s keep.txt link; rm keep.txt sub/keep.txt; echo done"
    );
    let approved = ApprovedCommand {
        text: text.clone(),
        plan: Plan::Bash(text),
        key: "shell:test".into(),
        class: "read-only",
        cwd: root.clone(),
        timeout: Duration::from_secs(30),
        auto_background: Duration::from_secs(30),
        background: false,
        net: None,
    };
    let process = match toolgate::exec::run::spawn(&host, &approved) {
        Ok(process) => process,
        // Refused where no namespace can be made, naming the one it lacks: nothing ran.
        Err(e)
            if modes::without_userns()
                && modes::NAMESPACE_LAYERS
                    .iter()
                    .any(|l| e.to_string().contains(l)) =>
        {
            assert_eq!(ws.read("keep.txt"), "original\n", "{e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert!(process.wait_until(Instant::now() + Duration::from_secs(20)));
    let (outcome, _) = process.outcome((0, 0), 10_000, &root, "ro");
    assert_eq!(outcome.data["confinement"]["read_only"], json!(true));
    assert!(outcome.stdout.preview.contains("tmp-ok"), "{outcome:?}");
    for made in ["evil.sh", "evil2.sh", "d", "link", "sub/evil.sh", "sub/d"] {
        assert!(!ws.path(made).exists(), "{made} was written: {outcome:?}");
    }
    assert!(!Path::new(&host_tmp).exists(), "wrote the host's /tmp");
    assert_eq!(ws.read("keep.txt"), "original\n");
    assert_eq!(ws.read("sub/keep.txt"), "original\n");
}

/// Builds and tests keep working confined, offline: `cargo test` of a tiny crate and Python's
/// unittest (and pytest where it is installed). As nobody the cargo is Debian's (root's rustup
/// is under /root), installed by tests/scripts/install-system-cargo.sh before the run.
#[tokio::test]
async fn cargo_test_and_python_tests_pass_confined() {
    let ws = Ws::new();
    ws.write(
        "tiny/Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .write(
        "tiny/src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n#[cfg(test)]\nmod t { #[test] fn adds() { assert_eq!(super::add(2, 2), 4); } }\n",
    )
    .write(
        "py/test_calc.py",
        "import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n",
    );
    let g = gate(&ws, ASK, &["shell"]).await;
    let o = g
        .call(
            SESSION,
            "shell",
            json!({"command": "cargo test --offline 2>&1", "cwd": "tiny", "timeout_ms": 600000}),
        )
        .await;
    if !ran(&o) {
        return;
    }
    assert!(text(&o).contains("test t::adds ... ok"), "{o:#?}");
    let o = g
        .call(
            SESSION,
            "shell",
            json!({"command": "python3 -m unittest -v 2>&1", "cwd": "py"}),
        )
        .await;
    assert_ran(&o);
    assert!(text(&o).contains("OK"), "{o:#?}");
    let has_pytest = std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_pytest {
        let o = g
            .call(
                SESSION,
                "shell",
                json!({"command": "python3 -m pytest -q -p no:cacheprovider 2>&1", "cwd": "py"}),
            )
            .await;
        assert!(text(&o).contains("1 passed"), "{o:#?}");
    } else {
        eprintln!("skipped the pytest half: pytest is not installed (pip install pytest)");
    }
}

/// `$HOME` is private: the host's dot-files are not there, the toolchain homes are, read-only.
#[tokio::test]
async fn home_is_private_with_toolchains_read_only() {
    let Some(home) = std::env::var_os("HOME") else {
        return;
    };
    let home = Path::new(&home).to_path_buf();
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"]).await;
    // Without namespaces `$HOME` is the host's own (there is no private one to show instead):
    // a file in it is there, and must not be readable. Only in that mode, whose home is the
    // test run's own (modes.rs), is one planted.
    let planted = modes::without_userns().then(|| {
        let p = home.join(format!(".toolgate-home-probe-{}", std::process::id()));
        std::fs::write(
            &p,
            "home-file-content
",
        )
        .unwrap();
        p
    });
    let read_planted = planted
        .as_ref()
        .map(|p| format!("; cat {}", p.display()))
        .unwrap_or_default();
    let o = sh(
        &g,
        &format!(
            "ls -a ~; touch ~/new-file && echo home-writable; touch ~/.cargo/x 2>&1 || echo cargo-ro{read_planted}"
        ),
    )
    .await;
    if let Some(p) = &planted {
        std::fs::remove_file(p).unwrap();
    }
    let out = text(&o);
    if !ran(&o) {
        assert!(!home.join("new-file").exists(), "wrote the host's home");
        return;
    }
    if let Some(p) = &planted {
        // The host's home is neither writable nor readable (only the toolchain homes are).
        assert!(!out.contains("home-writable"), "{o:#?}");
        let new_file = home.join("new-file").display().to_string();
        assert!(
            a_line_has(
                &out,
                &["touch: cannot touch", &new_file, "Permission denied"]
            ),
            "{o:#?}"
        );
        assert!(!out.contains("home-file-content"), "{o:#?}");
        assert!(
            a_line_has(
                &out,
                &["cat:", &p.display().to_string(), "Permission denied"]
            ),
            "{o:#?}"
        );
    } else {
        assert!(out.contains("home-writable"), "{o:#?}");
    }
    if home.join(".cargo").is_dir() {
        assert!(out.contains("cargo-ro"), "{o:#?}");
        assert!(!home.join(".cargo/x").exists());
    }
    assert!(!home.join("new-file").exists(), "wrote the host's home");
    for hidden in [".bash_history", ".ssh", ".gitconfig", ".docker"] {
        if home.join(hidden).exists() {
            assert!(
                !out.lines().any(|l| l == hidden),
                "{hidden} is visible: {out}"
            );
        }
    }
}

/// Without namespaces the workspace root is a split directory (`.toolgate` and the secrets at
/// the root must stay uncovered by any Landlock rule), so nothing can be created directly in
/// it; in a subdirectory everything works. In every other mode the root is like any
/// directory of the workspace.
#[tokio::test]
async fn the_workspace_root_takes_no_new_file_in_landlock_only_mode() {
    let ws = Ws::new();
    ws.mkdir("sub");
    let g = gate(&ws, ASK, &["shell"]).await;
    let o = sh(
        &g,
        "echo root > new.txt && echo root-ok; mkdir newdir && echo mkdir-ok; \
         echo sub > sub/new.txt && mkdir sub/newdir && echo sub-ok",
    )
    .await;
    assert_ran(&o);
    let out = text(&o);
    assert!(out.contains("sub-ok"), "{o:#?}");
    assert_eq!(ws.read("sub/new.txt"), "sub\n");
    assert!(ws.path("sub/newdir").is_dir());
    if modes::without_userns() {
        assert_eq!(
            o.data["confinement"]["mode"],
            json!("landlock-only"),
            "{o:#?}"
        );
        assert!(
            a_line_has(&out, &["new.txt", "Permission denied"]),
            "{o:#?}"
        );
        assert!(
            a_line_has(
                &out,
                &["cannot create directory", "newdir", "Permission denied"]
            ),
            "{o:#?}"
        );
        assert!(
            !out.contains("root-ok") && !out.contains("mkdir-ok"),
            "{o:#?}"
        );
        assert!(!ws.path("new.txt").exists());
        assert!(!ws.path("newdir").exists());
    } else {
        assert!(
            out.contains("root-ok") && out.contains("mkdir-ok"),
            "{o:#?}"
        );
        assert_eq!(ws.read("new.txt"), "root\n");
        assert!(ws.path("newdir").is_dir());
    }
}

#[test]
fn probe_matches_this_machine() {
    // The machine kind this project runs on has every layer, for root and for anyone else (in
    // a user namespace); a regression in the probe would silently weaken every command, so say
    // so loudly.
    let c = confine::available(false);
    let json = c.to_json();
    match modes::current() {
        // With user namespaces refused no namespace can be made: the probe says which, and
        // still has everything that needs none.
        Some(Mode::NobodyWithoutUserns) => {
            let missing = c.missing();
            for layer in ["network namespace", "mount namespace", "PID namespace"] {
                assert!(missing.contains(&layer), "{layer} not missing: {missing:?}");
            }
            for layer in ["landlock", "seccomp filter", "environment scrubbing"] {
                assert!(!missing.contains(&layer), "{layer} missing: {missing:?}");
            }
            assert_eq!(json["mode"], json!("landlock-only"), "{json}");
        }
        Some(mode) => {
            assert!(c.complete(), "missing here: {:?}", c.missing());
            assert_eq!(json["mode"], json!(mode.confinement_mode()), "{json}");
        }
        None => assert!(c.complete(), "missing here: {:?}", c.missing()),
    }
}

/// `[shell] read` / `write` show host paths to commands, and can never name what would undo
/// the view: a system directory for writing, `$HOME` or the workspace or anything holding them.
#[tokio::test]
async fn policy_paths_are_shown_and_cannot_undo_the_view() {
    // `[shell] read/write` may not name anything under /tmp (nor /var for writing): a build
    // directory there (a clone in /tmp) has no place this test may name.
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if base.starts_with("/tmp") || base.starts_with("/var") {
        eprintln!(
            "skipped: the build directory {} is under /tmp or /var, which [shell] read/write may not name; run from a checkout elsewhere",
            base.display()
        );
        return;
    }
    let data = tempfile::tempdir_in(&base).unwrap();
    let scratch = tempfile::tempdir_in(&base).unwrap();
    std::fs::write(data.path().join("in.txt"), "dataset\n").unwrap();
    let ws = Ws::new();
    let policy = format!(
        "mode = \"ask\"\n[shell]\nread = [{:?}]\nwrite = [{:?}]\n",
        data.path().display().to_string(),
        scratch.path().display().to_string()
    );
    let g = gate(&ws, &policy, &["shell"]).await;
    let o = sh(
        &g,
        &format!(
            "cat {d}/in.txt; echo x > {d}/new; echo y > {s}/out && echo wrote",
            d = data.path().display(),
            s = scratch.path().display()
        ),
    )
    .await;
    assert_ran(&o);
    assert!(
        text(&o).contains("dataset") && text(&o).contains("wrote"),
        "{o:#?}"
    );
    assert!(!data.path().join("new").exists());
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("out")).unwrap(),
        "y\n"
    );
    for bad in [
        "write = [\"/etc\"]",
        "write = [\"/usr/local\"]",
        "read = [\"/\"]",
    ] {
        let g = gate(
            &ws,
            &format!("mode = \"ask\"\n[shell]\n{bad}\n"),
            &["shell"],
        )
        .await;
        let o = sh(&g, "true").await;
        assert_eq!(o.status, Status::Error, "{bad}: {o:#?}");
        assert!(o.content.contains("[shell]"), "{bad}: {o:#?}");
    }
}

/// Commands without the network share one empty network namespace (no new one per command);
/// one command still cannot reach another through it: not by loopback (no interface is up)
/// and not by an abstract unix socket (Landlock's scope keeps each to its own).
#[tokio::test]
async fn concurrent_commands_do_not_reach_each_other_through_the_network_namespace() {
    let ws = Ws::new();
    let g = gate(&ws, ASK, &["shell"]).await;
    if !confine::available(false).scopes {
        eprintln!(
            "skipped: Landlock scopes (ABI 6) unavailable; each command gets its own namespace"
        );
        return;
    }
    let name = format!("toolgate-peer-{}", std::process::id());
    // The two signal each other with files in a subdirectory, which every mode lets a command
    // write (not the root without namespaces).
    ws.mkdir("run");
    ws.write(
        "server.py",
        format!(
            "import socket, time\n\
             def listen(fam, addr, what):\n\
             \x20   try:\n\
             \x20       s = socket.socket(fam); s.bind(addr); s.listen(1); s.settimeout(0.2)\n\
             \x20       return [s]\n\
             \x20   except OSError as e:\n\
             \x20       print(what, 'refused', e.errno); return []\n\
             ls = listen(socket.AF_UNIX, '\\0{name}', 'unix') + listen(socket.AF_INET, ('127.0.0.1', 47123), 'tcp')\n\
             open('run/ready', 'w').write('1')\n\
             end = time.time() + 8\n\
             while time.time() < end and not __import__('os').path.exists('run/done'):\n\
             \x20   for s in ls:\n\
             \x20       try:\n\
             \x20           s.accept(); print('ACCEPTED')\n\
             \x20       except OSError:\n\
             \x20           pass\n\
             print('server done')\n"
        ),
    );
    ws.write(
        "client.py",
        format!(
            "import socket, time, os\n\
             end = time.time() + 8\n\
             while not os.path.exists('run/ready') and time.time() < end:\n\
             \x20   time.sleep(0.05)\n\
             for fam, addr in ((socket.AF_UNIX, '\\0{name}'), (socket.AF_INET, ('127.0.0.1', 47123))):\n\
             \x20   try:\n\
             \x20       s = socket.socket(fam); s.connect(addr); print('CONNECTED', addr)\n\
             \x20   except OSError as e:\n\
             \x20       print('refused', e.errno)\n\
             open('run/done', 'w').write('1')\n"
        ),
    );
    let (server, client) = tokio::join!(sh(&g, "python3 server.py"), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        sh(&g, "python3 client.py").await
    });
    // Refused where no namespace can be made (naming it): nothing reached anything. Where
    // they run without namespaces, the server may not even get its sockets (the listener
    // prints why), and the client must be refused all the same.
    if !ran(&server) || !ran(&client) {
        assert!(!text(&server).contains("ACCEPTED"), "{server:#?}");
        assert!(!text(&client).contains("CONNECTED"), "{client:#?}");
        return;
    }
    assert!(text(&server).contains("server done"), "{server:#?}");
    if !modes::without_userns() {
        // In the shared namespace the server listens, so the client's refusal means something.
        assert!(!text(&server).contains("refused"), "{server:#?}");
    }
    assert!(!text(&server).contains("ACCEPTED"), "{server:#?}");
    assert_eq!(text(&client).matches("refused").count(), 2, "{client:#?}");
    assert!(!text(&client).contains("CONNECTED"), "{client:#?}");
}
