//! The host's confinement facts, explained: for every layer a command lacks here, the exact
//! cause and what fixes it (the kernel, its boot parameters and sysctls, what confines this
//! process), and the whole picture for `toolgate doctor` ([`HostReport`]).
//!
//! Every choice of cause is a pure function of the texts read from `/proc` and `/sys`
//! ([`Readings`]), so the tests give it fake ones; only [`Readings::read`] and
//! [`HostReport::gather`] touch the host.

use super::{available, probe, Confinement, NsMode, PidsCgroup, Probe};
use serde::Serialize;
use serde_json::Value;

/// Why a layer is missing here, and what would put it in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// What the host does that keeps the layer away.
    pub cause: String,
    /// What to change (a command to run, a boot parameter, a runtime option).
    pub fix: String,
}

impl Cause {
    fn new(cause: impl Into<String>, fix: impl Into<String>) -> Cause {
        let (cause, fix) = (cause.into(), fix.into());
        Cause { cause, fix }
    }
}

/// The host's own files the causes are chosen from, as read (`None`: absent or unreadable).
#[derive(Clone, Debug, Default)]
pub(crate) struct Readings {
    /// Whether this is Linux at all.
    pub linux: bool,
    /// `std::env::consts::ARCH`.
    pub arch: &'static str,
    /// `/proc/sys/kernel/osrelease`.
    pub osrelease: Option<String>,
    /// `/sys/kernel/security/lsm`: the active security modules, comma-separated.
    pub lsm: Option<String>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu 23.10 and later).
    pub apparmor_restrict: Option<String>,
    /// `/proc/sys/user/max_user_namespaces`.
    pub max_user_namespaces: Option<String>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian's patch, older kernels).
    pub unprivileged_userns_clone: Option<String>,
    /// `/proc/self/status`: uid, capabilities, seccomp mode.
    pub status: Option<String>,
}

impl Readings {
    /// Read them from this host, for this process.
    pub(crate) fn read() -> Readings {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        Readings {
            linux: cfg!(target_os = "linux"),
            arch: std::env::consts::ARCH,
            osrelease: read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()),
            lsm: read("/sys/kernel/security/lsm"),
            apparmor_restrict: read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            max_user_namespaces: read("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: read("/proc/sys/kernel/unprivileged_userns_clone"),
            status: read("/proc/self/status"),
        }
    }

    /// The first field of a `/proc/self/status` line (`Seccomp:`, `CapEff:`, …).
    fn status_field(&self, name: &str) -> Option<&str> {
        self.status.as_deref()?.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(':')?
                .split_whitespace()
                .next()
        })
    }

    /// `(uid, euid)` from the `Uid:` line.
    fn uids(&self) -> Option<(u32, u32)> {
        let status = self.status.as_deref()?;
        let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
        let mut ids = line.split_whitespace().map(|id| id.parse().ok());
        Some((ids.next()??, ids.next()??))
    }

    /// Whether capability `bit` is in the effective set.
    fn cap_effective(&self, bit: u32) -> bool {
        self.status_field("CapEff")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .is_some_and(|caps| caps & (1u64 << bit) != 0)
    }

    /// The kernel's `(major, minor)`.
    fn kernel(&self) -> Option<(u32, u32)> {
        let mut parts = self.osrelease.as_deref()?.split(['.', '-']);
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }

    fn kernel_text(&self) -> String {
        let release = self.osrelease.as_deref();
        release.map_or("this kernel".into(), |r| format!("Linux {r}"))
    }
}

/// Whether a sysctl file reads exactly `value`.
fn is(text: &Option<String>, value: &str) -> bool {
    text.as_deref().is_some_and(|t| t.trim() == value)
}

const CAP_SETPCAP: u32 = 8;
const CAP_SYS_ADMIN: u32 = 21;

fn not_linux() -> Cause {
    Cause::new(
        "this host is not Linux: namespaces, Landlock and seccomp are Linux's",
        "run toolgate on Linux (a VM or container with a Linux ≥ 6.12 kernel)",
    )
}

/// `EPERM 1 (Operation not permitted)` (the probe's errnos are Linux's).
fn errno_text(errno: i32) -> String {
    let name = match errno {
        1 => "EPERM",
        13 => "EACCES",
        22 => "EINVAL",
        28 => "ENOSPC",
        87 => "EUSERS",
        _ => "errno",
    };
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    format!("{name} {errno} ({text})")
}

