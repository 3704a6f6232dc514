//! grep and glob with the read-ahead on several host threads: the output is the same on every
//! run and the same as with one reading thread (`TOOLGATE_READ_AHEAD_THREADS=1`), the totals
//! are the ones the test counts itself, truncation stays visible and exact, and the secret is
//! never printed.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use toolgate::sandbox::Limits;
use toolgate::Status;

/// What the generated tree holds, counted while writing it.
struct Tree {
    ws: Ws,
    /// Lines with `NEEDLE_` in files grep searches.
    needle_lines: u64,
    /// Files holding such a line.
    needle_files: u64,
    /// Text files grep searches (binary files and ignored ones excluded).
    text_files: u64,
    binary: u64,
    /// Files whose name is not UTF-8 (counted as unreadable).
    bad_names: u64,
    /// `*.rs` files glob finds.
    rs_files: u64,
}

const SECRET: &str = "NEEDLE_secret_token_8f2a";

fn tree() -> Tree {
    use std::os::unix::ffi::OsStrExt as _;
    let ws = Ws::new();
    let (mut needle_lines, mut needle_files, mut text_files, mut binary, mut rs_files) =
        (0, 0, 0, 0, 0);
    ws.write(".gitignore", "ignored/\n*.gen\n");
    ws.write("p3/.ignore", "skip-*\n");
    ws.write(".env", format!("TOKEN={SECRET}\n"));
    text_files += 2; // the two ignore files themselves are searched
    for i in 0..3000u64 {
        let dir = format!("p{}/q{}/r{}", i % 10, i % 7, i % 3);
        let ext = if i % 4 == 0 { "rs" } else { "txt" };
        let rel = format!("{dir}/f{i:04}.{ext}");
        if i % 37 == 0 {
            ws.write(&rel, format!("bin\0ary NEEDLE_{i}\n").into_bytes());
            binary += 1;
        } else if i % 5 == 0 {
            let n = 1 + i % 3;
            let mut body = String::new();
            for k in 0..n {
                body.push_str(&format!("line {k}\nfound NEEDLE_{i}_{k} here\n"));
            }
            ws.write(&rel, body);
            needle_lines += n;
            needle_files += 1;
            text_files += 1;
        } else {
            ws.write(&rel, format!("nothing in {i}\nneedle lower case\n"));
            text_files += 1;
        }
        if ext == "rs" {
            rs_files += 1;
        }
    }
    // Skipped by the ignore files: never searched, never counted.
    for i in 0..20 {
        ws.write(&format!("ignored/x{i}.txt"), "NEEDLE_ignored\n");
        ws.write(&format!("p1/g{i}.gen"), "NEEDLE_gen\n");
        ws.write(&format!("p3/skip-{i}.txt"), "NEEDLE_skip\n");
    }
    // Names printed quoted.
    ws.write("p2/a:b.txt", "NEEDLE_colon\n");
    ws.write("p2/tab\there.txt", "NEEDLE_tab\n");
    needle_lines += 2;
    needle_files += 2;
    text_files += 2;
    // Names that are not UTF-8.
    for name in [&b"p4/bad\xff.txt"[..], b"p5/\xfe\xfe.txt"] {
        std::fs::write(
            ws.root().join(std::ffi::OsStr::from_bytes(name)),
            "NEEDLE_bad\n",
        )
        .unwrap();
    }
    // A symlink inside: left to the tool, which reads it through the guard.
    std::os::unix::fs::symlink("../p2/a:b.txt", ws.root().join("p6/link.txt")).unwrap();
    needle_lines += 1;
    needle_files += 1;
    text_files += 1;
    Tree {
        ws,
        needle_lines,
        needle_files,
        text_files,
        binary,
        bad_names: 2,
        rs_files,
    }
}

/// The observation without its audit id.
fn stable_json(v: &Value) -> Value {
    let mut v = v.clone();
    v["audit_id"] = json!("<audit>");
    v
}

