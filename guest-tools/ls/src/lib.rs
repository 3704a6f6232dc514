//! `ls`: a directory's tree, indented two spaces per level, directories with a trailing `/`.
//!
//! The first line is the listed directory (relative to the workspace root, `./` for the root).
//! Entries are in name order, `depth` levels deep (default [`DEFAULT_DEPTH`]; 1 lists only the
//! directory's own entries); a non-empty directory at the depth limit is shown as `name/ …`.
//! `.gitignore`/`.ignore`, the default ignores (.git, node_modules, target, dist, .toolgate),
//! the host's deny-list and the caller's `ignore` globs are skipped. At most [`MAX_ENTRIES`]
//! entries are returned; entries past the cap are still counted (up to [`COUNT_LIMIT`]). A
//! name that is not ordinary is printed quoted (`toolgate_guest::names`; so a name with leading
//! spaces cannot pose as a deeper level) and its workspace-relative path listed exactly in
//! `data.escaped_names`.

use std::path::Path;
use toolgate_guest::names::{self, Escaped};
use toolgate_guest::walk::{self, Options};
use toolgate_guest::{
    json, Budget, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value,
};

/// Levels listed when `depth` is not given.
pub const DEFAULT_DEPTH: u64 = 3;
/// The deepest `depth` accepted.
pub const MAX_DEPTH: u64 = 32;
/// The most entries returned.
pub const MAX_ENTRIES: u64 = 1000;
/// Entries counted before the walk stops and the total becomes "at least".
pub const COUNT_LIMIT: u64 = 100_000;
/// Bytes kept free in the budget for the closing notes.
const NOTE_RESERVE: usize = 512;

struct Ls;

impl Tool for Ls {
    fn describe() -> Descriptor {
        Descriptor::new(
            "ls",
            "List a directory as an indented tree (directories end with `/`), 3 levels deep by \
             default, at most 1000 entries; the output says when it was cut. Skips \
             .gitignore'd files and .git/node_modules/target/dist/.toolgate. Use `glob` to find \
             files by pattern and `read` to read a file. A name that is not plain (`:`, \
             control or invisible characters, a leading quote, blank ends) is shown \
             double-quoted with backslash escapes.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory to list. Default: the workspace root."},
                    "ignore": {"type": "array", "items": {"type": "string"}, "description": "Extra glob patterns to skip, matched against entry names and workspace-relative paths, e.g. [\"*.log\", \"fixtures\"]."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": "How many levels to list: 1 lists only the directory's own entries. Default 3."}
                },
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

toolgate_guest::register_tool!(Ls);

pub use toolgate_guest::Report;

/// The tool's logic, callable outside a component.
pub fn run(input: &Value, cx: &Context) -> Result<Report, ToolError> {
    let base = match input.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => Path::new(p).to_path_buf(),
        _ => cx.root().to_path_buf(),
    };
    let depth = input
        .get("depth")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_DEPTH)
        .clamp(1, MAX_DEPTH) as usize;
    let ignore: Vec<String> = input
        .get("ignore")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let base_rel = cx.relative(&base);
    let meta = std::fs::metadata(&base).map_err(|e| ToolError::io_at(cx, &base, &base_rel, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::new(
            "not-a-directory",
            format!(
                "{} is a file, not a directory; use `read` to read it",
                names::display(&base_rel)
            ),
        ));
    }

    let mut escaped = Escaped::new();
    let header = if base_rel == "." {
        "./".to_string()
    } else {
        format!("{}/", escaped.show(&base_rel))
    };
    let mut budget = Budget::new(cx.max_output_bytes().saturating_sub(NOTE_RESERVE).max(1));
    budget.push_line(&header);
    let options = Options {
        max_depth: Some(depth),
        ignore,
        no_ignore_files: false,
        with_mtime: false,
    };
    let mut seen: u64 = 0;
    let mut returned: u64 = 0;
    let mut dirs: u64 = 0;
    let mut files: u64 = 0;
    let mut unexpanded: u64 = 0;
    let mut emitting = true;
    let mut counting_stopped = false;
    let mut row = String::new();
    let errors = walk::walk(cx, &base, &options, |entry| {
        seen += 1;
        if entry.is_dir {
            dirs += 1;
        } else {
            files += 1;
        }
        if emitting {
            if returned >= MAX_ENTRIES {
                emitting = false;
            } else {
                row.clear();
                for _ in 0..entry.depth {
                    row.push_str("  ");
                }
                // The entry's own name, from its exact workspace-relative path.
                let name = entry.rel.rsplit('/').next().unwrap_or(&entry.rel);
                let shown = names::display(name);
                let quoted = matches!(shown, std::borrow::Cow::Owned(_));
                row.push_str(&shown);
                if entry.is_dir {
                    row.push('/');
                    if entry.depth >= depth && has_entries(&entry.path) {
                        row.push_str(" …");
                        unexpanded += 1;
                    }
                }
                if budget.push_line(&row) {
                    returned += 1;
                    if quoted {
                        escaped.note(&entry.rel);
                    }
                } else {
                    emitting = false;
                }
            }
        }
        if seen >= COUNT_LIMIT {
            counting_stopped = true;
            return false;
        }
        true
    });

    let mut content = budget.into_string();
    let truncated = returned < seen;
    let seen_text = if counting_stopped {
        format!("at least {seen}")
    } else {
        seen.to_string()
    };
    if seen == 0 {
        content.push_str("[empty directory (or everything in it is ignored)]\n");
    }
    if truncated {
        let why = if returned >= MAX_ENTRIES {
            format!("the {MAX_ENTRIES}-entry cap")
        } else {
            "the output size budget".to_string()
        };
        content.push_str(&format!(
            "[truncated: showing {returned} of {seen_text} entries (limited by {why}); list a subdirectory with path, lower depth, or add ignore globs]\n"
        ));
    }
    if unexpanded > 0 {
        content.push_str(&format!(
            "[directories marked … have more entries below depth {depth}; pass a larger depth or list them with path]\n"
        ));
    }
    let shown_base = names::display(&base_rel);
    let summary = if truncated {
        format!("ls {shown_base}: showing {returned} of {seen_text} entries")
    } else {
        format!("ls {shown_base}: {dirs} directories, {files} files")
    };
    let mut data = json!({
            "path": base_rel,
            "depth": depth,
            "entries": seen,
            "entries_returned": returned,
            "entries_exact": !counting_stopped,
            "directories": dirs,
            "files": files,
            "unexpanded_directories": unexpanded,
            "unreadable": errors,
    });
    escaped.add_to(&mut data);
    Ok(Report {
        summary,
        content,
        truncated,
        totals: vec![("entries", seen, returned)],
        data,
    })
}

/// Whether the directory has anything in it (ignore rules are not applied here).
fn has_entries(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut it| it.next().is_some())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
