//! Background jobs: commands started with `run_in_background`, or still running after the
//! auto-background threshold. Each belongs to the session that started it; `job_output` shows
//! what is new since the last look; `job_kill` kills the whole process group. Jobs die with
//! the gate (the table kills every group when it is dropped).

use super::run::{Process, State};
use super::{ExecError, ExecHost, Outcome};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Job {
    session: String,
    process: Arc<Process>,
    /// Bytes of stdout / stderr already shown.
    shown: (usize, usize),
    reads: u64,
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
            },
        );
        id
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
        let (mut outcome, shown) =
            process.outcome(from, host.config.output_budget, &host.workspace, call_id);
        outcome.job_id = Some(id.to_string());
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
        process.kill(State::Killed);
        let (mut outcome, _) =
            process.outcome(from, host.config.output_budget, &host.workspace, call_id);
        outcome.job_id = Some(id.to_string());
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