/// `toolgate call <tool> <input>` with `threads` reading threads (`None`: the default).
fn cli(ws: &Ws, threads: Option<&str>, tool: &str, input: &Value) -> Value {
    let mut cmd = toolgate_command(ws);
    match threads {
        Some(t) => cmd.env("TOOLGATE_READ_AHEAD_THREADS", t),
        None => cmd.env_remove("TOOLGATE_READ_AHEAD_THREADS"),
    };
    let out = cmd
        .args(["call", tool, &input.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{tool} printed no observation ({e}): {text}"));
    stable_json(&v)
}

#[tokio::test]
async fn grep_output_is_the_same_on_every_run_and_the_totals_are_exact() {
    let t = tree();
    let gate = t.ws.gate(false).await;
    // The colon, tab and link files hold one `NEEDLE_<word>` line each, not a `found` line.
    let (odd_lines, odd_files) = (3, 3);
    for (input, lines, files) in [
        // A literal: the host sorts out files without it.
        (
            json!({"pattern": "NEEDLE_", "literal": true, "max_matches": 1000}),
            t.needle_lines,
            t.needle_files,
        ),
        // A regex with a required literal.
        (
            json!({"pattern": r"found NEEDLE_\d+(_\d)? here", "max_matches": 1000}),
            t.needle_lines - odd_lines,
            t.needle_files - odd_files,
        ),
        // No required literal (alternation): every file is searched in the guest.
        (
            json!({"pattern": r"NEEDLE_\d+_\d|NEEDLE_[a-z]+\b", "max_matches": 1000}),
            t.needle_lines,
            t.needle_files,
        ),
    ] {
        let first = ok(&gate, "grep", input.clone()).await;
        let data = &first.data;
        assert_eq!(data["matches"], lines, "{input}: {}", first.content);
        assert_eq!(data["files_matched"], files, "{input}");
        assert_eq!(data["files_searched"], t.text_files, "{input}");
        assert_eq!(data["binary_files_skipped"], t.binary, "{input}");
        assert_eq!(data["unreadable"], t.bad_names, "{input}");
        if files == t.needle_files {
            assert_eq!(
                data["escaped_names"],
                json!(["p2/a:b.txt", "p2/tab\there.txt"])
            );
        }
        assert!(!first.content.contains("secret_token"), "{}", first.content);
        assert!(!first.content.contains("ignored"), "{}", first.content);
        // At most 1000 lines shown, then the truncation note.
        let shown = lines.min(1000) + u64::from(lines > 1000);
        assert_eq!(first.content.lines().count() as u64, shown);
        // Walk order: the printed paths are in the order of the walk (names in byte order,
        // depth first), which for these names is the order of the path components.
        let paths: Vec<Vec<String>> = first
            .content
            .lines()
            .filter(|l| !l.starts_with("[truncated"))
            .map(|l| {
                let p = match l.strip_prefix('"') {
                    Some(quoted) => &quoted[..quoted.find('"').unwrap()],
                    None => &l[..l.find(':').unwrap()],
                };
                p.split('/').map(str::to_string).collect()
            })
            .collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted, "{input}: not in walk order");
        for _ in 0..3 {
            let again = ok(&gate, "grep", input.clone()).await;
            assert_eq!(again.content, first.content, "{input}");
            assert_eq!(again.data, first.data, "{input}");
            assert_eq!(again.summary, first.summary, "{input}");
        }
    }
    // Case-insensitive (no needle): the lower-case lines too.
    let o = ok(
        &gate,
        "grep",
        json!({"pattern": "needle_", "ignore_case": true, "max_matches": 1000}),
    )
    .await;
    assert_eq!(o.data["matches"], t.needle_lines);
    assert!(!o.content.contains("secret_token"));
}

#[tokio::test]
async fn truncation_is_visible_and_exact_with_several_threads() {
    let t = tree();
    let gate = t.ws.gate(false).await;
    let o = ok(
        &gate,
        "grep",
        json!({"pattern": "NEEDLE_", "literal": true, "max_matches": 200}),
    )
    .await;
    assert!(o.truncated);
    assert_eq!(o.content.lines().count(), 201, "{}", o.content);
    let note = o.content.lines().last().unwrap();
    assert_eq!(
        note,
        format!(
            "[truncated: showing 200 of {} matching lines in {} files (limited by head_limit=200); continue with offset=200, raise head_limit, or narrow the pattern or use path/include/type]",
            t.needle_lines, t.needle_files
        )
    );
    // The output size budget.
    let small =
        t.ws.gate_with(
            false,
            Limits {
                max_output_bytes: 2000,
                ..Limits::default()
            },
        )
        .await;
    let first = ok(
        &small,
        "grep",
        json!({"pattern": "NEEDLE_", "literal": true, "max_matches": 1000}),
    )
    .await;
    assert!(first.truncated);
    assert!(first.content.len() <= 2000, "{}", first.content.len());
    let note = first.content.lines().last().unwrap();
    assert!(
        note.contains(&format!(
            "of {} matching lines in {} files (limited by the output size budget)",
            t.needle_lines, t.needle_files
        )),
        "{note}"
    );
    for _ in 0..3 {
        let again = ok(
            &small,
            "grep",
            json!({"pattern": "NEEDLE_", "literal": true, "max_matches": 1000}),
        )
        .await;
        assert_eq!(again.content, first.content);
        assert_eq!(again.data, first.data);
    }
}

#[test]
fn one_reading_thread_and_several_give_the_same_observation() {
    let t = tree();
    for (tool, input) in [
        (
            "grep",
            json!({"pattern": "NEEDLE_", "literal": true, "max_matches": 1000}),
        ),
        (
            "grep",
            json!({"pattern": r"found NEEDLE_\d+", "max_matches": 50}),
        ),
        (
            "grep",
            json!({"pattern": r"NEEDLE|nothing", "max_matches": 1000}),
        ),
        ("glob", json!({"pattern": "**/*.rs"})),
    ] {
        let one = cli(&t.ws, Some("1"), tool, &input);
        assert_eq!(one["status"], "ok", "{one}");
        if tool == "glob" {
            assert_eq!(one["data"]["files"], t.rs_files);
        } else {
            assert_eq!(one["data"]["unreadable"], t.bad_names);
        }
        assert!(!one.to_string().contains("secret_token"));
        for threads in [Some("2"), Some("4"), None] {
            let many = cli(&t.ws, threads, tool, &input);
            assert_eq!(many, one, "{tool} {input} with {threads:?} threads");
        }
    }
}

#[tokio::test]
async fn the_secret_is_never_printed_even_when_it_is_the_only_match() {
    let t = tree();
    let gate = t.ws.gate(false).await;
    for _ in 0..3 {
        let o = gate
            .call(
                SESSION,
                "grep",
                json!({"pattern": "secret_token", "literal": true}),
            )
            .await;
        assert_eq!(o.status, Status::Ok, "{o:#?}");
        assert_eq!(o.data["matches"], 0);
        assert!(!o.content.contains(SECRET));
        assert_eq!(o.data["files_searched"], t.text_files);
    }
}
