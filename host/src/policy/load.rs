//! Loading a policy: one file or preset as the only layer, or every layer of a workspace
//! (built-in, user, workspace, command line, managed) stacked.

use super::hooks::{named_files, observe, BoundFile, Pin};
use super::layer::Layer;
use super::sources::BoundView;
use super::stack::Stack;
use super::{
    trust, LayerKind, LayerSources, Policy, PolicySource, Problem, TelemetryPolicy, WorkspaceLayer,
    PRESETS,
};
use crate::text::escape_name;
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

    /// The workspace layer's file, the files it binds, and its trust. Each file is read once;
    /// the layer is loaded from these bytes ([`Policy::layered_with`]).
    pub fn workspace_layer(sources: &LayerSources) -> WorkspaceLayer {
        let path = sources
            .workspace
            .join(crate::workspace::STATE_DIR)
            .join(crate::workspace::layout::POLICY_FILE);
        let text = trust::read_state_file(&path);
        let sha256 = text
            .as_ref()
            .ok()
            .and_then(|t| t.as_deref().map(trust::sha256_hex));
        let mut files = match &text {
            Ok(Some(bytes)) => bound_files(&sources.workspace, &path, bytes),
            _ => Vec::new(),
        };
        let store = sources
            .user
            .as_ref()
            .map(|u| trust::TrustStore::new(&u.config));
        let recorded = store
            .as_ref()
            .and_then(|s| s.entry(&sources.workspace).ok().flatten());
        let mut changed = Vec::new();
        if let (Some(e), Some(h)) = (&recorded, &sha256) {
            if &e.policy_sha256 != h {
                changed.push(format!("{} changed since you trusted it", path.display()));
            }
            for f in &mut files {
                f.trusted = e
                    .files
                    .iter()
                    .find(|r| r.path == f.file.path)
                    .map(|r| r.state.clone());
                match &f.trusted {
                    None => changed.push(format!(
                        "`{}` ({}) is not covered by your trust: it is {} now",
                        escape_name(&f.file.path),
                        escape_name(&f.used_by.join(", ")),
                        state_words(&f.file.state)
                    )),
                    Some(t) if t != &f.file.state => changed.push(format!(
                        "`{}` ({}) changed since you trusted it: {} then, {} now",
                        escape_name(&f.file.path),
                        escape_name(&f.used_by.join(", ")),
                        state_words(t),
                        state_words(&f.file.state)
                    )),
                    Some(_) => {}
                }
            }
        }
        let trusted_by = if sources.trust_workspace {
            Some("--trust-workspace".to_string())
        } else {
            match (&recorded, &sha256, &store) {
                (Some(_), Some(_), Some(s)) if changed.is_empty() => {
                    Some(s.path().display().to_string())
                }
                _ => None,
            }
        };
        let changed_since_trust = trusted_by.is_none() && !changed.is_empty();
        WorkspaceLayer {
            path,
            text,
            sha256,
            files,
            trusted_by,
            changed_since_trust,
            changed,
        }
    }

    /// The workspace policy's hash and the files it binds, as they are now (what
    /// [`trust::TrustStore::trust`] records).
    pub(super) fn bound_now(workspace: &Path) -> Option<(String, Vec<BoundFile>)> {
        let ws = Policy::workspace_layer(&LayerSources {
            workspace: workspace.to_path_buf(),
            ..LayerSources::default()
        });
        Some((ws.sha256?, ws.files.into_iter().map(|f| f.file).collect()))
    }

    /// Every layer for a workspace, stacked: built-in < user < workspace (untrusted: only
    /// what is stricter) < command line, under the managed ceiling.
    pub fn layered(sources: &LayerSources) -> Result<Policy, Vec<Problem>> {
        Policy::layered_with(sources, &Policy::workspace_layer(sources))
    }

    /// [`Policy::layered`] with the workspace layer as `ws` read it (`toolgate trust` shows
    /// what it loosens from the very bytes it then records). A trusted workspace's hooks are
    /// pinned to the files as read.
    pub fn layered_with(
        sources: &LayerSources,
        ws: &WorkspaceLayer,
    ) -> Result<Policy, Vec<Problem>> {
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
        let ws_layer = Layer::from_read(&ws.path, LayerKind::Workspace, ws.text.clone()).map(|l| {
            l.map(|mut l| {
                pin_hooks(&mut l, &sources.workspace, ws);
                l
            })
        });
        take(ws_layer, ws.trusted_by.is_some());
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
            let what = ws.changed.join("; ");
            for i in &mut policy.ignored {
                if i.file == ws.path.display().to_string() {
                    i.reason
                        .push_str(&format!(" (changed since you trusted it: {what})"));
                }
            }
        }
        Ok(policy)
    }
}

