//! Third-party plugins: a stranger's component plus its manifest, installed into the workspace
//! under `.toolgate/plugins/NAME/` (`component.wasm` and `plugin.toml`).
//!
//! - **Install** (`toolgate plugin add`): the manifest is validated, the component's sha256
//!   checked against it (when it names one), the component compiled, its imports checked
//!   against what it asks for, and its self-description read. The user sees all of that before
//!   anything is written. The record keeps the digest and what the user granted.
//! - **Load** (every start): a component whose bytes no longer match the recorded digest, or
//!   that imports an interface the grant does not cover, is refused, and calling it says why.
//! - **Call**: the plugin gets the intersection of what its manifest requests and what the user
//!   granted: read-only preopens for `fs_read`, writable ones for `fs_write` (both only inside
//!   the workspace, with the secrets deny-list and `.toolgate/` guarded at the WASI boundary),
//!   HTTP to hosts on both lists (through the host, see [`crate::sandbox::net`]), the named
//!   environment variables, limits capped by the policy. Plugin tools are never
//!   "no-permission" tools: every call walks the ladder, keyed `plugin__NAME[:target]`.
//!
//! The install and load steps that end in a registry entry (compiling the component and reading
//! its self-description: [`PluginStore::prepare`], [`PluginStore::load_all`]) are written beside
//! the registry, in [`crate::tools::plugin_load`]; this module keeps the records and grants.

pub mod imports;
pub mod manifest;
pub mod oci;

use crate::error::{Error, Result};
use crate::sandbox::net::HostPattern;
use crate::sandbox::Limits;
pub use imports::check_imports;
pub use manifest::{CapabilitySet, Manifest, PluginLimits};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every plugin tool's name starts with this, so no plugin can shadow a built-in (or, since
/// plugin names are unique, another plugin).
pub const TOOL_PREFIX: &str = "plugin__";

/// The file a plugin directory's record lives in.
pub const RECORD_FILE: &str = "plugin.toml";
/// The installed copy of the component.
pub const COMPONENT_FILE: &str = "component.wasm";

/// The served tool name of plugin `name`.
pub fn tool_name(name: &str) -> String {
    format!("{TOOL_PREFIX}{name}")
}

/// What `plugin add` writes: the manifest as installed, plus the digest and the grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// The WIT world it implements.
    pub wit: String,
    /// Hex sha256 of `component.wasm` at install: checked at every load.
    pub sha256: String,
    /// Where the component was installed from.
    #[serde(default)]
    pub source: String,
    /// What the manifest requests.
    #[serde(default)]
    pub capabilities: CapabilitySet,
    /// What the user granted. A call gets what is in both; editing this by hand can only
    /// narrow what the plugin gets.
    #[serde(default)]
    pub granted: CapabilitySet,
    /// The manifest's limits.
    #[serde(default)]
    pub limits: PluginLimits,
    /// This user's toolgate's signature over the workspace, the name, the digest and the
    /// requested capabilities: a record a repository shipped has none that verifies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Why a plugin is refused when its record was not written by this user's toolgate; the gate
/// lists these among the ignored parts of an untrusted workspace.
pub const UNSIGNED_RECORD: &str = "was not installed by your toolgate (its record has no valid signature), so the repository may have shipped it";

/// What one plugin call may have: the intersection of request and grant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginGrant {
    /// The plugin's name (without the prefix).
    pub name: String,
    /// Workspace-relative paths it may read.
    pub fs_read: Vec<String>,
    /// Workspace-relative paths it may write.
    pub fs_write: Vec<String>,
    /// `[requested, granted]` host lists; a request must match both. Empty: no network.
    pub http: Vec<Vec<HostPattern>>,
    /// Environment variable names it sees.
    pub env: Vec<String>,
    /// Its limits from the manifest (the gate caps them at the policy's).
    pub limits: PluginLimits,
}

