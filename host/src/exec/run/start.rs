//! Starting a command: through the gate's spawner when one runs, else forked from the host
//! with the same confinement; either way the leader's end is recorded for [`super::Process`].

use super::Progress;
use crate::exec::confine;
use crate::exec::{ExecError, ExecHost};
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// The read ends of the command's stdout and stderr.
pub(super) type Readers = [Option<std::os::fd::OwnedFd>; 2];

/// Record the leader's end in `shared`.
fn record_exit(shared: &Arc<(Mutex<Progress>, Condvar)>, code: Option<i32>, signal: Option<i32>) {
    let (lock, cv) = &**shared;
    let mut p = lock.lock().unwrap_or_else(|p| p.into_inner());
    p.status = Some((code, signal));
    p.ended = Some(Instant::now());
    cv.notify_all();
}

/// Start through the spawner; `Ok(None)` when there is none (fork from the host instead).
pub(super) fn start_with_spawner(
    host: &ExecHost,
    request: &crate::exec::spawner::Request,
    pids: Option<&confine::PidsCgroup>,
    net: Option<&crate::exec::netns::CommandNet>,
    shared: &Arc<(Mutex<Progress>, Condvar)>,
) -> Result<Option<(i32, Readers)>, ExecError> {
    #[cfg(target_os = "linux")]
    {
        use crate::exec::spawner::StartError;
        let (out_r, out_w) = std::io::pipe().map_err(ExecError::io("creating the output pipe"))?;
        let (err_r, err_w) = std::io::pipe().map_err(ExecError::io("creating the output pipe"))?;
        let mut fds: Vec<rustix::fd::OwnedFd> = vec![out_w.into(), err_w.into()];
        if let Some(p) = pids {
            fds.push(p.procs_fd().map_err(ExecError::Confine)?);
        }
        if let Some(net) = net {
            let ns = net
                .namespaces()
                .map_err(ExecError::io("passing the network namespace"))?;
            fds.push(ns.net);
            fds.extend(ns.user);
        }
        // When the spawner dies, the status of what it started is unknown (`None, None`):
        // the group is killed at once, since nobody can reap it or see it end any more.
        let leader = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let on_exit = {
            let shared = shared.clone();
            let leader = leader.clone();
            Box::new(move |code: Option<i32>, signal: Option<i32>| {
                let pgid = leader.load(std::sync::atomic::Ordering::Acquire);
                if code.is_none() && signal.is_none() && pgid > 0 {
                    crate::exec::process::kill_group(pgid);
                }
                record_exit(&shared, code, signal)
            })
        };
        match host.spawner.start(request.clone(), fds, on_exit) {
            Ok(pid) => Ok(Some((
                {
                    leader.store(pid, std::sync::atomic::Ordering::Release);
                    pid
                },
                [Some(out_r.into()), Some(err_r.into())],
            ))),
            Err(StartError::Unavailable(_)) => Ok(None),
            Err(StartError::Failed(e)) => Err(ExecError::Spawner(e)),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (host, request, pids, net, shared);
        Ok(None)
    }
}

/// Fork the command from the host (no spawner), with the same confinement.
pub(super) fn start_in_process(
    request: &crate::exec::spawner::Request,
    pids: Option<&confine::PidsCgroup>,
    net: Option<&crate::exec::netns::CommandNet>,
    shared: &Arc<(Mutex<Progress>, Condvar)>,
) -> Result<(i32, Readers), ExecError> {
    let mut cmd = request.command();
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    #[cfg(target_os = "linux")]
    request
        .confine(
            &mut cmd,
            pids.map(confine::PidsCgroup::procs_fd)
                .transpose()
                .map_err(ExecError::Confine)?,
            net.map(crate::exec::netns::CommandNet::namespaces)
                .transpose()
                .map_err(ExecError::io("passing the network namespace"))?,
        )
        .map_err(ExecError::Confine)?;
    #[cfg(not(target_os = "linux"))]
    let _ = (pids, net);
    let mut child = cmd.spawn().map_err(ExecError::Start)?;
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let readers: Readers = [
        child.stdout.take().map(Into::into),
        child.stderr.take().map(Into::into),
    ];
    let shared = shared.clone();
    std::thread::spawn(move || {
        use std::os::unix::process::ExitStatusExt;
        match child.wait() {
            Ok(s) => record_exit(&shared, s.code(), s.signal()),
            Err(_) => record_exit(&shared, None, None),
        }
    });
    Ok((pid, readers))
}
