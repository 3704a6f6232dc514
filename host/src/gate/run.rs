//! Running an allowed call: the capabilities built from the decision (preopens, the exec
//! grant, a plugin's grant, the network grant of a fetch or a download), the sandbox call, the
//! read and write records, and the output (cut to the budget, the whole saved under
//! `.toolgate/outputs/`).

use super::decision::Code;
use super::observe;
use super::validate::{fetch_target, is_download, is_fetch, FETCH_TOOL};
use super::{Gate, Prepared};
use crate::cancel::CancelToken;
use crate::exec::{ApprovedCommand, ExecGrant};
use crate::key::{CallKey, KeyPattern, RuleDecision};
use crate::policy::Mode;
use crate::sandbox::net::{HostPattern, NetGrant};
use crate::sandbox::{wit, CallReport, Capabilities, GuestResult, Limits, Preopen};
use crate::state::FileStamp;
use crate::text::cut_head_tail;
use crate::tools::registry::{PathUse, HAND_OFF};
use crate::tools::{Ceiling, Observation, Status, Total};
use crate::workspace::{Access, GUEST_ROOT, OUTPUTS_DIR};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "download.rs"]
mod download;

/// The longest one language-server question waits (`lsp_diagnostics`' `timeout_ms` at most).
const LSP_MAX_WAIT: Duration = Duration::from_secs(120);

