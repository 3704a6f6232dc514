//! `GET /api/events`: the console's live feed as server-sent events.
//!
//! - `hello` first, then `approvals` (the whole queue) at once and each time it changes;
//! - `call` for each call as it completes (polled from the audit, so calls made by other
//!   toolgate processes on the workspace show too);
//! - `history` when a call that writes files (or an undo) completed: the page reloads it;
//! - a `: keep-alive` comment every [`KEEP_ALIVE`].
//!
//! Every event is scoped to the [`Caller`] as the API is: a client token's stream shows its own
//! sessions' approvals and calls only.
//!
//! While the stream is open the page counts as watching the approval queue
//! ([`crate::gate::approval::Broker::watch`]); it stops counting when the client goes away and
//! the body is dropped.

use super::{call_json, Body, Caller};
use crate::gate::approval::Watching;
use crate::gate::Gate;
use crate::tools::Risk;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Frame;
use hyper::{Response, StatusCode};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the audit is looked at for completed calls.
const POLL: Duration = Duration::from_millis(200);

/// How often a comment is sent when nothing else is, so proxies and the page know the stream
/// is alive (the page restarts a stream silent for 45 s).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Most calls sent from one look at the audit (the rest come at the next).
const BATCH: usize = 200;

/// The response that streams the feed for as long as the client reads it.
pub(super) fn stream(gate: Arc<Gate>, caller: Caller) -> Response<Body> {
    let (tx, rx) = mpsc::channel(64);
    let watching = caller.watch(gate.broker());
    tokio::spawn(feed(gate, tx, caller));
    let body = Stream {
        rx,
        _watching: watching,
    };
    let mut response = Response::new(body.boxed());
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-type", "text/event-stream"),
        ("cache-control", "no-store"),
        ("x-accel-buffering", "no"),
    ] {
        headers.insert(name, hyper::header::HeaderValue::from_static(value));
    }
    response
}

/// The stream's body: what the feed task sends, until it ends or the client goes away.
struct Stream {
    rx: mpsc::Receiver<Bytes>,
    _watching: Watching,
}

impl hyper::body::Body for Stream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

/// One event frame. The data is one line of JSON (it has no raw newline), so one `data:`
/// line carries it.
fn frame(event: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// Feed the stream until the client is gone.
async fn feed(gate: Arc<Gate>, tx: mpsc::Sender<Bytes>, caller: Caller) {
    let mut changes = gate.broker().subscribe();
    changes.mark_unchanged();
    let hello = frame("hello", &json!({ "at_ms": crate::state::now_ms() }));
    // The queue last sent: a change to others' requests alone sends nothing (a client's
    // stream does not even learn that something changed).
    let mut sent = Value::Null;
    if tx.send(hello).await.is_err() || !send_queue(&gate, &tx, &caller, &mut sent).await {
        return;
    }
    let mut seen = {
        let gate = gate.clone();
        tokio::task::spawn_blocking(move || gate.state().audit_max_id())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(0)
    };
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut keep_alive =
        tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() || !send_queue(&gate, &tx, &caller, &mut sent).await {
                    return;
                }
            }
            _ = poll.tick() => {
                let (frames, last) = completed_after(&gate, seen, &caller).await;
                seen = last;
                for f in frames {
                    if tx.send(f).await.is_err() {
                        return;
                    }
                }
            }
            _ = keep_alive.tick() => {
                if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    return;
                }
            }
            () = tx.closed() => return,
        }
    }
}

/// Send the approval queue; false when the client is gone.
async fn send_queue(
    gate: &Gate,
    tx: &mpsc::Sender<Bytes>,
    caller: &Caller,
    sent: &mut Value,
) -> bool {
    let queue = super::queue(gate, caller);
    // `expires_in_secs` counts down: compared without it.
    let mut bare = queue.clone();
    if let Some(Value::Array(items)) = bare.get_mut("pending") {
        for item in items {
            if let Some(o) = item.as_object_mut() {
                o.remove("expires_in_secs");
            }
        }
    }
    if bare == *sent {
        return true;
    }
    *sent = bare;
    tx.send(frame("approvals", &queue)).await.is_ok()
}

/// The frames for calls completed after audit row `after`, and the last row seen.
async fn completed_after(gate: &Arc<Gate>, after: i64, caller: &Caller) -> (Vec<Bytes>, i64) {
    let gate = gate.clone();
    let caller = caller.clone();
    tokio::task::spawn_blocking(move || {
        let db = gate.state();
        let done = match db.audit_completions_after(after, BATCH) {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "the console could not read the audit");
                return (Vec::new(), after);
            }
        };
        let last = done.last().map_or(after, |(id, _)| *id);
        let mut frames = Vec::new();
        let mut wrote = false;
        for (_, call_id) in done {
            let Ok(Some(call)) = db.audit_call(&call_id) else {
                continue;
            };
            if !caller.sees(&call.session) {
                continue;
            }
            wrote |= call.tool == "undo"
                || gate
                    .tools()
                    .any(|t| t.name == call.tool && t.risk == Risk::Write);
            frames.push(frame("call", &call_json(&call)));
        }
        if wrote {
            frames.push(frame("history", &json!({})));
        }
        (frames, last)
    })
    .await
    .unwrap_or((Vec::new(), after))
}
