//! The running language servers of one workspace: one per language, started on first use
//! and started again when it died.

use super::Server;
use crate::exec::ExecHost;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One server per language for a workspace, started on first use and restarted when dead.
pub struct Servers {
    running: Mutex<HashMap<String, Arc<Server>>>,
}

impl Default for Servers {
    fn default() -> Self {
        Servers {
            running: Mutex::new(HashMap::new()),
        }
    }
}

impl Servers {
    /// The running server for `language`, started with `argv` if none runs (or it died);
    /// `restarted` says whether a dead one was replaced.
    pub fn get(
        &self,
        host: &ExecHost,
        language: &str,
        argv: &[String],
        init_timeout: Duration,
    ) -> Result<(Arc<Server>, bool), String> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut restarted = false;
        if let Some(s) = running.get(language) {
            if s.alive() && s.rules_current() {
                return Ok((s.clone(), false));
            }
            restarted = true;
            if let Some(s) = running.remove(language) {
                s.stop();
            }
        }
        let s = Arc::new(Server::start(host, argv, init_timeout)?);
        running.insert(language.to_string(), s.clone());
        Ok((s, restarted))
    }

    /// Stop the server for `language` (the next use starts a new one); whether one ran.
    pub fn restart(&self, language: &str) -> bool {
        let s = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(language);
        let ran = s.is_some();
        if let Some(s) = s {
            s.stop();
        }
        ran
    }

    /// The running server for `language`, if one runs (none is started).
    pub fn peek(&self, language: &str) -> Option<Arc<Server>> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(language)
            .filter(|s| s.alive())
            .cloned()
    }

    /// The languages whose server runs.
    pub fn running(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, s)| s.alive())
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }
}
