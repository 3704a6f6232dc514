//! `glob` and `grep` through the gate.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::Status;

#[tokio::test]
async fn glob_matches_newest_first_and_honours_ignores() {
    let ws = Ws::new();
    ws.write("a.rs", "a\n")
        .write("src/b.rs", "b\n")
        .write("src/deep/c.rs", "c\n")
        .write("notes.md", "n\n")
        .write(".gitignore", "gen/\n")
        .write("gen/g.rs", "g\n")
        .write("target/t.rs", "t\n")
        .age("a.rs", 300)
        .age("src/b.rs", 100)
        .age("src/deep/c.rs", 200);
    let gate = ws.gate(false).await;
    let o = call(&gate, "glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(
        stable(&o),
        json!({
            "tool": "glob",
            "status": "ok",
            "summary": "glob `**/*.rs`: 3 files",
            "content": "src/b.rs\nsrc/deep/c.rs\na.rs\n",
            "truncated": false,
            "totals": {"files": {"seen": 3, "returned": 3}},
            "data": {"pattern": "**/*.rs", "path": ".", "files": 3, "files_returned": 3, "unreadable": 0, "offset": 0, "next_offset": null},
            "audit_id": "<audit>",
        })
    );

    // `*` does not cross `/`; a pattern without `/` matches names at any depth.
    let o = ok(&gate, "glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(o.content, "src/b.rs\n");
    let o = ok(&gate, "glob", json!({"pattern": "c.rs"})).await;
    assert_eq!(o.content, "src/deep/c.rs\n");
    let o = ok(&gate, "glob", json!({"pattern": "*.rs", "path": "src"})).await;
    assert_eq!(o.content, "src/b.rs\nsrc/deep/c.rs\n");
    let o = ok(&gate, "glob", json!({"pattern": "*.py"})).await;
    assert_eq!(o.content, "No files match `*.py` under .\n");
}

#[tokio::test]
async fn glob_cap_is_visible_with_totals() {
    let ws = Ws::new();
    for i in 0..105 {
        let rel = format!("many/f{i:03}.txt");
        ws.write(&rel, "x\n").age(&rel, 10 + i);
    }
    let gate = ws.gate(false).await;
    let o = ok(&gate, "glob", json!({"pattern": "many/*.txt"})).await;
    let mut expected: String = (0..100).map(|i| format!("many/f{i:03}.txt\n")).collect();
    expected.push_str(
        "[truncated: showing the 100 newest of 105 matching files (limited by head_limit=100); 5 more; continue with offset=100, or narrow the pattern or path]\n",
    );
    assert_eq!(o.content, expected);
    assert!(o.truncated);
    assert_eq!(o.summary, "glob `many/*.txt`: showing 100 of 105 files");
    assert_eq!(
        o.totals["files"],
        toolgate::tools::Total {
            seen: 105,
            returned: 100
        }
    );
}

/// A workspace to search: code, a secret, a binary, an ignored directory.
fn project() -> Ws {
    let ws = Ws::new();
    ws.write(
        "src/main.rs",
        "fn main() {\n    let v = parse();\n    println!(\"hello {v}\");\n}\n",
    )
    .write(
        "src/lib.rs",
        "pub fn parse() -> u32 {\n    42\n}\n// TODO: Hello world\n",
    )
    .write("notes.txt", "hello there\n")
    .write(".env", "TOKEN=hello-secret\n")
    .write("config/.env.local", "hello=1\n")
    .write("keys/server.pem", "hello pem\n")
    .write("bin.dat", b"hello\0world".as_slice())
    .write(".gitignore", "gen/\n")
    .write("gen/out.rs", "hello generated\n")
    .write("node_modules/x/index.js", "hello module\n");
    ws
}

#[tokio::test]
async fn grep_prints_file_line_text_and_skips_secrets_binaries_and_ignored() {
    let ws = project();
    let gate = ws.gate(false).await;
    let o = call(&gate, "grep", json!({"pattern": "hello"})).await;
    assert_eq!(
        stable(&o),
        json!({
            "tool": "grep",
            "status": "ok",
            "summary": "grep `hello`: 2 matching lines in 2 files",
            "content": "notes.txt:1:hello there\nsrc/main.rs:3:    println!(\"hello {v}\");\n",
            "truncated": false,
            "totals": {
                "files": {"seen": 2, "returned": 2},
                "matches": {"seen": 2, "returned": 2},
            },
            "data": {
                "pattern": "hello", "path": ".", "output_mode": "content", "offset": 0,
                "head_limit": 100, "next_offset": null, "results": 2, "results_returned": 2,
                "matches": 2, "matches_returned": 2, "matches_exact": true,
                "files_searched": 4, "files_matched": 2, "files_returned": 2,
                "binary_files_skipped": 1, "large_files_skipped": 0, "unreadable": 0,
            },
            "audit_id": "<audit>",
        })
    );
}

#[tokio::test]
async fn grep_options_include_ignore_case_literal_context() {
    let ws = project();
    let gate = ws.gate(false).await;

    let o = ok(
        &gate,
        "grep",
        json!({"pattern": "hello", "ignore_case": true}),
    )
    .await;
    assert_eq!(
        o.content,
        "notes.txt:1:hello there\nsrc/lib.rs:4:// TODO: Hello world\nsrc/main.rs:3:    println!(\"hello {v}\");\n"
    );

    let o = ok(
        &gate,
        "grep",
        json!({"pattern": "hello", "ignore_case": true, "include": "*.rs"}),
    )
    .await;
    assert_eq!(
        o.content,
        "src/lib.rs:4:// TODO: Hello world\nsrc/main.rs:3:    println!(\"hello {v}\");\n"
    );

    let o = call(&gate, "grep", json!({"pattern": "println!(\"hello {"})).await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "bad-pattern");
    let o = ok(
        &gate,
        "grep",
        json!({"pattern": "println!(\"hello {", "literal": true}),
    )
    .await;
    assert_eq!(o.content, "src/main.rs:3:    println!(\"hello {v}\");\n");

    let o = ok(&gate, "grep", json!({"pattern": "^    42$", "context": 1})).await;
    assert_eq!(
        o.content,
        "src/lib.rs-1-pub fn parse() -> u32 {\nsrc/lib.rs:2:    42\nsrc/lib.rs-3-}\n"
    );

    let o = ok(&gate, "grep", json!({"pattern": "zzz-nothing"})).await;
    assert_eq!(
        o.content,
        "No matches for `zzz-nothing` in 4 files searched under . (1 binary file skipped)\n"
    );
}

