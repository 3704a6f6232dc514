//! The spawner: a small helper process that starts shell commands for the host.
//!
//! Starting a confined command needs work between `fork` and `exec` (joining the pids cgroup,
//! namespaces, read-only bind mounts, Landlock), so it cannot use `posix_spawn`. Forking the
//! host itself is slow: the host is large (compiled components, pooled instance slots) and a
//! fork copies its page tables, then the `exec` tears them down again — about 2 ms per command
//! on the reference machine, most of the shell's overhead.
//!
//! So the host starts the `toolgate` binary once more with the hidden argument `__spawner`
//! (a fresh `exec`, so the process is small), connected by a Unix seqpacket socket on its
//! stdin. For each command the host sends the resolved program, argv, environment, working
//! directory, the confinement to apply and, as file descriptors, the write ends of the output
//! pipes and the command's pids cgroup (its directory). The spawner forks, applies exactly
//! that confinement in the child (the same code as the in-process path, [`super::confine`])
//! and execs; it replies with the pid and later reports the exit status.
//!
//! The spawner decides nothing: the gate approved the command and the host resolved the
//! program, computed the environment and chose the confinement. It only ever runs what the
//! host sends over a socket that no other process holds. When no spawner can be started (the
//! binary is not found next to the running one, or it speaks another protocol) commands are
//! forked from the host as before; `data.spawner` in the observation says which was used.
//! The spawner exits when the host closes the socket (including when the host dies).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[cfg(target_os = "linux")]
mod launch;
mod request;
pub use request::Request;

/// The hidden first argument that makes the `toolgate` binary a spawner.
pub const ARG: &str = "__spawner";

/// Bumped whenever [`Request`] or [`Reply`] change.
const PROTOCOL: u32 = 5;

/// Largest request the host sends; a larger one (a huge command or environment) is forked
/// from the host instead.
const MAX_REQUEST: usize = 128 << 10;

/// Room the spawner keeps for one request.
const RECV_BUFFER: usize = 256 << 10;

/// What the spawner says.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
enum Reply {
    /// Sent once at start.
    Hello { protocol: u32, version: String },
    /// The command runs as `pid` (the leader of its own process group).
    Started { id: u64, pid: i32 },
    /// The command could not be started.
    Failed { id: u64, error: String },
    /// The command's leader ended.
    Exited {
        id: u64,
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// Why [`Spawner::start`] did not start a command.
#[derive(Debug)]
pub enum StartError {
    /// No spawner is available: fork from the host instead.
    Unavailable(String),
    /// The spawner tried and the command could not be started (fail closed, do not retry).
    Failed(String),
}

/// The `toolgate` binary to start as the spawner: the running one, or the one beside (or one
/// level above) the running test or benchmark binary in a cargo target dir.
fn find_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let name = format!("toolgate{}", std::env::consts::EXE_SUFFIX);
    if exe.file_name().is_some_and(|n| n == name.as_str()) {
        return Some(exe);
    }
    let dir = exe.parent()?;
    let mut candidates = vec![dir.join(&name)];
    if let Some(up) = dir.parent() {
        candidates.push(up.join(&name));
    }
    candidates.into_iter().find(|p| p.is_file())
}

#[cfg(target_os = "linux")]
pub use linux::{serve, Spawner};

#[cfg(not(target_os = "linux"))]
mod other;

#[cfg(not(target_os = "linux"))]
pub use other::{serve, Spawner};

#[cfg(target_os = "linux")]
mod linux {
    use super::launch::{idle_worker, worker_loop, Idle, Work};
    use super::{find_binary, Reply, Request, StartError, MAX_REQUEST, PROTOCOL, RECV_BUFFER};
    use crate::exec::confine::PidsCgroup;
    use rustix::fd::{AsFd, FromRawFd, OwnedFd};
    use rustix::io::Errno;
    use rustix::net::{
        recvmsg, sendmsg, socketpair, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage,
        RecvFlags, ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags,
        SocketType,
    };
    use std::collections::HashMap;
    use std::io::{IoSlice, IoSliceMut};
    use std::mem::MaybeUninit;
    use std::process::{Child, Command, ExitCode, Stdio};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{mpsc, Arc, Mutex};
    use std::time::Duration;

    /// How long the host waits for the spawner's hello, and for a start reply.
    const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

    type OnExit = Box<dyn FnOnce(Option<i32>, Option<i32>) + Send>;

