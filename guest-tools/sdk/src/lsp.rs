//! The workspace's language servers (`toolgate:lsp/lsp@0.1.0`), for the built-in `lsp_*` tools
//! built with the SDK's `lsp` feature. Importing it caps a tool at session scope, and only
//! built-in tools may import it (the host refuses a plugin that does).
//!
//! [`ask`] sends a [`Query`] and returns the host's answer as JSON; [`apply`] applies the change
//! the gate computed, showed and approved for this call (`lsp_rename`, `lsp_replace_symbol`);
//! [`restart`] stops a language's server so the next use starts it afresh. Errors are the
//! host's plain words; [`error`] makes them a [`ToolError`] with code [`ERROR_CODE`].
//! [`format`] turns each answer into the text the model reads (pure functions, tested natively).
//!
//! # The answers (the contract between host and guest)
//!
//! Lines and columns are 1-based, columns counted in characters. Fields marked `?` may be
//! absent. Every answer of [`ask`] has
//! `"servers": [{"language": "python", "server": "pylsp", "restarted": false}]`: the servers it
//! used, `restarted` when one had died and was started again for this ask.
//!
//! A **location**: `{"path": "pkg/a.py", "line": 3, "column": 5, "end_line": 3, "end_column": 8,
//! "outside": false, "text"?: "def foo():"}`. `path` is workspace-relative, or absolute with
//! `"outside": true` for a file outside the workspace (toolchain sources; no `text` then: these
//! tools cannot read it). `text` is the location's line, trimmed.
//!
//! - `diagnostics`: `{"servers", "files": [{"path": "a.py", "diagnostics": [{"line", "column",
//!   "end_line", "end_column", "severity": "error" | "warning" | "information" | "hint",
//!   "message", "source"?: "pyflakes", "code"?: "E0308"}]}], "checked": 3,
//!   "timed_out": ["b.py"], "cut": null | "only the first 200 files were checked; ..."}`.
//!   `checked` counts the files asked about (those in `timed_out` too); a file in `timed_out`
//!   got no diagnostics in time.
//! - `definition`, `references`: `{"servers", "symbol": "foo" | null, "locations": [location],
//!   "total": 12, "cut": false}`: `symbol` is the word at the position; `cut` when only the
//!   first `locations.len()` of `total` are listed.
//! - `document-symbols`: `{"servers", "path": "a.py", "symbols": [{"name", "kind": "function",
//!   "detail"?, "container"?, "line", "column", "end_line", "end_column", "depth": 0}],
//!   "total"?, "cut"?}`: pre-order, `depth` the nesting (0 at the top); `line`/`column` where
//!   the name is, `end_line`/`end_column` where the whole definition ends; `container` (flat
//!   answers only) the enclosing symbol's name.
//! - `workspace-symbols`: `{"servers", "query": "Foo", "symbols": [{"name", "kind", "path",
//!   "line", "column", "outside", "container"?}], "total", "cut"}`.
//! - `incoming-calls`, `outgoing-calls`: `{"servers", "item": null | {"name", "kind", "path",
//!   "line", "column", "outside"}, "calls": [{"name", "kind", "path", "line", "column",
//!   "outside", "at": [{"line", "column"}]}]}`: `item` is the function at the position (null:
//!   none there); each call is a caller (incoming) or a callee (outgoing), `at` where the call
//!   is made: in the caller's file for incoming calls, in `item`'s file for outgoing ones.
//!
//! [`apply`]: `{"files": [{"path": "a.py", "edits": 3}], "edits": 5}`.
//! [`restart`]: `{"restarted": ["python"], "not_running": ["c"]}`.

#[doc(hidden)]
pub mod __wit {
    wit_bindgen::generate!({
        path: "../../tools-wit/wit/lsp/since_v0.1.0",
        world: "lsp-host",
    });
}

pub mod format;

use crate::{json, Context, ToolError, Value};
pub use __wit::toolgate::lsp::lsp::{Position, Query};

/// The code of an error the host returned (it would not ask, the server failed or does not
/// support the request, the file has no language server, ...).
pub const ERROR_CODE: &str = "lsp";
/// How long [`ask`] waits when the input does not say (milliseconds).
pub const DEFAULT_TIMEOUT_MS: u32 = 30_000;
/// The longest `timeout_ms` a tool accepts.
pub const MAX_TIMEOUT_MS: u32 = 120_000;

/// Ask the language servers, waiting at most `timeout_ms`: the answer (shapes above).
pub fn ask(q: &Query, timeout_ms: u32) -> Result<Value, String> {
    parse(__wit::toolgate::lsp::lsp::ask(q, timeout_ms)?)
}