/// Why no user namespace could be made here, when none could (`None` when one could, or
/// when this process makes its namespaces itself).
pub fn userns_refusal() -> Option<Cause> {
    userns_refusal_in(&probe(), &Readings::read())
}

/// [`userns_refusal`] over given facts: the host's known switches first, in the order they
/// are checked by the kernel and the usual hosts, else the errno and the step that failed.
pub(crate) fn userns_refusal_in(p: &Probe, r: &Readings) -> Option<Cause> {
    if !r.linux {
        return Some(not_linux());
    }
    if p.mode != NsMode::LandlockOnly && p.userns_errno.is_none() {
        return None;
    }
    if is(&r.apparmor_restrict, "1") {
        return Some(Cause::new(
            "unprivileged user namespaces are restricted by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1)",
            "`sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile for toolgate granting `userns,`",
        ));
    }
    if is(&r.max_user_namespaces, "0") {
        return Some(Cause::new(
            "user namespaces are disabled (user.max_user_namespaces=0)",
            "`sudo sysctl user.max_user_namespaces=15000` (and the same in /etc/sysctl.d/ to keep it)",
        ));
    }
    if is(&r.unprivileged_userns_clone, "0") {
        return Some(Cause::new(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0, Debian and older kernels)",
            "`sudo sysctl kernel.unprivileged_userns_clone=1` (and the same in /etc/sysctl.d/ to keep it)",
        ));
    }
    if r.status_field("Seccomp") == Some("2") {
        return Some(Cause::new(
            "this process runs under a seccomp filter that refuses unshare/clone(CLONE_NEWUSER) — Docker's default profile does",
            "run the container with `--security-opt seccomp=unconfined` (or a profile that allows unshare and clone with CLONE_NEWUSER), or give it CAP_SYS_ADMIN, or use a runtime that allows user namespaces",
        ));
    }
    let errno = p.userns_errno.map_or("an unknown error".into(), errno_text);
    Some(match p.userns_step {
        Some("user namespace") | None if p.userns_errno == Some(28) => Cause::new(
            format!("making a user namespace failed with {errno}: the limit of user namespaces is reached"),
            "raise it: `sudo sysctl user.max_user_namespaces=15000`",
        ),
        Some("user namespace") | None => Cause::new(
            format!("making a user namespace (unshare(CLONE_NEWUSER), then writing its uid and gid maps) failed with {errno}, and none of the usual switches (AppArmor's restriction, user.max_user_namespaces, kernel.unprivileged_userns_clone, a seccomp filter) is set"),
            "find what confines this process (an LSM policy, the container runtime) and let it make user namespaces",
        ),
        Some(step) => Cause::new(
            format!("a user namespace can be made, but making the {step} failed with {errno}"),
            "find what confines this process (an LSM policy, the container runtime) and let it make network, mount and PID namespaces in a user namespace",
        ),
    })
}

/// Why the namespace layers are missing (the same for all of them).
fn namespace_cause(p: &Probe, r: &Readings) -> Cause {
    let direct = p.direct_errno.map_or("refused".into(), errno_text);
    match userns_refusal_in(p, r) {
        Some(c) if p.mode == NsMode::LandlockOnly || !r.linux => c,
        Some(c) => Cause::new(
            format!(
                "this process may make only some namespaces itself (making all failed with {direct}), and no user namespace: {}",
                c.cause
            ),
            c.fix,
        ),
        None => Cause::new(
            format!("this process cannot make this namespace ({direct})"),
            "run toolgate as root with CAP_SYS_ADMIN, or as a user allowed to make user namespaces",
        ),
    }
}

