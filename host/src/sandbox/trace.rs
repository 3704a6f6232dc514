//! An optional record of what one call touched: the files and directories the filesystem
//! guard was asked for (and what it refused), the directory entries it left out of listings,
//! and the HTTP requests the network hooks sent or refused. `toolgate plugin test` turns it on
//! for one call with [`scope`]; every other call has none, and the guard and the hooks then
//! cost one `Option` check per operation (no allocation, no lock).
//!
//! The record is what the host saw. A path the guest's own WASI library cannot place in any
//! of its mounts (a plugin granted `src` opening `/workspace/README.md`) fails inside the guest
//! with `not-found` and never reaches the host, so it is not in the record.

use serde::Serialize;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// Events kept per call; later ones are counted in [`Trace::dropped`].
pub const MAX_EVENTS: usize = 10_000;

/// One call's record, shared by its filesystem guard and network hooks.
pub type TraceHandle = Arc<Mutex<Trace>>;

tokio::task_local! {
    static CURRENT: TraceHandle;
}

/// Run `f` with `trace` as the record of every sandbox call `f` makes (on this task).
pub async fn scope<F: Future>(trace: TraceHandle, f: F) -> F::Output {
    CURRENT.scope(trace, f).await
}

/// The record the current task asked for, if any (read once per call).
pub(crate) fn current() -> Option<TraceHandle> {
    CURRENT.try_with(Arc::clone).ok()
}

/// What a filesystem operation was, as far as the guard can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsOp {
    /// A file opened for reading.
    Read,
    /// A directory's entries listed.
    List,
    /// Metadata asked for (`stat`, `metadata-hash`).
    Stat,
    /// A symlink's target read.
    Readlink,
    /// An existing file opened for writing (or truncated).
    Write,
    /// A file or directory created.
    Create,
    /// A file or directory removed.
    Remove,
    /// Renamed (the event's path is the old name, `to` the new one).
    Rename,
    /// A hard link made (`to` is the new name).
    Link,
    /// A symlink made at the path.
    Symlink,
    /// Timestamps set.
    SetTimes,
}

impl FsOp {
    /// Whether the operation changes the workspace.
    pub fn writes(self) -> bool {
        matches!(
            self,
            FsOp::Write
                | FsOp::Create
                | FsOp::Remove
                | FsOp::Rename
                | FsOp::Link
                | FsOp::Symlink
                | FsOp::SetTimes
        )
    }

    /// The word used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FsOp::Read => "read",
            FsOp::List => "list",
            FsOp::Stat => "stat",
            FsOp::Readlink => "readlink",
            FsOp::Write => "write",
            FsOp::Create => "create",
            FsOp::Remove => "remove",
            FsOp::Rename => "rename",
            FsOp::Link => "link",
            FsOp::Symlink => "symlink",
            FsOp::SetTimes => "set-times",
        }
    }
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "why", rename_all = "kebab-case")]
pub enum Outcome {
    /// It was done.
    Ok,
    /// The host refused it (the deny-list, `.toolgate/`, outside the workspace, not granted).
    Refused(String),
    /// It was allowed and failed (not found, not a directory, ...).
    Failed(String),
}

/// One filesystem operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FsEvent {
    /// What was asked.
    pub op: FsOp,
    /// Workspace-relative, `/`-separated (`.` for the root); as the guest wrote it when it
    /// leaves the workspace.
    pub path: String,
    /// The other end of a rename or link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// One HTTP request the guest asked the host to send.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetEvent {
    /// `GET`, `POST`, ...
    pub method: String,
    /// `scheme://host:port`.
    pub target: String,
    /// The parts of `target`, lowercased.
    pub scheme: String,
    /// The host name or address.
    pub host: String,
    /// The port (the scheme's default when the URL has none).
    pub port: u16,
    /// The response status when it was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Refused by the host (with the host's words), failed, or sent.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A directory the call had mounted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mount {
    /// Workspace-relative (`.` for the root).
    pub path: String,
    /// Mounted writable.
    pub writable: bool,
}

/// What one call touched.
#[derive(Debug, Default, Serialize)]
pub struct Trace {
    /// The directories mounted for the call.
    pub mounts: Vec<Mount>,
    /// Filesystem operations, in order.
    pub fs: Vec<FsEvent>,
    /// Entries the guard left out of directory listings (secrets, `.toolgate/`).
    pub hidden: Vec<String>,
    /// HTTP requests, in order.
    pub net: Vec<NetEvent>,
    /// Events not kept past [`MAX_EVENTS`].
    pub dropped: usize,
}

