//! Loading a policy: one file or preset as the only layer, or every layer of a workspace
//! (built-in, user, workspace, command line, managed) stacked.

use super::layer::Layer;
use super::stack::Stack;
use super::{
    trust, LayerKind, LayerSources, Policy, PolicySource, Problem, TelemetryPolicy, WorkspaceLayer,
    PRESETS,
};
use std::path::Path;

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
    /// what is stricter) < command line, under the managed ceiling.
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
}
