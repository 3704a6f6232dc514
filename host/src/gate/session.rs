//! Per-session bookkeeping of a gate (the session recorded once in the state database, told once
//! what of the policy was ignored) and the ids of calls.

use super::Gate;
use crate::tools::Observation;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};

impl Gate {
    /// The first observation of each session names what of the policy was ignored.
    pub(super) fn tell_ignored(&self, session: &str, o: &mut Observation) {
        let mut told = self.told_ignored.lock().unwrap_or_else(|p| p.into_inner());
        // Computed only until a session has been told: later calls pay one set lookup.
        if told.contains(session) {
            return;
        }
        let ignored = self.policy_ignored();
        if ignored.is_empty() {
            return;
        }
        told.insert(session.to_string());
        drop(told);
        if !o.data.is_object() {
            o.data = json!({});
        }
        if let Value::Object(map) = &mut o.data {
            map.insert(
                "policy_ignored".into(),
                json!({
                    "parts": ignored,
                    "hint": crate::policy::TRUST_HINT,
                }),
            );
        }
    }

    pub(super) fn touch_session(&self, session: &str) {
        let mut known = self
            .known_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !known.contains(session) && self.state.touch_session(session).is_ok() {
            known.insert(session.to_string());
        }
    }
}

pub(super) fn new_call_id() -> String {
    unique_id("call")
}

/// A process-unique, unguessable id: `<prefix>-<16 hex digits>`.
pub fn unique_id(prefix: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{prefix}-{:016x}", h.finish())
}