#[tokio::test]
async fn grep_max_matches_truncation_keeps_honest_totals() {
    let ws = Ws::new();
    let text: String = (1..=30).map(|i| format!("match {i}\n")).collect();
    ws.write("many.txt", text)
        .write("other.txt", "match elsewhere\n");
    let gate = ws.gate(false).await;
    let o = ok(&gate, "grep", json!({"pattern": "match", "max_matches": 5})).await;
    assert_eq!(
        o.content,
        "many.txt:1:match 1\nmany.txt:2:match 2\nmany.txt:3:match 3\nmany.txt:4:match 4\nmany.txt:5:match 5\n\
         [truncated: showing 5 of 31 matching lines in 2 files (limited by head_limit=5); continue with offset=5, raise head_limit, or narrow the pattern or use path/include/type]\n"
    );
    assert!(o.truncated);
    assert_eq!(
        o.summary,
        "grep `match`: showing 5 of 31 matching lines in 2 files"
    );
    assert_eq!(
        o.totals["matches"],
        toolgate::tools::Total {
            seen: 31,
            returned: 5
        }
    );
    assert_eq!(
        o.totals["files"],
        toolgate::tools::Total {
            seen: 2,
            returned: 1
        }
    );
}

#[tokio::test]
async fn grep_never_searches_secrets_even_when_asked() {
    let ws = project();
    let gate = ws.gate(false).await;
    // Nothing in the walk: the token only lives in secrets.
    let o = ok(&gate, "grep", json!({"pattern": "secret|pem|hello=1"})).await;
    assert_eq!(o.data["matches"], json!(0));
    assert!(!o.content.contains(".env"), "{}", o.content);
    // Pointing at the secret directly is denied by the gate, before the guest runs.
    for path in [
        ".env",
        "config/.env.local",
        "keys/server.pem",
        "config/../.env",
    ] {
        let o = call(&gate, "grep", json!({"pattern": "hello", "path": path})).await;
        assert_eq!(o.status, Status::Denied, "{path}: {o:#?}");
        assert_eq!(o.stage.as_deref(), Some("scope"), "{path}");
    }
    // A glob for dotfiles does not find them either.
    let o = ok(&gate, "glob", json!({"pattern": "**/.env*"})).await;
    assert_eq!(o.content, "No files match `**/.env*` under .\n");
}
