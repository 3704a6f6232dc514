//! Confinement for shell commands (Linux). The kernel, not the command's text, decides what a
//! command can touch; each layer is applied in the child between `fork` and `exec` from values
//! the host prepared:
//!
//! 1. **namespaces**: fresh mount, PID, IPC and UTS namespaces, and a fresh network namespace
//!    (only a downed `lo`) unless the policy gives the shell the network. With a PID namespace
//!    the command runs as PID 2 under a tiny init (PID 1) that ends the namespace, and every
//!    process in it, as soon as the command ends; the host kills the whole thing through the
//!    process group and the pids cgroup;
//! 2. **a minimal filesystem view** ([`ViewSpec`]): a new root holding only the system
//!    directories (read-only), the workspace (read-write, or read-only for the read-only
//!    class), a private `/tmp`, a private `$HOME` with the toolchain homes read-only, a private
//!    `/dev` with the usual nodes, and `/proc` of the command's own PID namespace. No host
//!    `/tmp`, `/run` or sockets. Inside the workspace an empty read-only file is bound over every
//!    deny-listed file and an empty read-only tmpfs over every deny-listed directory and over
//!    `.toolgate/` (whose `outputs/` is bound back read-only); every git directory is a mount
//!    point (it cannot be renamed or removed) and its config and hooks are read-only;
//! 3. **Landlock**: every write access is handled and allowed only beneath the writable places
//!    of the view (never device creation); ABI 6 scopes keep signals and abstract unix sockets
//!    inside the command's domain;
//! 4. **no power as root**: every capability dropped from all five sets, `SECBIT_NOROOT`
//!    locked, `no_new_privs`;
//! 5. **seccomp**: device nodes, clock setting, mounts, modules, kexec, reboot, swap, keyrings,
//!    bpf, perf, new namespaces and `TIOCSTI` are refused with `EPERM`;
//! 6. a scrubbed environment: an allowlist plus policy-named variables, never loader-injection
//!    variables.
//!
//! What is available is probed once per process; every observation reports what was applied,
//! and `require_confinement` refuses to run with any layer missing.

use super::ExecConfig;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Which confinement a command runs under (what the host chose; the spawner applies exactly it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// Landlock restricts writes to the writable places of the view.
    pub landlock: bool,
    /// Landlock ABI 6 scopes: signals and abstract unix sockets stay inside the domain.
    pub scopes: bool,
    /// A fresh network namespace (no network).
    pub netns: bool,
    /// The network was granted by the policy (so no network namespace was wanted).
    pub network_granted: bool,
    /// The network namespace is the command's own, whose only way out is the egress proxy.
    pub egress: bool,
    /// A private mount namespace.
    pub mountns: bool,
    /// The minimal filesystem view (a new root; masks; `.git` frozen).
    pub view: bool,
    /// A fresh PID namespace: nothing outlives the command, no host process is visible.
    pub pidns: bool,
    /// Every capability dropped (effective, permitted, inheritable, ambient, bounding).
    pub caps_dropped: bool,
    /// The seccomp filter.
    pub seccomp: bool,
    /// The environment was scrubbed.
    pub env_scrubbed: bool,
    /// The command was classified read-only and gets no write access anywhere but its private
    /// `/tmp` and `$HOME`.
    pub read_only: bool,
    /// How many deny-listed paths were masked.
    pub masks: u32,
    /// The command and everything it starts are held in a pids cgroup with this limit.
    pub pids_limit: Option<u32>,
    /// How the namespaces are made: by this process itself, or inside a user namespace of
    /// the command's own (the caller is not privileged); in landlock-only mode there are none.
    #[serde(default)]
    pub mode: NsMode,
    /// Without a pids cgroup: `RLIMIT_NPROC` bounds the command's tasks, counted in its own
    /// user namespace (only the command's processes count), or, in landlock-only mode, over
    /// every task of the user (the limit is then those running now plus the command's share).
    #[serde(default)]
    pub nproc_limit: Option<u32>,
}

/// How a command's namespaces are made on this host, for this user.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NsMode {
    /// The process makes them itself (root with CAP_SYS_ADMIN).
    #[default]
    Privileged,
    /// Inside a new user namespace that maps the caller's uid and gid to themselves (never to
    /// root outside): an ordinary user, or root without CAP_SYS_ADMIN.
    UserNamespace,
    /// No namespace can be made: Landlock (reads and writes), seccomp, `no_new_privs` and
    /// rlimits only, and no network.
    LandlockOnly,
}

