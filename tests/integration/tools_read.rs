//! `read` and `ls` through the gate.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::Status;

#[tokio::test]
async fn read_returns_numbered_lines() {
    let ws = Ws::new();
    ws.write("notes/a.txt", "alpha\nbeta\ngamma\n");
    let gate = ws.gate(false).await;
    let o = call(&gate, "read", json!({"path": "notes/a.txt"})).await;
    assert_eq!(
        stable(&o),
        json!({
            "tool": "read",
            "status": "ok",
            "summary": "read notes/a.txt: 3 lines",
            "content": "     1\talpha\n     2\tbeta\n     3\tgamma\n",
            "truncated": false,
            "totals": {"lines": {"seen": 3, "returned": 3}},
            "data": {
                "path": "notes/a.txt", "total_lines": 3, "offset": 0, "lines_returned": 3,
                "size": 17, "long_lines_cut": 0,
            },
            "audit_id": "<audit>",
        })
    );
    assert!(o.audit_id.starts_with("call-"), "{}", o.audit_id);
}

#[tokio::test]
async fn read_pages_with_offset_and_limit() {
    let ws = Ws::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    ws.write("f.txt", text);
    let gate = ws.gate(false).await;

    let o = ok(
        &gate,
        "read",
        json!({"path": "f.txt", "offset": 2, "limit": 3}),
    )
    .await;
    assert_eq!(o.summary, "read f.txt: lines 3-5 of 10");
    assert_eq!(
        o.content,
        "     3\tline 3\n     4\tline 4\n     5\tline 5\n\
         [truncated by line limit: showing lines 3-5 of 10; use offset=5 to read more]\n"
    );
    assert!(o.truncated);
    assert_eq!(o.totals["lines"].seen, 10);
    assert_eq!(o.totals["lines"].returned, 3);

    // Following the hint reads on to the end, and says it is the end.
    let o = ok(&gate, "read", json!({"path": "f.txt", "offset": 8})).await;
    assert_eq!(
        o.content,
        "     9\tline 9\n    10\tline 10\n[showing lines 9-10 of 10 (end of file)]\n"
    );
    assert!(!o.truncated);

    let o = call(&gate, "read", json!({"path": "f.txt", "offset": 10})).await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "offset-out-of-range");
    assert_eq!(
        o.reason.as_deref(),
        Some("offset 10 is past the end of f.txt, which has 10 lines; use an offset below 10")
    );
}

#[tokio::test]
async fn read_refuses_binary_files() {
    let ws = Ws::new();
    ws.write("img.bin", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".as_slice());
    let gate = ws.gate(false).await;
    let o = call(&gate, "read", json!({"path": "img.bin"})).await;
    assert_eq!(
        stable(&o),
        json!({
            "tool": "read",
            "status": "error",
            "summary": "img.bin is a binary file (16 bytes); `read` shows text, images (PNG, JPEG, GIF, WebP), PDFs and notebooks only",
            "content": "error: img.bin is a binary file (16 bytes); `read` shows text, images (PNG, JPEG, GIF, WebP), PDFs and notebooks only",
            "truncated": false,
            "data": {"path": "img.bin", "size": 16},
            "audit_id": "<audit>",
            "error_code": "binary",
            "reason": "img.bin is a binary file (16 bytes); `read` shows text, images (PNG, JPEG, GIF, WebP), PDFs and notebooks only",
        })
    );
}

#[tokio::test]
async fn read_of_a_missing_file_names_the_path() {
    let ws = Ws::new();
    let gate = ws.gate(false).await;
    let o = call(&gate, "read", json!({"path": "src/nope.rs"})).await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "not-found");
    assert_eq!(o.reason.as_deref(), Some("not found: src/nope.rs"));
}

#[tokio::test]
async fn read_of_a_directory_points_to_ls() {
    let ws = Ws::new();
    ws.mkdir("src");
    let gate = ws.gate(false).await;
    let o = call(&gate, "read", json!({"path": "src"})).await;
    assert_eq!(code(&o), "is-directory");
    assert_eq!(
        o.reason.as_deref(),
        Some("src is a directory, not a file; use `ls` to list it")
    );
}

#[tokio::test]
async fn read_schema_error_names_the_field() {
    let ws = Ws::new();
    let gate = ws.gate(false).await;
    let o = call(&gate, "read", json!({"path": "a.txt", "offset": -1})).await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "schema");
    assert_eq!(
        o.reason.as_deref(),
        Some("input.offset: -1 is less than the minimum of 0")
    );
    let o = call(&gate, "read", json!({})).await;
    assert_eq!(
        o.reason.as_deref(),
        Some("input: \"path\" is a required property")
    );
}

/// A workspace with something for every ignore rule `ls`, `glob` and `grep` honour.
fn tree() -> Ws {
    let ws = Ws::new();
    ws.write("src/main.rs", "fn main() {}\n")
        .write("src/lib.rs", "pub fn lib() {}\n")
        .write("README.md", "# demo\n")
        .write("docs/guide/intro.md", "intro\n")
        .write(".gitignore", "*.log\nbuild/\n")
        .write("app.log", "log line\n")
        .write("build/out.txt", "built\n")
        .write(".git/HEAD", "ref: refs/heads/main\n")
        .write("node_modules/dep/index.js", "module.exports = 1;\n")
        .write("target/debug/app", "binary\n")
        .write(".env", "TOKEN=hunter2\n");
    ws
}

#[tokio::test]
async fn ls_lists_a_tree_and_skips_ignored_entries() {
    let ws = tree();
    let gate = ws.gate(false).await;
    // The gate has created .toolgate/ by now; it must not be listed either.
    assert!(ws.path(".toolgate/state.db").exists());
    let o = call(&gate, "ls", json!({})).await;
    assert_eq!(
        stable(&o),
        json!({
            "tool": "ls",
            "status": "ok",
            "summary": "ls .: 3 directories, 5 files",
            "content": "./\n  .gitignore\n  README.md\n  docs/\n    guide/\n      intro.md\n  src/\n    lib.rs\n    main.rs\n",
            "truncated": false,
            "totals": {"entries": {"seen": 8, "returned": 8}},
            "data": {
                "path": ".", "depth": 3, "entries": 8, "entries_returned": 8, "entries_exact": true,
                "directories": 3, "files": 5, "unexpanded_directories": 0, "unreadable": 0,
                "offset": 0, "next_offset": null,
            },
            "audit_id": "<audit>",
        })
    );
}

#[tokio::test]
async fn ls_depth_marks_unexpanded_directories() {
    let ws = tree();
    let gate = ws.gate(false).await;
    let o = ok(&gate, "ls", json!({"depth": 1})).await;
    assert_eq!(
        o.content,
        "./\n  .gitignore\n  README.md\n  docs/ …\n  src/ …\n\
         [directories marked … have more entries below depth 1; pass a larger depth or list them with path]\n"
    );
    let o = ok(&gate, "ls", json!({"path": "src", "ignore": ["lib.rs"]})).await;
    assert_eq!(o.content, "src/\n  main.rs\n");
    assert_eq!(o.summary, "ls src: 0 directories, 1 files");
}

#[tokio::test]
async fn ls_of_a_file_points_to_read() {
    let ws = tree();
    let gate = ws.gate(false).await;
    let o = call(&gate, "ls", json!({"path": "README.md"})).await;
    assert_eq!(code(&o), "not-a-directory");
    assert_eq!(
        o.reason.as_deref(),
        Some("README.md is a file, not a directory; use `read` to read it")
    );
}
