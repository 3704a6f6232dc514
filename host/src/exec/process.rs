//! Process rules shared by everything that starts a child the model influences: the one
//! process-group kill and the environment allowlists (shell commands and hooks).

/// Variables passed through from the host's environment to a confined shell command (besides the
/// names the policy adds).
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "TZ"];

/// Variables a hook inherits from the host's environment; everything else is scrubbed. Shorter
/// than [`ENV_ALLOWLIST`] and with `TMPDIR`: a hook is the user's own program, not confined, and
/// runs with the host's temporary directory rather than a per-command one, so it needs neither the
/// terminal and locale variables a command's output depends on nor a substitute `TMPDIR`.
pub const HOOK_ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "LANG", "TMPDIR"];

/// SIGKILL the process group `pgid` (a direct kill(2) of `-pgid`, no helper program), ignoring
/// failure (the group may already be gone). One syscall, never blocks: callable from async code.
pub fn kill_group(pgid: i32) {
    let _ = try_kill_group(pgid);
}

/// [`kill_group`], reporting the kill(2) error (`ESRCH` when the group is gone). A `pgid` that is
/// not a positive process id is refused with `InvalidInput` and nothing is signalled.
pub fn try_kill_group(pgid: i32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        // Checked before `Pid::from_raw`, which asserts a non-negative id.
        let pid = (pgid > 0)
            .then(|| rustix::process::Pid::from_raw(pgid))
            .flatten()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        rustix::process::kill_process_group(pid, rustix::process::Signal::KILL)
            .map_err(std::io::Error::from)
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

#[cfg(test)]
#[path = "process_tests.rs"]
mod tests;
