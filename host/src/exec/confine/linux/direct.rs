//! Starting a command straight into its namespaces, without the process in between: the
//! caller clones the PID namespace's init with every new namespace at once, the init confines
//! itself and forks the command, and the command execs. The spawner starts commands this way.
//!
//! Through `std::process::Command` a confined command needs three forks: the child `Command`
//! makes (which can only `unshare`, so it stays outside the new PID namespace), the
//! namespace's init, and the command. Here the init is cloned into the namespaces and starts
//! the command with `posix_spawn` (its memory is not copied). When the command ends, the init
//! kills and reaps everything else in the namespace and only then reports the status: the
//! caller hears it with nothing of the command still running, and the namespace's teardown
//! (its mounts) happens after, off the call's path. The confinement is the same [`Armed`]
//! value put on in the same order.

use super::fork::{init_wait, join_cgroup};
use super::Armed;
use crate::exec::confine::{Confinement, ViewSpec};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What to start, exactly as the host prepared it.
pub struct Launch<'a> {
    /// The program (absolute).
    pub program: &'a Path,
    /// `argv[0]`.
    pub arg0: &'a str,
    /// The remaining arguments.
    pub args: &'a [String],
    /// The whole environment.
    pub env: &'a [(String, String)],
    /// The working directory (inside the view when there is one).
    pub cwd: &'a Path,
    /// The layers to put on (with a PID namespace).
    pub confinement: Confinement,
    /// The view to build.
    pub view: Option<&'a ViewSpec>,
    /// Without a view: where Landlock lets the command write.
    pub writable: &'a [PathBuf],
}

/// A command started by [`spawn`]: its namespace's init is a child of the calling process.
pub struct Direct {
    /// The init's pid (the leader of the command's process group).
    pub pid: i32,
    /// Where the init writes the command's `waitpid` status.
    status: OwnedFd,
    reaped: bool,
}

/// A `waitpid` status as (exit code, signal).
fn decode(status: libc::c_int) -> (Option<i32>, Option<i32>) {
    if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    }
}

/// Read exactly one `c_int` from `fd`; `None` at end of file.
fn read_int(fd: &OwnedFd) -> Option<libc::c_int> {
    let mut buf = [0u8; std::mem::size_of::<libc::c_int>()];
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::read(fd, &mut buf[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return None,
        }
    }
    Some(libc::c_int::from_ne_bytes(buf))
}

fn wait_pid(pid: i32) -> libc::c_int {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid on our own child, into a local.
        #[allow(unsafe_code)]
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return status;
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // Not our child any more (reaped elsewhere): an unknown end.
            return 0x7f00;
        }
    }
}

impl Direct {
    /// Wait for the command to end: its (exit code, signal), as soon as the init reports it.
    /// The init itself (and with it the namespace) is reaped by [`Direct::reap`].
    pub fn wait(&mut self) -> (Option<i32>, Option<i32>) {
        match read_int(&self.status) {
            Some(status) => decode(status),
            // The init ended without a report: killed (a timeout, `job_kill`), or it failed.
            None => {
                self.reaped = true;
                decode(wait_pid(self.pid))
            }
        }
    }

    /// Reap the init (after [`Direct::wait`]).
    pub fn reap(mut self) {
        if !self.reaped {
            self.reaped = true;
            wait_pid(self.pid);
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        if !self.reaped {
            // Never left behind running or as a zombie.
            // SAFETY: signalling and reaping our own child.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
            wait_pid(self.pid);
        }
    }
}

fn cstring(bytes: &[u8], what: &str) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| format!("the command's {what} contains a NUL byte"))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let (r, w) = std::io::pipe().map_err(|e| format!("creating a pipe for the command: {e}"))?;
    Ok((r.into(), w.into()))
}

