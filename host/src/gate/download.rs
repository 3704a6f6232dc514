//! The `download` built-in around its guest: the write it makes must be allowed as well as its
//! host, its network grant and byte budget, the temporary file it streams into, and that file's
//! removal after the call whatever happened (a guest stopped mid-download by its deadline, a
//! cancellation or a crash cannot leave it behind).
//!
//! How one approval covers both (docs/decisions.md, the `download` section): the call is
//! keyed `download:<host>` and the ladder decides that key. A person approving it sees the
//! target path in the same prompt, so that approval covers the write too. Allowed without a
//! prompt (a rule, a grant, the mode, a hook), it runs only when the write is allowed in
//! advance as well, by what allows a `write` there (`write:<dir>/`); otherwise the write is
//! asked about here, once, before anything runs. A deny rule for the write refuses the download
//! at validation, before anyone is asked.

use crate::cancel::CancelToken;
use crate::gate::approval::Approver;
use crate::gate::decision::Stage;
use crate::gate::validate::{write_key, Validated, DOWNLOAD_TOOL};
use crate::gate::{Gate, Prepared};
use crate::key::{CallKey, KeyPattern, RuleDecision};
use crate::policy::{Mode, NetworkPolicy, Policy};
use crate::sandbox::net::NetGrant;
use crate::text::escape_name;
use crate::tools::registry::PathUse;
use crate::tools::{Observation, Status};
use crate::workspace::{Access, ScopedPath};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Body bytes a download may receive when its `max_bytes` is not given (the guest's default).
pub(crate) const DEFAULT_MAX_BYTES: u64 = 100 << 20;
/// The largest `max_bytes` (the guest's schema maximum).
pub(crate) const MAX_MAX_BYTES: u64 = 1 << 30;
/// The variable that names the temporary file to the guest.
const TEMP_ENV: &str = "TOOLGATE_DOWNLOAD_TEMP";
/// How the temporary file's name starts (the guest accepts only such a name).
const TEMP_PREFIX: &str = ".toolgate-download-";

/// What a download call runs with.
pub(super) struct DownloadRun {
    /// The network grant: the approved host, redirects to hosts allowed for `download`.
    pub(super) net: NetGrant,
    /// The guest's environment: the temporary file's sandbox path.
    pub(super) env: Vec<(String, String)>,
    /// The temporary file on the host, removed after the call if it is still there.
    pub(super) temp: PathBuf,
    /// The target, workspace-relative, for messages.
    pub(super) target: String,
}

impl Gate {
    /// Make sure the write is allowed (asking now when only the host was), then build the
    /// call's grant. `Err`: the observation that ends the call, nothing created.
    pub(super) async fn download_run(
        &self,
        session: &str,
        p: &mut Prepared,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
    ) -> Result<DownloadRun, Box<Observation>> {
        let name = p.tool.info.name.clone();
        let Some(target) = write_target(&p.paths) else {
            return Err(Box::new(Observation::error(
                &name,
                call_id,
                "bad-input",
                "the download has no target path".into(),
                Some("pass `path`: the workspace file to write".into()),
            )));
        };
        let write = write_key(&target);
        if p.decision.stage != Stage::Ask && !self.write_allowed_in_advance(session, &write) {
            self.ask_for_write(session, p, &target, &write, call_id, approver, cancel)
                .await?;
        }
        let mut net = self.fetch_grant(DOWNLOAD_TOOL, session, &p.input);
        net.max_response_bytes = host_cap(&self.policy, &p.input);
        let file = format!(
            "{TEMP_PREFIX}{}.part",
            call_id.strip_prefix("call-").unwrap_or(call_id)
        );
        let (Some(dir), Some((guest_dir, _))) =
            (target.host.parent(), target.guest.rsplit_once('/'))
        else {
            return Err(Box::new(Observation::error(
                &name,
                call_id,
                "bad-input",
                format!("{} has no parent directory", escape_name(&target.rel)),
                None,
            )));
        };
        Ok(DownloadRun {
            net,
            env: vec![(TEMP_ENV.to_string(), format!("{guest_dir}/{file}"))],
            temp: dir.join(file),
            target: target.rel.clone(),
        })
    }

    /// Ask about the write (keyed as `write` would be there), with the download's own
    /// description; then check the path and its staleness again, as the ladder does after it
    /// asks.
    #[allow(clippy::too_many_arguments)]
    async fn ask_for_write(
        &self,
        session: &str,
        p: &mut Prepared,
        target: &ScopedPath,
        write: &CallKey,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
    ) -> Result<(), Box<Observation>> {
        let forced = self
            .policy
            .strictest(write)
            .is_some_and(|r| r.decision == RuleDecision::Ask);
        let v = Validated {
            tool: p.tool.clone(),
            input: p.input.clone(),
            paths: p.paths.clone(),
            lsp_plan: None,
        };
        let asked = self
            .ask(
                session,
                &p.tool.info,
                write,
                &v,
                call_id,
                approver,
                cancel,
                forced,
            )
            .await;
        if let Err((_, o)) = asked {
            return Err(Box::new(explain_write_refusal(o, target, write)));
        }
        let name = p.tool.info.name.as_str();
        match self.workspace.scope(&target.rel, Access::Write) {
            Ok(again) if again == *target => {}
            _ => {
                return Err(Box::new(Observation::error(
                    name,
                    call_id,
                    "changed",
                    format!(
                        "{} resolved differently after the approval",
                        escape_name(&target.rel)
                    ),
                    Some("retry the call".into()),
                )))
            }
        }
        p.before = self
            .check_writes(session, &p.tool, &p.paths, call_id)
            .map_err(|(_, o)| Box::new(o))?;
        Ok(())
    }

    /// Whether `write` (a `write:<dir>/` key) is allowed without a prompt: an allow rule, else
    /// no deny or ask rule and one of allow-all, `--allow-write`, a `--grant`, a grant of this
    /// session or of the project. A state database that cannot be read allows nothing here.
    fn write_allowed_in_advance(&self, session: &str, write: &CallKey) -> bool {
        match self.policy.strictest(write).map(|r| r.decision) {
            Some(RuleDecision::Allow) => true,
            Some(RuleDecision::Ask) | Some(RuleDecision::Deny) => false,
            None => {
                self.mode() == Mode::AllowAll
                    || self.allow_writes
                    || self.cli_grants.iter().any(|g| g.matches(write))
                    || self
                        .session_grants_or_none(session)
                        .iter()
                        .filter_map(|g| KeyPattern::parse(g).ok())
                        .any(|g| g.matches(write))
                    || matches!(self.project_grants.find(write), Ok(Some(_)))
            }
        }
    }

    /// Remove the call's temporary file if it is still there (the guest removes it on every
    /// failure it sees; this is for one that was stopped), and say so in the observation.
    pub(super) fn download_cleanup(&self, run: &DownloadRun, o: &mut Observation) {
        match remove_beneath(self.workspace.root(), &run.temp) {
            Ok(false) => {}
            Ok(true) => {
                let note = format!(
                    "the partial download was removed; nothing was written to {}",
                    escape_name(&run.target)
                );
                if o.status != Status::Ok {
                    o.reason = Some(match o.reason.take() {
                        Some(r) => format!("{r} ({note})"),
                        None => note.clone(),
                    });
                    o.content.push_str(&format!("\nnote: {note}"));
                }
                match &mut o.data {
                    Value::Object(map) => {
                        map.insert("partial_removed".into(), json!(true));
                    }
                    d if d.is_null() => *d = json!({ "partial_removed": true }),
                    _ => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, path = %run.temp.display(), "removing a download's temporary file failed");
            }
        }
    }
}

/// The path a download writes.
fn write_target(paths: &[(String, PathUse, ScopedPath)]) -> Option<ScopedPath> {
    paths
        .iter()
        .find(|(_, u, _)| *u == PathUse::Write)
        .map(|(_, _, p)| p.clone())
}

/// A refusal of the write, saying that the host was allowed and the file was not.
fn explain_write_refusal(mut o: Observation, target: &ScopedPath, write: &CallKey) -> Observation {
    if o.status != Status::Denied {
        return o;
    }
    let why = format!(
        "the download's host is allowed, but writing {} is not allowed in advance (`{write}`, what `write` would need there) and was asked about separately",
        escape_name(&target.rel)
    );
    let reason = match o.reason.take() {
        Some(r) => format!("{why}: {r}"),
        None => why,
    };
    o.summary = format!("denied: {reason}");
    o.content = format!(
        "denied ({}): {reason}\nhint: {}",
        o.stage.as_deref().unwrap_or("ask"),
        o.hint.as_deref().unwrap_or("")
    );
    o.reason = Some(reason);
    o
}

/// Whether a policy layer set `[network] max_response_bytes` (its built-in 10 MiB is the budget
/// of `fetch` and plugins; a download has its own unless the policy says otherwise).
pub(crate) fn policy_sets_response_budget(policy: &Policy) -> bool {
    policy.network.max_response_bytes != NetworkPolicy::default().max_response_bytes
        || policy.layers.iter().any(|l| {
            l.applied
                .iter()
                .any(|a| a.starts_with("[network] max_response_bytes"))
        })
}

/// The most body bytes the host lets this download's requests deliver: one more than its
/// `max_bytes` (so the guest sees the overrun and says so in its own words), and never more
/// than a `[network] max_response_bytes` a policy layer set.
pub(crate) fn host_cap(policy: &Policy, input: &Value) -> u64 {
    let asked = input
        .get("max_bytes")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_MAX_BYTES)
        .min(MAX_MAX_BYTES);
    let cap = asked + 1;
    if policy_sets_response_budget(policy) {
        cap.min(policy.network.max_response_bytes)
    } else {
        cap
    }
}

