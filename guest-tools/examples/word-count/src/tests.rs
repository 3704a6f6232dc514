use super::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-word-count-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn count(s: &str) -> Counts {
    Counts::of_reader(s.as_bytes()).unwrap()
}

#[test]
fn counts_like_wc() {
    assert_eq!(count(""), Counts::default());
    assert_eq!(
        count("hello world\n"),
        Counts {
            lines: 1,
            words: 2,
            bytes: 12
        }
    );
    assert_eq!(
        count("  a\tb\r\n\nc"),
        Counts {
            lines: 2,
            words: 3,
            bytes: 9
        }
    );
    assert_eq!(
        count("no newline"),
        Counts {
            lines: 0,
            words: 2,
            bytes: 10
        }
    );
    assert_eq!(
        count("héllo"),
        Counts {
            lines: 0,
            words: 1,
            bytes: 6
        }
    );
}

/// A reader that hands out one byte at a time, so words cross read boundaries.
struct Trickle<'a>(&'a [u8]);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.split_first() {
            Some((b, rest)) if !buf.is_empty() => {
                buf[0] = *b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

#[test]
fn words_across_reads() {
    let c = Counts::of_reader(Trickle(b"one two  three\n")).unwrap();
    assert_eq!(
        c,
        Counts {
            lines: 1,
            words: 3,
            bytes: 15
        }
    );
}

#[test]
fn walks_a_tree_skipping_ignored_and_denied() {
    let root = tmp();
    std::fs::create_dir_all(root.join("src/inner")).unwrap();
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join("src/b.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join("src/inner/a.rs"), "one\ntwo\n").unwrap();
    std::fs::write(root.join("target/debug/x"), "skip me").unwrap();
    std::fs::write(root.join(".git/HEAD"), "skip me").unwrap();
    std::fs::write(root.join(".env"), "SECRET=1").unwrap();
    std::fs::write(root.join("README"), "hi there\n").unwrap();
    let cx = Context::for_tests(&root, 4096, &[".env"]);

    let tally = collect(&cx, &root).unwrap();
    let rels: Vec<&str> = tally.files.iter().map(|f| f.rel.as_str()).collect();
    assert_eq!(rels, vec!["README", "src/b.rs", "src/inner/a.rs"]);
    assert_eq!(tally.denied, 1);

    let r = render(&tally, ".", 4096);
    assert!(!r.truncated);
    assert_eq!(r.files, (3, 3));
    assert!(
        r.content
            .contains("       2        2          8  src/inner/a.rs"),
        "{}",
        r.content
    );
    assert!(
        r.content
            .contains("       4        7         30  total (3 files)"),
        "{}",
        r.content
    );
    assert!(
        r.content.contains("1 entries on the deny-list"),
        "{}",
        r.content
    );
    assert_eq!(
        r.summary,
        "word-count .: 3 files, 4 lines, 7 words, 30 bytes"
    );

    let one = collect(&cx, &root.join("src/b.rs")).unwrap();
    assert_eq!(one.files[0].rel, "src/b.rs");
}

#[test]
fn missing_path_is_an_error() {
    let root = tmp();
    let cx = Context::for_tests(&root, 4096, &[]);
    assert!(collect(&cx, &root.join("nope")).is_err());
}

#[test]
fn cuts_rows_to_the_budget_but_totals_everything() {
    let tally = Tally {
        files: (0..200)
            .map(|i| FileCount {
                rel: format!("dir/file-{i:03}.txt"),
                counts: Counts {
                    lines: 1,
                    words: 1,
                    bytes: 2,
                },
            })
            .collect(),
        ..Tally::default()
    };
    let r = render(&tally, "dir", 2048);
    assert!(r.truncated);
    assert!(r.content.len() <= 2048, "{}", r.content.len());
    assert_eq!(r.files.0, 200);
    assert!(r.files.1 > 0 && r.files.1 < 200);
    assert!(r.content.contains("[truncated: listing"), "{}", r.content);
    assert!(
        r.content
            .contains("     200      200        400  total (200 files)"),
        "{}",
        r.content
    );
}

#[test]
fn an_odd_name_is_quoted_in_its_row_and_exact_in_data() {
    let root = tmp();
    std::fs::write(
        root.join("a.txt\n     9        9          9  b"),
        "one two\n",
    )
    .unwrap();
    let cx = Context::for_tests(&root, 100_000, &[]);
    let tally = collect(&cx, &root).unwrap();
    let r = render(&tally, ".", 100_000);
    assert!(
        r.content
            .contains("       1        2          8  \"a.txt\\n     9        9          9  b\"\n"),
        "{}",
        r.content
    );
    assert_eq!(r.content.lines().count(), 3, "{}", r.content);
    assert_eq!(
        r.data["escaped_names"],
        json!(["a.txt\n     9        9          9  b"])
    );
}
