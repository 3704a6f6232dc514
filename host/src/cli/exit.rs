//! How a failed command ends: a closed pipe quietly, a policy with problems as the user's
//! mistake (exit 2), anything else as a host failure (exit 70).

use std::process::ExitCode;

/// Say why `e` ended the command and pick the exit code.
pub fn report(e: anyhow::Error) -> ExitCode {
    if is_broken_pipe(&e) {
        return ExitCode::SUCCESS;
    }
    // A policy with problems is the user's to fix (exit 2), not a host failure.
    let policy = e.chain().find_map(|c| match c.downcast_ref() {
        Some(toolgate::Error::Policy(problems)) => Some(problems),
        _ => None,
    });
    match policy {
        Some(problems) => {
            eprintln!("toolgate: the policy has problems, nothing ran:\n{problems}\nhint: fix them; `toolgate policy check` shows every layer");
            ExitCode::from(2)
        }
        None => {
            eprintln!("toolgate: {e:#}");
            ExitCode::from(super::EXIT_HOST_FAILURE)
        }
    }
}

/// Whether `e` is a write to a closed pipe (`toolgate audit | head`): not an error.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
