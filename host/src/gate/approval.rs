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
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a request waits for an answer before it counts as `deny`.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(300);

/// An answer to an approval request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// Run this one call.
    Once,
    /// Run it, and calls with the same key for the rest of the session.
    Session,
    /// Run it, and save the key as a project grant (sandboxed tools only).
    Project,
    /// Do not run it.
    Deny,
}

impl Answer {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Once => "once",
            Answer::Session => "session",
            Answer::Project => "project",
            Answer::Deny => "deny",
        }
    }
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

/// Routes requests to surfaces and answers back; first answer wins.
#[derive(Default)]
pub struct Broker {
    pending: Mutex<HashMap<String, oneshot::Sender<Resolution>>>,
    sessions: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

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

    fn resolve(&self, id: &str, resolution: Resolution) -> bool {
        let sender = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        match sender {
            Some(tx) => tx.send(resolution).is_ok(),
            None => false,
        }
    }

    /// The ids of requests waiting for an answer.
    pub fn pending(&self) -> Vec<String> {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
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
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request.id.clone(), tx);
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
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::text::unshowable;

    fn request(id: &str) -> ApprovalRequest {
        ApprovalRequest {
            id: id.into(),
            session: "s".into(),
            tool: "write".into(),
            key: "write:src/".into(),
            description: "d".into(),
            risk: Risk::Write,
            input_sha256: "h".into(),
            choices: vec![Answer::Once, Answer::Deny],
            expires_in_secs: 5,
        }
    }

    #[test]
    fn ordinary_names_are_unchanged() {
        for name in [
            "src/a.txt",
            "./",
            "write:src/",
            "dir with space/ü.rs",
            "a\"b",
            "a\\b",
        ] {
            assert_eq!(escape_name(name), name);
        }
    }

    #[test]
    fn names_with_controls_are_escaped_and_quoted() {
        assert_eq!(escape_name("a\nb"), "\"a\\nb\"");
        assert_eq!(escape_name("a\tb\r"), "\"a\\tb\\r\"");
        assert_eq!(escape_name("x\u{1b}[31my"), "\"x\\x1b[31my\"");
        assert_eq!(escape_name("del\u{7f}"), "\"del\\x7f\"");
        assert_eq!(escape_name("abc\u{202e}txt.exe"), "\"abc\\u{202e}txt.exe\"");
        assert_eq!(escape_name("a\u{2028}b"), "\"a\\u{2028}b\"");
        assert_eq!(escape_name("nel\u{85}"), "\"nel\\u{85}\"");
        assert_eq!(escape_name("zw\u{200b}j"), "\"zw\\u{200b}j\"");
        // The same set as the tools' rendering: soft hyphen, invisible operators, tags.
        assert_eq!(escape_name("shy\u{ad}"), "\"shy\\u{ad}\"");
        assert_eq!(escape_name("a\u{206a}b"), "\"a\\u{206a}b\"");
        assert_eq!(escape_name("tag\u{e0041}"), "\"tag\\u{e0041}\"");
        assert_eq!(escape_name("anno\u{fff9}"), "\"anno\\u{fff9}\"");
        // Once quoted, quotes and backslashes are escaped too, so the form is unambiguous.
        assert_eq!(escape_name("a\\n\"\n"), "\"a\\\\n\\\"\\n\"");
        // A name that looks quoted is quoted again.
        assert_eq!(escape_name("\"a\\nb\""), "\"\\\"a\\\\nb\\\"\"");
        // The result is one line of visible characters.
        for name in ["a\nb", "\u{1b}]0;t\u{7}", "\u{2066}x\u{2069}"] {
            let shown = escape_name(name);
            assert!(!shown.chars().any(unshowable), "{shown}");
        }
    }

