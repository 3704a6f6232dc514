//! `lsp_definition`: where the symbol at a position is defined.
//! The host finds the position and asks the language server; this guest only shows the answer
//! ([`toolgate_guest::lsp::format::locations`]).
//!
//! Error codes: `lsp` (the host's words: no server for the file's language, the line is past
//! the file's end, `symbol` is not on that line, the server failed, ...).

use toolgate_guest::lsp::{self, format, Query};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "lsp_definition",
            include_str!("../description.md"),
            lsp::position_schema(
                "The file the symbol is in, relative to the workspace root.",
                json!({}),
                &[],
            ),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let at = lsp::position_label(cx, &input);
        let query = Query::Definition(lsp::position(&input));
        let answer = lsp::ask(&query, lsp::DEFAULT_TIMEOUT_MS).map_err(lsp::error)?;
        let lookup = format::Lookup::Definition;
        Ok(format::locations(&answer, lookup, &at, cx.max_output_bytes()).into_output())
    }
}

toolgate_guest::register_tool!(T);
