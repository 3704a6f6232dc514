//! Policy files: the mode, allow/ask/deny rules with their own examples, extra secrets,
//! limits and hooks. A policy that does not parse or whose examples fail stops loading with
//! the file and line; it never falls back to an empty policy.

mod credentials;
pub mod grants;
pub mod hooks;
mod lsp;
mod network;
mod plugins;
mod problems;
mod shell_network;
mod sources;
pub use credentials::{CredentialSource, CredentialSpec};
pub use lsp::{LspLanguage, LspPolicy};
pub use network::NetworkPolicy;
pub use plugins::PluginsPolicy;
pub use sources::{managed_policy_path, LayerSources, WorkspaceLayer};

pub mod trust;

use crate::key::{CallKey, KeyPattern, RuleDecision};
use crate::sandbox::Limits;
use hooks::HookSpec;
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
    network: Option<network::NetworkFile>,
    http: Option<HttpFile>,
    telemetry: Option<TelemetryFile>,
    plugins: Option<plugins::PluginsFile>,
    #[serde(default)]
    credentials: Vec<credentials::CredentialFile>,
    lsp: Option<lsp::LspFile>,
}

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct TelemetryFile {
    otlp_endpoint: Option<toml::Spanned<String>>,
}

pub use crate::telemetry::TelemetryPolicy;

#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    max_sessions: Option<u64>,
    session_idle_secs: Option<u64>,
    max_connections: Option<u64>,
}

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

#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    timeout_ms: Option<u64>,
    memory_mb: Option<u64>,
    output_bytes: Option<u64>,
    result_bytes: Option<u64>,
    stamp_bytes: Option<u64>,
    ignore_patterns: Option<u64>,
    ignore_bytes: Option<u64>,
}

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

/// Which layer a policy file is (SPEC §10), lowest first.
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

/// One parsed policy file, every setting optional so layers can be stacked.
#[derive(Clone, Debug)]
pub struct Layer {
    /// Where it came from.
    pub origin: String,
    /// Which layer it is.
    pub kind: LayerKind,
    mode: Option<Mode>,
    rules: Vec<Rule>,
    secrets: Vec<String>,
    limits: LimitsFile,
    hooks: Vec<HookSpec>,
    shell: ShellFile,
    allow_private: Option<Vec<(String, crate::sandbox::net::HostPattern)>>,
    max_response_bytes: Option<u64>,
    net_timeout_ms: Option<u64>,
    http: HttpFile,
    otlp_endpoint: Option<String>,
    plugins: plugins::PluginsFile,
    credentials: Vec<CredentialSpec>,
    lsp: lsp::LspFile,
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

impl Layer {
    /// Parse one policy file's text as a layer.
    pub fn parse(origin: &str, kind: LayerKind, text: &str) -> Result<Layer, Vec<Problem>> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let at = |offset: usize| format!("{origin}:{}", line_of(offset));
        let file: PolicyFile = toml::from_str(text)
            .map_err(|_| problems::read_problems::<PolicyFile>(origin, text))?;
        let mut problems = Vec::new();
        let mode = file.mode.as_ref().map(|m| {
            Mode::parse(m.get_ref()).unwrap_or_else(|| {
                problems.push(Problem {
                    location: at(m.span().start),
                    message: format!("unknown mode `{}`; use safe, ask or allow-all", m.get_ref()),
                    severity: "error",
                });
                Mode::Ask
            })
        });
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
        let shell = file.shell.unwrap_or_default();
        shell_network::check(&shell, origin, &at, &mut problems);
        let network = file.network.unwrap_or_default();
        let allow_private = network.allow_private.map(|texts| {
            texts
                .into_iter()
                .filter_map(
                    |text| match crate::sandbox::net::HostPattern::parse(&text) {
                        Ok(p) => Some((text, p)),
                        Err(message) => {
                            problems.push(Problem {
                                location: format!("{origin} [network] allow_private"),
                                message,
                                severity: "error",
                            });
                            None
                        }
                    },
                )
                .collect()
        });
        let otlp_endpoint = file.telemetry.and_then(|t| t.otlp_endpoint).and_then(|ep| {
            match crate::telemetry::check_endpoint(ep.get_ref()) {
                Ok(base) => Some(base),
                Err(message) => {
                    problems.push(Problem {
                        location: at(ep.span().start),
                        message: format!("[telemetry] otlp_endpoint: {message}"),
                        severity: "error",
                    });
                    None
                }
            }
        });
        let credentials = credentials::check(file.credentials, origin, &mut problems);
        let lsp = lsp::check(file.lsp, &at, &mut problems);
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Layer {
            origin: origin.to_string(),
            kind,
            mode,
            rules,
            secrets: file.secrets,
            limits: file.limits.unwrap_or_default(),
            hooks: file.hooks,
            shell,
            allow_private,
            max_response_bytes: network.max_response_bytes,
            net_timeout_ms: network.timeout_ms,
            http: file.http.unwrap_or_default(),
            otlp_endpoint,
            plugins: plugins::resolve(file.plugins.unwrap_or_default(), origin),
            credentials,
            lsp,
        })
    }

    /// Load a layer from a file (read as host state: a regular file, no symlink).
    pub fn load(path: &Path, kind: LayerKind) -> Result<Option<Layer>, Vec<Problem>> {
        let origin = path.display().to_string();
        let bytes = trust::read_state_file(path).map_err(|message| {
            vec![Problem {
                location: origin.clone(),
                message: message.replacen(&format!("{origin} "), "", 1),
                severity: "error",
            }]
        })?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let text = String::from_utf8(bytes).map_err(|_| {
            vec![Problem {
                location: origin.clone(),
                message: "is not UTF-8 text".into(),
                severity: "error",
            }]
        })?;
        Layer::parse(&origin, kind, &text).map(Some)
    }

    /// A layer holding only a mode (`--mode`).
    pub fn mode_only(origin: &str, kind: LayerKind, mode: Mode) -> Layer {
        Layer {
            origin: origin.to_string(),
            kind,
            mode: Some(mode),
            rules: Vec::new(),
            secrets: Vec::new(),
            limits: LimitsFile::default(),
            hooks: Vec::new(),
            shell: ShellFile::default(),
            allow_private: None,
            max_response_bytes: None,
            net_timeout_ms: None,
            http: HttpFile::default(),
            otlp_endpoint: None,
            plugins: plugins::PluginsFile::default(),
            credentials: Vec::new(),
            lsp: lsp::LspFile::default(),
        }
    }
}

