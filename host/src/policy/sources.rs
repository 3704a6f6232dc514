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

/// The workspace layer's file and whether it is trusted, as `toolgate trust` sees it.
#[derive(Clone, Debug)]
pub struct WorkspaceLayer {
    /// `.toolgate/policy.toml`.
    pub path: PathBuf,
    /// Its sha256, when it exists.
    pub sha256: Option<String>,
    /// Why it is trusted (`trust.toml`, `--trust-workspace`), or `None`.
    pub trusted_by: Option<String>,
    /// Trusted before but the file changed since.
    pub changed_since_trust: bool,
}
