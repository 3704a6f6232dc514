//! Spawning: a simple command runs as argv with its program looked up on the scrubbed PATH (no
//! shell); a compound one runs as `bash -c` with exactly the approved text. Every command gets
//! its own process group; a timeout kills the whole group; output is kept with exact totals
//! and previewed head + tail, the full text saved under `.toolgate/outputs/`.

mod start;

use super::gitwatch::GitWatch;
pub use super::prepare::{clean_path, lookup, prepare, Prepared};
use super::process::kill_group;
use super::{confine, ApprovedCommand, ExecError, ExecHost, Outcome, Plan};
use crate::text::cut_head_tail;
use crate::workspace::OUTPUTS_DIR;
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use start::{start_in_process, start_with_spawner, Readers};

/// Bytes of each stream kept in memory; beyond this only the totals grow.
const KEEP_BYTES: usize = 32 << 20;

/// How a process stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum State {
    /// Ran to completion.
    #[default]
    Exited,
    /// Still running (a background job).
    Running,
    /// Killed at its timeout.
    TimedOut,
    /// Killed by `job_kill` (or when the gate closed).
    Killed,
}

impl State {
    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Exited => "exited",
            State::Running => "running",
            State::TimedOut => "timed-out",
            State::Killed => "killed",
        }
    }
}

/// One stream's preview and totals.
#[derive(Clone, Debug, Default)]
pub struct StreamView {
    /// Head + tail preview (the whole text when not truncated).
    pub preview: String,
    /// Whether the preview is cut.
    pub truncated: bool,
    /// Bytes in all.
    pub total_bytes: u64,
    /// Lines in all.
    pub total_lines: u64,
}

#[derive(Default)]
struct Stream {
    kept: Vec<u8>,
    total: u64,
    newlines: u64,
    last_byte: Option<u8>,
    open: bool,
}

#[derive(Default)]
struct Progress {
    stdout: Stream,
    stderr: Stream,
    /// `(exit code, signal)` once the leader has been reaped.
    status: Option<(Option<i32>, Option<i32>)>,
    ended: Option<Instant>,
    /// Why the host killed it, if it did.
    killed: Option<State>,
}

/// A running (or finished) process group with its collected output.
pub struct Process {
    pgid: i32,
    started: Instant,
    shared: Arc<(Mutex<Progress>, Condvar)>,
    /// The command's private directories (its root, /tmp, $HOME), removed when the process is
    /// dropped.
    _dirs: Option<confine::CallDirs>,
    /// The pids cgroup, removed when the process is dropped (after its group was killed).
    _pids: Option<confine::PidsCgroup>,
    /// Which confinement was applied.
    pub confinement: confine::Confinement,
    /// Started by the spawner (not forked from the host).
    pub via_spawner: bool,
    /// Git entries the view could not freeze, checked once the command ended.
    git_watch: Option<GitWatch>,
    /// The text that runs.
    pub text: String,
    /// The command's network namespace and the proxy behind it, kept while it may run.
    _net: Option<super::netns::CommandNet>,
}

