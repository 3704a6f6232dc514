#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn edit(text: &str, old: &str, new: &str, all: bool) -> Result<(String, Applied), EditError> {
    let mut doc = Document::new(text);
    let applied = doc.apply(old, new, all)?;
    Ok((doc.render(), applied))
}

fn ok(text: &str, old: &str, new: &str, all: bool) -> (String, Applied) {
    match edit(text, old, new, all) {
        Ok(r) => r,
        Err(e) => panic!("edit failed: {} {}", e.code, e.message),
    }
}

fn err(text: &str, old: &str, new: &str, all: bool) -> EditError {
    match edit(text, old, new, all) {
        Ok((t, _)) => panic!("edit unexpectedly succeeded: {t:?}"),
        Err(e) => e,
    }
}

#[test]
fn exact_unique_replace() {
    let (out, a) = ok("a\nb\nc\n", "b", "B", false);
    assert_eq!(out, "a\nB\nc\n");
    assert_eq!(
        (a.replacements, a.exact, a.first_line, a.last_line),
        (1, true, 2, 2)
    );
    assert!(a.note.is_none());
}

#[test]
fn exact_multi_line_range() {
    let (out, a) = ok("x\ny\nz\n", "y\n", "1\n2\n3\n", false);
    assert_eq!(out, "x\n1\n2\n3\nz\n");
    assert_eq!((a.first_line, a.last_line), (2, 4));
}

#[test]
fn ambiguous_names_count_and_lines() {
    let e = err("foo\nbar\nfoo\nbaz\nfoo\n", "foo", "qux", false);
    assert_eq!(e.code, "ambiguous-match");
    assert!(e.message.contains("3 places"), "{}", e.message);
    assert!(e.message.contains("lines 1, 3, 5"), "{}", e.message);
    assert!(e.message.contains("replace_all"), "{}", e.message);
    assert_eq!(e.data["lines"], json!([1, 3, 5]));
}

#[test]
fn ambiguous_lists_at_most_five() {
    let text = "x\n".repeat(8);
    let e = err(&text, "x", "y", false);
    assert!(e.message.contains("8 places"));
    assert!(e.message.contains("1, 2, 3, 4, 5, …"), "{}", e.message);
}

#[test]
fn replace_all_replaces_every_occurrence() {
    let (out, a) = ok("foo\nbar\nfoo\nbaz\nfoo\n", "foo", "qux", true);
    assert_eq!(out, "qux\nbar\nqux\nbaz\nqux\n");
    assert_eq!((a.replacements, a.first_line, a.last_line), (3, 1, 5));
}

#[test]
fn identical_strings_refused() {
    assert_eq!(err("a\n", "a", "a", false).code, "no-change");
}

#[test]
fn crlf_variant_of_same_text_refused() {
    assert_eq!(err("a\r\nb\r\n", "a\r\nb", "a\nb", false).code, "no-change");
}

#[test]
fn empty_old_fills_empty_file_only() {
    let (out, a) = ok("", "", "hello\nworld\n", false);
    assert_eq!(out, "hello\nworld\n");
    assert!(a.filled_empty);
    assert_eq!((a.first_line, a.last_line), (1, 2));
    assert_eq!(err("x\n", "", "y", false).code, "empty-old-string");
}

#[test]
fn deletion_keeps_trailing_newline() {
    let (out, _) = ok("a\nb\n", "\nb\n", "", false);
    assert_eq!(out, "a\n");
    // The model dropped the final newline from new_string: the file keeps its trailing newline.
    let (out, a) = ok("a\nb\n", "b\n", "c", false);
    assert_eq!(out, "a\nc\n");
    assert_eq!((a.first_line, a.last_line), (2, 2));
}

#[test]
fn no_trailing_newline_stays_absent() {
    let (out, _) = ok("a\nb", "b", "c", false);
    assert_eq!(out, "a\nc");
    let (out, _) = ok("    a\n    b", "a\nb", "c\nd", false);
    assert_eq!(out, "    c\n    d");
}

#[test]
fn crlf_file_matches_lf_old_string_and_writes_crlf() {
    let (out, a) = ok("one\r\ntwo\r\nthree\r\n", "two\nthree", "2\n3\n4", false);
    assert_eq!(out, "one\r\n2\r\n3\r\n4\r\n");
    assert!(a.exact);
    assert_eq!((a.first_line, a.last_line), (2, 4));
}

#[test]
fn crlf_file_matches_crlf_old_string() {
    let (out, _) = ok("one\r\ntwo\r\n", "one\r\ntwo", "uno\r\ndos", false);
    assert_eq!(out, "uno\r\ndos\r\n");
}

#[test]
fn lf_file_gets_lf_even_from_crlf_input() {
    let (out, _) = ok("one\ntwo\n", "one\r\ntwo", "uno\r\ndos", false);
    assert_eq!(out, "uno\ndos\n");
}

#[test]
fn crlf_file_without_trailing_newline() {
    let (out, _) = ok("a\r\nb", "b", "c\nd", false);
    assert_eq!(out, "a\r\nc\r\nd");
}

