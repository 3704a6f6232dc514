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
use crate::sandbox::net::egress::{net_target, Asker, Connection, Egress, EgressPolicy};
use crate::sandbox::net::HostPattern;
use crate::tools::{Observation, Risk};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    slot: Arc<ProxySlot>,
    pub(super) asks: mpsc::Receiver<NetAsk>,
    /// What was answered in this call, by `net:` target (asked once per call).
    answered: HashMap<String, Result<String, String>>,
    /// How many connections (listed, unlisted) are already in the call's record.
    seen: (usize, u64),
}

/// Where a command's proxy lives: held by the command (its `CommandNet`), by the call and, for
/// a background job, by the job's watcher, which stops it when the job has ended
/// ([`ProxySlot::stop`]) whoever still holds the slot.
pub(super) struct ProxySlot(std::sync::Mutex<Option<Arc<Egress>>>);

impl ProxySlot {
    fn egress(&self) -> Option<Arc<Egress>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The connections so far (none once stopped).
    fn connections(&self) -> (Vec<Connection>, u64) {
        self.egress().map(|e| e.connections()).unwrap_or_default()
    }

    /// Stop the proxy (every tunnel still open ends); what it recorded last is returned.
    fn stop(&self) -> (Vec<Connection>, u64) {
        let taken = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        taken.map(|e| e.connections()).unwrap_or_default()
    }
}

