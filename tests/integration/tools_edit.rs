//! `write`, `edit` and `multiedit` through the gate (writes enabled).

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::Status;

#[tokio::test]
async fn write_creates_a_file_with_parents() {
    let ws = Ws::new();
    let gate = ws.gate(true).await;
    let o = call(
        &gate,
        "write",
        json!({"path": "src/new/mod.rs", "content": "pub mod a;\npub mod b;\n"}),
    )
    .await;
    assert_eq!(
        stable(&o),
        json!({
            "tool": "write",
            "status": "ok",
            "summary": "created src/new/mod.rs (2 lines, 22 bytes)",
            "content": "Created src/new/mod.rs: 2 lines, 22 bytes.\n",
            "truncated": false,
            "data": {"path": "src/new/mod.rs", "created": true, "bytes": 22, "lines": 2},
            "audit_id": "<audit>",
        })
    );
    assert_eq!(ws.read("src/new/mod.rs"), "pub mod a;\npub mod b;\n");
    // Writing what the session itself created needs no extra read.
    let o = ok(
        &gate,
        "write",
        json!({"path": "src/new/mod.rs", "content": "pub mod a;\n"}),
    )
    .await;
    assert_eq!(o.summary, "overwrote src/new/mod.rs (1 line, 11 bytes)");
    assert_eq!(ws.read("src/new/mod.rs"), "pub mod a;\n");
}

#[tokio::test]
async fn write_overwrite_requires_a_read_first() {
    let ws = Ws::new();
    ws.write("config.toml", "a = 1\nb = 2\n");
    let gate = ws.gate(true).await;
    let o = call(
        &gate,
        "write",
        json!({"path": "config.toml", "content": "a = 3\n"}),
    )
    .await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "not-read");
    assert_eq!(ws.read("config.toml"), "a = 1\nb = 2\n");

    read_first(&gate, "config.toml").await;
    let o = ok(
        &gate,
        "write",
        json!({"path": "config.toml", "content": "a = 1\nb = 3\n"}),
    )
    .await;
    assert_eq!(
        o.content,
        "Overwrote config.toml: 2 lines, 12 bytes (was 2 lines, 12 bytes); changed around line 2.\n"
    );
    assert_eq!(ws.read("config.toml"), "a = 1\nb = 3\n");

    // Writing the same content again changes nothing and says so.
    let o = call(
        &gate,
        "write",
        json!({"path": "config.toml", "content": "a = 1\nb = 3\n"}),
    )
    .await;
    assert_eq!(code(&o), "no-change");
}

#[tokio::test]
async fn edit_replaces_an_exact_unique_string() {
    let ws = Ws::new();
    ws.write("src/lib.rs", "fn a() {\n    1\n}\n\nfn b() {\n    2\n}\n");
    let gate = ws.gate(true).await;
    read_first(&gate, "src/lib.rs").await;
    let o = call(
        &gate,
        "edit",
        json!({"path": "src/lib.rs", "old_string": "    2\n", "new_string": "    20\n"}),
    )
    .await;
    assert_eq!(
        stable(&o),
        json!({
            "tool": "edit",
            "status": "ok",
            "summary": "edited src/lib.rs: 1 replacement at line 6",
            "content": "Edited src/lib.rs: 1 replacement; the changed line 6 with context:\n     3\t}\n     4\t\n     5\tfn b() {\n     6\t    20\n     7\t}\n",
            "truncated": false,
            "data": {
                "path": "src/lib.rs", "replacements": 1, "exact": true, "first_line": 6,
                "last_line": 6, "created": false,
            },
            "audit_id": "<audit>",
        })
    );
    assert_eq!(
        ws.read("src/lib.rs"),
        "fn a() {\n    1\n}\n\nfn b() {\n    20\n}\n"
    );
}

