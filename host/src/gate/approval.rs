//! The approval broker (the ladder's ask stage): at most one open request per session, each bound to
//! the exact input's hash and an expiry; the first answer from any surface wins and later ones
//! are no-ops.
//!
//! A request belongs to the call that asked, not to any surface's id for it: when that call is
//! cancelled the request is withdrawn at once ([`Broker::withdraw`], or the call's cancel flag
//! seen while waiting), every surface is told ([`Approver::withdrawn`]), and a later answer
//! finds nothing to approve.

use crate::cancel::CancelToken;
use crate::tools::Risk;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a request waits for an answer before it counts as `deny`.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(300);

/// An answer to an approval request. On the wire (console, elicitation, serde) it is its
/// [`Answer::name`]: `once`, `session`, `project`, `deny`, or `session:N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run this one call.
    Once,
    /// Run it, and calls with the same key for the rest of the session.
    Session,
    /// Run it, and save the key as a project grant (sandboxed tools only).
    Project,
    /// Do not run it.
    Deny,
    /// Run it, and calls matching `scopes[i].key` of the request for the rest of the session
    /// (a narrower scope than [`Answer::Session`]'s key; offered only with `Session`).
    SessionScope(u8),
}

impl Answer {
    /// The lowercase kind (`session` for a [`Answer::SessionScope`] too).
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Once => "once",
            Answer::Session | Answer::SessionScope(_) => "session",
            Answer::Project => "project",
            Answer::Deny => "deny",
        }
    }

    /// The wire form: [`Answer::as_str`], or `session:N` for a scope.
    pub fn name(self) -> String {
        match self {
            Answer::SessionScope(i) => format!("session:{i}"),
            a => a.as_str().to_string(),
        }
    }

    /// Read a wire form ([`Answer::name`]); `None` for anything else.
    pub fn parse(s: &str) -> Option<Answer> {
        match s {
            "once" => Some(Answer::Once),
            "session" => Some(Answer::Session),
            "project" => Some(Answer::Project),
            "deny" => Some(Answer::Deny),
            _ => {
                let n = s.strip_prefix("session:")?;
                // Digits only: no sign, no spaces.
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                n.parse().ok().map(Answer::SessionScope)
            }
        }
    }

    /// Whether this answer may be taken for `request`: one of its choices, or a scope it
    /// offers (only alongside `session`).
    pub fn offered(self, request: &ApprovalRequest) -> bool {
        offered(self, &request.choices, &request.scopes)
    }
}

/// [`Answer::offered`] on the parts of a request.
pub fn offered(answer: Answer, choices: &[Answer], scopes: &[Scope]) -> bool {
    match answer {
        Answer::SessionScope(i) => {
            choices.contains(&Answer::Session) && usize::from(i) < scopes.len()
        }
        a => choices.contains(&a),
    }
}

impl Serialize for Answer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Answer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Answer::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown answer `{s}`: expected once, session, project, deny or session:N"
            ))
        })
    }
}

/// One scope a `session` answer may grant, narrowest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Scope {
    /// The key pattern saved as the session grant.
    pub key: String,
    /// What it allows, in plain words.
    pub allows: String,
}

/// What the user is asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalRequest {
    /// Unique id; answers name it.
    pub id: String,
    /// The session asking.
    pub session: String,
    /// The tool.
    pub tool: String,
    /// The key a `session` or `project` answer grants.
    pub key: String,
    /// What exactly will happen, in plain text (no control characters).
    pub description: String,
    /// The tool's risk.
    pub risk: Risk,
    /// sha256 of the exact input that will run if approved.
    pub input_sha256: String,
    /// The answers on offer (`project` only when the tool's ceiling allows it).
    pub choices: Vec<Answer>,
    /// The scopes a session answer may grant, narrowest first, the last one `key` itself
    /// (answered [`Answer::SessionScope`]`(i)`, or `Session` for the last); empty when there
    /// is nothing narrower than `key` (tools other than the shell, compound commands).
    pub scopes: Vec<Scope>,
    /// Seconds until the request expires (then it is a `deny`).
    pub expires_in_secs: u64,
}

