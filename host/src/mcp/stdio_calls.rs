//! `tools/call` on stdio, run beside rmcp's service loop rather than through it.
//!
//! rmcp hands every request to its loop, which spawns a handler task, gets the answer back
//! over a channel, and spawns one more task to write it: four task switches a call, which on
//! a two-core machine bounce the call between both runtime workers (measured ~50 µs a call,
//! docs/benchmarks.md). Once the connection is initialized, the transport instead starts each
//! `tools/call` itself: one task runs rmcp's own request handling (`Service::handle_request`,
//! so version checks and results are rmcp's) and writes the answer.
//!
//! What rmcp's loop did for these calls is done here:
//! - **Cancellation**: `notifications/cancelled` naming the call cancels its context, and its
//!   answer is not sent. As on rmcp's path, a cancellation names the latest request with that
//!   id: a later request reusing the id (on either path) takes the id over.
//! - **Approvals and progress** go through the connection's peer, which rmcp's loop still
//!   serves: elicitation requests and their answers, and progress notifications.
//! - **Order at the end**: when stdin ends, the answers of calls still running are written
//!   before the transport reports the end.

use super::stdio_fd::write_message;
use super::McpConnection;
use rmcp::model::{
    ClientNotification, ClientRequest, GetExtensions as _, GetMeta as _, JsonRpcMessage, RequestId,
};
use rmcp::service::{RequestContext, RoleServer, RxJsonRpcMessage, Service as _};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWrite;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The client's id -> the call running under it (the latest with that id): its number and
/// its cancellation.
type Running = HashMap<RequestId, (u64, CancellationToken)>;

/// The `tools/call` requests this transport runs itself, answered through `write`.
pub(super) struct Calls<W> {
    conn: McpConnection,
    running: Arc<Mutex<Running>>,
    next: u64,
    write: Arc<tokio::sync::Mutex<W>>,
}

/// What [`Calls::take`] did with a message.
pub(super) enum Taken {
    /// A call, now running; it writes its own answer.
    Running(JoinHandle<()>),
    /// A cancellation of a running call, done.
    Done,
    /// Not for this path: rmcp's loop gets it.
    Pass(Box<RxJsonRpcMessage<RoleServer>>),
}

impl<W: AsyncWrite + Send + Unpin + 'static> Calls<W> {
    /// Calls of `conn`, answered through `write` (the lock rmcp's messages are written under).
    pub(super) fn new(conn: McpConnection, write: Arc<tokio::sync::Mutex<W>>) -> Self {
        Calls {
            conn,
            running: Arc::default(),
            next: 0,
            write,
        }
    }

    /// Cancel every call still running (stdin ended and they did not finish in time).
    pub(super) fn cancel_all(&self) {
        for (_, (_, ct)) in self.lock().drain() {
            ct.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        lock(&self.running)
    }

    /// Run `m` if it is a `tools/call` of an initialized connection, carry out a cancellation
    /// of a call running here, or hand `m` back.
    pub(super) fn take(&mut self, m: RxJsonRpcMessage<RoleServer>) -> Taken {
        match m {
            JsonRpcMessage::Request(r) => {
                let peer = match (&r.request, self.conn.initialized_peer()) {
                    (ClientRequest::CallToolRequest(_), Some(peer)) => peer,
                    _ => {
                        // A later request with the id takes it over.
                        self.lock().remove(&r.id);
                        return Taken::Pass(Box::new(JsonRpcMessage::Request(r)));
                    }
                };
                let mut request = r.request;
                let mut context = RequestContext::new(r.id.clone(), peer);
                context.meta = std::mem::take(request.get_meta_mut());
                context.extensions = std::mem::take(request.extensions_mut());
                self.next += 1;
                let number = self.next;
                let ct = context.ct.clone();
                self.lock().insert(r.id.clone(), (number, ct.clone()));
                let conn = self.conn.clone();
                let running = self.running.clone();
                let write = self.write.clone();
                let id = r.id;
                Taken::Running(tokio::spawn(async move {
                    let result = conn.handle_request(request, context).await;
                    {
                        let mut running = lock(&running);
                        if running.get(&id).is_some_and(|(n, _)| *n == number) {
                            running.remove(&id);
                        }
                    }
                    // A cancelled call is not answered (as on rmcp's path).
                    if ct.is_cancelled() {
                        return;
                    }
                    let answer = match result {
                        Ok(result) => JsonRpcMessage::response(result, id),
                        Err(error) => JsonRpcMessage::error(error, Some(id)),
                    };
                    if let Err(e) = write_message(&write, &answer).await {
                        tracing::error!(error = %e, "writing an answer to stdout failed");
                    }
                    // While the client reads the answer.
                    conn.idle().await;
                }))
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification {
                    if let Some(id) = &c.params.request_id {
                        if let Some((_, ct)) = self.lock().remove(id) {
                            ct.cancel();
                            return Taken::Done;
                        }
                    }
                }
                Taken::Pass(Box::new(JsonRpcMessage::Notification(n)))
            }
            other => Taken::Pass(Box::new(other)),
        }
    }
}

fn lock(running: &Mutex<Running>) -> std::sync::MutexGuard<'_, Running> {
    running.lock().unwrap_or_else(|p| p.into_inner())
}
