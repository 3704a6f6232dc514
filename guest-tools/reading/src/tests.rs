use super::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-read-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(root: &Path, input: Value, max: usize) -> Result<Report, ToolError> {
    let cx = Context::for_tests(root, max, &[]);
    run(&input, &cx, &HandOff)
}

fn code(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("code: \"").unwrap() + 7;
    dbg[start..].split('"').next().unwrap().to_string()
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[test]
fn numbers_lines_like_cat_n() {
    let root = tmp();
    std::fs::write(root.join("a.txt"), "alpha\r\nbeta\n\tgamma").unwrap();
    let p = root.join("a.txt");
    let r = read(&root, json!({"path": p.to_str().unwrap()}), 100_000).unwrap();
    assert_eq!(r.content, "     1\talpha\n     2\tbeta\n     3\t\tgamma\n");
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("lines", 3, 3)]);
    assert_eq!(r.data["path"], "a.txt");
    assert_eq!(r.data["total_lines"], 3);
    assert_eq!(r.data["size"], 18);
    assert_eq!(r.summary, "read a.txt: 3 lines");
}

#[test]
fn offset_and_limit_page_with_continuation_note() {
    let root = tmp();
    std::fs::write(root.join("big.txt"), lines(10)).unwrap();
    let p = root.join("big.txt");
    let r = read(
        &root,
        json!({"path": p.to_str().unwrap(), "offset": 2, "limit": 3}),
        100_000,
    )
    .unwrap();
    assert_eq!(
        r.content,
        "     3\tline 3\n     4\tline 4\n     5\tline 5\n\
         [truncated by line limit: showing lines 3-5 of 10; use offset=5 to read more]\n"
    );
    assert!(r.truncated);
    assert_eq!(r.totals, vec![("lines", 10, 3)]);
    assert_eq!(r.data["offset"], 2);
    assert_eq!(r.data["lines_returned"], 3);

    // The last page ends the file and is not truncated.
    let r = read(
        &root,
        json!({"path": p.to_str().unwrap(), "offset": 8}),
        100_000,
    )
    .unwrap();
    assert_eq!(
        r.content,
        "     9\tline 9\n    10\tline 10\n[showing lines 9-10 of 10 (end of file)]\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("lines", 10, 2)]);
}

#[test]
fn counts_all_lines_when_stopping_early() {
    let root = tmp();
    // No trailing newline: the last partial line counts.
    std::fs::write(root.join("a"), "1\n2\n3\n4\n5").unwrap();
    let p = root.join("a");
    let r = read(
        &root,
        json!({"path": p.to_str().unwrap(), "limit": 1}),
        100_000,
    )
    .unwrap();
    assert_eq!(r.totals, vec![("lines", 5, 1)]);
    let r = read(
        &root,
        json!({"path": p.to_str().unwrap(), "limit": 4}),
        100_000,
    )
    .unwrap();
    assert_eq!(r.totals, vec![("lines", 5, 4)]);
    assert!(r.content.ends_with("use offset=4 to read more]\n"));
    std::fs::write(root.join("b"), "1\n2\n3\n4\n5\n").unwrap();
    let p = root.join("b");
    let r = read(
        &root,
        json!({"path": p.to_str().unwrap(), "limit": 2}),
        100_000,
    )
    .unwrap();
    assert_eq!(r.totals, vec![("lines", 5, 2)]);
    let r = read(
        &root,
        json!({"path": p.to_str().unwrap(), "limit": 5}),
        100_000,
    )
    .unwrap();
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("lines", 5, 5)]);
}

#[test]
fn default_limit_is_2000() {
    let root = tmp();
    std::fs::write(root.join("big.txt"), lines(2500)).unwrap();
    let p = root.join("big.txt");
    let r = read(&root, json!({"path": p.to_str().unwrap()}), 10_000_000).unwrap();
    assert_eq!(r.totals, vec![("lines", 2500, 2000)]);
    assert!(r.truncated);
    assert!(r
        .content
        .ends_with("showing lines 1-2000 of 2500; use offset=2000 to read more]\n"));
}

#[test]
fn byte_budget_stops_on_a_whole_line() {
    let root = tmp();
    std::fs::write(root.join("big.txt"), lines(1000)).unwrap();
    let p = root.join("big.txt");
    let r = read(&root, json!({"path": p.to_str().unwrap()}), 1000).unwrap();
    assert!(r.truncated);
    assert!(r.content.len() <= 1000);
    let returned = r.totals[0].2;
    assert!(returned > 10 && returned < 100);
    assert_eq!(r.totals[0].1, 1000);
    assert!(r.content.contains(&format!(
        "[truncated by output size budget: showing lines 1-{returned} of 1000; use offset={returned} to read more]"
    )));
}