impl Gate {
    /// Build the capabilities, run the guest, and record what it did.
    pub(super) async fn run(
        &self,
        session: &str,
        mut p: Prepared,
        call_id: &str,
        approver: Option<Arc<dyn super::approval::Approver>>,
        cancel: &CancelToken,
    ) -> Observation {
        let name = p.tool.info.name.clone();
        let mut caps = Capabilities {
            preopens: vec![Preopen {
                host: self.workspace.root().to_path_buf(),
                guest: GUEST_ROOT.to_string(),
                writable: false,
            }],
            deny: Some(self.fs_deny.clone()),
            exec: None,
            ..Capabilities::default()
        };
        let mut limits = self.limits.clone();
        let mut call_net = None;
        if p.tool.info.ceiling == Ceiling::Session {
            // Importing the exec capability: the shell gets its approved command, every such
            // tool reaches this session's jobs, nothing else.
            if let Some(a) = &p.exec {
                // The guest waits in the host while the command runs: its deadline covers the
                // command's own (the command is killed at its timeout by the host).
                let wait = if a.background {
                    crate::exec::BACKGROUND_GRACE
                } else {
                    a.auto_background.min(a.timeout)
                };
                limits.timeout = limits.timeout.max(wait + Duration::from_secs(30));
            }
            let mut approved = p.exec.clone();
            if let Some((net, proxy)) = approved.as_ref().and_then(|a| self.command_net(a)) {
                call_net = Some(proxy);
                approved = approved.map(|a| ApprovedCommand {
                    net: Some(net),
                    ..a
                });
            }
            caps.exec = Some(ExecGrant {
                approved,
                session: session.to_string(),
                call_id: call_id.to_string(),
                host: self.exec_host.clone(),
            });
            // Importing the lsp capability (built-ins only): the servers, and for a write
            // tool the change approved. A question waits at most `LSP_MAX_WAIT`, a server
            // starts within the policy's timeout: the call's deadline covers both.
            let lsp = crate::sandbox::LSP_INTERFACE_PREFIX;
            if p.tool.info.builtin && p.tool.info.imports.iter().any(|i| i.starts_with(lsp)) {
                let start = self.lsp.config().timeout.max(Duration::from_secs(10));
                limits.timeout = limits
                    .timeout
                    .max(LSP_MAX_WAIT + start + Duration::from_secs(10));
                caps.lsp = Some(self.lsp_grant(p.lsp_plan.as_ref(), LSP_MAX_WAIT));
            }
        }
        if let Some(grant) = &p.tool.plugin {
            if let Err(o) = self.plugin_capabilities(grant, &mut caps, &mut limits, &name, call_id)
            {
                return *o;
            }
        }
        // The managed network ceiling bounds `fetch` and `download` too: a host outside it is
        // refused here, whatever allowed the call.
        if is_fetch(&p.tool.info) || is_download(&p.tool.info) {
            if let Some(o) = self.outside_ceiling(&name, &p.input, call_id) {
                return o;
            }
        }
        if is_fetch(&p.tool.info) {
            let mut net = self.fetch_grant(FETCH_TOOL, session, &p.input);
            net.deadline = Some(Instant::now() + limits.timeout);
            caps.net = Some(net);
        }
        // A download: its write allowed too (asked now if only its host was), its grant, and
        // the temporary file removed after the call whatever happens (`download.rs`).
        let mut download = None;
        if is_download(&p.tool.info) {
            let d = match self
                .download_run(session, &mut p, call_id, approver.clone(), cancel)
                .await
            {
                Ok(d) => d,
                Err(o) => return *o,
            };
            let mut net = d.net.clone();
            net.deadline = Some(Instant::now() + limits.timeout);
            caps.net = Some(net);
            caps.env = d.env.clone();
            download = Some(d);
        }
        for (scoped, current) in &p.before {
            // A plugin writes only where its grant reaches (checked in `prepare`), through the
            // preopens made from the grant: its path fields add nothing.
            let (Some(parent), Some(guest_parent)) =
                (scoped.host.parent(), guest_parent(&scoped.guest))
            else {
                return observe::run_error(
                    &name,
                    call_id,
                    Code::Scope,
                    format!("{} has no parent directory", scoped.rel),
                    None,
                );
            };
            // Made on descriptors, never through a link: a directory swapped for
            // `sub -> .toolgate` after the scope check fails the call instead.
            if let Err(e) = crate::fsutil::create_dirs_beneath(self.workspace.root(), parent) {
                return observe::run_error(
                    &name,
                    call_id,
                    Code::Io,
                    format!(
                        "cannot create the directories of {}: {}",
                        crate::gate::approval::escape_name(&scoped.rel),
                        crate::fsutil::plain_error(&e)
                    ),
                    None,
                );
            }
            if p.tool.plugin.is_none() {
                caps.preopens.push(Preopen {
                    host: parent.to_path_buf(),
                    guest: guest_parent,
                    writable: true,
                });
            }
            let snapshot = current
                .as_ref()
                .map(|(stamp, bytes)| (stamp, bytes.as_deref()));
            if let Err(e) = self
                .state
                .history_before_write(&scoped.host, snapshot, call_id)
            {
                tracing::warn!(error = %e, path = %scoped.rel, "saving the file's content before the write in the history failed; `toolgate undo` cannot restore it");
            }
        }

        // What `read` shows the model is recorded from the host's own look at the file. A
        // FIFO, device or socket is refused here, before the guest waits on it; a directory or
        // a missing file is the guest's to answer.
        let mut read_stamp = None;
        if p.tool.info.builtin_kind() == Some(crate::tools::Builtin::Read) {
            if let Some((_, _, s)) = p.paths.iter().find(|(_, u, _)| *u == PathUse::Read) {
                match FileStamp::stamp(&s.host, limits.stamp_bytes) {
                    Ok(stamp) => read_stamp = Some((s.host.clone(), stamp)),
                    Err(e @ crate::fsutil::OpenError::NotRegular { .. }) if !e.is_directory() => {
                        return observe::run_error(
                            &name,
                            call_id,
                            Code::Open(e.code()),
                            e.message_for(&s.rel),
                            Some(format!("{} cannot be read with this tool", s.rel)),
                        );
                    }
                    Err(_) => {}
                }
            }
        }

        let context = wit::CallContext {
            workspace_root: GUEST_ROOT.to_string(),
            max_output_bytes: u64::try_from(limits.max_output_bytes).unwrap_or(u64::MAX),
            denied_globs: self.denied_globs.clone(),
        };
        let input = p.input.to_string();
        let report = if call_net.is_none() && self.is_scan_apart(&p.tool) {
            let call = self.sandbox.call_report_owned(
                p.tool.loaded.clone(),
                &caps,
                limits.clone(),
                input.clone(),
                context.clone(),
                cancel,
            );
            crate::sandbox::bulk::run(call, cancel).await
        } else {
            let call =
                self.sandbox
                    .call_report(&p.tool.loaded, &caps, &limits, &input, &context, cancel);
            match call_net.as_mut() {
                None => call.await,
                // While the command runs, its proxy's questions are answered here (by the
                // ladder for `net:<host>`), one at a time.
                Some(net) => {
                    tokio::pin!(call);
                    let command = p.exec.as_ref().map(|a| a.text.as_str()).unwrap_or("");
                    loop {
                        tokio::select! {
                            r = &mut call => break r,
                            Some(ask) = net.asks.recv() => {
                                self.answer_net(net, ask, session, command, call_id, approver.clone(), cancel).await;
                            }
                        }
                    }
                }
            }
        };
        // What the host refused is reported whatever became of the call.
        let CallReport {
            result,
            net_refusals: refusals,
        } = report;
        // A built-in whose component hands the call over (`read`, for an image or a PDF): the
        // same call, with the same capabilities and limits, in its part. Only a built-in's
        // own part can answer; from any other component `hand-off` is an error like any other.
        let result = match result {
            Ok(GuestResult::ToolError(e)) if e.code == HAND_OFF => {
                match self
                    .registry
                    .part(&self.sandbox, &self.limits, &p.tool)
                    .await
                {
                    None => Ok(GuestResult::ToolError(e)),
                    Some(Err(e)) => Err(e),
                    Some(Ok(part)) => {
                        self.sandbox
                            .call_report(&part, &caps, &limits, &input, &context, cancel)
                            .await
                            .result
                    }
                }
            }
            other => other,
        };
        let mut observation = match result {
            Err(e) => observe::limit_or_crash(&name, call_id, e),
            Ok(GuestResult::ToolError(e)) => {
                let data = observe::parse_data(&e.data);
                match crate::tools::observation::carried_output(&data) {
                    // A failure that still produced output (a command that exited non-zero):
                    // shown as a success would be, with the error's code and reason.
                    Some(out) => {
                        let mut o =
                            self.ok_observation(&name, call_id, out, limits.max_output_bytes);
                        o.status = Status::Error;
                        o.error_code = Some(e.code);
                        o.reason = Some(e.message);
                        o
                    }
                    None => {
                        let mut o = Observation::error(&name, call_id, &e.code, e.message, None);
                        o.data = data;
                        o
                    }
                }
            }
            Ok(GuestResult::Output(out)) => {
                self.ok_observation(&name, call_id, out, limits.max_output_bytes)
            }
        };
        if let Some(d) = &download {
            self.download_cleanup(d, &mut observation);
        }
        if observation.status == Status::Ok {
            if let Some((path, stamp)) = read_stamp {
                if let Err(e) = self.state.record_read(session, &path, &stamp) {
                    tracing::warn!(error = %e, path = %path.display(), "recording the read failed; a change to this file in this session is refused as `not-read` until it is read again");
                }
            }
            for (scoped, _) in &p.before {
                match FileStamp::for_history(&scoped.host, limits.stamp_bytes) {
                    Ok((stamp, bytes)) => {
                        if let Err(e) = self.state.record_read(session, &scoped.host, &stamp) {
                            tracing::warn!(error = %e, path = %scoped.rel, "recording the written file as read failed; the next change to it in this session is refused as `not-read` until it is read again");
                        }
                        if let Err(e) = self.state.history_after_write(
                            &scoped.host,
                            &stamp,
                            bytes.as_deref(),
                            call_id,
                        ) {
                            tracing::warn!(error = %e, path = %scoped.rel, "recording the written file in the history failed; `toolgate undo` cannot restore this change");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, path = %scoped.rel, "stamping a written file failed; it is not recorded as read and its history has no after-state")
                    }
                }
            }
        }
        if observation.status == Status::Ok {
            let written = p.before.iter().map(|(s, _)| s.host.clone()).collect();
            self.lsp_after_write(&p.tool.info, written, &mut observation)
                .await;
        }
        if !refusals.is_empty() {
            // What the host refused is part of the result, whatever the guest made of it.
            if observation.status != Status::Ok {
                let why = refusals.join("; ");
                observation.reason = Some(match observation.reason.take() {
                    Some(r) => format!("{r} (the host refused: {why})"),
                    None => format!("the host refused: {why}"),
                });
            }
            if let Value::Object(map) = &mut observation.data {
                map.insert("network_refused".into(), json!(refusals));
            } else if observation.data.is_null() {
                observation.data = json!({ "network_refused": refusals });
            }
        }
        if let Some(mut net) = call_net {
            self.record_net(&mut net, session, &mut observation, call_id);
            self.after_command(net, session, call_id, &observation);
        }
        if let Some(net) = &caps.net {
            let leaks = net.leaks.lock().map(|l| l.clone()).unwrap_or_default();
            self.audit_leaks(&leaks, session, &name, call_id);
        }
        self.scrub_credentials(&mut observation);
        observation.audit_id = call_id.to_string();
        observation
    }

