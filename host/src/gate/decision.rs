//! What the ladder decides, typed: the stage that decided ([`Stage`]), the verdict
//! ([`Verdict`]), what it was based on ([`Decision`]) and, for a refusal, its code ([`Code`]).
//! Each `as_str` gives the word the audit log and the observation carry.

use crate::tools::Observation;

/// A stage of the ladder (or of the checks around it) as the audit names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The tool does not exist or could not be loaded.
    Tool,
    /// The input does not fit the tool's schema.
    Schema,
    /// A path (or a plugin's granted path) is outside the scope.
    Scope,
    /// The call's key could not be computed (a fetch URL that cannot be read).
    Key,
    /// The mode.
    Mode,
    /// The policy's rules, the banned list and the confinement requirement.
    Rules,
    /// The PreToolUse hooks.
    Hooks,
    /// Read-only tools inside the scope need no grant.
    NoPermission,
    /// Read-before-write.
    Staleness,
    /// The project's allow rules and grants, with the ceiling.
    ProjectAllowlist,
    /// `--grant`, `--allow-write` and this session's grants.
    SessionAllowlist,
    /// The approval prompt (and what follows the answer).
    Ask,
}

impl Stage {
    /// The stage as the audit spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stage::Tool => "tool",
            Stage::Schema => "schema",
            Stage::Scope => "scope",
            Stage::Key => "key",
            Stage::Mode => "mode",
            Stage::Rules => "rules",
            Stage::Hooks => "hooks",
            Stage::NoPermission => "no-permission",
            Stage::Staleness => "staleness",
            Stage::ProjectAllowlist => "project-allowlist",
            Stage::SessionAllowlist => "session-allowlist",
            Stage::Ask => "ask",
        }
    }
}

/// What the ladder decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The call runs.
    Allow,
    /// The call is refused by a rule, a hook, the mode, the scope or the user.
    Deny,
    /// The call cannot be decided or run as given.
    Error,
    /// The caller withdrew the call before it started.
    Cancelled,
}

impl Verdict {
    /// The verdict as the audit spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Error => "error",
            Verdict::Cancelled => "cancelled",
        }
    }
}

/// A ladder decision and what it is based on, as audited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) verdict: Verdict,
    pub(crate) stage: Stage,
    /// What decided it, in the audit's words (`rule at policy.toml:3`, `user: once`, …).
    pub(crate) source: String,
    /// The pattern of the rule that decided, when a rule did.
    pub(crate) rule: Option<String>,
}

impl Decision {
    pub(crate) fn new(verdict: Verdict, stage: Stage, source: String) -> Self {
        Decision {
            verdict,
            stage,
            source,
            rule: None,
        }
    }

    pub(crate) fn allow(stage: Stage, source: String) -> Self {
        Decision::new(Verdict::Allow, stage, source)
    }

    pub(crate) fn with_rule(mut self, rule: &str) -> Self {
        self.rule = Some(rule.to_string());
        self
    }
}

/// A call ended before the guest ran: the decision as audited and the observation returned.
pub(crate) type Refusal = (Decision, Observation);

/// The code of an `error` observation the gate makes (`error_code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    UnknownTool,
    ToolUnavailable,
    PluginRefused,
    Schema,
    BadUrl,
    NotADirectory,
    Changed,
    GrantsFile,
    CeilingViolation,
    IsDirectory,
    Stale,
    NotRead,
    /// The state database could not be read or written.
    State,
    Cancelled,
    Limit,
    Crashed,
    Scope,
    Io,
    PluginGrant,
    /// A language server could not compute or make a change.
    Lsp,
    /// A file that is not a regular file (the code comes from [`crate::fsutil::OpenError`]).
    Open(&'static str),
}

impl Code {
    /// The code as the observation carries it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Code::UnknownTool => "unknown-tool",
            Code::ToolUnavailable => "tool-unavailable",
            Code::PluginRefused => "plugin-refused",
            Code::Schema => "schema",
            Code::BadUrl => "bad-url",
            Code::NotADirectory => "not-a-directory",
            Code::Changed => "changed",
            Code::GrantsFile => "grants-file",
            Code::CeilingViolation => "ceiling-violation",
            Code::IsDirectory => "is-directory",
            Code::Stale => "stale",
            Code::NotRead => "not-read",
            Code::State => "state",
            Code::Cancelled => "cancelled",
            Code::Limit => "limit",
            Code::Crashed => "crashed",
            Code::Scope => "scope",
            Code::Io => "io",
            Code::PluginGrant => "plugin-grant",
            Code::Lsp => "lsp",
            Code::Open(code) => code,
        }
    }
}