impl NsMode {
    /// The name the observation and `toolgate doctor` use.
    pub fn name(self) -> &'static str {
        match self {
            NsMode::Privileged => "privileged",
            NsMode::UserNamespace => "user-namespace",
            NsMode::LandlockOnly => "landlock-only",
        }
    }
}

/// Processes and threads one command may have at once by default: enough for a parallel
/// build, few enough that a fork bomb stops there.
pub const DEFAULT_MAX_PROCESSES: u32 = 2048;

/// Toolchain homes under `$HOME` that are mounted read-only into the command's private home
/// when they exist, so builds and tests keep working offline.
pub const TOOLCHAIN_HOMES: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".local/bin",
    ".local/lib",
    ".nvm",
    ".rbenv",
    ".sdkman",
    "go",
];

/// Files inside the toolchain homes that hold credentials: masked like workspace secrets.
const TOOLCHAIN_SECRETS: &[&str] = &[".cargo/credentials", ".cargo/credentials.toml"];

/// System directories mounted read-only (when they exist; a symlink such as `/bin -> usr/bin`
/// is recreated as a symlink).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/opt",
];

/// Host files under the system directories that no command needs: masked.
pub(crate) const SYSTEM_SECRETS: &[&str] =
    &["/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers"];

/// Device nodes of the private `/dev`.
const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

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

    /// The limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The cgroup's directory, handed to the process that starts the command: it moves the
    /// command's first process in through the directory's `cgroup.procs`.
    #[cfg(target_os = "linux")]
    pub fn procs_fd(&self) -> Result<rustix::fd::OwnedFd, String> {
        self.inner.dir_fd()
    }

    /// Move the process `pid` (all its threads) into the group. The kernel waits for an RCU
    /// grace period first unless one is under way (up to ~10 ms).
    pub fn join(&self, pid: u32) -> Result<(), String> {
        #[cfg(target_os = "linux")]
        {
            self.inner.join(pid)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            Err("no pids cgroups here".into())
        }
    }

    /// Kill every process still in the group (whatever it did to its process group or
    /// session).
    pub fn kill_all(&self) {
        #[cfg(target_os = "linux")]
        self.inner.kill_all();
    }
}

impl Confinement {
    /// Whether everything that was wanted is in place.
    pub fn complete(&self) -> bool {
        self.missing().is_empty()
    }

    /// What is missing, for messages.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut m = Vec::new();
        if !self.landlock {
            m.push("landlock");
        }
        if !self.scopes {
            m.push("landlock scopes (signals, abstract sockets)");
        }
        if !self.netns && !self.network_granted {
            m.push("network namespace");
        }
        if !self.mountns {
            m.push("mount namespace");
        }
        if !self.view {
            m.push("minimal filesystem view");
        }
        if !self.pidns {
            m.push("PID namespace");
        }
        if !self.caps_dropped {
            m.push("dropping capabilities");
        }
        if !self.seccomp {
            m.push("seccomp filter");
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
            "landlock_abi": probe().landlock_abi,
            "scopes": self.scopes,
            "netns": self.netns,
            "network": self.network_granted,
            "egress_proxy": self.egress,
            "mountns": self.mountns,
            "view": self.view,
            "pidns": self.pidns,
            "caps_dropped": self.caps_dropped,
            "seccomp": self.seccomp,
            "env_scrubbed": self.env_scrubbed,
            "read_only": self.read_only,
            "masks": self.masks,
            "pids_limit": self.pids_limit.or(self.nproc_limit),
            "pids_bound": if self.pids_limit.is_some() {
                Value::from("cgroup")
            } else if self.nproc_limit.is_some() && self.mode == NsMode::LandlockOnly {
                Value::from("rlimit-nproc-user")
            } else if self.nproc_limit.is_some() {
                Value::from("rlimit-nproc")
            } else {
                Value::Null
            },
            "mode": self.mode.name(),
        })
    }
}