/// Apply the change approved for this call: `{"files": [{"path", "edits"}], "edits"}`.
pub fn apply() -> Result<Value, String> {
    parse(__wit::toolgate::lsp::lsp::apply()?)
}

/// Stop the server of `language` (`None`: every one): `{"restarted", "not_running"}`.
pub fn restart(language: Option<&str>) -> Result<Value, String> {
    parse(__wit::toolgate::lsp::lsp::restart(language)?)
}

fn parse(text: String) -> Result<Value, String> {
    serde_json::from_str(&text).map_err(|e| format!("the host's answer is not JSON ({e})"))
}

/// A host error as the tool's error.
pub fn error(message: String) -> ToolError {
    ToolError::new(ERROR_CODE, message)
}

/// The input's `timeout_ms` (default [`DEFAULT_TIMEOUT_MS`], at most [`MAX_TIMEOUT_MS`]).
pub fn timeout_ms(input: &Value) -> u32 {
    input
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_TIMEOUT_MS, |t| {
            u32::try_from(t)
                .unwrap_or(u32::MAX)
                .clamp(1, MAX_TIMEOUT_MS)
        })
}

/// A string field of the input, when present and not empty.
pub fn text_field<'a>(input: &'a Value, field: &str) -> Option<&'a str> {
    input
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The position the input names: `path` (as the host rewrote it), `line`, `column`, `symbol`.
pub fn position(input: &Value) -> Position {
    let number = |field: &str| {
        input
            .get(field)
            .and_then(Value::as_u64)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    Position {
        path: text_field(input, "path").unwrap_or_default().to_string(),
        line: number("line").unwrap_or(1),
        column: number("column"),
        symbol: text_field(input, "symbol").map(str::to_string),
    }
}

/// The JSON-Schema properties of a position (`path`, `line`, `column`, `symbol`), with
/// `path_description` for `path`: the start of a position tool's schema.
pub fn position_properties(path_description: &str) -> serde_json::Map<String, Value> {
    let props = json!({
        "path": {"type": "string", "minLength": 1, "description": path_description},
        "line": {"type": "integer", "minimum": 1, "maximum": u32::MAX, "description": "The line the symbol is on (1-based, as `read` numbers lines)."},
        "column": {"type": "integer", "minimum": 1, "maximum": u32::MAX, "description": "The column of the symbol on that line (1-based, in characters). Optional: give `symbol` instead, or neither for the line's first word."},
        "symbol": {"type": "string", "minLength": 1, "description": "The symbol's name as written on that line; its first whole-word occurrence there is used. Ignored when `column` is given."}
    });
    match props {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// A position tool's schema: [`position_properties`] plus `extra` properties, requiring
/// `path`, `line` and the names in `required`.
pub fn position_schema(path_description: &str, extra: Value, required: &[&str]) -> Value {
    let mut props = position_properties(path_description);
    if let Value::Object(extra) = extra {
        props.extend(extra);
    }
    let mut req = vec!["path", "line"];
    req.extend_from_slice(required);
    json!({
        "type": "object",
        "properties": props,
        "required": req,
        "additionalProperties": false
    })
}

/// `path:line` (or `path:line:column`) of the input's position, for messages: the path
/// workspace-relative, as [`crate::names::display`] prints it.
pub fn position_label(cx: &Context, input: &Value) -> String {
    let p = position(input);
    let rel = cx.relative(std::path::Path::new(&p.path));
    let mut label = format!("{}:{}", crate::names::display(&rel), p.line);
    if let Some(c) = p.column {
        label.push_str(&format!(":{c}"));
    }
    label
}

/// The descriptor of a tool that looks up the places of the symbol at a position
/// (`lsp_definition`, `lsp_references`).
pub fn lookup_descriptor(name: &str, description: &str) -> crate::Descriptor {
    crate::Descriptor::new(
        name,
        description,
        position_schema(
            "The file the symbol is in, relative to the workspace root.",
            json!({}),
            &[],
        ),
        crate::Risk::ReadOnly,
    )
    .path("path", crate::PathAccess::Read)
}

/// One call of a lookup tool: the places the host found, shown as `lookup` says.
pub fn lookup_call(
    input: &Value,
    cx: &Context,
    lookup: format::Lookup,
) -> Result<crate::Output, ToolError> {
    let at = position_label(cx, input);
    let p = position(input);
    let query = match lookup {
        format::Lookup::Definition => Query::Definition(p),
        format::Lookup::References => Query::References(p),
    };
    let answer = ask(&query, DEFAULT_TIMEOUT_MS).map_err(error)?;
    Ok(format::locations(&answer, lookup, &at, cx.max_output_bytes()).into_output())
}

#[cfg(test)]
mod tests;
