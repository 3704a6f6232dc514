//! The host's view of a tool (its risk, ceiling and path fields) and how it is derived from a
//! component's self-description: every check a description must pass.

use crate::error::{Error, Result};
use crate::plugins::imports::EXEC_INTERFACE_PREFIX;
use crate::plugins::PluginGrant;
use crate::sandbox::{wit, Limits, Loaded, Sandbox, ToolMeta};
use crate::workspace::Access;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// What a tool can do, from least to most dangerous. The host's value is the most dangerous of
/// what the tool declares and what its path fields and imports imply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Risk {
    /// Reads or searches the workspace.
    ReadOnly,
    /// Changes files in the workspace.
    Write,
    /// Runs host processes.
    Exec,
    /// Talks to the network.
    Network,
}

impl Risk {
    /// The name used in listings and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::ReadOnly => "read-only",
            Risk::Write => "write",
            Risk::Exec => "exec",
            Risk::Network => "network",
        }
    }
}

/// The widest scope a grant for this tool may have, derived from the component's imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ceiling {
    /// Fully sandboxed: may be approved for the whole project.
    Project,
    /// Links the host `exec` or `lsp` capability: approvals last one session at most.
    Session,
}

/// The host's view of one tool.
#[derive(Clone, Debug, Serialize)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
    /// Its risk as the host sees it.
    pub risk: Risk,
    /// Input fields that are paths, and how they are used.
    pub path_fields: Vec<(String, PathUse)>,
    /// The widest grant scope allowed.
    pub ceiling: Ceiling,
    /// The interfaces the component imports.
    pub imports: Vec<String>,
    /// Hex sha256 of the component.
    pub digest: String,
    /// Whether it is carried in the binary.
    pub builtin: bool,
    /// The plugin it comes from, for plugin tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
}

/// How a path field is used, as declared by the tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathUse {
    /// Read.
    Read,
    /// Written.
    Write,
}

impl PathUse {
    pub(crate) fn access(self) -> Access {
        match self {
            PathUse::Read => Access::Read,
            PathUse::Write => Access::Write,
        }
    }
}

/// A loaded tool: the host's view, the compiled component and the input validator.
pub struct RegisteredTool {
    /// The host's view of the tool.
    pub info: ToolInfo,
    pub(crate) loaded: Loaded,
    pub(crate) validator: jsonschema::Validator,
    /// For a plugin: what its calls may have (request ∩ grant).
    pub(crate) plugin: Option<Arc<PluginGrant>>,
}

/// A loaded component's tool: its self-description asked and checked.
pub(super) async fn describe(
    sandbox: &Sandbox,
    limits: &Limits,
    loaded: Loaded,
    expected_name: Option<&str>,
    builtin: bool,
) -> Result<RegisteredTool> {
    let d = sandbox.describe(&loaded, limits).await?;
    let meta = meta_of(&d, &loaded.imports);
    register(&meta, loaded, expected_name, builtin)
}

/// What a component said about itself, as kept beside its artifact.
pub(super) fn meta_of(d: &wit::Descriptor, imports: &[String]) -> ToolMeta {
    ToolMeta {
        name: d.name.clone(),
        description: d.description.clone(),
        input_schema: d.input_schema.clone(),
        risk: match d.risk {
            wit::Risk::ReadOnly => "read-only",
            wit::Risk::Write => "write",
            wit::Risk::Exec => "exec",
            wit::Risk::Network => "network",
        }
        .into(),
        path_fields: d
            .path_fields
            .iter()
            .map(|f| {
                let access = match f.access {
                    wit::PathAccess::Read => "read",
                    wit::PathAccess::Write => "write",
                };
                (f.name.clone(), access.to_string())
            })
            .collect(),
        imports: imports.to_vec(),
    }
}

/// A tool from its self-description and loaded component.
pub(super) fn register(
    meta: &ToolMeta,
    loaded: Loaded,
    expected_name: Option<&str>,
    builtin: bool,
) -> Result<RegisteredTool> {
    let mut info = view(meta, expected_name, builtin, &loaded.digest)?;
    info.imports = loaded.imports.clone();
    let validator = super::input_schema::validator(&info.input_schema, builtin).map_err(|e| {
        Error::ComponentLoad {
            name: info.name.clone(),
            message: format!("its input schema is not a valid JSON Schema: {e}"),
        }
    })?;
    Ok(RegisteredTool {
        info,
        loaded,
        validator,
        plugin: None,
    })
}

/// The host's view of a tool from its self-description: every check a description must pass,
/// and the risk and ceiling the host derives from it (a description can only make the host
/// stricter). The schema's validity as JSON Schema is checked by [`register`].
pub(super) fn view(
    meta: &ToolMeta,
    expected_name: Option<&str>,
    builtin: bool,
    digest: &str,
) -> Result<ToolInfo> {
    let label = expected_name.unwrap_or("component").to_string();
    let bad = |message: String| Error::ComponentLoad {
        name: meta.name.clone(),
        message,
    };
    if !valid_name(&meta.name) {
        return Err(Error::ComponentLoad {
            name: label,
            message: format!(
                "it calls itself `{}`; a tool name is 1-64 of a-z, 0-9, `_`, `-`, starting with a letter",
                meta.name
            ),
        });
    }
    if let Some(expected) = expected_name {
        if meta.name != expected {
            return Err(bad(format!(
                "expected the built-in `{expected}`, it calls itself `{}`",
                meta.name
            )));
        }
    }
    let schema: Value = serde_json::from_str(&meta.input_schema)
        .map_err(|e| bad(format!("its input schema is not JSON: {e}")))?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(bad(
            "its input schema must describe an object (`\"type\": \"object\"`)".into(),
        ));
    }
    let mut path_fields = Vec::new();
    for (field, access) in &meta.path_fields {
        let declared = schema
            .get("properties")
            .and_then(|p| p.get(field))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        if declared != Some("string") {
            return Err(bad(format!(
                "path field `{field}` must be a string property of the input schema"
            )));
        }
        let access = match access.as_str() {
            "read" => PathUse::Read,
            "write" => PathUse::Write,
            other => {
                return Err(bad(format!(
                    "path field `{field}` has an unknown use `{other}`"
                )))
            }
        };
        path_fields.push((field.clone(), access));
    }
    let declared = match meta.risk.as_str() {
        "read-only" => Risk::ReadOnly,
        "write" => Risk::Write,
        "exec" => Risk::Exec,
        "network" => Risk::Network,
        other => return Err(bad(format!("it declares an unknown risk `{other}`"))),
    };
    let exec = meta
        .imports
        .iter()
        .any(|i| i.starts_with(EXEC_INTERFACE_PREFIX));
    // A language server runs project code on the host (confined read-only): the same ceiling.
    let lsp = meta
        .imports
        .iter()
        .any(|i| i.starts_with(crate::sandbox::LSP_INTERFACE_PREFIX));
    let mut risk = declared;
    if path_fields.iter().any(|(_, a)| *a == PathUse::Write) {
        risk = risk.max(Risk::Write);
    }
    if exec {
        risk = risk.max(Risk::Exec);
    }
    Ok(ToolInfo {
        name: meta.name.clone(),
        description: meta.description.clone(),
        input_schema: schema,
        risk,
        path_fields,
        ceiling: if exec || lsp {
            Ceiling::Session
        } else {
            Ceiling::Project
        },
        imports: meta.imports.clone(),
        digest: digest.to_string(),
        builtin,
        plugin: None,
    })
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= 64
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-'))
}
