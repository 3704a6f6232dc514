//! Unit tests of `exec::ExecError`: each variant's text is the message tools have always seen.

use super::ExecError;

#[test]
fn refusals_read_as_before() {
    assert_eq!(
        ExecError::NotGranted.to_string(),
        "refused: this tool was not granted the exec capability for this call"
    );
    assert_eq!(
        ExecError::JobsNotGranted.to_string(),
        "refused: this tool was not granted the exec capability"
    );
    assert_eq!(
        ExecError::NotApproved.to_string(),
        "refused: no command was approved for this call (or it already ran)"
    );
    assert_eq!(
        ExecError::NotTheApprovedCommand {
            approved: "ls".into(),
            asked: "rm -rf x".into(),
        }
        .to_string(),
        "refused: the gate approved `ls`, not `rm -rf x`; only the approved command runs"
    );
    assert_eq!(
        ExecError::UnknownJob { id: "job-9".into() }.to_string(),
        "there is no job `job-9` in this session (jobs end with the session that started them)"
    );
}

#[test]
fn failures_read_as_before() {
    // The cause and fix of each missing layer follow (they depend on this host).
    let unavailable = ExecError::ConfinementUnavailable {
        missing: vec!["landlock", "mount namespace"],
    }
    .to_string();
    assert!(
        unavailable.starts_with(
            "the policy requires confinement and it is not available here (landlock, mount namespace). landlock"
        ) && unavailable.contains("fix: ")
            && unavailable.contains("`toolgate doctor`"),
        "{unavailable}"
    );
    assert_eq!(
        ExecError::ProgramNotFound {
            program: "nope".into(),
        }
        .to_string(),
        "`nope` was not found on PATH (commands run without a shell; a shell builtin or function needs `bash -c`-style syntax)"
    );
    assert_eq!(
        ExecError::Cancelled.to_string(),
        "cancelled: the call was cancelled and its process group killed"
    );
    assert_eq!(
        ExecError::NeedsLinux {
            what: "a network namespace per command",
        }
        .to_string(),
        "a network namespace per command needs Linux"
    );
    assert_eq!(
        ExecError::UnknownLanguage {
            language: "cobol".into(),
            known: "rust".into(),
        }
        .to_string(),
        "no language `cobol` has a server here; languages: rust"
    );
    assert_eq!(
        ExecError::LanguageServer("lines start at 1".into()).to_string(),
        "lines start at 1"
    );
}

/// An operating-system error reads as it did when it was formatted where it happened, and
/// stays reachable as the error's source.
#[test]
fn io_errors_keep_their_text_and_source() {
    let errno = rustix::io::Errno::PERM;
    let e = ExecError::Io {
        what: "creating the command's network namespace",
        error: errno.into(),
    };
    assert_eq!(
        e.to_string(),
        format!("creating the command's network namespace: {errno}")
    );
    assert!(std::error::Error::source(&e).is_some());
    let start = ExecError::Start(std::io::Error::from(std::io::ErrorKind::NotFound));
    assert_eq!(
        start.to_string(),
        format!(
            "could not start the command: {}",
            std::io::Error::from(std::io::ErrorKind::NotFound)
        )
    );
}
