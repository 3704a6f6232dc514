//! Approvals on MCP 2026-07-28: multi-round-trip requests (`input_required`) in place of
//! server-initiated elicitation, which that revision forbids.
//!
//! - **Round 1.** A `tools/call` whose ladder reaches "ask" does not run: the gate's question
//!   is caught by an [`MrtrApprover`], the call is withdrawn (audited `cancelled` at stage
//!   `ask`: nothing ran), and the answer is an `InputRequiredResult` holding one input request,
//!   `approval`: the same form elicitation 2025-11-25 clients get ([`super::elicit::message`],
//!   [`super::elicit::schema`]), and a `requestState` sealed by this server.
//! - **Round 2.** The client retries the same call with `inputResponses.approval` (the
//!   elicitation result) and the `requestState` echoed. The state is opened ([`StateKey::open`]):
//!   its HMAC-SHA256 tag must verify, it must not have expired, its tool, exact arguments
//!   (sha256 of their canonical JSON) and conversation must be this request's, and it must not
//!   have been used before in this process. Then the call runs with the answer pre-given: the
//!   gate's question must be the one the state names (same key, same hash of the validated
//!   input, same choices), and the answer must be one of those choices; anything else is asked
//!   anew (another `input_required` round), so an answer is never applied to another question.
//!
//! The state is signed, not encrypted: it holds names and hashes the client was already shown.

use super::elicit;
use crate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use anyhow::{bail, Context as _};
use hmac::{Hmac, Mac};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
    InputResponses,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{oneshot, watch};

type HmacSha256 = Hmac<Sha256>;

/// The environment variable naming a key file shared by several server processes.
pub const STATE_KEY_FILE_ENV: &str = "TOOLGATE_MCP_STATE_KEY_FILE";

/// The key of the one input request an approval round carries.
pub const APPROVAL_INPUT: &str = "approval";

/// The prefix of a sealed state (its format version).
const SEALED_PREFIX: &str = "tg1.";

/// The shortest key file content accepted (e.g. `openssl rand -hex 32`: 64 characters).
const MIN_KEY_CHARS: usize = 32;

/// The key request states are signed with: from [`STATE_KEY_FILE_ENV`] when set (so every
/// process behind one balancer agrees), else 32 random bytes for this process.
pub struct StateKey {
    key: [u8; 32],
    /// Nonces of states already used here, with their expiry (unix seconds).
    used: Mutex<HashMap<String, u64>>,
    /// Where the key came from, for messages.
    source: String,
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKey({})", self.source)
    }
}

static PROCESS_KEY: OnceLock<Arc<StateKey>> = OnceLock::new();

impl StateKey {
    /// The process's key: loaded once, from [`STATE_KEY_FILE_ENV`] or made at random.
    pub fn process() -> anyhow::Result<Arc<StateKey>> {
        if let Some(k) = PROCESS_KEY.get() {
            return Ok(k.clone());
        }
        let key = match std::env::var_os(STATE_KEY_FILE_ENV) {
            Some(path) if !path.is_empty() => StateKey::from_file(Path::new(&path))?,
            _ => StateKey::random()?,
        };
        Ok(PROCESS_KEY.get_or_init(|| Arc::new(key)).clone())
    }