fn landlock_cause(r: &Readings) -> Cause {
    if !r.linux {
        return not_linux();
    }
    let kernel = r.kernel_text();
    let newer = "a Linux ≥ 6.2 kernel (≥ 6.12 for the scopes too)";
    if let Some(lsm) = r.lsm.as_deref().map(str::trim) {
        if !lsm.split(',').any(|m| m == "landlock") {
            return Cause::new(
                format!("Landlock is not among the kernel's active security modules (/sys/kernel/security/lsm: `{lsm}`)"),
                format!("boot with `landlock` in the `lsm=` parameter (e.g. `lsm={lsm},landlock`) on a kernel built with CONFIG_SECURITY_LANDLOCK=y"),
            );
        }
        return Cause::new(
            format!("{kernel}'s Landlock is older than ABI 3 (Linux 6.2), which toolgate needs to handle file truncation"),
            newer,
        );
    }
    match r.kernel() {
        Some(v) if v < (5, 13) => Cause::new(
            format!("{kernel} predates Landlock (Linux 5.13; toolgate needs ABI 3, Linux 6.2)"),
            newer,
        ),
        Some(v) if v < (6, 2) => Cause::new(
            format!("{kernel}'s Landlock, if enabled, is older than ABI 3 (Linux 6.2), which toolgate needs to handle file truncation"),
            newer,
        ),
        _ => Cause::new(
            format!("{kernel} enforces no Landlock: it was built without CONFIG_SECURITY_LANDLOCK or booted without `landlock` in `lsm=` (/sys/kernel/security/lsm could not be read to tell which)"),
            "add `landlock` to the `lsm=` boot parameter (see /sys/kernel/security/lsm once securityfs is mounted), or use a kernel built with CONFIG_SECURITY_LANDLOCK=y",
        ),
    }
}

fn scopes_cause(p: &Probe, r: &Readings) -> Cause {
    if !r.linux || p.landlock_abi < 3 {
        let c = landlock_cause(r);
        return Cause::new(format!("no Landlock at all: {}", c.cause), c.fix);
    }
    Cause::new(
        format!(
            "{}'s Landlock is older than ABI 6 (Linux 6.12), which brings the scopes",
            r.kernel_text()
        ),
        "a Linux ≥ 6.12 kernel",
    )
}

/// The filter is built for the architectures `exec::seccomp` knows; nothing else fails.
fn seccomp_cause(r: &Readings) -> Cause {
    if !r.linux {
        return not_linux();
    }
    Cause::new(
        format!("the seccomp filter is written for x86_64, aarch64 and riscv64 only, and could not be built for {}", r.arch),
        "run toolgate on x86_64, aarch64 or riscv64",
    )
}

/// The cause of one missing layer, by the name [`Confinement::missing`] gives it.
fn cause_of(layer: &str, p: &Probe, r: &Readings) -> Cause {
    match layer {
        "landlock" => landlock_cause(r),
        "landlock scopes (signals, abstract sockets)" => scopes_cause(p, r),
        "seccomp filter" => seccomp_cause(r),
        "user namespace" => userns_refusal_in(p, r).unwrap_or_else(|| namespace_cause(p, r)),
        // One cause for every namespace.
        "network namespace" | "mount namespace" | "minimal filesystem view" | "PID namespace" => {
            namespace_cause(p, r)
        }
        "no_new_privs" => Cause::new(
            "it comes with Landlock or seccomp, and neither is available",
            "see landlock and seccomp filter",
        ),
        "process limit" => process_limit_cause(p.mode, r.uids().map(|(_, euid)| euid)),
        _ if !r.linux => not_linux(),
        "dropping capabilities" => Cause::new(
            "this process is root without CAP_SETPCAP and no namespace of the command's own can be made: it cannot lock root out of regaining capabilities on exec (SECBIT_NOROOT) nor empty the bounding set",
            "give toolgate CAP_SETPCAP, or run it as an ordinary user, or let it make user namespaces (see the user namespace layer)",
        ),
        other => Cause::new(
            format!("{other} is not available on this host"),
            "run `toolgate doctor` to see every layer",
        ),
    }
}

/// Every layer `c` lacks, with its exact cause and fix on this host.
pub fn layer_causes(c: &Confinement) -> Vec<(&'static str, Cause)> {
    causes_of(&c.missing())
}

/// [`layer_causes`] for layers named as [`Confinement::missing`] names them.
pub fn causes_of<'a>(missing: &[&'a str]) -> Vec<(&'a str, Cause)> {
    causes_in(missing, &probe(), &Readings::read())
}

pub(crate) fn causes_in<'a>(missing: &[&'a str], p: &Probe, r: &Readings) -> Vec<(&'a str, Cause)> {
    missing.iter().map(|&l| (l, cause_of(l, p, r))).collect()
}

/// One line for a refusal's hint: each distinct cause once with the layers it takes away,
/// its fix, and where to see the whole picture.
pub fn hint(missing: &[&str]) -> String {
    hint_text(&causes_of(missing))
}

