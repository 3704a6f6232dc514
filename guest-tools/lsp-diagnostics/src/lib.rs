//! `lsp_diagnostics`: the language server's errors and warnings for one file, or for every file
//! of the workspace in a language with a server. The host asks the server; this guest only
//! shows the answer ([`toolgate_guest::lsp::format::diagnostics`]).
//!
//! Error codes: `lsp` (the host's words: no server for the file's language, the server failed
//! or is missing, ...).

use std::path::Path;
use toolgate_guest::lsp::{self, format, Query};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "lsp_diagnostics",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "The file to check, relative to the workspace root. Omit it to check every file of the workspace that has a language server (bounded; the output says what was left out)."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": lsp::MAX_TIMEOUT_MS, "description": "How long to wait for the language server, in milliseconds. Default 30000."}
                },
                "additionalProperties": false
            }),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let path = lsp::text_field(&input, "path");
        let asked = path.map(|p| cx.relative(Path::new(p)));
        let query = Query::Diagnostics(path.map(str::to_string));
        let answer = lsp::ask(&query, lsp::timeout_ms(&input)).map_err(lsp::error)?;
        Ok(format::diagnostics(&answer, asked.as_deref(), cx.max_output_bytes()).into_output())
    }
}

toolgate_guest::register_tool!(T);
