//! `[plugins]`: whether plugins from a registry must be signed, and by whose keys.
//!
//! ```toml
//! [plugins]
//! require_signature = true
//! trusted_keys = ["~/.config/toolgate/keys/team.pub"]   # relative: to this policy file
//! ```
//!
//! Layers: the user's policy, `--policy` and the managed policy may set both. The managed
//! policy's `require_signature = true` cannot be turned off below it, and its `trusted_keys`
//! are the only keys that count. A workspace's own policy may only turn `require_signature`
//! on; it never adds trusted keys, trusted or not (a key file a repository names could be
//! replaced by the repository after you trusted its policy).

use super::LayerKind;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct PluginsFile {
    require_signature: Option<bool>,
    trusted_keys: Option<Vec<PathBuf>>,
}

/// The `[plugins]` settings in force.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginsPolicy {
    /// Every `plugin add` must verify a signature with one of [`PluginsPolicy::trusted_keys`].
    pub require_signature: bool,
    /// The layer that turned [`PluginsPolicy::require_signature`] on.
    pub required_by: Option<String>,
    /// Public keys (PEM files, absolute) whose signatures are trusted.
    pub trusted_keys: Vec<PathBuf>,
}

/// Resolve `~/` and relative key paths against the policy file's directory.
pub(super) fn resolve(mut f: PluginsFile, origin: &str) -> PluginsFile {
    let dir = Path::new(origin)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(keys) = &mut f.trusted_keys {
        for k in keys.iter_mut() {
            if let (Ok(rest), Some(h)) = (k.strip_prefix("~"), &home) {
                *k = h.join(rest);
            } else if k.is_relative() {
                *k = dir.join(&*k);
            }
        }
    }
    f
}

/// Apply one layer's `[plugins]`; `strict_only` for an untrusted layer.
pub(super) fn apply(
    p: &mut PluginsPolicy,
    f: &PluginsFile,
    (origin, kind, strict_only): (&str, LayerKind, bool),
    applied: &mut Vec<String>,
    ignore: &mut dyn FnMut(String, String),
) {
    let ceiling = kind == LayerKind::Managed;
    if let Some(v) = f.require_signature {
        let part = format!("[plugins] require_signature = {v}");
        if v {
            p.require_signature = true;
            p.required_by = Some(origin.to_string());
            applied.push(part);
        } else if strict_only || ceiling {
            ignore(part, "would drop a signature requirement".into());
        } else {
            p.require_signature = false;
            p.required_by = None;
            applied.push(part);
        }
    }
    if let Some(keys) = &f.trusted_keys {
        let part = format!(
            "[plugins] trusted_keys = {:?}",
            keys.iter()
                .map(|k| k.display().to_string())
                .collect::<Vec<_>>()
        );
        if kind == LayerKind::Workspace {
            if !keys.is_empty() {
                ignore(
                    part,
                    "a workspace never chooses whose plugins you trust; name keys in your user policy".into(),
                );
            }
        } else if ceiling {
            p.trusted_keys = keys.clone();
            applied.push(format!("{part} (the only keys that count)"));
        } else {
            for k in keys {
                if !p.trusted_keys.contains(k) {
                    p.trusted_keys.push(k.clone());
                }
            }
            applied.push(part);
        }
    }
}

#[cfg(test)]
#[path = "plugins_tests.rs"]
mod tests;