    #[test]
    fn ansi_and_controls_are_removed() {
        assert_eq!(plain_text("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
        assert_eq!(plain_text("x\u{1b}]0;title\u{7}y"), "xy");
        assert_eq!(plain_text("bell\u{7}\r"), "bell\\u{0007}\\u{000d}");
        assert_eq!(plain_text("a\u{202e}b"), "a\\u{202e}b");
    }

    #[tokio::test]
    async fn first_answer_wins_and_later_ones_are_noops() {
        let broker = Arc::new(Broker::default());
        let b = broker.clone();
        let task = tokio::spawn(async move {
            b.ask(
                None,
                request("r1"),
                Duration::from_secs(5),
                CancelToken::never(),
            )
            .await
        });
        while broker.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        let first = broker.answer("r1", Answer::Deny);
        let second = broker.answer("r1", Answer::Once);
        assert!(first);
        assert!(!second);
        assert_eq!(task.await.unwrap(), Asked::Answered(Answer::Deny));
    }

    #[tokio::test]
    async fn racing_answers_exactly_one_wins() {
        let broker = Arc::new(Broker::default());
        let b = broker.clone();
        let task = tokio::spawn(async move {
            b.ask(
                None,
                request("r2"),
                Duration::from_secs(5),
                CancelToken::never(),
            )
            .await
        });
        while broker.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        let handles: Vec<_> = [Answer::Once, Answer::Deny, Answer::Session, Answer::Once]
            .into_iter()
            .map(|a| {
                let b = broker.clone();
                std::thread::spawn(move || b.answer("r2", a))
            })
            .collect();
        let wins = handles
            .into_iter()
            .filter(|_| true)
            .map(|h| h.join().unwrap())
            .filter(|w| *w)
            .count();
        assert_eq!(wins, 1);
        assert!(matches!(task.await.unwrap(), Asked::Answered(_)));
    }

    #[tokio::test]
    async fn unanswered_request_expires() {
        let broker = Arc::new(Broker::default());
        let answer = broker
            .ask(
                None,
                request("r3"),
                Duration::from_millis(50),
                CancelToken::never(),
            )
            .await;
        assert_eq!(answer, Asked::Expired);
        assert!(!broker.answer("r3", Answer::Once));
    }

    /// Records what it was asked and what was withdrawn; never answers.
    #[derive(Default)]
    struct Silent {
        withdrawn: Mutex<Vec<String>>,
    }

    impl Approver for Silent {
        fn ask(&self, _request: ApprovalRequest) -> AnswerFuture {
            Box::pin(std::future::pending())
        }
        fn withdrawn(&self, request: &ApprovalRequest) {
            self.withdrawn.lock().unwrap().push(request.id.clone());
        }
    }

    #[tokio::test]
    async fn a_withdrawn_request_approves_nothing_and_tells_the_surface() {
        let broker = Arc::new(Broker::default());
        let silent = Arc::new(Silent::default());
        let (b, s) = (broker.clone(), silent.clone());
        let task = tokio::spawn(async move {
            b.ask(
                Some(s),
                request("r4"),
                Duration::from_secs(5),
                CancelToken::never(),
            )
            .await
        });
        while broker.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(broker.withdraw("r4"));
        assert_eq!(task.await.unwrap(), Asked::Withdrawn);
        assert!(
            !broker.answer("r4", Answer::Once),
            "a late answer is a no-op"
        );
        assert!(!broker.withdraw("r4"));
        assert_eq!(*silent.withdrawn.lock().unwrap(), vec!["r4".to_string()]);
    }

    #[tokio::test]
    async fn the_calls_cancel_flag_withdraws_its_request() {
        let broker = Arc::new(Broker::default());
        let silent = Arc::new(Silent::default());
        let flag = CancelToken::new();
        let (b, s, f) = (broker.clone(), silent.clone(), flag.clone());
        let task = tokio::spawn(async move {
            b.ask(Some(s), request("r5"), Duration::from_secs(5), f)
                .await
        });
        while broker.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        flag.cancel();
        assert_eq!(task.await.unwrap(), Asked::Withdrawn);
        assert!(broker.pending().is_empty());
        assert!(!broker.answer("r5", Answer::Once));
        assert_eq!(silent.withdrawn.lock().unwrap().len(), 1);
        // A call already cancelled is never asked.
        let answer = broker
            .ask(None, request("r6"), Duration::from_secs(5), flag)
            .await;
        assert_eq!(answer, Asked::Withdrawn);
    }
}
