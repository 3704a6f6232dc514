//! How the gate's tools and observations look in MCP: a tool with its annotations and
//! `outputSchema`, an observation as a `CallToolResult` (the text, then any images, and the
//! observation itself as `structuredContent`).

use crate::gate::Gate;
use crate::tools::{Observation, Risk, Status, ToolInfo};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// Each tool's MCP form, made once per server: rmcp looks a tool up for every 2026-07-28
/// `tools/call` (to check `Mcp-Param-*` headers against its schema), and making the form
/// (the description filled in, the schema copied) each time cost ~13 µs of the call.
///
/// Keyed by where the gate keeps the tool's [`ToolInfo`]: the registry sets each once and never
/// changes or frees it while the gate lives, and every holder of this cache holds the gate. A
/// description with placeholders (`shell`, `fetch`) follows the mode and the grants in force,
/// so those forms are made anew every time.
#[derive(Default)]
pub struct ToolForms(Mutex<HashMap<usize, Tool>>);

impl ToolForms {
    /// `info`'s MCP form, as [`mcp_tool`] of the gate's description of it.
    pub fn get(&self, gate: &Gate, info: &ToolInfo) -> Tool {
        if crate::gate::has_facts(info) {
            return mcp_tool(&gate.described(info));
        }
        let key = std::ptr::from_ref(info) as usize;
        let mut forms = self.0.lock().unwrap_or_else(|p| p.into_inner());
        forms
            .entry(key)
            .or_insert_with(|| mcp_tool(&gate.described(info)))
            .clone()
    }
}

/// A registry tool as MCP lists it; its outputSchema is the observation's (every result's).
pub fn mcp_tool(info: &ToolInfo) -> Tool {
    let schema: JsonObject = info.input_schema.as_object().cloned().unwrap_or_default();
    let mut tool = Tool::new(info.name.clone(), info.description.clone(), schema);
    tool.annotations = Some(annotations(info.risk));
    tool.output_schema = Some(crate::tools::output_schema::observation_schema().clone());
    tool
}

/// Annotations derived from a tool's risk.
pub fn annotations(risk: Risk) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(risk == Risk::ReadOnly)
        .destructive(matches!(risk, Risk::Write | Risk::Exec))
        .open_world(risk == Risk::Network)
}

/// The observation as an MCP result: the observation itself as `structuredContent`, and the
/// text the model reads as `content`, then its images.
pub fn render(o: &Observation) -> CallToolResult {
    let structured = serde_json::to_value(o).unwrap_or(Value::Null);
    let mut blocks = vec![ContentBlock::text(render_text(o))];
    blocks.extend(
        o.images
            .iter()
            .map(|i| ContentBlock::image(&i.base64, &i.mime_type)),
    );
    let mut result = if matches!(o.status, Status::Error | Status::Denied) {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    };
    result.structured_content = Some(structured);
    result
}

/// The text rendering: `[tool status] summary`, then the content, then (when the content does
/// not already say them) the reason and hint, and where the whole output is when it was cut.
pub fn render_text(o: &Observation) -> String {
    let mut status = o.status.as_str().to_string();
    if let Some(code) = &o.error_code {
        status.push_str(&format!(": {code}"));
    }
    if let Some(stage) = &o.stage {
        status.push_str(&format!(" at {stage}"));
    }
    let mut text = format!("[{} {status}] {}", o.tool, o.summary);
    if !o.content.is_empty() {
        text.push('\n');
        text.push_str(&o.content);
    }
    if let Some(reason) = &o.reason {
        if !o.content.contains(reason.as_str()) {
            text.push_str(&format!("\nreason: {reason}"));
        }
    }
    if let Some(hint) = &o.hint {
        if !o.content.contains(hint.as_str()) {
            text.push_str(&format!("\nhint: {hint}"));
        }
    }
    if let Some(full) = &o.full_output_ref {
        text.push_str(&format!(
            "\n(the whole output is in {full}; read it with offset/limit)"
        ));
    }
    text
}
