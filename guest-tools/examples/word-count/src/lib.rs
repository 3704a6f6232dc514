//! # `word-count`: an example toolgate plugin
//!
//! Counts lines, words and bytes of a file, or of every regular file under a directory, like
//! `wc`. Copy this crate to start your own plugin. A plugin is three things:
//!
//! 1. A type implementing [`Tool`]: `describe` says what the tool is (name, description for
//!    the model, JSON Schema of the input, risk, which input fields are paths) and `call`
//!    handles one call.
//! 2. One `toolgate_guest::register_tool!(YourType)` line, which exports the component's
//!    `toolgate:tool` world.
//! 3. A manifest (`toolgate-plugin.toml`) that says which capabilities the plugin wants. The
//!    host grants at most those, and only what its policy allows.
//!
//! What the host does for you, so the plugin does not have to:
//! - It validates the input against the schema before `call`.
//! - Every input field declared with [`Descriptor::path`] is checked against the workspace
//!   scope and rewritten to the path the plugin sees inside its sandbox (under
//!   [`Context::root`]), so the plugin opens exactly what was checked.
//! - The sandbox holds only what was granted for this call; opening anything else fails.
//!
//! What the plugin should still do itself:
//! - Skip files on the host's deny-list ([`Context::is_denied`]) quietly when it walks
//!   directories, instead of failing on them.
//! - Keep its output under [`Context::max_output_bytes`] and say when it cut something
//!   (`truncated` plus totals of what it saw against what it returned).
//! - Return errors as [`ToolError`]s with a stable code and a message that says what to do.
//!   Never panic on input or file contents.
//! - Print file names through [`toolgate_guest::names`]: whoever made a file chose its name,
//!   and a newline or an escape in it must not reach the model's text as layout.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use toolgate_guest::names::{self, Escaped};
use toolgate_guest::{
    json, Budget, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value,
};

/// Directory names never descended into.
pub const SKIP_DIRS: &[&str] = &[".git", "target", "node_modules"];
/// Bytes of the output budget kept free for the notes and the total line.
const NOTE_RESERVE: usize = 512;

struct WordCount;

impl Tool for WordCount {
    fn describe() -> Descriptor {
        Descriptor::new(
            "word-count",
            "Count lines, words and bytes of a file, or of every file under a directory \
             (skipping .git, target and node_modules), like `wc`. Returns one row per file \
             (paths relative to the workspace root) and a total.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "A file or directory in the workspace, e.g. \"src\" or \".\" for the whole workspace."
                    }
                },
                // Required, because the host checks and rewrites a path field only when it is
                // present: an absent `path` would leave the plugin guessing where to look.
                "required": ["path"],
                "additionalProperties": false
            }),
            // The most dangerous thing this plugin does is read files.
            Risk::ReadOnly,
        )
        // `path` is a path the plugin reads: the host checks and rewrites it before `call`.
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let path = match input.get("path").and_then(Value::as_str) {
            Some(p) if !p.is_empty() => p,
            _ => {
                return Err(ToolError::new(
                    "bad-input",
                    "`path` is required: a file or directory in the workspace",
                ))
            }
        };
        let tally = collect(cx, Path::new(path))?;
        Ok(render(&tally, &cx.relative(Path::new(path)), cx.max_output_bytes()).into_output())
    }
}

toolgate_guest::register_tool!(WordCount);

/// Lines, words and bytes, counted the way `wc` does: a line is a `\n`, a word is a maximal
/// run of bytes that are not ASCII whitespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub lines: u64,
    pub words: u64,
    pub bytes: u64,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

impl Counts {
    /// Count everything `reader` yields, a block at a time (a large file costs no memory).
    pub fn of_reader(mut reader: impl Read) -> std::io::Result<Counts> {
        let mut counts = Counts::default();
        let mut in_word = false;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            counts.bytes += n as u64;
            for &b in &buf[..n] {
                if b == b'\n' {
                    counts.lines += 1;
                }
                if is_space(b) {
                    in_word = false;
                } else if !in_word {
                    in_word = true;
                    counts.words += 1;
                }
            }
        }
        Ok(counts)
    }

    /// Add `other` to these counts.
    pub fn add(&mut self, other: Counts) {
        self.lines += other.lines;
        self.words += other.words;
        self.bytes += other.bytes;
    }
}

/// One counted file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCount {
    /// The path relative to the workspace root.
    pub rel: String,
    pub counts: Counts,
}

/// Everything one call found.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Counted files, in path order.
    pub files: Vec<FileCount>,
    /// Entries skipped because they are on the host's deny-list.
    pub denied: u64,
    /// Entries that could not be read, as `path: error`.
    pub errors: Vec<String>,
}

