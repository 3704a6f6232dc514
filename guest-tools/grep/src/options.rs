//! The call's input, read once and checked.

use crate::{DEFAULT_HEAD_LIMIT, MAX_CONTEXT, MAX_HEAD_LIMIT};
use toolgate_guest::files::Include;
use toolgate_guest::{ToolError, Value};

/// What the call prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Matching lines, `path:line:text` (the default).
    Content,
    /// One path per file with a match.
    FilesWithMatches,
    /// `path:N` per file with a match, N matching lines.
    Count,
}

impl Mode {
    /// The name the input uses.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Content => "content",
            Mode::FilesWithMatches => "files_with_matches",
            Mode::Count => "count",
        }
    }
}

/// The options of one call.
#[derive(Debug)]
pub struct Options {
    pub pattern: String,
    pub literal: bool,
    pub ignore_case: bool,
    pub multiline: bool,
    pub mode: Mode,
    /// Context lines before and after each match (content mode).
    pub before: usize,
    pub after: usize,
    /// Results skipped before the page starts.
    pub offset: u64,
    /// Results on the page.
    pub limit: u64,
    pub include: Option<Include>,
    /// The `type` option as given (checked by [`crate::types::select`]).
    pub types: Option<String>,
}

fn flag(input: &Value, key: &str) -> bool {
    input.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn lines(input: &Value, key: &str) -> Option<usize> {
    input
        .get(key)
        .and_then(Value::as_u64)
        .map(|n| n.min(MAX_CONTEXT) as usize)
}

impl Options {
    /// Read `input` (already checked against the schema by the host; checked again here for
    /// what the schema cannot say).
    pub fn parse(input: &Value) -> Result<Options, ToolError> {
        let pattern = match input.get("pattern").and_then(Value::as_str) {
            Some(p) if !p.is_empty() => p.to_string(),
            _ => {
                return Err(ToolError::new(
                    "bad-input",
                    "`pattern` is required: the regex to search for",
                ))
            }
        };
        let mode = match input.get("output_mode").and_then(Value::as_str) {
            None | Some("content") => Mode::Content,
            Some("files_with_matches") => Mode::FilesWithMatches,
            Some("count") => Mode::Count,
            Some(other) => {
                return Err(ToolError::new(
                    "bad-input",
                    format!(
                        "`output_mode` `{other}` is not a mode: use `content` (matching lines), \
                         `files_with_matches` (one path per file) or `count` (matching lines per file)"
                    ),
                ))
            }
        };
        let context = lines(input, "context").unwrap_or(0);
        let before = lines(input, "before").unwrap_or(context);
        let after = lines(input, "after").unwrap_or(context);
        let head_limit = input.get("head_limit").and_then(Value::as_u64);
        let max_matches = input.get("max_matches").and_then(Value::as_u64);
        let limit = match (head_limit, max_matches) {
            (Some(h), Some(m)) if h != m => {
                return Err(ToolError::new(
                    "bad-input",
                    format!(
                        "`head_limit` ({h}) and `max_matches` ({m}) are the same option \
                         (`max_matches` is its old name): give only `head_limit`"
                    ),
                ))
            }
            (Some(n), _) | (None, Some(n)) => n,
            (None, None) => DEFAULT_HEAD_LIMIT,
        }
        .clamp(1, MAX_HEAD_LIMIT);
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0);
        let include = match input.get("include").and_then(Value::as_str) {
            Some(g) if !g.is_empty() => {
                Some(Include::new(g).map_err(|e| ToolError::new("bad-include", e))?)
            }
            _ => None,
        };
        let types = match input.get("type").and_then(Value::as_str) {
            Some(t) if !t.trim().is_empty() => Some(t.to_string()),
            _ => None,
        };
        Ok(Options {
            pattern,
            literal: flag(input, "literal"),
            ignore_case: flag(input, "ignore_case"),
            multiline: flag(input, "multiline"),
            mode,
            before,
            after,
            offset,
            limit,
            include,
            types,
        })
    }
}
