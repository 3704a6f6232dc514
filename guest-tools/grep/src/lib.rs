//! `grep`: search file contents with a regular expression, like ripgrep.
//!
//! Output modes (`output_mode`): `content` (the default) prints `path:line:text` for matching
//! lines and, with `before`/`after`/`context`, `path-line-text` for context lines, with `--`
//! between groups that are not adjacent (as `rg -n -B/-A/-C` prints them);
//! `files_with_matches` prints one path per file with a match (`rg -l`; a file's search stops
//! at its first match); `count` prints `path:N`, N matching lines (`rg -c`; with `multiline`,
//! the lines a match touches, where `rg -U -c` counts matches). Paths are relative to the
//! workspace root; files are visited in name order. A path that is not an ordinary name is
//! printed quoted (`toolgate_guest::names`: `"a:b\n.txt":3:text`; with context, a name with
//! `-<digits>-` too) and listed exactly in `data.escaped_names`. `.gitignore`, `.ignore`, the
//! default ignores and the host's deny-list are honoured; files with a NUL byte in their first
//! 8 KiB are skipped as binary (and counted), files over 64 MiB are skipped (and counted; the
//! sandbox's memory is limited). A match is a matching *line*: the regex runs in multi-line
//! mode (`^`/`$` at line ends, CRLF-aware) and a match spanning a newline only counts if the
//! regex also matches within the line; with `multiline` (`rg -U`) a match may span lines and
//! every line it touches is a matching line ([`lines`]). `type` selects ripgrep's file types
//! ([`types`]). A single file given as `path` is searched even if `include`, `type` or ignore
//! files would skip it.
//!
//! Paging: a *result* is a matching line (content) or a file (the other modes). The first
//! `offset` results are skipped, at most `head_limit` are printed (default 100, at most 1000;
//! `max_matches` is its old name), and `data.next_offset` is the offset of the first result
//! not printed (null when none is left); the order is the walk's, so pages neither overlap
//! nor skip. The search keeps counting so the total is honest, until it has counted
//! `offset +` [`count_limit`] results (10 × `head_limit`, at least 1000); past that it stops
//! and reports "at least N".
//!
//! Speed: the host walks and reads the files on threads of its own, ahead of the search
//! (`toolgate_guest::files`); a file it leaves to the tool is read here with one `read`. The
//! host also sorts out, on those threads, the binary files, the files that cannot match (grep
//! passes it a string every match must contain, [`required_literal`]; a file without it is
//! counted as searched without being copied in) and, through the one include glob it takes,
//! the files `include` or `type` leave out (with both, the host applies `include` and grep
//! checks the type). The regex runs over each whole file; line boundaries are found with
//! `memchr` only around matches, and nothing is allocated per line.

use regex::bytes::{Regex, RegexBuilder};
use std::path::Path;
use toolgate_guest::files::{self, Contents, Sift};
use toolgate_guest::text;
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

mod lines;
mod literal;
pub mod options;
mod read;
mod report;
mod search;
pub mod types;

pub use literal::required_literal;
use options::Options;
use search::Searcher;

/// Results per page when `head_limit` is not given.
pub const DEFAULT_HEAD_LIMIT: u64 = 100;
/// The largest `head_limit` accepted.
pub const MAX_HEAD_LIMIT: u64 = 1000;
/// The most context lines accepted before and after a match.
pub const MAX_CONTEXT: u64 = 20;
/// Longest line text (in characters) shown whole.
pub const MAX_LINE_CHARS: usize = 500;
/// Larger files are skipped (and reported): the sandbox's memory is limited and a file is read
/// whole.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Bytes kept free in the budget for the closing note.
const NOTE_RESERVE: usize = 512;

/// How many results past the offset are counted before the search stops: 10 × `head_limit`,
/// at least 1000.
pub fn count_limit(head_limit: u64) -> u64 {
    (head_limit.saturating_mul(10)).max(1000)
}

struct Grep;