    /// A plugin call's capabilities: preopens for its granted paths (each checked against the
    /// scope now, so a path that became a symlink out of the workspace is not opened), its
    /// environment variables, its network grant and its limits.
    fn plugin_capabilities(
        &self,
        grant: &crate::plugins::PluginGrant,
        caps: &mut Capabilities,
        limits: &mut Limits,
        name: &str,
        call_id: &str,
    ) -> Result<(), Box<Observation>> {
        caps.preopens.clear();
        for (paths, access, writable) in [
            (&grant.fs_read, Access::Read, false),
            (&grant.fs_write, Access::Write, true),
        ] {
            for rel in paths {
                let scoped = self.workspace.scope(rel, access).map_err(|d| {
                    Box::new(observe::run_error(
                        name,
                        call_id,
                        Code::PluginGrant,
                        format!("the plugin's granted path `{rel}` cannot be used: {}", d.reason),
                        Some("narrow the plugin's [granted] paths in .toolgate/plugins/ or reinstall it".into()),
                    ))
                })?;
                if writable {
                    if let Err(e) =
                        crate::fsutil::create_dirs_beneath(self.workspace.root(), &scoped.host)
                    {
                        return Err(Box::new(observe::run_error(
                            name,
                            call_id,
                            Code::Io,
                            format!(
                                "cannot create the plugin's granted directory {}: {}",
                                crate::gate::approval::escape_name(&scoped.rel),
                                crate::fsutil::plain_error(&e)
                            ),
                            None,
                        )));
                    }
                } else if !scoped.host.exists() {
                    continue;
                }
                // Preopens are directories; opening a file's parent would hand over its
                // siblings too, so a grant naming a file is an error, not a wider grant.
                if !scoped.host.is_dir() {
                    return Err(Box::new(observe::run_error(
                        name,
                        call_id,
                        Code::PluginGrant,
                        format!("the plugin's granted path `{rel}` is not a directory; plugin grants name directories"),
                        Some("grant the directory that holds it, in the manifest and in .toolgate/plugins/".into()),
                    )));
                }
                caps.preopens.push(Preopen {
                    host: scoped.host.clone(),
                    guest: scoped.guest.clone(),
                    writable,
                });
            }
        }
        // A brokered credential's variable is given (holding its placeholder) even when the
        // value comes from a file rather than the host's environment.
        let brokered = |k: &String| self.credentials.iter().any(|c| c.env.as_ref() == Some(k));
        caps.env = self.plugin_env(
            grant
                .env
                .iter()
                .filter_map(|k| {
                    let v = std::env::var(k)
                        .ok()
                        .or_else(|| brokered(k).then(String::new));
                    v.map(|v| (k.clone(), v))
                })
                .collect(),
        );
        if !grant.http.is_empty() {
            let mut allow = grant.http.clone();
            allow.extend(self.ceiling_patterns());
            caps.net = Some(NetGrant {
                allow,
                also: None,
                allow_private: self.policy.network.allow_private.clone(),
                max_response_bytes: self.policy.network.max_response_bytes,
                timeout: self.policy.network.timeout,
                deadline: None,
                refusals: Default::default(),
                credentials: self.credentials.clone(),
                leaks: Default::default(),
            });
        }
        *limits = grant.limits(limits);
        if let Some(net) = &mut caps.net {
            net.deadline = Some(Instant::now() + limits.timeout);
        }
        Ok(())
    }

