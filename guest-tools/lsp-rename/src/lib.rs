//! `lsp_rename`: rename the symbol at a position everywhere the language server knows it.
//! The host computes the edits from this same input before the call is approved (the approval
//! shows them), and [`toolgate_guest::lsp::apply`] writes exactly what was approved: every
//! file or none. This guest only reports what was written.
//!
//! Error codes: `lsp` (the host's words: a file changed since the edits were computed, ...).

use toolgate_guest::lsp::{self, format};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "lsp_rename",
            include_str!("../description.md"),
            lsp::position_schema(
                "The file where the symbol to rename is (defined or used), relative to the workspace root.",
                json!({
                    "new_name": {"type": "string", "minLength": 1, "description": "The symbol's new name."}
                }),
                &["new_name"],
            ),
            Risk::Write,
        )
        .path("path", PathAccess::Write)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        let answer = lsp::apply().map_err(lsp::error)?;
        let new = format::one_line(lsp::text_field(&input, "new_name").unwrap_or_default());
        let headline = match lsp::text_field(&input, "symbol") {
            Some(old) => format!("renamed `{}` to `{new}`", format::one_line(old)),
            None => format!(
                "renamed the symbol at {} to `{new}`",
                lsp::position_label(cx, &input)
            ),
        };
        Ok(format::applied(&answer, &headline, cx.max_output_bytes()).into_output())
    }
}

toolgate_guest::register_tool!(T);