/// Count `start` (a file, or a directory walked recursively in name order).
pub fn collect(cx: &Context, start: &Path) -> Result<Tally, ToolError> {
    let rel = cx.relative(start);
    let meta = std::fs::metadata(start).map_err(|e| ToolError::io(&rel, &e))?;
    let mut tally = Tally::default();
    if meta.is_dir() {
        walk(cx, start, &mut tally);
    } else {
        count_file(start, rel, &mut tally);
    }
    Ok(tally)
}

fn count_file(path: &Path, rel: String, tally: &mut Tally) {
    match File::open(path).and_then(Counts::of_reader) {
        Ok(counts) => tally.files.push(FileCount { rel, counts }),
        Err(e) => tally.errors.push(format!("{}: {e}", names::display(&rel))),
    }
}

fn walk(cx: &Context, dir: &Path, tally: &mut Tally) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            let rel = cx.relative(dir);
            tally.errors.push(format!("{}: {e}", names::display(&rel)));
            return;
        }
    };
    // read_dir's order is whatever the filesystem gives: sort for stable output.
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let rel = cx.relative(&path);
        // Secrets and the host's own state: skip quietly, but count them.
        if cx.is_denied(&rel) {
            tally.denied += 1;
            continue;
        }
        // symlink_metadata: a symlink is not followed (it could point anywhere).
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            tally.errors.push(format!(
                "{}: cannot read its metadata",
                names::display(&rel)
            ));
            continue;
        };
        if meta.is_dir() {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if !name.is_some_and(|n| SKIP_DIRS.contains(&n.as_str())) {
                walk(cx, &path, tally);
            }
        } else if meta.is_file() {
            count_file(&path, rel, tally);
        }
    }
}

/// A call's result before it becomes an [`Output`], so tests can look at it.
#[derive(Clone, Debug)]
pub struct Report {
    pub summary: String,
    pub content: String,
    pub truncated: bool,
    /// Files counted against files listed in `content`.
    pub files: (u64, u64),
    pub data: Value,
}

impl Report {
    pub fn into_output(self) -> Output {
        Output::new(self.summary, self.content)
            .truncated(self.truncated)
            .total("files", self.files.0, self.files.1)
            .data(self.data)
    }
}

fn row(c: &Counts, label: &str) -> String {
    format!("{:>8} {:>8} {:>10}  {label}", c.lines, c.words, c.bytes)
}

/// A table of `tally` within `max_output_bytes`: a header, one row per file while they fit,
/// a note when rows were left out, and the total over every file.
pub fn render(tally: &Tally, what: &str, max_output_bytes: usize) -> Report {
    let mut total = Counts::default();
    for f in &tally.files {
        total.add(f.counts);
    }
    let mut budget = Budget::new(max_output_bytes.saturating_sub(NOTE_RESERVE).max(1));
    budget.push_line(&format!(
        "{:>8} {:>8} {:>10}  path",
        "lines", "words", "bytes"
    ));
    let mut shown: u64 = 0;
    let mut escaped = Escaped::new();
    for f in &tally.files {
        let name = names::display(&f.rel);
        if !budget.push_line(&row(&f.counts, &name)) {
            break;
        }
        if let std::borrow::Cow::Owned(_) = name {
            escaped.note(&f.rel);
        }
        shown += 1;
    }
    let seen = tally.files.len() as u64;
    let mut content = budget.into_string();
    let truncated = shown < seen;
    if truncated {
        content.push_str(&format!(
            "[truncated: listing {shown} of {seen} files; the total below counts all of them. Count a subdirectory to see its files]\n"
        ));
    }
    content.push_str(&row(&total, &format!("total ({seen} files)")));
    content.push('\n');
    if tally.denied > 0 {
        content.push_str(&format!(
            "[{} entries on the deny-list were skipped]\n",
            tally.denied
        ));
    }
    if !tally.errors.is_empty() {
        content.push_str(&format!(
            "[{} entries could not be read, first: {}]\n",
            tally.errors.len(),
            tally.errors[0]
        ));
    }
    let mut data = json!({
        "files": seen,
        "lines": total.lines,
        "words": total.words,
        "bytes": total.bytes,
        "denied_skipped": tally.denied,
        "errors": tally.errors,
    });
    escaped.add_to(&mut data);
    Report {
        summary: format!(
            "word-count {}: {seen} files, {} lines, {} words, {} bytes",
            names::display(what),
            total.lines,
            total.words,
            total.bytes
        ),
        content,
        truncated,
        files: (seen, shown),
        data,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
