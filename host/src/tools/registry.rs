//! The registry: every tool component loaded once (when first needed), its self-description
//! checked and turned into the host's own view of it. A description can only make the host
//! stricter.

use crate::error::{Error, Result};
use crate::plugins::{PluginGrant, PluginStore};
use crate::sandbox::{wit, Limits, Loaded, Sandbox, ToolMeta};
use crate::workspace::Access;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// The one table of the built-ins: the name each is served as and its artifact's stem (in
/// the order of [`crate::tools::Builtin::ALL`]); it gives [`BUILTINS`] and their digests.
macro_rules! builtins {
    ($($name:literal => $stem:literal,)*) => {
        /// The built-in tools, compiled to components by `host/build.rs` and carried in the
        /// binary.
        pub const BUILTINS: &[(&str, &[u8])] = &[$((
            $name,
            include_bytes!(concat!(env!("TOOLGATE_GUEST_DIR"), "/", $stem, ".wasm")),
        )),*];
        /// The built-ins' digests (hex sha256), computed by `host/build.rs`, in [`BUILTINS`]
        /// order.
        const BUILTIN_DIGESTS: &[&str] = &[$(env!(concat!("TOOLGATE_SHA256_", $stem))),*];
    };
}

builtins! {
    "read" => "toolgate_tool_read",
    "ls" => "toolgate_tool_ls",
    "glob" => "toolgate_tool_glob",
    "grep" => "toolgate_tool_grep",
    "write" => "toolgate_tool_write",
    "edit" => "toolgate_tool_edit",
    "multiedit" => "toolgate_tool_multiedit",
    "shell" => "toolgate_tool_shell",
    "job_output" => "toolgate_tool_job_output",
    "fetch" => "toolgate_tool_fetch",
    "job_kill" => "toolgate_tool_job_kill",
    "download" => "toolgate_tool_download",
    "lsp_diagnostics" => "toolgate_tool_lsp_diagnostics",
    "lsp_definition" => "toolgate_tool_lsp_definition",
    "lsp_references" => "toolgate_tool_lsp_references",
    "lsp_symbols" => "toolgate_tool_lsp_symbols",
    "lsp_call_hierarchy" => "toolgate_tool_lsp_call_hierarchy",
    "lsp_rename" => "toolgate_tool_lsp_rename",
    "lsp_replace_symbol" => "toolgate_tool_lsp_replace_symbol",
    "lsp_restart" => "toolgate_tool_lsp_restart",
}

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
    /// Links the host `exec` or `lsp` capability: approvals last one session at most.
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

/// One built-in: known by name from the start, described and compiled on first use.
struct Slot {
    name: &'static str,
    bytes: &'static [u8],
    digest: &'static str,
    /// Its view, from the description cached beside its artifact or from the loaded tool.
    info: OnceLock<ToolInfo>,
    tool: OnceLock<Arc<RegisteredTool>>,
    /// Why the last attempt to load it failed.
    error: Mutex<Option<String>>,
}

/// The installed plugins, once scanned.
#[derive(Default)]
struct Plugins {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    /// Plugins refused at load, by tool name, with the reason.
    refused: BTreeMap<String, String>,
}

/// All tools the host serves, by name. Built-ins are loaded when first called (or listed);
/// installed plugins are scanned only when a plugin is called or the tools are listed. What
/// is listed and decided is the same as loading everything at once: a built-in's view comes
/// from the same self-description, cached beside its compiled artifact.
pub struct Registry {
    builtins: Vec<Slot>,
    /// Components from files (`--component`), loaded at once.
    extra: BTreeMap<String, Arc<RegisteredTool>>,
    store: Option<PluginStore>,
    plugins: OnceLock<Plugins>,
    /// Plugin tools whose records this user's toolgate did not sign (records only).
    unsigned: OnceLock<Vec<String>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            builtins: BUILTINS
                .iter()
                .zip(BUILTIN_DIGESTS)
                .map(|((name, bytes), digest)| Slot {
                    name,
                    bytes,
                    digest,
                    info: OnceLock::new(),
                    tool: OnceLock::new(),
                    error: Mutex::new(None),
                })
                .collect(),
            extra: BTreeMap::new(),
            store: None,
            plugins: OnceLock::new(),
            unsigned: OnceLock::new(),
        }
    }
}