    struct Waiting {
        started: Option<mpsc::Sender<Result<i32, String>>>,
        on_exit: Option<OnExit>,
    }

    /// One running spawner and its socket.
    struct Conn {
        sock: OwnedFd,
        child: Mutex<Child>,
        waiting: Arc<Mutex<HashMap<u64, Waiting>>>,
        dead: Arc<AtomicBool>,
        /// The spawner runs in the host's shared pids cgroup.
        in_group: bool,
    }

    impl Drop for Conn {
        fn drop(&mut self) {
            let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The host's handle on its spawner, started on first use and restarted if it died.
    ///
    /// With a process limit the spawner runs in a pids cgroup of its own, so every command it
    /// forks starts inside it. Moving a process into a cgroup makes the kernel wait for an
    /// RCU grace period unless one is already under way: ~0.5 ms for commands back to back
    /// but ~10 ms for a command after a pause (measured on cgroup v1), paid before the
    /// command may start. Joining once per spawner takes that off every command; each
    /// command is still ended as a whole by its PID namespace.
    #[derive(Default)]
    pub struct Spawner {
        conn: Mutex<Option<Arc<Conn>>>,
        /// Set once starting failed, so every command does not try again.
        unavailable: Mutex<Option<String>>,
        next: AtomicU64,
        /// The limit of the shared pids cgroup (none: commands bring their own cgroups).
        pids_limit: Option<u32>,
        /// That cgroup, made on first start and kept across restarts of the spawner.
        group: Mutex<Option<Arc<PidsCgroup>>>,
    }

    impl Spawner {
        /// A spawner whose commands share one pids cgroup limited to `max` tasks (the
        /// spawner's own threads included), where the host can make one.
        pub fn with_pids_limit(max: u32) -> Spawner {
            Spawner {
                pids_limit: Some(max),
                ..Spawner::default()
            }
        }

        /// The shared process limit, when a spawner runs (it is started here) inside its pids
        /// cgroup; `None` when commands need their own cgroup.
        pub fn shared_pids_limit(&self) -> Option<u32> {
            let conn = self.conn().ok()?;
            self.pids_limit.filter(|_| conn.in_group)
        }

        /// A spawner that never starts: every command is forked from the host (the fallback
        /// path, for tests and for embedding hosts that cannot run a helper binary).
        pub fn disabled() -> Spawner {
            let s = Spawner::default();
            *lock(&s.unavailable) = Some("disabled".into());
            s
        }

        fn conn(&self) -> Result<Arc<Conn>, StartError> {
            if let Some(why) = lock(&self.unavailable).clone() {
                return Err(StartError::Unavailable(why));
            }
            let mut slot = lock(&self.conn);
            if let Some(c) = slot.as_ref() {
                if !c.dead.load(Ordering::Acquire) {
                    return Ok(c.clone());
                }
            }
            let group = self.pids_limit.and_then(|max| {
                let mut group = lock(&self.group);
                if group.is_none() {
                    *group = PidsCgroup::create(max).map(Arc::new);
                }
                group.clone()
            });
            match connect(group.as_deref()) {
                Ok(c) => {
                    let c = Arc::new(c);
                    *slot = Some(c.clone());
                    Ok(c)
                }
                Err(why) => {
                    tracing::info!(%why, "no spawner; shell commands are forked from the host");
                    *lock(&self.unavailable) = Some(why.clone());
                    Err(StartError::Unavailable(why))
                }
            }
        }

        /// Start `req` with `fds` (stdout, stderr and, when `req.cgroup`, the pids cgroup's directory);
        /// `on_exit` runs with `(code, signal)` when the leader ends (both `None` when the
        /// spawner died and the status is unknown). Returns the pid.
        pub fn start(
            &self,
            mut req: Request,
            fds: Vec<OwnedFd>,
            on_exit: OnExit,
        ) -> Result<i32, StartError> {
            let conn = self.conn()?;
            // A command prepared for the shared process limit starts here only inside it;
            // otherwise the host forks it with a cgroup of its own (`run::spawn`).
            if req.shared_pids && !conn.in_group {
                return Err(StartError::Unavailable(
                    "the spawner is not in its pids cgroup".into(),
                ));
            }
            req.id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
            let body = serde_json::to_vec(&req)
                .map_err(|e| StartError::Unavailable(format!("encoding the request: {e}")))?;
            if body.len() > MAX_REQUEST {
                return Err(StartError::Unavailable("the request is too large".into()));
            }
            let (tx, rx) = mpsc::channel();
            lock(&conn.waiting).insert(
                req.id,
                Waiting {
                    started: Some(tx),
                    on_exit: Some(on_exit),
                },
            );
            let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(5))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !control.push(SendAncillaryMessage::ScmRights(&borrowed)) {
                lock(&conn.waiting).remove(&req.id);
                return Err(StartError::Unavailable("too many descriptors".into()));
            }
            let sent = loop {
                match sendmsg(
                    &conn.sock,
                    &[IoSlice::new(&body)],
                    &mut control,
                    SendFlags::NOSIGNAL,
                ) {
                    Err(Errno::INTR) => continue,
                    other => break other,
                }
            };
            drop(fds);
            if let Err(e) = sent {
                // Not delivered: nothing was started. The next command starts a new spawner.
                lock(&conn.waiting).remove(&req.id);
                conn.dead.store(true, Ordering::Release);
                return Err(StartError::Unavailable(format!("the spawner is gone: {e}")));
            }
            match rx.recv_timeout(REPLY_TIMEOUT) {
                Ok(Ok(pid)) => Ok(pid),
                Ok(Err(e)) => Err(StartError::Failed(e)),
                Err(_) => {
                    lock(&conn.waiting).remove(&req.id);
                    Err(StartError::Failed(
                        "the spawner did not answer; the command may not have started".into(),
                    ))
                }
            }
        }

        /// The spawner's pid while one is running (for diagnostics and tests).
        pub fn pid(&self) -> Option<u32> {
            lock(&self.conn)
                .as_ref()
                .filter(|c| !c.dead.load(Ordering::Acquire))
                .map(|c| lock(&c.child).id())
        }
    }

