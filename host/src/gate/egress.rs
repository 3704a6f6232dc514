//! A shell command's network: its own namespace whose only way out is the host's egress proxy
//! (`sandbox::net::egress`), the ladder's answer for a destination no rule names (the key
//! `net:<host>`, session scope at most: it is the shell's capability), and the record of every
//! connection in the audit and the observation's `data.network`.

use super::approval::{plain_text, Answer, ApprovalRequest, Approver, Asked};
use super::{Gate, Surface};
use crate::cancel::CancelToken;
use crate::exec::netns::CommandNet;
use crate::exec::ApprovedCommand;
use crate::key::{CallKey, RuleDecision};
use crate::policy::Mode;
use crate::sandbox::net::egress::{net_target, Asker, Egress, EgressPolicy};
use crate::sandbox::net::HostPattern;
use crate::tools::{Observation, Risk};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The tool the `net:` keys belong to (for approvals and the audit).
pub(crate) const NET_KEY: &str = "net";

/// One question from the proxy: may the command reach `host:port`?
pub(super) struct NetAsk {
    host: String,
    port: u16,
    reply: oneshot::Sender<Result<String, String>>,
}

/// The proxy of one call, and the questions it sends while the command runs.
pub(super) struct CallNet {
    egress: Arc<Egress>,
    pub(super) asks: mpsc::Receiver<NetAsk>,
    /// What was answered in this call, by `net:` target (asked once per call).
    answered: HashMap<String, Result<String, String>>,
}

impl Gate {
    /// The command's own network behind the egress proxy, when it gets one: a command that
    /// may write (a read-only one has no network at all), without the whole network
    /// (`[shell] network = true`), where network namespaces work. `None` otherwise: the
    /// command then runs in the shared empty namespace (no network) as before.
    pub(super) fn command_net(&self, approved: &ApprovedCommand) -> Option<(CommandNet, CallNet)> {
        let shell = &self.policy.shell;
        if approved.class == "read-only" || shell.network || !self.exec_host.confinement().netns {
            return None;
        }
        let (ns, user, listener) = match crate::exec::netns::create() {
            Ok(made) => made,
            Err(e) => {
                tracing::warn!(error = %e, "the command runs without network");
                return None;
            }
        };
        let listener = tokio::net::TcpListener::from_std(listener)
            .inspect_err(|e| tracing::warn!(error = %e, "the command runs without network"))
            .ok()?;
        let (tx, asks) = mpsc::channel::<NetAsk>(16);
        let ask = Asker(Arc::new(move |host: String, port: u16| {
            let tx = tx.clone();
            Box::pin(async move {
                let target = net_target(&host, port);
                let ended = format!("the call that started this command has ended, so nobody can approve `net:{target}` now; add \"{target}\" to `[shell] network` in the policy, or grant it with `--grant 'net:{target}'`");
                let (reply, answer) = oneshot::channel();
                if tx.send(NetAsk { host, port, reply }).await.is_err() {
                    return Err(ended);
                }
                answer.await.unwrap_or(Err(ended))
            })
        }));
        let patterns = |list: &[String]| -> Vec<HostPattern> {
            // Checked when the policy was loaded; a pattern that fails here allows nothing.
            list.iter()
                .filter_map(|p| HostPattern::parse(p).ok())
                .collect()
        };
        let policy = EgressPolicy {
            allow: patterns(&shell.network_allow),
            deny: patterns(&shell.network_deny),
            limited: shell.network_limited,
            allow_private: self.policy.network.allow_private.clone(),
            timeout: self.policy.network.timeout,
            ask: Some(ask),
            credentials: self.credentials.clone(),
        };
        let egress = match Egress::serve(listener, policy) {
            Ok(e) => Arc::new(e),
            Err(e) => {
                tracing::warn!(error = %e, "the command runs without network");
                return None;
            }
        };
        let net = CommandNet {
            ns: Arc::new(ns),
            user: user.map(Arc::new),
            port: egress.addr().port(),
            keep: egress.clone(),
        };
        Some((
            net,
            CallNet {
                egress,
                asks,
                answered: HashMap::new(),
            },
        ))
    }