#[tokio::test]
async fn edit_ambiguous_match_counts_and_replace_all_replaces_every_one() {
    let ws = Ws::new();
    ws.write("a.txt", "x = 1\ny = 2\nx = 1\n");
    let gate = ws.gate(true).await;
    read_first(&gate, "a.txt").await;
    let o = call(
        &gate,
        "edit",
        json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 9"}),
    )
    .await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "ambiguous-match");
    assert_eq!(
        o.reason.as_deref(),
        Some(
            "a.txt: old_string matches 2 places in the file (at lines 1, 3). Add surrounding lines \
             to old_string so that it matches exactly one place, or set replace_all to true to \
             replace every occurrence."
        )
    );
    assert_eq!(
        o.data,
        json!({"matches": 2, "lines": [1, 3], "exact": true})
    );
    assert_eq!(ws.read("a.txt"), "x = 1\ny = 2\nx = 1\n");

    let o = ok(
        &gate,
        "edit",
        json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 9", "replace_all": true}),
    )
    .await;
    assert_eq!(o.summary, "edited a.txt: 2 replacements at lines 1-3");
    assert_eq!(ws.read("a.txt"), "x = 9\ny = 2\nx = 9\n");
}

#[tokio::test]
async fn edit_whitespace_fallback_reindents_and_says_it_was_not_exact() {
    let ws = Ws::new();
    ws.write(
        "a.py",
        "class A:\n        def f(self):\n            return 1\n",
    );
    let gate = ws.gate(true).await;
    read_first(&gate, "a.py").await;
    let o = ok(
        &gate,
        "edit",
        json!({
            "path": "a.py",
            "old_string": "def f(self):\n  return 1\n",
            "new_string": "def f(self):\n  x = 2\n  return x\n",
        }),
    )
    .await;
    assert_eq!(
        ws.read("a.py"),
        "class A:\n        def f(self):\n            x = 2\n            return x\n"
    );
    assert_eq!(
        o.summary,
        "edited a.py: 1 replacement at lines 2-4, whitespace-normalized match"
    );
    assert_eq!(o.data["exact"], json!(false));
    assert_eq!(
        o.content,
        "Edited a.py: 1 replacement; the changed lines 2-4 with context:\n\
         \x20    1\tclass A:\n\
         \x20    2\t        def f(self):\n\
         \x20    3\t            x = 2\n\
         \x20    4\t            return x\n\
         Note: old_string did not match the file exactly; it matched lines 2-3 of the original \
         file only when whitespace is ignored (indentation, runs of spaces, trailing spaces), and \
         the edit was applied there line by line. new_string was re-indented to the file's \
         indentation (4 spaces per level, matched block indented by 8 space(s); old_string used \
         2 spaces per level): 3 of 3 line(s) changed. Check the result above.\n"
    );
}

#[tokio::test]
async fn edit_no_match_shows_the_closest_lines_with_visible_tabs() {
    let ws = Ws::new();
    ws.write(
        "main.go",
        "package main\n\nfunc main() {\n\tx := 1 \n\tprint(x)\n}\n",
    );
    let gate = ws.gate(true).await;
    read_first(&gate, "main.go").await;
    let o = call(
        &gate,
        "edit",
        json!({"path": "main.go", "old_string": "    x := 2\n    print(x)\n", "new_string": "y"}),
    )
    .await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "no-match");
    assert_eq!(
        o.reason.as_deref().unwrap(),
        "main.go: old_string was not found in the file: there is no exact match, and none when \
         whitespace is ignored either.\n\
         Closest region of the file, lines 2-6 (`→` tab, `·` trailing space, `␍` carriage return, \
         `\\u{…}` invisible character; `>` marks lines that differ from old_string):\n\
         \x20     2\t\n\
         \x20     3\tfunc main() {\n\
         >     4\t→x := 1·\n\
         \x20     5\t→print(x)\n\
         \x20     6\t}\n\
         First difference, old_string line 1 against file line 4:\n\
         \x20 old_string: `    x := 2`\n\
         \x20 file:       `→x := 1·`\n\
         Hint: the file indents these lines with tabs (`→`) and old_string with spaces. \
         Indentation alone is tolerated, so the text itself differs too.\n\
         Read the file again and copy old_string exactly from it."
    );
    assert_eq!(o.data["closest_line"], serde_json::json!(4));
    assert_eq!(
        ws.read("main.go"),
        "package main\n\nfunc main() {\n\tx := 1 \n\tprint(x)\n}\n"
    );
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings() {
    let ws = Ws::new();
    ws.write("win.txt", "one\r\ntwo\r\nthree\r\n");
    let gate = ws.gate(true).await;
    read_first(&gate, "win.txt").await;
    ok(
        &gate,
        "edit",
        json!({"path": "win.txt", "old_string": "two\n", "new_string": "2\n2.5\n"}),
    )
    .await;
    assert_eq!(ws.bytes("win.txt"), b"one\r\n2\r\n2.5\r\nthree\r\n");
}