    fn connect(group: Option<&PidsCgroup>) -> Result<Conn, String> {
        let exe = find_binary().ok_or("the toolgate binary was not found")?;
        let (ours, theirs) = socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| format!("socketpair: {e}"))?;
        let child = Command::new(&exe)
            .arg(super::ARG)
            .env_clear()
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        // Before any request: nothing it forks starts outside the group.
        let in_group = group.is_some_and(|g| g.join(child.id()).is_ok());
        let waiting: Arc<Mutex<HashMap<u64, Waiting>>> = Arc::default();
        let dead = Arc::new(AtomicBool::new(false));
        let (hello_tx, hello_rx) = mpsc::channel();
        let reader_sock = ours
            .try_clone()
            .map_err(|e| format!("duplicating the spawner socket: {e}"))?;
        {
            let waiting = waiting.clone();
            let dead = dead.clone();
            std::thread::Builder::new()
                .name("toolgate-spawner-reader".into())
                .spawn(move || read_replies(reader_sock, waiting, dead, hello_tx))
                .map_err(|e| format!("starting the spawner reader: {e}"))?;
        }
        let conn = Conn {
            sock: ours,
            child: Mutex::new(child),
            waiting,
            dead,
            in_group,
        };
        match hello_rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(Reply::Hello { protocol, version })
                if protocol == PROTOCOL && version == env!("CARGO_PKG_VERSION") =>
            {
                Ok(conn)
            }
            Ok(other) => Err(format!(
                "{} speaks another protocol ({other:?}); rebuild it",
                exe.display()
            )),
            Err(_) => Err(format!("{} did not start as a spawner", exe.display())),
        }
    }

    fn read_replies(
        sock: OwnedFd,
        waiting: Arc<Mutex<HashMap<u64, Waiting>>>,
        dead: Arc<AtomicBool>,
        hello: mpsc::Sender<Reply>,
    ) {
        let mut buf = vec![0u8; 64 << 10];
        // The spawner sends no descriptors; any that came are closed at once.
        while let Some(got) = receive(&sock, &mut buf) {
            let Ok(reply) = serde_json::from_slice::<Reply>(&buf[..got.bytes]) else {
                tracing::warn!("the spawner sent something unreadable; stopping it");
                break;
            };
            match reply {
                Reply::Hello { .. } => {
                    let _ = hello.send(reply);
                }
                Reply::Started { id, pid } => {
                    if let Some(w) = lock(&waiting).get_mut(&id) {
                        if let Some(tx) = w.started.take() {
                            let _ = tx.send(Ok(pid));
                        }
                    }
                }
                Reply::Failed { id, error } => {
                    if let Some(mut w) = lock(&waiting).remove(&id) {
                        if let Some(tx) = w.started.take() {
                            let _ = tx.send(Err(error));
                        }
                    }
                }
                Reply::Exited { id, code, signal } => {
                    let w = lock(&waiting).remove(&id);
                    if let Some(f) = w.and_then(|mut w| w.on_exit.take()) {
                        f(code, signal);
                    }
                }
            }
        }
        // The spawner is gone: nothing it started can be reaped by us any more. Report every
        // command still waiting as ended with an unknown status (the host then kills its
        // process group) and every pending start as failed.
        dead.store(true, Ordering::Release);
        let orphans: Vec<Waiting> = lock(&waiting).drain().map(|(_, w)| w).collect();
        for mut w in orphans {
            if let Some(tx) = w.started.take() {
                let _ = tx.send(Err("the spawner stopped while starting the command".into()));
            }
            if let Some(f) = w.on_exit.take() {
                f(None, None);
            }
        }
    }

