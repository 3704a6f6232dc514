//! `ls`: a directory's tree, indented two spaces per level, directories with a trailing `/`,
//! a page at a time.
//!
//! The first line is the listed directory (relative to the workspace root, `./` for the root).
//! Entries are in name order, depth first, `depth` levels deep (default [`DEFAULT_DEPTH`]; 1
//! lists only the directory's own entries); a non-empty directory at the depth limit is shown
//! as `name/ …`. `.gitignore`/`.ignore`, the default ignores (.git, node_modules, target,
//! dist, .toolgate), the host's deny-list and the caller's `ignore` globs are skipped. A page
//! is `head_limit` entries (default [`DEFAULT_HEAD_LIMIT`]) after skipping `offset`, each
//! indented as in the whole tree, so pages put together are the whole listing; when more
//! remain, `data.next_offset` is where the next page starts and the closing note says so (a
//! page cut by the output size budget too). Entries past the page are still counted (up to
//! [`COUNT_LIMIT`], or further when the page lies beyond it). A name that is not ordinary is
//! printed quoted (`toolgate_guest::names`; so a name with leading spaces cannot pose as a
//! deeper level) and its workspace-relative path listed exactly in `data.escaped_names`.

use std::path::Path;
use toolgate_guest::names::{self, Escaped};
use toolgate_guest::walk::{self, Options};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

/// Levels listed when `depth` is not given.
pub const DEFAULT_DEPTH: u64 = 3;
/// The deepest `depth` accepted.
pub const MAX_DEPTH: u64 = 32;
/// Entries on a page when `head_limit` is not given.
pub const DEFAULT_HEAD_LIMIT: u64 = 1000;
/// The largest `head_limit` accepted.
pub const MAX_HEAD_LIMIT: u64 = 10_000;
/// Entries counted before the walk stops and the total becomes "at least".
pub const COUNT_LIMIT: u64 = 100_000;
/// Bytes kept free in the budget for the closing notes.
const NOTE_RESERVE: usize = 1024;

struct Ls;

impl Tool for Ls {
    fn describe() -> Descriptor {
        Descriptor::new(
            "ls",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory to list. Default: the workspace root."},
                    "ignore": {"type": "array", "items": {"type": "string"}, "description": "Extra glob patterns to skip, matched against entry names and workspace-relative paths, e.g. [\"*.log\", \"fixtures\"]."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": "How many levels to list: 1 lists only the directory's own entries. Default 3."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Entries to skip before this page (in the listing's order). Default 0. To continue a cut listing, pass the `next_offset` it gave, with the same path, depth and ignore."},
                    "head_limit": {"type": "integer", "minimum": 1, "maximum": MAX_HEAD_LIMIT, "description": "Most entries on this page. Default 1000."}
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

mod page;
use page::{Page, Paging};

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
    let paging = Paging::from_input(input)?;
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
    let max_bytes = cx.max_output_bytes().saturating_sub(NOTE_RESERVE).max(1);
    let mut content = format!("{header}\n");
    let options = Options {
        max_depth: Some(depth),
        ignore,
        no_ignore_files: false,
        with_mtime: false,
        files_matching: None,
    };
    let Paging { offset, limit } = paging;
    // Count far enough to know whether anything lies past the page.
    let count_limit = COUNT_LIMIT.max(offset.saturating_add(limit).saturating_add(1));
    let mut seen: u64 = 0;
    let mut returned: u64 = 0;
    let mut dirs: u64 = 0;
    let mut files: u64 = 0;
    let mut unexpanded: u64 = 0;
    let mut emitting = true;
    let mut cut_by_budget = false;
    let mut counting_stopped = false;
    // The directory holding the page's first entry, when the page starts below the top level.
    let mut first_inside: Option<String> = None;
    let mut row = String::new();
    let errors = walk::walk(cx, &base, &options, |entry| {
        let index = seen;
        seen += 1;
        if entry.is_dir {
            dirs += 1;
        } else {
            files += 1;
        }
        if emitting && index >= offset {
            if returned >= limit {
                emitting = false;
            } else {
                row.clear();
                for _ in 0..entry.depth {
                    row.push_str("  ");
                }
                // The entry's own name, from its exact workspace-relative path.
                let (parent, name) = entry.rel.rsplit_once('/').unwrap_or(("", &entry.rel));
                let shown = names::display(name);
                let quoted = matches!(shown, std::borrow::Cow::Owned(_));
                row.push_str(&shown);
                let marked = entry.is_dir && entry.depth >= depth && has_entries(&entry.path);
                if entry.is_dir {
                    row.push('/');
                    if marked {
                        row.push_str(" …");
                    }
                }
                // A page always moves forward: a first row too long for the budget is shown
                // anyway (the host cuts and saves an output over its limit).
                if returned == 0 || content.len() + row.len() < max_bytes {
                    content.push_str(&row);
                    content.push('\n');
                    returned += 1;
                    if marked {
                        unexpanded += 1;
                    }
                    if quoted {
                        escaped.note(&entry.rel);
                    }
                    if returned == 1 && offset > 0 && entry.depth > 1 {
                        first_inside = Some(parent.to_string());
                    }
                } else {
                    emitting = false;
                    cut_by_budget = true;
                }
            }
        }
        if seen >= count_limit {
            counting_stopped = true;
            return false;
        }
        true
    });

    let page = Page {
        offset,
        returned,
        seen,
        exact: !counting_stopped,
    };
    let next_offset = page.next_offset();
    let truncated = next_offset.is_some();
    if let Some(parent) = first_inside {
        let note = format!(
            "[continued: the first entry here is inside {}/]\n",
            escaped.show(&parent)
        );
        content.insert_str(header.len() + 1, &note);
    }
    let shown_base = names::display(&base_rel);
    content.push_str(&page.note(&shown_base, depth, limit, cut_by_budget));
    if unexpanded > 0 {
        content.push_str(&format!(
            "[directories marked … have more entries below depth {depth}; pass a larger depth or list them with path]\n"
        ));
    }
    let summary = page.summary(&shown_base, dirs, files);
    let mut data = json!({
            "path": base_rel,
            "depth": depth,
            "entries": seen,
            "entries_returned": returned,
            "entries_exact": !counting_stopped,
            "offset": offset,
            "next_offset": next_offset,
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