    /// The network grant of a `fetch` or `download` call (`tool`): the host that was approved,
    /// and, for redirects, any host whose `<tool>:HOST` key is already allowed without a
    /// prompt (a rule, a grant, the mode) and not denied or forced to ask by a rule.
    pub(super) fn fetch_grant(&self, tool: &'static str, session: &str, input: &Value) -> NetGrant {
        let approved: Vec<HostPattern> = fetch_target(input)
            .ok()
            .and_then(|(_, host, _)| HostPattern::parse(&host).ok())
            .into_iter()
            .collect();
        let policy = self.policy.clone();
        let allow_all = self.mode() == Mode::AllowAll;
        let mut patterns: Vec<KeyPattern> = self.cli_grants.clone();
        patterns.extend(
            self.session_grants_or_none(session)
                .iter()
                .filter_map(|g| KeyPattern::parse(g).ok()),
        );
        if let Ok(grants) = self.project_grants.current() {
            patterns.extend(grants.into_iter().map(|g| g.pattern));
        }
        let ceiling = self.ceiling_patterns();
        let also: crate::sandbox::net::HostCheck = Arc::new(move |host: &str| {
            // `also` sees the host alone: only a ceiling pattern for every port of it lets a
            // redirect through this way (one naming a port is matched by the lists above).
            let inside = |p: &HostPattern| {
                p.port().is_none() && (p.matches("https", host, 443) || p.matches("http", host, 80))
            };
            if ceiling.first().is_some_and(|c| !c.iter().any(inside)) {
                return false;
            }
            let key = CallKey::with_target(tool, host);
            match policy.strictest(&key).map(|r| r.decision) {
                Some(RuleDecision::Deny) | Some(RuleDecision::Ask) => false,
                Some(RuleDecision::Allow) => true,
                None => allow_all || patterns.iter().any(|p| p.matches(&key)),
            }
        });
        let mut allow = vec![approved];
        allow.extend(self.ceiling_patterns());
        NetGrant {
            allow,
            also: Some(also),
            allow_private: self.policy.network.allow_private.clone(),
            max_response_bytes: self.policy.network.max_response_bytes,
            timeout: self.policy.network.timeout,
            deadline: None,
            refusals: Default::default(),
            credentials: self.credentials.clone(),
            leaks: Default::default(),
        }
    }

