//! Attacks on the host-assisted walk and grep's read-ahead (issue #14 parts 1 and 4).
//!
//! Part 1: the host acts on what it checked. A process exchanging a plain directory `d` with
//! the secret directory `.aws` (`renameat2(RENAME_EXCHANGE)`) right after the walk listed the
//! workspace root must not make grep print the secret's contents or ls/glob list the secret's
//! names under `d/`: the walk enters and reads only through the descriptors of what it listed.
//!
//! Part 4: ignore files are host work inside the call's limits: six nested 1 MiB `.gitignore`
//! files no longer cost seconds and a gigabyte; the patterns past `[limits] ignore_patterns` /
//! `ignore_bytes` are cut, and the observation names the cut files.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate::Status;

const SECRET: &str = "aws_secret_access_key=SECRETwT9sLq2Vx7Nb4Kc8Hm1Zp6Rd3";
const PLAIN: &str = "aws_secret_access_key=plain-placeholder";
/// A name only the secret directory holds: listing it under `d/` lists the secret's names.
const SECRET_NAME: &str = "only-in-the-secret-dir.txt";

/// A workspace with `.aws/credentials` (the secret), `d/credentials` (a plain file with the
/// same name), and `a-start/` (many files, walked before `d`): opening `a-start` tells the
/// racer the root has been listed.
fn race_workspace() -> Ws {
    let ws = Ws::new();
    ws.write(".aws/credentials", format!("[default]\n{SECRET}\n"))
        .write(&format!(".aws/{SECRET_NAME}"), "x\n")
        .write("d/credentials", format!("[default]\n{PLAIN}\n"))
        .write("d/plain-name.txt", "x\n");
    for i in 0..300 {
        for j in 0..4 {
            ws.write(&format!("a-start/s{i:03}/f{j}.txt"), "nothing to see\n");
        }
    }
    ws
}

fn exchange(root: &Path) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        root.join("d"),
        rustix::fs::CWD,
        root.join(".aws"),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
}

/// Put the secret back under `.aws` (the racer stops after an odd number of exchanges half
/// the time).
fn settle(root: &Path) {
    let text = std::fs::read_to_string(root.join(".aws/credentials")).unwrap();
    if !text.contains(SECRET) {
        exchange(root);
    }
}