#[tokio::test]
async fn edit_that_changes_nothing_is_refused() {
    let ws = Ws::new();
    ws.write("a.txt", "same\n");
    let gate = ws.gate(true).await;
    read_first(&gate, "a.txt").await;
    let o = call(
        &gate,
        "edit",
        json!({"path": "a.txt", "old_string": "same", "new_string": "same"}),
    )
    .await;
    assert_eq!(code(&o), "no-change");
    assert_eq!(
        o.reason.as_deref(),
        Some(
            "old_string and new_string are identical, so the edit would change nothing. Give the \
             new text in new_string."
        )
    );
}

#[tokio::test]
async fn multiedit_applies_in_order() {
    let ws = Ws::new();
    ws.write("a.rs", "let a = 1;\nlet b = 2;\n");
    let gate = ws.gate(true).await;
    read_first(&gate, "a.rs").await;
    let o = ok(
        &gate,
        "multiedit",
        json!({"path": "a.rs", "edits": [
            {"old_string": "let a = 1;", "new_string": "let a = 10;"},
            {"old_string": "let a = 10;\nlet b", "new_string": "let a = 10;\nlet c"},
        ]}),
    )
    .await;
    assert_eq!(ws.read("a.rs"), "let a = 10;\nlet c = 2;\n");
    assert_eq!(
        o.summary,
        "edited a.rs: 2 edit(s), 2 replacement(s), changed lines 1-2"
    );
}

#[tokio::test]
async fn multiedit_is_all_or_nothing() {
    let ws = Ws::new();
    let original = "alpha\r\nbeta\r\ngamma\r\n";
    ws.write("list.txt", original);
    let gate = ws.gate(true).await;
    read_first(&gate, "list.txt").await;
    let o = call(
        &gate,
        "multiedit",
        json!({"path": "list.txt", "edits": [
            {"old_string": "alpha", "new_string": "ALPHA"},
            {"old_string": "delta", "new_string": "DELTA"},
            {"old_string": "gamma", "new_string": "GAMMA"},
        ]}),
    )
    .await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "no-match");
    assert_eq!(
        o.summary,
        "list.txt: edit 1 of 3 failed (edit 1 is matched against the text after edits 0-0 were \
         applied): old_string was not found in the file: there is no exact match, and none when \
         whitespace is ignored either."
    );
    assert!(
        o.reason.as_deref().unwrap().ends_with(
            "No edits were applied; the file is unchanged. Fix edit 1 and send all the edits again."
        ),
        "{o:#?}"
    );
    assert_eq!(o.data["failed_edit"], json!(1));
    // Byte for byte what it was, and no temporary file left behind.
    assert_eq!(ws.bytes("list.txt"), original.as_bytes());
    let names: Vec<String> = std::fs::read_dir(ws.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, vec![".toolgate".to_string(), "list.txt".to_string()]);
}
