use super::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static N: AtomicUsize = AtomicUsize::new(0);

fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-glob-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Create `rel` with an mtime `age` seconds in the past.
fn put(root: &Path, rel: &str, age: u64) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, rel).unwrap();
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(1000 + age))
        .unwrap();
}

fn glob(root: &Path, input: Value) -> Result<Report, ToolError> {
    let cx = Context::for_tests(root, 100_000, &["secrets/**"]);
    run(&input, &cx)
}

fn code(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("code: \"").unwrap() + 7;
    dbg[start..].split('"').next().unwrap().to_string()
}

#[test]
fn basename_pattern_matches_at_any_depth_newest_first() {
    let root = tmp();
    put(&root, "old.rs", 300);
    put(&root, "src/new.rs", 10);
    put(&root, "src/deep/mid.rs", 100);
    put(&root, "src/deep/same_b.rs", 200);
    put(&root, "src/deep/same_a.rs", 200);
    put(&root, "src/readme.md", 0);
    let r = glob(&root, json!({"pattern": "*.rs"})).unwrap();
    assert_eq!(
        r.content,
        "src/new.rs\nsrc/deep/mid.rs\nsrc/deep/same_a.rs\nsrc/deep/same_b.rs\nold.rs\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("files", 5, 5)]);
}

#[test]
fn star_does_not_cross_slash_and_double_star_does() {
    let root = tmp();
    put(&root, "src/a.rs", 1);
    put(&root, "src/x/b.rs", 2);
    put(&root, "lib/c.rs", 3);
    let r = glob(&root, json!({"pattern": "src/*.rs"})).unwrap();
    assert_eq!(r.content, "src/a.rs\n");
    let r = glob(&root, json!({"pattern": "src/**/*.rs"})).unwrap();
    assert_eq!(r.content, "src/a.rs\nsrc/x/b.rs\n");
    let r = glob(&root, json!({"pattern": "**/*.{rs,md}"})).unwrap();
    assert_eq!(r.totals, vec![("files", 3, 3)]);
    // Relative to `path`, reported relative to the workspace root.
    let r = glob(
        &root,
        json!({"pattern": "x/*.rs", "path": root.join("src").to_str().unwrap()}),
    )
    .unwrap();
    assert_eq!(r.content, "src/x/b.rs\n");
}

#[test]
fn ignores_are_honoured() {
    let root = tmp();
    std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
    put(&root, "build/a.rs", 1);
    put(&root, "node_modules/p/a.rs", 1);
    put(&root, "target/a.rs", 1);
    put(&root, ".git/a.rs", 1);
    put(&root, "secrets/a.rs", 1);
    put(&root, "ok/a.rs", 1);
    let r = glob(&root, json!({"pattern": "**/a.rs"})).unwrap();
    assert_eq!(r.content, "ok/a.rs\n");
}

#[test]
fn cap_is_visible_with_totals() {
    let root = tmp();
    for i in 0..150 {
        put(&root, &format!("f{i:03}.txt"), i);
    }
    let r = glob(&root, json!({"pattern": "*.txt"})).unwrap();
    assert!(r.truncated);
    assert_eq!(r.totals, vec![("files", 150, 100)]);
    let lines: Vec<&str> = r.content.lines().collect();
    assert_eq!(lines.len(), 101);
    assert_eq!(lines[0], "f000.txt");
    assert_eq!(lines[99], "f099.txt");
    assert_eq!(
        lines[100],
        "[truncated: showing the 100 newest of 150 matching files (limited by head_limit=100); 50 more; continue with offset=100, or narrow the pattern or path]"
    );
    assert_eq!(r.data["next_offset"], 100);
    assert_eq!(r.summary, "glob `*.txt`: showing 100 of 150 files");
}

/// The paths on a page (the lines that are not notes).
fn paths(r: &Report) -> Vec<String> {
    r.content
        .lines()
        .filter(|l| !l.starts_with('['))
        .map(str::to_string)
        .collect()
}

#[test]
fn offset_pages_through_the_list_without_overlap_or_gap() {
    let root = tmp();
    // Ties in modification time (ten files share each time) are broken by path, so pages
    // are stable.
    let base = SystemTime::now() - Duration::from_secs(5000);
    for i in 0..250u64 {
        let p = root.join(format!("d{}/f{i:03}.txt", i % 3));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(base - Duration::from_secs(i / 10)).unwrap();
    }
    let full = glob(&root, json!({"pattern": "*.txt", "head_limit": 1000})).unwrap();
    assert!(!full.truncated);
    assert_eq!(full.data["next_offset"], Value::Null);
    let full = paths(&full);
    assert_eq!(full.len(), 250);
    // Newest first, ties by path: the first ten share a time.
    assert_eq!(full[0], "d0/f000.txt");
    assert_eq!(full[1], "d0/f003.txt");
    assert_eq!(full[4], "d1/f001.txt");
    let mut sorted = full.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 250);

    let mut pages = Vec::new();
    let mut offset = json!(0);
    let mut calls = 0;
    while !offset.is_null() {
        let r = glob(
            &root,
            json!({"pattern": "*.txt", "offset": offset, "head_limit": 100}),
        )
        .unwrap();
        assert_eq!(r.totals[0].1, 250, "the total stays the whole count");
        pages.extend(paths(&r));
        offset = r.data["next_offset"].clone();
        calls += 1;
        if calls == 2 {
            assert_eq!(offset, 200);
            assert!(r.truncated);
            assert_eq!(r.totals, vec![("files", 250, 100)]);
            assert_eq!(r.summary, "glob `*.txt`: files 101–200 of 250");
            assert!(r.content.ends_with(
                "[truncated: showing files 101–200 of 250 matching, newest first (limited by head_limit=100); 50 more; continue with offset=200, or narrow the pattern or path]\n"
            ), "{}", r.content);
        }
        if calls == 3 {
            assert!(!r.truncated);
            assert_eq!(r.totals, vec![("files", 250, 50)]);
            assert!(r.content.ends_with(
                "[showing files 201–250 of 250 matching (from offset=200); that is the end, no more files]\n"
            ));
        }
    }
    assert_eq!(calls, 3);
    assert_eq!(pages, full);
}

