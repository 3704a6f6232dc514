//! Layers stacked into one policy: an untrusted layer only makes it stricter, a managed one
//! sets ceilings, and each layer's applied and ignored parts are noted for `policy check`.

use super::layer::Layer;
use super::{
    credentials, lsp, plugins, rank, shell_network, Ignored, LayerKind, LayerReport, Policy,
    TelemetryPolicy,
};
use crate::key::RuleDecision;
use std::path::PathBuf;
use std::time::Duration;

/// Stacks layers into one policy, noting what each applied and what was ignored.
pub(super) struct Stack {
    policy: Policy,
    allow_private_text: Vec<String>,
    reports: Vec<LayerReport>,
    ignored: Vec<Ignored>,
}

impl Stack {
    /// An empty stack: the default policy, nothing applied.
    pub(super) fn new() -> Self {
        Stack {
            policy: Policy::default(),
            allow_private_text: Vec::new(),
            reports: Vec::new(),
            ignored: Vec::new(),
        }
    }

    /// Apply `layer`. Untrusted, only what makes the policy stricter applies; managed, every
    /// value it sets is a ceiling for what the layers below chose.
    pub(super) fn push(&mut self, layer: &Layer, trusted: bool) {
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
        let how = (strict_only, ceiling.then_some(layer.origin.as_str()));
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

    /// The stacked policy, with what each layer applied and what was ignored.
    pub(super) fn finish(mut self) -> Policy {
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
