//! The registry: every tool component loaded once (when first needed), its self-description
//! checked and turned into the host's own view of it. A description can only make the host
//! stricter.

pub use super::descriptor::{Ceiling, PathUse, RegisteredTool, Risk, ToolInfo};
pub use crate::plugins::imports::EXEC_INTERFACE_PREFIX;

use super::descriptor::{describe, meta_of, register, view};
use crate::error::{Error, Result};
use crate::plugins::PluginStore;
use crate::sandbox::{Limits, Loaded, Sandbox, ToolMeta};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// The built-ins from the one table of them (`host/builtins.toml`, whose rows `host/build.rs`
/// writes into `$OUT_DIR/builtins.rs`): the name each is served as and its artifact's stem,
/// in the order of [`crate::tools::Builtin::ALL`]; it gives [`BUILTINS`] and their digests.
macro_rules! builtins {
    ($($variant:ident => $name:literal, $stem:literal, $summary:literal;)*) => {
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

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));

/// The built-ins' second components (`parts` in `host/builtins.toml`): the tool each is a part
/// of, what it reads, its bytes and digest.
macro_rules! parts {
    ($($of:literal => $stem:literal, $what:literal;)*) => {
        const PARTS: &[(&str, &str, &[u8], &str)] = &[$((
            $of,
            $what,
            include_bytes!(concat!(env!("TOOLGATE_GUEST_DIR"), "/", $stem, ".wasm")),
            env!(concat!("TOOLGATE_SHA256_", $stem)),
        )),*];
    };
}

include!(concat!(env!("OUT_DIR"), "/parts.rs"));

/// The error code with which a built-in's component hands a call to its part (the guest
/// side's `toolgate_reading::HAND_OFF`).
pub const HAND_OFF: &str = "hand-off";

/// Where the guest build put its components (test guests included).
#[doc(hidden)]
pub const GUEST_ARTIFACT_DIR: &str = env!("TOOLGATE_GUEST_DIR");

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

/// A built-in's second component: run, with the same call and capabilities, when the tool's
/// own component answers [`HAND_OFF`]; compiled on its first use.
struct Part {
    of: &'static str,
    what: &'static str,
    bytes: &'static [u8],
    digest: &'static str,
    loaded: OnceLock<Loaded>,
}

impl Part {
    /// How it is named on stderr and in errors: `read for images and PDFs`.
    fn label(&self) -> String {
        format!("{} for {}", self.of, self.what)
    }
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
    parts: Vec<Part>,
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
            parts: PARTS
                .iter()
                .map(|&(of, what, bytes, digest)| Part {
                    of,
                    what,
                    bytes,
                    digest,
                    loaded: OnceLock::new(),
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
    /// described on this machine) and the installed plugins. The built-ins' parts never
    /// compiled on this machine are compiled in the same batch (a server's first image read
    /// then waits for nothing); they are checked against their tool on first use.
    pub async fn preload(&self, sandbox: &Sandbox, limits: &Limits) {
        let parts: Vec<&Part> = self
            .parts
            .iter()
            .filter(|p| p.loaded.get().is_none() && sandbox.cached_meta(p.digest).is_none())
            .collect();
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
        // Compile what is missing side by side, then describe each.
        let labels: Vec<String> = parts.iter().map(|p| p.label()).collect();
        let items: Vec<(&str, &[u8], &str)> = parts
            .iter()
            .zip(&labels)
            .map(|(p, label)| (label.as_str(), p.bytes, p.digest))
            .chain(missing.iter().map(|s| (s.name, s.bytes, s.digest)))
            .collect();
        let mut parts_loaded = sandbox.load_many(&items);
        let loaded = parts_loaded.split_off(parts.len());
        let parts_loaded = parts_loaded.into_iter().map(|r| r.ok().map(|(l, _)| l));
        // A part's description is recorded beside its artifact; what it may do is checked
        // against its tool when it is first run (`Registry::part`), as ever.
        for (part, loaded) in parts.iter().zip(parts_loaded) {
            if let Some(loaded) = loaded {
                let _ = describe_now(sandbox, limits, &loaded, part.digest).await;
            }
        }
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
        // A name that is no built-in, no extra component and no plugin of a finished scan is
        // no tool: said at once, not after a thread and a runtime of its own (~300 µs a call).
        if self.slot(name).is_none() && self.plugins.get().is_some() {
            return None;
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

    /// The component that answers for the built-in `tool` when its own hands a call over
    /// ([`HAND_OFF`]): its part, compiled on first use (saying so on stderr, as a tool's first
    /// use does) and checked to describe itself exactly as `tool` does, so it can be given
    /// the call `tool` was allowed. `None` when `tool` has no part; a plugin never has one.
    pub async fn part(
        &self,
        sandbox: &Sandbox,
        limits: &Limits,
        tool: &RegisteredTool,
    ) -> Option<Result<Loaded>> {
        if !tool.info.builtin {
            return None;
        }
        let part = self.parts.iter().find(|p| p.of == tool.info.name)?;
        if let Some(loaded) = part.loaded.get() {
            return Some(Ok(loaded.clone()));
        }
        let label = part.label();
        let result = async {
            let (loaded, meta) = sandbox.load_digest(&label, part.bytes, part.digest)?;
            let meta = match meta {
                Some(meta) => meta,
                None => describe_now(sandbox, limits, &loaded, part.digest).await?,
            };
            let theirs = register(&meta, loaded.clone(), Some(part.of), true)?.info;
            let ours = &tool.info;
            if (
                &theirs.description,
                &theirs.input_schema,
                theirs.risk,
                &theirs.path_fields,
                theirs.ceiling,
            ) != (
                &ours.description,
                &ours.input_schema,
                ours.risk,
                &ours.path_fields,
                ours.ceiling,
            ) {
                return Err(Error::ComponentLoad {
                    name: label.clone(),
                    message: format!(
                        "it does not describe itself as `{}` does (description, input schema, risk, path fields and scope must be the same); this toolgate binary is broken, reinstall it",
                        part.of
                    ),
                });
            }
            Ok(part.loaded.get_or_init(|| loaded).clone())
        }
        .await;
        if let Err(e) = &result {
            tracing::error!(tool = part.of, part = part.what, error = %e, "a built-in's part failed to load");
        }
        Some(result)
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

    /// Load an extra component from a file (`--component`, e.g. a test guest).
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
    let meta = describe_now(sandbox, limits, &loaded, slot.digest).await?;
    register(&meta, loaded, Some(slot.name), true)
}

/// `loaded`'s self-description, asked now and recorded beside its artifact (`digest`) for the
/// next start. Every check of a description applies to a recorded one too (`view`,
/// `register`), so what is recorded before it is checked grants nothing.
async fn describe_now(
    sandbox: &Sandbox,
    limits: &Limits,
    loaded: &Loaded,
    digest: &str,
) -> Result<ToolMeta> {
    let d = sandbox.describe(loaded, limits).await?;
    let meta = meta_of(&d, &loaded.imports);
    sandbox.record_meta(digest, &meta);
    Ok(meta)
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

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