/// How often a job's watcher looks at its proxy's record.
const JOB_POLL: Duration = Duration::from_millis(100);
/// After a job has ended, its proxy stays until nothing new was recorded for this long (a
/// connection closing as the job ends is recorded when it closes)…
const JOB_QUIET: Duration = Duration::from_millis(300);
/// …and never longer than this.
const JOB_DRAIN: Duration = Duration::from_secs(2);

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
        // A managed `network = false`: no proxy at all, so the command's namespace has no way
        // out whatever a grant, an answer or the mode would say (the kernel decides).
        let ceiling = shell.network_ceiling.clone();
        if ceiling.as_ref().is_some_and(|c| c.hosts.is_none()) {
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
            let ceiling = ceiling.clone();
            Box::pin(async move {
                let target = net_target(&host, port);
                // The managed ceiling first, before any rule, grant, answer or mode: a host
                // outside it is refused and never asked about, during the call or after it.
                if let Some(c) = &ceiling {
                    if !c.allows(scheme_of(port), &host, port) {
                        return Err(c.refusal(&format!("{NET_KEY}:{target}")));
                    }
                }
                let ended = format!("the call that started this command has ended (it runs as a background job), so `net:{target}` can no longer be asked about or granted for it; add \"{target}\" to `[shell] network` in the policy, or run the command in the foreground");
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
        let port = egress.addr().port();
        let slot = Arc::new(ProxySlot(std::sync::Mutex::new(Some(egress))));
        let net = CommandNet {
            ns: Arc::new(ns),
            user: user.map(Arc::new),
            port,
            keep: slot.clone(),
        };
        Some((
            net,
            CallNet {
                slot,
                asks,
                answered: HashMap::new(),
                seen: (0, 0),
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
        if let Some(c) = &self.policy.shell.network_ceiling {
            if !c.allows(scheme_of(ask.port), &ask.host, ask.port) {
                return Err(c.refusal(&key_text));
            }
        }
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
        if approver.is_none() && !self.broker.watched_for(session) {
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
        net: &mut CallNet,
        session: &str,
        observation: &mut Observation,
        call_id: &str,
    ) {
        let (connections, unlisted) = net.slot.connections();
        net.seen = (connections.len(), unlisted);
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

impl Gate {
    /// After the call: a command that became a background job keeps its proxy, watched until
    /// the job ends (every later connection audited with the job's id and this call's id, and
    /// shown by `job_output`), then stopped. Any other command's proxy stops now.
    pub(super) fn after_command(
        &self,
        net: CallNet,
        session: &str,
        call_id: &str,
        observation: &Observation,
    ) {
        let CallNet { slot, seen, .. } = net;
        let job = observation.data.get("job_id").and_then(Value::as_str);
        let watched = job.and_then(|id| {
            let (log, probe) = self.exec_host.jobs.watch_net(session, id)?;
            Some((id.to_string(), log, probe))
        });
        let Some((job_id, log, probe)) = watched else {
            slot.stop();
            return;
        };
        let audit = JobAudit {
            db: self.state.path().to_path_buf(),
            open: None,
            session: session.to_string(),
            call_id: call_id.to_string(),
            job_id,
        };
        let spawned = std::thread::Builder::new()
            .name("toolgate-job-net".into())
            .spawn({
                let slot = slot.clone();
                move || watch_job(&slot, log, probe, audit, seen)
            });
        if let Err(e) = spawned {
            // Unwatched, the job's connections would go unrecorded: it loses its network.
            tracing::warn!(error = %e, "a background job's network cannot be watched; its proxy stops now");
            slot.stop();
        }
    }
}

impl Gate {
    /// The managed host list as one more list every request of a guest must match (empty
    /// without a list; a managed `network = false` is about shell commands and bounds no
    /// guest: `deny` rules for `fetch:*` and `download:*` do that).
    pub(super) fn ceiling_patterns(&self) -> Vec<Vec<HostPattern>> {
        self.policy
            .shell
            .network_ceiling
            .as_ref()
            .and_then(|c| c.patterns())
            .into_iter()
            .collect()
    }

    /// A `fetch` or `download` of a URL outside the managed host list: refused, naming the
    /// ceiling.
    pub(super) fn outside_ceiling(
        &self,
        name: &str,
        input: &Value,
        call_id: &str,
    ) -> Option<Observation> {
        let ceiling = self.policy.shell.network_ceiling.as_ref()?;
        let patterns = ceiling.patterns()?;
        let (scheme, host, port) = super::validate::fetch_target(input).ok()?;
        if patterns.iter().any(|p| p.matches(&scheme, &host, port)) {
            return None;
        }
        let mut o = Observation::denied(
            name,
            call_id,
            "rules",
            ceiling.refusal(&format!("{name}:{host}")),
            "the managed policy's `[shell] network` list bounds every host a tool reaches; ask whoever manages this machine".into(),
        );
        o.source = Some(ceiling.origin.clone());
        Some(o)
    }
}

/// Where a job's connections are audited: its own connection to the state database, opened
/// when the job first connects after its call (the gate's is not shared across threads).
struct JobAudit {
    db: std::path::PathBuf,
    open: Option<crate::state::StateDb>,
    session: String,
    call_id: String,
    job_id: String,
}

impl JobAudit {
    /// Audit `connections` (each a `network` event of the call, with the job's id) and hand
    /// them to the job's log for `job_output`.
    fn record(
        &mut self,
        log: &crate::exec::jobs::JobNetLog,
        connections: &[Connection],
        unlisted: u64,
    ) {
        if connections.is_empty() && unlisted == 0 {
            return;
        }
        let details: Vec<Value> = connections
            .iter()
            .map(|c| {
                let mut v = json!(c);
                if let Value::Object(map) = &mut v {
                    map.insert("job_id".into(), json!(self.job_id));
                }
                v
            })
            .collect();
        let mut events: Vec<(&str, Value)> =
            details.iter().map(|d| ("network", d.clone())).collect();
        if unlisted > 0 {
            events.push((
                "network",
                json!({ "job_id": self.job_id, "unlisted": unlisted }),
            ));
        }
        if self.open.is_none() {
            match crate::state::StateDb::open(&self.db) {
                Ok(db) => self.open = Some(db),
                Err(e) => {
                    tracing::warn!(error = %e, job = %self.job_id, "audit write failed: the state database cannot be opened for a background job's connections")
                }
            }
        }
        if let Some(db) = &self.open {
            if let Err(e) = db.audit(
                &self.call_id,
                &self.session,
                crate::exec::SHELL_TOOL,
                &events,
            ) {
                tracing::warn!(error = %e, "audit write failed");
            }
        }
        log.push(details, unlisted);
    }
}

/// Watch a background job's proxy: record what is new every [`JOB_POLL`]; when the job has
/// ended, wait until nothing new came for [`JOB_QUIET`] (at most [`JOB_DRAIN`]), stop the
/// proxy and record what it held last.
fn watch_job(
    slot: &ProxySlot,
    log: crate::exec::jobs::JobNetLog,
    probe: crate::exec::jobs::JobProbe,
    mut audit: JobAudit,
    mut seen: (usize, u64),
) {
    let news = |(connections, unlisted): (Vec<Connection>, u64),
                seen: &mut (usize, u64),
                audit: &mut JobAudit| {
        let new = connections.get(seen.0..).unwrap_or_default();
        let more = unlisted.saturating_sub(seen.1);
        let any = !new.is_empty() || more > 0;
        audit.record(&log, new, more);
        *seen = (connections.len().max(seen.0), unlisted.max(seen.1));
        any
    };
    while probe.running() {
        std::thread::sleep(JOB_POLL);
        news(slot.connections(), &mut seen, &mut audit);
    }
    let end = Instant::now() + JOB_DRAIN;
    let mut quiet = Instant::now();
    while Instant::now() < end && quiet.elapsed() < JOB_QUIET {
        std::thread::sleep(JOB_POLL / 2);
        if news(slot.connections(), &mut seen, &mut audit) {
            quiet = Instant::now();
        }
    }
    news(slot.stop(), &mut seen, &mut audit);
    log.finish();
}

/// The scheme a destination's port suggests (the ceiling's patterns may name one).
fn scheme_of(port: u16) -> &'static str {
    if port == 443 {
        "https"
    } else {
        "http"
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
