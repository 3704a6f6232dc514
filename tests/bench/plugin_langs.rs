//! The word-count plugin in Rust, Python (componentize-py) and JavaScript (componentize-js),
//! side by side in one run (`cargo bench --bench plugin_langs`):
//!
//! - **first call, cold cache**: `toolgate call` in a new process with a fresh, empty
//!   `TOOLGATE_CACHE_DIR`: compiling the component, pre-instantiating it, reading its
//!   self-description and the call (the plugin was installed with another cache dir);
//! - **first call, warm cache**: the same in a second process, with the compiled artifact
//!   cached;
//! - **per call, warm host**: p50 and p99 of calls through the whole gate in one process.
//!
//! The Python and JavaScript components are built (once, cached under target/tmp) with the
//! toolchains of tests/scripts/install-plugin-toolchains.sh; a language whose toolchain cannot
//! be installed is reported as skipped. Target: a warm Python call within 3x the Rust one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../integration/plugin_langs_build.rs"]
mod build;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use toolgate::{Gate, GateOptions, Status};

fn main() {
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Env {
    ws: tempfile::TempDir,
    user: tempfile::TempDir,
}

impl Env {
    fn cmd(&self, cache: &Path) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        c.env("TOOLGATE_CACHE_DIR", cache)
            .env_remove("TOOLGATE_SESSION")
            .env_remove("TOOLGATE_WORKSPACE")
            .env_remove("TOOLGATE_LOG")
            .env("XDG_CONFIG_HOME", self.user.path().join("xdg-config"))
            .env("XDG_STATE_HOME", self.user.path().join("xdg-state"))
            .arg("--workspace")
            .arg(self.ws.path());
        c
    }
}

/// A small source tree to count: 40 files of 2 KiB in 4 directories.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    for d in 0..4 {
        for f in 0..10 {
            let p = dir.path().join(format!("src/d{d}/f{f}.txt"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, line.repeat(2048 / line.len())).unwrap();
        }
    }
    dir
}

/// Minor page faults of this process so far (`/proc/self/stat`; 0 where there is none).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Field 10 (minflt), counted after the parenthesised command name.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Row {
    lang: &'static str,
    size: u64,
    cold: Duration,
    warm_process: Duration,
    p50: Duration,
    p99: Duration,
    /// Minor page faults of this process per warm call.
    faults: u64,
    summary: String,
}

async fn measure(lang: &'static str, wasm: &Path, manifest: &Path, n: usize) -> Row {
    let env = Env {
        ws: workspace(),
        user: tempfile::tempdir().unwrap(),
    };
    let install_cache = tempfile::tempdir().unwrap();
    let out = env
        .cmd(install_cache.path())
        .args(["plugin", "add", "--yes"])
        .arg(wasm)
        .arg("--manifest")
        .arg(manifest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{lang}: plugin add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let call = |cache: &Path| {
        let t = Instant::now();
        let out = env
            .cmd(cache)
            .args([
                "--grant",
                "plugin__word-count:**",
                "call",
                "plugin__word-count",
                r#"{"path": "src"}"#,
            ])
            .output()
            .unwrap();
        let took = t.elapsed();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["status"], "ok", "{lang}: {v:#}");
        took
    };
    let cold_cache = tempfile::tempdir().unwrap();
    let cold = call(cold_cache.path());
    let warm_process = call(cold_cache.path());

    let gate = Gate::open(GateOptions {
        workspace: env.ws.path().canonicalize().unwrap(),
        cache_dir: Some(cold_cache.path().to_path_buf()),
        grants: vec!["plugin__word-count:**".into()],
        user_dirs: Some(toolgate::userdirs::UserDirs {
            config: env.user.path().join("xdg-config/toolgate"),
            state: env.user.path().join("xdg-state/toolgate"),
        }),
        ..GateOptions::default()
    })
    .await
    .expect("gate");
    let input = json!({"path": "src"});
    let first = gate
        .call("bench", "plugin__word-count", input.clone())
        .await;
    assert_eq!(first.status, Status::Ok, "{lang}: {first:?}");
    for _ in 0..5 {
        gate.call("bench", "plugin__word-count", input.clone())
            .await;
    }
    let mut times = Vec::with_capacity(n);
    let faults_before = minor_faults();
    for _ in 0..n {
        let t = Instant::now();
        let o = gate
            .call("bench", "plugin__word-count", input.clone())
            .await;
        times.push(t.elapsed());
        debug_assert_eq!(o.status, Status::Ok);
    }
    let faults = (minor_faults() - faults_before) / n as u64;
    times.sort();
    Row {
        lang,
        size: std::fs::metadata(wasm).map(|m| m.len()).unwrap_or(0),
        cold,
        warm_process,
        p50: percentile(&times, 0.5),
        p99: percentile(&times, 0.99),
        faults,
        summary: first.content.lines().last().unwrap_or("").to_string(),
    }
}

