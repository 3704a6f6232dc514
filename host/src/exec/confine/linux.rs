//! The Linux side of the confinement: Landlock, the probe, and installing every layer on a
//! `Command`.

use crate::exec::confine::{Confinement, NsMode, Probe, ViewSpec};
use landlock::{
    path_beneath_rules, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use rustix::mount::{mount_change, MountPropagationFlags};
use rustix::thread::UnshareFlags;
use std::path::{Path, PathBuf};
use std::process::Command;

mod cgroup;
pub(super) mod direct;
mod emptynet;
mod fork;
mod mount;
mod readrules;
mod seccomp_rules;
pub(crate) mod userns;
mod util;

pub(super) use cgroup::Cgroup;
use fork::{drop_capabilities, join_cgroup, split_for_pid_namespace};
use mount::{enter_view, prepare};
pub(crate) use readrules::{landlock_only_ruleset, read_rules, ReadInputs, ReadRules};
use seccomp_rules::seccomp_filters;

/// The file-system access rights handled (ABI 3: writes, truncation, refer).
const ABI_FS: ABI = ABI::V3;

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

pub(super) fn probe() -> Probe {
    let tmp = std::env::temp_dir();
    let landlock_abi = if ruleset(std::slice::from_ref(&tmp), true).is_ok() {
        6
    } else if ruleset(std::slice::from_ref(&tmp), false).is_ok() {
        3
    } else {
        0
    };
    let maps = userns::Maps::of_caller();
    // Start `/bin/true` after `unshare(flags)` (and, with a user namespace, mapping the
    // caller into it) in a child: the errno if that failed.
    let try_flags = |flags: UnshareFlags| -> Result<(), i32> {
        let mut cmd = Command::new("/bin/true");
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let maps = maps.clone();
        // SAFETY: the closure only makes system calls (`unshare(2)`, opening and writing the
        // `/proc/self` map files from buffers made in the parent) and allocates nothing.
        #[allow(unsafe_code)]
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                rustix::thread::unshare_unsafe(flags).map_err(std::io::Error::from)?;
                if flags.contains(UnshareFlags::NEWUSER) {
                    maps.write_self()?;
                }
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(mut child) => match child.wait() {
                Ok(s) if s.success() => Ok(()),
                _ => Err(libc::EPERM),
            },
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::EPERM)),
        }
    };
    let pid_flags = UnshareFlags::NEWPID | UnshareFlags::NEWIPC | UnshareFlags::NEWUTS;
    let every = UnshareFlags::NEWNET | UnshareFlags::NEWNS | pid_flags;
    // One child for the usual cases (everything works directly, or in a user namespace),
    // one per namespace otherwise.
    let direct = try_flags(every);
    let seccomp = seccomp_filters(false).is_ok();
    // Every namespace, made as `mode` says.
    let every_layer = |mode, direct_errno| Probe {
        landlock_abi,
        netns: true,
        mountns: true,
        pidns: true,
        seccomp,
        mode,
        direct_errno,
        caps_droppable: true,
        ..Probe::default()
    };
    let Err(direct_errno) = direct else {
        return every_layer(NsMode::Privileged, None);
    };
    let direct_errno = Some(direct_errno);
    // Not privileged: the same namespaces inside a user namespace of the command's own.
    let (userns_errno, userns_step) = match try_flags(every | UnshareFlags::NEWUSER) {
        Ok(()) => return every_layer(NsMode::UserNamespace, direct_errno),
        // Whether a user namespace alone is refused, or only the others inside it.
        Err(e) => match try_flags(UnshareFlags::NEWUSER) {
            Ok(()) => (Some(e), Some("namespaces inside the user namespace")),
            Err(alone) => (Some(alone), Some("user namespace")),
        },
    };
    // Partly privileged (a container that allows some namespaces): each on its own.
    let netns = try_flags(UnshareFlags::NEWNET).is_ok();
    let mountns = try_flags(UnshareFlags::NEWNS).is_ok();
    let pidns = try_flags(pid_flags).is_ok();
    Probe {
        landlock_abi,
        netns,
        mountns,
        pidns,
        seccomp,
        mode: if netns || mountns || pidns {
            NsMode::Privileged
        } else {
            NsMode::LandlockOnly
        },
        direct_errno,
        userns_errno,
        userns_step,
        caps_droppable: !rustix::process::geteuid().is_root()
            || rustix::thread::capabilities(None)
                .is_ok_and(|c| c.effective.contains(rustix::thread::CapabilitySet::SETPCAP)),
    }
}

