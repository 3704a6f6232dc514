//! Output modes, context, types, multiline and paging.

use crate::tests::{code, grep, put, tmp};
use crate::*;

/// The content without the closing note lines (`[...]`).
fn rows(r: &Report) -> String {
    r.content
        .lines()
        .filter(|l| !l.starts_with('['))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn err(root: &Path, input: Value) -> ToolError {
    let cx = Context::for_tests(root, 100_000, &[]);
    run(&input, &cx).unwrap_err()
}

#[test]
fn files_with_matches_lists_each_file_once_in_name_order() {
    let root = tmp();
    put(&root, "b.rs", "foo\nfoo\nfoo\n");
    put(&root, "a/z.rs", "x\nfoo\n");
    put(&root, "c.txt", "nothing\n");
    let r = grep(
        &root,
        json!({"pattern": "foo", "output_mode": "files_with_matches"}),
    );
    assert_eq!(r.content, "a/z.rs\nb.rs\n");
    assert_eq!(r.summary, "grep `foo`: 2 files with matches");
    assert_eq!(r.totals, vec![("files", 2, 2)]);
    assert!(!r.truncated);
    // Each file's search stops at its first match: its lines are not counted.
    assert_eq!(r.data["matches"], Value::Null);
    assert_eq!(r.data["output_mode"], "files_with_matches");
    assert_eq!(r.data["next_offset"], Value::Null);
    assert_eq!(r.data["files_searched"], 3);
}

#[test]
fn count_gives_matching_lines_per_file() {
    let root = tmp();
    put(&root, "b.rs", "foo foo\nfoo\nbar\n");
    put(&root, "a.rs", "foo\n");
    put(&root, "c.rs", "bar\n");
    let r = grep(&root, json!({"pattern": "foo", "output_mode": "count"}));
    // Lines, not matches: `foo foo` is one line.
    assert_eq!(r.content, "a.rs:1\nb.rs:2\n");
    assert_eq!(r.summary, "grep `foo`: 3 matching lines in 2 files");
    assert_eq!(r.totals, vec![("files", 2, 2), ("matches", 3, 3)]);
    assert_eq!(r.data["matches"], 3);
}

#[test]
fn file_modes_page_by_files() {
    let root = tmp();
    for i in 0..25 {
        put(&root, &format!("f{i:02}.txt"), "hit\nhit\n");
    }
    let mut all = String::new();
    let mut offset = json!(0);
    let mut pages = 0;
    while let Some(o) = offset.as_u64() {
        let r = grep(
            &root,
            json!({"pattern": "hit", "output_mode": "count", "head_limit": 10, "offset": o}),
        );
        all.push_str(&rows(&r));
        offset = r.data["next_offset"].clone();
        pages += 1;
        if pages == 1 {
            assert!(r.truncated);
            assert!(r.content.ends_with(
                "[truncated: showing counts for 10 of 25 files with matches (50 matching lines) (limited by head_limit=10); continue with offset=10, raise head_limit, or narrow the pattern or use path/include/type]\n"
            ), "{}", r.content);
        }
        if pages == 3 {
            assert!(!r.truncated);
            assert!(r.content.ends_with(
                "[the last 5 of 25 files with matches, from offset=20: no more results]\n"
            ));
        }
    }
    assert_eq!(pages, 3);
    let want: String = (0..25).map(|i| format!("f{i:02}.txt:2\n")).collect();
    assert_eq!(all, want);
    let r = grep(
        &root,
        json!({"pattern": "hit", "output_mode": "files_with_matches", "head_limit": 10, "offset": 20}),
    );
    assert_eq!(
        rows(&r),
        (20..25)
            .map(|i| format!("f{i:02}.txt\n"))
            .collect::<String>()
    );
    assert_eq!(r.totals, vec![("files", 25, 5)]);
}

#[test]
fn before_and_after_like_ripgrep() {
    let root = tmp();
    put(&root, "a.txt", "1\n2\nX3\n4\n5\n6\n7\nX8\nX9\n10\n");
    put(&root, "b.txt", "X1\n2\n");
    // `rg -n -A1 '^X'`
    let r = grep(&root, json!({"pattern": "^X", "after": 1}));
    assert_eq!(
        r.content,
        "a.txt:3:X3\na.txt-4-4\n--\na.txt:8:X8\na.txt:9:X9\na.txt-10-10\n--\nb.txt:1:X1\nb.txt-2-2\n"
    );
    // `rg -n -B2 '^X'`
    let r = grep(&root, json!({"pattern": "^X", "before": 2}));
    assert_eq!(
        r.content,
        "a.txt-1-1\na.txt-2-2\na.txt:3:X3\n--\na.txt-6-6\na.txt-7-7\na.txt:8:X8\na.txt:9:X9\n--\nb.txt:1:X1\n"
    );
    // `before`/`after` override `context`.
    let r2 = grep(&root, json!({"pattern": "^X", "context": 2, "after": 0}));
    assert_eq!(r2.content, r.content);
}

#[test]
fn context_at_page_edges_is_never_a_result_of_another_page() {
    let root = tmp();
    put(&root, "a.txt", "X1\n2\nX3\nX4\n5\n");
    // Page 1 ends at X1: its after-context stops before X3 (a result of page 2).
    let r = grep(
        &root,
        json!({"pattern": "^X", "context": 5, "head_limit": 1}),
    );
    assert_eq!(rows(&r), "a.txt:1:X1\na.txt-2-2\n");
    assert_eq!(r.data["next_offset"], 1);
    // Page 2 starts at X3: its before-context does not reach back into X1 (page 1's).
    let r = grep(
        &root,
        json!({"pattern": "^X", "context": 5, "head_limit": 1, "offset": 1}),
    );
    assert_eq!(rows(&r), "a.txt-2-2\na.txt:3:X3\n");
    let r = grep(
        &root,
        json!({"pattern": "^X", "context": 5, "head_limit": 5, "offset": 2}),
    );
    assert_eq!(rows(&r), "a.txt:4:X4\na.txt-5-5\n");
    assert_eq!(r.data["next_offset"], Value::Null);
}

#[test]
fn paging_through_content_has_no_overlap_and_no_gap() {
    let root = tmp();
    let mut want = String::new();
    for f in 0..7 {
        let mut body = String::new();
        for l in 1..=40 {
            if (l + f) % 3 != 0 {
                body.push_str(&format!("hit {f} {l}\n"));
                want.push_str(&format!("f{f}.txt:{l}:hit {f} {l}\n"));
            } else {
                body.push_str("miss\n");
            }
        }
        put(&root, &format!("f{f}.txt"), body);
    }
    let total = want.lines().count() as u64;
    let full = grep(&root, json!({"pattern": "hit", "head_limit": 1000}));
    assert_eq!(full.content, want);
    let mut got = String::new();
    let mut offset = 0u64;
    let mut offsets = vec![];
    loop {
        let r = grep(
            &root,
            json!({"pattern": "hit", "head_limit": 50, "offset": offset}),
        );
        got.push_str(&rows(&r));
        assert_eq!(r.totals[0].1, total);
        match r.data["next_offset"].as_u64() {
            Some(next) => {
                assert!(
                    r.content.contains(&format!("continue with offset={next}")),
                    "{}",
                    r.content
                );
                offsets.push(next);
                offset = next;
            }
            None => break,
        }
    }
    assert_eq!(got, want);
    assert_eq!(
        offsets,
        (1..=(total - 1) / 50).map(|i| i * 50).collect::<Vec<_>>()
    );
    // Past the end: nothing, said plainly.
    let r = grep(&root, json!({"pattern": "hit", "offset": total + 5}));
    assert_eq!(
        r.content,
        format!("No results at offset={}: there are {total} matching lines in 7 files; results are counted from 0, so use an offset below {total}\n", total + 5)
    );
    assert!(!r.truncated);
    assert_eq!(r.data["next_offset"], Value::Null);
}

#[test]
fn a_page_cut_by_the_budget_gives_the_exact_next_offset() {
    let root = tmp();
    let body: String = (0..300)
        .map(|i| format!("hit {i:04} {}\n", "x".repeat(40)))
        .collect();
    put(&root, "a.txt", &body);
    let cx = Context::for_tests(&root, 3000, &[]);
    let mut got = String::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let r = run(
            &json!({"pattern": "hit", "head_limit": 1000, "offset": offset}),
            &cx,
        )
        .unwrap();
        assert!(r.content.len() <= 3000);
        got.push_str(&rows(&r));
        pages += 1;
        match r.data["next_offset"].as_u64() {
            Some(n) => {
                assert!(r.content.contains("limited by the output size budget"));
                offset = n;
            }
            None => break,
        }
    }
    assert!(pages > 3, "{pages}");
    let want: String = (0..300)
        .map(|i| format!("a.txt:{}:hit {i:04} {}\n", i + 1, "x".repeat(40)))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn counting_with_an_offset_stops_past_the_page() {
    let root = tmp();
    let body: String = (0..3000).map(|i| format!("hit {i}\n")).collect();
    put(&root, "a.txt", &body);
    let r = grep(
        &root,
        json!({"pattern": "hit", "head_limit": 10, "offset": 1500}),
    );
    // Counted up to offset + 1000.
    assert_eq!(r.totals[0], ("matches", 2500, 10));
    assert_eq!(r.data["matches_exact"], false);
    assert_eq!(r.data["next_offset"], 1510);
    assert_eq!(rows(&r).lines().next().unwrap(), "a.txt:1501:hit 1500");
    assert!(
        r.content.contains(
            "showing 10 of at least 2500 matching lines in at least 1 file, from offset=1500"
        ),
        "{}",
        r.content
    );
}

#[test]
fn head_limit_and_its_old_name() {
    let root = tmp();
    put(&root, "a.txt", "hit\nhit\nhit\n");
    let r = grep(&root, json!({"pattern": "hit", "max_matches": 2}));
    assert_eq!(r.data["head_limit"], 2);
    let r = grep(
        &root,
        json!({"pattern": "hit", "max_matches": 2, "head_limit": 2}),
    );
    assert_eq!(r.totals[0], ("matches", 3, 2));
    let e = err(
        &root,
        json!({"pattern": "hit", "max_matches": 2, "head_limit": 1}),
    );
    assert_eq!(code(&e), "bad-input");
    assert!(format!("{e:?}").contains("give only `head_limit`"));
    let e = err(&root, json!({"pattern": "hit", "output_mode": "lines"}));
    assert_eq!(code(&e), "bad-input");
    assert!(format!("{e:?}").contains("files_with_matches"));
}

#[test]
fn type_selects_ripgreps_file_types() {
    let root = tmp();
    put(&root, "src/main.rs", "needle\n");
    put(&root, "app.py", "needle\n");
    put(&root, "Makefile", "needle\n");
    put(&root, "rules.mk", "needle\n");
    put(&root, "x.c", "needle\n");
    put(&root, "x.h", "needle\n");
    put(&root, "notes.md", "needle\n");
    let files = |input: Value| {
        let mut input = input;
        input["pattern"] = json!("needle");
        input["output_mode"] = json!("files_with_matches");
        grep(&root, input).content
    };
    assert_eq!(files(json!({"type": "rust"})), "src/main.rs\n");
    assert_eq!(files(json!({"type": "py"})), "app.py\n");
    assert_eq!(files(json!({"type": "make"})), "Makefile\nrules.mk\n");
    assert_eq!(files(json!({"type": "c"})), "x.c\nx.h\n");
    assert_eq!(files(json!({"type": "rust,md"})), "notes.md\nsrc/main.rs\n");
    // With include, both must match.
    assert_eq!(files(json!({"type": "c", "include": "*.h"})), "x.h\n");
    assert_eq!(
        files(json!({"type": "rust", "include": "*.md"})),
        "No matches for `needle` in 0 files searched under . of type rust\n"
    );
    let r = grep(&root, json!({"pattern": "needle", "type": "make"}));
    assert_eq!(r.data["type"], json!(["make"]));
}

#[test]
fn an_unknown_type_names_close_and_common_ones() {
    let root = tmp();
    let e = err(&root, json!({"pattern": "x", "type": "rsut"}));
    assert_eq!(code(&e), "bad-input");
    let text = format!("{e:?}");
    assert!(
        text.contains("`type` `rsut` is not a file type ripgrep knows"),
        "{text}"
    );
    let close = text
        .split("Close names: ")
        .nth(1)
        .unwrap()
        .split('.')
        .next()
        .unwrap();
    assert!(close.split(", ").any(|n| n == "rust"), "{text}");
    let e = err(&root, json!({"pattern": "x", "type": "pyth"}));
    assert!(format!("{e:?}").contains(", py, python."), "{e:?}");
    assert!(text.contains("Common ones: rust, py, js"), "{text}");
    assert!(text.contains("known_types"), "{text}");
}

#[test]
fn type_globs_match_what_ripgreps_matcher_matches() {
    let names = [
        "main.rs",
        "a.py",
        "a.pyi",
        "Makefile",
        "GNUmakefile",
        "x.mk",
        "a.c",
        "a.h",
        "a.cpp",
        "a.hpp",
        "a.cc",
        "a.C",
        "a.js",
        "a.mjs",
        "a.ts",
        "a.tsx",
        "a.md",
        "README",
        "a.json",
        "a.yaml",
        "a.yml",
        "Cargo.toml",
        "a.go",
        "a.java",
        "CMakeLists.txt",
        "Dockerfile",
        "a.sh",
        ".bashrc",
        "a.txt",
        "a.html",
        "a.css",
        "noext",
        "a.rs.bak",
        "BUILD.bazel",
    ];
    for (name, _) in types::definitions() {
        let ours = types::select(&name).unwrap();
        let mut b = ignore::types::TypesBuilder::new();
        b.add_defaults();
        b.select(&name);
        let theirs = b.build().unwrap();
        for file in names {
            assert_eq!(
                ours.include.matches(file),
                theirs.matched(file, false).is_whitelist(),
                "type {name}, file {file}"
            );
        }
    }
}

#[test]
fn multiline_matches_span_lines_like_rg_u() {
    let root = tmp();
    put(
        &root,
        "a.txt",
        "foo\nbar\nfoo bar baz\nx foo\nbar y\nzzz\nfoo\n\nbar\n",
    );
    // `rg -U -n 'foo\s+bar'`
    let r = grep(&root, json!({"pattern": r"foo\s+bar", "multiline": true}));
    assert_eq!(
        r.content,
        "a.txt:1:foo\na.txt:2:bar\na.txt:3:foo bar baz\na.txt:4:x foo\na.txt:5:bar y\na.txt:7:foo\na.txt:8:\na.txt:9:bar\n"
    );
    // Without multiline only the line that matches by itself.
    let r = grep(&root, json!({"pattern": r"foo\s+bar"}));
    assert_eq!(r.content, "a.txt:3:foo bar baz\n");
    // A match ending with a newline does not touch the next line (`rg -U -n 'foo\n'`).
    let r = grep(&root, json!({"pattern": r"foo\n", "multiline": true}));
    assert_eq!(r.content, "a.txt:1:foo\na.txt:4:x foo\na.txt:7:foo\n");
    // `.` does not cross a newline unless `(?s)`.
    let r = grep(&root, json!({"pattern": "zzz.foo", "multiline": true}));
    assert_eq!(r.data["matches"], 0);
    let r = grep(&root, json!({"pattern": "(?s)zzz.foo", "multiline": true}));
    assert_eq!(r.content, "a.txt:6:zzz\na.txt:7:foo\n");
    // Count: the lines a match touches.
    let r = grep(
        &root,
        json!({"pattern": r"foo\s+bar", "multiline": true, "output_mode": "count"}),
    );
    assert_eq!(r.content, "a.txt:8\n");
    // `rg -U -n -C1 'foo\nbar'`
    let r = grep(
        &root,
        json!({"pattern": r"foo\nbar", "multiline": true, "context": 1}),
    );
    assert_eq!(
        r.content,
        "a.txt:1:foo\na.txt:2:bar\na.txt-3-foo bar baz\na.txt:4:x foo\na.txt:5:bar y\na.txt-6-zzz\n"
    );
    // Paging splits a match's lines exactly.
    let r = grep(
        &root,
        json!({"pattern": r"foo\s+bar", "multiline": true, "head_limit": 4, "offset": 3}),
    );
    assert_eq!(
        rows(&r),
        "a.txt:4:x foo\na.txt:5:bar y\na.txt:7:foo\na.txt:8:\n"
    );
    assert_eq!(r.data["next_offset"], 7);
}

#[test]
fn a_newline_in_the_pattern_without_multiline_says_how() {
    let root = tmp();
    put(&root, "a.txt", "foo\nbar\n");
    let r = grep(&root, json!({"pattern": r"foo\nbar"}));
    assert!(r.content.contains("pass multiline=true"), "{}", r.content);
    let r = grep(&root, json!({"pattern": r"foo\nbar", "multiline": true}));
    assert_eq!(r.content, "a.txt:1:foo\na.txt:2:bar\n");
}

#[test]
fn the_description_is_the_model_facing_file() {
    let d = include_str!("../description.md");
    assert!(d.len() < 2600, "{}", d.len());
    for option in [
        "output_mode",
        "files_with_matches",
        "count",
        "before",
        "after",
        "type",
        "multiline",
        "offset",
        "head_limit",
        "next_offset",
    ] {
        assert!(d.contains(option), "{option}");
    }
}

#[test]
fn data_says_where_the_page_is() {
    let root = tmp();
    put(&root, "a.txt", "hello\nhello\n");
    put(&root, "b.txt", "hello\n");
    let r = grep(&root, json!({"pattern": "hello", "head_limit": 2}));
    assert_eq!(
        r.data,
        json!({
            "pattern": "hello", "path": ".", "output_mode": "content", "offset": 0,
            "head_limit": 2, "next_offset": 2, "results": 3, "results_returned": 2,
            "matches": 3, "matches_returned": 2, "matches_exact": true,
            "files_searched": 2, "files_matched": 2, "files_returned": 1,
            "binary_files_skipped": 0, "large_files_skipped": 0, "unreadable": 0,
        })
    );
    assert_eq!(
        r.summary,
        "grep `hello`: showing 2 of 3 matching lines in 2 files"
    );
    let r = grep(
        &root,
        json!({"pattern": "hello", "head_limit": 2, "offset": 2}),
    );
    assert_eq!(
        r.content,
        "b.txt:1:hello\n[the last 1 of 3 matching lines, from offset=2: no more results]\n"
    );
    assert_eq!(
        r.summary,
        "grep `hello`: showing 1 of 3 matching lines in 2 files, from offset=2"
    );
    assert_eq!(r.data["next_offset"], Value::Null);
    assert!(!r.truncated);
}
