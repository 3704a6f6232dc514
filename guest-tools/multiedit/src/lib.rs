//! `multiedit`: several `edit`s to one file, applied in order to the text in memory (each edit
//! sees the result of the ones before it) and written once, atomically. If any edit fails,
//! nothing is written and the error names the failing edit's 0-based index.
//!
//! Each edit follows `edit`'s rules (exact unique match, whitespace-normalized fallback with
//! re-indentation, `replace_all`, CRLF kept). The first edit may have an empty `old_string` to
//! create a missing file (or fill an empty one).
//!
//! Error codes: those of `edit` (the failing edit's code), plus `no-change` when the edits
//! together leave the file as it was.

use std::path::Path;
use toolgate_editing::{changed_range, fsio, line_count, snippet, Applied, Document};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

/// Most bytes of the excerpt in the content.
const SNIPPET_BYTES: usize = 12 * 1024;

struct MultiEdit;

impl Tool for MultiEdit {
    fn describe() -> Descriptor {
        Descriptor::new(
            "multiedit",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to edit."},
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "description": "Edits applied in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "old_string": {
                                    "type": "string",
                                    "description": "The exact text to replace; empty only in the first edit, to create the file."
                                },
                                "new_string": {"type": "string", "description": "The text to put in its place."},
                                "replace_all": {
                                    "type": "boolean",
                                    "default": false,
                                    "description": "Replace every occurrence instead of exactly one."
                                }
                            },
                            "required": ["old_string", "new_string"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "edits"],
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

toolgate_guest::register_tool!(MultiEdit);

struct EditInput<'a> {
    old: &'a str,
    new: &'a str,
    replace_all: bool,
}

