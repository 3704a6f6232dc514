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
        /// Which limit.
        limit: Limit,
        /// What happened.
        message: String,
    },
    /// The caller cancelled the call and the tool was interrupted.
    #[error("cancelled: {message}")]
    Cancelled {
        /// What was interrupted.
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

/// A per-call limit that stops a guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// `[limits] timeout_ms`: the deadline.
    Timeout,
    /// `[limits] max_memory_bytes`: linear memory.
    Memory,
    /// The guest's stack (no policy key: a guest's stack is part of its memory).
    Stack,
    /// The guest's tables (function references), bounded with its memory.
    Table,
    /// `[limits] max_result_bytes`: the size of what the tool returned.
    ResultBytes,
}

impl Limit {
    /// The limit's name as the policy spells it (`limits.<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Timeout => "timeout_ms",
            Limit::Memory => "max_memory_bytes",
            Limit::Stack => "stack",
            Limit::Table => "table_elements",
            Limit::ResultBytes => "max_result_bytes",
        }
    }
}

impl Limit {
    /// The `[limits]` key that raises it, when the policy has one (the stack and the tables
    /// grow only with the tool's own memory use: no key raises them).
    pub fn policy_key(self) -> Option<&'static str> {
        match self {
            Limit::Timeout | Limit::Memory | Limit::ResultBytes => Some(self.as_str()),
            Limit::Stack | Limit::Table => None,
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
