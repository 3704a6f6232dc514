//! The seccomp refusals and the filter built from them.

use std::sync::OnceLock;

/// The seccomp filter: refused calls get `EPERM`; `clone3` gets `ENOSYS` (its flags
/// cannot be inspected; the C library falls back to `clone`). One program laid out as a
/// binary search ([`crate::exec::seccomp`]), so installing it is cheap. With `no_sockets`
/// (landlock-only mode, where no network namespace keeps the command off the network and off
/// the host's unix sockets: a session bus, an ssh agent) `socket` and `io_uring_setup` are
/// refused too (`socketpair` stays), and so are `setsid` and `setpgid` (no PID namespace: the
/// process group is what ends the command).
pub(super) fn seccomp_filters(
    no_sockets: bool,
) -> Result<&'static [seccompiler::BpfProgram], String> {
    type Kept = OnceLock<Result<Vec<seccompiler::BpfProgram>, String>>;
    static FILTERS: Kept = OnceLock::new();
    static NO_SOCKETS: Kept = OnceLock::new();
    let kept = if no_sockets { &NO_SOCKETS } else { &FILTERS };
    kept.get_or_init(|| {
        let arch = crate::exec::seccomp::native_arch()
            .ok_or_else(|| format!("seccomp: {} is not supported", std::env::consts::ARCH))?;
        let mut rules = seccomp_rules();
        if no_sockets {
            use crate::exec::seccomp::Rule;
            rules.push((libc::SYS_socket, Rule::Deny));
            rules.push((libc::SYS_io_uring_setup, Rule::Deny));
            // No PID namespace ends the command as a whole here: its process group does, so
            // nothing it starts may leave that group.
            rules.push((libc::SYS_setsid, Rule::Deny));
            rules.push((libc::SYS_setpgid, Rule::Deny));
        }
        Ok(vec![crate::exec::seccomp::build(arch, &rules)?])
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
                    .map(|b| rule(vec![Cond::new(arg, Len::Qword, Op::MaskedEq(b), b).unwrap()]))
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

#[cfg(test)]
#[path = "seccomp_rules_tests.rs"]
mod tests;