/// Stacks layers into one policy, noting what each applied and what was ignored.
struct Stack {
    policy: Policy,
    allow_private_text: Vec<String>,
    reports: Vec<LayerReport>,
    ignored: Vec<Ignored>,
}

impl Stack {
    fn new() -> Self {
        Stack {
            policy: Policy::default(),
            allow_private_text: Vec::new(),
            reports: Vec::new(),
            ignored: Vec::new(),
        }
    }

    /// Apply `layer`. Untrusted, only what makes the policy stricter applies; managed, every
    /// value it sets is a ceiling for what the layers below chose.
    fn push(&mut self, layer: &Layer, trusted: bool) {
        let strict_only = !trusted;
        let ceiling = layer.kind == LayerKind::Managed;
        let mut applied = Vec::new();
        let mut ignored = Vec::new();
        let file = layer.origin.clone();
        let mut ignore = |part: String, reason: String| {
            ignored.push(Ignored {
                file: file.clone(),
                part,
                reason,
            })
        };
        let p = &mut self.policy;

        if let Some(m) = layer.mode {
            let part = format!("mode = \"{}\"", m.as_str());
            if ceiling {
                if rank(m) < rank(p.mode) {
                    p.mode = m;
                }
                p.mode_ceiling = Some(m);
                applied.push(format!("{part} (no layer may be looser)"));
            } else if strict_only && rank(m) > rank(p.mode) {
                ignore(part, format!("looser than `{}` below it", p.mode.as_str()));
            } else {
                p.mode = m;
                applied.push(part);
            }
        }
        for r in &layer.rules {
            let part = format!(
                "{} rule `{}` ({})",
                r.decision.as_str(),
                r.pattern.as_str(),
                r.source
            );
            if strict_only && r.decision == RuleDecision::Allow {
                ignore(part, "an allow rule loosens the policy".into());
            } else {
                p.rules.push(r.clone());
                applied.push(part);
            }
        }
        for s in &layer.secrets {
            p.secrets.push(s.clone());
            applied.push(format!("secret `{s}`"));
        }
        for h in &layer.hooks {
            let part = format!("hook `{}`", h.command.join(" "));
            if strict_only {
                ignore(
                    part,
                    "hooks run programs on this machine; an untrusted layer's never run".into(),
                );
            } else {
                p.hooks.push(h.clone());
                applied.push(part);
            }
        }

        // Numbers where lower is stricter.
        let l = &layer.limits;
        let mut lower = |part: &str, new: Option<u64>, cur: u64, set: &mut dyn FnMut(u64)| {
            let Some(v) = new else { return };
            let text = format!("{part} = {v}");
            if ceiling {
                set(v.min(cur));
                applied.push(format!("{text} (a ceiling)"));
            } else if strict_only && v > cur {
                ignore(text, format!("above the {cur} below it"));
            } else {
                set(v);
                applied.push(text);
            }
        };
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let lim = &mut p.limits;
        let cur = ms(lim.timeout);
        lower("[limits] timeout_ms", l.timeout_ms, cur, &mut |v| {
            lim.timeout = Duration::from_millis(v)
        });
        let cur = (lim.max_memory_bytes >> 20) as u64;
        lower("[limits] memory_mb", l.memory_mb, cur, &mut |v| {
            lim.max_memory_bytes = usize::try_from(v.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
        });
        let cur = lim.max_output_bytes as u64;
        lower("[limits] output_bytes", l.output_bytes, cur, &mut |v| {
            lim.max_output_bytes = usize::try_from(v).unwrap_or(usize::MAX)
        });
        let cur = lim.max_result_bytes as u64;
        lower("[limits] result_bytes", l.result_bytes, cur, &mut |v| {
            lim.max_result_bytes = usize::try_from(v).unwrap_or(usize::MAX)
        });
        let cur = lim.stamp_bytes;
        lower("[limits] stamp_bytes", l.stamp_bytes, cur, &mut |v| {
            lim.stamp_bytes = v
        });
        let cur = lim.ignore_patterns as u64;
        lower(
            "[limits] ignore_patterns",
            l.ignore_patterns,
            cur,
            &mut |v| lim.ignore_patterns = usize::try_from(v).unwrap_or(usize::MAX),
        );
        let cur = lim.ignore_bytes as u64;
        lower("[limits] ignore_bytes", l.ignore_bytes, cur, &mut |v| {
            lim.ignore_bytes = usize::try_from(v).unwrap_or(usize::MAX)
        });
        let sh = &layer.shell;
        let cur = p.shell.auto_background_secs.unwrap_or(60);
        let slot = &mut p.shell.auto_background_secs;
        lower(
            "[shell] auto_background_secs",
            sh.auto_background_secs,
            cur,
            &mut |v| *slot = Some(v),
        );
        let cur = u64::from(
            p.shell
                .max_processes
                .unwrap_or(crate::exec::confine::DEFAULT_MAX_PROCESSES),
        );
        let slot = &mut p.shell.max_processes;
        lower(
            "[shell] max_processes",
            sh.max_processes.map(u64::from),
            cur,
            &mut |v| *slot = Some(u32::try_from(v).unwrap_or(u32::MAX)),
        );
        let cur = p.network.max_response_bytes;
        let slot = &mut p.network.max_response_bytes;
        lower(
            "[network] max_response_bytes",
            layer.max_response_bytes,
            cur,
            &mut |v| *slot = v,
        );
        let cur = p.http.max_sessions.unwrap_or(256);
        let slot = &mut p.http.max_sessions;
        lower(
            "[http] max_sessions",
            layer.http.max_sessions,
            cur,
            &mut |v| *slot = Some(v),
        );
        let cur = p.http.max_connections.unwrap_or(64);
        let slot = &mut p.http.max_connections;
        lower(
            "[http] max_connections",
            layer.http.max_connections,
            cur,
            &mut |v| *slot = Some(v),
        );
        let cur = p.http.session_idle_secs.unwrap_or(1800);
        let slot = &mut p.http.session_idle_secs;
        lower(
            "[http] session_idle_secs",
            layer.http.session_idle_secs,
            cur,
            &mut |v| *slot = Some(v),
        );
        let cur = ms(p.network.timeout);
        let slot = &mut p.network.timeout;
        lower(
            "[network] timeout_ms",
            layer.net_timeout_ms,
            cur,
            &mut |v| *slot = Duration::from_millis(v),
        );

        if let Some(v) = sh.require_confinement {
            let part = format!("[shell] require_confinement = {v}");
            if v || (!strict_only && !ceiling) {
                p.require_confinement = v || (ceiling && p.require_confinement);
                applied.push(part);
            } else {
                ignore(part, "would drop a confinement requirement".into());
            }
        }
        for b in &sh.banned {
            p.shell.banned.push(b.clone());
            applied.push(format!("[shell] banned `{b}`"));
        }
        let how = (strict_only, ceiling);
        shell_network::apply(&mut p.shell, sh, how, &mut applied, &mut ignore);
        // Lists that give something: an untrusted layer adds nothing, a managed one is the
        // set the others may choose from.
        let mut grant_list = |part: &str, new: &Option<Vec<String>>, cur: &mut Vec<String>| {
            let Some(list) = new else { return };
            let text = format!("{part} = {list:?}");
            if ceiling {
                cur.retain(|x| list.contains(x));
                applied.push(format!("{text} (a ceiling)"));
            } else if strict_only {
                if !list.is_empty() {
                    ignore(text, "gives tools more than the layers below".into());
                }
            } else {
                for x in list {
                    if !cur.contains(x) {
                        cur.push(x.clone());
                    }
                }
                applied.push(text);
            }
        };
        grant_list("[shell] env", &sh.env, &mut p.shell.env);
        let as_text = |v: &Option<Vec<PathBuf>>| {
            v.as_ref()
                .map(|l| l.iter().map(|x| x.display().to_string()).collect())
        };
        let mut read: Vec<String> = p
            .shell
            .read
            .iter()
            .map(|x| x.display().to_string())
            .collect();
        grant_list("[shell] read", &as_text(&sh.read), &mut read);
        p.shell.read = read.into_iter().map(PathBuf::from).collect();
        let mut write: Vec<String> = p
            .shell
            .write
            .iter()
            .map(|x| x.display().to_string())
            .collect();
        grant_list("[shell] write", &as_text(&sh.write), &mut write);
        p.shell.write = write.into_iter().map(PathBuf::from).collect();
        let texts = layer
            .allow_private
            .as_ref()
            .map(|l| l.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>());
        let before = self.allow_private_text.clone();
        grant_list(
            "[network] allow_private",
            &texts,
            &mut self.allow_private_text,
        );
        if self.allow_private_text != before {
            let mut kept = Vec::new();
            for t in &self.allow_private_text {
                if let Some(i) = before.iter().position(|b| b == t) {
                    kept.push(p.network.allow_private[i].clone());
                } else if let Some((_, pat)) = layer
                    .allow_private
                    .as_ref()
                    .and_then(|l| l.iter().find(|(x, _)| x == t))
                {
                    kept.push(pat.clone());
                }
            }
            p.network.allow_private = kept;
        }

        // Where the audit goes: a repository that is not trusted must not redirect (or stop)
        // the export of what is done on this machine. The highest layer that sets it wins.
        if let Some(ep) = &layer.otlp_endpoint {
            let part = format!("[telemetry] otlp_endpoint = \"{ep}\"");
            if strict_only {
                ignore(
                    part,
                    "would send the audit of calls on this machine to an address the repository chose".into(),
                );
            } else {
                p.telemetry = TelemetryPolicy {
                    otlp_endpoint: Some(ep.clone()),
                    source: Some(layer.origin.clone()),
                };
                applied.push(if ceiling {
                    format!("{part} (no other layer may change it)")
                } else {
                    part
                });
            }
        }

        let (cur, kind) = (&mut p.credentials, layer.kind);
        credentials::apply(cur, &layer.credentials, kind, &mut applied, &mut ignore);
        let who = (layer.origin.as_str(), layer.kind, strict_only);
        plugins::apply(
            &mut p.plugins,
            &layer.plugins,
            who,
            &mut applied,
            &mut ignore,
        );
        lsp::apply(&mut p.lsp, &layer.lsp, who, &mut applied, &mut ignore);
        self.reports.push(LayerReport {
            kind: layer.kind,
            origin: layer.origin.clone(),
            trusted,
            applied,
        });
        self.ignored.extend(ignored);
    }

    fn finish(mut self) -> Policy {
        self.policy.origin = self
            .reports
            .iter()
            .filter(|r| r.kind != LayerKind::Builtin || self.reports.len() == 1)
            .map(|r| r.origin.clone())
            .collect::<Vec<_>>()
            .join(" + ");
        if self.policy.origin.is_empty() {
            self.policy.origin = "preset default".into();
        }
        self.policy.layers = self.reports;
        self.policy.ignored = self.ignored;
        self.policy
    }
}

impl Policy {
    /// Load one policy file as the only layer (trusted). Any error (syntax, unknown field, bad
    /// pattern, failing example) is returned with its location; nothing is silently dropped.
    pub fn load(path: &Path) -> Result<Policy, Vec<Problem>> {
        let layer = Layer::load(path, LayerKind::CommandLine)?.ok_or_else(|| {
            vec![Problem {
                location: path.display().to_string(),
                message: "cannot be read: it does not exist".into(),
                severity: "error",
            }]
        })?;
        let mut stack = Stack::new();
        stack.push(&layer, true);
        Ok(stack.finish())
    }