/// A future returned by an [`Approver`].
pub type AnswerFuture = Pin<Box<dyn Future<Output = Option<Answer>> + Send>>;

/// An approval surface: a terminal prompt, an MCP client's elicitation, a test.
pub trait Approver: Send + Sync {
    /// Ask the user; `None` when the surface could not get an answer.
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture;

    /// `request` was withdrawn before it was answered (its call was cancelled): stop showing
    /// it, say so if the user may still be looking at it, and end the future [`Approver::ask`]
    /// returned. Any answer given from now on is a no-op. The default does nothing.
    fn withdrawn(&self, request: &ApprovalRequest) {
        let _ = request;
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// The first answer, from any surface.
    Answered(Answer),
    /// No answer before the expiry (counts as `deny`).
    Expired,
    /// The call was cancelled while it waited: nothing was approved.
    Withdrawn,
}

/// How often a waiting request looks at its call's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// What ends a pending request early.
enum Resolution {
    Answer(Answer),
    Withdrawn,
}

/// A request waiting for its answer.
struct Pending {
    tx: oneshot::Sender<Resolution>,
    request: ApprovalRequest,
    asked_ms: i64,
}

/// A request in the queue, as the console shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Queued {
    /// The request.
    #[serde(flatten)]
    pub request: ApprovalRequest,
    /// When it was asked, ms since the epoch.
    pub asked_ms: i64,
}

/// Why a bound answer ([`Broker::answer_bound`]) was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoundRefusal {
    /// Nothing waits under that id: answered from another surface, withdrawn or expired.
    #[error(
        "the request `{0}` is no longer waiting: it was answered elsewhere, withdrawn or expired"
    )]
    Gone(String),
    /// The input hash is not the one the request was asked with.
    #[error("the request `{0}` was asked for another input (its hash differs); reload the queue and answer what is shown")]
    Mismatch(String),
    /// The answer was not offered.
    #[error("`{answer}` is not one of the answers offered for `{id}`")]
    NotOffered {
        /// The request.
        id: String,
        /// The answer given.
        answer: &'static str,
    },
}

/// Routes requests to surfaces and answers back; first answer wins. It also keeps the queue
/// of waiting requests for the console, says when the queue changed, and counts the consoles
/// watching it: while one is, a call with no surface of its own waits for the console's
/// answer instead of being refused as headless.
pub struct Broker {
    pending: Mutex<HashMap<String, Pending>>,
    sessions: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    changes: tokio::sync::watch::Sender<u64>,
    /// Every console watching.
    watchers: Arc<AtomicUsize>,
    /// Consoles that see every session (the person's).
    persons: Arc<AtomicUsize>,
    /// Consoles that see one owner's sessions, by owner tag ([`session_owner`]).
    owners: Arc<Mutex<HashMap<String, usize>>>,
}

impl Default for Broker {
    fn default() -> Self {
        Broker {
            pending: Mutex::default(),
            sessions: Mutex::default(),
            changes: tokio::sync::watch::Sender::new(0),
            watchers: Arc::default(),
            persons: Arc::default(),
            owners: Arc::default(),
        }
    }
}

/// A console watching the queue; it stops counting when dropped.
pub struct Watching {
    all: Arc<AtomicUsize>,
    scope: WatchScope,
}

enum WatchScope {
    Person(Arc<AtomicUsize>),
    Owner(Arc<Mutex<HashMap<String, usize>>>, String),
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.all.fetch_sub(1, Ordering::SeqCst);
        match &self.scope {
            WatchScope::Person(n) => {
                n.fetch_sub(1, Ordering::SeqCst);
            }
            WatchScope::Owner(map, tag) => {
                let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(n) = map.get_mut(tag) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        map.remove(tag);
                    }
                }
            }
        }
    }
}

