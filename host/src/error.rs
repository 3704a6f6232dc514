//! The library's error type. Every variant names what it is about (path, tool, limit) so the
//! message alone tells the user what to fix.

use std::path::PathBuf;

/// Errors of the toolgate library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine or a WASI context could not be set up.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// A component failed to compile, link or describe itself.
    #[error("component `{name}` could not be loaded: {message}")]
    ComponentLoad {
        /// The tool or file name.
        name: String,
        /// Why.
        message: String,
    },
    /// A per-call limit stopped the guest.
    #[error("limit `{limit}` hit: {message}")]
    Limit {
        /// The limit's name as it appears in the policy.
        limit: &'static str,
        /// What happened.
        message: String,
    },
    /// The guest trapped for another reason.
    #[error("the tool crashed: {0}")]
    Trap(String),
    /// A filesystem operation of the host failed.
    #[error("{}: {}", path.display(), crate::fsutil::plain_error(source))]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The state database failed.
    #[error("state database {}: {message}", path.display())]
    State {
        /// The database file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The policy (or a `--grant`) has problems; each line names the file and line.
    #[error("policy:\n{0}")]
    Policy(String),
    /// A plugin could not be installed or loaded.
    #[error("plugin `{name}`: {message}")]
    Plugin {
        /// The plugin's name (or the file given).
        name: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// The workspace is not usable.
    #[error("workspace {}: {message}", path.display())]
    Workspace {
        /// The workspace root given.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
