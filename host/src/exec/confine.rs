//! Confinement for shell commands (Linux), applied in the child between `fork` and `exec`:
//!
//! 1. a fresh network namespace (`unshare(CLONE_NEWNET)`: only a downed `lo`) unless the policy
//!    gives the shell the network;
//! 2. a private mount namespace in which `.toolgate/`, `.git/hooks` and `.git/config` are
//!    bind-mounted read-only (Landlock cannot carve read-only holes out of a writable tree);
//! 3. Landlock: every write access is handled, and allowed only beneath the workspace, the
//!    call's private temp dir and `/dev/null`; reads stay open;
//! 4. a scrubbed environment: an allowlist plus policy-named variables, never loader-injection
//!    variables; `TMPDIR` is the private temp dir.
//!
//! What is available is probed once per process; every observation reports what was applied.

use super::ExecConfig;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// Which confinement a command ran under.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Landlock restricts writes to the workspace and the private temp dir.
    pub landlock: bool,
    /// A fresh network namespace (no network).
    pub netns: bool,
    /// The network was granted by the policy (so no network namespace was wanted).
    pub network_granted: bool,
    /// `.toolgate/` and `.git/hooks`, `.git/config` are read-only.
    pub mountns: bool,
    /// The environment was scrubbed.
    pub env_scrubbed: bool,
    /// The command and everything it starts are held in a pids cgroup with this limit.
    pub pids_limit: Option<u32>,
}

/// Processes and threads one command may have at once by default: enough for a parallel
/// build, few enough that a fork bomb stops there.
pub const DEFAULT_MAX_PROCESSES: u32 = 2048;

/// A pids cgroup holding one command and everything it starts; removed when dropped.
pub struct PidsCgroup {
    #[cfg(target_os = "linux")]
    inner: linux::Cgroup,
    limit: u32,
}

impl PidsCgroup {
    /// A fresh pids cgroup limited to `max` tasks, or `None` when this host cannot make one
    /// (no writable pids controller); the observation then says `pids_limit: null`.
    pub fn create(max: u32) -> Option<PidsCgroup> {
        #[cfg(target_os = "linux")]
        {
            linux::Cgroup::create(max).map(|inner| PidsCgroup { inner, limit: max })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = max;
            None
        }
    }
}

impl PidsCgroup {
    /// The limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// `cgroup.procs`, for a child to write its pid into before it execs.
    #[cfg(target_os = "linux")]
    pub fn procs_fd(&self) -> Result<rustix::fd::OwnedFd, String> {
        self.inner.procs_fd()
    }
}

impl Confinement {
    /// Whether everything that was wanted is in place.
    pub fn complete(&self) -> bool {
        self.landlock && (self.netns || self.network_granted) && self.mountns && self.env_scrubbed
    }

    /// What is missing, for messages.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut m = Vec::new();
        if !self.landlock {
            m.push("landlock");
        }
        if !self.netns && !self.network_granted {
            m.push("network namespace");
        }
        if !self.mountns {
            m.push("mount namespace");
        }
        if !self.env_scrubbed {
            m.push("environment scrubbing");
        }
        m
    }

    /// The observation's `data.confinement`.
    pub fn to_json(&self) -> Value {
        json!({
            "landlock": self.landlock,
            "netns": self.netns,
            "network": self.network_granted,
            "mountns": self.mountns,
            "env_scrubbed": self.env_scrubbed,
            "pids_limit": self.pids_limit,
        })
    }
}

/// Variables passed through from the host's environment (besides the policy's).
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "TZ"];

/// Never passed, even when a policy names them.
fn forbidden_env(name: &str) -> bool {
    name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || matches!(
            name,
            "BASH_ENV" | "ENV" | "PROMPT_COMMAND" | "SHELLOPTS" | "BASHOPTS" | "IFS" | "PS4"
        )
        || name.starts_with("BASH_FUNC_")
}

/// The environment of a command: the allowlist, the policy's names, `TMPDIR` → `tmp`.
pub fn scrubbed_env(config: &ExecConfig, _workspace: &Path, tmp: &Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for name in ENV_ALLOWLIST
        .iter()
        .map(|s| s.to_string())
        .chain(config.env.iter().cloned())
    {
        if forbidden_env(&name) || env.iter().any(|(k, _)| *k == name) {
            continue;
        }
        if let Ok(value) = std::env::var(&name) {
            env.push((name, value));
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env.push(("TMPDIR".into(), tmp.display().to_string()));
    env.push(("TOOLGATE".into(), "1".into()));
    env
}

/// What this process can apply, probed once (`network`: whether the policy grants it).
pub fn available(network: bool) -> Confinement {
    let p = probe();
    Confinement {
        landlock: p.landlock,
        netns: !network && p.netns,
        network_granted: network,
        mountns: p.mountns,
        env_scrubbed: true,
        pids_limit: None,
    }
}

#[derive(Clone, Copy, Default)]
struct Probe {
    landlock: bool,
    netns: bool,
    mountns: bool,
}

fn probe() -> Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    *PROBE.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            linux::probe()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Probe::default()
        }
    })
}