    /// A fresh random key.
    pub fn random() -> anyhow::Result<StateKey> {
        let mut key = [0u8; 32];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom")
                .context("cannot open /dev/urandom for the request-state key")?,
            &mut key,
        )
        .context("cannot read random bytes for the request-state key")?;
        Ok(StateKey::with_key(key, "random, this process only".into()))
    }

    /// A random key that never fails: the OS generator, else a hash of unique ids and the
    /// time (only for a library user whose key file is unusable).
    pub fn ephemeral() -> StateKey {
        StateKey::random().unwrap_or_else(|_| {
            let key: [u8; 32] = Sha256::new()
                .chain_update(crate::gate::unique_id("k").as_bytes())
                .chain_update(crate::gate::unique_id("k").as_bytes())
                .chain_update(format!("{:?}{}", SystemTime::now(), std::process::id()).as_bytes())
                .finalize()
                .into();
            StateKey::with_key(key, "ephemeral".into())
        })
    }

    /// The key in `path`: a private file (mode 0600, yours, not a symlink) whose first line
    /// holds at least 32 visible characters (e.g. `openssl rand -hex 32 > FILE`).
    pub fn from_file(path: &Path) -> anyhow::Result<StateKey> {
        let text = super::private_file::read_private_file(path, "request-state key file")?;
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or("");
        if line.len() < MIN_KEY_CHARS || !line.bytes().all(|b| b.is_ascii_graphic()) {
            bail!(
                "the request-state key file {} ({STATE_KEY_FILE_ENV}) must hold a key of at least {MIN_KEY_CHARS} visible characters on its first line; make one with `openssl rand -hex 32 > {}` and `chmod 600` it",
                path.display(),
                path.display()
            );
        }
        let key: [u8; 32] = Sha256::new()
            .chain_update(b"toolgate mcp request-state key v1\0")
            .chain_update(line.as_bytes())
            .finalize()
            .into();
        Ok(StateKey::with_key(key, format!("from {}", path.display())))
    }

    fn with_key(key: [u8; 32], source: String) -> StateKey {
        StateKey {
            key,
            used: Mutex::new(HashMap::new()),
            source,
        }
    }

    /// The tag of `payload` (HMAC takes a key of any length, so this never fails; were it
    /// to, the empty tag verifies nothing).
    fn tag(&self, payload: &[u8]) -> Vec<u8> {
        match <HmacSha256 as Mac>::new_from_slice(&self.key) {
            Ok(mut mac) => {
                mac.update(b"toolgate mcp request-state v1\0");
                mac.update(payload);
                mac.finalize().into_bytes().to_vec()
            }
            Err(_) => Vec::new(),
        }
    }

    /// `state` sealed: `tg1.<hex payload>.<hex tag>`.
    pub fn seal(&self, state: &ApprovalState) -> String {
        let payload = serde_json::to_vec(state).unwrap_or_default();
        let tag = self.tag(&payload);
        format!(
            "{SEALED_PREFIX}{}.{}",
            hex::encode(&payload),
            hex::encode(tag)
        )
    }

    /// The state in `sealed`, if this server sealed it, it has not expired, and it belongs to
    /// `tool` with exactly `arguments` in `conversation`. It is not yet marked used.
    pub fn open(
        &self,
        sealed: &str,
        tool: &str,
        arguments: &Value,
        conversation: &str,
    ) -> Result<ApprovalState, StateRejected> {
        let rest = sealed
            .strip_prefix(SEALED_PREFIX)
            .ok_or(StateRejected::Forged)?;
        let (payload, tag) = rest.split_once('.').ok_or(StateRejected::Forged)?;
        let payload = hex::decode(payload).map_err(|_| StateRejected::Forged)?;
        let tag = hex::decode(tag).map_err(|_| StateRejected::Forged)?;
        let expected = self.tag(&payload);
        // Constant time: every byte compared whatever differs.
        let diff = expected
            .iter()
            .zip(tag.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if expected.is_empty() || expected.len() != tag.len() || std::hint::black_box(diff) != 0 {
            return Err(StateRejected::Forged);
        }
        let state: ApprovalState =
            serde_json::from_slice(&payload).map_err(|_| StateRejected::Forged)?;
        if now_secs() >= state.expires {
            return Err(StateRejected::Expired);
        }
        if state.tool != tool || state.arguments_sha256 != arguments_sha256(arguments) {
            return Err(StateRejected::OtherInput);
        }
        if state.conversation != conversation {
            return Err(StateRejected::OtherConversation);
        }
        if self.is_used(&state.nonce) {
            return Err(StateRejected::Used);
        }
        Ok(state)
    }

    fn is_used(&self, nonce: &str) -> bool {
        self.used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(nonce)
    }

    /// Mark `state` used: a second round with it is refused (in this process; every state
    /// also expires).
    pub fn mark_used(&self, state: &ApprovalState) -> bool {
        let now = now_secs();
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.retain(|_, exp| *exp > now);
        used.insert(state.nonce.clone(), state.expires).is_none()
    }
}

/// Why a `requestState` was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateRejected {
    /// Not made by this server (or by one sharing its key), or altered.
    Forged,
    /// Past its expiry.
    Expired,
    /// Made for another tool or other arguments.
    OtherInput,
    /// Made for another conversation.
    OtherConversation,
    /// Already used once.
    Used,
}

impl std::fmt::Display for StateRejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StateRejected::Forged => "the requestState was not made by this toolgate server (or was altered); retry the call without requestState and inputResponses to be asked again",
            StateRejected::Expired => "the requestState has expired (the approval was not answered in time); retry the call without requestState and inputResponses to be asked again",
            StateRejected::OtherInput => "the requestState belongs to another tool or other arguments; an approval applies only to the exact call it was asked for. Retry the call without requestState and inputResponses to be asked again",
            StateRejected::OtherConversation => "the requestState belongs to another conversation; retry the call without requestState and inputResponses to be asked again",
            StateRejected::Used => "the requestState was already used once; retry the call without requestState and inputResponses to be asked again",
        })
    }
}

