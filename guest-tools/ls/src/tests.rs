use super::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-ls-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn put(root: &Path, rel: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, rel).unwrap();
}

fn ls(root: &Path, input: Value) -> Result<Report, ToolError> {
    let cx = Context::for_tests(root, 100_000, &["secrets/**", "secrets", ".env"]);
    run(&input, &cx)
}

fn code(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("code: \"").unwrap() + 7;
    dbg[start..].split('"').next().unwrap().to_string()
}

#[test]
fn tree_with_default_ignores_gitignore_and_denied() {
    let root = tmp();
    put(&root, "Cargo.toml");
    put(&root, "src/lib.rs");
    put(&root, "src/a/b.rs");
    put(&root, ".gitignore");
    std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
    put(&root, "debug.log");
    put(&root, ".env");
    put(&root, "secrets/key");
    put(&root, "node_modules/x/index.js");
    put(&root, "target/debug/x");
    put(&root, ".git/HEAD");
    put(&root, "dist/app.js");
    let r = ls(&root, json!({})).unwrap();
    assert_eq!(
        r.content,
        "./\n  .gitignore\n  Cargo.toml\n  src/\n    a/\n      b.rs\n    lib.rs\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("entries", 6, 6)]);
    assert_eq!(r.summary, "ls .: 2 directories, 4 files");
}

#[test]
fn depth_limit_marks_unexpanded_directories() {
    let root = tmp();
    put(&root, "a/b/c/d.txt");
    put(&root, "e/f.txt");
    std::fs::create_dir_all(root.join("empty")).unwrap();
    let r = ls(&root, json!({"depth": 1})).unwrap();
    assert_eq!(
        r.content,
        "./\n  a/ …\n  e/ …\n  empty/\n\
         [directories marked … have more entries below depth 1; pass a larger depth or list them with path]\n"
    );
    assert!(!r.truncated);
    let r = ls(&root, json!({"path": root.join("a").to_str().unwrap()})).unwrap();
    assert_eq!(r.content, "a/\n  b/\n    c/\n      d.txt\n");
}

#[test]
fn ignore_globs_are_honoured() {
    let root = tmp();
    put(&root, "keep.rs");
    put(&root, "skip.tmp");
    put(&root, "fixtures/big.json");
    let r = ls(&root, json!({"ignore": ["*.tmp", "fixtures"]})).unwrap();
    assert_eq!(r.content, "./\n  keep.rs\n");
}

#[test]
fn entry_cap_is_visible_with_totals() {
    let root = tmp();
    for i in 0..1200 {
        put(&root, &format!("f{i:04}"));
    }
    let r = ls(&root, json!({})).unwrap();
    assert!(r.truncated);
    assert_eq!(r.totals, vec![("entries", 1200, 1000)]);
    let last = r.content.lines().last().unwrap();
    assert_eq!(
        last,
        "[truncated: showing 1000 of 1200 entries (limited by head_limit=1000); 200 more; continue with offset=1000, or list a subdirectory with path, lower depth, or add ignore globs]"
    );
    assert_eq!(r.content.lines().nth(1000).unwrap(), "  f0999");
    assert_eq!(r.data["next_offset"], 1000);
}

/// The entry rows of a page (not the header, not the notes).
fn rows(r: &Report) -> Vec<String> {
    r.content
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::to_string)
        .collect()
}

/// A tree of 250 entries: 6 directories of 3 subdirectories with 12 files each (40 entries a
/// directory), then 10 files on top.
fn tree(root: &Path) -> usize {
    let mut n = 0;
    for d in 0..6 {
        n += 1;
        for s in 0..3 {
            n += 1;
            for f in 0..12 {
                put(root, &format!("d{d}/s{s}/f{f:02}.txt"));
                n += 1;
            }
        }
    }
    for f in 0..10 {
        put(root, &format!("top{f:02}.txt"));
        n += 1;
    }
    n
}

