//! `[[credentials]]`: secrets the host puts into requests so no tool ever holds them.
//!
//! ```toml
//! [[credentials]]
//! name = "github"                        # the placeholder is TOOLGATE_CRED_github_PLACEHOLDER
//! from_env = "GITHUB_TOKEN"              # or from_file = "~/.config/toolgate/github-token"
//! hosts = ["api.github.com"]             # where the real value may be sent
//! header = "Authorization: Bearer {}"    # optional: added to every request to those hosts
//! env = "GITHUB_TOKEN"                   # optional: the variable commands and plugins see
//!                                        #   holding the placeholder (default: from_env)
//! ```
//!
//! Layers: only the user's policy, `--policy` and the managed policy may name credentials. A
//! workspace's own policy never does, trusted or not: it could bind the user's secrets to a
//! host of its choosing. A managed entry cannot be replaced by a lower layer's of the same name.

use super::{LayerKind, Problem};
use crate::sandbox::net::HostPattern;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct CredentialFile {
    name: String,
    from_env: Option<String>,
    from_file: Option<PathBuf>,
    #[serde(default)]
    hosts: Vec<String>,
    header: Option<String>,
    env: Option<String>,
}

/// Where a credential's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialSource {
    /// A variable of the host process.
    Env(String),
    /// A file outside the workspace (absolute).
    File(PathBuf),
}

/// One credential as the policy names it (never its value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialSpec {
    /// Its name.
    pub name: String,
    /// Where the value is read from when a gate opens.
    pub source: CredentialSource,
    /// The destinations it may be sent to.
    pub hosts: Vec<HostPattern>,
    /// A header added to requests to those hosts: name and template with `{}`.
    pub header: Option<(String, String)>,
    /// The variable commands and plugins see holding the placeholder.
    pub env: Option<String>,
    /// The policy file that named it.
    pub origin: String,
    /// Named by the managed policy (no lower layer replaces it).
    pub managed: bool,
}

fn env_name_ok(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Check one layer's entries; the good ones come back resolved (`~/` and relative file paths
/// against the policy file's directory), every problem is added to `problems`.
pub(super) fn check(
    files: Vec<CredentialFile>,
    origin: &str,
    problems: &mut Vec<Problem>,
) -> Vec<CredentialSpec> {
    let mut out = Vec::new();
    let dir = Path::new(origin).parent().map(Path::to_path_buf);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for f in files {
        let mut bad = |message: String| {
            problems.push(Problem {
                location: origin.to_string(),
                message: format!("[[credentials]] `{}`: {message}", f.name),
                severity: "error",
            })
        };
        if f.name.is_empty()
            || !f
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            bad("the name may hold only letters, digits, `_` and `-`".into());
            continue;
        }
        let source = match (&f.from_env, &f.from_file) {
            (Some(v), None) if env_name_ok(v) => CredentialSource::Env(v.clone()),
            (None, Some(p)) => {
                let p = match (p.strip_prefix("~"), &home, &dir) {
                    (Ok(rest), Some(h), _) => h.join(rest),
                    (_, _, Some(d)) if p.is_relative() => d.join(p),
                    _ => p.clone(),
                };
                CredentialSource::File(p)
            }
            (Some(v), None) => {
                bad(format!("`from_env = \"{v}\"` is not a variable name"));
                continue;
            }
            _ => {
                bad(
                    "name exactly one source: `from_env = \"VARIABLE\"` or `from_file = \"PATH\"`"
                        .into(),
                );
                continue;
            }
        };
        if f.hosts.is_empty() {
            bad("`hosts` is empty: name the hosts the value may be sent to".into());
            continue;
        }
        let mut hosts = Vec::new();
        for h in &f.hosts {
            match HostPattern::parse(h) {
                Ok(p) => hosts.push(p),
                Err(e) => bad(format!("hosts: {e}")),
            }
        }
        if hosts.len() != f.hosts.len() {
            continue;
        }
        let header = match &f.header {
            None => None,
            Some(h) => match h.split_once(':') {
                Some((n, t))
                    if !n.trim().is_empty()
                        && http::header::HeaderName::from_bytes(n.trim().as_bytes()).is_ok()
                        && t.contains("{}") =>
                {
                    Some((n.trim().to_string(), t.trim().to_string()))
                }
                _ => {
                    bad(format!("`header = \"{h}\"` must be `Name: text with {{}}` (the value goes where `{{}}` is)"));
                    continue;
                }
            },
        };
        let env = f.env.clone().or_else(|| f.from_env.clone());
        if let Some(e) = env.as_deref().filter(|e| !env_name_ok(e)) {
            bad(format!("`env = \"{e}\"` is not a variable name"));
            continue;
        }
        out.push(CredentialSpec {
            name: f.name.clone(),
            source,
            hosts,
            header,
            env,
            origin: origin.to_string(),
            managed: false,
        });
    }
    out
}

