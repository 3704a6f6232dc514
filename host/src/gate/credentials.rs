//! Brokered credentials at the gate: read once when the gate opens, placeholders handed to
//! commands and plugins, and the real values taken out of whatever comes back before it is
//! shown or saved (a server may echo a request's headers), in every encoding.

use super::Gate;
use crate::exec::CredentialEnv;
use crate::policy::Policy;
use crate::sandbox::net::creds::{self, Credential, Credentials};
use crate::sandbox::net::scrub;
use crate::tools::Observation;
use serde_json::{json, Value};
use std::path::Path;

/// Every credential the policy names, with its value read now (a missing one is kept with
/// the reason, so a request that needs it is refused saying why).
pub(super) fn load(policy: &Policy, workspace: &Path) -> Credentials {
    let creds: Vec<Credential> = policy
        .credentials
        .iter()
        .map(|c| {
            let value = c.load(workspace);
            if let Err(why) = &value {
                tracing::warn!(credential = %c.name, %why, "a credential has no value; requests that need it are refused");
            }
            Credential {
                name: c.name.clone(),
                value,
                hosts: c.hosts.clone(),
                header: c.header.clone(),
                env: c.env.clone(),
            }
        })
        .collect();
    creds::register(&creds);
    creds.into()
}

/// What commands see: the placeholders in their variables, never a real value.
pub(super) fn env(creds: &[Credential]) -> CredentialEnv {
    CredentialEnv {
        placeholders: creds
            .iter()
            .filter_map(|c| Some((c.env.clone()?, c.placeholder())))
            .collect(),
        hidden: creds.iter().filter_map(|c| c.value.clone().ok()).collect(),
    }
}

impl Gate {
    /// A plugin's granted variables: a credential's variable holds its placeholder, and a
    /// variable holding a real value under another name is not given at all.
    pub(super) fn plugin_env(&self, env: Vec<(String, String)>) -> Vec<(String, String)> {
        env.into_iter()
            .filter_map(|(k, v)| {
                if let Some(c) = self
                    .credentials
                    .iter()
                    .find(|c| c.env.as_deref() == Some(&k))
                {
                    return Some((k, c.placeholder()));
                }
                let holds = self
                    .credentials
                    .iter()
                    .any(|c| c.value.as_ref().is_ok_and(|x| v.contains(x.as_str())));
                (!holds).then_some((k, v))
            })
            .collect()
    }

    /// Take every real value out of the observation (and the output saved beside it): every
    /// form of every brokered credential ([`scrub::scrub_with`]: raw, JSON-escaped,
    /// percent-encoded, base64, hex), then every value the host knows it must never show
    /// ([`crate::state::secrets::scrub_known`]).
    pub(super) fn scrub_credentials(&self, o: &mut Observation) {
        let scrubber = crate::sandbox::net::scrub::Scrubber::new(&self.credentials);
        let clean = |text: &str| -> Option<String> {
            let once = scrubber.as_ref().and_then(|s| scrub::scrub_with(s, text));
            let twice = crate::state::secrets::scrub_known(once.as_deref().unwrap_or(text));
            twice.or(once)
        };
        for text in [&mut o.content, &mut o.summary] {
            if let Some(c) = clean(text) {
                *text = c;
            }
        }
        if let Some(r) = &mut o.reason {
            if let Some(c) = clean(r) {
                *r = c;
            }
        }
        scrub_value(&clean, &mut o.data);
        if let Some(rel) = &o.full_output_ref {
            let path = self.workspace.root().join(rel);
            if let Ok(text) = std::fs::read_to_string(&path) {
                if let Some(c) = clean(&text) {
                    if let Err(e) = crate::fsutil::write_atomic(&path, c.as_bytes()) {
                        tracing::warn!(error = %e, path = %rel, "scrubbing a credential from a saved output failed; removing it");
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
    }

    /// Placeholders sent where they are not bound, refused by `wasi:http`: one
    /// `credential_leak` audit event each.
    pub(super) fn audit_leaks(&self, leaks: &[String], session: &str, tool: &str, call_id: &str) {
        if leaks.is_empty() {
            return;
        }
        let events: Vec<(&str, Value)> = leaks
            .iter()
            .map(|why| ("credential_leak", json!({ "reason": why })))
            .collect();
        if let Err(e) = self.state.audit(call_id, session, tool, &events) {
            tracing::warn!(error = %e, "audit write failed");
        }
    }
}

fn scrub_value(clean: &dyn Fn(&str) -> Option<String>, v: &mut Value) {
    match v {
        Value::String(s) => {
            if let Some(c) = clean(s) {
                *s = c;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| scrub_value(clean, i)),
        Value::Object(map) => map.values_mut().for_each(|i| scrub_value(clean, i)),
        _ => {}
    }
}
