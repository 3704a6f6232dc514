//! `lsp_symbols`: the symbols a file defines, as an outline (`path`), or the symbols matching a
//! name anywhere in the workspace (`query`); with both, the file's symbols whose names contain
//! `query`. The host asks the language server; this guest only shows the answer
//! ([`toolgate_guest::lsp::format::document_symbols`], [`workspace_symbols`]).
//!
//! Error codes: `bad-input` (neither `path` nor `query`), `lsp` (the host's words).
//!
//! [`workspace_symbols`]: toolgate_guest::lsp::format::workspace_symbols

use toolgate_guest::lsp::{self, format, Query};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "lsp_symbols",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "A file, relative to the workspace root: list the symbols it defines as an outline. Give `path`, `query` or both."},
                    "query": {"type": "string", "minLength": 1, "description": "A name or part of one: find matching symbols across the workspace (with `path`: only in that file)."}
                },
                "additionalProperties": false
            }),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let max = cx.max_output_bytes();
        let timeout = lsp::DEFAULT_TIMEOUT_MS;
        let query = lsp::text_field(&input, "query");
        let report = match (lsp::text_field(&input, "path"), query) {
            (Some(path), _) => {
                let q = Query::DocumentSymbols(path.to_string());
                let answer = lsp::ask(&q, timeout).map_err(lsp::error)?;
                format::document_symbols(&answer, query, max)
            }
            (None, Some(query)) => {
                let q = Query::WorkspaceSymbols(query.to_string());
                let answer = lsp::ask(&q, timeout).map_err(lsp::error)?;
                format::workspace_symbols(&answer, max)
            }
            (None, None) => {
                return Err(ToolError::new(
                    "bad-input",
                    "give `path` (a file: its symbols as an outline) or `query` (a name: \
                     matching symbols across the workspace), or both",
                ))
            }
        };
        Ok(report.into_output())
    }
}

toolgate_guest::register_tool!(T);
