//! The seccomp filter checked against seccompiler's reference layout and run through a BPF
//! interpreter.
#![allow(clippy::unwrap_used)]

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
    let ours = seccomp_filters(false).unwrap();
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
    let ours = seccomp_filters(false).unwrap();
    let linear: usize = seccompiler_reference().iter().map(Vec::len).sum();
    assert!(
        ours[0].len() * 2 < linear,
        "{} instructions against seccompiler's {linear}",
        ours[0].len()
    );
    assert!(!seccomp_rules().is_empty());
}