async fn run() {
    let n: usize = std::env::var("TG_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let examples = build::repo().join("guest-tools/examples");
    let tc = build::toolchains();
    let mut plugins: Vec<(&'static str, PathBuf, PathBuf)> = vec![(
        "rust",
        PathBuf::from(toolgate::tools::registry::GUEST_ARTIFACT_DIR)
            .join("toolgate_plugin_word_count.wasm"),
        examples.join("word-count/toolgate-plugin.toml"),
    )];
    match tc.python.and_then(|p| build::word_count_py(&p)) {
        Ok(w) => plugins.push((
            "python",
            w,
            examples.join("word-count-py/toolgate-plugin.toml"),
        )),
        Err(e) => println!("python: skipped: {e}"),
    }
    match tc.js.and_then(|p| build::word_count_js(&p)) {
        Ok(w) => plugins.push(("js", w, examples.join("word-count-js/toolgate-plugin.toml"))),
        Err(e) => println!("js: skipped: {e}"),
    }
    // `TG_LANGS=python`: only these languages (a comma list), e.g. to profile one of them.
    if let Ok(only) = std::env::var("TG_LANGS") {
        plugins.retain(|(lang, _, _)| only.split(',').any(|l| l.trim() == *lang));
    }
    let mut rows = Vec::new();
    for (lang, wasm, manifest) in &plugins {
        rows.push(measure(lang, wasm, manifest, n).await);
    }
    println!(
        "word-count plugin, `{{\"path\": \"src\"}}` over 40 files of 2 KiB; {n} warm calls each"
    );
    println!(
        "  {:<7} {:>9} {:>16} {:>16} {:>12} {:>12} {:>11} {:>12}",
        "lang",
        "size",
        "1st call, cold",
        "1st call, warm",
        "p50/call",
        "p99/call",
        "p50 vs rust",
        "faults/call"
    );
    let rust_p50 = match rows.iter().find(|r| r.lang == "rust") {
        Some(r) => r.p50,
        None => rows.first().map_or(Duration::from_millis(1), |r| r.p50),
    };
    for r in &rows {
        println!(
            "  {:<7} {:>7.1}MB {:>13.0} ms {:>13.0} ms {:>9.2} ms {:>9.2} ms {:>10.1}x {:>12}",
            r.lang,
            r.size as f64 / 1e6,
            ms(r.cold),
            ms(r.warm_process),
            ms(r.p50),
            ms(r.p99),
            r.p50.as_secs_f64() / rust_p50.as_secs_f64(),
            r.faults
        );
    }
    for r in &rows {
        println!("  {} says: {}", r.lang, r.summary);
    }
    let has_rust = rows.iter().any(|r| r.lang == "rust");
    if let Some(py) = rows.iter().find(|r| r.lang == "python" && has_rust) {
        let ratio = py.p50.as_secs_f64() / rust_p50.as_secs_f64();
        println!(
            "  target: a warm Python call within 3x the Rust one: {:.1}x, {}",
            ratio,
            if ratio <= 3.0 { "met" } else { "MISSED" }
        );
    }
}
