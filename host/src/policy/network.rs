//! `[network]`: budgets for every outgoing HTTP request of `fetch`, `download` and plugins,
//! and the private addresses that may be reached at all (how layers stack them: `Stack::push`).

use serde::Deserialize;
use std::time::Duration;

/// `[network]` settings: budgets for every request, and the private addresses that may be
/// reached at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// Hosts or addresses that may resolve to loopback, private or link-local addresses. Empty
    /// by default: no tool reaches the user's own network unless the policy names it.
    pub allow_private: Vec<crate::sandbox::net::HostPattern>,
    /// Most response-body bytes one request may deliver (default 10 MiB).
    pub max_response_bytes: u64,
    /// Bound on connecting and waiting for a response head (default 30 s).
    pub timeout: Duration,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        NetworkPolicy {
            allow_private: Vec::new(),
            max_response_bytes: 10 << 20,
            timeout: Duration::from_secs(30),
        }
    }
}

/// `[network]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct NetworkFile {
    pub(super) allow_private: Option<Vec<String>>,
    pub(super) max_response_bytes: Option<u64>,
    pub(super) timeout_ms: Option<u64>,
}
