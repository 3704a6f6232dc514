//! The Linux side of the confinement: Landlock, the probe, and installing every layer on a
//! `Command`.

use crate::exec::confine::{Confinement, Probe, ViewSpec};
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
mod fork;
mod mount;
mod seccomp_rules;
mod util;

pub(super) use cgroup::Cgroup;
use fork::{drop_capabilities, join_cgroup, split_for_pid_namespace};
use mount::{enter_view, prepare};
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
        None if want.netns && want.scopes && want.landlock => crate::exec::netns::shared_empty(),
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
