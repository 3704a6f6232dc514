//! The spawner's side of one command: its worker thread starts it with exactly the
//! confinement the host asked for, says it started and, later, how it ended. Workers that are
//! done wait for the next command (a few are kept), so starting one makes no thread.

use super::linux::send;
use super::{Reply, Request};
use rustix::fd::OwnedFd;
use std::process::{Child, Stdio};
use std::sync::{mpsc, Arc, Mutex};

/// One command and the descriptors that came with it.
pub(super) struct Work {
    pub(super) req: Request,
    pub(super) fds: Vec<OwnedFd>,
}

/// Workers waiting for a command.
pub(super) type Idle = Arc<Mutex<Vec<mpsc::Sender<Work>>>>;

/// Workers kept waiting; more are made when commands overlap, and end when done.
const KEEP_IDLE: usize = 4;

/// Hand `work` to an idle worker: `None` when one took it.
pub(super) fn idle_worker(idle: &Idle, mut work: Work) -> Option<Work> {
    loop {
        let next = idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let Some(tx) = next else {
            return Some(work);
        };
        match tx.send(work) {
            Ok(()) => return None,
            // That worker is gone: try the next.
            Err(mpsc::SendError(back)) => work = back,
        }
    }
}

/// A worker: run `first`, then wait for more while few enough others wait.
pub(super) fn worker_loop(first: Work, sock: &OwnedFd, idle: &Idle) {
    let (tx, rx) = mpsc::channel::<Work>();
    let mut work = first;
    loop {
        run_one(work, sock);
        {
            let mut waiting = idle.lock().unwrap_or_else(|p| p.into_inner());
            if waiting.len() >= KEEP_IDLE {
                return;
            }
            waiting.push(tx.clone());
        }
        work = match rx.recv() {
            Ok(w) => w,
            Err(_) => return,
        };
    }
}

/// Start one command and report its start and its end.
fn run_one(work: Work, sock: &OwnedFd) {
    let Work { req, fds } = work;
    let id = req.id;
    match launch(&req, fds) {
        Ok(Launched::Direct(mut direct)) => {
            send(
                sock,
                &Reply::Started {
                    id,
                    pid: direct.pid,
                },
            );
            // Reported as soon as the namespace's init has the status, which it sends once
            // everything else in the namespace is killed and reaped; the namespace's mounts
            // are torn down (and the init reaped) after. A command with a pids cgroup of its
            // own is reaped first: the host removes the group once it hears the command ended.
            let (code, signal) = direct.wait();
            if req.cgroup {
                direct.reap();
                send(sock, &Reply::Exited { id, code, signal });
            } else {
                send(sock, &Reply::Exited { id, code, signal });
                direct.reap();
            }
        }
        Ok(Launched::Std(mut child)) => {
            use std::os::unix::process::ExitStatusExt;
            let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
            send(sock, &Reply::Started { id, pid });
            let (code, signal) = match child.wait() {
                Ok(s) => (s.code(), s.signal()),
                Err(_) => (None, None),
            };
            send(sock, &Reply::Exited { id, code, signal });
        }
        Err(error) => send(sock, &Reply::Failed { id, error }),
    }
}

/// A command the spawner started.
enum Launched {
    /// Cloned straight into its PID namespace (the usual case).
    Direct(crate::exec::confine::Direct),
    /// Through `std::process::Command` (no PID namespace to start it in).
    Std(Child),
}

/// Fork and exec one command with exactly the confinement the host asked for.
fn launch(req: &Request, fds: Vec<OwnedFd>) -> Result<Launched, String> {
    let expected =
        2 + usize::from(req.cgroup) + usize::from(req.netns) + usize::from(req.netns_user);
    if fds.len() != expected {
        return Err(format!(
            "the spawner got {} descriptors, expected {expected}",
            fds.len()
        ));
    }
    let mut fds = fds.into_iter();
    let (Some(stdout), Some(stderr)) = (fds.next(), fds.next()) else {
        return Err("missing output descriptors".into());
    };
    let procs = req.cgroup.then(|| fds.next()).flatten();
    let net = req.netns.then(|| fds.next()).flatten();
    let user = req.netns_user.then(|| fds.next()).flatten();
    let net = net.map(|net| crate::exec::confine::CommandNs { net, user });
    // A command that joins a user namespace first cannot be cloned into the others at once.
    if req.confinement.pidns && !req.netns_user {
        let launch = crate::exec::confine::Launch {
            program: &req.program,
            arg0: &req.arg0,
            args: &req.args,
            env: &req.env,
            cwd: &req.cwd,
            confinement: req.confinement,
            view: req.view.as_ref(),
            writable: &req.writable,
        };
        return crate::exec::confine::spawn_direct(&launch, stdout, stderr, procs, net)
            .map(Launched::Direct);
    }
    let mut cmd = req.command();
    cmd.stdout(Stdio::from(stdout)).stderr(Stdio::from(stderr));
    req.confine(&mut cmd, procs, net)?;
    cmd.spawn()
        .map(Launched::Std)
        .map_err(|e| format!("could not start the command: {e}"))
}
