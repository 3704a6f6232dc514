//! Where a walk starts: the guest's start path resolved inside the call's preopens, with its
//! real and lexical workspace-relative paths.

use super::WalkScope;
use crate::workspace::{Access, GUEST_ROOT};
use std::path::{Path, PathBuf};

/// A start path resolved inside a preopen.
#[derive(Clone)]
pub(super) struct Start {
    /// Its canonical host path.
    pub(super) host: PathBuf,
    /// The canonical root of the outermost preopen holding it (the walk opens its way down
    /// from there).
    pub(super) top: PathBuf,
    /// Its real workspace-relative path (for the deny-list), `None` when unguarded.
    pub(super) real_rel: Option<String>,
    /// Its lexical workspace-relative path as the guest names it (for the extra globs).
    pub(super) lexical_rel: String,
}

impl WalkScope {
    /// Resolve the guest's `start` to a directory inside one of the call's preopens.
    pub(super) fn resolve(&self, start: &str) -> Result<Start, String> {
        if !start.starts_with('/') {
            return Err(format!(
                "`{start}` is not an absolute sandbox path: pass the directory as the tool sees it, e.g. {GUEST_ROOT}/src"
            ));
        }
        let parts: Vec<&str> = start
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if parts.contains(&"..") {
            return Err(format!(
                "`{start}` contains `..`: pass the directory itself, inside the workspace"
            ));
        }
        let guest = format!("/{}", parts.join("/"));
        let lexical_rel = match guest.strip_prefix(GUEST_ROOT) {
            Some("") => String::new(),
            Some(rest) if rest.starts_with('/') => rest[1..].to_string(),
            _ => guest.clone(),
        };
        // A denied name is refused before the filesystem is asked anything, so the answer does
        // not tell whether it exists.
        if let Some(deny) = &self.deny {
            if deny.denied(&lexical_rel, 0, Access::Read) {
                return Err(format!(
                    "`{start}` is denied to tools (a secret or the host's state directory)"
                ));
            }
        }
        let preopen = self
            .preopens
            .iter()
            .filter(|p| {
                let g: Vec<&str> = p.guest.split('/').filter(|c| !c.is_empty()).collect();
                parts.starts_with(&g)
            })
            .max_by_key(|p| p.guest.split('/').filter(|c| !c.is_empty()).count())
            .ok_or_else(|| {
                format!("`{start}` is outside every directory this call was granted: walk inside {GUEST_ROOT}")
            })?;
        let depth = preopen.guest.split('/').filter(|c| !c.is_empty()).count();
        let mut host = preopen.host.clone();
        for part in &parts[depth..] {
            host.push(part);
        }
        let root = preopen
            .host
            .canonicalize()
            .map_err(|e| format!("`{start}` cannot be listed: {e}"))?;
        let canonical = host
            .canonicalize()
            .map_err(|e| format!("`{start}` cannot be listed: {e}"))?;
        if !canonical.starts_with(&root) {
            return Err(format!(
                "`{start}` leads outside the directory this call was granted (a symlink?): walk the real directory inside the workspace"
            ));
        }
        if !canonical.is_dir() {
            return Err(format!("`{start}` is not a directory"));
        }
        let real_rel = match &self.deny {
            Some(deny) => {
                let rel = canonical
                    .strip_prefix(deny.host_root())
                    .map_err(|_| {
                        format!("`{start}` is outside the workspace and cannot be listed")
                    })?
                    .to_str()
                    .ok_or_else(|| format!("`{start}` is not valid UTF-8"))?
                    .to_string();
                if deny.denied(&rel, 0, Access::Read) {
                    return Err(format!(
                        "`{start}` is denied to tools (a secret or the host's state directory)"
                    ));
                }
                Some(rel)
            }
            None => None,
        };
        // The walk opens its way down from the outermost preopen holding the start (whose
        // ignore files count as the start's parents').
        let top = self
            .preopens
            .iter()
            .filter_map(|p| p.host.canonicalize().ok())
            .filter(|p| canonical.starts_with(p))
            .min_by_key(|p| p.components().count())
            .unwrap_or(root);
        Ok(Start {
            host: canonical,
            top,
            real_rel,
            lexical_rel,
        })
    }

    /// The workspace-relative path of the directory at `host` (a canonical path), for the
    /// deny-list; `None` when there is no deny-list or it is not inside the workspace.
    pub(super) fn real_rel_of(&self, host: &Path) -> Option<String> {
        let deny = self.deny.as_ref()?;
        host.strip_prefix(deny.host_root())
            .ok()?
            .to_str()
            .map(str::to_string)
    }
}
