//! How a failed command ends: a closed pipe quietly, a policy with problems or another
//! [`Usage`] mistake as the user's (exit 2), anything else as a host failure (exit 70).

use std::process::ExitCode;

/// A mistake in what the user typed (a bad name, a place already taken): exit 2, not 70.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Say why `e` ended the command and pick the exit code.
pub fn report(e: anyhow::Error) -> ExitCode {
    if is_broken_pipe(&e) {
        return ExitCode::SUCCESS;
    }
    if let Some(usage) = e.chain().find_map(|c| c.downcast_ref::<Usage>()) {
        eprintln!("toolgate: {usage}");
        return ExitCode::from(2);
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