    /// Whether `tool` is a scan that runs on the scans' thread (see [`Gate::run_scans_apart`]).
    fn is_scan_apart(&self, tool: &crate::tools::registry::RegisteredTool) -> bool {
        self.scans_apart.load(std::sync::atomic::Ordering::Relaxed)
            && tool.info.builtin_kind().is_some_and(|b| b.is_scan())
    }

    fn ok_observation(
        &self,
        name: &str,
        call_id: &str,
        out: wit::Output,
        max: usize,
    ) -> Observation {
        let mut o = Observation::new(name, Status::Ok, call_id);
        o.summary = out.summary;
        o.truncated = out.truncated;
        o.data = observe::parse_data(&out.data);
        match crate::tools::image::take_image(&mut o.data) {
            Ok(image) => o.images.extend(image),
            Err(why) => {
                return Observation::error(
                    name,
                    call_id,
                    "bad-image",
                    format!("the tool `{name}` returned an image the host does not pass on: {why}"),
                    Some("the image was dropped; report this to the tool's author".into()),
                )
            }
        }
        for t in out.totals {
            o.totals.insert(
                t.unit,
                Total {
                    seen: t.seen,
                    returned: t.returned,
                },
            );
        }
        if out.content.len() > max {
            let rel = format!("{OUTPUTS_DIR}/{call_id}.txt");
            let file = self.workspace.root().join(&rel);
            let saved = crate::workspace::layout::write_state_file(&file, out.content.as_bytes());
            let reference = if saved.is_ok() {
                rel.clone()
            } else {
                "(could not be saved)".into()
            };
            if let Some(cut) = cut_head_tail(&out.content, max, &reference) {
                o.totals.insert(
                    "bytes".into(),
                    Total {
                        seen: out.content.len() as u64,
                        returned: cut.len() as u64,
                    },
                );
                o.content = cut;
                o.truncated = true;
                if saved.is_ok() {
                    o.full_output_ref = Some(rel);
                }
            }
        } else {
            o.content = out.content;
        }
        o
    }
}

fn guest_parent(guest: &str) -> Option<String> {
    let i = guest.rfind('/')?;
    let parent = &guest[..i];
    (!parent.is_empty()).then(|| parent.to_string())
}