pub(crate) fn hint_text(causes: &[(&str, Cause)]) -> String {
    let mut groups: Vec<(Vec<&str>, &Cause)> = Vec::new();
    for (layer, cause) in causes {
        match groups.iter_mut().find(|(_, c)| *c == cause) {
            Some((layers, _)) => layers.push(layer),
            None => groups.push((vec![layer], cause)),
        }
    }
    let last = "`toolgate doctor` shows every layer on this host; or drop `require_confinement` from the policy";
    let text = groups
        .iter()
        .map(|(layers, c)| format!("{}: {}; fix: {}", layers.join(", "), c.cause, c.fix));
    text.chain([last.to_string()])
        .collect::<Vec<_>>()
        .join(". ")
}

/// What bounds the number of a command's processes (as the observation's `pids_bound`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessBound {
    /// A pids cgroup (its own, or the spawner's shared one).
    Cgroup,
    /// `RLIMIT_NPROC` counted in the command's own user namespace.
    RlimitNproc,
    /// `RLIMIT_NPROC` over every task of this user: its tasks now plus the command's share
    /// (landlock-only, not root).
    RlimitNprocUser,
    /// Nothing.
    None,
}

/// Why commands have no process limit here (`euid`: this process's).
pub(crate) fn process_limit_cause(mode: NsMode, euid: Option<u32>) -> Cause {
    let rlimit = match (mode, euid) {
        (_, Some(0)) => "RLIMIT_NPROC does not bound root",
        _ => "RLIMIT_NPROC is set only in user-namespace and landlock-only modes",
    };
    Cause::new(
        format!("no writable pids cgroup: neither the cgroup root (/sys/fs/cgroup with the pids controller, or cgroup v1's /sys/fs/cgroup/pids; root only) nor a cgroup v2 directory above this process delegated to its user with the pids controller in its cgroup.subtree_control; and {rlimit}"),
        "run toolgate in a delegated cgroup v2 scope (`systemd-run --user --scope -p Delegate=yes toolgate …`), or as root where the cgroup root offers the pids controller (`echo +pids > /sys/fs/cgroup/cgroup.subtree_control`)",
    )
}

/// One layer of the report.
#[derive(Clone, Debug, Serialize)]
pub struct LayerReport {
    /// Its name (as [`Confinement::missing`] names it, where it does).
    pub name: &'static str,
    /// `yes`, `no`, or `not-needed` (the policy or the mode does not want it).
    pub state: &'static str,
    /// What it does, or how it is done here.
    pub detail: String,
    /// Why it is missing, and the fix (only when `state` is `no`).
    #[serde(flatten)]
    pub cause: Option<Cause>,
}

/// The confinement this host gives this user's shell commands, layer by layer, and what the
/// tools will do with it under a policy.
#[derive(Clone, Debug, Serialize)]
pub struct HostReport {
    /// The real uid.
    pub uid: Option<u32>,
    /// The effective uid.
    pub euid: Option<u32>,
    /// CAP_SYS_ADMIN is effective (the namespaces can be made directly).
    pub cap_sys_admin: bool,
    /// CAP_SETPCAP is effective (the spawner empties its bounding set once for all commands).
    pub cap_setpcap: bool,
    /// The kernel release.
    pub kernel: Option<String>,
    /// How namespaces are made here.
    pub mode: NsMode,
    /// Every layer, in the order they are applied.
    pub layers: Vec<LayerReport>,
    /// What bounds a command's processes.
    pub process_limit: ProcessBound,
    /// The policy sets `[shell] require_confinement`.
    #[serde(rename = "require_confinement")]
    pub policy_requires: bool,
    /// What [`Confinement::missing`] says is missing.
    pub missing: Vec<&'static str>,
    /// The policy would refuse every shell command (and language server) here.
    pub refuses_shell: bool,
    /// What `shell` does here.
    pub shell: String,
    /// What the `lsp_*` tools do here.
    pub lsp: String,
    /// What plugins do here.
    pub plugins: String,
}

