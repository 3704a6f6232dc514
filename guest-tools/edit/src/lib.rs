//! `edit`: replace one exact, unique occurrence of `old_string` in a file (or every occurrence
//! with `replace_all`).
//!
//! Without an exact occurrence, `old_string` may still match whole lines with whitespace ignored;
//! then `new_string` is re-indented to the file's indentation and the output says the match was
//! not exact. Without any match the error (`no-match`) shows the closest region of the file with
//! invisible characters made visible. CRLF files stay CRLF, and a trailing newline is kept. An
//! empty `old_string` creates a missing file or fills an empty one. The write is atomic.
//!
//! Error codes: `no-change`, `ambiguous-match`, `no-match`, `empty-old-string`, `not-found`,
//! `is-directory`, `binary-file`, `bad-input`, and filesystem errors (`permission-denied`, `io`).

use std::path::Path;
use toolgate_editing::{fsio, line_count, snippet, Document};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

/// Most bytes of the excerpt in the content.
const SNIPPET_BYTES: usize = 12 * 1024;

struct Edit;

impl Tool for Edit {
    fn describe() -> Descriptor {
        Descriptor::new(
            "edit",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to edit."},
                    "old_string": {
                        "type": "string",
                        "description": "The exact text to replace; empty to create a new file."
                    },
                    "new_string": {
                        "type": "string",
                        "description": "The text to put in its place (must differ from old_string)."
                    },
                    "replace_all": {
                        "type": "boolean",
                        "default": false,
                        "description": "Replace every occurrence of old_string instead of exactly one."
                    }
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
            Risk::Write,
        )
        .path("path", PathAccess::Write)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx)
    }
}

toolgate_guest::register_tool!(Edit);

fn str_field<'a>(input: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::new("bad-input", format!("`{name}` must be a string.")))
}

