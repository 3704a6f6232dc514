//! The stdio transport: one JSON-RPC message a line, and every line that is not one answered
//! (rmcp's own drops unparsable and oversized lines silently, so their ids never get an
//! answer). Answers to bad lines go through the same writer as rmcp's messages, one whole line
//! at a time, so the two never interleave.
//!
//! Once the connection is initialized, `tools/call` requests are run by the transport itself
//! ([`stdio_calls`](super::stdio_calls)), beside rmcp's loop, which still serves everything else.

use super::stdio_calls::{Calls, Taken};
use super::stdio_fd::{write_line, write_message};
use rmcp::model::{ClientNotification, JsonRpcMessage, NumberOrString, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The longest line read (one message); rmcp's cap, which matches its HTTP client's.
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How much of an oversized line is kept to find its id in.
const ID_PREFIX: usize = 8 * 1024;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// How long calls still running when stdin ends may take to answer before they are cancelled
/// (rmcp's own drain time for its handlers).
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

pub struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line read so far (kept across cancelled `receive` calls).
    line: Vec<u8>,
    /// Skipping the rest of an oversized line (already answered).
    discarding: bool,
    write: Arc<Mutex<W>>,
    /// Answers to bad lines still being written, and calls run here still running.
    answering: Vec<JoinHandle<()>>,
    ids: Ids,
    /// The calls this transport runs itself (none: rmcp runs every request).
    calls: Option<Calls<W>>,
}

/// The client's request ids, each replaced inside by one of our own (`toolgate-<n>`, never
/// reused): rmcp keys in-flight requests by id, so without this a request that reuses a
/// cancelled call's id would be answered with that call's late answer (or lose its own).
/// A cancellation names the latest request with that id; answers get the client's id back.
#[derive(Default)]
pub(super) struct Ids {
    next: u64,
    /// Our id -> the client's, for requests not yet answered.
    client: HashMap<Arc<str>, RequestId>,
    /// The client's id -> ours, for the latest request in flight with that id.
    ours: HashMap<RequestId, Arc<str>>,
}

impl Ids {
    /// A message from the client as rmcp gets it; `None`: drop it (a cancellation of no
    /// request in flight).
    pub(super) fn inbound(
        &mut self,
        mut m: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        match &mut m {
            JsonRpcMessage::Request(r) => {
                self.next += 1;
                let ours: Arc<str> = format!("toolgate-{}", self.next).into();
                let theirs = std::mem::replace(&mut r.id, NumberOrString::String(ours.clone()));
                self.client.insert(ours.clone(), theirs.clone());
                self.ours.insert(theirs, ours);
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &mut n.notification {
                    let theirs = c.params.request_id.take()?;
                    // The cancelled call is unreachable by its id from now on: its answer
                    // is dropped, and a new request with the id is a new call.
                    let ours = self.ours.remove(&theirs)?;
                    self.client.remove(&ours);
                    c.params.request_id = Some(NumberOrString::String(ours));
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
        Some(m)
    }

    /// A message to the client; `None`: drop it (an answer to no request in flight).
    pub(super) fn outbound(
        &mut self,
        mut m: TxJsonRpcMessage<RoleServer>,
    ) -> Option<TxJsonRpcMessage<RoleServer>> {
        let id = match &mut m {
            JsonRpcMessage::Response(r) => &mut r.id,
            JsonRpcMessage::Error(e) => match &mut e.id {
                Some(id) => id,
                None => return Some(m),
            },
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => return Some(m),
        };
        let NumberOrString::String(ours) = &*id else {
            tracing::debug!(%id, "dropping an answer to an id no client request has");
            return None;
        };
        let Some(theirs) = self.client.remove(ours) else {
            tracing::debug!(%id, "dropping an answer to a request no longer in flight");
            return None;
        };
        if self.ours.get(&theirs) == Some(ours) {
            self.ours.remove(&theirs);
        }
        *id = theirs;
        Some(m)
    }
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            write: Arc::new(Mutex::new(write)),
            answering: Vec::new(),
            ids: Ids::default(),
            calls: None,
        }
    }

    /// Run `conn`'s `tools/call` requests here once it is initialized.
    pub fn with_calls(mut self, conn: super::McpConnection) -> Self {
        self.calls = Some(Calls::new(conn, self.write.clone()));
        self
    }

    /// Write an error answer for a bad line, in its own task so a cancelled `receive`
    /// cannot leave half a line written.
    fn answer(&mut self, id: Value, code: i64, message: String) {
        tracing::debug!(code, %message, "answering a bad line on stdio");
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        });
        let mut bytes = body.to_string().into_bytes();
        bytes.push(b'\n');
        let write = self.write.clone();
        self.answering.retain(|h| !h.is_finished());
        self.answering.push(tokio::spawn(async move {
            let _ = write_line(&write, &bytes).await;
        }));
    }

    /// Read until a whole line is in `self.line` (true) or the input ends (false). An
    /// oversized line is answered here and skipped.
    async fn read_line(&mut self) -> std::io::Result<bool> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(false);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if self.discarding {
                self.read.consume(take);
                if newline.is_some() {
                    self.discarding = false;
                }
                continue;
            }
            if self.line.len() + take > MAX_LINE + 1 {
                let mut start = std::mem::take(&mut self.line);
                start.truncate(ID_PREFIX);
                let more = ID_PREFIX.saturating_sub(start.len()).min(take);
                start.extend_from_slice(&available[..more]);
                self.read.consume(take);
                self.discarding = newline.is_none();
                let id = leading_id(&start);
                self.answer(
                    id,
                    -32600,
                    format!(
                        "Invalid Request: the message is over {} MiB, the most one line may hold; it was not read",
                        MAX_LINE >> 20
                    ),
                );
                continue;
            }
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if newline.is_some() {
                return Ok(true);
            }
        }
    }
}