/// Empty this process's capability bounding set for every command it will fork (the
/// spawner, before it makes any thread); see `fork::empty_bounding_set`.
pub(super) fn empty_bounding_set() {
    fork::empty_bounding_set(cap_last_cap())
}

/// The highest capability number this kernel knows, read once per process.
fn cap_last_cap() -> u32 {
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40)
    })
}

/// Every layer of a command's confinement, prepared in the parent (everything that allocates
/// or opens paths), ready to be put on in a child that only makes system calls.
pub(super) struct Armed {
    rules: Option<landlock::RulesetCreated>,
    prepared: Option<mount::Prepared>,
    filters: &'static [seccompiler::BpfProgram],
    last_cap: u32,
    /// Namespaces the first child gets new (`unshare`, or `clone` flags).
    flags: UnshareFlags,
    /// The network namespace to join instead of a new one.
    own_net: Option<OwnedFd>,
    /// The user namespace that owns `own_net`, joined first (user-namespace mode).
    own_user: Option<OwnedFd>,
    shared_net: Option<rustix::fd::BorrowedFd<'static>>,
    /// A new user namespace is made with the others: the caller maps itself into it.
    maps: Option<userns::Maps>,
    procs: Option<OwnedFd>,
    want: Confinement,
}

impl Armed {
    pub(super) fn new(
        want: Confinement,
        view: Option<&ViewSpec>,
        writable: &[PathBuf],
        procs: Option<OwnedFd>,
        net: Option<super::CommandNs>,
        read: Option<&ReadRules>,
    ) -> Result<Armed, String> {
        let (own_net, own_user) = match net {
            Some(n) => (Some(n.net), n.user),
            None => (None, None),
        };
        let in_userns = want.mode == NsMode::UserNamespace;
        if in_userns && own_net.is_some() && own_user.is_none() {
            return Err(
                "the command's network namespace has no user namespace to join (this host is not privileged)"
                    .into(),
            );
        }
        let writable: Vec<PathBuf> = match view {
            Some(v) => v.writable.clone(),
            None => writable.to_vec(),
        };
        let rules = match read {
            // Landlock-only: reads too are allowed only where the rules say (secrets never).
            Some(read) if want.landlock => Some(landlock_only_ruleset(read, false)?.0),
            None if want.landlock && want.mode == NsMode::LandlockOnly => {
                return Err("landlock-only mode needs the command's read rules".into())
            }
            _ if want.landlock => Some(
                ruleset(&writable, want.scopes).map_err(|e| format!("preparing Landlock: {e}"))?,
            ),
            _ => None,
        };
        let prepared = match view.filter(|_| want.view && want.mountns) {
            Some(v) => Some(prepare(v, in_userns)?),
            None => None,
        };
        let filters: &'static [seccompiler::BpfProgram] = if want.seccomp {
            seccomp_filters(want.mode == NsMode::LandlockOnly)?
        } else {
            &[]
        };
        let mut flags = UnshareFlags::empty();
        // The command's own namespace (behind the egress proxy), else the shared empty one
        // (made by a privileged host only: in a user namespace of its own, the command makes
        // a fresh one, which it alone can enter).
        let shared_net = match &own_net {
            None if want.netns && want.scopes && want.landlock && !in_userns => {
                emptynet::shared_empty()
            }
            _ => None,
        };
        // A user namespace of the command's own, unless it joins the one that owns its
        // network namespace.
        let maps = (in_userns && own_user.is_none()).then(userns::Maps::of_caller);
        if maps.is_some() {
            flags |= UnshareFlags::NEWUSER;
        }
        if want.netns && shared_net.is_none() && own_net.is_none() {
            flags |= UnshareFlags::NEWNET;
        }
        if want.mountns {
            flags |= UnshareFlags::NEWNS;
        }
        if want.pidns {
            flags |= UnshareFlags::NEWPID | UnshareFlags::NEWIPC | UnshareFlags::NEWUTS;
        }
        Ok(Armed {
            rules,
            prepared,
            filters,
            last_cap: cap_last_cap(),
            flags,
            own_net,
            own_user,
            shared_net,
            maps,
            procs,
            want,
        })
    }

    /// Whether the command can be cloned straight into its namespaces: not when it first
    /// joins a user namespace (`setns` into one must come before the others are made).
    pub(super) fn clones_directly(&self) -> bool {
        self.own_user.is_none()
    }

    /// Join the user namespace that owns the command's network namespace, then that network
    /// namespace (or the shared empty one) instead of a new one (in the first child, before
    /// any namespace is made).
    fn join_net(&self) -> std::io::Result<()> {
        if let Some(user) = &self.own_user {
            rustix::thread::move_into_link_name_space(
                user.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::User),
            )?;
        }
        if let Some(net) = self.own_net.as_ref().map(AsFd::as_fd).or(self.shared_net) {
            rustix::thread::move_into_link_name_space(
                net,
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
        }
        Ok(())
    }

    /// In the child that made the namespaces: map the caller into its new user namespace,
    /// when it made one (before anything that needs the uid mapped).
    fn map_user(&self) -> std::io::Result<()> {
        match &self.maps {
            Some(m) => m.write_self(),
            None => Ok(()),
        }
    }

    /// In the child, inside its new namespaces: the view, capabilities, Landlock, seccomp
    /// (all inherited by what it forks). Only system calls on what was prepared.
    fn setup(&mut self) -> std::io::Result<()> {
        if let Some(max) = self.want.nproc_limit {
            userns::limit_tasks(max)?;
        }
        if let Some(p) = &self.prepared {
            enter_view(p)?;
        } else if self.want.mountns {
            mount_change(
                c"/",
                MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
            )?;
        }
        if self.want.caps_dropped {
            drop_capabilities(self.last_cap)?;
        }
        if let Some(r) = self.rules.take() {
            r.restrict_self()
                .map_err(|_| std::io::Error::from_raw_os_error(Errno::PERM.raw_os_error()))?;
        }
        if !self.filters.is_empty() {
            // SAFETY: prctl with integer arguments (no_new_privs is set by Landlock too).
            #[allow(unsafe_code)]
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for f in self.filters {
                seccompiler::apply_filter(f)
                    .map_err(|_| std::io::Error::from_raw_os_error(Errno::PERM.raw_os_error()))?;
            }
        }
        Ok(())
    }
}

pub(super) fn install(
    cmd: &mut Command,
    want: Confinement,
    view: Option<&ViewSpec>,
    writable: &[PathBuf],
    procs: Option<OwnedFd>,
    net: Option<super::CommandNs>,
    read: Option<&ReadRules>,
) -> Result<(), String> {
    // Everything that allocates or opens paths is done here, in the parent; the child only
    // makes system calls on what was prepared.
    let mut armed = Armed::new(want, view, writable, procs, net, read)?;
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
            if let Some(dir) = armed.procs.as_ref().filter(|_| !armed.want.pidns) {
                join_cgroup(
                    dir.as_fd(),
                    rustix::process::getpid().as_raw_nonzero().get(),
                )?;
            }
            armed.join_net()?;
            if !armed.flags.is_empty() {
                rustix::thread::unshare_unsafe(armed.flags)?;
            }
            armed.map_user()?;
            if armed.want.pidns {
                let procs = armed.procs.take();
                split_for_pid_namespace(procs.as_ref().map(|fd| fd.as_fd()), &mut || {
                    armed.setup()
                })?;
            } else {
                armed.setup()?;
            }
            Ok(())
        });
    }
    Ok(())
}