    fn preset_layer(name: &str, kind: LayerKind) -> Result<Layer, Vec<Problem>> {
        match PRESETS.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => Layer::parse(&format!("preset {n}"), kind, text),
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

    /// A shipped preset by name.
    pub fn preset(name: &str) -> Result<Policy, Vec<Problem>> {
        let layer = Policy::preset_layer(name, LayerKind::Builtin)?;
        let mut stack = Stack::new();
        stack.push(&layer, true);
        Ok(stack.finish())
    }

    /// Parse policy text as the only layer (trusted); `origin` names it in messages.
    pub fn parse(origin: &str, text: &str) -> Result<Policy, Vec<Problem>> {
        let layer = Layer::parse(origin, LayerKind::CommandLine, text)?;
        let mut stack = Stack::new();
        stack.push(&layer, true);
        Ok(stack.finish())
    }

    /// The workspace layer's file and its trust (nothing is loaded).
    pub fn workspace_layer(sources: &LayerSources) -> WorkspaceLayer {
        let path = sources
            .workspace
            .join(crate::workspace::STATE_DIR)
            .join(crate::workspace::layout::POLICY_FILE);
        let sha256 = trust::read_state_file(&path)
            .ok()
            .flatten()
            .map(|b| trust::sha256_hex(&b));
        let store = sources
            .user
            .as_ref()
            .map(|u| trust::TrustStore::new(&u.config));
        let recorded = store
            .as_ref()
            .and_then(|s| s.entry(&sources.workspace).ok().flatten());
        let trusted_by = if sources.trust_workspace {
            Some("--trust-workspace".to_string())
        } else {
            match (&recorded, &sha256, &store) {
                (Some(e), Some(h), Some(s)) if &e.policy_sha256 == h => {
                    Some(s.path().display().to_string())
                }
                _ => None,
            }
        };
        let changed_since_trust = trusted_by.is_none()
            && matches!((&recorded, &sha256), (Some(e), Some(h)) if &e.policy_sha256 != h);
        WorkspaceLayer {
            path,
            sha256,
            trusted_by,
            changed_since_trust,
        }
    }

    /// Every layer for a workspace, stacked: built-in < user < workspace (untrusted: only
    /// what is stricter) < command line, under the managed ceiling (SPEC §10).
    pub fn layered(sources: &LayerSources) -> Result<Policy, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut layers: Vec<(Layer, bool)> = Vec::new();
        let mut take = |r: Result<Option<Layer>, Vec<Problem>>, trusted: bool| match r {
            Ok(Some(l)) => layers.push((l, trusted)),
            Ok(None) => {}
            Err(p) => problems.extend(p),
        };
        take(
            Policy::preset_layer("default", LayerKind::Builtin).map(Some),
            true,
        );
        if let Some(u) = &sources.user {
            take(
                Layer::load(&u.config.join("policy.toml"), LayerKind::User),
                true,
            );
        }
        let ws = Policy::workspace_layer(sources);
        take(
            Layer::load(&ws.path, LayerKind::Workspace),
            ws.trusted_by.is_some(),
        );
        match &sources.cli {
            Some(PolicySource::File(p)) => match Layer::load(p, LayerKind::CommandLine) {
                Ok(None) => take(
                    Err(vec![Problem {
                        location: p.display().to_string(),
                        message: "cannot be read: it does not exist (--policy)".into(),
                        severity: "error",
                    }]),
                    true,
                ),
                other => take(other, true),
            },
            Some(PolicySource::Preset(n)) => take(
                Policy::preset_layer(n, LayerKind::CommandLine).map(Some),
                true,
            ),
            None => {}
        }
        if let Some(m) = sources.cli_mode {
            take(
                Ok(Some(Layer::mode_only("--mode", LayerKind::CommandLine, m))),
                true,
            );
        }
        if let Some(path) = &sources.managed {
            match Layer::load(path, LayerKind::Managed) {
                Ok(None) => take(
                    Err(vec![Problem {
                        location: path.display().to_string(),
                        message: "the managed policy does not exist; fix TOOLGATE_MANAGED_POLICY (an empty value means none)".into(),
                        severity: "error",
                    }]),
                    true,
                ),
                other => take(other, true),
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut stack = Stack::new();
        for (layer, trusted) in &layers {
            stack.push(layer, *trusted);
        }
        let mut policy = stack.finish();
        if policy.telemetry.otlp_endpoint.is_none() {
            if let Some(v) = std::env::var(crate::telemetry::ENDPOINT_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
            {
                match crate::telemetry::check_endpoint(&v) {
                    Ok(base) => {
                        policy.telemetry = TelemetryPolicy {
                            otlp_endpoint: Some(base),
                            source: Some(crate::telemetry::ENDPOINT_ENV.into()),
                        }
                    }
                    Err(message) => {
                        return Err(vec![Problem {
                            location: crate::telemetry::ENDPOINT_ENV.into(),
                            message: format!("{message} (or unset it)"),
                            severity: "error",
                        }])
                    }
                }
            }
        }
        if ws.changed_since_trust {
            for i in &mut policy.ignored {
                if i.file == ws.path.display().to_string() {
                    i.reason
                        .push_str(" (the file changed since you trusted it)");
                }
            }
        }
        Ok(policy)
    }

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
    fn telemetry_endpoint_is_checked_and_named() {
        let p = Policy::parse(
            "p",
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/\"\n",
        )
        .unwrap();
        assert_eq!(
            p.telemetry.otlp_endpoint.as_deref(),
            Some("http://127.0.0.1:4318")
        );
        let err = Policy::parse("p", "\n[telemetry]\notlp_endpoint = \"udp://x:1\"\n").unwrap_err();
        assert_eq!(err[0].location, "p:3", "{err:?}");
        assert!(
            err[0].message.contains("[telemetry] otlp_endpoint"),
            "{}",
            err[0].message
        );
        assert!(Policy::parse("p", "[telemetry]\nendpoint = \"http://x\"\n").is_err());
    }

    #[test]
    fn an_untrusted_layer_cannot_redirect_the_audit() {
        let user = Layer::parse(
            "user.toml",
            LayerKind::User,
            "[telemetry]\notlp_endpoint = \"http://10.0.0.1:4318\"\n",
        )
        .unwrap();
        let ws = Layer::parse(
            "ws.toml",
            LayerKind::Workspace,
            "[telemetry]\notlp_endpoint = \"http://evil.example:4318\"\n",
        )
        .unwrap();
        let mut stack = Stack::new();
        stack.push(&user, true);
        stack.push(&ws, false);
        let p = stack.finish();
        assert_eq!(
            p.telemetry.otlp_endpoint.as_deref(),
            Some("http://10.0.0.1:4318")
        );
        assert_eq!(p.ignored.len(), 1, "{:?}", p.ignored);
        assert!(
            p.ignored[0].part.contains("otlp_endpoint"),
            "{:?}",
            p.ignored
        );
        let mut stack = Stack::new();
        stack.push(&user, true);
        stack.push(&ws, true);
        let p = stack.finish();
        assert_eq!(
            p.telemetry.otlp_endpoint.as_deref(),
            Some("http://evil.example:4318")
        );
        assert_eq!(p.telemetry.source.as_deref(), Some("ws.toml"));
    }

    #[test]
    fn a_bad_credential_stops_loading() {
        let text = "[[credentials]]\nname = \"a b\"\nfrom_env = \"X\"\nhosts = [\"x.example\"]\n";
        let err = Policy::parse("p.toml", text).unwrap_err();
        assert!(err[0].message.contains("[[credentials]] `a b`"), "{err:?}");
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