pub use super::process::ENV_ALLOWLIST;

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
    // A repository can ship a directory that looks like a bare repository (HEAD, objects/,
    // refs/, and a config whose core.sshCommand or core.fsmonitor is a program); git run
    // inside it would obey that config. Only repositories named explicitly (`--git-dir`, which
    // asks) may be bare. Command scope is protected configuration, so no repository's own
    // config can turn this off.
    env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
    env.push(("GIT_CONFIG_KEY_0".into(), "safe.bareRepository".into()));
    env.push(("GIT_CONFIG_VALUE_0".into(), "explicit".into()));
    env
}

/// What this process can apply, probed once (`network`: whether the policy grants it).
pub fn available(network: bool) -> Confinement {
    let p = probe();
    Confinement {
        landlock: p.landlock_abi >= 3,
        scopes: p.landlock_abi >= 6,
        netns: !network && p.netns,
        network_granted: network,
        egress: false,
        mountns: p.mountns,
        view: p.mountns,
        pidns: p.pidns,
        caps_dropped: cfg!(target_os = "linux") && p.caps_droppable,
        seccomp: p.seccomp,
        env_scrubbed: true,
        read_only: false,
        masks: 0,
        pids_limit: None,
        mode: p.mode,
        nproc_limit: None,
    }
}

/// What this process can apply, as found once by trying it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Probe {
    /// The highest Landlock ABI this kernel enforces (0: none).
    pub landlock_abi: u8,
    /// A network namespace can be made (directly or inside a user namespace).
    pub netns: bool,
    /// A mount namespace can be made.
    pub mountns: bool,
    /// PID, IPC and UTS namespaces can be made.
    pub pidns: bool,
    /// The seccomp filter loads.
    pub seccomp: bool,
    /// How namespaces are made here.
    pub mode: NsMode,
    /// Why this process cannot make namespaces itself (the errno of `unshare`).
    pub direct_errno: Option<i32>,
    /// Why no user namespace could be made (the errno), when none could.
    pub userns_errno: Option<i32>,
    /// Which step of making the user namespace failed (`unshare`, `uid_map`, …).
    pub userns_step: Option<&'static str>,
    /// Every capability can be dropped for good: always inside a namespace of the command's
    /// own; without one, unless this process is root without CAP_SETPCAP (it could not lock
    /// root out of regaining its bounding set on exec).
    pub caps_droppable: bool,
}

/// What this process can apply, probed once.
pub fn probe() -> Probe {
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

mod calldirs;
mod cleanup;
pub mod report;
mod skeleton;
mod view;
pub use calldirs::{finish_cleanup, CallDirs};
pub use view::{build_view, Bind, ViewInputs, ViewSpec};

/// The network namespace a command joins (its own, behind the egress proxy) and, when the
/// host is not privileged, the user namespace that owns it, joined first.
#[cfg(target_os = "linux")]
pub struct CommandNs {
    /// The network namespace.
    pub net: rustix::fd::OwnedFd,
    /// Its owning user namespace (user-namespace mode only).
    pub user: Option<rustix::fd::OwnedFd>,
}

/// Install exactly `want` on `cmd` (the spawner and the host's fallback both apply what the
/// host chose); `procs` is the pids cgroup's directory, which the command starts inside.
/// Without a view, `writable` are the places Landlock lets the command write.
#[cfg(target_os = "linux")]
pub fn apply(
    cmd: &mut Command,
    want: Confinement,
    view: Option<&ViewSpec>,
    writable: &[PathBuf],
    procs: Option<rustix::fd::OwnedFd>,
    net: Option<CommandNs>,
    read: Option<&ReadRules>,
) -> Result<(), String> {
    linux::install(cmd, want, view, writable, procs, net, read)
}

/// In the spawner, before it makes any thread: empty its capability bounding set, which every
/// command it forks inherits (so a command need not drop each capability itself). When it
/// may not, each command drops its own, as before.
#[cfg(target_os = "linux")]
pub fn empty_bounding_set() {
    linux::empty_bounding_set()
}

#[cfg(target_os = "linux")]
mod linux;

#[cfg(target_os = "linux")]
pub(crate) use linux::userns::Maps as UserMaps;

/// The tasks of this user now (landlock-only mode's process limit starts from it).
#[cfg(target_os = "linux")]
pub(crate) use linux::userns::user_tasks;

#[cfg(target_os = "linux")]
pub(crate) use linux::{read_rules, ReadInputs, ReadRules};

#[cfg(target_os = "linux")]
pub use linux::direct::{spawn as spawn_direct, Direct, Launch};
