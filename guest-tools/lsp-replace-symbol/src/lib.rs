//! `lsp_replace_symbol`: replace a symbol's whole definition in a file (a function, a class, a
//! method named `Class.method`) with new text. The host finds the definition's range with the
//! language server and computes the change before the call is approved (the approval shows
//! it); [`toolgate_guest::lsp::apply`] writes exactly what was approved. This guest only
//! reports what was written.
//!
//! Error codes: `lsp` (the host's words: the file changed since, ...).

use toolgate_guest::lsp::{self, format};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "lsp_replace_symbol",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "The file that defines the symbol, relative to the workspace root."},
                    "symbol": {"type": "string", "minLength": 1, "description": "The symbol's name, or its dotted path when the name alone is ambiguous (`Class.method`, `Outer.Inner.f`)."},
                    "new_text": {"type": "string", "description": "The complete new definition: it replaces the old one from its first character (a decorator or doc comment the server counts as part of it included) to its last."}
                },
                "required": ["path", "symbol", "new_text"],
                "additionalProperties": false
            }),
            Risk::Write,
        )
        .path("path", PathAccess::Write)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let answer = lsp::apply().map_err(lsp::error)?;
        let symbol = format::one_line(lsp::text_field(&input, "symbol").unwrap_or_default());
        let headline = format!("replaced `{symbol}`");
        Ok(format::applied(&answer, &headline, cx.max_output_bytes()).into_output())
    }
}

toolgate_guest::register_tool!(T);