    /// One message and the descriptors that came with it.
    struct Received {
        bytes: usize,
        truncated: bool,
        fds: Vec<OwnedFd>,
    }

    /// Receive one message into `buf`; `None` when the other side closed (or the socket failed).
    fn receive(sock: &OwnedFd, buf: &mut [u8]) -> Option<Received> {
        loop {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(5))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let got = match recvmsg(
                sock,
                &mut [IoSliceMut::new(buf)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Err(Errno::INTR) => continue,
                Err(_) => return None,
                Ok(m) if m.bytes == 0 => return None,
                Ok(m) => m,
            };
            let mut fds = Vec::new();
            for msg in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = msg {
                    fds.extend(received);
                }
            }
            return Some(Received {
                bytes: got.bytes.min(buf.len()),
                truncated: got
                    .flags
                    .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC),
                fds,
            });
        }
    }

    pub(super) fn send(sock: &OwnedFd, reply: &Reply) {
        let Ok(body) = serde_json::to_vec(reply) else {
            return;
        };
        let mut control = SendAncillaryBuffer::default();
        loop {
            match sendmsg(
                sock,
                &[IoSlice::new(&body)],
                &mut control,
                SendFlags::NOSIGNAL,
            ) {
                Err(Errno::INTR) => continue,
                _ => return,
            }
        }
    }

    /// The spawner's main loop (`toolgate __spawner`): start what the host sends until the host
    /// closes the socket.
    pub fn serve() -> ExitCode {
        // SAFETY: the host starts the spawner with the socket as stdin; fd 0 is owned by this
        // process and nothing else in it uses stdin.
        #[allow(unsafe_code)]
        let sock = unsafe { OwnedFd::from_raw_fd(0) };
        if rustix::net::sockopt::socket_type(&sock) != Ok(SocketType::SEQPACKET) {
            eprintln!(
                "toolgate: `{}` is internal: the host starts it itself",
                super::ARG
            );
            return ExitCode::from(2);
        }
        // Before any thread exists (each thread takes the set of the one that made it).
        crate::exec::confine::empty_bounding_set();
        let sock = Arc::new(sock);
        send(
            &sock,
            &Reply::Hello {
                protocol: PROTOCOL,
                version: env!("CARGO_PKG_VERSION").into(),
            },
        );
        let idle: Idle = Arc::default();
        let mut buf = vec![0u8; RECV_BUFFER];
        while let Some(got) = receive(&sock, &mut buf) {
            if got.truncated {
                // The host never sends more than it may; a cut request is not run.
                continue;
            }
            let Ok(req) = serde_json::from_slice::<Request>(&buf[..got.bytes]) else {
                continue;
            };
            let id = req.id;
            let work = Work { req, fds: got.fds };
            // The command's thread exists before the command does: the spawner shares the
            // commands' pids cgroup, so a command that fills the limit cannot leave its own
            // start or end unreported. An idle worker takes it (no thread made on the
            // command's path), else a new one.
            let work = match idle_worker(&idle, work) {
                None => continue,
                Some(work) => work,
            };
            let (worker_sock, worker_idle) = (sock.clone(), idle.clone());
            let worker = std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || worker_loop(work, &worker_sock, &worker_idle));
            if let Err(e) = worker {
                let error = format!(
                    "the spawner could not start a thread for the command ({e}): the process \
                     limit `[shell] max_processes` is probably reached by running commands; \
                     stop a background job with job_kill, or raise the limit"
                );
                send(&sock, &Reply::Failed { id, error });
            }
        }
        ExitCode::SUCCESS
    }
}