/// The owner tag in a session's name, when a server gave it one: `mcp-TAG-…` (an HTTP MCP
/// session), `conv-TAG-…` (a 2026-07-28 conversation) or `console-TAG-…` (a client's console),
/// TAG being [`OWNER_TAG_CHARS`] lowercase hex digits derived from the token that made it.
/// Sessions without one (stdio, `toolgate call`, the person's console) belong to no client
/// token: only the person's token sees them.
pub fn session_owner(session: &str) -> Option<&str> {
    let mut parts = session.splitn(3, '-');
    let (prefix, tag, rest) = (parts.next()?, parts.next()?, parts.next()?);
    let tagged = matches!(prefix, "mcp" | "conv" | "console")
        && tag.len() == OWNER_TAG_CHARS
        && tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && !rest.is_empty();
    tagged.then_some(tag)
}

/// Hex digits in an owner tag (see [`session_owner`]).
pub const OWNER_TAG_CHARS: usize = 16;

impl Broker {
    /// Answer request `id`. Returns false (a no-op) when it was already answered, withdrawn or
    /// expired.
    pub fn answer(&self, id: &str, answer: Answer) -> bool {
        self.resolve(id, Resolution::Answer(answer))
    }

    /// Withdraw request `id` (its call was cancelled): it ends as [`Asked::Withdrawn`], its
    /// surfaces are told, and later answers are no-ops. False when it was no longer pending.
    pub fn withdraw(&self, id: &str) -> bool {
        self.resolve(id, Resolution::Withdrawn)
    }

    /// Answer request `id` from a surface that shows requests by id (the console): taken only
    /// when `input_sha256` is the hash the request was asked with and `answer` was offered,
    /// so an answer can only approve the input it was shown.
    pub fn answer_bound(
        &self,
        id: &str,
        input_sha256: &str,
        answer: Answer,
    ) -> Result<(), BoundRefusal> {
        self.answer_bound_if(id, input_sha256, answer, |_| true)
    }

    /// [`Broker::answer_bound`] for a surface that may answer only some sessions' requests:
    /// a request `may` refuses is treated as one that does not exist (the same
    /// [`BoundRefusal::Gone`]), so the answer tells nothing about it.
    pub fn answer_bound_if(
        &self,
        id: &str,
        input_sha256: &str,
        answer: Answer,
        may: impl Fn(&ApprovalRequest) -> bool,
    ) -> Result<(), BoundRefusal> {
        let pending = {
            let mut map = self.lock_pending();
            let Some(p) = map.get(id).filter(|p| may(&p.request)) else {
                return Err(BoundRefusal::Gone(id.to_string()));
            };
            if p.request.input_sha256 != input_sha256 {
                return Err(BoundRefusal::Mismatch(id.to_string()));
            }
            if !answer.offered(&p.request) {
                return Err(BoundRefusal::NotOffered {
                    id: id.to_string(),
                    answer: answer.as_str(),
                });
            }
            map.remove(id)
        };
        self.changed();
        match pending.map(|p| p.tx.send(Resolution::Answer(answer))) {
            Some(Ok(())) => Ok(()),
            _ => Err(BoundRefusal::Gone(id.to_string())),
        }
    }

