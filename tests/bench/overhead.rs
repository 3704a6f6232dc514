//! Benchmarks of what makes toolgate fast or slow, printed as a table (`cargo bench`):
//!
//! 1. per-call overhead: `read` of a 35-byte file through the whole gate on a warm host
//!    (p50/p99 over many calls), and the bare sandbox call without the gate;
//! 2. shell overhead: `true` spawned plainly, spawned with the shell's confinement (Landlock,
//!    network + mount namespaces, scrubbed env), and run through the whole gate as a `shell` call,
//!    back to back and at an agent's pace (one every 100 ms, beside a plain spawn at that pace);
//! 3. search throughput: `grep` and `glob` over a large real tree, side by side with ripgrep
//!    (`rg -j1` and `rg`) in the same run, with the ratios.
//!
//! The tree is `$TOOLGATE_BENCH_TREE`, else the local cargo registry sources. ripgrep is
//! installed from Debian's packages when missing (root only); without it the ratios are skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use toolgate::sandbox::Limits;
use toolgate::{Gate, GateOptions, Status};

mod cold;
mod mcp;
#[path = "../raw_http.rs"]
mod raw_http;

fn main() {
    // Errors capture backtraces when this is set, which distorts timings.
    std::env::remove_var("RUST_BACKTRACE");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The component cache: `TOOLGATE_CACHE_DIR` when set (a run as another user needs one it
/// owns), else one under the target dir.
fn cache_dir() -> PathBuf {
    std::env::var_os("TOOLGATE_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache"))
}

async fn run() {
    // `TG_ONLY=per-call|shell|search|mcp|cold` runs one section (for profiling).
    let only = std::env::var("TG_ONLY").unwrap_or_default();
    let on = |s: &str| only.is_empty() || only == s;
    if on("per-call") {
        per_call().await;
    }
    if on("shell") {
        shell_overhead().await;
    }
    if on("search") {
        search().await;
    }
    if on("mcp") {
        mcp::run().await;
    }
    if on("cold") {
        cold::run().await;
    }
}

async fn per_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("small.txt"),
        "hello from a thirty-five byte file\n",
    )
    .expect("write");
    let gate = Gate::open(GateOptions {
        workspace: dir.path().to_path_buf(),
        cache_dir: Some(cache_dir()),
        ..GateOptions::default()
    })
    .await
    .expect("gate");
    let input = json!({"path": "small.txt"});
    for _ in 0..200 {
        let o = gate.call("bench", "read", input.clone()).await;
        assert_eq!(o.status, Status::Ok, "{o:?}");
    }
    let n = std::env::var("TG_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let o = gate.call("bench", "read", input.clone()).await;
        times.push(t.elapsed());
        debug_assert_eq!(o.status, Status::Ok);
    }
    times.sort();
    println!("per-call overhead: `read` of a 35-byte file through the gate, warm host, {n} calls");
    println!(
        "  p50 {:>8.1} µs   p99 {:>8.1} µs   (target p50 <= 100 µs)",
        percentile(&times, 0.5).as_secs_f64() * 1e6,
        percentile(&times, 0.99).as_secs_f64() * 1e6
    );
}