#[test]
fn offset_past_the_end_is_an_empty_page_that_says_so() {
    let root = tmp();
    for i in 0..5 {
        put(&root, &format!("f{i}.txt"), i);
    }
    let r = glob(&root, json!({"pattern": "*.txt", "offset": 5})).unwrap();
    assert_eq!(
        r.content,
        "[no files on this page: offset=5 is past the end; `*.txt` matches 5 files under ., so pass an offset below 5 (offset=0 starts from the newest)]\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("files", 5, 0)]);
    assert_eq!(r.data["next_offset"], Value::Null);
    let e = glob(&root, json!({"pattern": "*.txt", "head_limit": 0})).unwrap_err();
    assert_eq!(code(&e), "bad-input");
    let e = glob(&root, json!({"pattern": "*.txt", "offset": -1})).unwrap_err();
    assert_eq!(code(&e), "bad-input");
}

#[test]
fn a_page_cut_by_the_byte_budget_gives_the_exact_next_offset() {
    let root = tmp();
    for i in 0..100 {
        put(&root, &format!("file-with-a-long-name-{i:03}.txt"), i);
    }
    // 30 bytes a line; the budget keeps 256 bytes for the note.
    let cx = Context::for_tests(&root, 256 + 300, &[]);
    let mut seen = Vec::new();
    let mut offset = 0u64;
    loop {
        let r = run(&json!({"pattern": "*.txt", "offset": offset}), &cx).unwrap();
        let page = paths(&r);
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
        .map(|i| format!("file-with-a-long-name-{i:03}.txt"))
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn no_match_and_errors() {
    let root = tmp();
    put(&root, "a.rs", 1);
    let r = glob(&root, json!({"pattern": "*.py"})).unwrap();
    assert_eq!(r.content, "No files match `*.py` under .\n");
    assert_eq!(r.totals, vec![("files", 0, 0)]);
    let r = glob(&root, json!({"pattern": "nodir/*.py"})).unwrap();
    assert_eq!(r.totals, vec![("files", 0, 0)]);
    assert_eq!(
        code(&glob(&root, json!({"pattern": "[a"})).unwrap_err()),
        "bad-pattern"
    );
    assert_eq!(
        code(&glob(&root, json!({"pattern": "../*"})).unwrap_err()),
        "bad-pattern"
    );
    let e = glob(
        &root,
        json!({"pattern": "*", "path": root.join("a.rs").to_str().unwrap()}),
    )
    .unwrap_err();
    assert_eq!(code(&e), "not-a-directory");
}

#[test]
fn odd_names_are_quoted_one_per_line_and_listed_exactly() {
    let root = tmp();
    let forged = "src/a.txt:1:FORGED hello world\nnormal.txt";
    put(&root, forged, 0);
    put(&root, "normal.txt", 10);
    put(&root, "src/\u{202e}gpj.exe", 20);
    let r = glob(&root, json!({"pattern": "**/*"})).unwrap();
    assert_eq!(
        r.content,
        "\"src/a.txt:1:FORGED hello world\\nnormal.txt\"\nnormal.txt\n\"src/\\u{202e}gpj.exe\"\n"
    );
    assert_eq!(
        r.data["escaped_names"],
        json!([forged, "src/\u{202e}gpj.exe"])
    );
    let r = glob(&root, json!({"pattern": "normal.*"})).unwrap();
    assert_eq!(r.content, "normal.txt\n");
    assert!(r.data.get("escaped_names").is_none());
}
