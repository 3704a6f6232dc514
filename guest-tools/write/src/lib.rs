//! `write`: create a file or replace its whole content, atomically (a temporary file in the
//! same directory, renamed over the target). Writing the content a file already has is refused
//! with `no-change`. The host has checked that an existing file was read and is unchanged since.
//!
//! Error codes: `no-change`, `is-directory`, `bad-input`, and filesystem errors
//! (`permission-denied`, `not-found`, `io`).

use std::path::Path;
use toolgate_editing::{changed_range, fsio, line_count};
use toolgate_guest::{
    json, text, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value,
};

struct Write;

impl Tool for Write {
    fn describe() -> Descriptor {
        Descriptor::new(
            "write",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to create or overwrite."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
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

toolgate_guest::register_tool!(Write);

fn plural(n: usize, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

/// Handle one `write` call.
pub fn run(input: &Value, cx: &Context) -> Result<Output, ToolError> {
    let path_text = input
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::new("bad-input", "`path` must be a string."))?;
    let content = input
        .get("content")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::new("bad-input", "`content` must be a string."))?;
    let path = Path::new(path_text);
    let rel = cx.relative(path);
    // Names in messages as `names` prints them; exact in `data`.
    let shown = toolgate_guest::names::display(&rel);

    let existing = fsio::read_existing(path, &rel)?;
    if existing.as_deref() == Some(content.as_bytes()) {
        return Err(ToolError::new(
            "no-change",
            format!("{shown} already has exactly this content; nothing was written."),
        ));
    }
    fsio::atomic_write(path, content.as_bytes(), &rel)?;

    let bytes = content.len();
    let lines = line_count(content);
    let size = format!("{}, {}", plural(lines, "line"), plural(bytes, "byte"));
    let created = existing.is_none();
    let (summary, mut body) = match &existing {
        None => (
            format!("created {shown} ({size})"),
            format!("Created {shown}: {size}."),
        ),
        Some(old) => {
            let mut body = format!("Overwrote {shown}: {size}");
            match std::str::from_utf8(old) {
                Ok(old_text) => {
                    body.push_str(&format!(
                        " (was {}, {})",
                        plural(line_count(old_text), "line"),
                        plural(old.len(), "byte")
                    ));
                    if let Some((first, last)) = changed_range(old_text, content) {
                        if first == last {
                            body.push_str(&format!("; changed around line {first}"));
                        } else {
                            body.push_str(&format!("; changed lines {first}-{last}"));
                        }
                    }
                    body.push('.');
                    if text::uses_crlf(old_text)
                        && content.contains('\n')
                        && !content.contains("\r\n")
                    {
                        body.push_str(
                            "\nNote: the previous content used CRLF line endings; the new \
                             content uses LF.",
                        );
                    }
                }
                Err(_) => {
                    body.push_str(&format!(" (was {}, not text).", plural(old.len(), "byte")))
                }
            }
            (format!("overwrote {shown} ({size})"), body)
        }
    };
    body.push('\n');
    Ok(Output::new(summary, body).data(json!({
        "path": rel,
        "created": created,
        "bytes": bytes,
        "lines": lines,
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
                std::env::temp_dir().join(format!("toolgate-write-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Temp(dir)
        }
        fn cx(&self) -> Context {
            Context::for_tests(&self.0, 1 << 20, &[])
        }
        fn path(&self, name: &str) -> String {
            self.0.join(name).to_string_lossy().into_owned()
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

    #[test]
    fn creates_then_overwrites_then_refuses_no_op() {
        let t = Temp::new("cycle");
        let p = t.path("a.txt");
        let o = run(&json!({"path": p, "content": "one\ntwo\n"}), &t.cx()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\ntwo\n");
        let dbg = format!("{o:?}");
        assert!(dbg.contains("created a.txt (2 lines, 8 bytes)"), "{dbg}");
        assert!(dbg.contains("\"created\": Bool(true)"), "{dbg}");

        let o = run(&json!({"path": p, "content": "one\n2\nthree"}), &t.cx()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\n2\nthree");
        let dbg = format!("{o:?}");
        assert!(dbg.contains("overwrote a.txt (3 lines, 11 bytes)"), "{dbg}");
        assert!(dbg.contains("was 2 lines, 8 bytes"), "{dbg}");
        assert!(dbg.contains("changed lines 2-3"), "{dbg}");
        assert!(dbg.contains("\"created\": Bool(false)"), "{dbg}");

        let e = run(&json!({"path": p, "content": "one\n2\nthree"}), &t.cx()).unwrap_err();
        assert_eq!(code(&e), "no-change");
        assert_eq!(t.names(), vec!["a.txt".to_string()]);
    }

    #[test]
    fn empty_file_can_be_created() {
        let t = Temp::new("empty");
        let p = t.path("e.txt");
        let o = run(&json!({"path": p, "content": ""}), &t.cx()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "");
        assert!(format!("{o:?}").contains("0 lines, 0 bytes"));
    }

    #[test]
    fn directory_is_refused() {
        let t = Temp::new("dir");
        std::fs::create_dir(t.0.join("d")).unwrap();
        let e = run(&json!({"path": t.path("d"), "content": "x"}), &t.cx()).unwrap_err();
        assert_eq!(code(&e), "is-directory");
    }

    #[test]
    fn crlf_to_lf_is_noted() {
        let t = Temp::new("crlf");
        let p = t.path("w.txt");
        std::fs::write(&p, "a\r\nb\r\n").unwrap();
        let o = run(&json!({"path": p, "content": "a\nb\nc\n"}), &t.cx()).unwrap();
        assert!(format!("{o:?}").contains("CRLF"));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a\nb\nc\n");
    }
}
