//! What the user has trusted, kept outside every workspace.
//!
//! - [`TrustStore`]: `$XDG_CONFIG_HOME/toolgate/trust.toml` records, per canonical workspace
//!   path, the sha256 of the workspace policy the user looked at and trusted (`toolgate trust`).
//!   and of every workspace file that policy makes the host run or read (hook programs and
//!   their file arguments, language servers': see [`super::hooks::named_files`]). A change
//!   to any of them makes the workspace untrusted again.
//! - [`Keyring`]: a per-user secret key (`signing.key`, 0600) that signs the host state
//!   toolgate itself writes into a workspace: project grants, plugin records and session
//!   grants. An entry a repository shipped (or anyone else wrote) carries no valid signature
//!   and is ignored, because the key never enters a workspace.
//!
//! Every file here is read without following a symlink and only when it is a regular file,
//! and written atomically with mode 0600.

pub use crate::state::keyring::{sha256_hex, Keyring};
pub use crate::workspace::layout::{kind_of, read_state_file, MAX_STATE_FILE_BYTES};

use crate::state::keyring::write_private;
use std::path::{Path, PathBuf};

/// One trusted workspace policy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustEntry {
    /// The canonical workspace path.
    pub path: String,
    /// sha256 of `.toolgate/policy.toml` as the user saw it.
    pub policy_sha256: String,
    /// When (milliseconds since the epoch).
    #[serde(default)]
    pub at_ms: i64,
    /// The workspace files the policy binds, as the user saw them. A record written before
    /// toolgate bound files has none: a policy that binds a file is then untrusted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<super::hooks::BoundFile>,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    #[serde(default)]
    workspace: Vec<TrustEntry>,
}

/// `trust.toml` in the user's config directory.
#[derive(Clone, Debug)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store in `config_dir`.
    pub fn new(config_dir: &Path) -> Self {
        TrustStore {
            path: config_dir.join("trust.toml"),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn entries(&self) -> Result<Vec<TrustEntry>, String> {
        let Some(bytes) = read_state_file(&self.path)? else {
            return Ok(Vec::new());
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{} is not UTF-8 text", self.path.display()))?;
        let file: TrustFile = toml::from_str(&text).map_err(|e| {
            format!(
                "{} is malformed: {} (fix it or delete it; every workspace is then untrusted)",
                self.path.display(),
                e.message()
            )
        })?;
        Ok(file.workspace)
    }

    /// The recorded entry for `workspace`, if any.
    pub fn entry(&self, workspace: &Path) -> Result<Option<TrustEntry>, String> {
        let key = workspace.to_string_lossy();
        Ok(self.entries()?.into_iter().find(|e| e.path == key))
    }

    /// Whether `workspace`'s recorded policy hash is `sha256` (the files it binds are checked
    /// by [`super::Policy::workspace_layer`]).
    pub fn is_trusted(&self, workspace: &Path, sha256: &str) -> bool {
        matches!(self.entry(workspace), Ok(Some(e)) if e.policy_sha256 == sha256)
    }

    /// Record `workspace`'s policy hash as trusted (replacing an older entry), with the files
    /// that policy binds as they are now (none when the policy on disk is not `sha256`).
    /// `toolgate trust` records what it showed instead ([`TrustStore::trust_shown`]).
    pub fn trust(&self, workspace: &Path, sha256: &str) -> Result<(), String> {
        let files = match super::Policy::bound_now(workspace) {
            Some((now, files)) if now == sha256 => files,
            _ => Vec::new(),
        };
        self.trust_shown(workspace, sha256, files)
    }

    /// Record `workspace`'s policy hash and the bound files' states exactly as given: what
    /// the user was shown.
    pub fn trust_shown(
        &self,
        workspace: &Path,
        sha256: &str,
        mut files: Vec<super::hooks::BoundFile>,
    ) -> Result<(), String> {
        files.sort();
        files.dedup();
        let key = workspace.to_string_lossy().into_owned();
        let mut entries = self.entries()?;
        entries.retain(|e| e.path != key);
        entries.push(TrustEntry {
            path: key,
            policy_sha256: sha256.to_string(),
            at_ms: crate::state::now_ms(),
            files,
        });
        self.write(entries)
    }

    /// Forget `workspace`; returns whether it was there.
    pub fn forget(&self, workspace: &Path) -> Result<bool, String> {
        let key = workspace.to_string_lossy();
        let mut entries = self.entries()?;
        let before = entries.len();
        entries.retain(|e| e.path != key);
        if entries.len() == before {
            return Ok(false);
        }
        self.write(entries)?;
        Ok(true)
    }

    fn write(&self, workspace: Vec<TrustEntry>) -> Result<(), String> {
        let body = toml::to_string(&TrustFile { workspace }).map_err(|e| e.to_string())?;
        let text = format!(
            "# Workspaces whose .toolgate/policy.toml you trusted with `toolgate trust`, and the\n\
             # workspace files it runs. A policy or file whose sha256 no longer matches is\n\
             # untrusted again.\n\n{body}"
        );
        write_private(&self.path, text.as_bytes())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_by_path_and_hash() {
        let dir = tempfile::tempdir().unwrap();
        let t = TrustStore::new(dir.path());
        let ws = Path::new("/w");
        assert!(!t.is_trusted(ws, "aa"));
        t.trust(ws, "aa").unwrap();
        assert!(t.is_trusted(ws, "aa"));
        assert!(!t.is_trusted(ws, "bb"));
        assert!(!t.is_trusted(Path::new("/w2"), "aa"));
        assert!(t.forget(ws).unwrap());
        assert!(!t.is_trusted(ws, "aa"));
    }

    #[test]
    fn trust_records_the_bound_files_shown_and_old_records_read() {
        use super::super::hooks::BoundFile;
        let dir = tempfile::tempdir().unwrap();
        let t = TrustStore::new(dir.path());
        let ws = Path::new("/w");
        let f = BoundFile {
            path: "scripts/check.sh".into(),
            state: "ab".repeat(32),
        };
        t.trust_shown(ws, "aa", vec![f.clone(), f.clone()]).unwrap();
        let e = t.entry(ws).unwrap().unwrap();
        assert_eq!(e.files, vec![f]);
        // A record written before files were bound still reads (with none).
        std::fs::write(
            t.path(),
            "[[workspace]]\npath = \"/w\"\npolicy_sha256 = \"aa\"\n",
        )
        .unwrap();
        assert!(t.entry(ws).unwrap().unwrap().files.is_empty());
    }
}
