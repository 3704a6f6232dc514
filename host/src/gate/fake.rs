//! Hand-built tools for the stages' unit tests: no registry, no component, no wasm.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::tools::registry::PathUse;
use crate::tools::{Ceiling, Risk, ToolInfo};
use serde_json::json;

/// A built-in-looking tool `name` with `risk`, capped at `ceiling`, with these path fields.
pub(super) fn tool(
    name: &str,
    risk: Risk,
    ceiling: Ceiling,
    path_fields: &[(&str, PathUse)],
) -> ToolInfo {
    ToolInfo {
        name: name.to_string(),
        description: format!("the fake tool {name}"),
        input_schema: json!({"type": "object"}),
        risk,
        path_fields: path_fields
            .iter()
            .map(|(f, u)| (f.to_string(), *u))
            .collect(),
        ceiling,
        imports: Vec::new(),
        digest: "0".repeat(64),
        builtin: true,
        plugin: None,
    }
}

/// A write tool `write` with a `path` field, capped at project scope.
pub(super) fn write_tool() -> ToolInfo {
    tool(
        "write",
        Risk::Write,
        Ceiling::Project,
        &[("path", PathUse::Write)],
    )
}

/// The shell: an exec tool, capped at session scope.
pub(super) fn shell_tool() -> ToolInfo {
    tool("shell", Risk::Exec, Ceiling::Session, &[])
}
