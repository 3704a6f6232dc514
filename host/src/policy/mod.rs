//! Policy files: the mode, allow/ask/deny rules with their own examples, extra secrets,
//! limits and hooks. A policy that does not parse or whose examples fail stops loading with
//! the file and line; it never falls back to an empty policy.
//!
//! The policy's types are here; `layer.rs` reads and checks one file, `stack.rs` stacks
//! layers into a policy, `load.rs` finds and loads the layers.

mod credentials;
pub mod grants;
pub mod hooks;
mod layer;
mod load;
mod lsp;
mod network;
mod plugins;
mod problems;
mod shell_network;
mod sources;
mod stack;
pub use credentials::{CredentialSource, CredentialSpec};
pub use layer::Layer;
pub use lsp::{LspLanguage, LspPolicy};
pub use network::NetworkPolicy;
pub use plugins::PluginsPolicy;
pub use shell_network::NetworkCeiling;
pub use sources::{managed_policy_path, LayerSources, WorkspaceLayer};

pub mod trust;

use crate::key::{CallKey, KeyPattern, RuleDecision};
use crate::sandbox::Limits;
use hooks::HookSpec;
use serde::{Deserialize, Serialize};
#[cfg(test)]
use stack::Stack;
use std::path::PathBuf;

/// The presets shipped in `policies/`, carried in the binary.
pub const PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../../policies/default.toml")),
    ("ci", include_str!("../../../policies/ci.toml")),
    ("readonly", include_str!("../../../policies/readonly.toml")),
];

/// The permission mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read-only: write, exec and network tools are hidden and blocked without a prompt.
    Safe,
    /// Ask for anything not allowed by a rule or a grant.
    #[default]
    Ask,
    /// Approve automatically; scope, deny/ask rules, hooks and banned commands still apply.
    AllowAll,
}

impl Mode {
    /// The name used in policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Safe => "safe",
            Mode::Ask => "ask",
            Mode::AllowAll => "allow-all",
        }
    }

    /// Parse a mode name.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "safe" => Some(Mode::Safe),
            "ask" => Some(Mode::Ask),
            "allow-all" => Some(Mode::AllowAll),
            _ => None,
        }
    }
}

/// A rule with where it came from.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The compiled key pattern.
    pub pattern: KeyPattern,
    /// What it decides.
    pub decision: RuleDecision,
    /// Why, shown in denials.
    pub reason: Option<String>,
    /// `file:line` of the rule.
    pub source: String,
}

/// A problem found in a policy or grants file, with its location.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// `file:line` (or the file alone).
    pub location: String,
    /// What is wrong and how to fix it.
    pub message: String,
    /// `error` stops loading; `warning` is reported by `policy check` only.
    pub severity: &'static str,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.location, self.severity, self.message)
    }
}

/// A loaded policy (the default: nothing set yet, what stacking starts from).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Where it came from (a path, or `preset:NAME`).
    pub origin: String,
    /// The mode at load time (the gate keeps the live value).
    pub mode: Mode,
    /// Rules in file order.
    pub rules: Vec<Rule>,
    /// Secret patterns added to the defaults.
    pub secrets: Vec<String>,
    /// Per-call limits.
    pub limits: Limits,
    /// PreToolUse hooks.
    pub hooks: Vec<HookSpec>,
    /// Whether shell commands must run confined (for the shell tool).
    pub require_confinement: bool,
    /// The shell's settings besides confinement (`[shell]`).
    pub shell: ShellPolicy,
    /// Outgoing HTTP for `fetch` and plugins (`[network]`).
    pub network: NetworkPolicy,
    /// `serve --http` session limits (`[http]`).
    pub http: HttpPolicy,
    /// Where the audit is exported (`[telemetry]`, else `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub telemetry: TelemetryPolicy,
    /// Signatures of plugins from registries (`[plugins]`).
    pub plugins: PluginsPolicy,
    /// Secrets the host brokers (`[[credentials]]`; never from a workspace's policy).
    pub credentials: Vec<CredentialSpec>,
    /// The language servers (`[lsp]`; an untrusted workspace's `command` never applies).
    pub lsp: LspPolicy,
    /// The loosest mode the managed layer allows (the gate never goes above it).
    pub mode_ceiling: Option<Mode>,
    /// What each layer applied, lowest first.
    pub layers: Vec<LayerReport>,
    /// What was not applied (an untrusted workspace's loosening parts), each named once.
    pub ignored: Vec<Ignored>,
}

