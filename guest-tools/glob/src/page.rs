//! Paging: which slice of the newest-first list a call shows, and the notes that say where the
//! next page starts.

use crate::{DEFAULT_HEAD_LIMIT, MAX_HEAD_LIMIT};
use toolgate_guest::{ToolError, Value};

/// The page the caller asked for.
pub(crate) struct Paging {
    /// Matching files skipped before the page.
    pub(crate) offset: u64,
    /// Most paths on the page.
    pub(crate) limit: u64,
}

impl Paging {
    /// `offset` and `head_limit` from the input, with their defaults.
    pub(crate) fn from_input(input: &Value) -> Result<Self, ToolError> {
        let offset = match input.get("offset") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                ToolError::new(
                    "bad-input",
                    format!(
                        "`offset` must be a whole number of files to skip (0 or more), not {v}"
                    ),
                )
            })?,
        };
        let limit = match input.get("head_limit") {
            None | Some(Value::Null) => DEFAULT_HEAD_LIMIT,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=MAX_HEAD_LIMIT).contains(&n) => n,
                _ => {
                    return Err(ToolError::new(
                        "bad-input",
                        format!(
                        "`head_limit` must be a whole number from 1 to {MAX_HEAD_LIMIT}, not {v}"
                    ),
                    ))
                }
            },
        };
        Ok(Paging { offset, limit })
    }
}

/// The page that was shown.
pub(crate) struct Page {
    /// Files skipped before it.
    pub(crate) offset: usize,
    /// Paths on it.
    pub(crate) returned: usize,
    /// All matching files.
    pub(crate) total: usize,
}

impl Page {
    /// Where the next page starts, when files remain past this one.
    pub(crate) fn next_offset(&self) -> Option<usize> {
        let end = self.offset.saturating_add(self.returned);
        (end < self.total).then_some(end)
    }

    /// The closing note (empty for a first page that shows everything).
    pub(crate) fn note(&self, pattern: &str, base: &str, limit: usize, by_budget: bool) -> String {
        let Page {
            offset,
            returned,
            total,
        } = *self;
        if total == 0 {
            return format!("No files match `{pattern}` under {base}\n");
        }
        if offset >= total {
            return format!(
                "[no files on this page: offset={offset} is past the end; `{pattern}` matches {total} file{} under {base}, so pass an offset below {total} (offset=0 starts from the newest)]\n",
                plural(total)
            );
        }
        let last = offset + returned;
        match self.next_offset() {
            Some(next) => {
                let why = if by_budget {
                    "the output size budget".to_string()
                } else {
                    format!("head_limit={limit}")
                };
                let shown = if offset == 0 {
                    format!("the {returned} newest of {total} matching files")
                } else {
                    format!("files {}–{last} of {total} matching, newest first", offset + 1)
                };
                format!(
                    "[truncated: showing {shown} (limited by {why}); {} more; continue with offset={next}, or narrow the pattern or path]\n",
                    total - last
                )
            }
            None if offset > 0 => format!(
                "[showing files {}–{total} of {total} matching (from offset={offset}); that is the end, no more files]\n",
                offset + 1
            ),
            None => String::new(),
        }
    }

    /// The one-line summary.
    pub(crate) fn summary(&self, pattern: &str) -> String {
        let Page {
            offset,
            returned,
            total,
        } = *self;
        if offset >= total && total > 0 {
            format!("glob `{pattern}`: no files past offset {offset} (of {total})")
        } else if offset > 0 {
            format!(
                "glob `{pattern}`: files {}–{} of {total}",
                offset + 1,
                offset + returned
            )
        } else if returned < total {
            format!("glob `{pattern}`: showing {returned} of {total} files")
        } else {
            format!("glob `{pattern}`: {total} file{}", plural(total))
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
