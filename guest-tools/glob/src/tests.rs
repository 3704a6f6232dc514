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
        "[truncated: showing the 100 newest of 150 matching files (limited by the 100-result cap); narrow the pattern or path]"
    );
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