impl Process {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.shared.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until the process ends or `deadline`; true when it ended.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let (lock, cv) = &*self.shared;
        let mut p = lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if p.status.is_some() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            p = cv
                .wait_timeout(p, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Whether the leader has exited.
    pub fn finished(&self) -> bool {
        self.lock().status.is_some()
    }

    /// Kill the process group and everything left in the command's pids cgroup (a process
    /// that left the group with `setsid` is still in the cgroup, and in the PID namespace that
    /// dies with its init).
    fn kill_everything(&self) {
        kill_group(self.pgid);
        if let Some(p) = &self._pids {
            p.kill_all();
        }
    }

    /// Kill the whole process group (`why`: timed out or killed) and wait for the leader.
    pub fn kill(&self, why: State) {
        {
            let mut p = self.lock();
            if p.status.is_none() && p.killed.is_none() {
                p.killed = Some(why);
            }
        }
        self.kill_everything();
        self.wait_until(Instant::now() + Duration::from_secs(5));
    }

    /// After the leader exits, whatever it left in its group is killed too, and the readers
    /// are given a moment to drain the pipes.
    fn settle(&self) {
        self.kill_everything();
        let deadline = Instant::now() + Duration::from_millis(500);
        let (lock, cv) = &*self.shared;
        let mut p = lock.lock().unwrap_or_else(|p| p.into_inner());
        while (p.stdout.open || p.stderr.open) && Instant::now() < deadline {
            p = cv
                .wait_timeout(p, Duration::from_millis(20))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// The outcome so far. `from` are byte offsets already shown (for incremental job output);
    /// the views cover `from..`. Saves the full text when a preview is cut.
    pub fn outcome(
        &self,
        from: (usize, usize),
        budget: usize,
        workspace: &Path,
        save_as: &str,
    ) -> (Outcome, (usize, usize)) {
        if self.finished() {
            self.settle();
        }
        let reverted = match (&self.git_watch, self.finished()) {
            (Some(w), true) => w.check(workspace),
            _ => Vec::new(),
        };
        let p = self.lock();
        let state = match (p.status, p.killed) {
            (None, _) => State::Running,
            (Some(_), Some(why)) => why,
            (Some(_), None) => State::Exited,
        };
        let half = (budget / 2).max(256);
        let (out_text, out_all) = slice(&p.stdout, from.0);
        let (err_text, err_all) = slice(&p.stderr, from.1);
        let mut full_output_ref = None;
        let stdout_cut = cut(&out_text, half);
        let stderr_cut = cut(&err_text, half);
        if stdout_cut.is_some() || stderr_cut.is_some() || !out_all || !err_all {
            let rel = format!("{OUTPUTS_DIR}/{save_as}.txt");
            let file = workspace.join(&rel);
            let body = format!("--- stdout ---\n{out_text}\n--- stderr ---\n{err_text}\n");
            let saved = crate::workspace::layout::write_state_file(&file, body.as_bytes());
            if saved.is_ok() {
                full_output_ref = Some(rel);
            }
        }
        let reference = full_output_ref
            .clone()
            .unwrap_or_else(|| "(not saved)".into());
        let view = |s: &Stream, text: String, cutv: Option<()>, from: usize| {
            let shown = s.total.saturating_sub(from as u64);
            StreamView {
                truncated: cutv.is_some() || shown > text.len() as u64,
                preview: match cutv {
                    Some(()) => cut_head_tail(&text, half, &reference).unwrap_or(text),
                    None => text,
                },
                total_bytes: shown,
                total_lines: if from == 0 {
                    lines(s)
                } else {
                    let chunk = &s.kept[from.min(s.kept.len())..];
                    count_lines(chunk)
                },
            }
        };
        let stdout = view(&p.stdout, out_text.clone(), stdout_cut, from.0);
        let stderr = view(&p.stderr, err_text.clone(), stderr_cut, from.1);
        let (exit_code, signal) = p.status.unwrap_or((None, None));
        let end = p.ended.unwrap_or_else(Instant::now);
        let offsets = (p.stdout.kept.len(), p.stderr.kept.len());
        let outcome = Outcome {
            state,
            exit_code,
            signal,
            stdout,
            stderr,
            duration_ms: u64::try_from(end.duration_since(self.started).as_millis())
                .unwrap_or(u64::MAX),
            job_id: None,
            full_output_ref,
            data: json!({
                "confinement": self.confinement.to_json(),
                "spawner": self.via_spawner,
            }),
        };
        let mut outcome = outcome;
        if !reverted.is_empty() {
            if let Some(map) = outcome.data.as_object_mut() {
                map.insert("git_reverted".into(), json!(reverted));
            }
        }
        (outcome, offsets)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.finished() {
            self.kill_everything();
        }
    }
}

fn slice(s: &Stream, from: usize) -> (String, bool) {
    let from = from.min(s.kept.len());
    let text = String::from_utf8_lossy(&s.kept[from..]).into_owned();
    (text, s.total == s.kept.len() as u64)
}

fn cut(text: &str, max: usize) -> Option<()> {
    (text.len() > max).then_some(())
}

fn count_lines(bytes: &[u8]) -> u64 {
    let n = bytes.iter().filter(|b| **b == b'\n').count() as u64;
    n + u64::from(bytes.last().is_some_and(|b| *b != b'\n'))
}

fn lines(s: &Stream) -> u64 {
    s.newlines + u64::from(s.last_byte.is_some_and(|b| b != b'\n'))
}

/// Start the approved command. The returned process is already being read and reaped.
///
/// The command is started by the gate's [`spawner`](super::spawner) when one is running (no
/// fork of the large host process), else forked from the host; both apply the same
/// confinement, chosen here.
pub fn spawn(host: &ExecHost, approved: &ApprovedCommand) -> Result<Process, ExecError> {
    let Prepared {
        request,
        dirs,
        mut pids,
        mut confinement,
        git_watch,
    } = super::prepare::prepare_spawned(host, approved)?;
    let shared: Arc<(Mutex<Progress>, Condvar)> = Arc::new(Default::default());
    {
        let mut p = shared.0.lock().unwrap_or_else(|p| p.into_inner());
        p.stdout.open = true;
        p.stderr.open = true;
    }
    let net = approved.net.as_ref();
    let (pid, readers, via_spawner) =
        match start_with_spawner(host, &request, pids.as_ref(), net, &shared)? {
            Some((pid, readers)) => (pid, readers, true),
            None => {
                // Forked from the host after all (a request too large for the spawner, or a
                // spawner outside its cgroup): the command gets a pids cgroup of its own.
                if request.shared_pids {
                    pids = confine::PidsCgroup::create(host.config.max_processes);
                    confinement.pids_limit = pids.as_ref().map(|p| p.limit());
                }
                let (pid, readers) = start_in_process(&request, pids.as_ref(), net, &shared)?;
                (pid, readers, false)
            }
        };
    collect(readers, &shared);
    Ok(Process {
        pgid: pid,
        started: Instant::now(),
        shared,
        _dirs: Some(dirs),
        _pids: pids,
        confinement,
        via_spawner,
        git_watch,
        text: approved.text.clone(),
        _net: approved.net.clone(),
    })
}

/// Read both output streams into `shared`, on one thread that waits for either.
fn collect(readers: Readers, shared: &Arc<(Mutex<Progress>, Condvar)>) {
    let shared = shared.clone();
    std::thread::spawn(move || {
        let mut open: Vec<(std::os::fd::OwnedFd, bool)> = readers
            .into_iter()
            .zip([true, false])
            .filter_map(|(r, is_out)| r.map(|r| (r, is_out)))
            .collect();
        let mut buf = vec![0u8; 16 << 10];
        while !open.is_empty() {
            let mut polled: Vec<libc::pollfd> = open
                .iter()
                .map(|(fd, _)| libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(fd),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: poll on descriptors this thread owns, described by a local array.
            #[allow(unsafe_code)]
            let n = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                // Unreadable: treat both as ended rather than spin.
                polled.iter_mut().for_each(|p| p.revents = libc::POLLERR);
            }
            let mut ended = Vec::new();
            for (i, p) in polled.iter().enumerate() {
                if p.revents == 0 {
                    continue;
                }
                let (fd, is_out) = &open[i];
                let n = match rustix::io::read(fd, &mut buf) {
                    Ok(n) => n,
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
                    Err(_) => 0,
                };
                let (lock, cv) = &*shared;
                let mut p = lock.lock().unwrap_or_else(|p| p.into_inner());
                let s = if *is_out {
                    &mut p.stdout
                } else {
                    &mut p.stderr
                };
                if n == 0 {
                    s.open = false;
                    cv.notify_all();
                    ended.push(i);
                    continue;
                }
                let chunk = &buf[..n];
                s.total += n as u64;
                s.newlines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
                s.last_byte = chunk.last().copied();
                let room = KEEP_BYTES.saturating_sub(s.kept.len());
                s.kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            for i in ended.into_iter().rev() {
                open.remove(i);
            }
        }
    });
}

/// Run the approved command: wait for it, or hand it to the job table when it is a background
/// command or runs past the auto-background threshold; kill the group at the timeout.
pub fn run_approved(
    host: &Arc<ExecHost>,
    session: &str,
    call_id: &str,
    approved: ApprovedCommand,
    cancel: crate::cancel::CancelToken,
) -> Result<Outcome, ExecError> {
    let process = Arc::new(spawn(host, &approved)?);
    let started = Instant::now();
    let hard = started + approved.timeout;
    let wait = if approved.background {
        super::BACKGROUND_GRACE
    } else {
        approved.auto_background
    };
    let soft = started + wait;
    // Wait in short slices so a cancelled call (the client gave up) kills the process group
    // promptly instead of leaving it running until its timeout.
    let until = soft.min(hard);
    let ended = loop {
        let slice = (Instant::now() + CANCEL_POLL).min(until);
        if process.wait_until(slice) {
            break true;
        }
        if cancel.is_cancelled() {
            process.kill(State::Killed);
            return Err(ExecError::Cancelled);
        }
        if Instant::now() >= until {
            break false;
        }
    };
    if !ended && Instant::now() < hard {
        // Still running: it becomes a job, killed at its timeout by a watcher of its own
        // (a foreground command's wait above ends at the timeout itself).
        {
            let p = Arc::downgrade(&process);
            std::thread::spawn(move || {
                let Some(proc_) = p.upgrade() else { return };
                if !proc_.wait_until(hard) {
                    proc_.kill(State::TimedOut);
                }
            });
        }
        let job_id = host.jobs.add(session, process.clone(), approved.timeout);
        let (mut outcome, offsets) =
            process.outcome((0, 0), host.config.output_budget, &host.workspace, call_id);
        host.jobs.mark_read(&job_id, offsets);
        outcome.job_id = Some(job_id);
        decorate(&mut outcome, &approved);
        return Ok(outcome);
    }
    if !ended {
        process.kill(State::TimedOut);
    }
    let (mut outcome, _) =
        process.outcome((0, 0), host.config.output_budget, &host.workspace, call_id);
    decorate(&mut outcome, &approved);
    Ok(outcome)
}

/// How often a foreground command's wait checks whether the call was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(50);

fn decorate(outcome: &mut Outcome, approved: &ApprovedCommand) {
    if let Some(map) = outcome.data.as_object_mut() {
        map.insert("command".into(), json!(approved.text));
        map.insert("key".into(), json!(approved.key));
        map.insert("class".into(), json!(approved.class));
        map.insert(
            "ran_as".into(),
            match &approved.plan {
                Plan::Argv(argv) => json!({ "argv": argv }),
                Plan::Bash(_) => json!("bash -c"),
            },
        );
        map.insert(
            "timeout_ms".into(),
            json!(approved.timeout.as_millis() as u64),
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
#[path = "run_tests.rs"]
mod tests;