fn tree() -> Option<PathBuf> {
    if let Some(t) = std::env::var_os("TOOLGATE_BENCH_TREE") {
        return Some(PathBuf::from(t));
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = home.join("registry").join("src");
    std::fs::read_dir(&src)
        .ok()?
        .flatten()
        .map(|e| e.path())
        // The index's sources, not a hidden directory such as the state `.toolgate/` a run
        // with the registry as its workspace leaves there.
        .find(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
}

fn ensure_rg() -> bool {
    if Command::new("rg").arg("--version").output().is_ok() {
        return true;
    }
    eprintln!("ripgrep missing: installing it from Debian's packages");
    let ok = Command::new("sh")
        .args(["-c", "apt-get update -qq && apt-get install -y -qq ripgrep"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok && Command::new("rg").arg("--version").output().is_ok()
}

fn time_cmd(args: &[&str], dir: &Path, runs: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(args[0])
            .args(&args[1..])
            .current_dir(dir)
            .output()
            .expect("run");
        let e = t.elapsed();
        assert!(out.status.code().is_some());
        best = best.min(e);
    }
    best
}

async fn search() {
    let Some(tree) = tree() else {
        println!("search: no tree (set TOOLGATE_BENCH_TREE); skipped");
        return;
    };
    // The tree is a workspace whose .toolgate/ state would land inside it: use a copy-free
    // approach by giving the gate a private state dir.
    let files = walk_count(&tree);
    println!("\nsearch over {} ({} files)", tree.display(), files);
    let state = tempfile::tempdir().expect("tempdir");
    let gate = Gate::open(GateOptions {
        workspace: tree.clone(),
        state_dir: Some(state.path().to_path_buf()),
        cache_dir: Some(cache_dir()),
        limits: Some(Limits {
            timeout: Duration::from_secs(600),
            ..Limits::default()
        }),
        ..GateOptions::default()
    })
    .await
    .expect("gate");
    let rg = ensure_rg();
    let runs = 3;
    for (label, pattern) in [
        ("rare literal", "unsafe impl Send for"),
        ("no match", "zqxj_no_such_text"),
        ("regex", r"fn \w+_unchecked\("),
    ] {
        let mut best = Duration::MAX;
        let mut matches = 0;
        for _ in 0..runs {
            let t = Instant::now();
            let o = gate
                .call(
                    "bench",
                    "grep",
                    json!({"pattern": pattern, "max_matches": 1000}),
                )
                .await;
            best = best.min(t.elapsed());
            assert_eq!(o.status, Status::Ok, "{}", o.content);
            matches = o.totals.get("matches").map(|t| t.seen).unwrap_or(0);
        }
        print!(
            "  grep {label:<13} {:>8.0} ms ({matches} lines)",
            best.as_secs_f64() * 1e3
        );
        if rg {
            let j1 = time_cmd(&["rg", "-j1", "--hidden", "-c", pattern, "."], &tree, runs);
            let jn = time_cmd(&["rg", "--hidden", "-c", pattern, "."], &tree, runs);
            print!(
                "   rg -j1 {:>7.0} ms  rg {:>7.0} ms   ratio vs rg -j1 {:.2}x, vs rg {:.2}x",
                j1.as_secs_f64() * 1e3,
                jn.as_secs_f64() * 1e3,
                best.as_secs_f64() / j1.as_secs_f64(),
                best.as_secs_f64() / jn.as_secs_f64()
            );
            // The whole process, as a CI step runs it.
            let input = json!({"pattern": pattern, "max_matches": 1000}).to_string();
            let process = time_process(&tree, state.path(), &["call", "grep", &input], runs);
            print!(
                "\n    toolgate call grep (whole process) {:>7.0} ms   vs rg {:.2}x",
                process.as_secs_f64() * 1e3,
                process.as_secs_f64() / jn.as_secs_f64()
            );
        }
        println!();
    }
    let mut best = Duration::MAX;
    let mut found = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let o = gate
            .call("bench", "glob", json!({"pattern": "**/*.rs"}))
            .await;
        best = best.min(t.elapsed());
        assert_eq!(o.status, Status::Ok, "{}", o.content);
        found = o.totals.get("files").map(|t| t.seen).unwrap_or(0);
    }
    print!(
        "  glob **/*.rs        {:>8.0} ms ({found} files)",
        best.as_secs_f64() * 1e3
    );
    if rg {
        let j1 = time_cmd(
            &["rg", "-j1", "--hidden", "--files", "-g", "*.rs", "."],
            &tree,
            runs,
        );
        let jn = time_cmd(
            &["rg", "--hidden", "--files", "-g", "*.rs", "."],
            &tree,
            runs,
        );
        print!(
            "   rg -j1 --files {:>7.0} ms  rg --files {:>7.0} ms   ratio vs rg -j1 {:.2}x, vs rg {:.2}x",
            j1.as_secs_f64() * 1e3,
            jn.as_secs_f64() * 1e3,
            best.as_secs_f64() / j1.as_secs_f64(),
            best.as_secs_f64() / jn.as_secs_f64()
        );
    }
    println!();
}

/// Best wall time of `toolgate <args>` over `tree` as a whole process (state and config in
/// `state`, the tests' component cache).
fn time_process(tree: &Path, state: &Path, args: &[&str], runs: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .env("TOOLGATE_CACHE_DIR", cache_dir())
            .env("XDG_CONFIG_HOME", state.join("xdg-config"))
            .env("XDG_STATE_HOME", state.join("xdg-state"))
            .env_remove("TOOLGATE_LOG")
            .env_remove("TOOLGATE_SESSION")
            .env_remove("TOOLGATE_WORKSPACE")
            .arg("--workspace")
            .arg(tree)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run toolgate");
        let e = t.elapsed();
        assert!(
            out.status.success(),
            "toolgate {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        best = best.min(e);
    }
    best
}

fn walk_count(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(e.path()),
                    Ok(_) => n += 1,
                    Err(_) => {}
                }
            }
        }
    }
    n
}