impl Registry {
    /// A registry of the built-ins, none loaded yet.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Load the built-in tools at once, compiling in parallel what is not cached yet.
    pub async fn builtins(sandbox: &Sandbox, limits: &Limits) -> Result<Self> {
        let registry = Registry::new();
        registry.preload(sandbox, limits).await;
        if let Some((name, why)) = registry.builtin_errors().into_iter().next() {
            return Err(Error::ComponentLoad { name, message: why });
        }
        Ok(registry)
    }

    /// Serve the plugins installed in `store` (scanned when first needed).
    pub fn set_plugins(&mut self, store: PluginStore) {
        self.store = Some(store);
        self.plugins = OnceLock::new();
        self.unsigned = OnceLock::new();
    }

    /// Know every tool now: each built-in's view (compiling, in parallel, those never
    /// described on this machine) and the installed plugins.
    pub async fn preload(&self, sandbox: &Sandbox, limits: &Limits) {
        let missing: Vec<&Slot> = self
            .builtins
            .iter()
            .filter(|s| s.info.get().is_none() && s.tool.get().is_none())
            .filter(|s| match sandbox.cached_meta(s.digest) {
                Some(meta) => match view(&meta, Some(s.name), true, s.digest) {
                    Ok(info) => {
                        let _ = s.info.set(info);
                        false
                    }
                    Err(_) => true,
                },
                None => true,
            })
            .collect();
        // Compile what is missing in parallel, then describe each.
        let loaded: Vec<Result<(Loaded, Option<ToolMeta>)>> = std::thread::scope(|sc| {
            let handles: Vec<_> = missing
                .iter()
                .map(|s| sc.spawn(move || sandbox.load_digest(s.name, s.bytes, s.digest)))
                .collect();
            handles
                .into_iter()
                .zip(&missing)
                .map(|(h, s)| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::ComponentLoad {
                            name: s.name.to_string(),
                            message: "the compiler thread panicked".into(),
                        })
                    })
                })
                .collect()
        });
        for (slot, loaded) in missing.into_iter().zip(loaded) {
            let result = match loaded {
                Ok((loaded, meta)) => register_builtin(sandbox, limits, slot, loaded, meta).await,
                Err(e) => Err(e),
            };
            let _ = slot.settle(result);
        }
        self.scan_plugins(sandbox, limits).await;
    }

    /// The tool called `name`, loading it (and for a name that is not a built-in, scanning
    /// the installed plugins) if needed. `None`: no such tool, or it could not be loaded
    /// ([`Registry::refused`] says why).
    pub async fn tool(
        &self,
        sandbox: &Sandbox,
        limits: &Limits,
        name: &str,
    ) -> Option<Arc<RegisteredTool>> {
        if let Some(slot) = self.slot(name) {
            return self.builtin_tool(sandbox, limits, slot).await.ok();
        }
        if let Some(t) = self.extra.get(name) {
            return Some(t.clone());
        }
        self.scan_plugins(sandbox, limits)
            .await
            .tools
            .get(name)
            .cloned()
    }

    /// [`Registry::tool`] from synchronous code: what is loaded already, else loaded on a
    /// thread of its own (so it works inside or outside an async runtime).
    pub fn tool_now(
        &self,
        sandbox: &Sandbox,
        limits: &Limits,
        name: &str,
    ) -> Option<Arc<RegisteredTool>> {
        if let Some(t) = self.loaded(name) {
            return Some(t);
        }
        block_on(|| self.tool(sandbox, limits, name)).flatten()
    }

    /// The tool called `name` if it is loaded already.
    pub fn loaded(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        if let Some(slot) = self.slot(name) {
            return slot.tool.get().cloned();
        }
        if let Some(t) = self.extra.get(name) {
            return Some(t.clone());
        }
        self.plugins.get()?.tools.get(name).cloned()
    }

    fn slot(&self, name: &str) -> Option<&Slot> {
        self.builtins.iter().find(|s| s.name == name)
    }

    async fn builtin_tool(
        &self,
        sandbox: &Sandbox,
        limits: &Limits,
        slot: &Slot,
    ) -> Result<Arc<RegisteredTool>> {
        if let Some(t) = slot.tool.get() {
            return Ok(t.clone());
        }
        let result = match sandbox.load_digest(slot.name, slot.bytes, slot.digest) {
            Ok((loaded, meta)) => register_builtin(sandbox, limits, slot, loaded, meta).await,
            Err(e) => Err(e),
        };
        slot.settle(result)
    }

    /// Scan and load the installed plugins (once).
    async fn scan_plugins(&self, sandbox: &Sandbox, limits: &Limits) -> &Plugins {
        if let Some(p) = self.plugins.get() {
            return p;
        }
        let mut plugins = Plugins::default();
        if let Some(store) = &self.store {
            let (ok, refused) = store.load_all(sandbox, limits).await;
            for tool in ok {
                let name = tool.info.name.clone();
                if self.slot(&name).is_some() || self.extra.contains_key(&name) {
                    plugins.refused.insert(
                        name,
                        "a tool with this name is already loaded; names cannot be shadowed".into(),
                    );
                    continue;
                }
                plugins.tools.insert(name, Arc::new(tool));
            }
            for (name, why) in refused {
                tracing::warn!(plugin = %name, reason = %why, "plugin refused");
                plugins.refused.insert(name, why);
            }
        }
        // If another task scanned meanwhile, its result is kept (both read the same store).
        self.plugins.get_or_init(|| plugins)
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
        let name = info.name.clone();
        if self.slot(&name).is_some() || self.extra.contains_key(&name) {
            return Err(Error::ComponentLoad {
                name,
                message: "a tool with this name is already loaded; names cannot be shadowed".into(),
            });
        }
        self.extra.insert(name, Arc::new(tool));
        Ok(info)
    }

    /// Why the tool `name` could not be served: a plugin refused at load, or a built-in that
    /// failed to load.
    pub fn refused(&self, name: &str) -> Option<String> {
        if let Some(slot) = self.slot(name) {
            return slot.error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        }
        self.plugins.get()?.refused.get(name).cloned()
    }

    /// Whether `name` is a built-in tool's name.
    pub fn is_builtin(&self, name: &str) -> bool {
        self.slot(name).is_some()
    }

    fn builtin_errors(&self) -> Vec<(String, String)> {
        self.builtins
            .iter()
            .filter(|s| s.info.get().is_none())
            .filter_map(|s| Some((s.name.to_string(), self.refused(s.name)?)))
            .collect()
    }

    /// The plugins refused because this user's toolgate did not install them (an untrusted
    /// workspace's shipped plugins), as ignored parts. Reads only the plugins' records.
    pub fn ignored_plugins(&self) -> Vec<crate::policy::Ignored> {
        let unsigned = self.unsigned.get_or_init(|| match &self.store {
            Some(store) => store.unsigned_tools(),
            None => Vec::new(),
        });
        unsigned
            .iter()
            .map(|name| crate::policy::Ignored {
                file: format!(
                    ".toolgate/plugins/{}",
                    name.trim_start_matches(crate::plugins::TOOL_PREFIX)
                ),
                part: format!("plugin `{name}`"),
                reason: crate::plugins::UNSIGNED_RECORD.into(),
            })
            .collect()
    }

    /// Every tool refused (plugins) or not loadable (built-ins), with the reason. Loads the
    /// catalog first.
    pub fn all_refused(&self, sandbox: &Sandbox, limits: &Limits) -> Vec<(String, String)> {
        self.catalog(sandbox, limits);
        let mut out = self.builtin_errors();
        if let Some(p) = self.plugins.get() {
            out.extend(p.refused.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        out.sort();
        out
    }

    /// Make sure every tool is known (loading on a thread of its own if it is not).
    fn catalog(&self, sandbox: &Sandbox, limits: &Limits) {
        let known = self
            .builtins
            .iter()
            .all(|s| s.info.get().is_some() || s.error_set())
            && self.plugins.get().is_some();
        if !known {
            let _ = block_on(|| self.preload(sandbox, limits));
        }
    }

    /// Every tool, by name (built-ins that cannot be loaded are left out, see
    /// [`Registry::all_refused`]).
    pub fn iter(&self, sandbox: &Sandbox, limits: &Limits) -> Vec<&ToolInfo> {
        self.catalog(sandbox, limits);
        let mut all: Vec<&ToolInfo> = self
            .builtins
            .iter()
            .filter_map(|s| s.info.get())
            .chain(self.extra.values().map(|t| &t.info))
            .chain(
                self.plugins
                    .get()
                    .into_iter()
                    .flat_map(|p| p.tools.values().map(|t| &t.info)),
            )
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}

impl Slot {
    fn error_set(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Keep a loaded tool (the first one, if two calls raced) or the reason it failed.
    fn settle(&self, result: Result<RegisteredTool>) -> Result<Arc<RegisteredTool>> {
        match result {
            Ok(tool) => {
                let tool = self.tool.get_or_init(|| Arc::new(tool)).clone();
                let _ = self.info.set(tool.info.clone());
                *self.error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Ok(tool)
            }
            Err(e) => {
                tracing::error!(tool = self.name, error = %e, "built-in tool failed to load");
                *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                Err(e)
            }
        }
    }
}

/// A built-in from its loaded component: its cached self-description if there is one, else
/// asked now (and cached for the next start).
async fn register_builtin(
    sandbox: &Sandbox,
    limits: &Limits,
    slot: &Slot,
    loaded: Loaded,
    meta: Option<ToolMeta>,
) -> Result<RegisteredTool> {
    if let Some(meta) = meta {
        if let Ok(tool) = register(&meta, loaded.clone(), Some(slot.name), true) {
            return Ok(tool);
        }
    }
    let d = sandbox.describe(&loaded, limits).await?;
    let meta = meta_of(&d, &loaded.imports);
    let tool = register(&meta, loaded, Some(slot.name), true)?;
    sandbox.record_meta(slot.digest, &meta);
    Ok(tool)
}

/// Run a future to completion from synchronous code, on a scoped thread with a runtime of its
/// own (the caller may be inside an async runtime, even a single-threaded one). `None` if no
/// runtime could be started.
fn block_on<F, Fut>(make: F) -> Option<Fut::Output>
where
    F: FnOnce() -> Fut + Send,
    Fut: std::future::Future,
    Fut::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            Some(rt.block_on(make()))
        })
        .join()
        .ok()
        .flatten()
    })
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
    let d = sandbox.describe(&loaded, limits).await?;
    let meta = meta_of(&d, &loaded.imports);
    register(&meta, loaded, expected_name, builtin)
}