#[test]
fn offset_pages_through_the_tree_without_overlap_or_gap() {
    let root = tmp();
    let n = tree(&root);
    assert_eq!(n, 250);
    let full = ls(&root, json!({})).unwrap();
    assert!(!full.truncated);
    assert_eq!(full.data["next_offset"], Value::Null);
    let full = rows(&full);
    assert_eq!(full.len(), 250);

    let mut pages = Vec::new();
    let mut offset = json!(0);
    let mut calls = 0;
    while !offset.is_null() {
        let r = ls(&root, json!({"offset": offset, "head_limit": 100})).unwrap();
        assert_eq!(
            r.content.lines().next(),
            Some("./"),
            "every page names the directory"
        );
        assert_eq!(r.totals[0].1, 250, "the total stays the whole count");
        pages.extend(rows(&r));
        offset = r.data["next_offset"].clone();
        calls += 1;
        if calls == 2 {
            assert_eq!(offset, 200);
            assert!(r.truncated);
            assert_eq!(r.summary, "ls .: entries 101–200 of 250");
            // Entry 101 is d2/s1/f05.txt: the page says where it starts.
            assert_eq!(
                r.content.lines().nth(1),
                Some("[continued: the first entry here is inside d2/s1/]")
            );
            assert!(r.content.ends_with(
                "[truncated: showing entries 101–200 of 250 (limited by head_limit=100); 50 more; continue with offset=200, or list a subdirectory with path, lower depth, or add ignore globs]\n"
            ), "{}", r.content);
        }
        if calls == 3 {
            assert!(!r.truncated);
            assert_eq!(r.totals, vec![("entries", 250, 50)]);
            assert!(r.content.ends_with(
                "[showing entries 201–250 of 250 (from offset=200); that is the end, no more entries]\n"
            ));
        }
    }
    assert_eq!(calls, 3);
    assert_eq!(pages, full);
}

#[test]
fn offset_past_the_end_is_an_empty_page_that_says_so() {
    let root = tmp();
    put(&root, "a.txt");
    put(&root, "b.txt");
    let r = ls(&root, json!({"offset": 2})).unwrap();
    assert_eq!(
        r.content,
        "./\n[no entries on this page: offset=2 is past the end; . has 2 entries (depth 3), so pass an offset below 2 (offset=0 starts from the top)]\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("entries", 2, 0)]);
    assert_eq!(r.data["next_offset"], Value::Null);
    assert_eq!(r.summary, "ls .: no entries past offset 2 (of 2)");
    let e = ls(&root, json!({"head_limit": 0})).unwrap_err();
    assert_eq!(code(&e), "bad-input");
}

#[test]
fn a_page_cut_by_the_byte_budget_gives_the_exact_next_offset() {
    let root = tmp();
    for i in 0..100 {
        put(&root, &format!("entry-with-a-long-name-{i:03}"));
    }
    // 29 bytes a row; the budget keeps 1024 bytes for the notes.
    let cx = Context::for_tests(&root, 1024 + 300, &[]);
    let mut seen = Vec::new();
    let mut offset = 0u64;
    loop {
        let r = run(&json!({"offset": offset}), &cx).unwrap();
        let page = rows(&r);
        assert!(page.len() <= 10, "{}", r.content);
        seen.extend(page);
        match r.data["next_offset"].as_u64() {
            Some(next) => {
                assert_eq!(next, offset + r.totals[0].2);
                assert!(r.content.contains("(limited by the output size budget)"));
                assert!(r.content.contains(&format!("continue with offset={next}")));
                offset = next;
            }
            None => break,
        }
    }
    let expected: Vec<String> = (0..100)
        .map(|i| format!("  entry-with-a-long-name-{i:03}"))
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn file_and_missing_are_errors() {
    let root = tmp();
    put(&root, "a.txt");
    assert_eq!(
        code(&ls(&root, json!({"path": root.join("a.txt").to_str().unwrap()})).unwrap_err()),
        "not-a-directory"
    );
    assert_eq!(
        code(&ls(&root, json!({"path": root.join("nope").to_str().unwrap()})).unwrap_err()),
        "not-found"
    );
}

#[test]
fn odd_names_are_quoted_and_cannot_pose_as_entries_or_levels() {
    let root = tmp();
    let forged = "a.txt\n  phantom.txt";
    put(&root, &format!("d/{forged}"));
    put(&root, "d/  deeper");
    put(&root, "d/x");
    let r = ls(&root, json!({})).unwrap();
    assert_eq!(
        r.content,
        "./\n  d/\n    \"  deeper\"\n    \"a.txt\\n  phantom.txt\"\n    x\n"
    );
    assert_eq!(
        r.data["escaped_names"],
        json!(["d/  deeper", format!("d/{forged}")])
    );
    assert_eq!(r.data["entries"], 4);
    // The listed directory's own odd name is quoted in the header and the summary.
    std::fs::create_dir_all(root.join("e:\x1b")).unwrap();
    let r = ls(
        &root,
        json!({"path": root.join("e:\x1b").to_string_lossy()}),
    )
    .unwrap();
    assert_eq!(r.content.lines().next(), Some("\"e:\\x1b\"/"));
    assert_eq!(r.summary, "ls \"e:\\x1b\": 0 directories, 0 files");
    assert_eq!(r.data["escaped_names"], json!(["e:\x1b"]));
    assert_eq!(r.data["path"], "e:\x1b");
}
