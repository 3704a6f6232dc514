//! grep's output modes, context, file types, multiline patterns and paging, end to end through
//! the gate, each compared with real ripgrep's answer on the same tree (`rg --no-config
//! --sort path`, run from the workspace root, so both print paths relative to it in name
//! order). ripgrep comes from PATH or `tests/scripts/install-ripgrep.sh`; without it the
//! tests print `skipped: needs ripgrep (...)`.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The ripgrep to compare with: `TOOLGATE_RG`, rg on PATH, or the one the install script
/// installs (run at most once per process).
fn ripgrep() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scripts/install-ripgrep.sh");
            let out = Command::new("bash")
                .arg(&script)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let last = stdout.lines().last().unwrap_or("").trim().to_string();
            if out.status.success() && Path::new(&last).is_file() {
                return Ok(PathBuf::from(last));
            }
            Err(format!(
                "{} failed ({}): {}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        })
        .clone()
}

/// A workspace and the ripgrep to compare with, or None (the test is skipped, saying why).
fn setup() -> Option<(Ws, PathBuf)> {
    match ripgrep() {
        Ok(rg) => Some((Ws::new(), rg)),
        Err(why) => {
            eprintln!("skipped: needs ripgrep ({why})");
            None
        }
    }
}

/// ripgrep's output for `args`, run from the workspace root (no match is an empty answer).
fn rg(rg: &Path, ws: &Ws, args: &[&str]) -> String {
    let out = Command::new(rg)
        .args(["--no-config", "--sort", "path", "--no-ignore-parent"])
        .args(args)
        .current_dir(ws.root())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "rg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The content without grep's closing note lines (`[...]`).
fn rows(content: &str) -> String {
    content
        .lines()
        .filter(|l| !l.starts_with('['))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A tree of several file types with words spread over lines so that matches, context
/// groups and multi-line matches overlap in varied ways. No hidden, ignored or binary files
/// and no long lines: both tools search exactly the same files.
fn project(ws: &Ws) {
    let words = [
        "alpha", "beta", "gamma", "foo", "bar", "delta", "fn main", "TODO", "omega", "let x",
    ];
    let files = [
        "src/main.rs",
        "src/lib.rs",
        "src/util/mod.rs",
        "src/util/parse.rs",
        "py/app.py",
        "py/tests/test_app.py",
        "web/index.js",
        "web/app.ts",
        "web/style.css",
        "docs/guide.md",
        "README.md",
        "Makefile",
        "build.mk",
        "c/x.c",
        "c/x.h",
        "notes.txt",
    ];
    let mut seed = 7u64;
    for (i, rel) in files.iter().enumerate() {
        let mut body = String::new();
        for line in 0..(20 + i * 3) {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = words[(seed >> 33) as usize % words.len()];
            let b = words[(seed >> 41) as usize % words.len()];
            match (seed >> 50) % 4 {
                0 => body.push_str(&format!("{a} {line}\n")),
                1 => body.push_str(&format!("  {a} and {b}\n")),
                2 => body.push('\n'),
                _ => body.push_str(&format!("{line}: {b}\n")),
            }
        }
        ws.write(rel, body);
    }
}

async fn grep(gate: &toolgate::Gate, input: Value) -> toolgate::Observation {
    let mut input = input;
    input["head_limit"] = json!(1000);
    ok(gate, "grep", input).await
}

#[tokio::test]
async fn modes_match_ripgrep() {
    let Some((ws, bin)) = setup() else { return };
    project(&ws);
    let gate = ws.gate(false).await;
    for pattern in ["alpha", r"fn main|TODO", r"^\s+\w+ and", r"\d+: (foo|bar)$"] {
        let o = grep(&gate, json!({"pattern": pattern})).await;
        let want = rg(&bin, &ws, &["-n", pattern]);
        assert!(!want.is_empty(), "{pattern}");
        assert_eq!(o.content, want, "content `{pattern}`");
        assert!(!o.truncated);
        assert_eq!(o.data["next_offset"], Value::Null);

        let o = grep(
            &gate,
            json!({"pattern": pattern, "output_mode": "files_with_matches"}),
        )
        .await;
        assert_eq!(
            o.content,
            rg(&bin, &ws, &["-l", pattern]),
            "files `{pattern}`"
        );

        let o = grep(&gate, json!({"pattern": pattern, "output_mode": "count"})).await;
        assert_eq!(
            o.content,
            rg(&bin, &ws, &["-c", pattern]),
            "count `{pattern}`"
        );
    }
    let o = grep(
        &gate,
        json!({"pattern": "ALPHA", "ignore_case": true, "output_mode": "count"}),
    )
    .await;
    assert_eq!(o.content, rg(&bin, &ws, &["-c", "-i", "ALPHA"]));
}

#[tokio::test]
async fn context_matches_ripgrep() {
    let Some((ws, bin)) = setup() else { return };
    project(&ws);
    let gate = ws.gate(false).await;
    for pattern in ["omega", r"fn main|TODO", "beta"] {
        for (input, args) in [
            (json!({"before": 2}), vec!["-B2"]),
            (json!({"after": 3}), vec!["-A3"]),
            (json!({"context": 1}), vec!["-C1"]),
            (json!({"context": 4}), vec!["-C4"]),
            (json!({"context": 2, "after": 0}), vec!["-B2"]),
            (json!({"before": 1, "after": 2}), vec!["-B1", "-A2"]),
        ] {
            let mut input = input;
            input["pattern"] = json!(pattern);
            let o = grep(&gate, input.clone()).await;
            let mut rg_args = vec!["-n"];
            rg_args.extend(args.iter().copied());
            rg_args.push(pattern);
            let want = rg(&bin, &ws, &rg_args);
            assert!(
                want.contains("--\n"),
                "{rg_args:?}: a tree with separate groups"
            );
            assert_eq!(o.content, want, "{input} vs rg {rg_args:?}");
        }
    }
}

#[tokio::test]
async fn types_match_ripgrep() {
    let Some((ws, bin)) = setup() else { return };
    project(&ws);
    let gate = ws.gate(false).await;
    for (ty, args) in [
        ("rust", vec!["-t", "rust"]),
        ("py", vec!["-t", "py"]),
        ("make", vec!["-t", "make"]),
        ("c", vec!["-t", "c"]),
        ("js,ts", vec!["-t", "js", "-t", "ts"]),
        ("markdown", vec!["-t", "markdown"]),
    ] {
        let o = grep(&gate, json!({"pattern": "alpha|beta", "type": ty})).await;
        let mut rg_args = vec!["-n"];
        rg_args.extend(args.iter().copied());
        rg_args.push("alpha|beta");
        let want = rg(&bin, &ws, &rg_args);
        assert!(!want.is_empty(), "{ty}");
        assert_eq!(o.content, want, "type {ty}");
        let o = grep(
            &gate,
            json!({"pattern": "alpha|beta", "type": ty, "output_mode": "files_with_matches"}),
        )
        .await;
        rg_args[0] = "-l";
        assert_eq!(o.content, rg(&bin, &ws, &rg_args), "type {ty} -l");
    }
    // With include, both must match.
    let o = grep(
        &gate,
        json!({"pattern": "alpha", "type": "rust", "include": "mod.rs", "output_mode": "files_with_matches"}),
    )
    .await;
    assert_eq!(o.content, "src/util/mod.rs\n");
    // An unknown type is refused, naming it and real ones.
    let o = call(&gate, "grep", json!({"pattern": "alpha", "type": "rusty"})).await;
    assert_eq!(code(&o), "bad-input", "{o:#?}");
    let text = serde_json::to_string(&o).unwrap();
    assert!(
        text.contains("`rusty` is not a file type ripgrep knows"),
        "{text}"
    );
    assert!(text.contains("rust"), "{text}");
}

#[tokio::test]
async fn multiline_matches_ripgrep() {
    let Some((ws, bin)) = setup() else { return };
    project(&ws);
    let gate = ws.gate(false).await;
    for pattern in [
        r"alpha \d+\n\s*\w+",
        r"foo\s+bar",
        r"(?s)TODO.{0,30}omega",
        r"beta\n\n",
        r"\n\n\d+:",
    ] {
        let o = grep(&gate, json!({"pattern": pattern, "multiline": true})).await;
        let want = rg(&bin, &ws, &["-U", "-n", pattern]);
        assert!(!want.is_empty(), "{pattern}");
        assert_eq!(o.content, want, "multiline `{pattern}`");

        let o = grep(
            &gate,
            json!({"pattern": pattern, "multiline": true, "context": 1}),
        )
        .await;
        assert_eq!(
            o.content,
            rg(&bin, &ws, &["-U", "-n", "-C1", pattern]),
            "-C1 `{pattern}`"
        );

        let o = grep(
            &gate,
            json!({"pattern": pattern, "multiline": true, "output_mode": "files_with_matches"}),
        )
        .await;
        assert_eq!(
            o.content,
            rg(&bin, &ws, &["-U", "-l", pattern]),
            "-l `{pattern}`"
        );

        // count: the lines a match touches, as many as content mode prints (`rg -U -c`
        // counts matches instead), so count them in rg's content output.
        let o = grep(
            &gate,
            json!({"pattern": pattern, "multiline": true, "output_mode": "count"}),
        )
        .await;
        let mut per_file: Vec<(String, u64)> = Vec::new();
        for line in want.lines() {
            let path = line.split(':').next().unwrap().to_string();
            match per_file.last_mut() {
                Some((p, n)) if *p == path => *n += 1,
                _ => per_file.push((path, 1)),
            }
        }
        let counts: String = per_file.iter().map(|(p, n)| format!("{p}:{n}\n")).collect();
        assert_eq!(o.content, counts, "count `{pattern}`");
    }
}

#[tokio::test]
async fn paging_a_thousand_matches_in_pages_of_a_hundred() {
    let Some((ws, bin)) = setup() else { return };
    // 1000 matching lines over 23 files, among lines that do not match.
    let mut made = 0;
    let mut f = 0;
    while made < 1000 {
        let mut body = String::new();
        for l in 0..(30 + f * 7 % 40) {
            if (l + f) % 3 != 1 && made < 1000 {
                body.push_str(&format!("hit {f} {l}\n"));
                made += 1;
            } else {
                body.push_str("nothing here\n");
            }
        }
        ws.write(&format!("d{}/f{f:02}.txt", f % 4), body);
        f += 1;
    }
    let gate = ws.gate(false).await;
    let want = rg(&bin, &ws, &["-n", "hit"]);
    assert_eq!(want.lines().count(), 1000);

    let mut pages = Vec::new();
    let mut offset = Some(0u64);
    while let Some(at) = offset {
        let o = ok(
            &gate,
            "grep",
            json!({"pattern": "hit", "head_limit": 100, "offset": at}),
        )
        .await;
        assert_eq!(o.data["matches"], 1000, "the total is exact on every page");
        offset = o.data["next_offset"].as_u64();
        match offset {
            Some(next) => {
                assert_eq!(next, at + 100);
                assert!(o.truncated);
                let note = o.content.lines().last().unwrap();
                assert!(
                    note.contains(&format!("continue with offset={next}")),
                    "{note}"
                );
            }
            None => assert_eq!(at, 900),
        }
        let page = rows(&o.content);
        assert_eq!(page.lines().count(), 100, "page at {at}");
        pages.push(page);
        assert!(pages.len() <= 10);
    }
    assert_eq!(pages.len(), 10);
    // No overlap, no gap: the pages together are ripgrep's whole answer, in order.
    assert_eq!(pages.concat(), want);

    // Files page the same way.
    let files = rg(&bin, &ws, &["-l", "hit"]);
    let mut got = String::new();
    let mut offset = Some(0u64);
    while let Some(at) = offset {
        let o = ok(
            &gate,
            "grep",
            json!({"pattern": "hit", "output_mode": "files_with_matches", "head_limit": 5, "offset": at}),
        )
        .await;
        got.push_str(&rows(&o.content));
        offset = o.data["next_offset"].as_u64();
    }
    assert_eq!(got, files);
}