#[test]
fn bom_is_kept() {
    let (out, _) = ok("\u{FEFF}a\nb\n", "a", "z", false);
    assert_eq!(out, "\u{FEFF}z\nb\n");
}

#[test]
fn fallback_reindents_two_spaces_to_eight() {
    let file = "fn f() {\n        if x {\n            y();\n        }\n}\n";
    let old = "if x {\n  y();\n}";
    let new = "if x {\n  y();\n  z();\n}";
    let (out, a) = ok(file, old, new, false);
    assert_eq!(
        out,
        "fn f() {\n        if x {\n            y();\n            z();\n        }\n}\n"
    );
    assert!(!a.exact);
    assert_eq!((a.first_line, a.last_line), (2, 5));
    let note = a.note.unwrap_or_default();
    assert!(note.contains("did not match the file exactly"), "{note}");
    assert!(note.contains("lines 2-4"), "{note}");
    assert!(note.contains("re-indented"), "{note}");
}

#[test]
fn fallback_reindents_deeper_levels_by_unit() {
    // The caller writes 2-space levels, the file uses 4-space levels starting at 4.
    let file = "class A:\n    def f(self):\n        return 1\n";
    let old = "def f(self):\n  return 1";
    let new = "def f(self):\n  if self.x:\n    return 2\n  return 1";
    let (out, _) = ok(file, old, new, false);
    assert_eq!(
        out,
        "class A:\n    def f(self):\n        if self.x:\n            return 2\n        return 1\n"
    );
}

#[test]
fn fallback_spaces_to_tabs() {
    let file = "func main() {\n\tif ok {\n\t\trun()\n\t}\n}\n";
    let old = "    if ok {\n        run()\n    }";
    let new = "    if ok {\n        run()\n        if again {\n            run()\n        }\n    }";
    let (out, a) = ok(file, old, new, false);
    assert_eq!(
        out,
        "func main() {\n\tif ok {\n\t\trun()\n\t\tif again {\n\t\t\trun()\n\t\t}\n\t}\n}\n"
    );
    assert!(!a.exact);
    assert!(a.note.unwrap_or_default().contains("tabs"));
}

#[test]
fn fallback_tabs_to_spaces() {
    let file = "def f():\n    if a:\n        b()\n";
    let old = "\tif a:\n\t\tb()";
    let new = "\tif a:\n\t\tb()\n\t\tc()";
    let (out, _) = ok(file, old, new, false);
    assert_eq!(out, "def f():\n    if a:\n        b()\n        c()\n");
}

#[test]
fn fallback_internal_whitespace_and_trailing_spaces() {
    let file = "let  x =   1;   \nlet y = 2;\n";
    let (out, a) = ok(file, "let x = 1;", "let x = 10;", false);
    assert_eq!(out, "let x = 10;\nlet y = 2;\n");
    assert!(!a.exact);
    let note = a.note.unwrap_or_default();
    assert!(note.contains("line 1 "), "{note}");
    assert!(note.contains("used as written"), "{note}");
}

#[test]
fn fallback_crlf_file() {
    let file = "a\r\n\tb\r\n\tc\r\nd\r\n";
    let (out, a) = ok(file, "  b\n  c", "  b\n  B\n  c", false);
    assert_eq!(out, "a\r\n\tb\r\n\tB\r\n\tc\r\nd\r\n");
    assert!(!a.exact);
}

#[test]
fn fallback_ambiguous() {
    let file = "  a\n  b\nx\n    a\n    b\n";
    let e = err(file, "a\nb", "c", false);
    assert_eq!(e.code, "ambiguous-match");
    assert!(e.message.contains("2 places"), "{}", e.message);
    assert!(e.message.contains("lines 1-2, 4-5"), "{}", e.message);
}

#[test]
fn fallback_replace_all_adapts_each() {
    let file = "  a\n  b\nx\n    a\n    b\n";
    let (out, a) = ok(file, "a\nb", "c", true);
    assert_eq!(out, "  c\nx\n    c\n");
    assert_eq!((a.replacements, a.first_line, a.last_line), (2, 1, 3));
}

#[test]
fn fallback_deletion() {
    let file = "keep\n    drop me\n    and me\nkeep too\n";
    let (out, a) = ok(file, "drop me\nand me\n", "", false);
    assert_eq!(out, "keep\nkeep too\n");
    assert_eq!((a.first_line, a.last_line), (2, 2));
}

#[test]
fn fallback_blank_lines_in_new_are_empty() {
    let file = "\tx\n";
    let (out, _) = ok(file, "  x", "  x\n  \n  y", false);
    assert_eq!(out, "\tx\n\n\ty\n");
}

#[test]
fn whitespace_only_old_does_not_fall_back() {
    let e = err("a\n\nb\n", "  \n", "x", false);
    assert_eq!(e.code, "no-match");
}

