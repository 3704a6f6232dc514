//! The plugin manifest (`toolgate-plugin.toml`): who the plugin is, which component it is (its
//! sha256), and what it asks for. A manifest only *requests*; what a call gets is computed by
//! the host from the request, the user's grant and the policy.

use crate::sandbox::net::HostPattern;
use serde::{Deserialize, Serialize};

/// WIT worlds a plugin may target.
pub const SUPPORTED_WIT: &[&str] = &["toolgate:tool@0.1.0"];

/// A parsed, validated manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The plugin's name: 1-40 of `a-z`, `0-9`, `-`, `_`, starting with a letter. The tool is
    /// served as `plugin__NAME`.
    pub name: String,
    /// The plugin's version, free text (e.g. `1.2.0`).
    pub version: String,
    /// One line about what it does.
    #[serde(default)]
    pub description: String,
    /// Hex sha256 of the component. Optional in a manifest; when present, the component must
    /// match it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The WIT world it implements, e.g. `toolgate:tool@0.1.0`.
    pub wit: String,
    /// What it asks for.
    #[serde(default)]
    pub capabilities: CapabilitySet,
    /// Limits it needs; never above the policy's.
    #[serde(default)]
    pub limits: PluginLimits,
}

/// Capabilities, as requested by a manifest or granted by the user.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilitySet {
    /// Workspace-relative directories it may read (`.` is the whole workspace).
    #[serde(default)]
    pub fs_read: Vec<String>,
    /// Workspace-relative directories it may create, change or remove things in.
    #[serde(default)]
    pub fs_write: Vec<String>,
    /// Hosts it may send HTTP(S) requests to: `api.example.com`, `*.example.com`,
    /// `https://host:8443`.
    #[serde(default)]
    pub http: Vec<String>,
    /// Environment variable names it may see (their values come from the host's environment).
    #[serde(default)]
    pub env: Vec<String>,
    /// Run host processes. Not available to plugins in this version; asking for it is an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exec: bool,
}

/// Per-plugin limits; each is capped at the policy's value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginLimits {
    /// Wall-clock deadline of one call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Linear memory cap, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Content budget passed on to the model, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
}

impl Manifest {
    /// Parse and validate manifest text; `origin` names it in errors. Every problem is reported
    /// with what to write instead.
    pub fn parse(origin: &str, text: &str) -> Result<Manifest, String> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            match line {
                Some(l) => format!("{origin}:{l}: {}", e.message()),
                None => format!("{origin}: {}", e.message()),
            }
        })?;
        manifest.validate().map_err(|m| format!("{origin}: {m}"))?;
        Ok(manifest)
    }

    fn validate(&self) -> Result<(), String> {
        if !valid_plugin_name(&self.name) {
            return Err(format!(
                "name `{}` is not valid: use 1-40 of a-z, 0-9, `-`, `_`, starting with a letter",
                self.name
            ));
        }
        if self.version.trim().is_empty() {
            return Err("`version` is empty".into());
        }
        if !SUPPORTED_WIT.contains(&self.wit.as_str()) {
            return Err(format!(
                "wit `{}` is not supported; this host supports {}",
                self.wit,
                SUPPORTED_WIT.join(", ")
            ));
        }
        if let Some(d) = &self.sha256 {
            if d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("sha256 `{d}` is not 64 hex digits"));
            }
        }
        self.capabilities.validate("capabilities")?;
        for (what, v) in [
            ("timeout_ms", self.limits.timeout_ms),
            ("memory_mb", self.limits.memory_mb),
            ("max_output_bytes", self.limits.max_output_bytes),
        ] {
            if v == Some(0) {
                return Err(format!("[limits] {what} must be more than 0"));
            }
        }
        Ok(())
    }
}

impl CapabilitySet {
    /// Check every entry; `section` names the table in messages.
    pub fn validate(&self, section: &str) -> Result<(), String> {
        for (field, paths) in [("fs_read", &self.fs_read), ("fs_write", &self.fs_write)] {
            for p in paths {
                normalize_rel(p).map_err(|m| format!("[{section}] {field}: {m}"))?;
            }
        }
        for h in &self.http {
            HostPattern::parse(h).map_err(|m| format!("[{section}] http: {m}"))?;
        }
        for e in &self.env {
            let ok = e
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(format!(
                    "[{section}] env: `{e}` is not an environment variable name"
                ));
            }
        }
        if self.exec {
            return Err(format!(
                "[{section}] exec: plugins cannot run host processes in this version of toolgate (only the built-in shell can, capped at session scope); remove `exec`"
            ));
        }
        Ok(())
    }

    /// What both sets allow: paths covered by both (the narrower of two nested paths), env
    /// names in both. HTTP patterns cannot be intersected as text; the host checks a request
    /// against both lists (see [`crate::sandbox::net::NetGrant::allow`]).
    pub fn intersect_paths_and_env(
        &self,
        other: &CapabilitySet,
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        (
            intersect_paths(&self.fs_read, &other.fs_read),
            intersect_paths(&self.fs_write, &other.fs_write),
            self.env
                .iter()
                .filter(|e| other.env.contains(e))
                .cloned()
                .collect(),
        )
    }
}

/// A plugin name: what follows `plugin__` in its tool name.
pub fn valid_plugin_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= 40
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-'))
}

/// A workspace-relative path in canonical form: `/`-separated, no `.` or empty parts, `.` for
/// the whole workspace. Absolute paths and `..` are refused.
pub fn normalize_rel(p: &str) -> Result<String, String> {
    if p.starts_with('/') || p.starts_with('\\') || p.contains('\0') || p.contains(':') {
        return Err(format!(
            "`{p}` must be relative to the workspace (e.g. `src` or `.`)"
        ));
    }
    let mut parts = Vec::new();
    for part in p.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(format!("`{p}` leaves the workspace (`..` is not allowed)")),
            other => parts.push(other),
        }
    }
    Ok(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// Whether the normalised workspace-relative path `inner` lies in `outer` (`.` holds all).
pub(crate) fn within(inner: &str, outer: &str) -> bool {
    outer == "." || inner == outer || inner.starts_with(&format!("{outer}/"))
}

fn intersect_paths(a: &[String], b: &[String]) -> Vec<String> {
    let norm =
        |v: &[String]| -> Vec<String> { v.iter().filter_map(|p| normalize_rel(p).ok()).collect() };
    let (a, b) = (norm(a), norm(b));
    let mut out: Vec<String> = Vec::new();
    for x in &a {
        for y in &b {
            let narrower = if within(x, y) {
                Some(x)
            } else if within(y, x) {
                Some(y)
            } else {
                None
            };
            if let Some(n) = narrower {
                if !out.contains(n) {
                    out.push(n.clone());
                }
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
