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
const SYSTEM_SECRETS: &[&str] = &["/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers"];

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

    /// The cgroup's directory, handed to the process that starts the command: it starts the
    /// command's first process inside the group (`clone3` with `CLONE_INTO_CGROUP`), or
    /// writes a pid into the directory's `cgroup.procs` where the kernel cannot.
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
            "pids_limit": self.pids_limit,
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
        caps_dropped: cfg!(target_os = "linux"),
        seccomp: p.seccomp,
        env_scrubbed: true,
        read_only: false,
        masks: 0,
        pids_limit: None,
    }
}

#[derive(Clone, Copy, Default)]
struct Probe {
    /// The highest Landlock ABI this kernel enforces (0: none).
    landlock_abi: u8,
    netns: bool,
    mountns: bool,
    pidns: bool,
    seccomp: bool,
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

/// One bind mount of the view: `source` (a host path) at `target` (a path inside the view).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// The host path.
    pub source: PathBuf,
    /// Where it appears inside the view (absolute).
    pub target: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
    /// A device node (keeps device access; everything else is `nodev`).
    pub device: bool,
}

/// The command's filesystem view, prepared by the host: a new root directory whose mount
/// points already exist, the binds to make in order, and what to hide or freeze inside the
/// workspace (workspace-relative paths, opened in the child beneath the workspace without
/// following any symlink, so a path swapped for a symlink is skipped, never followed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewSpec {
    /// The host directory that becomes `/`.
    pub root: PathBuf,
    /// Bind mounts, parents before children.
    pub binds: Vec<Bind>,
    /// Paths inside the view masked by an empty read-only file (system secrets).
    pub masked_files: Vec<PathBuf>,
    /// Paths inside the view masked by an empty read-only tmpfs.
    pub masked_dirs: Vec<PathBuf>,
    /// The workspace, inside the view.
    pub workspace: PathBuf,
    /// What to hide and freeze inside the workspace (the host's plan, as it is).
    pub plan: crate::workspace::view::Plan,
    /// The working directory inside the view.
    pub cwd: PathBuf,
    /// Host paths a normal command may write beneath (Landlock); empty for the read-only class
    /// except the private `/tmp`, `$HOME` and `/dev/shm`.
    pub writable: Vec<PathBuf>,
}

/// The per-call directories behind a view: removed when dropped, off the call's path. The new
/// root, `$HOME` and `/dev/shm` live on a tmpfs where the host has one (`/dev/shm`: creating a
/// directory there costs ~5 µs against ~140 µs on this machine kind's disk, and a view needs a
/// few dozen); the command's `/tmp` stays on disk, so a command's temporary files do not eat
/// the host's memory.
pub struct CallDirs {
    fast: Option<tempfile::TempDir>,
    disk: Option<tempfile::TempDir>,
}

/// Removes per-call directories on a thread of its own: removing a directory that was a mount
/// point in a namespace the kernel is still tearing down waits for it (~8 ms a directory on
/// this machine kind), which no call should pay for.
struct Remover {
    tx: std::sync::Mutex<std::sync::mpsc::Sender<tempfile::TempDir>>,
    pending: std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>,
}

fn remover() -> Option<&'static Remover> {
    static REMOVER: OnceLock<Option<Remover>> = OnceLock::new();
    REMOVER
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<tempfile::TempDir>();
            let pending =
                std::sync::Arc::new((std::sync::Mutex::new(0usize), std::sync::Condvar::new()));
            let counter = pending.clone();
            std::thread::Builder::new()
                .name("toolgate-shell-cleanup".into())
                .spawn(move || {
                    for dir in rx {
                        drop(dir);
                        let (lock, cv) = &*counter;
                        let mut n = lock.lock().unwrap_or_else(|p| p.into_inner());
                        *n = n.saturating_sub(1);
                        cv.notify_all();
                    }
                })
                .ok()?;
            Some(Remover {
                tx: std::sync::Mutex::new(tx),
                pending,
            })
        })
        .as_ref()
}

/// Wait (at most `timeout`) until the directories of ended commands are removed; the gate
/// calls this when it closes, so a one-shot `toolgate call` leaves nothing behind in `/tmp`.
pub fn finish_cleanup(timeout: std::time::Duration) {
    let Some(r) = remover() else { return };
    let (lock, cv) = &*r.pending;
    let deadline = std::time::Instant::now() + timeout;
    let mut n = lock.lock().unwrap_or_else(|p| p.into_inner());
    while *n > 0 {
        let now = std::time::Instant::now();
        if now >= deadline {
            return;
        }
        n = cv
            .wait_timeout(n, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}

impl Drop for CallDirs {
    fn drop(&mut self) {
        for dir in [self.fast.take(), self.disk.take()].into_iter().flatten() {
            let Some(r) = remover() else {
                drop(dir);
                continue;
            };
            let (lock, _) = &*r.pending;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            let tx = r.tx.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(std::sync::mpsc::SendError(dir)) = tx.send(dir) {
                *lock.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                drop(dir);
            }
        }
    }
}

impl CallDirs {
    /// Fresh per-call directories (`root`, `home`, `shm` in [`CallDirs::path`], and the
    /// private temp dir), only root can enter.
    pub fn create() -> Result<CallDirs, String> {
        let fail = |e: std::io::Error| format!("creating the command's private directories: {e}");
        static FAST_BASE: OnceLock<PathBuf> = OnceLock::new();
        let fast_base = FAST_BASE.get_or_init(|| {
            let shm = Path::new("/dev/shm");
            if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            }
        });
        let fast = tempfile::Builder::new()
            .prefix("toolgate-view-")
            .tempdir_in(fast_base)
            .map_err(fail)?;
        for sub in ["root", "home", "shm"] {
            std::fs::create_dir(fast.path().join(sub)).map_err(fail)?;
        }
        let disk = tempfile::Builder::new()
            .prefix("toolgate-tmp-")
            .tempdir()
            .map_err(fail)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(fast.path(), std::fs::Permissions::from_mode(0o700));
            // The private /tmp behaves like /tmp (sticky, world-writable).
            let _ = std::fs::set_permissions(disk.path(), std::fs::Permissions::from_mode(0o1777));
        }
        Ok(CallDirs {
            fast: Some(fast),
            disk: Some(disk),
        })
    }

    /// The directory holding the new root, `home` and `shm`.
    pub fn path(&self) -> &Path {
        self.fast
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// The private temp dir (the command's `/tmp` with a view, its `TMPDIR` without).
    pub fn tmp(&self) -> PathBuf {
        self.disk
            .as_ref()
            .map_or(PathBuf::from("/nonexistent"), |d| d.path().to_path_buf())
    }

    /// Whether `p` is inside one of this call's own directories.
    fn owns(&self, p: &Path) -> bool {
        p.starts_with(self.path()) || p.starts_with(self.tmp())
    }
}

/// What the host hands to [`build_view`].
pub struct ViewInputs<'a> {
    /// The workspace (canonical host path).
    pub workspace: &'a Path,
    /// The working directory (host path inside the workspace).
    pub cwd: &'a Path,
    /// The read-only class.
    pub read_only: bool,
    /// What to hide and freeze inside the workspace.
    pub plan: &'a crate::workspace::view::Plan,
    /// `$HOME` of the host, if any.
    pub home: Option<&'a Path>,
    /// PATH entries the command may use (absolute host directories).
    pub path_dirs: &'a [PathBuf],
    /// Extra host paths, read-only (`[shell] read`).
    pub extra_read: &'a [PathBuf],
    /// Extra host paths, writable for normal commands (`[shell] write`).
    pub extra_write: &'a [PathBuf],
}

