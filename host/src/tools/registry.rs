//! The registry: every tool component loaded once, its self-description checked and turned
//! into the host's own view of it. A description can only make the host stricter.

use crate::error::{Error, Result};
use crate::gate::scope::Access;
use crate::plugins::{PluginGrant, PluginStore};
use crate::sandbox::{wit, Limits, Loaded, Sandbox};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The built-in tools, compiled to components by `host/build.rs` and carried in the binary.
pub const BUILTINS: &[(&str, &[u8])] = &[
    (
        "read",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_read.wasm"
        )),
    ),
    (
        "ls",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_ls.wasm"
        )),
    ),
    (
        "glob",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_glob.wasm"
        )),
    ),
    (
        "grep",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_grep.wasm"
        )),
    ),
    (
        "write",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_write.wasm"
        )),
    ),
    (
        "edit",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_edit.wasm"
        )),
    ),
    (
        "multiedit",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_multiedit.wasm"
        )),
    ),
    (
        "shell",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_shell.wasm"
        )),
    ),
    (
        "job_output",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_job_output.wasm"
        )),
    ),
    (
        "fetch",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_fetch.wasm"
        )),
    ),
    (
        "job_kill",
        include_bytes!(concat!(
            env!("TOOLGATE_GUEST_DIR"),
            "/toolgate_tool_job_kill.wasm"
        )),
    ),
];

/// Where the guest build put its components (test guests included).
#[doc(hidden)]
pub const GUEST_ARTIFACT_DIR: &str = env!("TOOLGATE_GUEST_DIR");

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
    /// Links the host `exec` capability: approvals last one session at most.
    Session,
}

/// The interface whose import makes a component session-capped.
pub const EXEC_INTERFACE_PREFIX: &str = "toolgate:host/exec";

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

/// All tools the host serves, by name.
#[derive(Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    /// Plugins refused at load, by tool name, with the reason.
    refused: BTreeMap<String, String>,
}

impl Registry {
    /// Load the built-in tools, compiling them in parallel the first time (later starts load
    /// the cached artifacts).
    pub async fn builtins(sandbox: &Sandbox, limits: &Limits) -> Result<Self> {
        let loaded: Vec<Result<Loaded>> = std::thread::scope(|s| {
            let handles: Vec<_> = BUILTINS
                .iter()
                .map(|(name, bytes)| s.spawn(move || sandbox.load(name, bytes)))
                .collect();
            handles
                .into_iter()
                .zip(BUILTINS)
                .map(|(h, (name, _))| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::ComponentLoad {
                            name: name.to_string(),
                            message: "the compiler thread panicked".into(),
                        })
                    })
                })
                .collect()
        });
        let mut registry = Registry::default();
        for ((name, _), loaded) in BUILTINS.iter().zip(loaded) {
            let tool = describe(sandbox, limits, loaded?, Some(name), true).await?;
            registry.insert(tool)?;
        }
        Ok(registry)
    }

    /// Load an extra component from a file (a test guest now, plugins later).
    pub async fn add_file(
        &mut self,
        sandbox: &Sandbox,
        limits: &Limits,
        path: &Path,
    ) -> Result<ToolInfo> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let name = path.display().to_string();
        let loaded = sandbox.load(&name, &bytes)?;
        let tool = describe(sandbox, limits, loaded, None, false).await?;
        let info = tool.info.clone();
        self.insert(tool)?;
        Ok(info)
    }

    /// Load the workspace's installed plugins. A plugin that fails a check is not served;
    /// calling it returns the reason ([`Registry::refused`]).
    pub async fn add_plugins(&mut self, sandbox: &Sandbox, limits: &Limits, store: &PluginStore) {
        let (ok, refused) = store.load_all(sandbox, limits).await;
        for tool in ok {
            let name = tool.info.name.clone();
            if let Err(e) = self.insert(tool) {
                self.refused.insert(name, e.to_string());
            }
        }
        for (name, why) in refused {
            tracing::warn!(plugin = %name, reason = %why, "plugin refused");
            self.refused.insert(name, why);
        }
    }

    /// Why the plugin tool `name` was refused at load, if it was.
    pub fn refused(&self, name: &str) -> Option<&str> {
        self.refused.get(name).map(String::as_str)
    }

    /// The plugins refused because this user's toolgate did not install them (an untrusted
    /// workspace's shipped plugins), as ignored parts.
    pub fn ignored_plugins(&self) -> Vec<crate::policy::Ignored> {
        self.refused
            .iter()
            .filter(|(_, why)| why.starts_with(crate::plugins::UNSIGNED_RECORD))
            .map(|(name, _)| crate::policy::Ignored {
                file: format!(
                    ".toolgate/plugins/{}",
                    name.trim_start_matches(crate::plugins::TOOL_PREFIX)
                ),
                part: format!("plugin `{name}`"),
                reason: crate::plugins::UNSIGNED_RECORD.into(),
            })
            .collect()
    }

    /// Every refused plugin tool with the reason.
    pub fn all_refused(&self) -> impl Iterator<Item = (&str, &str)> {
        self.refused.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn insert(&mut self, tool: RegisteredTool) -> Result<()> {
        let name = tool.info.name.clone();
        if self.tools.contains_key(&name) {
            return Err(Error::ComponentLoad {
                name,
                message: "a tool with this name is already loaded; names cannot be shadowed".into(),
            });
        }
        self.tools.insert(name, Arc::new(tool));
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        self.tools.get(name).cloned()
    }

    /// Every tool, by name.
    pub fn iter(&self) -> impl Iterator<Item = &ToolInfo> {
        self.tools.values().map(|t| &t.info)
    }

    /// Every tool name, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }
}

