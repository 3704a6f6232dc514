//! The approval broker (SPEC §5 stage 9): at most one open request per session, each bound to
//! the exact input's hash and an expiry; the first answer from any surface wins and later ones
//! are no-ops.

use crate::tools::Risk;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
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
}

/// Routes requests to surfaces and answers back; first answer wins.
#[derive(Default)]
pub struct Broker {
    pending: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    sessions: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Broker {
    /// Answer request `id`. Returns false (a no-op) when it was already answered or expired.
    pub fn answer(&self, id: &str, answer: Answer) -> bool {
        let sender = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        match sender {
            Some(tx) => tx.send(answer).is_ok(),
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
    /// at a time per session. `None` when the request expired unanswered.
    pub async fn ask(
        self: &Arc<Self>,
        surface: Option<Arc<dyn Approver>>,
        request: ApprovalRequest,
        expiry: Duration,
    ) -> Option<Answer> {
        let lock = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.entry(request.session.clone()).or_default().clone()
        };
        let _one_at_a_time = lock.lock().await;
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request.id.clone(), tx);
        let id = request.id.clone();
        if let Some(surface) = surface {
            let broker = self.clone();
            let id = id.clone();
            tokio::spawn(async move {
                if let Some(answer) = surface.ask(request).await {
                    broker.answer(&id, answer);
                }
            });
        }
        let answer = tokio::time::timeout(expiry, rx)
            .await
            .ok()
            .and_then(Result::ok);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        answer
    }
}

/// Remove control characters and ANSI escape sequences so a prompt shows only plain text.
pub fn plain_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ ... final byte in @..~ ; OSC: ESC ] ... BEL or ESC \ ; else skip one.
                match chars.peek() {
                    Some('[') => {
                        chars.next();
                        for c in chars.by_ref() {
                            if ('@'..='~').contains(&c) {
                                break;
                            }
                        }
                    }
                    Some(']') => {
                        chars.next();
                        while let Some(c) = chars.next() {
                            if c == '\u{7}' {
                                break;
                            }
                            if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                                chars.next();
                                break;
                            }
                        }
                    }
                    Some(_) => {
                        chars.next();
                    }
                    None => {}
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            // Bidi overrides can make text read differently from what runs.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
        let task =
            tokio::spawn(async move { b.ask(None, request("r1"), Duration::from_secs(5)).await });
        while broker.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        let first = broker.answer("r1", Answer::Deny);
        let second = broker.answer("r1", Answer::Once);
        assert!(first);
        assert!(!second);
        assert_eq!(task.await.unwrap(), Some(Answer::Deny));
    }

    #[tokio::test]
    async fn racing_answers_exactly_one_wins() {
        let broker = Arc::new(Broker::default());
        let b = broker.clone();
        let task =
            tokio::spawn(async move { b.ask(None, request("r2"), Duration::from_secs(5)).await });
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
        assert!(task.await.unwrap().is_some());
    }

    #[tokio::test]
    async fn unanswered_request_expires() {
        let broker = Arc::new(Broker::default());
        let answer = broker
            .ask(None, request("r3"), Duration::from_millis(50))
            .await;
        assert_eq!(answer, None);
        assert!(!broker.answer("r3", Answer::Once));
    }
}
