//! `test-hostile`: a tool that misbehaves on purpose, for the host's sandbox and limit tests.
//! Never ship it to users.
//!
//! Modes: `loop` spins forever (fuel/epoch limits), `alloc` allocates up to 4 GiB in 64 MiB
//! steps touching every page (memory limit), `output` returns 64 MiB of content (output
//! limit), `recurse` recurses without bound (stack overflow), `ok` returns `ok`, and `escape`
//! tries to read and write outside what was granted and reports each attempt (the host tests
//! assert that every attempt failed). `probe` runs a list of filesystem operations (`ops`: each
//! `{op, path}`, `op` one of `read`, `list`, `stat` (of a final symlink itself), `stat-follow`,
//! `readlink`, `write`, `mkdir`, `rmdir`, `remove`, `symlink` (with `target`), `link` (a hard
//! link at `path` to `target`), `rename` (with `to`)) and reports each result, for the
//! deny-list tests.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

/// Bytes allocated per step in `alloc`.
const ALLOC_STEP: usize = 64 << 20;
/// Total bytes `alloc` tries to reach.
const ALLOC_TOTAL: u64 = 4 << 30;
/// Bytes of content returned by `output`.
const OUTPUT_BYTES: usize = 64 << 20;

struct Hostile;

impl Tool for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new(
            "test-hostile",
            "Test-only tool that misbehaves on purpose (infinite loop, huge allocation, huge \
             output, unbounded recursion, sandbox escape attempts). Not for real use.",
            json!({
                "type": "object",
                "properties": {
                    "mode": {"type": "string", "enum": ["loop", "alloc", "output", "recurse", "ok", "escape", "probe"]},
                    "path": {"type": "string", "description": "A path to try to read in `escape` mode."},
                    "ops": {
                        "type": "array",
                        "description": "Filesystem operations to try in `probe` mode.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "op": {"type": "string", "enum": ["read", "list", "stat", "stat-follow", "readlink", "write", "mkdir", "rmdir", "remove", "symlink", "link", "rename", "walk", "read-ahead", "read-ahead-twice", "read-ahead-spin"]},
                                "path": {"type": "string"},
                                "target": {"type": "string"},
                                "to": {"type": "string"}
                            },
                            "required": ["op", "path"]
                        }
                    }
                },
                "required": ["mode"],
                "additionalProperties": false
            }),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx)
    }
}

toolgate_guest::register_tool!(Hostile);

/// Handle one call.
pub fn run(input: &Value, cx: &Context) -> Result<Output, ToolError> {
    let mode = input.get("mode").and_then(Value::as_str).unwrap_or("");
    match mode {
        "ok" => Ok(Output::new("ok", "ok")),
        "loop" => spin(),
        "alloc" => alloc(),
        "output" => Ok(Output::new("huge output", "x".repeat(OUTPUT_BYTES))),
        "recurse" => {
            let depth = recurse(black_box(0));
            Ok(Output::new("recursion ended", format!("depth {depth}")))
        }
        "escape" => Ok(escape(input.get("path").and_then(Value::as_str), cx)),
        "probe" => Ok(probe(input)),
        other => Err(ToolError::new(
            "bad-input",
            format!("unknown mode `{other}`"),
        )),
    }
}

fn spin() -> Result<Output, ToolError> {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn alloc() -> Result<Output, ToolError> {
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut total: u64 = 0;
    while total < ALLOC_TOTAL {
        // vec! of a non-zero byte writes every page.
        let chunk = vec![1u8; ALLOC_STEP];
        total += chunk.len() as u64;
        held.push(black_box(chunk));
    }
    let touched: u64 = held.iter().map(|c| u64::from(c[c.len() - 1])).sum();
    Ok(Output::new(
        "allocated",
        format!("allocated {} MiB ({touched} chunks)", total >> 20),
    ))
}

#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    let next = recurse(black_box(depth + 1));
    black_box(frame[(depth % 64) as usize]).wrapping_add(next)
}

fn attempt_read(target: &Path) -> (bool, String) {
    match std::fs::metadata(target) {
        Ok(meta) if meta.is_dir() => match std::fs::read_dir(target) {
            Ok(entries) => (true, format!("listed {} entries", entries.count())),
            Err(e) => (false, e.to_string()),
        },
        Ok(_) => match std::fs::read(target) {
            Ok(bytes) => (true, format!("read {} bytes", bytes.len())),
            Err(e) => (false, e.to_string()),
        },
        Err(e) => (false, e.to_string()),
    }
}

fn attempt_write(target: &Path) -> (bool, String) {
    match std::fs::write(target, b"escape probe") {
        Ok(()) => {
            let _ = std::fs::remove_file(target);
            (true, "wrote the file (removed again)".to_string())
        }
        Err(e) => (false, e.to_string()),
    }
}

