//! One policy file read as a layer: its TOML shape, and every check that stops loading (rule
//! keys against their own examples, globs, hooks, hosts, endpoints, credentials, servers).

use super::hooks::HookSpec;
use super::{
    credentials, lsp, network, plugins, problems, shell_network, trust, CredentialSpec, LayerKind,
    Mode, Problem, Rule, ShellFile,
};
use crate::key::{CallKey, KeyPattern, RuleDecision};
use serde::Deserialize;
use std::path::Path;

/// A policy file as written.
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

/// `[http]` as written.
#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpFile {
    pub(super) max_sessions: Option<u64>,
    pub(super) session_idle_secs: Option<u64>,
    pub(super) max_connections: Option<u64>,
}

/// `[limits]` as written.
#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub(super) timeout_ms: Option<u64>,
    pub(super) memory_mb: Option<u64>,
    pub(super) output_bytes: Option<u64>,
    pub(super) result_bytes: Option<u64>,
    pub(super) stamp_bytes: Option<u64>,
    pub(super) ignore_patterns: Option<u64>,
    pub(super) ignore_bytes: Option<u64>,
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

/// One parsed policy file, every setting optional so layers can be stacked.
#[derive(Clone, Debug)]
pub struct Layer {
    /// Where it came from.
    pub origin: String,
    /// Which layer it is.
    pub kind: LayerKind,
    pub(super) mode: Option<Mode>,
    pub(super) rules: Vec<Rule>,
    pub(super) secrets: Vec<String>,
    pub(super) limits: LimitsFile,
    pub(super) hooks: Vec<HookSpec>,
    pub(super) shell: ShellFile,
    pub(super) allow_private: Option<Vec<(String, crate::sandbox::net::HostPattern)>>,
    pub(super) max_response_bytes: Option<u64>,
    pub(super) net_timeout_ms: Option<u64>,
    pub(super) http: HttpFile,
    pub(super) otlp_endpoint: Option<String>,
    pub(super) plugins: plugins::PluginsFile,
    pub(super) credentials: Vec<CredentialSpec>,
    pub(super) lsp: lsp::LspFile,
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
        Layer::from_read(path, kind, trust::read_state_file(path))
    }

    /// A layer from what reading `path` gave (its bytes, `None` when it does not exist, or why
    /// it cannot be read).
    pub fn from_read(
        path: &Path,
        kind: LayerKind,
        read: Result<Option<Vec<u8>>, String>,
    ) -> Result<Option<Layer>, Vec<Problem>> {
        let origin = path.display().to_string();
        let bytes = read.map_err(|message| {
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

    /// Every argv this layer makes the host run with the workspace as working directory:
    /// its hooks' and its language servers' commands, each with what it is (for messages).
    pub fn commands(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = self
            .hooks
            .iter()
            .map(|h| (format!("hook `{}`", h.name()), h.command.clone()))
            .collect();
        for (name, c) in self.lsp.commands() {
            out.push((format!("[lsp.{name}] command"), c.to_vec()));
        }
        out
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