/// Handle one `edit` call.
pub fn run(input: &Value, cx: &Context) -> Result<Output, ToolError> {
    let path_text = str_field(input, "path")?;
    let old = str_field(input, "old_string")?;
    let new = str_field(input, "new_string")?;
    let replace_all = input
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let path = Path::new(path_text);
    let rel = cx.relative(path);
    // Names in messages as `names` prints them; exact in `data`.
    let shown = toolgate_guest::names::display(&rel);

    if old == new {
        return Err(ToolError::new(
            "no-change",
            "old_string and new_string are identical, so the edit would change nothing. Give the \
             new text in new_string.",
        ));
    }
    let (mut doc, created) = match fsio::read_existing(path, &rel)? {
        Some(bytes) => (Document::new(&fsio::decode_text(bytes, &rel)?), false),
        None if old.is_empty() => (Document::new(""), true),
        None => {
            let hint = toolgate_guest::ioerr::hint(cx, path, &rel);
            return Err(ToolError::new(
                "not-found",
                format!(
                    "{shown} does not exist{hint}. Check the path; to create the file, call edit with an \
                     empty old_string (or use write)."
                ),
            ));
        }
    };
    let applied = doc
        .apply(old, new, replace_all)
        .map_err(|e| e.into_tool_error(&format!("{shown}: ")))?;
    let rendered = doc.render();
    fsio::atomic_write(path, rendered.as_bytes(), &rel)?;

    let lines = line_count(doc.text());
    let budget = SNIPPET_BYTES.min(cx.max_output_bytes() / 2);
    let excerpt = snippet::snippet(doc.text(), applied.first_line, applied.last_line, budget);
    let range = if applied.first_line == applied.last_line {
        format!("line {}", applied.first_line)
    } else {
        format!("lines {}-{}", applied.first_line, applied.last_line)
    };
    let (summary, mut content) = if applied.filled_empty {
        let verb = if created {
            "created"
        } else {
            "filled empty file"
        };
        (
            format!("{verb} {shown} ({lines} lines, {} bytes)", rendered.len()),
            format!(
                "{} {shown} with {lines} lines ({} bytes):\n{excerpt}",
                if created {
                    "Created"
                } else {
                    "Filled the empty file"
                },
                rendered.len()
            ),
        )
    } else {
        let what = if applied.replacements == 1 {
            "1 replacement".to_string()
        } else {
            format!("{} replacements", applied.replacements)
        };
        let how = if applied.exact {
            ""
        } else {
            ", whitespace-normalized match"
        };
        (
            format!("edited {shown}: {what} at {range}{how}"),
            format!("Edited {shown}: {what}; the changed {range} with context:\n{excerpt}"),
        )
    };
    if let Some(note) = &applied.note {
        content.push_str(note);
        content.push('\n');
    }
    Ok(Output::new(summary, content).data(json!({
        "path": rel,
        "replacements": applied.replacements,
        "exact": applied.exact,
        "first_line": applied.first_line,
        "last_line": applied.last_line,
        "created": created,
    })))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Temp(PathBuf);

    impl Temp {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("toolgate-edit-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Temp(dir)
        }
        fn cx(&self) -> Context {
            Context::for_tests(&self.0, 1 << 20, &[])
        }
        fn file(&self, name: &str, text: &str) -> String {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p.to_string_lossy().into_owned()
        }
        fn read(&self, name: &str) -> String {
            std::fs::read_to_string(self.0.join(name)).unwrap()
        }
        fn names(&self) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn call(t: &Temp, path: &str, old: &str, new: &str, all: bool) -> Result<Output, ToolError> {
        run(
            &json!({"path": path, "old_string": old, "new_string": new, "replace_all": all}),
            &t.cx(),
        )
    }

    /// The error's code and its Debug form (fields are private outside the SDK).
    fn wit_err(e: ToolError) -> (String, String, ()) {
        let dbg = format!("{e:?}");
        let start = dbg.find("code: \"").unwrap() + 7;
        let end = dbg[start..].find('"').unwrap() + start;
        (dbg[start..end].to_string(), dbg, ())
    }

    /// Whether the Debug form `dbg` contains `needle` (escaped the way Debug escapes it).
    fn has(dbg: &str, needle: &str) -> bool {
        let esc = format!("{needle:?}");
        dbg.contains(&esc[1..esc.len() - 1])
    }

    fn out_parts(o: &Output) -> String {
        format!("{o:?}")
    }

    #[test]
    fn exact_edit_writes_and_reports() {
        let t = Temp::new("exact");
        let p = t.file("a.rs", "fn a() {\n    1\n}\n");
        let o = call(&t, &p, "    1\n", "    2\n", false).unwrap();
        assert_eq!(t.read("a.rs"), "fn a() {\n    2\n}\n");
        let dbg = out_parts(&o);
        assert!(
            dbg.contains("edited a.rs: 1 replacement at line 2"),
            "{dbg}"
        );
        assert!(has(&dbg, "     2\t    2"), "{dbg}");
        assert!(dbg.contains("\"exact\": Bool(true)"), "{dbg}");
        assert_eq!(t.names(), vec!["a.rs".to_string()]);
    }

    #[test]
    fn ambiguous_is_refused_and_file_untouched() {
        let t = Temp::new("ambig");
        let p = t.file("a.txt", "x\ny\nx\n");
        let (code, message, _) = wit_err(call(&t, &p, "x", "z", false).unwrap_err());
        assert_eq!(code, "ambiguous-match");
        assert!(
            has(&message, "a.txt: old_string matches 2 places"),
            "{message}"
        );
        assert!(has(&message, "lines 1, 3"), "{message}");
        assert_eq!(t.read("a.txt"), "x\ny\nx\n");
    }

    #[test]
    fn replace_all_edits_every_occurrence() {
        let t = Temp::new("all");
        let p = t.file("a.txt", "x\ny\nx\n");
        let o = call(&t, &p, "x", "z", true).unwrap();
        assert_eq!(t.read("a.txt"), "z\ny\nz\n");
        assert!(out_parts(&o).contains("2 replacements at lines 1-3"));
    }

    #[test]
    fn fallback_reindents_and_notes() {
        let t = Temp::new("fallback");
        let p = t.file(
            "a.py",
            "class A:\n        def f(self):\n            return 1\n",
        );
        let o = call(
            &t,
            &p,
            "def f(self):\n  return 1\n",
            "def f(self):\n  return 2\n",
            false,
        )
        .unwrap();
        assert_eq!(
            t.read("a.py"),
            "class A:\n        def f(self):\n            return 2\n"
        );
        let dbg = out_parts(&o);
        assert!(dbg.contains("whitespace-normalized match"), "{dbg}");
        assert!(dbg.contains("did not match the file exactly"), "{dbg}");
    }

    #[test]
    fn no_match_diagnoses() {
        let t = Temp::new("nomatch");
        let p = t.file("a.go", "func main() {\n\tx := 1 \n}\n");
        let (code, message, _) = wit_err(call(&t, &p, "    x := 2", "y", false).unwrap_err());
        assert_eq!(code, "no-match");
        assert!(has(&message, "→x := 1·"), "{message}");
        assert_eq!(t.read("a.go"), "func main() {\n\tx := 1 \n}\n");
    }

    #[test]
    fn crlf_kept() {
        let t = Temp::new("crlf");
        let p = t.file("a.txt", "one\r\ntwo\r\n");
        call(&t, &p, "two\n", "2\nthree\n", false).unwrap();
        assert_eq!(t.read("a.txt"), "one\r\n2\r\nthree\r\n");
    }

    #[test]
    fn identical_is_no_change() {
        let t = Temp::new("same");
        let p = t.file("a.txt", "a\n");
        let (code, _, _) = wit_err(call(&t, &p, "a", "a", false).unwrap_err());
        assert_eq!(code, "no-change");
    }

    #[test]
    fn empty_old_creates_missing_file() {
        let t = Temp::new("create");
        let p = t.0.join("new.txt").to_string_lossy().into_owned();
        let o = call(&t, &p, "", "hello\n", false).unwrap();
        assert_eq!(t.read("new.txt"), "hello\n");
        assert!(out_parts(&o).contains("created new.txt"));
        // Empty old_string on a file with content is refused.
        let (code, _, _) = wit_err(call(&t, &p, "", "again\n", false).unwrap_err());
        assert_eq!(code, "empty-old-string");
        assert_eq!(t.read("new.txt"), "hello\n");
    }

    #[test]
    fn empty_old_fills_empty_file() {
        let t = Temp::new("fill");
        let p = t.file("e.txt", "");
        call(&t, &p, "", "content\n", false).unwrap();
        assert_eq!(t.read("e.txt"), "content\n");
    }

    #[test]
    fn missing_file_with_old_string_is_not_found() {
        let t = Temp::new("missing");
        let p = t.0.join("nope.txt").to_string_lossy().into_owned();
        let (code, message, _) = wit_err(call(&t, &p, "a", "b", false).unwrap_err());
        assert_eq!(code, "not-found");
        assert!(has(&message, "nope.txt does not exist"), "{message}");
        assert!(t.names().is_empty());
    }

    #[test]
    fn binary_file_refused() {
        let t = Temp::new("binary");
        let p = t.0.join("b.bin");
        std::fs::write(&p, b"ab\0cd").unwrap();
        let (code, _, _) = wit_err(call(&t, &p.to_string_lossy(), "ab", "x", false).unwrap_err());
        assert_eq!(code, "binary-file");
    }

    #[test]
    fn trailing_newline_kept() {
        let t = Temp::new("trailing");
        let p = t.file("a.txt", "a\nb\n");
        call(&t, &p, "b\n", "c", false).unwrap();
        assert_eq!(t.read("a.txt"), "a\nc\n");
    }
}