/// Install the confinement on `cmd` (in its `pre_exec`); returns what it will apply.
pub fn install(
    cmd: &mut Command,
    workspace: &Path,
    tmp: &Path,
    network: bool,
    pids: Option<&PidsCgroup>,
) -> Result<Confinement, String> {
    let mut want = available(network);
    #[cfg(target_os = "linux")]
    {
        let procs = match pids {
            Some(p) => Some(p.inner.procs_fd()?),
            None => None,
        };
        linux::install(cmd, workspace, tmp, want, procs)?;
        want.pids_limit = pids.map(|p| p.limit);
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (cmd, workspace, tmp, pids);
    }
    Ok(want)
}

/// Install exactly `want` on `cmd` (the spawner applies what the host chose); `procs` is the
/// pids cgroup's `cgroup.procs` for the child to join first.
#[cfg(target_os = "linux")]
pub fn apply(
    cmd: &mut Command,
    workspace: &Path,
    tmp: &Path,
    want: Confinement,
    procs: Option<rustix::fd::OwnedFd>,
) -> Result<(), String> {
    linux::install(cmd, workspace, tmp, want, procs)
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{Confinement, Probe};
    use landlock::{
        path_beneath_rules, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, ABI,
    };
    use rustix::fd::OwnedFd;
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::{
        mount_bind, mount_change, mount_remount, MountFlags, MountPropagationFlags,
    };
    use rustix::thread::UnshareFlags;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    const ABI_USED: ABI = ABI::V3;

    /// `n` in decimal, written into `buf` without allocating (safe after `fork`).
    fn decimal(n: i32, buf: &mut [u8; 20]) -> &[u8] {
        let mut v = n.unsigned_abs();
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        &buf[i..]
    }

    /// Where pids cgroups can be made: cgroup v1's pids hierarchy or a cgroup v2 root that
    /// offers the pids controller, found once.
    fn pids_root() -> Option<&'static PathBuf> {
        static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
        ROOT.get_or_init(|| {
            let candidates = [
                PathBuf::from("/sys/fs/cgroup/pids"),
                PathBuf::from("/sys/fs/cgroup"),
            ];
            candidates.into_iter().find(|root| {
                if !root.join("cgroup.procs").is_file() {
                    return false;
                }
                let is_v1_pids = root.ends_with("pids");
                let v2_pids = std::fs::read_to_string(root.join("cgroup.subtree_control"))
                    .is_ok_and(|c| c.split_whitespace().any(|w| w == "pids"));
                if !(is_v1_pids || v2_pids) {
                    return false;
                }
                let probe = root.join(format!("toolgate-probe-{}", std::process::id()));
                let ok = std::fs::create_dir(&probe).is_ok() && probe.join("pids.max").is_file();
                let _ = std::fs::remove_dir(&probe);
                ok
            })
        })
        .as_ref()
    }

    /// One command's pids cgroup.
    pub(super) struct Cgroup {
        dir: PathBuf,
    }

    impl Cgroup {
        pub(super) fn create(max: u32) -> Option<Cgroup> {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let root = pids_root()?;
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = root.join(format!("toolgate-{}-{n}", std::process::id()));
            std::fs::create_dir(&dir).ok()?;
            let cgroup = Cgroup { dir };
            std::fs::write(cgroup.dir.join("pids.max"), max.to_string()).ok()?;
            Some(cgroup)
        }

        /// `cgroup.procs`, opened for the child to write its pid into.
        pub(super) fn procs_fd(&self) -> Result<OwnedFd, String> {
            rustix::fs::open(
                self.dir.join("cgroup.procs"),
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| format!("opening the pids cgroup {}: {e}", self.dir.display()))
        }
    }

    impl Drop for Cgroup {
        fn drop(&mut self) {
            // The group is killed before this is dropped; its last tasks may take a moment
            // to be reaped, and a cgroup with tasks cannot be removed. That moment is usually
            // well under a millisecond, so wait in short, growing steps (at most ~1 s).
            let mut wait = std::time::Duration::from_micros(100);
            let mut waited = std::time::Duration::ZERO;
            while waited < std::time::Duration::from_secs(1) {
                if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                    return;
                }
                std::thread::sleep(wait);
                waited += wait;
                wait = (wait * 2).min(std::time::Duration::from_millis(20));
            }
            tracing::warn!(cgroup = %self.dir.display(), "could not remove a pids cgroup");
        }
    }

    fn ruleset(allowed: &[&Path]) -> Result<landlock::RulesetCreated, String> {
        let write = AccessFs::from_write(ABI_USED);
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(write)
            .map_err(|e| e.to_string())?
            .create()
            .map_err(|e| e.to_string())?
            .add_rules(path_beneath_rules(allowed, write))
            .map_err(|e| e.to_string())?
            .add_rules(path_beneath_rules(
                ["/dev/null"],
                AccessFs::WriteFile | AccessFs::Truncate,
            ))
            .map_err(|e| e.to_string())
    }

    /// Paths bind-mounted read-only inside the command's mount namespace.
    fn protected(workspace: &Path) -> Vec<CString> {
        let mut out = Vec::new();
        let state = workspace.join(".toolgate");
        let _ = std::fs::create_dir_all(&state);
        let git = workspace.join(".git");
        let mut paths = vec![state];
        if git.is_dir() {
            let hooks = git.join("hooks");
            let _ = std::fs::create_dir_all(&hooks);
            paths.push(hooks);
            let config = git.join("config");
            if config.is_file() {
                paths.push(config);
            }
        }
        for p in paths {
            if let Ok(c) = CString::new(p.as_os_str().as_bytes()) {
                out.push(c);
            }
        }
        out
    }

    pub(super) fn probe() -> Probe {
        let tmp = std::env::temp_dir();
        let landlock = ruleset(&[tmp.as_path()]).is_ok();
        let try_flags = |flags: UnshareFlags| -> bool {
            let mut cmd = Command::new("/bin/true");
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            // SAFETY: the closure only calls `unshare(2)`, which is async-signal-safe, and
            // allocates nothing.
            #[allow(unsafe_code)]
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    rustix::thread::unshare_unsafe(flags).map_err(std::io::Error::from)
                });
            }
            cmd.status().is_ok_and(|s| s.success())
        };
        Probe {
            landlock,
            netns: try_flags(UnshareFlags::NEWNET),
            mountns: try_flags(UnshareFlags::NEWNS),
        }
    }

    pub(super) fn install(
        cmd: &mut Command,
        workspace: &Path,
        tmp: &Path,
        want: Confinement,
        procs: Option<OwnedFd>,
    ) -> Result<(), String> {
        // Everything that allocates or opens paths is done here, in the parent; the child only
        // makes system calls on what was prepared.
        let mut rules = if want.landlock {
            Some(ruleset(&[workspace, tmp]).map_err(|e| format!("preparing Landlock: {e}"))?)
        } else {
            None
        };
        let protect = if want.mountns {
            protected(workspace)
        } else {
            Vec::new()
        };
        let mut flags = UnshareFlags::empty();
        if want.netns {
            flags |= UnshareFlags::NEWNET;
        }
        if want.mountns {
            flags |= UnshareFlags::NEWNS;
        }
        let root = c"/";
        let empty = c"";
        // SAFETY: `pre_exec` runs in the forked child before `exec`. The closure makes only
        // system calls (unshare, mount, prctl, landlock_restrict_self) on values prepared in
        // the parent (C strings, the ruleset's file descriptor) and does not allocate on the
        // success path; any failure aborts the spawn with the error (fail closed).
        #[allow(unsafe_code)]
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || {
                // Join the pids cgroup first, so everything the command starts is counted.
                if let Some(fd) = &procs {
                    let mut buf = [0u8; 20];
                    let pid = rustix::process::getpid().as_raw_nonzero().get();
                    rustix::io::write(fd, decimal(pid, &mut buf))?;
                }
                if !flags.is_empty() {
                    rustix::thread::unshare_unsafe(flags)?;
                }
                if !protect.is_empty() {
                    mount_change(
                        root,
                        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
                    )?;
                    for p in &protect {
                        mount_bind(p.as_c_str(), p.as_c_str())?;
                        mount_remount(
                            p.as_c_str(),
                            MountFlags::BIND
                                | MountFlags::RDONLY
                                | MountFlags::NOSUID
                                | MountFlags::NODEV,
                            empty,
                        )?;
                    }
                }
                if let Some(r) = rules.take() {
                    r.restrict_self().map_err(|_| {
                        std::io::Error::from_raw_os_error(rustix::io::Errno::PERM.raw_os_error())
                    })?;
                }
                Ok(())
            });
        }
        Ok(())
    }
}
