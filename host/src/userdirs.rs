//! The user's own directories, outside every workspace: what a repository cannot write.
//!
//! - config (`$XDG_CONFIG_HOME/toolgate`, else `~/.config/toolgate`): the user's policy layer,
//!   `trust.toml` (which workspace policies the user trusted, by path and sha256) and the key
//!   that signs host state written into a workspace (project grants, plugin records, session
//!   grants).
//! - state (`$XDG_STATE_HOME/toolgate`, else `~/.local/state/toolgate`): the HTTP bearer token.
//!
//! A library user (and every test) can point both somewhere else with [`UserDirs::under`].

use std::path::{Path, PathBuf};

/// Where the user's toolgate configuration and state live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserDirs {
    /// `$XDG_CONFIG_HOME/toolgate`.
    pub config: PathBuf,
    /// `$XDG_STATE_HOME/toolgate`.
    pub state: PathBuf,
}

impl UserDirs {
    /// The directories named by the environment (XDG, else `$HOME`, else `/nonexistent`,
    /// which makes every lookup find nothing and every write fail loudly).
    pub fn from_env() -> UserDirs {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/nonexistent"));
        let xdg = |var: &str, fallback: &str| {
            std::env::var_os(var)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| home.join(fallback))
                .join("toolgate")
        };
        UserDirs {
            config: xdg("XDG_CONFIG_HOME", ".config"),
            state: xdg("XDG_STATE_HOME", ".local/state"),
        }
    }

    /// Both directories under `root` (`root/config`, `root/state`): for tests and embedders.
    pub fn under(root: &Path) -> UserDirs {
        UserDirs {
            config: root.join("config"),
            state: root.join("state"),
        }
    }
}