/// `[shell]` settings: they can only make the shell stricter, except `network` and `env`,
/// which give commands what the policy names (`network`: see `shell_network.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShellPolicy {
    /// `[shell] network = true`: the whole network, no proxy (the explicit escape hatch).
    pub network: bool,
    /// `[shell] network = [...]`: hosts commands may reach through the egress proxy.
    pub network_allow: Vec<String>,
    /// `[shell] network_deny`: hosts refused even when `network_allow` names them.
    pub network_deny: Vec<String>,
    /// `[shell] network_mode = "limited"`: only GET/HEAD/OPTIONS on plain HTTP.
    pub network_limited: bool,
    /// The managed layer's `[shell] network` (`false` or a list): a ceiling no rule, grant,
    /// answer or mode reaches past (`shell_network.rs`).
    pub network_ceiling: Option<NetworkCeiling>,
    /// Environment variables passed through besides the built-in allowlist.
    pub env: Vec<String>,
    /// Programs banned besides the built-in list.
    pub banned: Vec<String>,
    /// Seconds after which a running command becomes a background job (default 60).
    pub auto_background_secs: Option<u64>,
    /// Most processes and threads one command may have at once (a pids cgroup, where the
    /// host can make one; default [`crate::exec::confine::DEFAULT_MAX_PROCESSES`]).
    pub max_processes: Option<u32>,
    /// Host paths outside the workspace mounted read-only into commands' views.
    pub read: Vec<std::path::PathBuf>,
    /// Host paths outside the workspace mounted writable into normal commands' views.
    pub write: Vec<std::path::PathBuf>,
}

pub use crate::telemetry::TelemetryPolicy;

/// `[http]` settings for `serve --http` (`None`: the server's defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpPolicy {
    /// Most live sessions at once.
    pub max_sessions: Option<u64>,
    /// Seconds a session may stay idle before it expires.
    pub session_idle_secs: Option<u64>,
    /// Most open connections at once (HTTP/1.1 carries one request at a time per connection,
    /// so this bounds the calls in flight).
    pub max_connections: Option<u64>,
}

/// `[shell]` as written (read by `layer.rs`, `shell_network.rs` and `stack.rs`).
#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct ShellFile {
    require_confinement: Option<bool>,
    network: Option<shell_network::NetworkFile>,
    network_deny: Option<Vec<String>>,
    network_mode: Option<toml::Spanned<String>>,
    env: Option<Vec<String>>,
    #[serde(default)]
    banned: Vec<String>,
    auto_background_secs: Option<u64>,
    max_processes: Option<u32>,
    read: Option<Vec<std::path::PathBuf>>,
    write: Option<Vec<std::path::PathBuf>>,
}

/// Which layer a policy file is, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerKind {
    /// The shipped `default` preset.
    Builtin,
    /// `$XDG_CONFIG_HOME/toolgate/policy.toml`.
    User,
    /// The workspace's own `.toolgate/policy.toml`: untrusted until `toolgate trust`.
    Workspace,
    /// `--policy`, `--preset` and `--mode` on the command line.
    CommandLine,
    /// `/etc/toolgate/managed.toml` or `$TOOLGATE_MANAGED_POLICY`: a ceiling nothing loosens.
    Managed,
}

impl LayerKind {
    /// The name printed by `policy check`.
    pub fn as_str(self) -> &'static str {
        match self {
            LayerKind::Builtin => "built-in",
            LayerKind::User => "user",
            LayerKind::Workspace => "workspace",
            LayerKind::CommandLine => "command line",
            LayerKind::Managed => "managed",
        }
    }
}

/// What to do about ignored parts, shown with them.
pub const TRUST_HINT: &str = "the workspace's own policy, grants and plugins are untrusted until you review them: run `toolgate trust` in the workspace (CI: pass --trust-workspace)";

/// A part of a layer that was not applied, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ignored {
    /// The file (or `--flag`) it is in.
    pub file: String,
    /// The setting, as written (`mode = "allow-all"`, `allow rule `write:**``, `hook `x``).
    pub part: String,
    /// Why it was not applied, in plain words.
    pub reason: String,
}

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} ignored: {}", self.file, self.part, self.reason)
    }
}

/// What one layer contributed, for `policy check`.
#[derive(Clone, Debug, Serialize)]
pub struct LayerReport {
    /// Which layer.
    pub kind: LayerKind,
    /// Its file or flag.
    pub origin: String,
    /// Whether its loosening parts apply.
    pub trusted: bool,
    /// The settings it applied, as written.
    pub applied: Vec<String>,
}

fn rank(m: Mode) -> u8 {
    match m {
        Mode::Safe => 0,
        Mode::Ask => 1,
        Mode::AllowAll => 2,
    }
}

impl Policy {
    /// Clamp `mode` to the managed ceiling.
    pub fn clamp_mode(&self, mode: Mode) -> Mode {
        match self.mode_ceiling {
            Some(c) if rank(mode) > rank(c) => c,
            _ => mode,
        }
    }

    /// The strictest rule matching `key`, if any (deny > ask > allow; the first of equals).
    pub fn strictest(&self, key: &CallKey) -> Option<&Rule> {
        let mut best: Option<&Rule> = None;
        for rule in &self.rules {
            if rule.pattern.matches(key) && best.is_none_or(|b| rule.decision > b.decision) {
                best = Some(rule);
            }
        }
        best
    }
}

/// The error that stops loading: every problem on its own line, with its location.
pub fn problems_error(problems: &[Problem]) -> crate::Error {
    crate::Error::Policy(
        problems
            .iter()
            .map(Problem::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Where a policy comes from when chosen explicitly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicySource {
    /// A policy file.
    File(PathBuf),
    /// A shipped preset by name.
    Preset(String),
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
