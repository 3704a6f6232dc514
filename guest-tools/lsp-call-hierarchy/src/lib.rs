//! `lsp_call_hierarchy`: who calls the function at a position (`incoming`), what it calls
//! (`outgoing`), or both (the default). The host finds the position and asks the language
//! server; this guest only shows the answers ([`toolgate_guest::lsp::format::calls`]).
//!
//! Error codes: `lsp` (the host's words: the server does not support call hierarchy, the line
//! is past the file's end, ...).

use toolgate_guest::lsp::{self, format, Query};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "lsp_call_hierarchy",
            include_str!("../description.md"),
            lsp::position_schema(
                "The file the function is in, relative to the workspace root.",
                json!({
                    "direction": {"type": "string", "enum": ["incoming", "outgoing", "both"], "description": "incoming: who calls it; outgoing: what it calls; both (default)."}
                }),
                &[],
            ),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let direction = lsp::text_field(&input, "direction").unwrap_or("both");
        let ask = |q: Query| lsp::ask(&q, lsp::DEFAULT_TIMEOUT_MS).map_err(lsp::error);
        let incoming = match direction {
            "outgoing" => None,
            _ => Some(ask(Query::IncomingCalls(lsp::position(&input)))?),
        };
        let outgoing = match direction {
            "incoming" => None,
            _ => Some(ask(Query::OutgoingCalls(lsp::position(&input)))?),
        };
        let at = lsp::position_label(cx, &input);
        let report = format::calls(
            incoming.as_ref(),
            outgoing.as_ref(),
            &at,
            cx.max_output_bytes(),
        );
        Ok(report.into_output())
    }
}

toolgate_guest::register_tool!(T);