fn escape(path: Option<&str>, cx: &Context) -> Output {
    let root = cx.root();
    let mut attempts: Vec<(String, PathBuf, bool)> = vec![
        ("read".into(), PathBuf::from("/etc/passwd"), false),
        ("read".into(), PathBuf::from("/"), false),
        ("read".into(), root.join(".."), false),
        ("read".into(), root.join("../../etc/passwd"), false),
        ("read".into(), PathBuf::from("../etc/passwd"), false),
        ("write".into(), root.join(".toolgate-escape-probe"), true),
        (
            "write".into(),
            PathBuf::from("/tmp/toolgate-escape-probe"),
            true,
        ),
    ];
    if let Some(p) = path {
        attempts.push(("read".into(), PathBuf::from(p), false));
    }
    let mut lines = Vec::new();
    let mut records = Vec::new();
    let mut succeeded = 0;
    for (kind, target, write) in &attempts {
        let (ok, detail) = if *write {
            attempt_write(target)
        } else {
            attempt_read(target)
        };
        if ok {
            succeeded += 1;
        }
        lines.push(format!(
            "{kind} {}: {} ({detail})",
            target.display(),
            if ok { "SUCCEEDED" } else { "failed" }
        ));
        records.push(
            json!({"op": kind, "target": target.display().to_string(), "ok": ok, "detail": detail}),
        );
    }
    Output::new(
        format!(
            "{succeeded} of {} escape attempts succeeded",
            attempts.len()
        ),
        lines.join("\n"),
    )
    .data(json!({"succeeded": succeeded, "attempts": records}))
}

/// Run each operation of `ops` and report `{op, path, ok, detail, entries?}` for each.
fn probe(input: &Value) -> Output {
    let ops = input
        .get("ops")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut records = Vec::new();
    let mut lines = Vec::new();
    for op in &ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let arg = |key: &str| {
            op.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let mut entries: Option<Vec<String>> = None;
        let result: std::io::Result<String> = match kind {
            "read" => std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()),
            "list" => std::fs::read_dir(path).and_then(|rd| {
                let mut names = Vec::new();
                for entry in rd {
                    names.push(entry?.file_name().to_string_lossy().into_owned());
                }
                names.sort();
                let detail = names.join(",");
                entries = Some(names);
                Ok(detail)
            }),
            "stat" => std::fs::symlink_metadata(path).map(|m| format!("{} bytes", m.len())),
            "stat-follow" => std::fs::metadata(path).map(|m| format!("{} bytes", m.len())),
            "readlink" => std::fs::read_link(path).map(|t| t.display().to_string()),
            "write" => std::fs::write(path, b"probe").map(|()| "written".to_string()),
            "mkdir" => std::fs::create_dir(path).map(|()| "created".to_string()),
            "rmdir" => std::fs::remove_dir(path).map(|()| "removed".to_string()),
            "link" => std::fs::hard_link(arg("target"), path).map(|()| "linked".to_string()),
            "remove" => std::fs::remove_file(path).map(|()| "removed".to_string()),
            "symlink" => symlink(&arg("target"), path).map(|()| "linked".to_string()),
            "rename" => std::fs::rename(path, arg("to")).map(|()| "renamed".to_string()),
            "walk" => host_walk(path, op.get("target").and_then(Value::as_str)).map(|names| {
                let detail = names.join(",");
                entries = Some(names);
                detail
            }),
            "read-ahead" => read_ahead(path, &arg("target")).map(|names| {
                let detail = names.join(",");
                entries = Some(names);
                detail
            }),
            "read-ahead-twice" => read_ahead_twice(path),
            "read-ahead-spin" => read_ahead_spin(path),
            other => Err(std::io::Error::other(format!("unknown op `{other}`"))),
        };
        let (ok, detail) = match result {
            Ok(d) => (true, d),
            Err(e) => (false, e.to_string()),
        };
        lines.push(format!(
            "{kind} {path}: {} ({detail})",
            if ok { "ok" } else { "failed" }
        ));
        let mut record = json!({"op": kind, "path": path, "ok": ok, "detail": detail});
        if let Some(names) = entries {
            record["entries"] = json!(names);
        }
        records.push(record);
    }
    Output::new(format!("{} operations", ops.len()), lines.join("\n"))
        .data(json!({"results": records}))
}

/// Ask the host's walk capability (`toolgate:fs/walk`) directly for everything below `path`
/// (only the files matching `files`, when given), with no checks on the guest side: entry
/// paths relative to `path`, directories with a trailing `/`.
#[cfg(target_os = "wasi")]
fn host_walk(path: &str, files: Option<&str>) -> std::io::Result<Vec<String>> {
    use toolgate_guest::walk::__wit::toolgate::fs::walk as w;
    let options = w::Options {
        max_depth: None,
        ignore: Vec::new(),
        no_ignore_files: false,
        with_mtime: false,
        files_matching: files.map(str::to_string),
        resume: None,
    };
    let listing = w::list_entries(path, &options).map_err(std::io::Error::other)?;
    Ok(listing
        .entries
        .into_iter()
        .map(|e| {
            if e.is_dir {
                format!("{}/", e.path)
            } else {
                e.path
            }
        })
        .collect())
}