/// Lay out the new root in `dirs` and say which binds make the view.
pub fn build_view(dirs: &CallDirs, inputs: &ViewInputs<'_>) -> Result<ViewSpec, String> {
    let root = dirs.path().join("root");
    let mut binds: Vec<Bind> = Vec::new();
    let fail =
        |what: &str, e: std::io::Error| format!("preparing the command's view ({what}): {e}");
    for dir in SYSTEM_DIRS {
        let host = Path::new(dir);
        let Ok(meta) = host.symlink_metadata() else {
            continue;
        };
        let at = root.join(dir.trim_start_matches('/'));
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(host).map_err(|e| fail(dir, e))?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(&target, &at).map_err(|e| fail(dir, e))?;
        } else if meta.is_dir() {
            binds.push(Bind {
                source: host.to_path_buf(),
                target: host.to_path_buf(),
                read_only: true,
                device: false,
            });
        }
    }
    // Private /tmp, /dev, /proc.
    binds.push(Bind {
        source: dirs.tmp(),
        target: "/tmp".into(),
        read_only: false,
        device: false,
    });
    for node in DEV_NODES {
        let host = Path::new("/dev").join(node);
        if host.exists() {
            binds.push(Bind {
                source: host.clone(),
                target: host,
                read_only: false,
                device: true,
            });
        }
    }
    binds.push(Bind {
        source: dirs.path().join("shm"),
        target: "/dev/shm".into(),
        read_only: false,
        device: false,
    });
    // $HOME: private, with the toolchain homes read-only.
    let mut home_secrets = Vec::new();
    if let Some(home) = inputs
        .home
        .filter(|h| h.is_absolute() && *h != Path::new("/"))
    {
        binds.push(Bind {
            source: dirs.path().join("home"),
            target: home.to_path_buf(),
            read_only: false,
            device: false,
        });
        for sub in TOOLCHAIN_HOMES {
            let host = home.join(sub);
            if host.is_dir() && !inputs.workspace.starts_with(&host) {
                binds.push(Bind {
                    source: host.clone(),
                    target: host,
                    read_only: true,
                    device: false,
                });
            }
        }
        for s in TOOLCHAIN_SECRETS {
            let host = home.join(s);
            if host.symlink_metadata().is_ok_and(|m| m.is_file()) {
                home_secrets.push(host);
            }
        }
    }
    // PATH entries the view does not already hold (read-only), and the policy's paths.
    let usable = |p: &Path| {
        p.is_absolute()
            && p != Path::new("/")
            && !["/tmp", "/proc", "/sys", "/dev", "/run", "/var/run"]
                .iter()
                .any(|bad| p.starts_with(bad))
            && inputs.home.is_none_or(|h| p != h)
    };
    for dir in inputs.path_dirs {
        // `/sbin -> usr/sbin`: judged (and mounted) by where it really is.
        let Ok(dir) = dir.canonicalize() else {
            continue;
        };
        let dir = &dir;
        let covered = binds
            .iter()
            .any(|b| b.read_only && dir.starts_with(&b.target));
        if !covered && usable(dir) && dir.is_dir() && !inputs.workspace.starts_with(dir) {
            binds.push(Bind {
                source: dir.clone(),
                target: dir.clone(),
                read_only: true,
                device: false,
            });
        }
    }
    for (paths, read_only) in [(inputs.extra_read, true), (inputs.extra_write, false)] {
        for p in paths {
            // Never the root, `$HOME` or the workspace itself or anything holding them (that
            // would undo the private home and the masks), nor, for writes, a system directory.
            let holds = |inner: &Path| inner.starts_with(p);
            let system = SYSTEM_DIRS
                .iter()
                .chain(&["/boot", "/var"])
                .any(|d| p.starts_with(d));
            if !usable(p)
                || !p.is_absolute()
                || p.components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                || holds(inputs.workspace)
                || inputs.home.is_some_and(holds)
                || (!read_only && system)
            {
                return Err(format!(
                    "the policy's [shell] {} cannot name `{}`: only absolute paths outside /tmp, /proc, /sys, /dev and /run, not holding $HOME or the workspace{}",
                    if read_only { "read" } else { "write" },
                    p.display(),
                    if read_only { "" } else { ", and not inside a system directory (/usr, /etc, /bin, /lib, /opt, /var, /boot …)" }
                ));
            }
            if p.exists() {
                binds.push(Bind {
                    source: p.clone(),
                    target: p.clone(),
                    read_only: read_only || inputs.read_only,
                    device: false,
                });
            }
        }
    }
    binds.push(Bind {
        source: inputs.workspace.to_path_buf(),
        target: inputs.workspace.to_path_buf(),
        read_only: inputs.read_only,
        device: false,
    });
    // Parents before children: a mount point inside another bind is made after it.
    binds.sort_by_key(|b| b.target.components().count());
    // Make every mount point: inside the nearest enclosing bind's source when that is one of
    // this call's own directories, else in the new root. A mount point inside a host directory
    // (the workspace under /usr, say) exists already, since it is the same path.
    for i in 0..binds.len() {
        let target = binds[i].target.clone();
        let enclosing = binds[..i]
            .iter()
            .filter(|b| target.starts_with(&b.target) && target != b.target)
            .max_by_key(|b| b.target.components().count());
        let at = match enclosing {
            Some(b) => {
                let rest = target.strip_prefix(&b.target).unwrap_or(Path::new(""));
                if !dirs.owns(&b.source) {
                    if !b.source.join(rest).exists() {
                        return Err(format!(
                            "preparing the command's view: `{}` is inside `{}` but does not exist there",
                            target.display(),
                            b.target.display()
                        ));
                    }
                    continue;
                }
                b.source.join(rest)
            }
            None => root.join(target.strip_prefix("/").unwrap_or(&target)),
        };
        let source_is_dir = binds[i].source.is_dir();
        if source_is_dir {
            std::fs::create_dir_all(&at).map_err(|e| fail(&at.display().to_string(), e))?;
        } else {
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| fail(&parent.display().to_string(), e))?;
            }
            if !at.exists() {
                std::fs::write(&at, b"").map_err(|e| fail(&at.display().to_string(), e))?;
            }
        }
    }
    std::fs::create_dir_all(root.join("proc")).map_err(|e| fail("/proc", e))?;
    for (link, to) in [
        ("dev/fd", "/proc/self/fd"),
        ("dev/stdin", "/proc/self/fd/0"),
        ("dev/stdout", "/proc/self/fd/1"),
        ("dev/stderr", "/proc/self/fd/2"),
    ] {
        #[cfg(unix)]
        std::os::unix::fs::symlink(to, root.join(link)).map_err(|e| fail(link, e))?;
    }
    // The empty file bound over every masked file.
    std::fs::write(root.join(".empty"), b"").map_err(|e| fail(".empty", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ =
            std::fs::set_permissions(root.join(".empty"), std::fs::Permissions::from_mode(0o444));
    }
    let mut masked_files: Vec<PathBuf> = Vec::new();
    let mut masked_dirs: Vec<PathBuf> = Vec::new();
    for s in SYSTEM_SECRETS {
        let p = Path::new(s);
        match p.symlink_metadata() {
            Ok(m) if m.is_dir() => masked_dirs.push(p.to_path_buf()),
            Ok(m) if m.is_file() => masked_files.push(p.to_path_buf()),
            _ => {}
        }
    }
    masked_files.extend(home_secrets);
    let mut writable = vec![
        dirs.tmp(),
        dirs.path().join("home"),
        dirs.path().join("shm"),
    ];
    if !inputs.read_only {
        writable.push(inputs.workspace.to_path_buf());
        writable.extend(inputs.extra_write.iter().filter(|p| p.exists()).cloned());
    }
    Ok(ViewSpec {
        root,
        binds,
        masked_files,
        masked_dirs,
        workspace: inputs.workspace.to_path_buf(),
        plan: inputs.plan.clone(),
        cwd: inputs.cwd.to_path_buf(),
        writable,
    })
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
    net: Option<rustix::fd::OwnedFd>,
) -> Result<(), String> {
    linux::install(cmd, want, view, writable, procs, net)
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{Confinement, Probe, ViewSpec};
    use landlock::{
        path_beneath_rules, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope, ABI,
    };
    use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    use rustix::mount::{
        mount, mount_bind, mount_change, mount_remount, unmount, MountFlags, MountPropagationFlags,
        UnmountFlags,
    };
    use rustix::thread::UnshareFlags;
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    /// The file-system access rights handled (ABI 3: writes, truncation, refer).
    const ABI_FS: ABI = ABI::V3;

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

    /// `/proc/self/fd/<fd>` as a C string in `buf`, without allocating: the mount calls act on
    /// exactly the file that was opened (the kernel follows this magic link to it).
    fn fd_path<'b>(fd: BorrowedFd<'_>, buf: &'b mut [u8; 40]) -> &'b CStr {
        const PREFIX: &[u8] = b"/proc/self/fd/";
        let mut digits = [0u8; 20];
        let d = decimal(fd.as_raw_fd(), &mut digits);
        buf[..PREFIX.len()].copy_from_slice(PREFIX);
        buf[PREFIX.len()..PREFIX.len() + d.len()].copy_from_slice(d);
        buf[PREFIX.len() + d.len()] = 0;
        // The buffer holds one NUL, written just above.
        CStr::from_bytes_until_nul(&buf[..]).unwrap_or(c"/")
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

        /// The group's directory, opened for `CLONE_INTO_CGROUP` (and to reach its
        /// `cgroup.procs`).
        pub(super) fn dir_fd(&self) -> Result<OwnedFd, String> {
            rustix::fs::open(
                &self.dir,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| format!("opening the pids cgroup {}: {e}", self.dir.display()))
        }

        pub(super) fn join(&self, pid: u32) -> Result<(), String> {
            std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
                .map_err(|e| format!("joining the pids cgroup {}: {e}", self.dir.display()))
        }

        /// SIGKILL every process in the group: cgroup v2's `cgroup.kill` where there is one,
        /// else each pid listed (repeated a few times, for processes forked meanwhile).
        pub(super) fn kill_all(&self) {
            if std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok() {
                return;
            }
            for _ in 0..4 {
                let Ok(list) = std::fs::read_to_string(self.dir.join("cgroup.procs")) else {
                    return;
                };
                let pids: Vec<i32> = list.lines().filter_map(|l| l.trim().parse().ok()).collect();
                if pids.is_empty() {
                    return;
                }
                for pid in pids {
                    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                }
            }
        }
    }

    impl Drop for Cgroup {
        fn drop(&mut self) {
            self.kill_all();
            // Killed tasks may take a moment to be reaped, and a cgroup with tasks cannot be
            // removed. That moment is usually well under a millisecond, so wait in short,
            // growing steps (at most ~1 s).
            let mut wait = std::time::Duration::from_micros(100);
            let mut waited = std::time::Duration::ZERO;
            while waited < std::time::Duration::from_secs(1) {
                if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                    return;
                }
                std::thread::sleep(wait);
                waited += wait;
                wait = (wait * 2).min(std::time::Duration::from_millis(20));
                self.kill_all();
            }
            tracing::warn!(cgroup = %self.dir.display(), "could not remove a pids cgroup");
        }
    }

    /// A Landlock ruleset letting writes happen only beneath `writable` (no device creation)
    /// and, with `scopes`, keeping signals and abstract unix sockets inside the domain.
    fn ruleset(writable: &[PathBuf], scopes: bool) -> Result<landlock::RulesetCreated, String> {
        let write = AccessFs::from_write(ABI_FS);
        let allowed = write & !(AccessFs::MakeChar | AccessFs::MakeBlock);
        let mut rs = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(write)
            .map_err(|e| e.to_string())?;
        if scopes {
            rs = rs
                .scope(Scope::Signal | Scope::AbstractUnixSocket)
                .map_err(|e| e.to_string())?;
        }
        rs.create()
            .map_err(|e| e.to_string())?
            .add_rules(path_beneath_rules(writable, allowed))
            .map_err(|e| e.to_string())?
            .add_rules(path_beneath_rules(
                ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"]
                    .iter()
                    .filter(|p| Path::new(p).exists()),
                AccessFs::WriteFile | AccessFs::Truncate,
            ))
            .map_err(|e| e.to_string())
    }

    /// The seccomp filter: refused calls get `EPERM`; `clone3` gets `ENOSYS` (its flags
    /// cannot be inspected; the C library falls back to `clone`). One program laid out as a
    /// binary search ([`crate::exec::seccomp`]), so installing it is cheap.
    fn seccomp_filters() -> Result<&'static [seccompiler::BpfProgram], String> {
        static FILTERS: OnceLock<Result<Vec<seccompiler::BpfProgram>, String>> = OnceLock::new();
        FILTERS
            .get_or_init(|| {
                let arch = crate::exec::seccomp::native_arch().ok_or_else(|| {
                    format!("seccomp: {} is not supported", std::env::consts::ARCH)
                })?;
                Ok(vec![crate::exec::seccomp::build(arch, &seccomp_rules())?])
            })
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The `clone` flags that make a new namespace: refused to the command.
    const NAMESPACE_FLAGS: [libc::c_int; 7] = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];

    /// Every refused system call and how (the table in docs/decisions.md).
    pub(super) fn seccomp_rules() -> Vec<(i64, crate::exec::seccomp::Rule)> {
        use crate::exec::seccomp::Rule;
        let always: &[libc::c_long] = &[
            libc::SYS_settimeofday,
            libc::SYS_clock_settime,
            libc::SYS_adjtimex,
            libc::SYS_clock_adjtime,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_swapon,
            libc::SYS_swapoff,
            libc::SYS_reboot,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_setns,
            libc::SYS_unshare,
            libc::SYS_open_by_handle_at,
            libc::SYS_acct,
            libc::SYS_quotactl,
            libc::SYS_syslog,
            libc::SYS_vhangup,
            libc::SYS_userfaultfd,
            libc::SYS_fsopen,
            libc::SYS_fsmount,
            libc::SYS_fsconfig,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            libc::SYS_mount_setattr,
        ];
        let mut rules: Vec<(i64, Rule)> = always.iter().map(|nr| (*nr, Rule::Deny)).collect();
        #[cfg(target_arch = "x86_64")]
        {
            rules.push((libc::SYS_iopl, Rule::Deny));
            rules.push((libc::SYS_ioperm, Rule::Deny));
            rules.push((libc::SYS_mknod, Rule::DeviceMode { arg: 1 }));
        }
        rules.push((libc::SYS_mknodat, Rule::DeviceMode { arg: 2 }));
        let namespaces = NAMESPACE_FLAGS
            .iter()
            .fold(0u32, |m, f| m | f.cast_unsigned());
        rules.push((
            libc::SYS_clone,
            Rule::AnyFlag {
                arg: 0,
                mask: namespaces,
            },
        ));
        rules.push((
            libc::SYS_ioctl,
            Rule::Equals {
                arg: 1,
                value: u32::try_from(libc::TIOCSTI).unwrap_or(u32::MAX),
            },
        ));
        rules.push((libc::SYS_clone3, Rule::NoSys));
        rules
    }

    /// The same refusals built by seccompiler (its linear layout): the reference the binary
    /// search is checked against.
    #[cfg(test)]
    #[allow(clippy::unwrap_used)]
    pub(super) fn seccompiler_reference() -> Vec<seccompiler::BpfProgram> {
        use crate::exec::seccomp::Rule;
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond,
            SeccompFilter, SeccompRule, TargetArch,
        };
        let arch: TargetArch = std::env::consts::ARCH.try_into().unwrap();
        use std::collections::BTreeMap;
        let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let rule = |c: Vec<Cond>| SeccompRule::new(c).unwrap();
        for (nr, r) in seccomp_rules() {
            match r {
                Rule::Deny => {
                    eperm.insert(nr, vec![]);
                }
                Rule::NoSys => {
                    enosys.insert(nr, vec![]);
                }
                Rule::DeviceMode { arg } => {
                    let v = [libc::S_IFCHR, libc::S_IFBLK]
                        .iter()
                        .map(|k| {
                            rule(vec![Cond::new(
                                arg,
                                Len::Dword,
                                Op::MaskedEq(u64::from(libc::S_IFMT)),
                                u64::from(*k),
                            )
                            .unwrap()])
                        })
                        .collect();
                    eperm.insert(nr, v);
                }
                Rule::AnyFlag { arg, mask } => {
                    let v = (0..32)
                        .map(|b| 1u64 << b)
                        .filter(|b| u64::from(mask) & b != 0)
                        .map(|b| {
                            rule(vec![Cond::new(arg, Len::Qword, Op::MaskedEq(b), b).unwrap()])
                        })
                        .collect();
                    eperm.insert(nr, v);
                }
                Rule::Equals { arg, value } => {
                    eperm.insert(
                        nr,
                        vec![rule(vec![Cond::new(
                            arg,
                            Len::Dword,
                            Op::Eq,
                            u64::from(value),
                        )
                        .unwrap()])],
                    );
                }
            }
        }
        let build = |rules, action| -> seccompiler::BpfProgram {
            SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
                .unwrap()
                .try_into()
                .unwrap()
        };
        vec![
            build(eperm, SeccompAction::Errno(libc::EPERM.cast_unsigned())),
            build(enosys, SeccompAction::Errno(libc::ENOSYS.cast_unsigned())),
        ]
    }

    pub(super) fn probe() -> Probe {
        let tmp = std::env::temp_dir();
        let landlock_abi = if ruleset(std::slice::from_ref(&tmp), true).is_ok() {
            6
        } else if ruleset(std::slice::from_ref(&tmp), false).is_ok() {
            3
        } else {
            0
        };
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
        let pid_flags = UnshareFlags::NEWPID | UnshareFlags::NEWIPC | UnshareFlags::NEWUTS;
        // One child for the usual case (everything works), one per namespace otherwise.
        let all = try_flags(UnshareFlags::NEWNET | UnshareFlags::NEWNS | pid_flags);
        Probe {
            landlock_abi,
            netns: all || try_flags(UnshareFlags::NEWNET),
            mountns: all || try_flags(UnshareFlags::NEWNS),
            pidns: all || try_flags(pid_flags),
            seccomp: seccomp_filters().is_ok(),
        }
    }

    fn cstr(p: &Path) -> Result<CString, String> {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| format!("`{}` contains a NUL byte", p.display()))
    }

    fn cstr_str(s: &str) -> Result<CString, String> {
        CString::new(s).map_err(|_| format!("`{s}` contains a NUL byte"))
    }

    /// `root` + an absolute path inside the view.
    fn under(root: &Path, inside: &Path) -> PathBuf {
        root.join(inside.strip_prefix("/").unwrap_or(inside))
    }

    /// The view with every path a C string, ready for the child.
    struct Prepared {
        root: CString,
        binds: Vec<(CString, CString, MountFlags, bool)>,
        proc_: CString,
        proc_sys: CString,
        proc_sysrq: CString,
        empty: CString,
        masked_files: Vec<CString>,
        masked_dirs: Vec<CString>,
        workspace: CString,
        secret_files: Vec<CString>,
        secret_dirs: Vec<CString>,
        git_readonly: Vec<CString>,
        git_files: Vec<CString>,
        /// Pinned and git directories together, parents first.
        mount_points: Vec<CString>,
        cwd: CString,
    }

    fn prepare(v: &ViewSpec) -> Result<Prepared, String> {
        let root = &v.root;
        let mut binds = Vec::new();
        for b in &v.binds {
            let mut flags = MountFlags::BIND | MountFlags::NOSUID;
            if !b.device {
                flags |= MountFlags::NODEV;
            }
            if b.read_only {
                flags |= MountFlags::RDONLY;
            }
            // Read-only binds and the workspace are remounted with their flags. A device node
            // and the call's own private directories need no second call: setuid bits are
            // ignored under no_new_privs and device nodes cannot be made.
            let remount = b.read_only || (!b.device && b.target == v.workspace);
            binds.push((
                cstr(&b.source)?,
                cstr(&under(root, &b.target))?,
                flags,
                remount,
            ));
        }
        let list = |v: &[String]| v.iter().map(|s| cstr_str(s)).collect::<Result<Vec<_>, _>>();
        let paths = |v: &[PathBuf]| {
            v.iter()
                .map(|p| cstr(&under(root, p)))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Prepared {
            root: cstr(root)?,
            binds,
            proc_: cstr(&root.join("proc"))?,
            proc_sys: cstr(&root.join("proc/sys"))?,
            proc_sysrq: cstr(&root.join("proc/sysrq-trigger"))?,
            empty: cstr(&root.join(".empty"))?,
            masked_files: paths(&v.masked_files)?,
            masked_dirs: paths(&v.masked_dirs)?,
            workspace: cstr(&under(root, &v.workspace))?,
            secret_files: list(&v.plan.secret_files)?,
            secret_dirs: list(&v.plan.secret_dirs)?,
            git_readonly: list(&v.plan.git_readonly)?,
            git_files: list(&v.plan.git_files)?,
            mount_points: {
                let mut all: Vec<&String> =
                    v.plan.pinned_dirs.iter().chain(&v.plan.git_dirs).collect();
                all.sort_by_key(|p| p.split('/').count());
                all.dedup();
                all.into_iter()
                    .map(|s| cstr_str(s))
                    .collect::<Result<Vec<_>, _>>()?
            },
            cwd: cstr(&v.cwd)?,
        })
    }

    const MASK_FLAGS: MountFlags = MountFlags::RDONLY
        .union(MountFlags::NOSUID)
        .union(MountFlags::NODEV)
        .union(MountFlags::NOEXEC);

    /// Open `rel` beneath `dir` without following any symlink (`None`: it is gone or became a
    /// symlink, so there is nothing to mask under that name).
    fn beneath(dir: BorrowedFd<'_>, rel: &CStr) -> std::io::Result<Option<OwnedFd>> {
        match rustix::fs::openat2(
            dir,
            rel,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn is_dir(fd: BorrowedFd<'_>) -> bool {
        rustix::fs::fstat(fd)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
    }

    /// An empty read-only tmpfs over the directory `fd`.
    fn mask_dir(fd: BorrowedFd<'_>) -> std::io::Result<()> {
        let mut buf = [0u8; 40];
        mount(
            c"tmpfs",
            fd_path(fd, &mut buf),
            c"tmpfs",
            MASK_FLAGS,
            c"size=4k,nr_inodes=4,mode=555",
        )?;
        Ok(())
    }

    /// Bind `source` over the file `fd` (reopened by `reopen` to reach the new mount), then
    /// make that mount read-only.
    fn bind_ro(
        source: &CStr,
        fd: BorrowedFd<'_>,
        reopen: impl Fn() -> std::io::Result<Option<OwnedFd>>,
    ) -> std::io::Result<()> {
        let mut buf = [0u8; 40];
        mount_bind(source, fd_path(fd, &mut buf))?;
        if let Some(top) = reopen()? {
            let mut buf = [0u8; 40];
            mount_remount(
                fd_path(top.as_fd(), &mut buf),
                MountFlags::BIND | MASK_FLAGS,
                c"",
            )?;
        }
        Ok(())
    }

    /// In the child: build the view and enter it.
    fn enter_view(p: &Prepared) -> std::io::Result<()> {
        mount_change(
            c"/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )?;
        mount_bind(p.root.as_c_str(), p.root.as_c_str())?;
        for (source, target, flags, remount) in &p.binds {
            mount_bind(source.as_c_str(), target.as_c_str())?;
            if *remount {
                mount_remount(target.as_c_str(), *flags, c"")?;
            }
        }
        mount(
            c"proc",
            p.proc_.as_c_str(),
            c"proc",
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            c"",
        )?;
        for sub in [&p.proc_sys, &p.proc_sysrq] {
            match mount_bind(sub.as_c_str(), sub.as_c_str()) {
                // Not every kernel (or container) has both.
                Err(Errno::NOENT) => continue,
                r => r?,
            }
            mount_remount(sub.as_c_str(), MountFlags::BIND | MASK_FLAGS, c"")?;
        }
        for f in &p.masked_files {
            mount_bind(p.empty.as_c_str(), f.as_c_str())?;
            mount_remount(f.as_c_str(), MountFlags::BIND | MASK_FLAGS, c"")?;
        }
        for d in &p.masked_dirs {
            mount(
                c"tmpfs",
                d.as_c_str(),
                c"tmpfs",
                MASK_FLAGS,
                c"size=4k,nr_inodes=4,mode=555",
            )?;
        }
        let ws = rustix::fs::open(
            p.workspace.as_c_str(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let ws = ws.as_fd();
        // The host's state: an empty read-only tmpfs, with `outputs/` bound back read-only.
        let outputs = beneath(ws, c".toolgate/outputs")?;
        if let Some(state) = beneath(ws, c".toolgate")? {
            if is_dir(state.as_fd()) {
                let mut buf = [0u8; 40];
                mount(
                    c"tmpfs",
                    fd_path(state.as_fd(), &mut buf),
                    c"tmpfs",
                    MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                    c"size=16k,nr_inodes=8,mode=755",
                )?;
                if let Some(top) = beneath(ws, c".toolgate")? {
                    if let Some(out) = outputs.as_ref().filter(|o| is_dir(o.as_fd())) {
                        rustix::fs::mkdirat(&top, c"outputs", Mode::from_raw_mode(0o755))?;
                        if let Some(at) = beneath(ws, c".toolgate/outputs")? {
                            let mut src = [0u8; 40];
                            bind_ro(fd_path(out.as_fd(), &mut src), at.as_fd(), || {
                                beneath(ws, c".toolgate/outputs")
                            })?;
                        }
                    }
                    let mut buf = [0u8; 40];
                    mount_remount(fd_path(top.as_fd(), &mut buf), MASK_FLAGS, c"")?;
                }
            } else {
                bind_ro(p.empty.as_c_str(), state.as_fd(), || {
                    beneath(ws, c".toolgate")
                })?;
            }
        }
        // Judged by what is there now: a secret file swapped for a directory (or back) is
        // still masked.
        for f in p.secret_dirs.iter().chain(&p.secret_files) {
            if let Some(fd) = beneath(ws, f)? {
                if is_dir(fd.as_fd()) {
                    mask_dir(fd.as_fd())?;
                } else {
                    bind_ro(p.empty.as_c_str(), fd.as_fd(), || beneath(ws, f))?;
                }
            }
        }
        // Git directories become mount points (rename and removal fail); their config and
        // hooks are read-only.
        for g in &p.mount_points {
            if let Some(fd) = beneath(ws, g)? {
                if is_dir(fd.as_fd()) {
                    let mut buf = [0u8; 40];
                    let at = fd_path(fd.as_fd(), &mut buf);
                    mount_bind(at, at)?;
                }
            }
        }
        for g in p.git_readonly.iter().chain(&p.git_files) {
            if let Some(fd) = beneath(ws, g)? {
                let mut buf = [0u8; 40];
                let at = fd_path(fd.as_fd(), &mut buf);
                mount_bind(at, at)?;
                if let Some(top) = beneath(ws, g)? {
                    let mut buf = [0u8; 40];
                    mount_remount(
                        fd_path(top.as_fd(), &mut buf),
                        MountFlags::BIND | MASK_FLAGS,
                        c"",
                    )?;
                }
            }
        }
        mount_remount(
            p.root.as_c_str(),
            MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
            c"",
        )?;
        rustix::process::chdir(p.root.as_c_str())?;
        rustix::process::pivot_root(c".", c".")?;
        unmount(c".", UnmountFlags::DETACH)?;
        rustix::process::chdir(p.cwd.as_c_str())?;
        Ok(())
    }

    /// Drop every capability from every set and lock root out of getting them back on exec.
    fn drop_capabilities(last_cap: u32) -> std::io::Result<()> {
        // SECBIT_NOROOT | _LOCKED, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE | _LOCKED.
        const SECBITS: libc::c_ulong = (1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 7);
        // SAFETY: prctl with integer arguments only.
        #[allow(unsafe_code)]
        unsafe {
            if libc::prctl(libc::PR_SET_SECUREBITS, SECBITS, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for cap in 0..=last_cap {
                if libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        rustix::thread::set_capabilities(
            None,
            rustix::thread::CapabilitySets {
                effective: rustix::thread::CapabilitySet::empty(),
                permitted: rustix::thread::CapabilitySet::empty(),
                inheritable: rustix::thread::CapabilitySet::empty(),
            },
        )?;
        Ok(())
    }

    /// Exit the way `status` (a `waitpid` status) says: the same code, or the same signal.
    fn mirror(status: libc::c_int) -> ! {
        // SAFETY: async-signal-safe calls only; this process exits here.
        #[allow(unsafe_code)]
        unsafe {
            if libc::WIFSIGNALED(status) {
                let sig = libc::WTERMSIG(status);
                libc::signal(sig, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::kill(libc::getpid(), sig);
                libc::_exit(128 + sig);
            }
            libc::_exit(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                1
            })
        }
    }

    /// Close every descriptor from 3 up except `keep`.
    fn close_others(keep: libc::c_int) {
        // SAFETY: close_range on descriptor numbers; nothing in this process uses them after.
        #[allow(unsafe_code)]
        unsafe {
            if keep > 3 {
                libc::syscall(libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32);
            }
            libc::syscall(
                libc::SYS_close_range,
                (keep + 1).max(3) as u32,
                u32::MAX,
                0u32,
            );
        }
    }

    /// Write `pid` into `cgroup.procs` of the cgroup directory `dir` (no allocation: safe
    /// after `fork`). The kernel waits for an RCU grace period on such a move when none is
    /// under way (milliseconds), which is why `clone3` into the group is tried first.
    fn join_cgroup(dir: BorrowedFd<'_>, pid: libc::pid_t) -> std::io::Result<()> {
        let procs = rustix::fs::openat(
            dir,
            c"cgroup.procs",
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut buf = [0u8; 20];
        rustix::io::write(&procs, decimal(pid, &mut buf))?;
        Ok(())
    }

    /// `fork` by `clone3`, the child starting inside the cgroup `dir` (`CLONE_INTO_CGROUP`,
    /// Linux 5.7 and cgroup v2). `Err` when the kernel refused: nothing was started.
    fn fork_into_cgroup(dir: BorrowedFd<'_>) -> std::io::Result<libc::pid_t> {
        /// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`).
        #[repr(C)]
        struct CloneArgs {
            flags: u64,
            pidfd: u64,
            child_tid: u64,
            parent_tid: u64,
            exit_signal: u64,
            stack: u64,
            stack_size: u64,
            tls: u64,
            set_tid: u64,
            set_tid_size: u64,
            cgroup: u64,
        }
        const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP,
            pidfd: 0,
            child_tid: 0,
            parent_tid: 0,
            exit_signal: libc::SIGCHLD as u64,
            stack: 0,
            stack_size: 0,
            tls: 0,
            set_tid: 0,
            set_tid_size: 0,
            cgroup: dir.as_raw_fd() as u64,
        };
        // SAFETY: clone3 without CLONE_VM and without a stack behaves as fork; the child
        // continues on a copy of this stack and makes only system calls.
        #[allow(unsafe_code)]
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(pid as libc::pid_t)
    }

    /// A plain `fork` by system call: no `atfork` handlers (another thread of the spawner may
    /// have held the allocator's lock when this process was forked from it).
    fn raw_fork() -> std::io::Result<libc::pid_t> {
        // SAFETY: clone with only SIGCHLD behaves as fork; the child continues on a copy of
        // this stack and makes only system calls.
        #[allow(unsafe_code)]
        let pid =
            unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(pid as libc::pid_t)
    }

    /// In the child with a fresh PID namespace: fork the namespace's init, which confines
    /// itself with `setup` (view, capabilities, Landlock, seccomp: all inherited by what it
    /// forks) and then forks the command. Returns only in the command's process; the other two
    /// wait and mirror its end.
    ///
    /// The init starts inside the pids cgroup (`clone3` into `cgroup`, the group's
    /// directory). Where the kernel cannot do that, its parent moves it there while it builds
    /// the view: such a move waits for an RCU grace period in the kernel (0.5 to 10 ms here),
    /// so doing it beside the view's mounts takes most of it off the command's start. Either
    /// way the init forks the command only once it is in the group, so the command and
    /// everything it starts are counted.
    fn split_for_pid_namespace(
        cgroup: Option<BorrowedFd<'_>>,
        setup: &mut dyn FnMut() -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let pipe = || -> std::io::Result<[libc::c_int; 2]> {
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: pipe2 fills the two descriptors.
            #[allow(unsafe_code)]
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(fds)
        };
        let [read_end, write_end] = pipe()?;
        let [go_read, go_write] = pipe()?;
        let (init, started_inside) = match cgroup.map(fork_into_cgroup) {
            Some(Ok(pid)) => (pid, true),
            _ => (raw_fork()?, cgroup.is_none()),
        };
        if init > 0 {
            // The host's child: move init into the pids cgroup, let it go on, then wait for it
            // and end as the command ended. Without the move init is never let go: it reports
            // the failure as the command's start error.
            // SAFETY: plain system calls on our own descriptors and child; never returns.
            #[allow(unsafe_code)]
            unsafe {
                libc::close(write_end);
                libc::close(go_read);
                let moved = match cgroup.filter(|_| !started_inside) {
                    Some(dir) => join_cgroup(dir, init).is_ok(),
                    None => true,
                };
                if moved {
                    let go = 1u8;
                    libc::write(go_write, (&go as *const u8).cast(), 1);
                }
                libc::close(go_write);
                close_others(read_end);
                libc::close(1);
                libc::close(2);
                let mut status: libc::c_int = 0;
                while libc::waitpid(init, &mut status, 0) < 0 {
                    if *libc::__errno_location() != libc::EINTR {
                        libc::_exit(1);
                    }
                }
                let mut reported: libc::c_int = 0;
                let n = libc::read(
                    read_end,
                    (&mut reported as *mut libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>(),
                );
                if n == std::mem::size_of::<libc::c_int>() as isize {
                    mirror(reported);
                }
                mirror(status);
            }
        }
        // PID 1 of the new namespace: it dies with the host's child, and when it ends every
        // process in the namespace is killed.
        // SAFETY: prctl with integer arguments; closing our copies of the other ends.
        #[allow(unsafe_code)]
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            libc::close(read_end);
            libc::close(go_write);
        }
        setup()?;
        let mut go = 0u8;
        // SAFETY: a one-byte read into a local.
        #[allow(unsafe_code)]
        let n = loop {
            let n = unsafe { libc::read(go_read, (&mut go as *mut u8).cast(), 1) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break n;
        };
        if n != 1 {
            // The move into the pids cgroup failed: nothing is started.
            return Err(std::io::Error::from_raw_os_error(
                Errno::AGAIN.raw_os_error(),
            ));
        }
        // SAFETY: closing our copy of the go pipe.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(go_read);
        }
        let command = raw_fork()?;
        if command > 0 {
            close_others(write_end);
            // SAFETY: plain system calls; never returns.
            #[allow(unsafe_code)]
            unsafe {
                libc::close(0);
                libc::close(1);
                libc::close(2);
                loop {
                    let mut status: libc::c_int = 0;
                    let pid = libc::waitpid(-1, &mut status, 0);
                    if pid == command {
                        libc::write(
                            write_end,
                            (&status as *const libc::c_int).cast(),
                            std::mem::size_of::<libc::c_int>(),
                        );
                        libc::_exit(0);
                    }
                    if pid < 0 && *libc::__errno_location() != libc::EINTR {
                        libc::_exit(1);
                    }
                }
            }
        }
        // The command itself (PID 2).
        // SAFETY: closing our copy of the pipe's write end.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(write_end);
        }
        Ok(())
    }

    fn cap_last_cap() -> u32 {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40)
    }

    pub(super) fn install(
        cmd: &mut Command,
        want: Confinement,
        view: Option<&ViewSpec>,
        writable: &[PathBuf],
        procs: Option<OwnedFd>,
        own_net: Option<OwnedFd>,
    ) -> Result<(), String> {
        // Everything that allocates or opens paths is done here, in the parent; the child only
        // makes system calls on what was prepared.
        let writable: Vec<PathBuf> = match view {
            Some(v) => v.writable.clone(),
            None => writable.to_vec(),
        };
        let mut rules = if want.landlock {
            Some(ruleset(&writable, want.scopes).map_err(|e| format!("preparing Landlock: {e}"))?)
        } else {
            None
        };
        let prepared = match view.filter(|_| want.view && want.mountns) {
            Some(v) => Some(prepare(v)?),
            None => None,
        };
        let filters: &'static [seccompiler::BpfProgram] = if want.seccomp {
            seccomp_filters()?
        } else {
            &[]
        };
        let last_cap = cap_last_cap();
        let mut flags = UnshareFlags::empty();
        // The command's own namespace (behind the egress proxy), else the shared empty one.
        let shared_net = match &own_net {
            None if want.netns && want.scopes && want.landlock => {
                crate::exec::netns::shared_empty()
            }
            _ => None,
        };
        if want.netns && shared_net.is_none() && own_net.is_none() {
            flags |= UnshareFlags::NEWNET;
        }
        if want.mountns {
            flags |= UnshareFlags::NEWNS;
        }
        if want.pidns {
            flags |= UnshareFlags::NEWPID | UnshareFlags::NEWIPC | UnshareFlags::NEWUTS;
        }
        let (pidns, caps) = (want.pidns, want.caps_dropped);
        // SAFETY: `pre_exec` runs in the forked child before `exec`. The closure makes only
        // system calls (unshare, clone, mount, pivot_root, prctl, capset, landlock, seccomp)
        // on values prepared in the parent (C strings, the ruleset's descriptor, the BPF
        // programs) and does not allocate on the success path; any failure aborts the spawn
        // with the error (fail closed).
        #[allow(unsafe_code)]
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || {
                // Without a PID namespace the child joins the pids cgroup first, so everything
                // the command starts is counted (with one, its init is moved there: see
                // `split_for_pid_namespace`).
                if let Some(dir) = procs.as_ref().filter(|_| !pidns) {
                    join_cgroup(
                        dir.as_fd(),
                        rustix::process::getpid().as_raw_nonzero().get(),
                    )?;
                }
                if let Some(net) = own_net.as_ref().map(AsFd::as_fd).or(shared_net) {
                    rustix::thread::move_into_link_name_space(
                        net,
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )?;
                }
                if !flags.is_empty() {
                    rustix::thread::unshare_unsafe(flags)?;
                }
                let mut setup = || -> std::io::Result<()> {
                    if let Some(p) = &prepared {
                        enter_view(p)?;
                    } else if want.mountns {
                        mount_change(
                            c"/",
                            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
                        )?;
                    }
                    if caps {
                        drop_capabilities(last_cap)?;
                    }
                    if let Some(r) = rules.take() {
                        r.restrict_self().map_err(|_| {
                            std::io::Error::from_raw_os_error(Errno::PERM.raw_os_error())
                        })?;
                    }
                    if !filters.is_empty() {
                        // SAFETY (of the whole): no_new_privs is set (by Landlock, and here).
                        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        for f in filters {
                            seccompiler::apply_filter(f).map_err(|_| {
                                std::io::Error::from_raw_os_error(Errno::PERM.raw_os_error())
                            })?;
                        }
                    }
                    Ok(())
                };
                if pidns {
                    split_for_pid_namespace(procs.as_ref().map(|fd| fd.as_fd()), &mut setup)?;
                } else {
                    setup()?;
                }
                Ok(())
            });
        }
        Ok(())
    }

    #[cfg(test)]
    #[allow(clippy::unwrap_used)]
    mod seccomp_tests {
        use super::{seccomp_filters, seccomp_rules, seccompiler_reference};
        use crate::exec::seccomp::tests::{run, run_all};

        fn arg_sets() -> Vec<[u64; 6]> {
            let mut v = vec![[0u64; 6]];
            for t in [
                libc::S_IFCHR,
                libc::S_IFBLK,
                libc::S_IFREG,
                libc::S_IFIFO,
                libc::S_IFSOCK,
                libc::S_IFDIR,
            ] {
                for extra in [0u64, 0o644, 0o7777, 0xffff_0000_0000_0000] {
                    let m = u64::from(t) | extra;
                    v.push([0, m, m, 0, 0, 0]);
                }
            }
            for f in super::NAMESPACE_FLAGS {
                let f = u64::from(f.cast_unsigned());
                v.push([f, 0, 0, 0, 0, 0]);
                v.push([f | 0x11 | (1 << 40), 0, 0, 0, 0, 0]);
            }
            let fork = u64::from((libc::CLONE_VM | libc::CLONE_VFORK).cast_unsigned()) | 17;
            v.push([fork, 0, 0, 0, 0, 0]);
            v.push([0xffff_ffff_0000_0000, 0, 0, 0, 0, 0]);
            #[allow(clippy::useless_conversion)] // `c_ulong` is `u64` on 64-bit Linux
            let sti = u64::from(libc::TIOCSTI);
            for a1 in [sti, sti | (1 << 32), sti + 1, 0x5401] {
                v.push([0, a1, 0, 0, 0, 0]);
            }
            v
        }

        #[test]
        fn the_binary_search_refuses_exactly_what_seccompiler_refuses() {
            let ours = seccomp_filters().unwrap();
            assert_eq!(ours.len(), 1);
            let reference = seccompiler_reference();
            let refs: Vec<&[seccompiler::sock_filter]> = reference.iter().map(|p| &p[..]).collect();
            let arch = crate::exec::seccomp::native_arch().unwrap();
            let args = arg_sets();
            let mut refused = std::collections::BTreeSet::new();
            for nr in 0..1024u32 {
                for a in &args {
                    let want = run_all(&refs, arch, nr, *a);
                    let got = run(&ours[0], arch, nr, *a);
                    assert_eq!(got, want, "system call {nr} with arguments {a:x?}");
                    if got != libc::SECCOMP_RET_ALLOW {
                        refused.insert(nr);
                    }
                }
            }
            // Every listed call is refused for some arguments.
            assert_eq!(refused.len(), seccomp_rules().len(), "{refused:?}");
            // Another architecture is killed, as seccompiler does; x32 numbers are refused.
            assert_eq!(
                run(&ours[0], 0x4000_0003, 21, [0; 6]),
                libc::SECCOMP_RET_KILL_PROCESS
            );
            assert_eq!(
                run_all(&refs, 0x4000_0003, 21, [0; 6]),
                libc::SECCOMP_RET_KILL_PROCESS
            );
            let mount_x32 = 0x4000_0000 | u32::try_from(libc::SYS_mount).unwrap();
            assert_eq!(
                run(&ours[0], arch, mount_x32, [0; 6]),
                libc::SECCOMP_RET_ERRNO | libc::EPERM as u32
            );
        }

        #[test]
        fn the_filter_is_short_and_every_call_meets_few_instructions() {
            let ours = seccomp_filters().unwrap();
            let linear: usize = seccompiler_reference().iter().map(Vec::len).sum();
            assert!(
                ours[0].len() * 2 < linear,
                "{} instructions against seccompiler's {linear}",
                ours[0].len()
            );
            assert!(!seccomp_rules().is_empty());
        }
    }
}