fn parse_edits(input: &Value) -> Result<Vec<EditInput<'_>>, ToolError> {
    let edits = input
        .get("edits")
        .and_then(Value::as_array)
        .ok_or_else(|| ToolError::new("bad-input", "`edits` must be an array of edits."))?;
    if edits.is_empty() {
        return Err(ToolError::new(
            "bad-input",
            "`edits` is empty; give at least one edit.",
        ));
    }
    edits
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let field = |name: &str| {
                e.get(name).and_then(Value::as_str).ok_or_else(|| {
                    ToolError::new("bad-input", format!("edits[{i}].{name} must be a string."))
                        .data(json!({"failed_edit": i}))
                })
            };
            Ok(EditInput {
                old: field("old_string")?,
                new: field("new_string")?,
                replace_all: e
                    .get("replace_all")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect()
}

fn lines_text(first: usize, last: usize) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

/// Handle one `multiedit` call.
pub fn run(input: &Value, cx: &Context) -> Result<Output, ToolError> {
    let path_text = input
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::new("bad-input", "`path` must be a string."))?;
    let edits = parse_edits(input)?;
    let path = Path::new(path_text);
    let rel = cx.relative(path);
    // Names in messages as `names` prints them; exact in `data`.
    let shown = toolgate_guest::names::display(&rel);
    let total = edits.len();

    let (mut doc, created) = match fsio::read_existing(path, &rel)? {
        Some(bytes) => (Document::new(&fsio::decode_text(bytes, &rel)?), false),
        None if edits[0].old.is_empty() => (Document::new(""), true),
        None => {
            let hint = toolgate_guest::ioerr::hint(cx, path, &rel);
            return Err(ToolError::new(
                "not-found",
                format!(
                    "{shown} does not exist{hint}. Check the path; to create the file, give the first \
                     edit an empty old_string (or use write)."
                ),
            ));
        }
    };
    let original_text = doc.text().to_string();
    let original = doc.render();

    let mut results: Vec<Applied> = Vec::with_capacity(total);
    for (i, edit) in edits.iter().enumerate() {
        match doc.apply(edit.old, edit.new, edit.replace_all) {
            Ok(applied) => results.push(applied),
            Err(e) => {
                let mut data = e.data.clone();
                match data.as_object_mut() {
                    Some(map) => {
                        map.insert("failed_edit".to_string(), json!(i));
                    }
                    None => data = json!({"failed_edit": i}),
                }
                let earlier = if i == 0 {
                    String::new()
                } else {
                    format!(
                        " (edit {i} is matched against the text after edits 0-{} were applied)",
                        i - 1
                    )
                };
                let message = format!(
                    "{shown}: edit {i} of {total} failed{earlier}: {} No edits were applied; the \
                     file is unchanged. Fix edit {i} and send all the edits again.",
                    e.message.trim_end()
                );
                return Err(ToolError::new(e.code, message).data(data));
            }
        }
    }

    let rendered = doc.render();
    if rendered == original && !created {
        return Err(ToolError::new(
            "no-change",
            format!("{shown}: the edits together leave the file unchanged. Nothing was written."),
        ));
    }
    fsio::atomic_write(path, rendered.as_bytes(), &rel)?;

    let lines = line_count(doc.text());
    let (first, last) = if created || original_text.is_empty() {
        (1, lines.max(1))
    } else {
        changed_range(&original_text, doc.text()).unwrap_or((1, 1))
    };
    let replacements: usize = results.iter().map(|a| a.replacements).sum();
    let exact = results.iter().all(|a| a.exact);
    let budget = SNIPPET_BYTES.min(cx.max_output_bytes() / 2);
    let excerpt = snippet::snippet(doc.text(), first, last, budget);

    let verb = if created { "created" } else { "edited" };
    let how = if exact {
        ""
    } else {
        ", some whitespace-normalized"
    };
    let summary = format!(
        "{verb} {shown}: {total} edit(s), {replacements} replacement(s), changed {}{how}",
        lines_text(first, last)
    );
    let mut content = format!(
        "{} {shown} with {total} edit(s) ({replacements} replacement(s)); line numbers of each \
         edit are as of that edit:\n",
        if created { "Created" } else { "Edited" }
    );
    for (i, a) in results.iter().enumerate() {
        content.push_str(&format!(
            "  edit {i}: {} replacement(s) at {}{}\n",
            a.replacements,
            lines_text(a.first_line, a.last_line),
            if a.exact {
                ""
            } else {
                " (whitespace-normalized match)"
            }
        ));
    }
    content.push_str(&format!(
        "The changed {} with context:\n{excerpt}",
        lines_text(first, last)
    ));
    for (i, a) in results.iter().enumerate() {
        if let Some(note) = &a.note {
            content.push_str(&format!("Edit {i}: {note}\n"));
        }
    }
    let per_edit: Vec<Value> = results
        .iter()
        .map(|a| {
            json!({
                "replacements": a.replacements,
                "exact": a.exact,
                "first_line": a.first_line,
                "last_line": a.last_line,
            })
        })
        .collect();
    Ok(Output::new(summary, content).data(json!({
        "path": rel,
        "edits": total,
        "replacements": replacements,
        "exact": exact,
        "first_line": first,
        "last_line": last,
        "created": created,
        "results": per_edit,
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
            let dir = std::env::temp_dir()
                .join(format!("toolgate-multiedit-{name}-{}", std::process::id()));
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
        fn path(&self, name: &str) -> String {
            self.0.join(name).to_string_lossy().into_owned()
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

    fn code(e: &ToolError) -> String {
        let dbg = format!("{e:?}");
        let start = dbg.find("code: \"").unwrap() + 7;
        let end = dbg[start..].find('"').unwrap() + start;
        dbg[start..end].to_string()
    }

    fn has(dbg: &str, needle: &str) -> bool {
        let esc = format!("{needle:?}");
        dbg.contains(&esc[1..esc.len() - 1])
    }

    fn edits(path: &str, list: &[(&str, &str, bool)]) -> Value {
        let list: Vec<Value> = list
            .iter()
            .map(|(o, n, a)| json!({"old_string": o, "new_string": n, "replace_all": a}))
            .collect();
        json!({"path": path, "edits": list})
    }

    #[test]
    fn applies_in_order_and_writes_once() {
        let t = Temp::new("order");
        let p = t.file("a.txt", "alpha\nbeta\ngamma\n");
        let o = run(
            &edits(
                &p,
                &[
                    ("alpha", "ALPHA", false),
                    ("ALPHA\nbeta", "A\nB", false),
                    ("gamma", "G", false),
                ],
            ),
            &t.cx(),
        )
        .unwrap();
        assert_eq!(t.read("a.txt"), "A\nB\nG\n");
        let dbg = format!("{o:?}");
        assert!(
            has(
                &dbg,
                "edited a.txt: 3 edit(s), 3 replacement(s), changed lines 1-3"
            ),
            "{dbg}"
        );
        assert_eq!(t.names(), vec!["a.txt".to_string()]);
    }

    #[test]
    fn failure_writes_nothing_and_names_index() {
        let t = Temp::new("fail");
        let p = t.file("a.txt", "one\ntwo\ntwo\n");
        let e = run(
            &edits(&p, &[("one", "1", false), ("two", "2", false)]),
            &t.cx(),
        )
        .unwrap_err();
        assert_eq!(code(&e), "ambiguous-match");
        let dbg = format!("{e:?}");
        assert!(has(&dbg, "a.txt: edit 1 of 2 failed"), "{dbg}");
        assert!(has(&dbg, "No edits were applied"), "{dbg}");
        assert!(dbg.contains("\"failed_edit\": Number(1)"), "{dbg}");
        assert_eq!(t.read("a.txt"), "one\ntwo\ntwo\n");

        let e = run(
            &edits(&p, &[("one", "1", false), ("missing", "x", false)]),
            &t.cx(),
        )
        .unwrap_err();
        assert_eq!(code(&e), "no-match");
        assert_eq!(t.read("a.txt"), "one\ntwo\ntwo\n");
        assert_eq!(t.names(), vec!["a.txt".to_string()]);
    }

    #[test]
    fn later_edit_sees_earlier_result() {
        let t = Temp::new("sees");
        let p = t.file("a.txt", "x = 1\n");
        // The second edit only matches after the first.
        run(
            &edits(&p, &[("x = 1", "x = 2", false), ("x = 2", "x = 3", false)]),
            &t.cx(),
        )
        .unwrap();
        assert_eq!(t.read("a.txt"), "x = 3\n");
        // The old text is gone after the first edit.
        let e = run(
            &edits(&p, &[("x = 3", "y", false), ("x = 3", "z", false)]),
            &t.cx(),
        )
        .unwrap_err();
        assert_eq!(code(&e), "no-match");
        assert_eq!(t.read("a.txt"), "x = 3\n");
    }

    #[test]
    fn creates_new_file() {
        let t = Temp::new("create");
        let p = t.path("new.rs");
        let o = run(
            &edits(
                &p,
                &[
                    ("", "fn a() {}\nfn b() {}\n", false),
                    ("fn b() {}", "fn b() { 1 }", false),
                ],
            ),
            &t.cx(),
        )
        .unwrap();
        assert_eq!(t.read("new.rs"), "fn a() {}\nfn b() { 1 }\n");
        assert!(format!("{o:?}").contains("created new.rs"));
    }

    #[test]
    fn missing_file_needs_empty_first_old() {
        let t = Temp::new("missing");
        let p = t.path("nope.rs");
        let e = run(&edits(&p, &[("a", "b", false)]), &t.cx()).unwrap_err();
        assert_eq!(code(&e), "not-found");
        assert!(t.names().is_empty());
    }

    #[test]
    fn empty_old_later_is_refused() {
        let t = Temp::new("emptylater");
        let p = t.file("a.txt", "a\n");
        let e = run(&edits(&p, &[("a", "b", false), ("", "c", false)]), &t.cx()).unwrap_err();
        assert_eq!(code(&e), "empty-old-string");
        assert!(has(&format!("{e:?}"), "edit 1 of 2 failed"));
        assert_eq!(t.read("a.txt"), "a\n");
    }

    #[test]
    fn crlf_and_fallback_and_replace_all() {
        let t = Temp::new("mixed");
        let p = t.file("a.txt", "if a {\r\n\tcall(1)\r\n\tcall(1)\r\n}\r\n");
        let o = run(
            &edits(
                &p,
                &[
                    ("call(1)", "call(2)", true),
                    ("  call(2)\n  call(2)\n", "  call(3)\n", false),
                ],
            ),
            &t.cx(),
        )
        .unwrap();
        assert_eq!(t.read("a.txt"), "if a {\r\n\tcall(3)\r\n}\r\n");
        let dbg = format!("{o:?}");
        assert!(has(&dbg, "some whitespace-normalized"), "{dbg}");
        assert!(has(&dbg, "Edit 1: Note: old_string did not match"), "{dbg}");
    }

    #[test]
    fn edits_that_cancel_out_are_no_change() {
        let t = Temp::new("cancel");
        let p = t.file("a.txt", "a\n");
        let e = run(&edits(&p, &[("a", "b", false), ("b", "a", false)]), &t.cx()).unwrap_err();
        assert_eq!(code(&e), "no-change");
    }

    #[test]
    fn identical_pair_is_no_change_with_index() {
        let t = Temp::new("same");
        let p = t.file("a.txt", "a\nb\n");
        let e = run(&edits(&p, &[("a", "c", false), ("b", "b", false)]), &t.cx()).unwrap_err();
        assert_eq!(code(&e), "no-change");
        assert!(has(&format!("{e:?}"), "edit 1 of 2 failed"));
        assert_eq!(t.read("a.txt"), "a\nb\n");
    }
}
