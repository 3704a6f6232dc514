//! Paging: which slice of the tree a call shows, and the notes that say where the next page
//! starts.

use crate::{DEFAULT_HEAD_LIMIT, MAX_HEAD_LIMIT};
use toolgate_guest::{ToolError, Value};

/// The page the caller asked for.
pub(crate) struct Paging {
    /// Entries skipped before the page.
    pub(crate) offset: u64,
    /// Most entries on the page.
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
                        "`offset` must be a whole number of entries to skip (0 or more), not {v}"
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
    /// Entries skipped before it.
    pub(crate) offset: u64,
    /// Entries on it.
    pub(crate) returned: u64,
    /// Entries counted in all.
    pub(crate) seen: u64,
    /// Whether `seen` is every entry (the count did not stop early).
    pub(crate) exact: bool,
}

impl Page {
    /// Where the next page starts, when entries remain past this one.
    pub(crate) fn next_offset(&self) -> Option<u64> {
        let end = self.offset.saturating_add(self.returned);
        (end < self.seen).then_some(end)
    }

    /// The total as text: `at least N` when counting stopped.
    fn total(&self) -> String {
        if self.exact {
            self.seen.to_string()
        } else {
            format!("at least {}", self.seen)
        }
    }

    /// The closing paging note (empty for a first page that shows everything).
    pub(crate) fn note(&self, base: &str, depth: usize, limit: u64, by_budget: bool) -> String {
        let Page {
            offset,
            returned,
            seen,
            exact,
        } = *self;
        let total = self.total();
        if seen == 0 {
            return "[empty directory (or everything in it is ignored)]\n".to_string();
        }
        if offset >= seen {
            return format!(
                "[no entries on this page: offset={offset} is past the end; {base} has {total} entr{} (depth {depth}), so pass an offset below {seen} (offset=0 starts from the top)]\n",
                if seen == 1 { "y" } else { "ies" }
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
                    format!("{returned} of {total} entries")
                } else {
                    format!("entries {}–{last} of {total}", offset + 1)
                };
                let more = if exact {
                    format!("{} more", seen - last)
                } else {
                    format!("at least {} more", seen - last)
                };
                format!(
                    "[truncated: showing {shown} (limited by {why}); {more}; continue with offset={next}, or list a subdirectory with path, lower depth, or add ignore globs]\n"
                )
            }
            None if offset > 0 => format!(
                "[showing entries {}–{seen} of {seen} (from offset={offset}); that is the end, no more entries]\n",
                offset + 1
            ),
            None => String::new(),
        }
    }

    /// The one-line summary.
    pub(crate) fn summary(&self, base: &str, dirs: u64, files: u64) -> String {
        let total = self.total();
        if self.offset >= self.seen && self.seen > 0 {
            format!(
                "ls {base}: no entries past offset {} (of {total})",
                self.offset
            )
        } else if self.offset > 0 {
            format!(
                "ls {base}: entries {}–{} of {total}",
                self.offset + 1,
                self.offset + self.returned
            )
        } else if self.returned < self.seen {
            format!("ls {base}: showing {} of {total} entries", self.returned)
        } else {
            format!("ls {base}: {dirs} directories, {files} files")
        }
    }
}