impl PluginGrant {
    /// Requested ∩ granted.
    pub fn effective(record: &Record) -> Result<PluginGrant> {
        let (fs_read, fs_write, env) = record.capabilities.intersect_paths_and_env(&record.granted);
        let parse = |list: &[String]| -> Result<Vec<HostPattern>> {
            list.iter()
                .map(|h| {
                    HostPattern::parse(h).map_err(|m| Error::Plugin {
                        name: record.name.clone(),
                        message: format!("http pattern {m}"),
                    })
                })
                .collect()
        };
        let requested = parse(&record.capabilities.http)?;
        let granted = parse(&record.granted.http)?;
        let http = if requested.is_empty() || granted.is_empty() {
            Vec::new()
        } else {
            vec![requested, granted]
        };
        Ok(PluginGrant {
            name: record.name.clone(),
            fs_read,
            fs_write,
            http,
            env,
            limits: record.limits.clone(),
        })
    }

    /// The limits of a call: the policy's, lowered (never raised) by the manifest's.
    pub fn limits(&self, policy: &Limits) -> Limits {
        let mut l = policy.clone();
        if let Some(ms) = self.limits.timeout_ms {
            l.timeout = l.timeout.min(Duration::from_millis(ms));
        }
        if let Some(mb) = self.limits.memory_mb {
            let bytes = usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
            l.max_memory_bytes = l.max_memory_bytes.min(bytes);
        }
        if let Some(b) = self.limits.max_output_bytes {
            l.max_output_bytes = l
                .max_output_bytes
                .min(usize::try_from(b).unwrap_or(usize::MAX));
        }
        l
    }
}

/// Hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The plugins installed in one workspace.
pub struct PluginStore {
    dir: PathBuf,
    keyring: Option<std::sync::Arc<crate::policy::trust::Keyring>>,
    workspace: String,
    trust_all: bool,
}

impl PluginStore {
    /// The store of the workspace whose state directory is `state_dir` (`.toolgate/`).
    /// Without a key nothing verifies: every installed plugin is refused. Use
    /// [`PluginStore::signed`] for a real workspace.
    pub fn new(state_dir: &Path) -> Self {
        PluginStore {
            dir: state_dir.join(crate::workspace::layout::PLUGINS_DIR),
            keyring: None,
            workspace: String::new(),
            trust_all: false,
        }
    }

    /// The store of `workspace`, whose records are signed and verified with `keyring`;
    /// `trust_all` loads unsigned records too (`--trust-workspace`).
    pub fn signed(
        state_dir: &Path,
        workspace: &Path,
        keyring: std::sync::Arc<crate::policy::trust::Keyring>,
        trust_all: bool,
    ) -> Self {
        PluginStore {
            dir: state_dir.join(crate::workspace::layout::PLUGINS_DIR),
            keyring: Some(keyring),
            workspace: workspace.to_string_lossy().into_owned(),
            trust_all,
        }
    }

    fn signed_parts(&self, r: &Record) -> Vec<String> {
        vec![
            "toolgate-plugin-v1".into(),
            self.workspace.clone(),
            r.name.clone(),
            r.sha256.clone(),
            serde_json::to_string(&r.capabilities).unwrap_or_default(),
        ]
    }

    /// Whether this user's toolgate signed `r` (for this workspace, name, digest and request).
    pub(crate) fn verified(&self, r: &Record) -> bool {
        let parts = self.signed_parts(r);
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        match (&self.keyring, &r.signature) {
            (Some(k), Some(sig)) => k.verify(&parts, sig),
            _ => false,
        }
    }

    /// Sign `r` with this user's key (nothing without a key).
    pub(crate) fn sign(&self, r: &mut Record) -> Result<()> {
        let Some(k) = &self.keyring else {
            return Ok(());
        };
        let parts = self.signed_parts(r);
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        r.signature = Some(k.sign(&parts).map_err(|message| Error::Plugin {
            name: r.name.clone(),
            message,
        })?);
        Ok(())
    }