fn p50_of(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

/// `true` through toolgate vs a plain spawn, with and without confinement, in one run.
async fn shell_overhead() {
    const N: usize = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let plain: Vec<Duration> = (0..N)
        .map(|_| {
            let t = Instant::now();
            let s = Command::new("/bin/true").status().expect("spawn true");
            assert!(s.success());
            t.elapsed()
        })
        .collect();
    let tmp = tempfile::tempdir().expect("tempdir");
    let confined: Vec<Duration> = (0..N)
        .map(|_| {
            let t = Instant::now();
            let mut cmd = Command::new("/bin/true");
            cmd.env_clear();
            // Namespaces, Landlock, capabilities and seccomp, without the filesystem view
            // (that needs the host's per-call directories; the whole call below has it).
            let mut want = toolgate::exec::confine::available(false);
            want.view = false;
            want.pidns = false;
            // Landlock-only mode's rules come from the workspace's plan (the whole call below
            // has them): here the spawn keeps seccomp and no_new_privs alone.
            want.landlock &= want.mode != toolgate::exec::confine::NsMode::LandlockOnly;
            toolgate::exec::confine::apply(
                &mut cmd,
                want,
                None,
                &[root.clone(), tmp.path().to_path_buf()],
                None,
                None,
                None,
            )
            .expect("confinement");
            let s = cmd.status().expect("spawn confined true");
            assert!(s.success());
            t.elapsed()
        })
        .collect();
    let gate = Gate::open(GateOptions {
        workspace: root.clone(),
        cache_dir: Some(cache_dir()),
        grants: vec!["shell:true".into()],
        ..GateOptions::default()
    })
    .await
    .expect("gate");
    let input = json!({"command": "true"});
    let mut through = Vec::with_capacity(N);
    for _ in 0..N {
        let t = Instant::now();
        let o = gate.call("bench", "shell", input.clone()).await;
        through.push(t.elapsed());
        assert_eq!(o.status, Status::Ok, "{o:?}");
    }
    // At an agent's pace (a call every 100 ms) instead of back to back: the kernel's
    // per-burst costs (moving a process into a cgroup waits for an RCU grace period unless
    // one is under way) show here, next to a plain spawn at the same pace.
    const SPACED: usize = 30;
    let mut plain_spaced = Vec::with_capacity(SPACED);
    let mut spaced = Vec::with_capacity(SPACED);
    for _ in 0..SPACED {
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        let s = Command::new("/bin/true").status().expect("spawn true");
        plain_spaced.push(t.elapsed());
        assert!(s.success());
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        let o = gate.call("bench", "shell", input.clone()).await;
        spaced.push(t.elapsed());
        assert_eq!(o.status, Status::Ok, "{o:?}");
    }
    // The same call in a workspace of 10,000 files in 500 directories with 20 deny-listed
    // paths and a git repository: the view's masks and the cached plan.
    let big = tempfile::tempdir().expect("tempdir");
    let big_root = big.path().canonicalize().expect("canonical");
    for d in 0..500 {
        let dir = big_root.join(format!("src/m{d}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..20 {
            std::fs::write(dir.join(format!("f{f}.rs")), "fn x() {}\n").expect("write");
        }
        if d % 25 == 0 {
            std::fs::write(dir.join(".env"), "SECRET=1\n").expect("write");
        }
    }
    std::fs::create_dir_all(big_root.join(".git/hooks")).expect("git");
    std::fs::write(big_root.join(".git/config"), "[core]\n").expect("git");
    std::fs::write(big_root.join(".git/HEAD"), "ref: refs/heads/main\n").expect("git");
    // A directory changed in the last 2 s is re-read on every plan (a file made in the same
    // timestamp tick would not change its mtime); a real workspace has settled.
    std::thread::sleep(Duration::from_millis(2100));
    let big_gate = Gate::open(GateOptions {
        workspace: big_root.clone(),
        cache_dir: Some(cache_dir()),
        grants: vec!["shell:true".into()],
        ..GateOptions::default()
    })
    .await
    .expect("gate");
    let mut masked = Vec::with_capacity(N);
    let mut masks = 0;
    for _ in 0..N {
        let t = Instant::now();
        let o = big_gate.call("bench", "shell", input.clone()).await;
        masked.push(t.elapsed());
        assert_eq!(o.status, Status::Ok, "{o:?}");
        masks = o.data["confinement"]["masks"].as_u64().unwrap_or(0);
    }
    let c = toolgate::exec::confine::available(false);
    let (m, m99) = p50_of(masked);
    let (p, p99) = p50_of(plain);
    let (cf, cf99) = p50_of(confined);
    let (g, g99) = p50_of(through);
    let (ps, ps99) = p50_of(plain_spaced);
    let (gs, gs99) = p50_of(spaced);
    println!(
        "\nshell overhead (`true`, {N} runs, uid {}; mode {}; confinement: landlock={} scopes={} netns={} mountns={} view={} pidns={} caps_dropped={} seccomp={})",
        rustix::process::getuid().as_raw(),
        c.mode.name(),
        c.landlock, c.scopes, c.netns, c.mountns, c.view, c.pidns, c.caps_dropped, c.seccomp
    );
    println!(
        "  plain spawn            p50 {:>8.2?}  p99 {:>8.2?}",
        p, p99
    );
    println!(
        "  confined spawn         p50 {:>8.2?}  p99 {:>8.2?}  (+{:.2?})",
        cf,
        cf99,
        cf.saturating_sub(p)
    );
    println!(
        "  toolgate shell call    p50 {:>8.2?}  p99 {:>8.2?}  (+{:.2?} over plain; empty workspace, no masks)",
        g,
        g99,
        g.saturating_sub(p)
    );
    println!(
        "  plain spawn, spaced    p50 {:>8.2?}  p99 {:>8.2?}  (one every 100 ms, {SPACED} runs)",
        ps, ps99
    );
    println!(
        "  toolgate shell, spaced p50 {:>8.2?}  p99 {:>8.2?}  (+{:.2?} over plain spaced; empty workspace)",
        gs,
        gs99,
        gs.saturating_sub(ps)
    );
    println!(
        "  toolgate shell call    p50 {:>8.2?}  p99 {:>8.2?}  (+{:.2?} over plain; 10k files, {masks} masks)",
        m,
        m99,
        m.saturating_sub(p)
    );
}
