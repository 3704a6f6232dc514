//! Admission before authentication: a connection is *pre-auth* until a request on it carried a
//! valid token, and pre-auth connections have their own bounds, so sockets opened by anyone
//! who can connect cannot take the places of authenticated clients.
//!
//! - A new connection is pre-auth. It has [`HttpOptions::preauth_timeout`] (3 s, never more
//!   than the header timeout) to send a complete request head; meanwhile it holds a place
//!   among at most [`HttpOptions::max_preauth`] (128) pre-auth connections, at most
//!   [`HttpOptions::max_preauth_per_peer`] (32) of them from one address.
//! - When a place is wanted and there is none, the oldest pre-auth connection (of that peer
//!   when the peer is at its bound, else of all) is closed to make room, preferring one that
//!   has sent nothing yet: an idle socket is displaced by the next connection, so holding
//!   sockets open does not keep a client that sends its request at once from being read.
//! - The first request head is read here, before hyper: when it carries a valid token the
//!   connection is authenticated, gives back its pre-auth place and takes one of the
//!   [`HttpOptions::max_connections`] authenticated places (over that: 503), and hyper serves
//!   it (the head read here first) with keep-alive. Otherwise hyper answers that one request
//!   (the console's page, a 401, a 403) and the connection is closed.
//!
//! [`HttpOptions::preauth_timeout`]: super::HttpOptions::preauth_timeout
//! [`HttpOptions::max_preauth`]: super::HttpOptions::max_preauth
//! [`HttpOptions::max_preauth_per_peer`]: super::HttpOptions::max_preauth_per_peer
//! [`HttpOptions::max_connections`]: super::HttpOptions::max_connections

use super::Tokens;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// The longest request head read before hyper (hyper's own limit is larger; a head over
/// this is left to hyper, unauthenticated).
const MAX_HEAD: usize = 64 * 1024;

/// The pre-auth connections of one server.
pub(super) struct Admission {
    table: Mutex<Table>,
    max: usize,
    per_peer: usize,
}

#[derive(Default)]
struct Table {
    next: u64,
    /// By admission order: the first is the oldest.
    open: BTreeMap<u64, Entry>,
    by_peer: HashMap<IpAddr, usize>,
}

struct Entry {
    peer: IpAddr,
    /// Set once the connection sent its first bytes.
    heard: Arc<AtomicBool>,
    close: Option<oneshot::Sender<()>>,
}

/// A pre-auth connection's place: given back when dropped.
pub(super) struct PreAuth {
    admission: Arc<Admission>,
    id: u64,
    heard: Arc<AtomicBool>,
    /// Fires when the place was taken for a newer connection.
    pub(super) displaced: oneshot::Receiver<()>,
}

impl Drop for PreAuth {
    fn drop(&mut self) {
        let mut t = self.admission.lock();
        if let Some(e) = t.open.remove(&self.id) {
            t.forget_peer(e.peer);
        }
    }
}

impl Table {
    fn forget_peer(&mut self, peer: IpAddr) {
        if let Some(n) = self.by_peer.get_mut(&peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_peer.remove(&peer);
            }
        }
    }

    /// Close the oldest pre-auth connection among those `of` accepts, preferring one that
    /// sent nothing.
    fn displace(&mut self, of: impl Fn(&Entry) -> bool) {
        let victim = self
            .open
            .iter()
            .find(|(_, e)| of(e) && !e.heard.load(Ordering::Relaxed))
            .or_else(|| self.open.iter().find(|(_, e)| of(e)))
            .map(|(id, _)| *id);
        if let Some(mut e) = victim.and_then(|id| self.open.remove(&id)) {
            self.forget_peer(e.peer);
            if let Some(close) = e.close.take() {
                let _ = close.send(());
            }
        }
    }
}

impl Admission {
    /// Bounds: `max` pre-auth connections in all, `per_peer` from one address.
    pub(super) fn new(max: usize, per_peer: usize) -> Arc<Self> {
        Arc::new(Admission {
            table: Mutex::default(),
            max: max.max(1),
            per_peer: per_peer.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection from `peer`, made by closing an older pre-auth one when
    /// the bounds are reached.
    pub(super) fn admit(self: &Arc<Self>, peer: IpAddr) -> PreAuth {
        let mut t = self.lock();
        if t.by_peer.get(&peer).copied().unwrap_or(0) >= self.per_peer {
            tracing::debug!(%peer, "too many connections without a token from one address; closing its oldest");
            t.displace(|e| e.peer == peer);
        }
        if t.open.len() >= self.max {
            tracing::debug!("too many connections without a token; closing the oldest");
            t.displace(|_| true);
        }
        let id = t.next;
        t.next += 1;
        let (close, displaced) = oneshot::channel();
        let heard = Arc::new(AtomicBool::new(false));
        t.open.insert(
            id,
            Entry {
                peer,
                heard: heard.clone(),
                close: Some(close),
            },
        );
        *t.by_peer.entry(peer).or_default() += 1;
        PreAuth {
            admission: self.clone(),
            id,
            heard,
            displaced,
        }
    }

    /// How many pre-auth connections hold a place.
    #[cfg(test)]
    pub(super) fn open(&self) -> usize {
        self.lock().open.len()
    }
}

/// How a connection's first request head went.
pub(super) enum Head {
    /// The bytes read (the whole head, and maybe more), and the token it carried if valid.
    Read(Vec<u8>, Option<usize>),
    /// Closed, displaced, or too slow: the connection is dropped unanswered.
    Gone,
}

/// Read the first request head of `stream` within `deadline` (unless displaced first).
pub(super) async fn read_head(
    stream: &mut TcpStream,
    place: &mut PreAuth,
    deadline: Duration,
    tokens: &Tokens,
) -> Head {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        loop {
            let mut chunk = [0u8; 4096];
            let n = match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            place.heard.store(true, Ordering::Relaxed);
            let from = buf.len().saturating_sub(3);
            buf.extend_from_slice(&chunk[..n]);
            if buf[from..].windows(4).any(|w| w == b"\r\n\r\n") || buf.len() >= MAX_HEAD {
                return true;
            }
        }
    };
    let whole = tokio::select! {
        whole = tokio::time::timeout(deadline, read) => whole.unwrap_or(false),
        _ = &mut place.displaced => false,
    };
    if !whole {
        return Head::Gone;
    }
    let token = bearer(&buf).and_then(|t| tokens.identify(t));
    Head::Read(buf, token)
}

/// The bearer token in a request head's `Authorization` header, if it has one. Only decides
/// which places the connection takes: every request is still checked in full by the server.
fn bearer(head: &[u8]) -> Option<&str> {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&head[..end]).ok()?;
    head.split("\r\n").skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("authorization") {
            return None;
        }
        let (scheme, rest) = value.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    })
}

/// A socket with bytes already read from it put back in front.
pub(super) struct Rewind {
    prefix: Bytes,
    inner: TcpStream,
}

impl Rewind {
    pub(super) fn new(prefix: Vec<u8>, inner: TcpStream) -> Self {
        Rewind {
            prefix: Bytes::from(prefix),
            inner,
        }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            let head = self.prefix.split_to(n);
            buf.put_slice(&head);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "admit_tests.rs"]
mod tests;
