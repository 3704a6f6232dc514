//! `glob`: files whose path matches a glob pattern, newest first, a page at a time.
//!
//! The pattern is matched against each file's path relative to `path` (default: the workspace
//! root), with `/` as separator: `*` and `?` do not cross `/`, `**` matches any number of
//! directories, `{a,b}` and `[ab]` work. A pattern without `/` (like `*.rs`) matches file
//! names at any depth, as if it were `**/*.rs`. Only files are returned, as paths relative to
//! the workspace root, one per line, sorted by modification time (newest first, ties by path),
//! so the order is the same from call to call while the files stay put. A page is `head_limit`
//! paths (default [`DEFAULT_HEAD_LIMIT`]) after skipping `offset`; when more remain,
//! `data.next_offset` is where the next page starts and the closing note says so (a page cut
//! by the output size budget too). `.gitignore`/`.ignore`, the default ignores and the host's
//! deny-list are honoured. A path that is not an ordinary name is printed quoted
//! (`toolgate_guest::names`) and listed exactly in `data.escaped_names`.

use std::path::Path;
use std::time::SystemTime;
use toolgate_guest::names::{self, Escaped};
use toolgate_guest::walk::{self, Options};
use toolgate_guest::{
    json, Budget, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value,
};

/// Paths on a page when `head_limit` is not given.
pub const DEFAULT_HEAD_LIMIT: u64 = 100;
/// The largest `head_limit` accepted.
pub const MAX_HEAD_LIMIT: u64 = 10_000;
/// Bytes kept free in the budget for the closing note.
const NOTE_RESERVE: usize = 256;

struct Glob;

impl Tool for Glob {
    fn describe() -> Descriptor {
        Descriptor::new(
            "glob",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "Glob matched against paths relative to `path`, e.g. `**/*.rs` or `src/*.ts`. Without `/` it matches file names at any depth."},
                    "path": {"type": "string", "description": "Directory to search in. Default: the workspace root."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Matching files to skip before this page (in the newest-first order). Default 0. To continue a cut listing, pass the `next_offset` it gave."},
                    "head_limit": {"type": "integer", "minimum": 1, "maximum": MAX_HEAD_LIMIT, "description": "Most paths on this page. Default 100."}
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

toolgate_guest::register_tool!(Glob);

pub use toolgate_guest::Report;

mod page;
use page::{Page, Paging};

/// Split a pattern into the literal directory prefix (no glob characters) the walk can start
/// from, and the rest.
fn literal_prefix(pattern: &str) -> (&str, &str) {
    let mut end = 0;
    for (i, c) in pattern.char_indices() {
        match c {
            '*' | '?' | '[' | '{' | '\\' => break,
            '/' => end = i + 1,
            _ => {}
        }
    }
    // The last component is always the file part, even when it has no glob characters.
    (&pattern[..end], &pattern[end..])
}

/// The tool's logic, callable outside a component.
pub fn run(input: &Value, cx: &Context) -> Result<Report, ToolError> {
    let pattern = match input.get("pattern").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => p,
        _ => {
            return Err(ToolError::new(
                "bad-input",
                "`pattern` is required, e.g. `**/*.rs`",
            ))
        }
    };
    let paging = Paging::from_input(input)?;
    let base = match input.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => Path::new(p).to_path_buf(),
        _ => cx.root().to_path_buf(),
    };
    let base_rel = cx.relative(&base);
    let meta = std::fs::metadata(&base).map_err(|e| ToolError::io_at(cx, &base, &base_rel, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::new(
            "not-a-directory",
            format!(
                "{} is a file, not a directory; `path` is the directory to search in",
                names::display(&base_rel)
            ),
        ));
    }

    // Normalise: `./x` and `/x` are relative to `path`; a pattern without `/` matches names.
    let mut norm = pattern.trim_start_matches("./").trim_start_matches('/');
    while let Some(rest) = norm.strip_prefix("./") {
        norm = rest;
    }
    if norm.split('/').any(|c| c == "..") {
        return Err(ToolError::new(
            "bad-pattern",
            format!("`{pattern}` contains `..`; patterns are relative to `path`: set `path` to the directory to search instead"),
        ));
    }
    let full = if norm.contains('/') {
        norm.to_string()
    } else {
        format!("**/{norm}")
    };
    // Checked here, so a bad pattern is refused by name; the walk matches it.
    walk::files_matching(&full).map_err(|e| {
        ToolError::new(
            "bad-pattern",
            format!("`{pattern}` is not a valid glob: {e}"),
        )
        .data(json!({"pattern": pattern}))
    })?;

    // Start the walk at the pattern's literal directory prefix (`src/` in `src/**/*.rs`).
    // The prefix ends at a `/`, so the rest of the pattern, matched below the start, picks
    // the same files as the whole pattern below `path`.
    let (prefix, rest) = literal_prefix(&full);
    let start = base.join(prefix.trim_end_matches('/'));
    let mut found: Vec<(SystemTime, String)> = Vec::new();
    let mut errors = 0;
    if prefix.is_empty() || start.is_dir() {
        // The walk returns (and the host times) only the matching files.
        let options = Options {
            with_mtime: true,
            files_matching: Some(rest.to_string()),
            ..Options::default()
        };
        errors = walk::walk(cx, &start, &options, |entry| {
            // The host's walk brings the time along; otherwise stat the file here.
            let mtime = entry.mtime.unwrap_or_else(|| {
                std::fs::symlink_metadata(&entry.path)
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            });
            found.push((mtime, entry.rel));
            true
        });
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));

    let total = found.len();
    let offset = usize::try_from(paging.offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(paging.limit).unwrap_or(usize::MAX);
    let mut budget = Budget::new(cx.max_output_bytes().saturating_sub(NOTE_RESERVE).max(1));
    let mut returned = 0;
    let mut cut_by_budget = false;
    let mut escaped = Escaped::new();
    for (_, rel) in found.iter().skip(offset).take(limit) {
        let shown = names::display(rel);
        if !budget.push_line(&shown) {
            cut_by_budget = true;
            break;
        }
        if let std::borrow::Cow::Owned(_) = shown {
            escaped.note(rel);
        }
        returned += 1;
    }
    let mut content = budget.into_string();
    // A page always moves forward: a path too long for the budget is shown on its own (the
    // host cuts and saves an output over its limit), never an empty page that points at itself.
    if returned == 0 && cut_by_budget {
        if let Some((_, rel)) = found.get(offset) {
            let shown = names::display(rel);
            content.push_str(&shown);
            content.push('\n');
            if let std::borrow::Cow::Owned(_) = shown {
                escaped.note(rel);
            }
            returned = 1;
            cut_by_budget = false;
        }
    }
    let page = Page {
        offset,
        returned,
        total,
    };
    // The start path is named only in the notes for an empty page.
    let shown_base = if offset >= total {
        escaped.show(&base_rel).into_owned()
    } else {
        String::new()
    };
    let next_offset = page.next_offset();
    let truncated = next_offset.is_some();
    content.push_str(&page.note(pattern, &shown_base, limit, cut_by_budget));
    let summary = page.summary(pattern);
    let mut data = json!({
        "pattern": pattern,
        "path": base_rel,
        "files": total,
        "files_returned": returned,
        "offset": offset,
        "next_offset": next_offset,
        "unreadable": errors,
    });
    escaped.add_to(&mut data);
    Ok(Report {
        summary,
        content,
        truncated,
        totals: vec![("files", total as u64, returned as u64)],
        data,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