/// `state` in words for a message (a hash cut to 12 characters).
fn state_words(state: &str) -> String {
    if state.len() == 64 {
        format!("sha256 {}…", &state[..12])
    } else {
        state.to_string()
    }
}

/// The files the workspace policy `bytes` (at `path`) makes the host run or read, each read
/// once now. A policy that does not parse binds nothing (it does not load either).
fn bound_files(workspace: &Path, path: &Path, bytes: &[u8]) -> Vec<BoundView> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Vec::new();
    };
    let Ok(layer) = Layer::parse(&path.display().to_string(), LayerKind::Workspace, text) else {
        return Vec::new();
    };
    let mut out: Vec<BoundView> = Vec::new();
    for (what, argv) in layer.commands() {
        for named in named_files(&argv, workspace) {
            if let Some(v) = out.iter_mut().find(|v| v.file.path == named.shown) {
                if !v.used_by.contains(&what) {
                    v.used_by.push(what.clone());
                }
                continue;
            }
            let (state, bytes) = observe(&named.path);
            out.push(BoundView {
                file: BoundFile {
                    path: named.shown,
                    state,
                },
                bytes,
                trusted: None,
                used_by: vec![what.clone()],
            });
        }
    }
    out
}

/// Pin every hook of the workspace layer `l` to the files `ws` read.
fn pin_hooks(l: &mut Layer, workspace: &Path, ws: &WorkspaceLayer) {
    for h in &mut l.hooks {
        let pins = named_files(&h.command, workspace)
            .into_iter()
            .map(|n| Pin {
                index: n.index,
                state: ws
                    .files
                    .iter()
                    .find(|f| f.file.path == n.shown)
                    .map(|f| f.file.state.clone())
                    // Not read when the policy was: it cannot have been verified.
                    .unwrap_or_else(|| "not verified".into()),
                path: n.path,
            })
            .collect();
        h.pins = Some(pins);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::userdirs::UserDirs;

    fn sources(ws: &Path, user: &Path) -> LayerSources {
        LayerSources {
            workspace: ws.to_path_buf(),
            user: Some(UserDirs {
                config: user.to_path_buf(),
                state: user.join("state"),
            }),
            ..LayerSources::default()
        }
    }

    #[test]
    fn trust_binds_the_hook_files_and_a_change_untrusts_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".toolgate")).unwrap();
        std::fs::create_dir_all(ws.join("scripts")).unwrap();
        std::fs::write(ws.join("scripts/check.sh"), "#!/bin/sh\necho ok\n").unwrap();
        let policy = "[[hooks]]\ncommand = [\"bash\", \"scripts/check.sh\"]\n";
        std::fs::write(ws.join(".toolgate/policy.toml"), policy).unwrap();
        let src = sources(&ws, user.path());
        let store = trust::TrustStore::new(user.path());
        let sha = trust::sha256_hex(policy.as_bytes());

        // A record of the policy's hash alone (as written before files were bound).
        store.trust_shown(&ws, &sha, Vec::new()).unwrap();
        let l = Policy::workspace_layer(&src);
        assert!(l.trusted_by.is_none());
        assert!(l.changed[0].contains("scripts/check.sh"), "{:?}", l.changed);

        store.trust(&ws, &sha).unwrap();
        let l = Policy::workspace_layer(&src);
        assert!(l.trusted_by.is_some(), "{:?}", l.changed);
        let policy_now = Policy::layered_with(&src, &l).unwrap();
        let pins = policy_now.hooks[0].pins.clone().unwrap();
        assert_eq!(pins.len(), 1);
        assert_eq!(pins[0].index, 1);

        std::fs::write(ws.join("scripts/check.sh"), "#!/bin/sh\necho evil\n").unwrap();
        let l = Policy::workspace_layer(&src);
        assert!(l.trusted_by.is_none() && l.changed_since_trust);
        let p = Policy::layered_with(&src, &l).unwrap();
        assert!(p.hooks.is_empty(), "an untrusted layer's hooks never run");
        assert!(
            p.ignored
                .iter()
                .any(|i| i.reason.contains("scripts/check.sh")),
            "{:?}",
            p.ignored
        );
    }
}