#[test]
fn long_lines_are_cut_visibly() {
    let root = tmp();
    let long = "é".repeat(2500);
    std::fs::write(root.join("l.txt"), format!("short\n{long}\n")).unwrap();
    let p = root.join("l.txt");
    let r = read(&root, json!({"path": p.to_str().unwrap()}), 100_000).unwrap();
    let second = r.content.lines().nth(1).unwrap();
    assert!(second.starts_with(&format!("     2\t{}…", "é".repeat(2000))));
    assert!(second.ends_with("[line cut: 2500 characters, showing 2000]"));
    assert!(r.truncated);
    assert_eq!(r.data["long_lines_cut"], 1);
}

#[test]
fn errors_for_binary_directory_missing_and_offset() {
    let root = tmp();
    std::fs::write(root.join("bin"), b"abc\0def").unwrap();
    let e = read(
        &root,
        json!({"path": root.join("bin").to_str().unwrap()}),
        100_000,
    )
    .unwrap_err();
    assert_eq!(code(&e), "binary");
    assert!(format!("{e:?}").contains("bin is a binary file (7 bytes)"));

    std::fs::create_dir(root.join("d")).unwrap();
    let e = read(
        &root,
        json!({"path": root.join("d").to_str().unwrap()}),
        100_000,
    )
    .unwrap_err();
    assert_eq!(code(&e), "is-directory");
    assert!(format!("{e:?}").contains("use `ls`"));

    let e = read(
        &root,
        json!({"path": root.join("nope").to_str().unwrap()}),
        100_000,
    )
    .unwrap_err();
    assert_eq!(code(&e), "not-found");
    assert!(format!("{e:?}").contains("nope"));
    assert!(!format!("{e:?}").contains(root.to_str().unwrap()));

    std::fs::write(root.join("s"), "a\nb\n").unwrap();
    let e = read(
        &root,
        json!({"path": root.join("s").to_str().unwrap(), "offset": 5}),
        100_000,
    )
    .unwrap_err();
    assert_eq!(code(&e), "offset-out-of-range");
}

#[test]
fn empty_file_is_ok_with_a_note() {
    let root = tmp();
    std::fs::write(root.join("e"), "").unwrap();
    let r = read(
        &root,
        json!({"path": root.join("e").to_str().unwrap()}),
        100_000,
    )
    .unwrap();
    assert_eq!(r.content, "[file is empty: 0 lines]\n");
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("lines", 0, 0)]);
}

#[test]
fn an_odd_name_is_quoted_in_summary_and_messages_exact_in_data() {
    let root = tmp();
    let name = "a.txt:1:x\n\u{202e}b";
    std::fs::write(root.join(name), "one\n").unwrap();
    let p = root.join(name);
    let r = read(&root, json!({"path": p.to_str().unwrap()}), 100_000).unwrap();
    assert_eq!(r.summary, "read \"a.txt:1:x\\n\\u{202e}b\": 1 lines");
    assert_eq!(r.data["path"], name);
    let missing = root.join("gone\x1b");
    let e = read(&root, json!({"path": missing.to_str().unwrap()}), 100_000).unwrap_err();
    let dbg = format!("{e:?}");
    assert!(
        dbg.contains(r#"message: "not found: \"gone\\x1b\""#),
        "{dbg}"
    );
    assert!(!dbg.contains("\\u{1b}"), "{dbg}");
}

#[test]
fn images_and_pdfs_are_handed_over_from_their_head_alone() {
    let root = tmp();
    // Sparse files over every size limit: the hand-off is decided before the rest is read,
    // and the limits are the decoding component's to apply.
    let big = |name: &str, head: &[u8]| {
        let f = std::fs::File::create(root.join(name)).unwrap();
        use std::io::Write as _;
        (&f).write_all(head).unwrap();
        f.set_len(64 << 20).unwrap();
    };
    big(
        "a.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x02",
    );
    big("b.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n");
    let e = read(&root, json!({"path": at(&root, "a.png")}), 100_000).unwrap_err();
    assert_eq!(code(&e), HAND_OFF);
    assert!(format!("{e:?}").contains("a.png is a PNG image"), "{e:?}");
    let e = read(
        &root,
        json!({"path": at(&root, "b.pdf"), "pages": "2"}),
        100_000,
    )
    .unwrap_err();
    assert_eq!(code(&e), HAND_OFF);
    // What is not an image or a PDF is answered here, as before.
    std::fs::write(root.join("note.txt"), "GIF89a is the format's signature\n").unwrap();
    let e = read(
        &root,
        json!({"path": at(&root, "note.txt"), "pages": "1"}),
        100_000,
    )
    .unwrap_err();
    assert_eq!(code(&e), "bad-input");
    let r = read(&root, json!({"path": at(&root, "note.txt")}), 100_000).unwrap();
    assert_eq!(r.content, "     1\tGIF89a is the format's signature\n");
}

fn at(root: &Path, name: &str) -> String {
    root.join(name).to_str().unwrap().to_string()
}
