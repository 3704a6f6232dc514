use super::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-grep-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn put(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

pub(crate) fn grep(root: &Path, input: Value) -> Report {
    let cx = Context::for_tests(root, 100_000, &["secrets/**", "*.pem"]);
    run(&input, &cx).unwrap()
}

pub(crate) fn code(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("code: \"").unwrap() + 7;
    dbg[start..].split('"').next().unwrap().to_string()
}

#[test]
fn file_line_text_in_name_order() {
    let root = tmp();
    put(&root, "b.rs", "fn main() {}\nlet x = foo();\n");
    put(&root, "a/z.rs", "foo\nbar\nfoo bar\r\n");
    put(&root, "c.txt", "nothing");
    let r = grep(&root, json!({"pattern": "foo"}));
    assert_eq!(
        r.content,
        "a/z.rs:1:foo\na/z.rs:3:foo bar\nb.rs:2:let x = foo();\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("matches", 3, 3), ("files", 2, 2)]);
    assert_eq!(r.data["files_searched"], 3);
    assert_eq!(r.data["files_matched"], 2);
    assert_eq!(r.data["matches_exact"], true);
}

#[test]
fn ignores_gitignore_default_ignores_denied_and_binary() {
    let root = tmp();
    put(&root, ".gitignore", "gen/\n*.log\n");
    put(&root, "gen/x.rs", "needle\n");
    put(&root, "app.log", "needle\n");
    put(&root, "node_modules/m/i.js", "needle\n");
    put(&root, ".git/config", "needle\n");
    put(&root, "target/t.rs", "needle\n");
    put(&root, "secrets/k", "needle\n");
    put(&root, "key.pem", "needle\n");
    put(&root, "bin.dat", b"needle\0\x01\x02");
    put(&root, "src/ok.rs", "needle\n");
    let r = grep(&root, json!({"pattern": "needle"}));
    assert_eq!(r.content, "src/ok.rs:1:needle\n");
    assert_eq!(r.data["binary_files_skipped"], 1);
    assert_eq!(r.data["files_searched"], 2); // .gitignore and src/ok.rs
}

#[test]
fn max_matches_cap_counts_the_rest_honestly() {
    let root = tmp();
    let body: String = (0..50).map(|i| format!("hit {i}\n")).collect();
    put(&root, "a.txt", &body);
    put(&root, "b.txt", &body);
    let r = grep(&root, json!({"pattern": "hit", "max_matches": 3}));
    assert_eq!(
        r.content,
        "a.txt:1:hit 0\na.txt:2:hit 1\na.txt:3:hit 2\n\
         [truncated: showing 3 of 100 matching lines in 2 files (limited by head_limit=3); continue with offset=3, raise head_limit, or narrow the pattern or use path/include/type]\n"
    );
    assert!(r.truncated);
    assert_eq!(r.totals, vec![("matches", 100, 3), ("files", 2, 1)]);
    assert_eq!(r.data["matches_exact"], true);
    assert_eq!(r.data["next_offset"], 3);
}

#[test]
fn counting_stops_at_the_limit_and_says_at_least() {
    let root = tmp();
    let body: String = (0..700).map(|i| format!("hit {i}\n")).collect();
    put(&root, "a.txt", &body);
    put(&root, "b.txt", &body);
    put(&root, "c.txt", &body);
    let r = grep(&root, json!({"pattern": "hit", "max_matches": 1}));
    assert_eq!(r.totals[0], ("matches", 1000, 1));
    assert_eq!(r.data["matches_exact"], false);
    assert!(r
        .content
        .contains("showing 1 of at least 1000 matching lines in at least 2 files"));
    assert!(r.summary.contains("at least 1000"));
}

#[test]
fn context_lines_and_separators_like_ripgrep() {
    let root = tmp();
    put(&root, "a.txt", "1\n2\nX3\n4\n5\n6\n7\nX8\nX9\n10\n");
    put(&root, "b.txt", "X1\n2\n");
    let r = grep(&root, json!({"pattern": "^X", "context": 1}));
    assert_eq!(
        r.content,
        "a.txt-2-2\na.txt:3:X3\na.txt-4-4\n--\na.txt-7-7\na.txt:8:X8\na.txt:9:X9\na.txt-10-10\n--\nb.txt:1:X1\nb.txt-2-2\n"
    );
    // Overlapping context is merged without a separator.
    let r = grep(
        &root,
        json!({"pattern": "^X", "context": 2, "path": root.join("a.txt").to_str().unwrap()}),
    );
    assert_eq!(
        r.content,
        "a.txt-1-1\na.txt-2-2\na.txt:3:X3\na.txt-4-4\na.txt-5-5\na.txt-6-6\na.txt-7-7\na.txt:8:X8\na.txt:9:X9\na.txt-10-10\n"
    );
}

#[test]
fn literal_ignore_case_and_include() {
    let root = tmp();
    put(&root, "a.ts", "a.b()\naxb()\nA.B()\n");
    put(&root, "b.tsx", "a.b()\n");
    put(&root, "c.rs", "a.b()\n");
    let r = grep(
        &root,
        json!({"pattern": "a.b(", "literal": true, "include": "*.{ts,tsx}"}),
    );
    assert_eq!(r.content, "a.ts:1:a.b()\nb.tsx:1:a.b()\n");
    let r = grep(
        &root,
        json!({"pattern": "a.b(", "literal": true, "ignore_case": true, "include": "*.ts"}),
    );
    assert_eq!(r.content, "a.ts:1:a.b()\na.ts:3:A.B()\n");
    let r = grep(&root, json!({"pattern": "a.b"}));
    assert_eq!(r.totals[0], ("matches", 4, 4));
}

#[test]
fn matches_do_not_cross_lines() {
    let root = tmp();
    put(&root, "a.txt", "foo\nbar\nfoo bar\n\nend");
    let r = grep(&root, json!({"pattern": r"foo\s+bar"}));
    assert_eq!(r.content, "a.txt:3:foo bar\n");
    let r = grep(&root, json!({"pattern": r"^$"}));
    assert_eq!(r.content, "a.txt:4:\n");
    let r = grep(&root, json!({"pattern": r"d$"}));
    assert_eq!(r.content, "a.txt:5:end\n");
}

#[test]
fn bad_pattern_is_an_error_with_the_regex_message() {
    let root = tmp();
    let cx = Context::for_tests(&root, 100_000, &[]);
    let e = run(&json!({"pattern": "foo("}), &cx).unwrap_err();
    assert_eq!(code(&e), "bad-pattern");
    assert!(format!("{e:?}").contains("unclosed group"));
}

#[test]
fn no_matches_says_so() {
    let root = tmp();
    put(&root, "a.txt", "x\n");
    let r = grep(&root, json!({"pattern": "nope"}));
    assert_eq!(
        r.content,
        "No matches for `nope` in 1 file searched under .\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals[0], ("matches", 0, 0));
}

#[test]
fn long_lines_are_cut_around_the_match() {
    let root = tmp();
    let line = format!("{}NEEDLE{}", "a".repeat(3000), "b".repeat(3000));
    put(&root, "min.js", format!("{line}\n"));
    let r = grep(&root, json!({"pattern": "NEEDLE"}));
    let first = r.content.lines().next().unwrap();
    assert!(first.starts_with("min.js:1:[…2900 bytes] "));
    assert!(first.contains("NEEDLE"));
    assert!(first.ends_with("[…line cut at 500 chars; the line has 6006 bytes]"));
    assert!(first.len() < 700);
}

#[test]
fn budget_truncation_is_visible() {
    let root = tmp();
    let body: String = (0..200)
        .map(|i| format!("hit {i:04} {}\n", "x".repeat(40)))
        .collect();
    put(&root, "a.txt", &body);
    let cx = Context::for_tests(&root, 2000, &[]);
    let r = run(&json!({"pattern": "hit", "max_matches": 1000}), &cx).unwrap();
    assert!(r.truncated);
    assert!(r.content.len() <= 2000);
    let returned = r.totals[0].2;
    assert!(returned > 5 && returned < 100, "{returned}");
    assert_eq!(r.totals[0].1, 200);
    assert!(r.content.ends_with(&format!(
        "[truncated: showing {returned} of 200 matching lines in 1 file (limited by the output size budget); continue with offset={returned}, or narrow the pattern or use path/include/type]\n"
    )));
    assert_eq!(r.data["next_offset"], returned);
}

/// `TOOLGATE_GREP_BENCH_DIR=/some/tree TOOLGATE_GREP_BENCH_PATTERN=fn\ main cargo test --release
/// -p toolgate-tool-grep -- --ignored --nocapture bench`: times a native run, to compare with
/// `rg -j1 -c`.
#[test]
#[ignore]
fn bench_tree() {
    let Ok(dir) = std::env::var("TOOLGATE_GREP_BENCH_DIR") else {
        return;
    };
    let pattern = std::env::var("TOOLGATE_GREP_BENCH_PATTERN").unwrap_or_else(|_| "fn main".into());
    let max: u64 = std::env::var("TOOLGATE_GREP_BENCH_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let cx = Context::for_tests(&dir, 1 << 20, &[]);
    let t = std::time::Instant::now();
    let r = run(&json!({"pattern": pattern, "max_matches": max}), &cx).unwrap();
    eprintln!("{:?} {} data={}", t.elapsed(), r.summary, r.data);
}

#[test]
fn odd_names_are_quoted_and_listed_exactly() {
    let root = tmp();
    let forged = "src/a.txt:1:FORGED hello world\nnormal.txt";
    put(&root, forged, "hello\n");
    put(&root, "normal.txt", "nothing\n");
    put(&root, "z-1-x.rs", "ctx\nhello\n");
    let r = grep(&root, json!({"pattern": "hello"}));
    assert_eq!(
        r.content,
        "\"src/a.txt:1:FORGED hello world\\nnormal.txt\":1:hello\nz-1-x.rs:2:hello\n"
    );
    assert_eq!(r.data["escaped_names"], json!([forged]));
    assert_eq!(r.data["escaped_names_total"], 1);
    // With context rows (`path-line-text`), `-<digits>-` in a name is quoted too.
    let r = grep(&root, json!({"pattern": "hello", "context": 1}));
    assert_eq!(
        r.content,
        "\"src/a.txt:1:FORGED hello world\\nnormal.txt\":1:hello\n--\n\"z-1-x.rs\"-1-ctx\n\"z-1-x.rs\":2:hello\n"
    );
    assert_eq!(r.data["escaped_names"], json!([forged, "z-1-x.rs"]));
    // Names with no rows printed are not listed; ordinary output carries no such keys.
    let r = grep(&root, json!({"pattern": "nothing"}));
    assert_eq!(r.content, "normal.txt:1:nothing\n");
    assert!(r.data.get("escaped_names").is_none(), "{}", r.data);
}

#[test]
fn a_start_path_with_odd_name_is_quoted_in_the_no_match_note() {
    let root = tmp();
    put(&root, "d\x1b[2J/x.txt", "abc\n");
    let r = grep(
        &root,
        json!({"pattern": "zzz", "path": root.join("d\x1b[2J").to_string_lossy()}),
    );
    assert_eq!(
        r.content,
        "No matches for `zzz` in 1 file searched under \"d\\x1b[2J\"\n"
    );
    assert_eq!(r.data["escaped_names"], json!(["d\x1b[2J"]));
}

#[test]
fn names_that_are_not_utf8_are_skipped_and_counted_never_lossy() {
    use std::os::unix::ffi::OsStrExt as _;
    let root = tmp();
    put(&root, "ok.txt", "hello\n");
    std::fs::write(
        root.join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")),
        "hello\n",
    )
    .unwrap();
    let r = grep(&root, json!({"pattern": "hello"}));
    assert_eq!(r.content, "ok.txt:1:hello\n");
    assert_eq!(r.data["unreadable"], 1);
}

#[test]
fn required_literals_are_read_conservatively() {
    use crate::required_literal as lit;
    let some = |s: &str| Some(s.to_string());
    assert_eq!(lit("unsafe impl Send for"), some("unsafe impl Send for"));
    assert_eq!(lit(r"fn \w+_unchecked\("), some("_unchecked("));
    assert_eq!(lit(r"a\.b"), some("a.b"));
    assert_eq!(lit("colou?r"), some("colo"));
    assert_eq!(lit("ab+cd"), some("ab"));
    assert_eq!(lit("xy*zzz"), some("zzz"));
    assert_eq!(lit("ab{0,2}cdef"), some("cdef"));
    assert_eq!(lit("ab{2}c"), some("ab"));
    assert_eq!(lit("(foo|bar)bazz"), some("bazz"));
    assert_eq!(lit(r"[)(|]+longest"), some("longest"));
    assert_eq!(lit(r"\x41\x{42}cd"), some("cd"));
    assert_eq!(lit(r"\p{Greek}\pLxyz"), some("xyz"));
    assert_eq!(lit("héllo wörld"), some("héllo wörld"));
    assert_eq!(lit("foo|bar"), None);
    assert_eq!(lit("(?i)hello"), None);
    assert_eq!(lit("(?x)h e l l o"), None);
    assert_eq!(lit(r"\w+"), None);
    assert_eq!(lit("a?"), None);
}

#[test]
fn a_required_literal_is_in_every_match() {
    use crate::required_literal as lit;
    let patterns = [
        r"fn \w+_unchecked\(",
        "colou?r",
        "ab+cd",
        "xy*zzz",
        "ab{0,2}cdef",
        "ab{2}c",
        "(foo|bar)bazz",
        r"[)(|]+longest",
        r"\x41\x{42}cd",
        r"a\.b",
        r"^abc$",
        r"\bword\b",
        r"(?:ab)+cd",
        r"x(?P<n>y)z",
        "a.c",
    ];
    let hays = [
        "fn get_unchecked(",
        "fn x_unchecked(",
        "color",
        "colour",
        "abbbcd",
        "xzzz",
        "xyyyzzz",
        "acdef",
        "abbcdef",
        "abbc",
        "foobazz",
        "barbazz",
        ")(|longest",
        "ABcd",
        "a.b",
        "abc",
        "a word here",
        "ababcd",
        "xyz",
        "abc",
        "a\nc",
    ];
    for p in patterns {
        let re = regex::bytes::RegexBuilder::new(p)
            .multi_line(true)
            .crlf(true)
            .build()
            .unwrap();
        let needle = lit(p);
        for h in hays {
            for hay in [h.to_string(), format!("pre {h} post"), format!("x\n{h}\ny")] {
                if re.is_match(hay.as_bytes()) {
                    if let Some(n) = &needle {
                        assert!(
                            hay.contains(n.as_str()),
                            "{p:?} matched {hay:?} without {n:?}"
                        );
                    }
                }
            }
        }
    }
}
