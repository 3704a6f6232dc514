//! Stages 7–8 of the ladder: the project's allow rules and grants, each checked against the
//! tool's ceiling (a tool capped at session scope is never allowed for the whole project), then
//! the session's grants (`--grant`, `--allow-write`, answers of `session`).

use super::decision::{Decision, Refusal, Stage};
use super::observe;
use super::Gate;
use crate::error::Result;
use crate::key::{CallKey, KeyPattern, RuleDecision};
use crate::policy::{Problem, Rule};
use crate::tools::{Ceiling, Risk, ToolInfo};

/// A persisted allow: what it is (`rule `…``, `grant `…``) and where it is written.
pub(crate) type Persisted = (String, String);

/// Stage 7: an allow rule, else a project grant (`find` reads the grants file), then the
/// ceiling. `Ok(None)`: nothing in the project allows the call.
pub(crate) fn project_allow(
    info: &ToolInfo,
    key: &CallKey,
    rule: Option<&Rule>,
    find: impl FnOnce(&CallKey) -> std::result::Result<Option<Persisted>, Problem>,
    call_id: &str,
) -> Result<Option<Decision>, Refusal> {
    let (persisted, rule_pattern) = match rule.filter(|r| r.decision == RuleDecision::Allow) {
        Some(r) => (
            Some((format!("rule `{}`", r.pattern.as_str()), r.source.clone())),
            Some(r.pattern.as_str()),
        ),
        None => match find(key) {
            Ok(g) => (g, None),
            Err(problem) => {
                return Err(observe::error_at(
                    &info.name,
                    call_id,
                    Stage::ProjectAllowlist,
                    super::decision::Code::GrantsFile,
                    format!("{problem}"),
                    Some("fix or delete .toolgate/grants.toml; until then nothing it grants is honoured".into()),
                ));
            }
        },
    };
    let Some((what, source)) = persisted else {
        return Ok(None);
    };
    let d = ceiling(info, key, &what, source, call_id)?;
    Ok(Some(match rule_pattern {
        Some(p) => d.with_rule(p),
        None => d,
    }))
}

/// The ceiling: a persisted allow of a tool capped at session scope is a violation, not an
/// allow.
pub(crate) fn ceiling(
    info: &ToolInfo,
    key: &CallKey,
    what: &str,
    source: String,
    call_id: &str,
) -> Result<Decision, Refusal> {
    if info.ceiling == Ceiling::Session {
        return Err(observe::ceiling_violation(
            &info.name,
            call_id,
            Stage::ProjectAllowlist,
            source.clone(),
            true,
            format!(
                "{what} at {source} allows `{key}` for the whole project, but `{}` runs real host processes (its component imports the host exec capability) and can only be allowed per session; it is not honoured",
                info.name
            ),
            format!("remove it from {source}; allow it for one session with `--grant '{key}'` instead"),
        ));
    }
    Ok(Decision::allow(Stage::ProjectAllowlist, source))
}

/// Stage 8: a `--grant`, the `--allow-write` grant, else a grant of this session (`session`
/// reads them from the state database; a database that cannot be read fails the call).
pub(crate) fn session_allow(
    tool: &str,
    cli_grants: &[KeyPattern],
    write_grant: Option<KeyPattern>,
    session: impl FnOnce() -> Result<Vec<String>>,
    key: &CallKey,
    call_id: &str,
) -> Result<Option<Decision>, Refusal> {
    let flag = |g: &KeyPattern| {
        Decision::allow(Stage::SessionAllowlist, format!("--grant '{}'", g.as_str()))
    };
    if let Some(g) = cli_grants.iter().find(|g| g.matches(key)) {
        return Ok(Some(flag(g)));
    }
    if let Some(g) = write_grant.filter(|g| g.matches(key)) {
        return Ok(Some(flag(&g)));
    }
    let grants = session()
        .map_err(|e| observe::state_unreadable(tool, call_id, Stage::SessionAllowlist, &e))?;
    Ok(grants
        .iter()
        .filter_map(|g| KeyPattern::parse(g).ok())
        .find(|g| g.matches(key))
        .map(|g| {
            Decision::allow(
                Stage::SessionAllowlist,
                format!("session grant `{}`", g.as_str()),
            )
        }))
}

impl Gate {
    /// Stage 7 for this gate's policy and grants file.
    pub(crate) fn project_allow(
        &self,
        info: &ToolInfo,
        key: &CallKey,
        rule: Option<&Rule>,
        call_id: &str,
    ) -> Result<Option<Decision>, Refusal> {
        project_allow(
            info,
            key,
            rule,
            |key| {
                self.project_grants
                    .find(key)
                    .map(|g| g.map(|g| (format!("grant `{}`", g.pattern.as_str()), g.source)))
            },
            call_id,
        )
    }

    /// Stage 8 for this gate and `session`.
    pub(crate) fn session_allow(
        &self,
        session: &str,
        tool: &str,
        key: &CallKey,
        call_id: &str,
    ) -> Result<Option<Decision>, Refusal> {
        session_allow(
            tool,
            &self.cli_grants,
            self.write_grant(&key.tool),
            || self.state.session_grants(session),
            key,
            call_id,
        )
    }

    /// With `--allow-write`: the grant of the write tool `tool` (keyed by its name, as if
    /// given with `--grant`), if it is one.
    pub(crate) fn write_grant(&self, tool: &str) -> Option<KeyPattern> {
        if !self.allow_writes {
            return None;
        }
        let tool = self.registry.loaded(tool)?;
        (tool.info.risk == Risk::Write)
            .then(|| KeyPattern::parse(&tool.info.name).ok())
            .flatten()
    }

    /// Whether a grant from the command line or this session names exactly `key_text`. A
    /// session's grants that cannot be read name nothing (the call then asks).
    pub(crate) fn exact_grant(&self, session: &str, key_text: &str) -> bool {
        self.cli_grants.iter().any(|g| g.as_str() == key_text)
            || self
                .write_grant(key_text)
                .is_some_and(|g| g.as_str() == key_text)
            || self
                .session_grants_or_none(session)
                .iter()
                .any(|g| g == key_text)
    }

    /// This session's grants; none, with a warning, when the state database cannot be read
    /// (used only where no grant means asking or refusing, never allowing).
    pub(crate) fn session_grants_or_none(&self, session: &str) -> Vec<String> {
        self.state.session_grants(session).unwrap_or_else(|e| {
            tracing::warn!(error = %e, session, "the session's grants cannot be read from the state database; the call asks (or a fetch redirect is refused) as if there were none");
            Vec::new()
        })
    }
}

#[cfg(test)]
#[path = "grants_tests.rs"]
mod tests;
