//! The local console: a page for the person beside the agent, served by `toolgate serve --http`
//! at `/` and by `toolgate console`. It shows the calls waiting for approval (with their diffs)
//! and answers them, follows the audit live, lists and revokes grants, shows each file's
//! history with undo, and the policy's layers.
//!
//! - The page, its script and its style are plain files inside the binary (`page/`), served
//!   without a token: they hold nothing of the workspace. Their Content-Security-Policy allows
//!   only this origin's script and style (no inline script, no eval, nothing external) and no
//!   framing.
//! - Everything else is under `/api/` and needs the same bearer token as the MCP endpoint, in
//!   the `Authorization` header, never a cookie: a page of another site cannot send it (it would
//!   need to know the token, and its request would be refused on `Origin` first), so there is
//!   nothing to forge across sites. The page learns the token from the address `toolgate`
//!   prints (`/#token=…`: a fragment, never sent to the server or in a `Referer`).
//! - Answers from the page are a third approval surface ([`crate::gate::approval::Broker`]):
//!   the first answer from any surface wins, and a page's answer is taken only for the exact
//!   input hash it was shown. While a page follows `/api/events`, a call from an MCP client
//!   that cannot be asked (no elicitation) waits for the page instead of being refused.
//! - **One token, one client** ([`Caller`]): a client token sees and answers only the sessions
//!   it made (their names carry its owner tag, [`crate::gate::approval::session_owner`]):
//!   approvals, calls, session grants, history and undo; the person's token (the console's
//!   own, or a `person` line of the token file) sees all. `docs/console.md` lists the API.

mod api;
mod events;

use crate::gate::Gate;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::Arc;

/// The response body type shared with the MCP endpoint.
pub type Body = BoxBody<Bytes, Infallible>;

/// The path prefix of the console's API (token required).
pub const API_PREFIX: &str = "/api/";

/// The session the console acts as (its undos are audited under it).
pub const SESSION: &str = "console";

/// The console of one gate.
pub struct Console {
    gate: Arc<Gate>,
}

impl Console {
    /// The console of `gate`.
    pub fn new(gate: Arc<Gate>) -> Self {
        Console { gate }
    }

    /// Answer an API request of `caller` (the server has checked Host, Origin and the token).
    pub async fn api(&self, req: Request<hyper::body::Incoming>, caller: Caller) -> Response<Body> {
        api::handle(&self.gate, req, caller).await
    }
}

/// Who is calling the API, by the token it sent: the person (sees every session) or one
/// client (sees the sessions whose names carry its owner tag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    person: bool,
    tag: String,
}

impl Caller {
    /// The person's token: every session.
    pub fn person(tag: &str) -> Self {
        Caller {
            person: true,
            tag: tag.to_string(),
        }
    }

    /// A client token with owner tag `tag`: its own sessions only.
    pub fn client(tag: &str) -> Self {
        Caller {
            person: false,
            tag: tag.to_string(),
        }
    }

    /// Whether this is the person's token.
    pub fn is_person(&self) -> bool {
        self.person
    }

    /// Whether the caller may see and act on `session`.
    pub fn sees(&self, session: &str) -> bool {
        self.person || crate::gate::approval::session_owner(session) == Some(self.tag.as_str())
    }

    /// The session the caller's undos are audited under (a client's carries its tag, so its
    /// undos are among its own calls).
    fn session(&self) -> String {
        if self.person {
            SESSION.to_string()
        } else {
            format!("{SESSION}-{}-undo", self.tag)
        }
    }

    /// A console watching the queue as this caller.
    fn watch(&self, broker: &crate::gate::approval::Broker) -> crate::gate::approval::Watching {
        if self.person {
            broker.watch()
        } else {
            broker.watch_owner(&self.tag)
        }
    }
}

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/console.js");
const STYLE: &str = include_str!("page/console.css");

/// What the page may load and do: this origin's script, style and API, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's files: `Some` for `GET /`, `/console.js` and `/console.css` (no token needed;
/// they are the same for everyone).
pub fn page<B>(req: &Request<B>) -> Option<Response<Body>> {
    let (text, kind) = match req.uri().path() {
        "/" | "/index.html" => (INDEX, "text/html; charset=utf-8"),
        "/console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/console.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return None,
    };
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        return Some(error(
            StatusCode::METHOD_NOT_ALLOWED,
            "the console's page is only fetched with GET",
        ));
    }
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-type", kind),
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
    ] {
        headers.insert(name, hyper::header::HeaderValue::from_static(value));
    }
    Some(response)
}

/// Whether `path` is the console's API.
pub fn is_api(path: &str) -> bool {
    path.starts_with(API_PREFIX)
}

/// A JSON answer.
fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    response
}

/// An error answer: `{"error": message}`.
fn error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, &serde_json::json!({ "error": message }))
}

/// One call as the page's audit table shows it.
fn call_json(call: &crate::state::AuditCall) -> serde_json::Value {
    serde_json::json!({
        "call_id": call.call_id,
        "session": call.session,
        "tool": call.tool,
        "key": call.key(),
        "decision": call.decision(),
        "stage": call.stage(),
        "status": call.status(),
        "duration_us": call.duration_us(),
        "started_ms": call.started_ms(),
        "error_code": call.error_code(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "console_tests.rs"]
mod tests;

/// The approval queue as `caller` may see it (the API's `GET /api/approvals` and the event
/// stream's `approvals` event).
fn queue(gate: &Gate, caller: &Caller) -> serde_json::Value {
    let mut pending = gate.broker().queue();
    pending.retain(|q| caller.sees(&q.request.session));
    serde_json::json!({ "pending": pending })
}
