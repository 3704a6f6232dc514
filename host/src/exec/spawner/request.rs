//! What the host sends the spawner for one command, and how either side builds the
//! `Command` from it.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One command to start.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Request {
    /// Matches the replies to this request.
    pub id: u64,
    /// The program (absolute, resolved by the host).
    pub program: PathBuf,
    /// `argv[0]` as the command names it.
    pub arg0: String,
    /// The remaining arguments.
    pub args: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The confinement to apply, exactly as the host chose it.
    pub confinement: crate::exec::confine::Confinement,
    /// The filesystem view to build (with `confinement.view`).
    pub view: Option<crate::exec::confine::ViewSpec>,
    /// Without a view: where Landlock lets the command write.
    pub writable: Vec<PathBuf>,
    /// The third file descriptor is the pids cgroup's directory.
    pub cgroup: bool,
    /// A file descriptor after the cgroup's is the command's own network namespace (egress
    /// proxy).
    pub netns: bool,
    /// The last file descriptor is the user namespace owning that network namespace (a host
    /// that is not privileged).
    #[serde(default)]
    pub netns_user: bool,
    /// The command counts against the spawner's own pids cgroup (it starts inside it, as
    /// everything the spawner forks does): never started any other way. Host-side only.
    #[serde(skip)]
    pub shared_pids: bool,
    /// Landlock-only mode: the Landlock rules for reads and writes (secrets never covered),
    /// computed by the host; the spawner opens each rule's path and keeps it only while it
    /// names the same inode.
    #[cfg(target_os = "linux")]
    #[serde(default)]
    pub(crate) landlock_only: Option<crate::exec::confine::ReadRules>,
}

impl Request {
    /// The command as it will run, without its output streams or confinement: the program
    /// with `argv[0]`, the arguments, exactly this environment, the working directory, stdin
    /// from `/dev/null`, and a process group of its own (so a timeout kills all of it).
    #[cfg(unix)]
    pub fn command(&self) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(&self.program);
        cmd.arg0(&self.arg0)
            .args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::null())
            .process_group(0);
        cmd
    }

    /// Install on `cmd` exactly the confinement this request names (the host chose it), with
    /// `procs` (the pids cgroup's directory) joined first. The spawner and the host's own
    /// fallback both start commands through this.
    #[cfg(target_os = "linux")]
    pub fn confine(
        &self,
        cmd: &mut std::process::Command,
        procs: Option<rustix::fd::OwnedFd>,
        net: Option<crate::exec::confine::CommandNs>,
    ) -> Result<(), String> {
        crate::exec::confine::apply(
            cmd,
            self.confinement,
            self.view.as_ref(),
            &self.writable,
            procs,
            net,
            self.landlock_only.as_ref(),
        )
    }
}