impl Tool for Grep {
    fn describe() -> Descriptor {
        Descriptor::new(
            "grep",
            include_str!("../description.md").trim_end(),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "description": "Regular expression to search for (Rust regex syntax, like ripgrep), or a plain string with literal=true. Matched against each line (across lines with multiline=true)."},
                    "path": {"type": "string", "description": "File or directory to search. Default: the workspace root."},
                    "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "default": "content", "description": "`content`: matching lines as `path:line:text` (default). `files_with_matches`: one path per file with a match. `count`: `path:N` per file, N matching lines."},
                    "include": {"type": "string", "description": "Only search files whose name matches this glob, e.g. `*.rs` or `*.{ts,tsx}`. A glob containing `/` is matched against the path relative to `path` instead (`*` does not cross `/`, `**` does)."},
                    "type": {"type": "string", "minLength": 1, "description": "Only search files of this ripgrep file type, e.g. `rust`, `py`, `js`, `ts`, `go`, `java`, `c`, `cpp`, `md`, `json`, `yaml`, `make` (the names of `rg --type-list`); several separated by commas. With `include`, a file must match both."},
                    "literal": {"type": "boolean", "default": false, "description": "Treat pattern as a plain string, not a regex."},
                    "ignore_case": {"type": "boolean", "default": false, "description": "Match case-insensitively."},
                    "multiline": {"type": "boolean", "default": false, "description": "Let a match span lines (like `rg -U`): every line a match touches is a matching line. `.` still does not match a newline unless the pattern starts with `(?s)`."},
                    "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "default": 0, "description": "Lines of context before and after each match (content mode), like `rg -C`."},
                    "before": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before each match, like `rg -B`; overrides `context`."},
                    "after": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context after each match, like `rg -A`; overrides `context`."},
                    "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Skip this many results first: matching lines in content mode, files in the other modes. To continue a cut result, pass the `next_offset` it gave."},
                    "head_limit": {"type": "integer", "minimum": 1, "maximum": MAX_HEAD_LIMIT, "default": DEFAULT_HEAD_LIMIT, "description": "Most results to return (default 100, at most 1000). Results past it are still counted."},
                    "max_matches": {"type": "integer", "minimum": 1, "maximum": MAX_HEAD_LIMIT, "description": "Old name of `head_limit`."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx).map(Report::into_output)
    }
}

toolgate_guest::register_tool!(Grep);

pub use toolgate_guest::Report;

/// The regex the options describe.
fn build_regex(opts: &Options) -> Result<Regex, ToolError> {
    let pattern = &opts.pattern;
    let source = if opts.literal {
        regex::escape(pattern)
    } else {
        pattern.to_string()
    };
    RegexBuilder::new(&source)
        .multi_line(true)
        .crlf(true)
        .case_insensitive(opts.ignore_case)
        .build()
        .map_err(|e| {
            ToolError::new(
                "bad-pattern",
                format!("`{pattern}` is not a valid regular expression: {e}\nFix the pattern, or pass literal=true to search for the plain string."),
            )
            .data(json!({"pattern": pattern}))
        })
}

/// The tool's logic, callable outside a component.
pub fn run(input: &Value, cx: &Context) -> Result<Report, ToolError> {
    let opts = Options::parse(input)?;
    let start = match input.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => Path::new(p).to_path_buf(),
        _ => cx.root().to_path_buf(),
    };
    let start_rel = cx.relative(&start);
    let re = build_regex(&opts)?;
    let types = opts.types.as_deref().map(types::select).transpose()?;

    let meta =
        std::fs::metadata(&start).map_err(|e| ToolError::io_at(cx, &start, &start_rel, &e))?;
    let mut s = Searcher::new(&re, &opts, cx.max_output_bytes());
    let mut walk_errors = 0;
    if meta.is_dir() {
        // Case-insensitive matching folds Unicode (`k` matches `\u{212A}`): no needle then.
        let needle = if opts.ignore_case {
            None
        } else if opts.literal {
            Some(opts.pattern.clone())
        } else {
            required_literal(&opts.pattern)
        };
        let sift = Sift {
            binary_prefix: text::BINARY_SNIFF_BYTES,
            needles: needle.map(String::into_bytes).into_iter().collect(),
        };
        // The host takes one filter: `include` when given (the type is then checked here, on
        // the file name), else the type's glob.
        let (host_filter, type_here) = match (&opts.include, &types) {
            (Some(include), t) => (Some(include), t.as_ref().map(|t| &t.include)),
            (None, Some(t)) => (Some(&t.include), None),
            (None, None) => (None, None),
        };
        walk_errors = files::files_sifted(cx, &start, host_filter, MAX_FILE_BYTES, &sift, |file| {
            if type_here.is_some_and(|t| !t.matches(&file.rel)) {
                return true;
            }
            match file.contents {
                Contents::Bytes(buf) => s.bytes(&buf, &file.rel),
                Contents::TooLarge(_) => s.too_large += 1,
                Contents::NotRead => s.file(&file.path, &file.rel),
                Contents::Binary => s.binary_skipped += 1,
                // No match can be in it: searched, nothing found.
                Contents::NoNeedle => s.files_searched += 1,
            }
            !s.stopped
        });
    } else {
        s.file(&start, &start_rel);
    }
    let names = types.map(|t| t.names);
    Ok(s.finish(&report::Asked {
        pattern: &opts.pattern,
        start_rel: &start_rel,
        types: names.as_deref(),
        walk_errors,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests_modes;