impl HostReport {
    /// Probe this host (once per process) for this user under a policy that does or does
    /// not require confinement and grant the whole network.
    pub fn gather(policy_requires: bool, network_granted: bool) -> HostReport {
        let (c, r) = (available(network_granted), Readings::read());
        // As `prepare` chooses: a pids cgroup where one can be made, else RLIMIT_NPROC in
        // the command's own user namespace, else (not root) over all of the user's tasks.
        let cgroup = PidsCgroup::create(super::DEFAULT_MAX_PROCESSES).is_some();
        let root = r.uids().is_some_and(|(uid, _)| uid == 0);
        let bound = match (cgroup, c.mode) {
            (true, _) => ProcessBound::Cgroup,
            (false, NsMode::UserNamespace) => ProcessBound::RlimitNproc,
            (false, NsMode::LandlockOnly) if !root => ProcessBound::RlimitNprocUser,
            _ => ProcessBound::None,
        };
        Self::from_facts(&c, &probe(), &r, bound, policy_requires)
    }

    /// The report over given facts (pure).
    pub(crate) fn from_facts(
        c: &Confinement,
        p: &Probe,
        r: &Readings,
        bound: ProcessBound,
        policy_requires: bool,
    ) -> HostReport {
        let (uid, euid) = r.uids().map_or((None, None), |(u, e)| (Some(u), Some(e)));
        let (missing, mode) = (c.missing(), c.mode);
        let modes = format!("mode {}", mode.name());
        let refuses_shell = policy_requires && !missing.is_empty();
        let shell = if refuses_shell {
            format!(
                "refused: the policy sets `[shell] require_confinement` and this host lacks {}",
                missing.join(", ")
            )
        } else if missing.is_empty() {
            format!("runs confined in {modes}, every layer in place")
        } else {
            format!("runs confined in {modes} without {} (the policy does not require confinement; each observation's data.confinement says what was applied)", missing.join(", "))
        };
        let lsp = if refuses_shell {
            "refused like the shell: language servers run project code under the shell's confinement".into()
        } else {
            format!("language servers run under the same confinement ({modes}), read-only: they cannot change the workspace")
        };
        HostReport {
            uid,
            euid,
            cap_sys_admin: r.cap_effective(CAP_SYS_ADMIN),
            cap_setpcap: r.cap_effective(CAP_SETPCAP),
            kernel: r.osrelease.clone(),
            mode,
            layers: layers(c, p, r, bound, euid),
            process_limit: bound,
            policy_requires,
            missing,
            refuses_shell,
            shell,
            lsp,
            plugins: "WebAssembly components in wasmtime, unaffected by host privileges: they never need namespaces".into(),
        }
    }

    /// For people: who, the mode, each layer with its cause and fix, what the tools do.
    pub fn render(&self) -> String {
        let id = |v: Option<u32>| v.map_or("?".into(), |v| v.to_string());
        let cap = |on: bool| if on { "effective" } else { "not effective" };
        let mut out = format!(
            "who      uid {}, euid {}; CAP_SYS_ADMIN {}, CAP_SETPCAP {}\nkernel   {}\nmode     {}: {}\n\nlayers\n",
            id(self.uid),
            id(self.euid),
            cap(self.cap_sys_admin),
            cap(self.cap_setpcap),
            self.kernel.as_deref().unwrap_or("unknown"),
            self.mode.name(),
            mode_text(self.mode),
        );
        let pad = "";
        let mut told: Vec<(&str, &Cause)> = Vec::new();
        for l in &self.layers {
            out.push_str(&format!("  {:<10} {:<44} {}\n", l.state, l.name, l.detail));
            match (
                &l.cause,
                told.iter().find(|(_, c)| Some(*c) == l.cause.as_ref()),
            ) {
                (Some(_), Some((first, _))) => {
                    out.push_str(&format!("  {pad:<10} cause: as for {first}\n"))
                }
                (Some(c), None) => {
                    out.push_str(&format!(
                        "  {pad:<10} cause: {}\n  {pad:<10} fix:   {}\n",
                        c.cause, c.fix
                    ));
                    told.push((l.name, c));
                }
                (None, _) => {}
            }
        }
        out.push_str(&format!(
            "\npolicy   [shell] require_confinement = {}\nshell    {}\nlsp_*    {}\nplugins  {}\n",
            self.policy_requires, self.shell, self.lsp, self.plugins
        ));
        out
    }