/// Apply one layer's credentials (`kind`: which layer; a workspace's are never applied).
pub(super) fn apply(
    current: &mut Vec<CredentialSpec>,
    layer: &[CredentialSpec],
    kind: LayerKind,
    applied: &mut Vec<String>,
    ignore: &mut dyn FnMut(String, String),
) {
    for c in layer {
        let part = format!("[[credentials]] `{}`", c.name);
        if kind == LayerKind::Workspace {
            ignore(part, "a workspace's policy cannot name credentials (it could bind your secrets to hosts of its choosing); put them in your own policy (~/.config/toolgate/policy.toml)".into());
            continue;
        }
        let c = CredentialSpec {
            managed: kind == LayerKind::Managed,
            ..c.clone()
        };
        if let Some(old) = current.iter_mut().find(|o| o.name == c.name) {
            if old.managed && !c.managed {
                ignore(
                    part,
                    "the managed policy already names this credential".into(),
                );
                continue;
            }
            *old = c;
        } else {
            current.push(c);
        }
        applied.push(part);
    }
}

impl CredentialSpec {
    /// One line for `policy check`: the name, the placeholder, where the value comes from,
    /// where it may go (never the value).
    pub fn describe(&self) -> String {
        let from = match &self.source {
            CredentialSource::Env(v) => format!("the variable `{v}`"),
            CredentialSource::File(p) => format!("the file {}", p.display()),
        };
        let hosts: Vec<String> = self.hosts.iter().map(|h| format!("`{h}`")).collect();
        format!(
            "`{}` from {from}, sent only to {}{}; tools see `{}`{} ({})",
            self.name,
            hosts.join(", "),
            self.header
                .as_ref()
                .map(|(n, t)| format!(" (header `{n}: {t}` added)"))
                .unwrap_or_default(),
            crate::sandbox::net::creds::placeholder(&self.name),
            self.env
                .as_ref()
                .map(|e| format!(", commands and plugins in `{e}`"))
                .unwrap_or_default(),
            self.origin
        )
    }

    /// Read the value now (`Err`: why there is none). A file must lie outside `workspace` (a
    /// repository's file is no secret of the user's) and is read whole, trailing newline cut.
    pub fn load(&self, workspace: &Path) -> Result<String, String> {
        let value = match &self.source {
            CredentialSource::Env(v) => {
                std::env::var(v).map_err(|_| format!("the variable `{v}` is not set"))?
            }
            CredentialSource::File(p) => {
                let real = p
                    .canonicalize()
                    .map_err(|_| format!("the file {} cannot be read", p.display()))?;
                if real.starts_with(workspace) {
                    return Err(format!(
                        "the file {} is inside the workspace; a credential's file must be outside it",
                        p.display()
                    ));
                }
                let meta = std::fs::metadata(&real)
                    .map_err(|_| format!("the file {} cannot be read", p.display()))?;
                if !meta.is_file() || meta.len() > 64 << 10 {
                    return Err(format!(
                        "{} is not a plain file of at most 64 KiB",
                        p.display()
                    ));
                }
                std::fs::read_to_string(&real)
                    .map_err(|_| format!("the file {} is not readable text", p.display()))?
            }
        };
        let value = value.trim_end_matches(['\n', '\r']).to_string();
        if value.is_empty() {
            return Err("its value is empty".into());
        }
        if value.contains(|c: char| c.is_control()) {
            return Err("its value holds control characters (it must fit in a header)".into());
        }
        Ok(value)
    }
}
