//! `lsp_restart`: stop a language's server (or every one) so the next `lsp_*` call starts it
//! afresh. This guest only shows the host's answer
//! ([`toolgate_guest::lsp::format::restarted`]).
//!
//! Error codes: `lsp` (the host's words: no such language, ...).

use toolgate_guest::lsp::{self, format};
use toolgate_guest::{json, Context, Descriptor, Output, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "lsp_restart",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "language": {"type": "string", "minLength": 1, "description": "The language whose server to restart, as the lsp_* tools name it (`python`, `rust`, ...). Omit it to restart every running server."}
                },
                "additionalProperties": false
            }),
            Risk::ReadOnly,
        )
    }

    fn call(input: Value, _cx: &Context) -> Result<Output, ToolError> {
        let answer = lsp::restart(lsp::text_field(&input, "language")).map_err(lsp::error)?;
        Ok(format::restarted(&answer).into_output())
    }
}

toolgate_guest::register_tool!(T);