/// What a whole line is.
enum Line {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    Skip,
    Bad(Value, i64, String),
}

fn parse(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    // A well-formed message (always an object) is read straight into its type, without a
    // `Value` built first; anything else (a batch, a bad line) takes the path below, which
    // says what is wrong with it.
    let object = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if object {
        if let Ok(m) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            return Line::Message(Box::new(m));
        }
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Line::Bad(Value::Null, -32700, format!("Parse error: {e}")),
    };
    if value.is_array() {
        return Line::Bad(
            Value::Null,
            -32600,
            "Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching); send one message a line".into(),
        );
    }
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let is_notification = value.get("method").is_some() && value.get("id").is_none();
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(m) => Line::Message(Box::new(m)),
        // JSON-RPC never answers a notification; rmcp drops unknown ones too.
        Err(e) if is_notification => {
            tracing::debug!(error = %e, "dropping a notification that cannot be read");
            Line::Skip
        }
        Err(e) => Line::Bad(
            id.unwrap_or(Value::Null),
            -32600,
            format!("Invalid Request: {e}"),
        ),
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let item = self.ids.outbound(item);
        async move {
            let Some(item) = item else { return Ok(()) };
            write_message(&write, &item).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(true) => {}
                Ok(false) => {
                    // Let the answers to the last bad lines and calls reach the client first.
                    let answering = std::mem::take(&mut self.answering);
                    let all = async {
                        for h in answering {
                            let _ = h.await;
                        }
                    };
                    if tokio::time::timeout(DRAIN, all).await.is_err() {
                        if let Some(calls) = &self.calls {
                            calls.cancel_all();
                        }
                    }
                    return None;
                }
                Err(e) => {
                    tracing::error!(error = %e, "reading stdin failed");
                    return None;
                }
            }
            let parsed = parse(&self.line);
            self.line.clear();
            match parsed {
                Line::Message(m) => {
                    let m = match self.calls.as_mut() {
                        None => *m,
                        Some(calls) => match calls.take(*m) {
                            Taken::Running(call) => {
                                self.answering.retain(|h| !h.is_finished());
                                self.answering.push(call);
                                continue;
                            }
                            Taken::Done => continue,
                            Taken::Pass(m) => *m,
                        },
                    };
                    if let Some(m) = self.ids.inbound(m) {
                        return Some(m);
                    }
                }
                Line::Skip => {}
                Line::Bad(id, code, message) => self.answer(id, code, message),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.flush().await
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index just past the string starting at `b[i]` (a `"`), if it ends in `b`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The index just past the JSON value starting at `b[i]`, if it ends in `b`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let j = (i..b.len())
                .find(|&j| matches!(b[j], b',' | b'}' | b']') || b[j].is_ascii_whitespace())?;
            Some(j)
        }
    }
}

/// The top-level `"id"` of the message that starts with `start`, if it is a string or a
/// number and lies whole in `start`; a nested `"id"` (in `params`) is not taken for it.
pub(super) fn leading_id(start: &[u8]) -> Value {
    let b = start.strip_prefix(UTF8_BOM).unwrap_or(start);
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return Value::Null;
    }
    i += 1;
    loop {
        i = skip_ws(b, i);
        if b.get(i) != Some(&b'"') {
            return Value::Null;
        }
        let Some(key_end) = string_end(b, i) else {
            return Value::Null;
        };
        let key = &b[i..key_end];
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return Value::Null;
        }
        i = skip_ws(b, i + 1);
        let Some(end) = value_end(b, i) else {
            return Value::Null;
        };
        if key == b"\"id\"" {
            return match serde_json::from_slice::<Value>(&b[i..end]) {
                Ok(v) if v.is_string() || v.is_number() => v,
                _ => Value::Null,
            };
        }
        i = skip_ws(b, end);
        if b.get(i) != Some(&b',') {
            return Value::Null;
        }
        i += 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "stdio_tests.rs"]
mod tests;
