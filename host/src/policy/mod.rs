//! Policy files: the mode, allow/ask/deny rules with their own examples, extra secrets,
//! limits and hooks. A policy that does not parse or whose examples fail stops loading with
//! the file and line; it never falls back to an empty policy.

pub mod grants;
pub mod rules;

use crate::gate::hooks::HookSpec;
use crate::sandbox::Limits;
use rules::{CallKey, KeyPattern, RuleDecision};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The presets shipped in `policies/`, carried in the binary.
pub const PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../../policies/default.toml")),
    ("ci", include_str!("../../../policies/ci.toml")),
    ("readonly", include_str!("../../../policies/readonly.toml")),
];

/// The permission mode (SPEC §5 stage 3).
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

/// A loaded policy.
#[derive(Clone, Debug)]
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
}

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

/// `[shell]` settings: they can only make the shell stricter, except `network` and `env`,
/// which give commands what the policy names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShellPolicy {
    /// Run commands with the network (no fresh network namespace).
    pub network: bool,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    mode: Option<toml::Spanned<String>>,
    #[serde(default)]
    secrets: Vec<String>,
    limits: Option<LimitsFile>,
    #[serde(default)]
    rules: Vec<toml::Spanned<RuleFile>>,
    #[serde(default)]
    hooks: Vec<HookSpec>,
    shell: Option<ShellFile>,
    network: Option<NetworkFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkFile {
    #[serde(default)]
    allow_private: Vec<String>,
    max_response_bytes: Option<u64>,
    timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    timeout_ms: Option<u64>,
    memory_mb: Option<u64>,
    output_bytes: Option<u64>,
    result_bytes: Option<u64>,
    stamp_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellFile {
    #[serde(default)]
    require_confinement: bool,
    #[serde(default)]
    network: bool,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    banned: Vec<String>,
    auto_background_secs: Option<u64>,
    max_processes: Option<u32>,
    #[serde(default)]
    read: Vec<std::path::PathBuf>,
    #[serde(default)]
    write: Vec<std::path::PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    key: String,
    decision: RuleDecision,
    #[serde(rename = "match", default)]
    matches: Vec<String>,
    #[serde(default)]
    not_match: Vec<String>,
    reason: Option<String>,
}

impl Policy {
    /// Load a policy file. Any error (syntax, unknown field, bad pattern, failing example) is
    /// returned with its location; nothing is silently dropped.
    pub fn load(path: &Path) -> Result<Policy, Vec<Problem>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![Problem {
                location: path.display().to_string(),
                message: format!("cannot be read: {e}"),
                severity: "error",
            }]
        })?;
        Policy::parse(&path.display().to_string(), &text)
    }

    /// A shipped preset by name.
    pub fn preset(name: &str) -> Result<Policy, Vec<Problem>> {
        match PRESETS.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => Policy::parse(&format!("policies/{n}.toml"), text),
            None => Err(vec![Problem {
                location: format!("preset `{name}`"),
                message: format!(
                    "no such preset; the presets are {}",
                    PRESETS
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                severity: "error",
            }]),
        }
    }

    /// The policy for a workspace: `explicit` if given, else `.toolgate/policy.toml` if it
    /// exists, else the `default` preset.
    pub fn for_workspace(
        state_dir: &Path,
        explicit: Option<&PolicySource>,
    ) -> Result<Policy, Vec<Problem>> {
        match explicit {
            Some(PolicySource::File(p)) => Policy::load(p),
            Some(PolicySource::Preset(n)) => Policy::preset(n),
            None => {
                let file = state_dir.join("policy.toml");
                if file.exists() {
                    Policy::load(&file)
                } else {
                    Policy::preset("default")
                }
            }
        }
    }

    /// Parse policy text; `origin` names it in messages.
    pub fn parse(origin: &str, text: &str) -> Result<Policy, Vec<Problem>> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let at = |offset: usize| format!("{origin}:{}", line_of(offset));
        let file: PolicyFile = toml::from_str(text).map_err(|e| {
            let location = match e.span() {
                Some(span) => at(span.start),
                None => origin.to_string(),
            };
            vec![Problem {
                location,
                message: e.message().to_string(),
                severity: "error",
            }]
        })?;
        let mut problems = Vec::new();
        let mode = match &file.mode {
            None => Mode::default(),
            Some(m) => Mode::parse(m.get_ref()).unwrap_or_else(|| {
                problems.push(Problem {
                    location: at(m.span().start),
                    message: format!("unknown mode `{}`; use safe, ask or allow-all", m.get_ref()),
                    severity: "error",
                });
                Mode::Ask
            }),
        };
        let mut rules = Vec::new();
        for spanned in &file.rules {
            let location = at(spanned.span().start);
            let r = spanned.get_ref();
            let pattern = match KeyPattern::parse(&r.key) {
                Ok(p) => p,
                Err(message) => {
                    problems.push(Problem {
                        location,
                        message: format!("rule key {message}"),
                        severity: "error",
                    });
                    continue;
                }
            };
            for example in &r.matches {
                if !pattern.matches(&CallKey::parse(example)) {
                    problems.push(Problem {
                        location: location.clone(),
                        message: format!(
                            "rule `{}` does not match its own `match` example `{example}`",
                            r.key
                        ),
                        severity: "error",
                    });
                }
            }
            for example in &r.not_match {
                if pattern.matches(&CallKey::parse(example)) {
                    problems.push(Problem {
                        location: location.clone(),
                        message: format!(
                            "rule `{}` matches its own `not_match` example `{example}`",
                            r.key
                        ),
                        severity: "error",
                    });
                }
            }
            rules.push(Rule {
                pattern,
                decision: r.decision,
                reason: r.reason.clone(),
                source: location,
            });
        }
        for s in &file.secrets {
            if let Err(e) = globset::Glob::new(s) {
                problems.push(Problem {
                    location: origin.to_string(),
                    message: format!("secret pattern `{s}` is not a valid glob: {e}"),
                    severity: "error",
                });
            }
        }
        for h in &file.hooks {
            if h.command.is_empty() {
                problems.push(Problem {
                    location: origin.to_string(),
                    message: "a hook has an empty `command`".into(),
                    severity: "error",
                });
            }
        }
        let mut network = NetworkPolicy::default();
        if let Some(n) = &file.network {
            for text in &n.allow_private {
                match crate::sandbox::net::HostPattern::parse(text) {
                    Ok(p) => network.allow_private.push(p),
                    Err(message) => problems.push(Problem {
                        location: format!("{origin} [network] allow_private"),
                        message,
                        severity: "error",
                    }),
                }
            }
            if let Some(b) = n.max_response_bytes {
                network.max_response_bytes = b;
            }
            if let Some(ms) = n.timeout_ms {
                network.timeout = Duration::from_millis(ms);
            }
        }
        let mut limits = Limits::default();
        if let Some(l) = &file.limits {
            if let Some(ms) = l.timeout_ms {
                limits.timeout = Duration::from_millis(ms);
            }
            if let Some(mb) = l.memory_mb {
                limits.max_memory_bytes =
                    usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
            }
            if let Some(b) = l.output_bytes {
                limits.max_output_bytes = usize::try_from(b).unwrap_or(usize::MAX);
            }
            if let Some(b) = l.result_bytes {
                limits.max_result_bytes = usize::try_from(b).unwrap_or(usize::MAX);
            }
            if let Some(b) = l.stamp_bytes {
                limits.stamp_bytes = b;
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Policy {
            origin: origin.to_string(),
            mode,
            rules,
            secrets: file.secrets,
            limits,
            hooks: file.hooks,
            require_confinement: file
                .shell
                .as_ref()
                .map(|s| s.require_confinement)
                .unwrap_or(false),
            shell: file
                .shell
                .map(|s| ShellPolicy {
                    network: s.network,
                    env: s.env,
                    banned: s.banned,
                    auto_background_secs: s.auto_background_secs,
                    max_processes: s.max_processes,
                    read: s.read,
                    write: s.write,
                })
                .unwrap_or_default(),
            network,
        })
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn presets_load() {
        for (name, _) in PRESETS {
            Policy::preset(name).unwrap();
        }
    }

    #[test]
    fn syntax_error_names_the_line() {
        let err = Policy::parse("p.toml", "mode = \"ask\"\n\n[[rules]\nkey = 1\n").unwrap_err();
        assert_eq!(err[0].location, "p.toml:3", "{err:?}");
    }

    #[test]
    fn failing_example_names_the_rule_line() {
        let text = "mode = \"ask\"\n[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\nmatch = [\"write:docs/\"]\n";
        let err = Policy::parse("p.toml", text).unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(err[0].location, "p.toml:2"); // the rule's `[[rules]]` line
        assert!(err[0].message.contains("write:docs/"), "{}", err[0].message);
    }

    #[test]
    fn unknown_fields_and_modes_are_errors() {
        assert!(Policy::parse("p", "mood = \"ask\"").is_err());
        assert!(Policy::parse("p", "mode = \"yolo\"").is_err());
        assert!(Policy::parse("p", "[[rules]]\nkey = \"write\"\ndecision = \"maybe\"").is_err());
    }

    #[test]
    fn deny_beats_allow_on_the_same_path() {
        let text = "[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\n[[rules]]\nkey = \"write:src/secret/**\"\ndecision = \"deny\"\n";
        let p = Policy::parse("p", text).unwrap();
        let r = p
            .strictest(&CallKey::with_target("write", "src/secret/"))
            .unwrap();
        assert_eq!(r.decision, RuleDecision::Deny);
        let r = p
            .strictest(&CallKey::with_target("write", "src/other/"))
            .unwrap();
        assert_eq!(r.decision, RuleDecision::Allow);
    }
}
