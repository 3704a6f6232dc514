//! Background jobs: commands started with `run_in_background`, or still running after the
//! auto-background threshold. Each belongs to the session that started it; `job_output` shows
//! what is new since the last look; `job_kill` kills the whole process group. Jobs die with
//! the gate (the table kills every group when it is dropped). A job with its own egress proxy
//! has a network log its watcher (`gate::egress`) fills as connections happen, after the call
//! that started it returned; `job_output` shows what is new in it.

use super::run::{Process, State};
use super::{ExecError, ExecHost, Outcome};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

struct Job {
    session: String,
    process: Arc<Process>,
    /// Bytes of stdout / stderr already shown.
    shown: (usize, usize),
    reads: u64,
    /// Its connections after its call returned, when it has a proxy.
    net: Option<JobNetLog>,
}

/// What a job's watcher recorded of its network: the connections (as audited), how many were
/// made but not listed, how many `job_output` already showed, and whether the watcher is done
/// (the job ended and its proxy stopped).
#[derive(Default)]
pub struct JobNet {
    connections: Vec<Value>,
    unlisted: u64,
    shown: (usize, u64),
    done: bool,
}

/// A job's network log, shared by its watcher and the table.
#[derive(Clone, Default)]
pub struct JobNetLog(Arc<(Mutex<JobNet>, Condvar)>);

/// How long `job_output` of a job that has ended waits for its watcher to record the last
/// connections (the watcher stops the proxy within about 2 s of the end).
const NET_SETTLE: Duration = Duration::from_secs(3);

impl JobNetLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, JobNet> {
        self.0 .0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add connections (their audited details) and connections made but not listed.
    pub fn push(&self, connections: Vec<Value>, unlisted: u64) {
        let mut n = self.lock();
        n.connections.extend(connections);
        n.unlisted += unlisted;
    }

    /// The watcher is done: nothing more will come.
    pub fn finish(&self) {
        self.lock().done = true;
        self.0 .1.notify_all();
    }

    /// What is new since the last look (`None`: nothing), as `data.network`; for a job that
    /// has ended, after waiting (bounded) for the watcher to finish.
    fn news(&self, ended: bool) -> Option<Value> {
        let mut n = self.lock();
        if ended {
            let until = Instant::now() + NET_SETTLE;
            while !n.done {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                n = self
                    .0
                     .1
                    .wait_timeout(n, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let new: Vec<Value> = n.connections.get(n.shown.0..).unwrap_or_default().to_vec();
        let unlisted = n.unlisted - n.shown.1.min(n.unlisted);
        n.shown = (n.connections.len(), n.unlisted);
        if new.is_empty() && unlisted == 0 {
            return None;
        }
        let refused = new.iter().filter(|c| c["allowed"] == json!(false)).count();
        Some(json!({
            "connections": new,
            "refused": refused,
            "unlisted": unlisted,
        }))
    }
}

/// Whether a job still runs, without keeping it (its process may be forgotten meanwhile).
pub struct JobProbe(Weak<Process>);

impl JobProbe {
    /// `false` once the job has ended, been killed, or been forgotten.
    pub fn running(&self) -> bool {
        self.0.upgrade().is_some_and(|p| !p.finished())
    }
}

/// The jobs of every session of one gate.
#[derive(Default)]
pub struct JobTable {
    jobs: Mutex<HashMap<String, Job>>,
    next: AtomicU64,
}

impl JobTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Register a running process as a job of `session`; returns its id.
    pub fn add(&self, session: &str, process: Arc<Process>, _timeout: Duration) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("job-{n}");
        self.lock().insert(
            id.clone(),
            Job {
                session: session.to_string(),
                process,
                shown: (0, 0),
                reads: 0,
                net: None,
            },
        );
        id
    }

    /// Give job `id` of `session` a network log (once: `None` when it is not this session's
    /// job or already has one); with a probe that says whether it still runs.
    pub fn watch_net(&self, session: &str, id: &str) -> Option<(JobNetLog, JobProbe)> {
        let mut jobs = self.lock();
        let job = jobs.get_mut(id).filter(|j| j.session == session)?;
        if job.net.is_some() {
            return None;
        }
        let log = JobNetLog::default();
        job.net = Some(log.clone());
        Some((log, JobProbe(Arc::downgrade(&job.process))))
    }

    fn net_of(&self, id: &str) -> Option<JobNetLog> {
        self.lock().get(id).and_then(|j| j.net.clone())
    }

    /// Record what was already shown of a job.
    pub fn mark_read(&self, id: &str, shown: (usize, usize)) {
        if let Some(j) = self.lock().get_mut(id) {
            j.shown = shown;
        }
    }

    /// How many jobs are running now.
    pub fn running(&self) -> usize {
        self.lock()
            .values()
            .filter(|j| !j.process.finished())
            .count()
    }

    fn get(&self, session: &str, id: &str) -> Result<(Arc<Process>, (usize, usize)), ExecError> {
        let mut jobs = self.lock();
        match jobs.get_mut(id) {
            Some(j) if j.session == session => {
                j.reads += 1;
                Ok((j.process.clone(), j.shown))
            }
            _ => Err(ExecError::UnknownJob { id: id.to_string() }),
        }
    }

    /// New output since the last look, and the job's state.
    pub fn output(
        &self,
        host: &ExecHost,
        session: &str,
        id: &str,
        call_id: &str,
    ) -> Result<Outcome, ExecError> {
        let (process, from) = self.get(session, id)?;
        let net = self.net_of(id);
        let (mut outcome, shown) =
            process.outcome(from, host.config.output_budget, &host.workspace, call_id);
        outcome.job_id = Some(id.to_string());
        show_net(&mut outcome, net.as_ref());
        self.mark_read(id, shown);
        if outcome.state != State::Running {
            // A finished job is shown once more and then forgotten.
            self.lock().remove(id);
        }
        Ok(outcome)
    }

    /// Kill a job's process group; returns its last output.
    pub fn kill(
        &self,
        host: &ExecHost,
        session: &str,
        id: &str,
        call_id: &str,
    ) -> Result<Outcome, ExecError> {
        let (process, from) = self.get(session, id)?;
        let net = self.net_of(id);
        process.kill(State::Killed);
        let (mut outcome, _) =
            process.outcome(from, host.config.output_budget, &host.workspace, call_id);
        outcome.job_id = Some(id.to_string());
        show_net(&mut outcome, net.as_ref());
        self.lock().remove(id);
        Ok(outcome)
    }

    /// Kill every job of `session` (when a session is forgotten).
    pub fn kill_session(&self, session: &str) {
        let doomed: Vec<Arc<Process>> = {
            let mut jobs = self.lock();
            let ids: Vec<String> = jobs
                .iter()
                .filter(|(_, j)| j.session == session)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter()
                .filter_map(|id| jobs.remove(id))
                .map(|j| j.process)
                .collect()
        };
        for p in doomed {
            p.kill(State::Killed);
        }
    }
}

/// The job's new connections in `data.network` (for a job that ended, all of them).
fn show_net(outcome: &mut Outcome, net: Option<&JobNetLog>) {
    let Some(news) = net.and_then(|n| n.news(outcome.state != State::Running)) else {
        return;
    };
    match &mut outcome.data {
        Value::Object(map) => {
            map.insert("network".into(), news);
        }
        data if data.is_null() => *data = json!({ "network": news }),
        _ => {}
    }
}

impl Drop for JobTable {
    fn drop(&mut self) {
        let jobs = std::mem::take(&mut *self.lock());
        for (_, j) in jobs {
            if !j.process.finished() {
                j.process.kill(State::Killed);
            }
        }
    }
}