#[test]
fn no_match_diagnosis_shows_visible_whitespace() {
    let file = "fn main() {\n\tlet x = 1;  \n\tlet y = 2;\n}\n";
    let e = err(file, "    let x = 1;\n    let y = 3;", "z", false);
    assert_eq!(e.code, "no-match");
    let m = &e.message;
    assert!(m.contains("→let x = 1;··"), "{m}");
    assert!(m.contains(">     3\t→let y = 2;"), "{m}");
    assert!(m.contains("      2\t→let x = 1;··"), "{m}");
    assert!(
        m.contains("First difference, old_string line 2 against file line 3"),
        "{m}"
    );
    assert!(m.contains("tabs"), "{m}");
    assert_eq!(e.data["closest_line"], json!(2));
}

#[test]
fn no_match_diagnosis_zero_width_and_crlf() {
    let file = "alpha\nbe\u{200B}ta\ngamma\n";
    let e = err(file, "beta", "x", false);
    assert!(e.message.contains("be\\u{200B}ta"), "{}", e.message);
    assert!(
        e.message.contains("U+200B (zero-width space)"),
        "{}",
        e.message
    );

    let mixed = "a\r\nb\nc\r\n";
    let e = err(mixed, "b\nd", "x", false);
    assert!(e.message.contains("a␍"), "{}", e.message);
}

#[test]
fn no_match_hints() {
    let e = err("say(\"hi\")\n", "say(“hi”)", "x", false);
    assert!(e.message.contains("typographic"), "{}", e.message);
    let e = err("a\nb\n", "a\\nb", "x", false);
    assert!(e.message.contains("literal backslash"), "{}", e.message);
    let e = err(
        "fn a() {}\nfn b() {}\n",
        "     1\tfn a() {}\n     2\tfn b() {}",
        "x",
        false,
    );
    assert!(e.message.contains("line numbers"), "{}", e.message);
    let e = err("completely\ndifferent\n", "zzzz qqqq", "x", false);
    assert!(
        e.message.contains("Nothing in the file closely resembles"),
        "{}",
        e.message
    );
}

#[test]
fn no_match_past_end_of_file() {
    let e = err("a\nb\n", "a\nb\nc", "x", false);
    assert_eq!(e.code, "no-match");
    assert!(e.message.contains("file ends at line 2"), "{}", e.message);
}

#[test]
fn no_match_in_empty_file() {
    let e = err("", "a", "b", false);
    assert_eq!(e.code, "no-match");
    assert!(e.message.contains("The file is empty"));
}

#[test]
fn error_leaves_document_unchanged() {
    let mut doc = Document::new("a\na\n");
    assert!(doc.apply("a", "b", false).is_err());
    assert_eq!(doc.render(), "a\na\n");
}

#[test]
fn changed_range_finds_middle() {
    assert_eq!(changed_range("a\nb\nc\n", "a\nX\nY\nc\n"), Some((2, 3)));
    assert_eq!(changed_range("a\nb\nc\n", "a\nc\n"), Some((2, 2)));
    assert_eq!(changed_range("a\n", "a\n"), None);
}

#[test]
fn detect_units() {
    use indent::{detect_unit, Unit};
    assert_eq!(
        detect_unit(&["a", "  b", "    c", "  d"]),
        Some(Unit::Spaces(2))
    );
    assert_eq!(detect_unit(&["a", "\tb", "\t\tc"]), Some(Unit::Tab));
    assert_eq!(detect_unit(&["a", "b"]), None);
}

#[test]
fn snippet_numbers_lines_with_context() {
    let text = (1..=10).map(|n| format!("l{n}\n")).collect::<String>();
    let s = snippet::snippet(&text, 5, 5, 10_000);
    assert_eq!(
        s,
        "     2\tl2\n     3\tl3\n     4\tl4\n     5\tl5\n     6\tl6\n     7\tl7\n     8\tl8\n"
    );
    let big = (1..=100).map(|n| format!("l{n}\n")).collect::<String>();
    let s = snippet::snippet(&big, 1, 100, 10_000);
    assert!(s.contains("(70 more changed lines)"), "{s}");
    assert!(s.contains("   100\tl100"));
}

#[test]
fn atomic_write_replaces_and_leaves_no_temp() {
    let dir = std::env::temp_dir().join(format!("toolgate-editing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.txt");
    std::fs::write(&path, "old").unwrap();
    fsio::atomic_write(&path, b"new", "f.txt").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["f.txt".to_string()]);
    // Writing into a missing directory fails and leaves nothing behind.
    assert!(fsio::atomic_write(&dir.join("missing/f.txt"), b"x", "missing/f.txt").is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mixed_line_endings_are_left_alone() {
    let (out, _) = ok("a\r\nb\nc\r\n", "b\n", "B\n", false);
    assert_eq!(out, "a\r\nB\nc\r\n");
}

#[test]
fn fallback_dedent_below_base() {
    // new_string closes a block below old_string's first line.
    let file = "\t\tif a {\n\t\t\tb()\n";
    let old = "    if a {\n        b()";
    let new = "    if a {\n        b()\n    }\n}";
    let (out, _) = ok(file, old, new, false);
    assert_eq!(out, "\t\tif a {\n\t\t\tb()\n\t\t}\n\t}\n");
}
