//! The HTTP sessions: the ids clients see, each bound to its token and to rmcp's own id,
//! the cap on live sessions and their idle expiry.

use crate::mcp::token::os_random;
use crate::mcp::WeakConnection;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The session ids clients see, each bound to the token that created it, and the id rmcp
/// knows the session by; when each was last used, and how many requests it has in flight.
#[derive(Default)]
pub(super) struct Sessions {
    table: Mutex<Table>,
    /// The calls run beside rmcp's session workers, for their cancellation.
    pub(super) calls: super::fast::Running,
}

#[derive(Default)]
struct Table {
    by_outer: HashMap<String, Bound>,
    /// `initialize` requests admitted under the cap and not answered yet.
    reserved: usize,
}

struct Bound {
    inner: String,
    /// The session's connection, once `handle` learned it (it does not keep it alive).
    conn: Option<WeakConnection>,
    token: usize,
    last_used: Instant,
    busy: usize,
}

/// A request in flight on a session: the session does not expire until it is dropped (with
/// the response body, so a long streamed call keeps its session).
pub(super) struct InFlight {
    sessions: Arc<Sessions>,
    outer: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(b) = self.sessions.lock().by_outer.get_mut(&self.outer) {
            b.busy = b.busy.saturating_sub(1);
            b.last_used = Instant::now();
        }
    }
}

/// An admitted `initialize`; its place under the cap is given back when dropped.
pub(super) struct Reservation(Arc<Sessions>);

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut t = self.0.lock();
        t.reserved = t.reserved.saturating_sub(1);
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// rmcp's id for `outer`, if it exists, belongs to `token` and has not been idle for
    /// `idle`, with the request marked in flight. An expired session is removed, and its rmcp
    /// id returned in the error for closing.
    pub(super) fn use_session(
        self: &Arc<Self>,
        outer: &str,
        token: usize,
        idle: Duration,
    ) -> Result<(String, InFlight, Option<WeakConnection>), Option<String>> {
        let mut t = self.lock();
        let Some(b) = t.by_outer.get_mut(outer) else {
            return Err(None);
        };
        if b.token != token {
            return Err(None);
        }
        if b.busy == 0 && b.last_used.elapsed() >= idle {
            let inner = t.by_outer.remove(outer).map(|b| b.inner);
            return Err(inner);
        }
        b.busy += 1;
        b.last_used = Instant::now();
        let inner = b.inner.clone();
        let conn = b.conn.clone();
        Ok((
            inner,
            InFlight {
                sessions: self.clone(),
                outer: outer.to_string(),
            },
            conn,
        ))
    }

    /// A place for one more session, if there are fewer than `max` (counting those being
    /// made).
    pub(super) fn reserve(self: &Arc<Self>, max: usize) -> Option<Reservation> {
        let mut t = self.lock();
        if t.by_outer.len() + t.reserved >= max {
            return None;
        }
        t.reserved += 1;
        Some(Reservation(self.clone()))
    }

    /// The id clients see for rmcp's `inner`, made (and bound to `token`) if new.
    pub(super) fn outer_for(&self, inner: &str, token: usize) -> std::io::Result<String> {
        let mut t = self.lock();
        if let Some((outer, _)) = t.by_outer.iter().find(|(_, b)| b.inner == inner) {
            return Ok(outer.clone());
        }
        let outer = hex::encode(os_random::<16>()?);
        t.by_outer.insert(
            outer.clone(),
            Bound {
                inner: inner.to_string(),
                conn: None,
                token,
                last_used: Instant::now(),
                busy: 0,
            },
        );
        Ok(outer)
    }

    /// Remember the connection of the session clients know as `outer`.
    pub(super) fn attach(&self, outer: &str, conn: WeakConnection) {
        if let Some(b) = self.lock().by_outer.get_mut(outer) {
            b.conn = Some(conn);
        }
    }

    pub(super) fn remove(&self, outer: &str) {
        self.lock().by_outer.remove(outer);
    }

    /// Remove the sessions idle for `idle` with nothing in flight; their rmcp ids.
    pub(super) fn take_expired(&self, idle: Duration) -> Vec<String> {
        let mut t = self.lock();
        let expired: Vec<String> = t
            .by_outer
            .iter()
            .filter(|(_, b)| b.busy == 0 && b.last_used.elapsed() >= idle)
            .map(|(o, _)| o.clone())
            .collect();
        expired
            .iter()
            .filter_map(|o| t.by_outer.remove(o).map(|b| b.inner))
            .collect()
    }

    /// Forget ids whose rmcp session has ended.
    pub(super) async fn prune(&self, manager: &LocalSessionManager) {
        let known: Vec<(String, String)> = self
            .lock()
            .by_outer
            .iter()
            .map(|(o, b)| (o.clone(), b.inner.clone()))
            .collect();
        for (outer, inner) in known {
            if !manager.has_session(&inner.into()).await.unwrap_or(true) {
                self.remove(&outer);
            }
        }
    }
}

/// Close rmcp's sessions `inner` (their workers end, and with them the toolgate sessions).
pub(super) async fn close_sessions(manager: &LocalSessionManager, inner: Vec<String>) {
    for id in inner {
        tracing::info!("closing an idle MCP session");
        if let Err(e) = manager.close_session(&id.into()).await {
            tracing::debug!(error = %e, "closing an idle session failed");
        }
    }
}

/// The session cap and idle expiry.
#[derive(Clone, Copy)]
pub(super) struct SessionLimits {
    pub(super) max: usize,
    pub(super) idle: Duration,
}