    /// The installed plugins whose records this user's toolgate did not sign.
    pub fn unsigned(&self) -> Vec<Record> {
        self.list()
            .into_iter()
            .filter_map(|(_, r)| r.ok())
            .filter(|r| !self.verified(r))
            .collect()
    }

    /// The served names of the plugins [`PluginStore::load_all`] refuses with
    /// [`UNSIGNED_RECORD`], from their records alone (no component is read or compiled).
    pub fn unsigned_tools(&self) -> Vec<String> {
        if self.trust_all {
            return Vec::new();
        }
        self.list()
            .into_iter()
            .filter_map(|(dir_name, r)| match r {
                Ok(r) if r.name == dir_name && !self.verified(&r) => Some(tool_name(&dir_name)),
                _ => None,
            })
            .collect()
    }

    /// Sign every readable record that is not signed yet: the user adopts those plugins
    /// (their digests are still checked at every load). Returns how many.
    pub fn adopt_all(&self) -> Result<usize> {
        let mut n = 0;
        for mut r in self.unsigned() {
            self.sign(&mut r)?;
            write_record(&self.dir.join(&r.name), &r)?;
            n += 1;
        }
        Ok(n)
    }

    /// Where plugins are kept.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether unsigned records load too (`--trust-workspace`).
    pub(crate) fn trust_all(&self) -> bool {
        self.trust_all
    }

    /// Every installed plugin's record (or why it cannot be read), by name.
    pub fn list(&self) -> Vec<(String, std::result::Result<Record, String>)> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().to_string();
            out.push((name, read_record(&path.join(RECORD_FILE))));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Remove a plugin. `Ok(false)` when none of that name is installed.
    pub fn remove(&self, name: &str) -> Result<bool> {
        let name = name.strip_prefix(TOOL_PREFIX).unwrap_or(name);
        if !manifest::valid_plugin_name(name) {
            return Ok(false);
        }
        let dir = self.dir.join(name);
        if !dir.exists() {
            return Ok(false);
        }
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(true)
    }
}
/// Write `record` into the plugin directory `dir` atomically.
pub(crate) fn write_record(dir: &Path, record: &Record) -> Result<()> {
    {
        let body = toml::to_string_pretty(record).map_err(|e| Error::Plugin {
            name: record.name.clone(),
            message: format!("the record cannot be written: {e}"),
        })?;
        let text = format!(
            "# Written by `toolgate plugin add`; checked at every load.\n\
             # [capabilities] is what the manifest requests, [granted] what you allowed: a call gets\n\
             # only what is in both, so editing [granted] can narrow the plugin, never widen it.\n\
             # `sha256` is the digest of component.wasm: a changed component is refused.\n\n{body}"
        );
        let path = dir.join(RECORD_FILE);
        crate::fsutil::write_atomic(&path, text.as_bytes()).map_err(|e| Error::io(&path, e))?;
        Ok(())
    }
}

/// Read and check the record at `path`; the error says how to fix it.
pub(crate) fn read_record(path: &Path) -> std::result::Result<Record, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{}: {e}; reinstall it with `toolgate plugin add` or remove it",
            path.display()
        )
    })?;
    let record: Record = toml::from_str(&text).map_err(|e| {
        format!(
            "{}: {}; fix it, reinstall with `toolgate plugin add`, or `toolgate plugin remove` it",
            path.display(),
            e.message()
        )
    })?;
    let problems = [
        record.capabilities.validate("capabilities"),
        record.granted.validate("granted"),
    ];
    for p in problems {
        p.map_err(|m| format!("{}: {m}", path.display()))?;
    }
    if !manifest::valid_plugin_name(&record.name) {
        return Err(format!(
            "{}: name `{}` is not valid",
            path.display(),
            record.name
        ));
    }
    if !manifest::SUPPORTED_WIT.contains(&record.wit.as_str()) {
        return Err(format!(
            "{}: wit `{}` is not supported by this host",
            path.display(),
            record.wit
        ));
    }
    Ok(record)
}