/// Ask the host's read-ahead (`toolgate:search/read-ahead`) directly for every file below
/// `path` (with `include` when not empty), with no checks on the guest side: one entry per
/// file, `path=bytes:TEXT`, `path=too-large:N` or `path=not-read`.
#[cfg(target_os = "wasi")]
fn read_ahead(path: &str, include: &str) -> std::io::Result<Vec<String>> {
    use toolgate_guest::files::__wit::toolgate::search::read_ahead as ra;
    let options = ra::Options {
        include_glob: (!include.is_empty()).then(|| include.to_string()),
        max_file_bytes: 64,
    };
    let reader = ra::open(path, &options).map_err(std::io::Error::other)?;
    let mut names = Vec::new();
    loop {
        let batch = reader.next();
        for file in batch.files {
            names.push(match file.contents {
                ra::Contents::Bytes(b) => {
                    format!("{}=bytes:{}", file.path, String::from_utf8_lossy(&b))
                }
                ra::Contents::TooLarge(n) => format!("{}=too-large:{n}", file.path),
                ra::Contents::NotRead => format!("{}=not-read", file.path),
            });
        }
        if batch.done {
            return Ok(names);
        }
    }
}

/// Open a second reader while the first is open (refused), then one after dropping it.
#[cfg(target_os = "wasi")]
fn read_ahead_twice(path: &str) -> std::io::Result<String> {
    use toolgate_guest::files::__wit::toolgate::search::read_ahead as ra;
    let options = ra::Options {
        include_glob: None,
        max_file_bytes: 64,
    };
    let first = ra::open(path, &options).map_err(std::io::Error::other)?;
    let second = match ra::open(path, &options) {
        Ok(_) => "second: opened".to_string(),
        Err(e) => format!("second: refused: {e}"),
    };
    drop(first);
    let third = match ra::open(path, &options) {
        Ok(_) => "after drop: opened".to_string(),
        Err(e) => format!("after drop: refused: {e}"),
    };
    Ok(format!("{second}; {third}"))
}

/// Open a reader, take one batch and then never return (the deadline must end the call).
#[cfg(target_os = "wasi")]
fn read_ahead_spin(path: &str) -> std::io::Result<String> {
    use toolgate_guest::files::__wit::toolgate::search::read_ahead as ra;
    let options = ra::Options {
        include_glob: None,
        max_file_bytes: 1 << 20,
    };
    let reader = ra::open(path, &options).map_err(std::io::Error::other)?;
    let _ = reader.next();
    spin()
        .map(|_| "spun".to_string())
        .map_err(|_| std::io::Error::other("spun"))
}

#[cfg(not(target_os = "wasi"))]
fn read_ahead(_path: &str, _include: &str) -> std::io::Result<Vec<String>> {
    Err(std::io::Error::other(
        "no host read-ahead outside a component",
    ))
}

#[cfg(not(target_os = "wasi"))]
fn read_ahead_twice(_path: &str) -> std::io::Result<String> {
    Err(std::io::Error::other(
        "no host read-ahead outside a component",
    ))
}

#[cfg(not(target_os = "wasi"))]
fn read_ahead_spin(_path: &str) -> std::io::Result<String> {
    Err(std::io::Error::other(
        "no host read-ahead outside a component",
    ))
}

#[cfg(not(target_os = "wasi"))]
fn host_walk(_path: &str, _files: Option<&str>) -> std::io::Result<Vec<String>> {
    Err(std::io::Error::other(
        "the host walk exists only inside a component",
    ))
}

/// `symlink(2)` from wasi-libc (std's WASI symlink is unstable).
#[cfg(target_os = "wasi")]
fn symlink(target: &str, link: &str) -> std::io::Result<()> {
    use std::ffi::{c_char, c_int, CString};
    extern "C" {
        fn symlink(target: *const c_char, link: *const c_char) -> c_int;
    }
    let target = CString::new(target).map_err(std::io::Error::other)?;
    let link = CString::new(link).map_err(std::io::Error::other)?;
    // SAFETY: both arguments are valid NUL-terminated strings that outlive the call.
    if unsafe { symlink(target.as_ptr(), link.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(unix)]
fn symlink(target: &str, link: &str) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn ok_mode() {
        let cx = Context::for_tests("/nonexistent-root", 1024, &[]);
        let o = run(&json!({"mode": "ok"}), &cx).unwrap();
        assert!(format!("{o:?}").contains("content: \"ok\""));
    }

    #[test]
    fn unknown_mode_is_bad_input() {
        let cx = Context::for_tests("/nonexistent-root", 1024, &[]);
        assert!(run(&json!({"mode": "nope"}), &cx).is_err());
    }

    #[test]
    fn escape_reports_each_attempt() {
        let cx = Context::for_tests("/nonexistent-root", 1024, &[]);
        let o = run(
            &json!({"mode": "escape", "path": "/nonexistent-root/x"}),
            &cx,
        )
        .unwrap();
        let dbg = format!("{o:?}");
        assert!(dbg.contains("read /etc/passwd"), "{dbg}");
        assert!(dbg.contains("read /nonexistent-root/x: failed"), "{dbg}");
    }
}