impl Trace {
    fn full(&mut self) -> bool {
        let n = self.fs.len() + self.hidden.len() + self.net.len();
        if n >= MAX_EVENTS {
            self.dropped += 1;
        }
        n >= MAX_EVENTS
    }

    /// Record a filesystem operation; a repeat of the last one is not kept twice.
    pub(crate) fn fs(&mut self, event: FsEvent) {
        if self.fs.last() == Some(&event) || self.full() {
            return;
        }
        self.fs.push(event);
    }

    /// Record an entry left out of a listing.
    pub(crate) fn hidden(&mut self, rel: &str) {
        if self.hidden.iter().any(|h| h == rel) || self.full() {
            return;
        }
        self.hidden.push(rel.to_string());
    }

    /// Record an HTTP request.
    pub(crate) fn net(&mut self, event: NetEvent) {
        if !self.full() {
            self.net.push(event);
        }
    }
}

/// Record into `trace`, if there is one (a poisoned lock still records).
pub(crate) fn with(trace: Option<&TraceHandle>, f: impl FnOnce(&mut Trace)) {
    if let Some(t) = trace {
        f(&mut t.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// The workspace-relative place of a mount the guest sees at `guest`.
pub(crate) fn mount(guest: &str, writable: bool) -> Mount {
    let rel = guest
        .strip_prefix(crate::workspace::GUEST_ROOT)
        .map(|r| r.trim_start_matches('/'))
        .unwrap_or(guest);
    Mount {
        path: if rel.is_empty() {
            ".".into()
        } else {
            rel.into()
        },
        writable,
    }
}

/// A request on its way, to be recorded when it ends.
pub(crate) struct NetSeen {
    trace: TraceHandle,
    event: NetEvent,
    /// The grant's refusal list and its length before the request.
    refusals: Option<(Arc<Mutex<Vec<String>>>, usize)>,
}

impl NetSeen {
    /// Start recording `request` (`None` without a trace: nothing is done).
    pub(crate) fn start<B>(
        trace: Option<TraceHandle>,
        request: &http::Request<B>,
        refusals: Option<Arc<Mutex<Vec<String>>>>,
    ) -> Option<NetSeen> {
        let trace = trace?;
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("").to_ascii_lowercase();
        let host = uri
            .host()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let shown = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let refusals = refusals.map(|r| {
            let n = r.lock().map(|v| v.len()).unwrap_or(0);
            (r, n)
        });
        Some(NetSeen {
            trace,
            event: NetEvent {
                method: request.method().to_string(),
                target: format!("{scheme}://{shown}:{port}"),
                scheme,
                host,
                port,
                status: None,
                outcome: Outcome::Ok,
            },
            refusals,
        })
    }

    /// Record how it ended: the response status, or the error (`words` for it) and what the
    /// host refused it for, if it did.
    pub(crate) fn finish<E>(self, result: Result<u16, &E>, words: impl Fn(&E) -> String) {
        let mut event = self.event;
        let granted = self.refusals.is_some();
        let refused = self
            .refusals
            .and_then(|(r, n)| r.lock().ok()?.get(n).cloned());
        match (result, refused) {
            (Ok(status), _) => event.status = Some(status),
            (Err(_), Some(why)) => event.outcome = Outcome::Refused(why),
            (Err(_), None) if !granted => {
                event.outcome = Outcome::Refused(
                    "the call has no network grant: the manifest lists no http hosts".into(),
                )
            }
            (Err(e), None) => event.outcome = Outcome::Failed(words(e)),
        }
        with(Some(&self.trace), |t| t.net(event));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_trace_is_current_only_inside_its_scope_and_keeps_no_repeats() {
        assert!(current().is_none());
        let t: TraceHandle = Arc::default();
        let seen = scope(t.clone(), async { current().is_some() }).await;
        assert!(seen);
        assert!(current().is_none());
        let e = FsEvent {
            op: FsOp::Read,
            path: "src/a.txt".into(),
            to: None,
            outcome: Outcome::Ok,
        };
        with(Some(&t), |t| t.fs(e.clone()));
        with(Some(&t), |t| t.fs(e.clone()));
        with(Some(&t), |t| t.hidden(".env"));
        with(Some(&t), |t| t.hidden(".env"));
        let t = t.lock().unwrap();
        assert_eq!(t.fs, vec![e]);
        assert_eq!(t.hidden, vec![".env".to_string()]);
        assert!(FsOp::Create.writes() && !FsOp::Stat.writes());
    }
}