/// What a sealed approval state binds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalState {
    /// The tool called.
    pub tool: String,
    /// sha256 of the call's arguments as canonical JSON (keys sorted).
    pub arguments_sha256: String,
    /// The key a `session` or `project` answer grants.
    pub key: String,
    /// The gate's hash of the validated input the question was about.
    pub input_sha256: String,
    /// The answers offered.
    pub choices: Vec<Answer>,
    /// The toolgate session (conversation) the call belongs to.
    pub conversation: String,
    /// Unix seconds after which the state is refused.
    pub expires: u64,
    /// `<issued ms since the epoch>.<random>` ([`crate::state::state_nonce`]), for single use: the
    /// state database refuses a state issued before it was created.
    pub nonce: String,
}

impl ApprovalState {
    /// The state for `question`, asked in a call of `tool` with `arguments`.
    pub fn new(
        question: &ApprovalRequest,
        tool: &str,
        arguments: &Value,
        conversation: &str,
    ) -> Self {
        ApprovalState {
            tool: tool.to_string(),
            arguments_sha256: arguments_sha256(arguments),
            key: question.key.clone(),
            input_sha256: question.input_sha256.clone(),
            choices: question.choices.clone(),
            conversation: conversation.to_string(),
            expires: now_secs() + question.expires_in_secs.max(1),
            nonce: crate::state::state_nonce(&crate::gate::unique_id("st")),
        }
    }

    /// Whether `question` is the one this state was made for.
    fn covers(&self, question: &ApprovalRequest) -> bool {
        question.tool == self.tool
            && question.key == self.key
            && question.input_sha256 == self.input_sha256
            && question.choices == self.choices
    }
}

/// sha256 of `arguments` as canonical JSON (serde_json's maps are sorted by key).
pub fn arguments_sha256(arguments: &Value) -> String {
    hex::encode(Sha256::digest(arguments.to_string().as_bytes()))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// The answer in `responses` (the client's elicitation result for [`APPROVAL_INPUT`]): accept
/// with a `decision` maps to it; decline, cancel, or anything unreadable to `deny`.
pub fn answer_from(responses: &InputResponses) -> Option<Answer> {
    let response = responses.get(APPROVAL_INPUT)?;
    let action = response.get("action").and_then(Value::as_str);
    Some(match action {
        Some("accept") => response
            .get("content")
            .and_then(|c| c.get(elicit::DECISION_FIELD))
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_value::<Answer>(Value::String(s.into())).ok())
            .unwrap_or(Answer::Deny),
        _ => Answer::Deny,
    })
}

/// The `input_required` result asking `question`, with its sealed state.
pub fn input_required(
    question: &ApprovalRequest,
    sealed: String,
) -> anyhow::Result<InputRequiredResult> {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: elicit::message(question),
        requested_schema: elicit::schema(&question.choices, &question.scopes)?,
    };
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_INPUT.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    Ok(InputRequiredResult::new(Some(requests), Some(sealed)))
}

/// The approver of one 2026-07-28 call: answers the question its state covers with the
/// client's answer; any other question is handed out (to become an `input_required` round)
/// and never answered here.
pub struct MrtrApprover {
    granted: Option<(ApprovalState, Answer)>,
    out: Mutex<Option<oneshot::Sender<ApprovalRequest>>>,
    void: watch::Sender<bool>,
}

impl MrtrApprover {
    /// An approver that answers `granted`'s question, and hands any other to the receiver.
    pub fn new(
        granted: Option<(ApprovalState, Answer)>,
    ) -> (Arc<Self>, oneshot::Receiver<ApprovalRequest>) {
        let (tx, rx) = oneshot::channel();
        (
            Arc::new(MrtrApprover {
                granted,
                out: Mutex::new(Some(tx)),
                void: watch::Sender::new(false),
            }),
            rx,
        )
    }
}

impl Approver for MrtrApprover {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        if let Some((state, answer)) = &self.granted {
            if state.covers(&request) {
                let answer = *answer;
                // Only an offered answer; the gate denies anything else too.
                let answer = if answer.offered(&request) {
                    answer
                } else {
                    Answer::Deny
                };
                return Box::pin(async move { Some(answer) });
            }
        }
        if let Some(tx) = self.out.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(request);
        }
        // Never answered here: the call is withdrawn and the question goes to the client.
        let mut void = self.void.subscribe();
        Box::pin(async move {
            let _ = void.wait_for(|v| *v).await;
            None
        })
    }

    fn withdrawn(&self, _request: &ApprovalRequest) {
        self.void.send_replace(true);
    }
}

impl Drop for MrtrApprover {
    fn drop(&mut self) {
        self.void.send_replace(true);
    }
}

#[cfg(test)]
#[path = "mrtr_tests.rs"]
mod tests;