/// Start `req` with its output on `stdout`/`stderr`: clone the namespace's init into every
/// new namespace the confinement names, join `procs` (the pids cgroup's directory) when
/// given, and return once the command has been executed (or say why it was not). Only for a
/// confinement with a PID namespace.
pub fn spawn(
    req: &Launch<'_>,
    stdout: OwnedFd,
    stderr: OwnedFd,
    procs: Option<OwnedFd>,
    net: Option<crate::exec::confine::CommandNs>,
) -> Result<Direct, String> {
    debug_assert!(req.confinement.pidns);
    // Everything the two children need, made here: they only make system calls.
    let program = cstring(req.program.as_os_str().as_bytes(), "program")?;
    let argv_c: Vec<CString> = std::iter::once(req.arg0.as_bytes())
        .chain(req.args.iter().map(|a| a.as_bytes()))
        .map(|a| cstring(a, "arguments"))
        .collect::<Result<_, _>>()?;
    let env_c: Vec<CString> = req
        .env
        .iter()
        .map(|(k, v)| cstring(format!("{k}={v}").as_bytes(), "environment"))
        .collect::<Result<_, _>>()?;
    let argv: Vec<*const libc::c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = env_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let cwd = cstring(req.cwd.as_os_str().as_bytes(), "working directory")?;
    let null = rustix::fs::open(
        c"/dev/null",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| format!("opening /dev/null for the command's input: {e}"))?;
    let cgroup = procs.is_some();
    let mut armed = Armed::new(req.confinement, req.view, req.writable, procs, net, None)?;
    if !armed.clones_directly() {
        return Err("this command joins a user namespace first: start it through a Command".into());
    }
    let attrs = SpawnAttrs::new(null.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd())?;
    // The exec's outcome (an errno, or end of file once the command runs), the command's
    // status, and "go" once the init is in the pids cgroup.
    let (err_r, err_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let go = if cgroup { Some(pipe()?) } else { None };
    let flags = libc::SIGCHLD as libc::c_long | armed.flags.bits() as libc::c_long;
    // SAFETY: clone without CLONE_VM behaves as fork into the new namespaces; the child
    // continues on a copy of this stack and only makes system calls (see `init`).
    #[allow(unsafe_code)]
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(format!(
            "could not start the command: {}",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        let fds = InitFds {
            err_r: err_r.as_raw_fd(),
            err_w: err_w.as_raw_fd(),
            status_r: status_r.as_raw_fd(),
            status_w: status_w.as_raw_fd(),
            go_r: go.as_ref().map(|(r, _)| r.as_raw_fd()),
            go_w: go.as_ref().map(|(_, w)| w.as_raw_fd()),
        };
        // SAFETY: in the cloned child; never returns.
        #[allow(unsafe_code)]
        unsafe {
            init(&mut armed, &fds, &attrs, &program, &argv, &envp, &cwd)
        }
    }
    let pid = pid as i32;
    drop((err_w, status_w, stdout, stderr, null));
    let direct = Direct {
        pid,
        status: status_r,
        reaped: false,
    };
    if let Some((go_r, go_w)) = go {
        drop(go_r);
        let moved = armed
            .procs
            .as_ref()
            .is_some_and(|dir| join_cgroup(dir.as_fd(), pid).is_ok());
        if moved {
            let _ = rustix::io::write(&go_w, &[1]);
        }
        // Without the move the init is never let go: it reports that as its start error.
    }
    drop(armed);
    match read_int(&err_r) {
        None => Ok(direct),
        Some(errno) => Err(format!(
            "could not start the command: {}",
            std::io::Error::from_raw_os_error(errno)
        )),
    }
}

/// How the init starts the command with `posix_spawn` (made in the caller: making them
/// allocates).
struct SpawnAttrs {
    actions: *mut libc::posix_spawn_file_actions_t,
    attr: *mut libc::posix_spawnattr_t,
    /// Where the two pointers point (kept alive, never moved).
    _store: Box<(libc::posix_spawn_file_actions_t, libc::posix_spawnattr_t)>,
}

impl SpawnAttrs {
    /// `stdin`, `stdout`, `stderr` on 0, 1, 2 and nothing else open; no signal blocked, and
    /// SIGPIPE at its default (Rust ignores it, and that would be inherited).
    fn new(stdin: libc::c_int, stdout: libc::c_int, stderr: libc::c_int) -> Result<Self, String> {
        // SAFETY: zeroed storage initialised by the `_init` calls before any other use; the
        // pointers point into the box, which does not move.
        #[allow(unsafe_code)]
        unsafe {
            let mut store: Box<(libc::posix_spawn_file_actions_t, libc::posix_spawnattr_t)> =
                Box::new(std::mem::zeroed());
            let actions: *mut libc::posix_spawn_file_actions_t = &mut store.0;
            let attr: *mut libc::posix_spawnattr_t = &mut store.1;
            let failed = |what: &str, r: libc::c_int| {
                format!(
                    "preparing the command's start ({what}): {}",
                    std::io::Error::from_raw_os_error(r)
                )
            };
            let r = libc::posix_spawn_file_actions_init(actions);
            if r != 0 {
                return Err(failed("file actions", r));
            }
            let r = libc::posix_spawnattr_init(attr);
            if r != 0 {
                libc::posix_spawn_file_actions_destroy(actions);
                return Err(failed("attributes", r));
            }
            let this = SpawnAttrs {
                actions,
                attr,
                _store: store,
            };
            for (from, to) in [(stdin, 0), (stdout, 1), (stderr, 2)] {
                let r = libc::posix_spawn_file_actions_adddup2(actions, from, to);
                if r != 0 {
                    return Err(failed("output", r));
                }
            }
            let r = libc::posix_spawn_file_actions_addclosefrom_np(actions, 3);
            if r != 0 {
                return Err(failed("descriptors", r));
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            // Only SIGPIPE is ignored here (by Rust); handlers are reset by the exec itself,
            // and resetting all 64 would be as many system calls.
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut all);
            libc::sigaddset(&mut all, libc::SIGPIPE);
            let r = libc::posix_spawnattr_setsigmask(attr, &none);
            let r = if r == 0 {
                libc::posix_spawnattr_setsigdefault(attr, &all)
            } else {
                r
            };
            let r = if r == 0 {
                libc::posix_spawnattr_setflags(
                    attr,
                    (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short,
                )
            } else {
                r
            };
            if r != 0 {
                return Err(failed("signals", r));
            }
            Ok(this)
        }
    }
}

impl Drop for SpawnAttrs {
    fn drop(&mut self) {
        // SAFETY: both were initialised in `new` and are destroyed once.
        #[allow(unsafe_code)]
        unsafe {
            libc::posix_spawn_file_actions_destroy(self.actions);
            libc::posix_spawnattr_destroy(self.attr);
        }
    }
}

/// The descriptors the init and the command use, as numbers (valid in the child's copy).
struct InitFds {
    err_r: libc::c_int,
    err_w: libc::c_int,
    status_r: libc::c_int,
    status_w: libc::c_int,
    go_r: Option<libc::c_int>,
    go_w: Option<libc::c_int>,
}

/// Write `errno` where the caller waits for the exec and end this process.
#[allow(unsafe_code)]
unsafe fn fail(err_w: libc::c_int, errno: i32) -> ! {
    libc::write(
        err_w,
        (&errno as *const i32).cast(),
        std::mem::size_of::<i32>(),
    );
    libc::_exit(127)
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EPERM)
}

/// PID 1 of the new namespace: confine, start the command, and when it ends kill and reap
/// everything else in the namespace, then report its status and exit.
#[allow(unsafe_code)]
unsafe fn init(
    armed: &mut Armed,
    fds: &InitFds,
    spawn: &SpawnAttrs,
    program: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    cwd: &CString,
) -> ! {
    // It dies with the thread that started it (the spawner's, or the host's).
    libc::prctl(
        libc::PR_SET_PDEATHSIG,
        libc::SIGKILL as libc::c_ulong,
        0,
        0,
        0,
    );
    libc::close(fds.err_r);
    libc::close(fds.status_r);
    if let Some(w) = fds.go_w {
        libc::close(w);
    }
    // Its own process group, which the command joins: a timeout kills the group.
    libc::setpgid(0, 0);
    if let Err(e) = armed.map_user() {
        fail(fds.err_w, errno_of(&e));
    }
    if let Err(e) = armed.join_net() {
        fail(fds.err_w, errno_of(&e));
    }
    if let Err(e) = armed.setup() {
        fail(fds.err_w, errno_of(&e));
    }
    if let Some(r) = fds.go_r {
        let mut go = 0u8;
        let n = loop {
            let n = libc::read(r, (&mut go as *mut u8).cast(), 1);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break n;
        };
        if n != 1 {
            // The move into the pids cgroup failed: nothing is started.
            fail(fds.err_w, libc::EAGAIN);
        }
        libc::close(r);
    }
    if libc::chdir(cwd.as_ptr()) != 0 {
        fail(fds.err_w, *libc::__errno_location());
    }
    // The command (PID 2), started like `posix_spawn` does (the init's memory is not copied;
    // the init waits until the command has executed): its input and output on 0, 1 and 2,
    // nothing else open, SIGPIPE at its default and no signal blocked.
    let mut command: libc::pid_t = 0;
    let r = libc::posix_spawn(
        &mut command,
        program.as_ptr(),
        spawn.actions,
        spawn.attr,
        argv.as_ptr() as *const *mut libc::c_char,
        envp.as_ptr() as *const *mut libc::c_char,
    );
    if r != 0 {
        fail(fds.err_w, r);
    }
    libc::close(fds.err_w);
    init_wait(command, fds.status_w)
}
