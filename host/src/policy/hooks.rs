//! The `[[hooks]]` a policy configures: PreToolUse commands the gate runs before a call
//! (see `gate::hooks` for how they run and what their answers mean).

use serde::{Deserialize, Serialize};

/// Default per-hook timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// One configured hook (deserialized from the policy's `[[hooks]]` tables).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    /// argv: program and arguments; run without a shell, cwd = workspace root.
    pub command: Vec<String>,
    /// Tools it applies to (exact names; empty or absent = all tools).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Per-hook timeout in ms (default 10_000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Let the call through when this hook crashes or times out (default false: fail closed).
    #[serde(default)]
    pub fail_open: bool,
}

impl HookSpec {
    /// The hook's name in messages and the audit: its command joined with spaces.
    pub fn name(&self) -> String {
        self.command.join(" ")
    }

    /// Whether this hook runs for `tool`.
    pub fn applies_to(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|t| t == tool)
    }
}
