//! The processes between the spawner and the command: capabilities dropped, the PID
//! namespace's init and its move into the pids cgroup, exit statuses mirrored.

use super::util::decimal;
use rustix::fd::BorrowedFd;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// This process emptied its bounding set before it made any thread (the spawner does, see
/// [`empty_bounding_set`]): every thread, and every command forked from one, has an empty
/// one too, since the set is inherited and can never grow back.
static BOUNDING_SET_EMPTY: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Empty the calling thread's capability bounding set and check that it is empty. Called by
/// the spawner before it makes any thread, so the commands it forks need not drop each
/// capability themselves (one `prctl` per capability, ~70 µs a command). The process keeps
/// its effective capabilities (it still makes the commands' namespaces and mounts). When the
/// process may not, nothing changes for the commands: each still drops its own.
pub(super) fn empty_bounding_set(last_cap: u32) {
    // SAFETY: prctl with integer arguments only.
    #[allow(unsafe_code)]
    let emptied = unsafe {
        for cap in 0..=last_cap {
            // A refusal shows in the check below.
            libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0);
        }
        (0..=last_cap)
            .all(|cap| libc::prctl(libc::PR_CAPBSET_READ, libc::c_ulong::from(cap), 0, 0, 0) == 0)
    };
    BOUNDING_SET_EMPTY.store(emptied, std::sync::atomic::Ordering::Relaxed);
}

/// Drop every capability from every set and lock root out of getting them back on exec.
///
/// A process that is not root in its user namespace and may not change its securebits or
/// bounding set (an ordinary user without a user namespace: landlock-only mode) needs
/// neither: it has no capability to keep, and on exec a non-root uid gains none (file
/// capabilities are ignored under `no_new_privs`, which seccomp and Landlock set). Root must
/// succeed at both, or the command does not start.
pub(super) fn drop_capabilities(last_cap: u32) -> std::io::Result<()> {
    // SECBIT_NOROOT | _LOCKED, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE | _LOCKED.
    const SECBITS: libc::c_ulong = (1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 7);
    // SAFETY: prctl and getuid/geteuid with integer arguments only.
    #[allow(unsafe_code)]
    unsafe {
        let root = libc::geteuid() == 0 || libc::getuid() == 0;
        let locked = libc::prctl(libc::PR_SET_SECUREBITS, SECBITS, 0, 0, 0) == 0;
        if !locked && root {
            return Err(std::io::Error::last_os_error());
        }
        // Already empty when the spawner emptied its own before forking this.
        if locked && !BOUNDING_SET_EMPTY.load(std::sync::atomic::Ordering::Relaxed) {
            for cap in 0..=last_cap {
                if libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
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
/// under way (up to ~10 ms).
pub(super) fn join_cgroup(dir: BorrowedFd<'_>, pid: libc::pid_t) -> std::io::Result<()> {
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

/// A plain `fork` by system call: no `atfork` handlers (another thread of the spawner may
/// have held the allocator's lock when this process was forked from it).
fn raw_fork() -> std::io::Result<libc::pid_t> {
    // SAFETY: clone with only SIGCHLD behaves as fork; the child continues on a copy of
    // this stack and makes only system calls.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid as libc::pid_t)
}

/// The namespace's init once the command runs: hold nothing of the command's (its output
/// ends when the command's does), wait for it, and when it ends kill and reap everything else
/// in the namespace before writing its `waitpid` status to `report`; then exit. Nothing of
/// the command runs once its end is reported: what the namespace's teardown would do is done
/// first, so the teardown itself (the mounts) is off the call's path. A process forking at that
/// moment cannot escape: a fork fails while its parent has a fatal signal pending.
///
/// # Safety
/// Only system calls; call it in the init, after the command was started.
#[allow(unsafe_code)]
pub(super) unsafe fn init_wait(command: libc::pid_t, report: libc::c_int) -> ! {
    close_others(report);
    libc::close(0);
    libc::close(1);
    libc::close(2);
    loop {
        let mut status: libc::c_int = 0;
        let pid = libc::waitpid(-1, &mut status, 0);
        if pid == command {
            libc::kill(-1, libc::SIGKILL);
            loop {
                let mut other: libc::c_int = 0;
                if libc::waitpid(-1, &mut other, 0) < 0 && *libc::__errno_location() != libc::EINTR
                {
                    break;
                }
            }
            libc::write(
                report,
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

/// In the child with a fresh PID namespace: fork the namespace's init, which confines
/// itself with `setup` (view, capabilities, Landlock, seccomp: all inherited by what it
/// forks) and then forks the command. Returns only in the command's process; the other two
/// wait and mirror its end.
///
/// The pids cgroup (`cgroup`, the group's directory: a command forked from the host gets its
/// own) is joined by the init, moved there by its parent while it builds the view: a move
/// into a cgroup waits for an RCU grace period in the kernel (0.5 to 10 ms here), so doing it
/// beside the view's mounts takes part of it off the command's start. The init forks the
/// command only once the move is done, so the command and everything it starts are counted.
/// (`clone3` with `CLONE_INTO_CGROUP` is not used: on cgroup v1 it fails, and a failed
/// first fork in a new PID namespace leaves that namespace unable to hold any process.)
pub(super) fn split_for_pid_namespace(
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
    let init = raw_fork()?;
    if init > 0 {
        // The host's child: move init into the pids cgroup, let it go on, then wait for it
        // and end as the command ended. Without the move init is never let go: it reports
        // the failure as the command's start error.
        // SAFETY: plain system calls on our own descriptors and child; never returns.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(write_end);
            libc::close(go_read);
            let moved = match cgroup {
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
        // SAFETY: plain system calls; never returns.
        #[allow(unsafe_code)]
        unsafe {
            init_wait(command, write_end)
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
