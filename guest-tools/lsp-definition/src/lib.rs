//! `lsp_definition`: where the symbol at a position is defined.
//! The host finds the position and asks the language server; this guest only shows the answer
//! ([`toolgate_guest::lsp::format::locations`]).
//!
//! Error codes: `lsp` (the host's words: no server for the file's language, the line is past
//! the file's end, `symbol` is not on that line, the server failed, ...).

use toolgate_guest::lsp::{self, format};
use toolgate_guest::{Context, Descriptor, Output, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        lsp::lookup_descriptor("lsp_definition", include_str!("../description.md"))
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        lsp::lookup_call(&input, cx, format::Lookup::Definition)
    }
}

toolgate_guest::register_tool!(T);
