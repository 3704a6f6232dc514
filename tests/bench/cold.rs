//! Cold-start section of the benchmark (issue #15): a one-shot `toolgate call read` next to
//! `cat` in the same run.
//!
//! - warm: p50/p90 wall time of `TG_N` (default 40) one-shot `toolgate call read` processes on a
//!   warm component cache, interleaved with as many `cat` processes of the same file (target:
//!   toolgate p50 <= 15 ms in release);
//! - cold: one first call with an empty component cache (it compiles `read` only and says so on
//!   stderr; target: first answer <= 1.5 s).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FILE: &str = "hello from a thirty-five byte file\n";

fn n() -> usize {
    std::env::var("TG_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

fn toolgate(dir: &Path, cache: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.env("TOOLGATE_CACHE_DIR", cache)
        .env("XDG_CONFIG_HOME", dir.join("xdg-config"))
        .env("XDG_STATE_HOME", dir.join("xdg-state"))
        .env_remove("TOOLGATE_LOG")
        .env_remove("TOOLGATE_SESSION")
        .env_remove("TOOLGATE_WORKSPACE")
        .arg("--workspace")
        .arg(dir.join("ws"))
        .args(["call", "read", r#"{"path": "small.txt"}"#, "--compact"])
        .stdin(Stdio::null());
    cmd
}

/// Run `cmd` to the end; its wall time and stderr. Panics if it fails.
fn timed(cmd: &mut Command) -> (Duration, String) {
    let began = Instant::now();
    let out = cmd.output().expect("spawn");
    let took = began.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (took, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("ws")).expect("ws");
    let file = dir.path().join("ws/small.txt");
    std::fs::write(&file, FILE).expect("write");
    let profile = if cfg!(debug_assertions) {
        "dev profile (opt-level 2)"
    } else {
        "release"
    };

    // Warm: the tests' shared cache, filled by a first call.
    let cache = super::cache_dir();
    timed(&mut toolgate(dir.path(), &cache));
    let mut tg = Vec::new();
    let mut cat = Vec::new();
    for _ in 0..n() {
        tg.push(timed(&mut toolgate(dir.path(), &cache)).0);
        cat.push(timed(Command::new("cat").arg(&file).stdout(Stdio::null())).0);
    }
    tg.sort();
    cat.sort();
    let (tg50, cat50) = (super::percentile(&tg, 0.5), super::percentile(&cat, 0.5));
    println!(
        "\n## Cold start: one-shot `toolgate call read` ({profile}, {} runs each, interleaved)",
        n()
    );
    println!(
        "  toolgate call read (warm cache)  p50 {:>7.1} ms   p90 {:>7.1} ms   (target p50 <= 15 ms in release)",
        ms(tg50),
        ms(super::percentile(&tg, 0.9))
    );
    println!(
        "  cat of the same file             p50 {:>7.1} ms   p90 {:>7.1} ms",
        ms(cat50),
        ms(super::percentile(&cat, 0.9))
    );
    println!(
        "  difference                       p50 {:>7.1} ms",
        ms(tg50.saturating_sub(cat50))
    );

    // Cold: an empty cache; the first call compiles `read` only.
    let empty = tempfile::tempdir().expect("cache");
    let (took, stderr) = timed(&mut toolgate(dir.path(), empty.path()));
    let artifacts = std::fs::read_dir(empty.path())
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                .count()
        })
        .unwrap_or(0);
    let line = stderr
        .lines()
        .find(|l| l.contains("compiling"))
        .unwrap_or("(no progress line!)");
    println!(
        "  first call, empty cache          {:>7.1} ms   (target <= 1500 ms; {artifacts} artifact compiled; stderr: {line})",
        ms(took)
    );
}
