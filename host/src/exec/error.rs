//! [`ExecError`]: why the shell, its jobs, its network namespaces or the language servers
//! refused or failed, one variant per thing a caller can act on; its text is the message the
//! tool sees.

use std::fmt;

/// Why an exec entry point refused or failed.
#[derive(Debug)]
pub enum ExecError {
    /// `run` was called without the exec capability for this call.
    NotGranted,
    /// A job function was called without the exec capability.
    JobsNotGranted,
    /// No command was approved for this call, or the approved one already ran.
    NotApproved,
    /// The guest asked to run another text than the one the gate approved.
    NotTheApprovedCommand {
        /// The text the gate approved.
        approved: String,
        /// The text the guest passed.
        asked: String,
    },
    /// The blocking worker running the command (or the job call) failed.
    Worker(String),
    /// The call was cancelled; the command's process group was killed.
    Cancelled,
    /// No job of that id belongs to this session.
    UnknownJob {
        /// The id asked for.
        id: String,
    },
    /// The policy requires confinement and these parts of it are missing here.
    ConfinementUnavailable {
        /// What is missing (e.g. `landlock`, `mount namespace`).
        missing: Vec<&'static str>,
    },
    /// A simple command's program is not on the scrubbed PATH.
    ProgramNotFound {
        /// The program as the command names it.
        program: String,
    },
    /// Finding what the command's view must hide or freeze in the workspace failed.
    View(String),
    /// Setting up the command's confinement (private directories, view, cgroup, seccomp,
    /// Landlock) failed; the message names the step.
    Confine(String),
    /// An operating-system call preparing or starting the command failed.
    Io {
        /// What was being done, e.g. `creating the output pipe`.
        what: &'static str,
        /// The error.
        error: std::io::Error,
    },
    /// The command could not be started from the host.
    Start(std::io::Error),
    /// The gate's spawner tried and could not start the command.
    Spawner(String),
    /// The thread creating a command's network namespace failed.
    NamespaceThread,
    /// This needs Linux (`what` names it).
    NeedsLinux {
        /// What is not available, e.g. `a network namespace per command`.
        what: &'static str,
    },
    /// No configured language of that name has a server.
    UnknownLanguage {
        /// The language asked for.
        language: String,
        /// The languages there are, described.
        known: String,
    },
    /// A language-server question or change could not be answered (the path, position,
    /// server start or the server's own answer; the message says which).
    LanguageServer(String),
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::NotGranted => f.write_str(
                "refused: this tool was not granted the exec capability for this call",
            ),
            ExecError::JobsNotGranted => {
                f.write_str("refused: this tool was not granted the exec capability")
            }
            ExecError::NotApproved => f.write_str(
                "refused: no command was approved for this call (or it already ran)",
            ),
            ExecError::NotTheApprovedCommand { approved, asked } => write!(
                f,
                "refused: the gate approved `{approved}`, not `{asked}`; only the approved command runs"
            ),
            ExecError::Worker(e) => write!(f, "the exec worker failed: {e}"),
            ExecError::Cancelled => {
                f.write_str("cancelled: the call was cancelled and its process group killed")
            }
            ExecError::UnknownJob { id } => write!(
                f,
                "there is no job `{id}` in this session (jobs end with the session that started them)"
            ),
            ExecError::ConfinementUnavailable { missing } => write!(
                f,
                "the policy requires confinement and it is not available here ({}). {}",
                missing.join(", "),
                super::confine::report::hint(missing)
            ),
            ExecError::ProgramNotFound { program } => write!(
                f,
                "`{program}` was not found on PATH (commands run without a shell; a shell builtin or function needs `bash -c`-style syntax)"
            ),
            ExecError::View(m)
            | ExecError::Confine(m)
            | ExecError::Spawner(m)
            | ExecError::LanguageServer(m) => f.write_str(m),
            ExecError::Io { what, error } => write!(f, "{what}: {error}"),
            ExecError::Start(e) => write!(f, "could not start the command: {e}"),
            ExecError::NamespaceThread => {
                f.write_str("the thread making the command's network namespace failed")
            }
            ExecError::NeedsLinux { what } => write!(f, "{what} needs Linux"),
            ExecError::UnknownLanguage { language, known } => write!(
                f,
                "no language `{language}` has a server here; languages: {known}"
            ),
        }
    }
}

impl std::error::Error for ExecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExecError::Io { error, .. } | ExecError::Start(error) => Some(error),
            _ => None,
        }
    }
}

impl ExecError {
    /// An [`ExecError::Io`] maker for `map_err`.
    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> ExecError {
        move |error| ExecError::Io { what, error }
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
