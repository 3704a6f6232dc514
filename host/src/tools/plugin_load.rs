//! Installed plugins as tools: a plugin's component checked (digest, imports against its
//! grant, self-description) when it is installed and at every load.

use super::descriptor::{describe, RegisteredTool, Risk, ToolInfo};
use crate::error::{Error, Result};
use crate::plugins::{
    check_imports, read_record, sha256_hex, tool_name, write_record, Manifest, PluginGrant,
    PluginStore, Record, COMPONENT_FILE, RECORD_FILE, UNSIGNED_RECORD,
};
use crate::sandbox::{Limits, Loaded, Sandbox};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A component checked and ready to be written by [`PendingInstall::commit`].
pub struct PendingInstall {
    /// The record that will be written.
    pub record: Record,
    /// What the component imports.
    pub imports: Vec<String>,
    /// Its self-description.
    pub tool: ToolInfo,
    /// Whether a plugin of this name is installed already (and will be replaced).
    pub replaces: Option<Record>,
    bytes: Vec<u8>,
    dir: PathBuf,
    /// Why the manifest has no digest, if it has none: shown to the user.
    pub unsigned: bool,
}

impl PluginStore {
    /// Check a component and its manifest without writing anything. The user is shown the
    /// result and then [`PendingInstall::commit`] writes it.
    pub async fn prepare(
        &self,
        sandbox: &Sandbox,
        limits: &Limits,
        component: &Path,
        manifest: &Path,
    ) -> Result<PendingInstall> {
        let text = std::fs::read_to_string(manifest).map_err(|e| Error::io(manifest, e))?;
        let bytes = std::fs::read(component).map_err(|e| Error::io(component, e))?;
        let source = std::fs::canonicalize(component).unwrap_or_else(|_| component.to_path_buf());
        let (label, origin) = (
            component.display().to_string(),
            manifest.display().to_string(),
        );
        let source = source.display().to_string();
        self.prepare_bytes(sandbox, limits, (&label, &origin, &source), &text, bytes)
            .await
    }

    /// [`PluginStore::prepare`] for a component and manifest already in memory (pulled from a
    /// registry): `names` is (the component's label, the manifest's, the recorded source).
    pub async fn prepare_bytes(
        &self,
        sandbox: &Sandbox,
        limits: &Limits,
        (label, origin, source): (&str, &str, &str),
        text: &str,
        bytes: Vec<u8>,
    ) -> Result<PendingInstall> {
        let m = Manifest::parse(origin, text).map_err(|message| Error::Plugin {
            name: label.to_string(),
            message,
        })?;
        let digest = sha256_hex(&bytes);
        if let Some(expected) = &m.sha256 {
            if !expected.eq_ignore_ascii_case(&digest) {
                return Err(Error::Plugin {
                    name: m.name.clone(),
                    message: format!(
                        "{label} has sha256 {digest}, but the manifest says {expected}: this is not the component the manifest describes"
                    ),
                });
            }
        }
        let record = Record {
            name: m.name.clone(),
            version: m.version.clone(),
            description: m.description.clone(),
            wit: m.wit.clone(),
            sha256: digest,
            source: source.to_string(),
            granted: m.capabilities.clone(),
            capabilities: m.capabilities.clone(),
            limits: m.limits.clone(),
            signature: None,
        };
        let mut record = record;
        self.sign(&mut record)?;
        let (loaded, tool) = load_checked(sandbox, limits, &record, &bytes).await?;
        let dir = self.dir().join(&record.name);
        let replaces = if dir.join(RECORD_FILE).exists() {
            read_record(&dir.join(RECORD_FILE)).ok()
        } else {
            None
        };
        Ok(PendingInstall {
            imports: loaded.imports.clone(),
            tool: tool.info,
            unsigned: m.sha256.is_none(),
            record,
            replaces,
            bytes,
            dir,
        })
    }

    /// Load every installed plugin: the ones that pass every check, and the refused ones with
    /// the reason.
    pub async fn load_all(
        &self,
        sandbox: &Sandbox,
        limits: &Limits,
    ) -> (Vec<RegisteredTool>, Vec<(String, String)>) {
        let mut ok = Vec::new();
        let mut refused = Vec::new();
        for (dir_name, record) in self.list() {
            let served = tool_name(&dir_name);
            let record = match record {
                Ok(r) if r.name == dir_name => r,
                Ok(r) => {
                    refused.push((
                        served,
                        format!(
                            "its record calls it `{}` but it is installed as `{dir_name}`; reinstall it with `toolgate plugin add`",
                            r.name
                        ),
                    ));
                    continue;
                }
                Err(why) => {
                    refused.push((served, why));
                    continue;
                }
            };
            if !self.trust_all() && !self.verified(&record) {
                refused.push((
                    served,
                    format!("{UNSIGNED_RECORD}; review it with `toolgate plugin list` and adopt it with `toolgate trust`, or reinstall it with `toolgate plugin add`"),
                ));
                continue;
            }
            let file = self.dir().join(&dir_name).join(COMPONENT_FILE);
            let bytes = match std::fs::read(&file) {
                Ok(b) => b,
                Err(e) => {
                    refused.push((
                        served,
                        format!(
                            "{}: {e}; reinstall it with `toolgate plugin add`",
                            file.display()
                        ),
                    ));
                    continue;
                }
            };
            let digest = sha256_hex(&bytes);
            if digest != record.sha256 {
                refused.push((
                    served,
                    format!(
                        "{} has sha256 {digest} but {} was recorded at install: the component changed since it was installed and is refused; reinstall it with `toolgate plugin add` if the change is yours",
                        file.display(),
                        record.sha256
                    ),
                ));
                continue;
            }
            match load_checked(sandbox, limits, &record, &bytes).await {
                Ok((_, tool)) => ok.push(tool),
                Err(e) => refused.push((served, e.to_string())),
            }
        }
        (ok, refused)
    }
}

impl PendingInstall {
    /// Write the component and its record (each atomically).
    pub fn commit(self) -> Result<Record> {
        crate::workspace::layout::ensure_state_dir(&self.dir).map_err(|e| Error::Plugin {
            name: self.record.name.clone(),
            message: crate::fsutil::plain_error(&e),
        })?;
        let component = self.dir.join(COMPONENT_FILE);
        crate::fsutil::write_atomic(&component, &self.bytes)
            .map_err(|e| Error::io(&component, e))?;
        write_record(&self.dir, &self.record)?;
        Ok(self.record)
    }
}

/// Compile, check the imports against the effective grant, and read the self-description.
async fn load_checked(
    sandbox: &Sandbox,
    limits: &Limits,
    record: &Record,
    bytes: &[u8],
) -> Result<(Loaded, RegisteredTool)> {
    let grant = PluginGrant::effective(record)?;
    let loaded = sandbox
        .load(&tool_name(&record.name), bytes)
        .map_err(|e| Error::Plugin {
            name: record.name.clone(),
            message: match e {
                Error::ComponentLoad { message, .. } => message,
                other => other.to_string(),
            },
        })?;
    check_imports(&loaded.imports, &grant).map_err(|message| Error::Plugin {
        name: record.name.clone(),
        message,
    })?;
    let tool = describe_plugin(sandbox, limits, loaded.clone(), grant).await?;
    Ok((loaded, tool))
}

/// Describe a plugin component: its own name must be the manifest's, it is served as
/// `plugin__NAME`, and its risk also reflects what its grant lets it do.
async fn describe_plugin(
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
    tool.info.name = tool_name(&grant.name);
    tool.info.plugin = Some(grant.name.clone());
    tool.plugin = Some(Arc::new(grant));
    Ok(tool)
}