/// Describe a plugin component: its own name must be the manifest's, it is served as
/// `plugin__NAME`, and its risk also reflects what its grant lets it do.
pub(crate) async fn describe_plugin(
    sandbox: &Sandbox,
    limits: &Limits,
    loaded: Loaded,
    grant: PluginGrant,
) -> Result<RegisteredTool> {
    let mut tool = describe(sandbox, limits, loaded, Some(&grant.name), false)
        .await
        .map_err(|e| match e {
            Error::ComponentLoad { message, .. } => Error::Plugin {
                name: grant.name.clone(),
                message: format!("{message} (the component's name must be the manifest's `name`)"),
            },
            other => other,
        })?;
    if !grant.fs_write.is_empty() {
        tool.info.risk = tool.info.risk.max(Risk::Write);
    }
    if !grant.http.is_empty() {
        tool.info.risk = tool.info.risk.max(Risk::Network);
    }
    tool.info.name = crate::plugins::tool_name(&grant.name);
    tool.info.plugin = Some(grant.name.clone());
    tool.plugin = Some(Arc::new(grant));
    Ok(tool)
}

async fn describe(
    sandbox: &Sandbox,
    limits: &Limits,
    loaded: Loaded,
    expected_name: Option<&str>,
    builtin: bool,
) -> Result<RegisteredTool> {
    let label = expected_name.unwrap_or("component").to_string();
    let d = sandbox.describe(&loaded, limits).await?;
    let bad = |message: String| Error::ComponentLoad {
        name: d.name.clone(),
        message,
    };
    if !valid_name(&d.name) {
        return Err(Error::ComponentLoad {
            name: label,
            message: format!(
                "it calls itself `{}`; a tool name is 1-64 of a-z, 0-9, `_`, `-`, starting with a letter",
                d.name
            ),
        });
    }
    if let Some(expected) = expected_name {
        if d.name != expected {
            return Err(bad(format!(
                "expected the built-in `{expected}`, it calls itself `{}`",
                d.name
            )));
        }
    }
    let schema: Value = serde_json::from_str(&d.input_schema)
        .map_err(|e| bad(format!("its input schema is not JSON: {e}")))?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(bad(
            "its input schema must describe an object (`\"type\": \"object\"`)".into(),
        ));
    }
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| bad(format!("its input schema is not a valid JSON Schema: {e}")))?;
    let mut path_fields = Vec::new();
    for field in &d.path_fields {
        let declared = schema
            .get("properties")
            .and_then(|p| p.get(&field.name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        if declared != Some("string") {
            return Err(bad(format!(
                "path field `{}` must be a string property of the input schema",
                field.name
            )));
        }
        let access = match field.access {
            wit::PathAccess::Read => PathUse::Read,
            wit::PathAccess::Write => PathUse::Write,
        };
        path_fields.push((field.name.clone(), access));
    }
    let declared = match d.risk {
        wit::Risk::ReadOnly => Risk::ReadOnly,
        wit::Risk::Write => Risk::Write,
        wit::Risk::Exec => Risk::Exec,
        wit::Risk::Network => Risk::Network,
    };
    let exec = loaded
        .imports
        .iter()
        .any(|i| i.starts_with(EXEC_INTERFACE_PREFIX));
    let mut risk = declared;
    if path_fields.iter().any(|(_, a)| *a == PathUse::Write) {
        risk = risk.max(Risk::Write);
    }
    if exec {
        risk = risk.max(Risk::Exec);
    }
    let info = ToolInfo {
        name: d.name.clone(),
        description: d.description.clone(),
        input_schema: schema,
        risk,
        path_fields,
        ceiling: if exec {
            Ceiling::Session
        } else {
            Ceiling::Project
        },
        imports: loaded.imports.clone(),
        digest: loaded.digest.clone(),
        builtin,
        plugin: None,
    };
    Ok(RegisteredTool {
        info,
        loaded,
        validator,
        plugin: None,
    })
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= 64
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-'))
}
