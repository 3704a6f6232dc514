//! `glob` and `ls` page through long listings with `offset` + `head_limit` through the gate:
//! the pages put together are the whole listing, with no overlap and no gap; `next_offset`
//! says where the next page starts and is null at the end; an offset past the end says so.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};
use toolgate::sandbox::Limits;

/// 250 files in five directories; ten files share each modification time, so glob's order
/// needs its tie-break by path. Returns the files newest first, ties by path.
fn tree() -> (Ws, Vec<String>) {
    let ws = Ws::new();
    let base = SystemTime::now() - Duration::from_secs(10_000);
    let mut files = Vec::new();
    for i in 0..250u64 {
        // Spread each tie group over the directories so path order and creation order differ.
        let rel = format!("d{}/f{:03}.txt", i % 5, 249 - i);
        ws.write(&rel, "x\n");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(ws.path(&rel))
            .unwrap();
        let age = i / 10;
        f.set_modified(base - Duration::from_secs(age)).unwrap();
        files.push((age, rel));
    }
    files.sort();
    (ws, files.into_iter().map(|(_, rel)| rel).collect())
}

/// The lines of a glob page that are paths (not notes).
fn paths(content: &str) -> Vec<String> {
    content
        .lines()
        .filter(|l| !l.starts_with('['))
        .map(str::to_string)
        .collect()
}

/// The entry rows of an ls page (indented; not the header, not the notes).
fn rows(content: &str) -> Vec<String> {
    content
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::to_string)
        .collect()
}

/// Every page of `tool` with `input` from offset 0, following `next_offset` until it is null.
async fn pages(gate: &toolgate::Gate, tool: &str, input: Value) -> Vec<toolgate::Observation> {
    let mut out = Vec::new();
    let mut offset = json!(0);
    while !offset.is_null() {
        let mut page_input = input.clone();
        page_input["offset"] = offset;
        let o = ok(gate, tool, page_input).await;
        offset = o.data["next_offset"].clone();
        out.push(o);
        assert!(out.len() <= 100, "paging does not end");
    }
    out
}

#[tokio::test]
async fn glob_pages_put_together_are_the_whole_listing() {
    let (ws, newest_first) = tree();
    let gate = ws.gate(false).await;
    let full = ok(
        &gate,
        "glob",
        json!({"pattern": "**/*.txt", "head_limit": 1000}),
    )
    .await;
    assert!(!full.truncated);
    assert_eq!(full.data["next_offset"], Value::Null);
    assert_eq!(
        paths(&full.content),
        newest_first,
        "newest first, ties by path"
    );

    let pages = pages(
        &gate,
        "glob",
        json!({"pattern": "**/*.txt", "head_limit": 100}),
    )
    .await;
    assert_eq!(pages.len(), 3);
    let offsets: Vec<Value> = pages
        .iter()
        .map(|o| o.data["next_offset"].clone())
        .collect();
    assert_eq!(offsets, vec![json!(100), json!(200), Value::Null]);
    for (o, returned) in pages.iter().zip([100, 100, 50]) {
        assert_eq!(
            o.totals["files"],
            toolgate::tools::Total {
                seen: 250,
                returned
            }
        );
    }
    assert!(pages[0].content.ends_with(
        "[truncated: showing the 100 newest of 250 matching files (limited by head_limit=100); 150 more; continue with offset=100, or narrow the pattern or path]\n"
    ));
    assert!(pages[0].truncated && pages[1].truncated && !pages[2].truncated);
    assert!(pages[2].content.ends_with(
        "[showing files 201–250 of 250 matching (from offset=200); that is the end, no more files]\n"
    ));
    let joined: Vec<String> = pages.iter().flat_map(|o| paths(&o.content)).collect();
    assert_eq!(joined, newest_first, "no overlap, no gap");

    let past = ok(&gate, "glob", json!({"pattern": "**/*.txt", "offset": 250})).await;
    assert_eq!(
        past.content,
        "[no files on this page: offset=250 is past the end; `**/*.txt` matches 250 files under ., so pass an offset below 250 (offset=0 starts from the newest)]\n"
    );
    assert_eq!(past.data["next_offset"], Value::Null);
    assert_eq!(past.totals["files"].returned, 0);
}

#[tokio::test]
async fn ls_pages_put_together_are_the_whole_tree() {
    let (ws, _) = tree();
    let gate = ws.gate(false).await;
    let full = ok(&gate, "ls", json!({})).await;
    assert!(!full.truncated);
    assert_eq!(full.data["next_offset"], Value::Null);
    let whole = rows(&full.content);
    assert_eq!(whole.len(), 255);
    assert_eq!(whole[0], "  d0/");
    assert_eq!(whole[1], "    f004.txt");

    let pages = pages(&gate, "ls", json!({"head_limit": 100})).await;
    assert_eq!(pages.len(), 3);
    let offsets: Vec<Value> = pages
        .iter()
        .map(|o| o.data["next_offset"].clone())
        .collect();
    assert_eq!(offsets, vec![json!(100), json!(200), Value::Null]);
    for (o, returned) in pages.iter().zip([100, 100, 55]) {
        assert_eq!(o.content.lines().next(), Some("./"));
        assert_eq!(
            o.totals["entries"],
            toolgate::tools::Total {
                seen: 255,
                returned
            }
        );
    }
    // Entry 101 is in d1/ (d0/ and its 50 files are entries 1-51).
    assert_eq!(
        pages[1].content.lines().nth(1),
        Some("[continued: the first entry here is inside d1/]")
    );
    assert!(pages[1].content.ends_with(
        "[truncated: showing entries 101–200 of 255 (limited by head_limit=100); 55 more; continue with offset=200, or list a subdirectory with path, lower depth, or add ignore globs]\n"
    ));
    assert!(pages[2].content.ends_with(
        "[showing entries 201–255 of 255 (from offset=200); that is the end, no more entries]\n"
    ));
    let joined: Vec<String> = pages.iter().flat_map(|o| rows(&o.content)).collect();
    assert_eq!(joined, whole, "no overlap, no gap");

    let past = ok(&gate, "ls", json!({"offset": 300})).await;
    assert_eq!(
        past.content,
        "./\n[no entries on this page: offset=300 is past the end; . has 255 entries (depth 3), so pass an offset below 255 (offset=0 starts from the top)]\n"
    );
    assert_eq!(past.data["next_offset"], Value::Null);
}

#[tokio::test]
async fn a_page_cut_by_the_output_budget_continues_exactly() {
    let (ws, newest_first) = tree();
    let limits = Limits {
        max_output_bytes: 1536,
        ..Limits::default()
    };
    let gate = ws.gate_with(false, limits).await;
    let glob = pages(
        &gate,
        "glob",
        json!({"pattern": "**/*.txt", "head_limit": 1000}),
    )
    .await;
    assert!(glob.len() >= 3, "the budget cut the pages");
    for o in &glob[..glob.len() - 1] {
        assert!(
            o.content.contains("(limited by the output size budget)"),
            "{}",
            o.content
        );
        assert!(
            o.full_output_ref.is_none(),
            "the guest kept within the budget"
        );
    }
    let joined: Vec<String> = glob.iter().flat_map(|o| paths(&o.content)).collect();
    assert_eq!(joined, newest_first);

    let full = ok(&ws.gate(false).await, "ls", json!({})).await;
    let ls = pages(&gate, "ls", json!({})).await;
    assert!(ls.len() > 3);
    assert!(ls[0]
        .content
        .contains("(limited by the output size budget)"));
    let joined: Vec<String> = ls.iter().flat_map(|o| rows(&o.content)).collect();
    assert_eq!(joined, rows(&full.content));
}