    /// Answer one question of the proxy: the rules for `net:<target>`, the session's grants,
    /// the mode, then a person (once or for the session; never for the project). Answered
    /// once per target and call.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn answer_net(
        &self,
        net: &mut CallNet,
        ask: NetAsk,
        session: &str,
        command: &str,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
    ) {
        let target = net_target(&ask.host, ask.port);
        let answer = match net.answered.get(&target) {
            Some(a) => a.clone(),
            None => {
                let a = self
                    .decide_net(&target, &ask, session, command, call_id, approver, cancel)
                    .await;
                net.answered.insert(target, a.clone());
                a
            }
        };
        let _ = ask.reply.send(answer);
    }

    #[allow(clippy::too_many_arguments)]
    async fn decide_net(
        &self,
        target: &str,
        ask: &NetAsk,
        session: &str,
        command: &str,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
    ) -> Result<String, String> {
        let key = CallKey::with_target(NET_KEY, target);
        let key_text = format!("{NET_KEY}:{target}");
        if let Some(r) = self.policy.strictest(&key) {
            match r.decision {
                RuleDecision::Deny => {
                    return Err(format!(
                        "`{key_text}` is denied by rule `{}` at {}",
                        r.pattern.as_str(),
                        r.source
                    ))
                }
                RuleDecision::Allow => return Ok(format!("rule `{}`", r.pattern.as_str())),
                RuleDecision::Ask => {}
            }
        }
        let forced = self
            .policy
            .strictest(&key)
            .is_some_and(|r| r.decision == RuleDecision::Ask);
        if !forced {
            if let Ok(Some(d)) = self.session_allow(session, NET_KEY, &key, call_id) {
                return Ok(d.source);
            }
            if self.mode() == Mode::AllowAll {
                return Ok("mode allow-all".into());
            }
        }
        if approver.is_none() && !self.broker.watched() {
            return Err(headless_net(self.surface, &key_text, target));
        }
        let choices = vec![Answer::Once, Answer::Session, Answer::Deny];
        let request = ApprovalRequest {
            id: format!("{call_id}-net-{}", hex::encode(&Sha256::digest(key_text.as_bytes())[..6])),
            session: session.to_string(),
            tool: crate::exec::SHELL_TOOL.to_string(),
            key: key_text.clone(),
            description: plain_text(&format!(
                "the command `{command}` wants to connect to {}:{} (through toolgate's egress proxy; not on `[shell] network`)",
                ask.host, ask.port
            )),
            risk: Risk::Exec,
            input_sha256: hex::encode(Sha256::digest(key_text.as_bytes())),
            choices,
            scopes: Vec::new(),
            expires_in_secs: self.approval_expiry.as_secs(),
        };
        match self
            .broker
            .ask(approver, request, self.approval_expiry, cancel.clone())
            .await
        {
            Asked::Answered(Answer::Once) if !cancel.is_cancelled() => Ok("approved once".into()),
            Asked::Answered(Answer::Session | Answer::SessionScope(_))
                if !cancel.is_cancelled() =>
            {
                if let Err(e) = self.state.add_session_grant(session, &key_text, None) {
                    tracing::warn!(error = %e, key = %key_text, "saving a session grant failed; the next command asks again");
                }
                Ok("approved for the session".into())
            }
            Asked::Expired => Err(format!("`{key_text}` was not approved in time")),
            _ => Err(format!("`{key_text}` was denied")),
        }
    }

    /// Every connection the command made: one `network` audit event each (with the call id),
    /// and the observation's `data.network`.
    pub(super) fn record_net(
        &self,
        net: &CallNet,
        session: &str,
        observation: &mut Observation,
        call_id: &str,
    ) {
        let (connections, unlisted) = net.egress.connections();
        if connections.is_empty() && unlisted == 0 {
            return;
        }
        let events: Vec<(&str, Value)> =
            connections.iter().map(|c| ("network", json!(c))).collect();
        if let Err(e) = self
            .state
            .audit(call_id, session, crate::exec::SHELL_TOOL, &events)
        {
            tracing::warn!(error = %e, "audit write failed");
        }
        let refused = connections.iter().filter(|c| !c.allowed).count();
        let network = json!({
            "connections": connections,
            "refused": refused,
            "unlisted": unlisted,
        });
        match &mut observation.data {
            Value::Object(map) => {
                map.insert("network".into(), network);
            }
            data if data.is_null() => *data = json!({ "network": network }),
            _ => {}
        }
    }
}

/// No one can approve a destination here: why, and the policy line or flag that allows it.
fn headless_net(surface: Surface, key_text: &str, target: &str) -> String {
    let line = format!("add \"{target}\" to `[shell] network` in the policy");
    match surface {
        Surface::Cli => format!(
            "`{key_text}` is not allowed and no one can approve here (headless); {line}, or allow it for this run with `--grant '{key_text}'`"
        ),
        Surface::McpStdio | Surface::McpHttp => format!(
            "`{key_text}` is not allowed and this MCP client cannot ask its user; stop and ask the user to {line}, or to restart the server with `--grant '{key_text}'`"
        ),
    }
}