    /// The same as JSON (`mode` and `process_limit` by name).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Every layer, in the order they are applied, each with its cause and fix when missing.
fn layers(
    c: &Confinement,
    p: &Probe,
    r: &Readings,
    bound: ProcessBound,
    euid: Option<u32>,
) -> Vec<LayerReport> {
    let landlock_only = c.mode == NsMode::LandlockOnly;
    let layer = |name: &'static str, on: bool, detail: &str| LayerReport {
        name,
        state: if on { "yes" } else { "no" },
        detail: detail.into(),
        cause: (!on).then(|| cause_of(name, p, r)),
    };
    let not_needed = |name: &'static str, detail: &str| LayerReport {
        name,
        state: "not-needed",
        detail: detail.into(),
        cause: None,
    };
    let abi = p.landlock_abi;
    let landlock = match (abi, landlock_only) {
        (0, _) => "no Landlock ABI 3 or later".into(),
        (_, false) => format!("ABI {abi}+: writes only beneath the command's writable places"),
        (_, true) => format!("ABI {abi}+: reads and writes only where the command needs them (secrets kept unread by Landlock, not masked)"),
    };
    let user = match c.mode {
        NsMode::Privileged if p.userns_errno.is_some() => layer("user namespace", false, "none can be made; this process makes those namespaces it may itself"),
        NsMode::Privileged => not_needed("user namespace", "this process makes the namespaces itself (CAP_SYS_ADMIN)"),
        NsMode::UserNamespace => layer("user namespace", true, &format!("each command's namespaces are made in a user namespace of its own mapping uid {} to itself (never to root outside)", euid.map_or("?".into(), |u| u.to_string()))),
        NsMode::LandlockOnly => layer("user namespace", false, "none can be made"),
    };
    let network = match (c.network_granted, c.netns, landlock_only) {
        (true, _, _) => not_needed("network namespace", "the policy gives commands the whole network (`[shell] network = true`)"),
        (_, true, _) => layer("network namespace", true, "no network (only a downed lo); hosts named by `[shell] network = [...]` are reached only through the egress proxy"),
        (_, _, true) => layer("network namespace", false, "no network at all: seccomp refuses `socket` (no namespace for the egress proxy)"),
        _ => layer("network namespace", false, "without one commands share the host's network"),
    };
    let caps = if landlock_only && !r.cap_effective(CAP_SETPCAP) {
        "each command drops what it has: a non-root uid holds none and gains none on exec under no_new_privs"
    } else {
        "every capability dropped from all five sets, SECBIT_NOROOT locked"
    };
    let limit = match bound {
        ProcessBound::Cgroup => "cgroup: a pids cgroup holds each command (`[shell] max_processes`, default 2048)",
        ProcessBound::RlimitNproc => "rlimit-nproc: RLIMIT_NPROC in the command's own user namespace (`[shell] max_processes`, default 2048)",
        ProcessBound::RlimitNprocUser => "rlimit-nproc-user: RLIMIT_NPROC over every task of this user: those it runs now plus `[shell] max_processes`",
        ProcessBound::None => "none: nothing bounds a command's processes but the host's own limits",
    };
    vec![
        layer("landlock", c.landlock, &landlock),
        layer("landlock scopes (signals, abstract sockets)", c.scopes, "signals and abstract unix sockets stay inside the command (ABI 6)"),
        user,
        layer("mount namespace", c.mountns, "a private mount namespace"),
        layer("minimal filesystem view", c.view, "a new root: system directories read-only, the workspace, a private /tmp and $HOME; every deny-listed path masked, .git frozen"),
        layer("PID namespace", c.pidns, "the command runs under a tiny init: nothing outlives it, no host process is visible"),
        network,
        layer("dropping capabilities", c.caps_dropped, caps),
        layer("seccomp filter", c.seccomp, "device nodes, mounts, modules, kexec, reboot, keyrings, bpf, perf, new namespaces and TIOCSTI refused"),
        layer("no_new_privs", c.landlock || c.seccomp, "set before Landlock and seccomp: no setuid program gains privileges"),
        layer("environment scrubbing", c.env_scrubbed, "an allowlist plus the policy's `[shell] env`, never loader-injection variables"),
        layer("process limit", bound != ProcessBound::None, limit),
    ]
}

/// What a mode means, in one line.
fn mode_text(mode: NsMode) -> &'static str {
    match mode {
        NsMode::Privileged => "this process makes each command's namespaces itself",
        NsMode::UserNamespace => "each command's namespaces are made inside a new user namespace of its own",
        NsMode::LandlockOnly => "no namespace can be made: Landlock (reads and writes), seccomp, no_new_privs and rlimits only, and no network",
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