/// Remove the file `path` (below `root`) without following a link on the way: its directory
/// is opened beneath the root with no symlinks, and the name unlinked there. `Ok(false)`: it
/// was not there.
#[cfg(target_os = "linux")]
fn remove_beneath(root: &Path, path: &Path) -> std::io::Result<bool> {
    use rustix::fs::{AtFlags, Mode as FileMode, OFlags, ResolveFlags, CWD};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(false);
    };
    let rel = dir.strip_prefix(root).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not inside {}", path.display(), root.display()),
        )
    })?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root_fd = rustix::fs::openat(CWD, root, flags | OFlags::NOFOLLOW, FileMode::empty())?;
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let dir_fd = crate::fsutil::openat2_retry(
        &root_fd,
        rel,
        flags,
        FileMode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    )?;
    match rustix::fs::unlinkat(&dir_fd, name, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Elsewhere: a plain removal.
#[cfg(not(target_os = "linux"))]
fn remove_beneath(_root: &Path, path: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_host_cap_is_max_bytes_and_a_policy_budget_only_when_one_is_set() {
        let mut policy = Policy::default();
        assert!(!policy_sets_response_budget(&policy));
        assert_eq!(host_cap(&policy, &json!({})), DEFAULT_MAX_BYTES + 1);
        assert_eq!(host_cap(&policy, &json!({"max_bytes": 10})), 11);
        assert_eq!(
            host_cap(&policy, &json!({"max_bytes": u64::MAX})),
            MAX_MAX_BYTES + 1
        );
        policy.network.max_response_bytes = 1024;
        assert!(policy_sets_response_budget(&policy));
        assert_eq!(host_cap(&policy, &json!({})), 1024);
        assert_eq!(host_cap(&policy, &json!({"max_bytes": 10})), 11);
        // Set to exactly the built-in value by a layer: it still binds.
        let mut policy = Policy::default();
        policy.layers.push(crate::policy::LayerReport {
            kind: crate::policy::LayerKind::User,
            origin: "user".into(),
            trusted: true,
            applied: vec!["[network] max_response_bytes = 10485760".into()],
        });
        assert!(policy_sets_response_budget(&policy));
        assert_eq!(host_cap(&policy, &json!({})), 10 << 20);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn remove_beneath_removes_the_file_and_never_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/.toolgate-download-1.part"), "x").unwrap();
        assert!(remove_beneath(&root, &root.join("d/.toolgate-download-1.part")).unwrap());
        assert!(!root.join("d/.toolgate-download-1.part").exists());
        assert!(!remove_beneath(&root, &root.join("d/.toolgate-download-1.part")).unwrap());
        std::fs::write(root.join(".toolgate-download-2.part"), "x").unwrap();
        assert!(remove_beneath(&root, &root.join(".toolgate-download-2.part")).unwrap());
        // A directory swapped for a link out of the workspace: nothing outside is touched.
        std::fs::write(outside.path().join(".toolgate-download-3.part"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("l")).unwrap();
        assert!(remove_beneath(&root, &root.join("l/.toolgate-download-3.part")).is_err());
        assert!(outside.path().join(".toolgate-download-3.part").exists());
    }
}