/// A racer thread for one call: it waits until the walk opens `a-start` (the root was listed
/// by then), then exchanges `d` and `.aws` as fast as it can until told to stop (at most
/// `bound`). Started and stopped by the test; it touches only the test's temporary workspace.
struct Racer {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Racer {
    fn start(root: PathBuf, bound: Duration) -> Racer {
        use rustix::fs::inotify;
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let fd =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&fd, &root, inotify::WatchFlags::OPEN).unwrap();
        let (s, n) = (stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            let began = Instant::now();
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
            // Wait for the walk to enter `a-start`.
            'wait: while !s.load(Ordering::Relaxed) && began.elapsed() < bound {
                let mut reader = inotify::Reader::new(&fd, &mut buf);
                while let Ok(event) = reader.next() {
                    if event
                        .file_name()
                        .is_some_and(|name| name.to_bytes() == b"a-start")
                    {
                        break 'wait;
                    }
                }
                std::thread::yield_now();
            }
            while !s.load(Ordering::Relaxed) && began.elapsed() < bound {
                exchange(&root);
                n.fetch_add(1, Ordering::Relaxed);
            }
        });
        Racer {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    /// Stop and join; the number of exchanges made.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Racer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Run `tool` with `input` `runs` times under the race; every observation's content and data.
async fn under_race(ws: &Ws, tool: &str, input: Value, runs: usize) -> (Vec<String>, u64) {
    let gate = ws.gate(false).await;
    let root = ws.root();
    let mut outputs = Vec::new();
    let mut swaps = 0;
    for _ in 0..runs {
        settle(&root);
        let racer = Racer::start(root.clone(), Duration::from_secs(5));
        let o = call(&gate, tool, input.clone()).await;
        swaps += racer.finish();
        assert_eq!(o.status, Status::Ok, "{o:#?}");
        outputs.push(format!("{}\n{}", o.content, o.data));
    }
    settle(&root);
    (outputs, swaps)
}

#[tokio::test]
async fn grep_never_prints_the_secret_while_d_and_aws_are_exchanged() {
    let ws = race_workspace();
    let (outputs, swaps) =
        under_race(&ws, "grep", json!({"pattern": "aws_secret_access_key"}), 30).await;
    assert!(swaps > 30, "the racer hardly ran ({swaps} exchanges)");
    let leaked: Vec<&String> = outputs.iter().filter(|o| o.contains("SECRET")).collect();
    assert!(
        leaked.is_empty(),
        "{} of {} greps printed the secret ({swaps} exchanges), e.g.:\n{}",
        leaked.len(),
        outputs.len(),
        leaked.first().map(|s| s.as_str()).unwrap_or("")
    );
}

#[tokio::test]
async fn ls_and_glob_never_list_the_secret_dir_while_it_is_exchanged() {
    let ws = race_workspace();
    for (tool, input) in [
        // Under the tools' output caps (ls 1000 entries, glob 100 results), with `a-start`'s
        // directories still walked.
        ("ls", json!({"path": ".", "depth": 3, "ignore": ["f*.txt"]})),
        ("glob", json!({"pattern": "**/*-*.txt"})),
    ] {
        let (outputs, swaps) = under_race(&ws, tool, input, 20).await;
        assert!(
            swaps > 20,
            "{tool}: the racer hardly ran ({swaps} exchanges)"
        );
        let leaked: Vec<&String> = outputs.iter().filter(|o| o.contains(SECRET_NAME)).collect();
        assert!(
            leaked.is_empty(),
            "{tool}: {} of {} listings named the secret directory's files ({swaps} exchanges), e.g.:\n{}",
            leaked.len(),
            outputs.len(),
            leaked
                .first()
                .map(|s| s.lines().filter(|l| l.contains(SECRET_NAME)).collect::<Vec<_>>().join("\n"))
                .unwrap_or_default()
        );
    }
}

/// Six nested directories, each with a 1 MiB `.gitignore` of patterns globset compiles to
/// regexes (the costly kind), and a file at the bottom.
fn nested_ignore_workspace() -> Ws {
    let ws = Ws::new();
    let mut dir = String::new();
    for level in 0..6 {
        let mut text = String::new();
        let mut i = 0;
        while text.len() < (1 << 20) - 64 {
            text.push_str(&format!("dir-{level}-{i}/**/*.gen-{i}\n"));
            i += 1;
        }
        ws.write(&format!("{dir}.gitignore"), text);
        dir.push_str(&format!("n{level}/"));
    }
    ws.write(&format!("{dir}needle.txt"), "needle\n");
    ws
}

/// The host's peak RSS for a call over six nested 1 MiB ignore files: was 1.2 GB for ls and
/// 2.3 GB for grep (and 17.9 s). Alone the call peaks at ~230 MB; inside a loaded parallel
/// test run (a clean-clone CI run on 2 cores) 603 MB was seen for ls, transient allocations
/// of the chunked compile that the allocator had not returned. The bound sits between that
/// and the unbounded figures, so the old code still fails it.
const MAX_HOST_RSS_KB: i64 = 900 << 10;

#[test]
fn six_nested_one_mib_ignore_files_stay_inside_the_call_limits() {
    let ws = nested_ignore_workspace();
    let outside = tempfile::tempdir().unwrap();
    let policy = outside.path().join("policy.toml");
    std::fs::write(
        &policy,
        "mode = \"allow-all\"\n\n[limits]\ntimeout_ms = 15000\n",
    )
    .unwrap();
    for (tool, input) in [
        ("ls", r#"{"depth": 10}"#),
        ("grep", r#"{"pattern": "needle"}"#),
    ] {
        // The first use of a component on a fresh machine compiles it (hundreds of MB of
        // Cranelift, in this same process): warm the cache in an empty workspace first, so
        // the figure is the walk's.
        let warm = Ws::new();
        let _ = cli_peak_rss(&warm, &policy, &["call", tool, input]);
        let (o, rss, took) = cli_peak_rss(&ws, &policy, &["call", tool, input]);
        assert_eq!(o["status"], "ok", "{tool}: {o:#}");
        assert!(
            o["content"].as_str().unwrap().contains("needle"),
            "{tool}: {o:#}"
        );
        // The start-up of a debug binary under a loaded test run is part of the time.
        assert!(took < Duration::from_secs(20), "{tool} took {took:?}");
        assert!(rss < MAX_HOST_RSS_KB, "{tool}: host peak RSS {rss} KiB");
        let cut = o["data"]["ignore_files_cut"].as_array().unwrap_or_else(|| {
            panic!("{tool}: the observation does not name the cut ignore files: {o:#}")
        });
        assert!(!cut.is_empty(), "{tool}: {o:#}");
        assert!(
            cut.iter()
                .all(|c| c.as_str().unwrap().ends_with(".gitignore")),
            "{tool}: {cut:?}"
        );
        eprintln!("{tool}: {took:?}, host peak RSS {rss} KiB, cut {cut:?}");
    }
}

#[test]
fn a_policy_ignore_patterns_limit_cuts_and_says_so() {
    let ws = Ws::new();
    let mut text = String::new();
    for i in 0..20 {
        text.push_str(&format!("skip-{i:02}.txt\n"));
    }
    ws.write(".gitignore", &text);
    for i in 0..20 {
        ws.write(&format!("skip-{i:02}.txt"), "x\n");
    }
    // An untrusted workspace policy may lower the limit (a stricter part applies).
    ws.plant(".toolgate/policy.toml", "[limits]\nignore_patterns = 10\n");
    let outside = tempfile::tempdir().unwrap();
    let policy = outside.path().join("policy.toml");
    std::fs::write(&policy, "mode = \"allow-all\"\n").unwrap();
    let (o, _, _) = cli_peak_rss(&ws, &policy, &["call", "ls", "{}"]);
    assert_eq!(o["status"], "ok", "{o:#}");
    assert_eq!(
        o["data"]["ignore_files_cut"],
        json!([".gitignore"]),
        "{o:#}"
    );
    let content = o["content"].as_str().unwrap();
    // The first ten patterns still apply; the rest were cut, so their files are listed.
    assert!(!content.contains("skip-09.txt"), "{content}");
    assert!(content.contains("skip-10.txt"), "{content}");
    assert!(content.contains("skip-19.txt"), "{content}");
}