    fn resolve(&self, id: &str, resolution: Resolution) -> bool {
        let pending = self.lock_pending().remove(id);
        match pending {
            Some(p) => {
                self.changed();
                p.tx.send(resolution).is_ok()
            }
            None => false,
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The ids of requests waiting for an answer.
    pub fn pending(&self) -> Vec<String> {
        self.lock_pending().keys().cloned().collect()
    }

    /// The requests waiting for an answer, oldest first, each with the seconds it has left.
    pub fn queue(&self) -> Vec<Queued> {
        let now = crate::state::now_ms();
        let mut queue: Vec<Queued> = self
            .lock_pending()
            .values()
            .map(|p| {
                let mut request = p.request.clone();
                let waited = u64::try_from(now.saturating_sub(p.asked_ms)).unwrap_or(0) / 1000;
                request.expires_in_secs = request.expires_in_secs.saturating_sub(waited);
                Queued {
                    request,
                    asked_ms: p.asked_ms,
                }
            })
            .collect();
        queue.sort_by(|a, b| (a.asked_ms, &a.request.id).cmp(&(b.asked_ms, &b.request.id)));
        queue
    }

    /// A receiver told each time the queue changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Count a console that sees every session (the person's) as watching until the guard is
    /// dropped.
    pub fn watch(&self) -> Watching {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        self.persons.fetch_add(1, Ordering::SeqCst);
        Watching {
            all: self.watchers.clone(),
            scope: WatchScope::Person(self.persons.clone()),
        }
    }

    /// Count a console that sees only the sessions tagged `owner` (a client token's) as
    /// watching until the guard is dropped.
    pub fn watch_owner(&self, owner: &str) -> Watching {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        *self
            .owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(owner.to_string())
            .or_default() += 1;
        Watching {
            all: self.watchers.clone(),
            scope: WatchScope::Owner(self.owners.clone(), owner.to_string()),
        }
    }

    /// Whether any console is watching the queue.
    pub fn watched(&self) -> bool {
        self.watchers.load(Ordering::SeqCst) > 0
    }

    /// Whether a console that can see (and answer) `session`'s requests is watching: the
    /// person's, or one of the token that made the session.
    pub fn watched_for(&self, session: &str) -> bool {
        if self.persons.load(Ordering::SeqCst) > 0 {
            return true;
        }
        session_owner(session).is_some_and(|tag| {
            self.owners
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(tag)
        })
    }

    /// Ask through `surface` (and any other surface that calls [`Broker::answer`]), one request
    /// at a time per session. While it waits, `cancel` (the asking call's cancel flag) is
    /// watched: once it is set the request is withdrawn.
    pub async fn ask(
        self: &Arc<Self>,
        surface: Option<Arc<dyn Approver>>,
        request: ApprovalRequest,
        expiry: Duration,
        cancel: CancelToken,
    ) -> Asked {
        let is_cancelled = || cancel.is_cancelled();
        let lock = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.entry(request.session.clone()).or_default().clone()
        };
        let _one_at_a_time = lock.lock().await;
        // Cancelled while it queued behind another request: never shown.
        if is_cancelled() {
            return Asked::Withdrawn;
        }
        let (tx, mut rx) = oneshot::channel();
        self.lock_pending().insert(
            request.id.clone(),
            Pending {
                tx,
                request: request.clone(),
                asked_ms: crate::state::now_ms(),
            },
        );
        self.changed();
        let id = request.id.clone();
        if let Some(surface) = &surface {
            let broker = self.clone();
            let id = id.clone();
            let asked = request.clone();
            let surface = surface.clone();
            tokio::spawn(async move {
                if let Some(answer) = surface.ask(asked).await {
                    broker.answer(&id, answer);
                }
            });
        }
        let watch_cancel = async {
            match cancel.flag() {
                Some(flag) => {
                    let mut tick = tokio::time::interval(CANCEL_POLL);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    while !flag.load(Ordering::SeqCst) {
                        tick.tick().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let resolution = tokio::select! {
            biased;
            r = &mut rx => r.ok(),
            _ = watch_cancel => Some(Resolution::Withdrawn),
            _ = tokio::time::sleep(expiry) => None,
        };
        if self.lock_pending().remove(&id).is_some() {
            self.changed();
        }
        // An answer that raced the removal above is still in the channel: take it.
        let resolution = resolution.or_else(|| rx.try_recv().ok());
        match resolution {
            Some(Resolution::Answer(a)) => Asked::Answered(a),
            Some(Resolution::Withdrawn) => {
                // The surface's own future ends when it sees this (an answer it still gets
                // finds nothing pending).
                if let Some(surface) = &surface {
                    surface.withdrawn(&request);
                }
                Asked::Withdrawn
            }
            None => Asked::Expired,
        }
    }
}

pub use crate::text::{escape_name, plain_text};

#[cfg(test)]
#[path = "approval_tests.rs"]
mod tests;
