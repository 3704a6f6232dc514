//! Where a workspace's policy layers come from: the sources, the managed file in force, and
//! the workspace layer's trust.

use super::{Mode, PolicySource};
use std::path::PathBuf;

/// Where the layers of a workspace's policy come from.
#[derive(Clone, Debug, Default)]
pub struct LayerSources {
    /// The canonical workspace root (trust is recorded by it).
    pub workspace: PathBuf,
    /// The user's directories (their policy, their trust store).
    pub user: Option<crate::userdirs::UserDirs>,
    /// `--policy` or `--preset`.
    pub cli: Option<PolicySource>,
    /// `--mode`.
    pub cli_mode: Option<Mode>,
    /// The managed layer's file, if one is in force.
    pub managed: Option<PathBuf>,
    /// Trust the workspace layer without a record (`--trust-workspace`, for CI).
    pub trust_workspace: bool,
}

/// The managed policy in force: `$TOOLGATE_MANAGED_POLICY` if set (an empty value means
/// none), else `/etc/toolgate/managed.toml` if it exists.
pub fn managed_policy_path() -> Option<PathBuf> {
    match std::env::var_os("TOOLGATE_MANAGED_POLICY") {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let p = PathBuf::from("/etc/toolgate/managed.toml");
            p.exists().then_some(p)
        }
    }
}

/// The workspace layer's file and whether it is trusted, as `toolgate trust` sees it. The
/// file and every file it binds are read once, here: what is shown, hashed, loaded and
/// pinned are these bytes.
#[derive(Clone, Debug)]
pub struct WorkspaceLayer {
    /// `.toolgate/policy.toml`.
    pub path: PathBuf,
    /// Its bytes as read (`Ok(None)`: it does not exist; `Err`: why it cannot be read).
    pub text: Result<Option<Vec<u8>>, String>,
    /// Its sha256, when it exists.
    pub sha256: Option<String>,
    /// The workspace files it makes the host run or read, as they are now.
    pub files: Vec<BoundView>,
    /// Why it is trusted (`trust.toml`, `--trust-workspace`), or `None`.
    pub trusted_by: Option<String>,
    /// Trusted before, but the policy or a file it binds changed since.
    pub changed_since_trust: bool,
    /// What changed since the user trusted it, one line each (empty when nothing did or it
    /// was never trusted).
    pub changed: Vec<String>,
}

/// One file a workspace policy binds, as read now.
#[derive(Clone, Debug)]
pub struct BoundView {
    /// Its path and state now.
    pub file: super::hooks::BoundFile,
    /// Its bytes, when it is a regular file that could be read.
    pub bytes: Option<Vec<u8>>,
    /// Its state in the trust record (`None`: the record does not name it).
    pub trusted: Option<String>,
    /// What runs it (`hook `…``, `[lsp.x] command`).
    pub used_by: Vec<String>,
}