/// What a component said about itself, as kept beside its artifact.
fn meta_of(d: &wit::Descriptor, imports: &[String]) -> ToolMeta {
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
fn register(
    meta: &ToolMeta,
    loaded: Loaded,
    expected_name: Option<&str>,
    builtin: bool,
) -> Result<RegisteredTool> {
    let mut info = view(meta, expected_name, builtin, &loaded.digest)?;
    info.imports = loaded.imports.clone();
    let validator =
        jsonschema::validator_for(&info.input_schema).map_err(|e| Error::ComponentLoad {
            name: info.name.clone(),
            message: format!("its input schema is not a valid JSON Schema: {e}"),
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
fn view(
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn build_time_digests_are_the_sha256_of_the_builtins() {
        assert_eq!(BUILTINS.len(), BUILTIN_DIGESTS.len());
        for ((name, bytes), digest) in BUILTINS.iter().zip(BUILTIN_DIGESTS) {
            assert_eq!(hex::encode(Sha256::digest(bytes)), *digest, "{name}");
        }
    }

    #[test]
    fn the_builtin_enum_names_every_builtin() {
        let names: Vec<&str> = BUILTINS.iter().map(|(name, _)| *name).collect();
        let kinds: Vec<&str> = crate::tools::Builtin::ALL
            .iter()
            .map(|b| b.as_str())
            .collect();
        assert_eq!(names, kinds);
    }
}
