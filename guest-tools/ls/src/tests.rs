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
        "[truncated: showing 1000 of 1200 entries (limited by the 1000-entry cap); list a subdirectory with path, lower depth, or add ignore globs]"
    );
    assert_eq!(r.content.lines().nth(1000).unwrap(), "  f0999");
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
