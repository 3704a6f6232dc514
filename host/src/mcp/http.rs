//! `toolgate serve --http ADDR`: MCP over streamable HTTP at `http://ADDR/mcp`.
//!
//! - Binds only loopback addresses unless `allow_remote` is set.
//! - Every request's `Host` header must be one of the allowed authorities (`localhost`,
//!   `127.0.0.1`, `[::1]`, each with the bound port, plus `--allowed-host` names when remote
//!   access is on), and an `Origin` header, when present, must be `http://` one of them: a web
//!   page that rebinds its DNS name to 127.0.0.1 sends its own name and is refused with 403
//!   before anything else runs.
//! - Every request must carry `Authorization: Bearer <token>` with a token from the token file
//!   ([`HttpOptions::token_file`]; by default `$XDG_STATE_HOME/toolgate/http-token`, 32 random
//!   bytes in hex, created on first use with mode 0600). A file may hold several tokens, one a
//!   line; each client can get its own. Anything else is answered 401 before MCP sees it; the
//!   comparison takes the same time whatever the presented token is. A token sees only the
//!   sessions it made (their names carry its owner tag), in MCP and in the console; a
//!   `person TOKEN` line, or the console's own token, sees all ([`super::token`]).
//! - Each MCP session (`Mcp-Session-Id`) is one [`super::McpConnection`], so one toolgate
//!   session. The id a client sees is 128 random bits from the OS, bound to the token (the
//!   line of the token file) that created it: the same id with another token is answered 404,
//!   exactly as an unknown id, so a token holder learns nothing about other tokens' sessions.
//! - A new connection is pre-auth until a request on it carries a valid token (`admit`): it
//!   has [`HttpOptions::preauth_timeout`] (3 s) to send its first request head, and pre-auth
//!   connections have bounds of their own ([`HttpOptions::max_preauth`] in all,
//!   [`HttpOptions::max_preauth_per_peer`] from one address), over which the oldest idle one
//!   is closed to make room: sockets opened and left idle cannot starve authenticated
//!   clients. A connection without a valid token is answered once and closed.
//! - An authenticated connection has [`HttpOptions::header_timeout`] (10 s) to send each
//!   further request's headers, then it is closed; at most [`HttpOptions::max_connections`]
//!   (64) are open at once, and one over that is answered 503 with `Retry-After` and closed
//!   (it does not queue: a process holding connections open cannot make the server wait).
//! - At most [`HttpOptions::max_sessions`] (256) sessions live at once; an `initialize` over
//!   that is answered 503 (none is evicted). A session idle for [`HttpOptions::session_idle`]
//!   (30 min) with no request in flight is closed, and its id then gets 404.
//! - A POST that is not `application/json` is 415, a body that is not JSON 400 (`-32700`), a
//!   batch 400 (`-32600`): each with a JSON-RPC error body.
//! - Every connection is its own task, and every MCP request its own task inside rmcp, so one
//!   session's slow call (a command, a hook, an approval) does not hold up another session. A
//!   `tools/call` on an initialized session that needs nothing from the session's stream runs
//!   in its request's task beside rmcp's session worker and is answered as JSON (`fast`).
//!   While the server is quiet (one request at a time, `quiet`), a call's answer is followed
//!   by the sandbox's idle work (its store dropped, the next call's instance made ahead).
//! - A 2026-07-28 request (its `_meta` names the version and the client's capabilities) needs
//!   no session: rmcp serves it statelessly, answered as plain JSON; a `tools/call` whose
//!   headers and `_meta` rmcp would surely accept runs beside rmcp instead (`stateless`).
//!   Its toolgate session is its conversation, [`conversation_session`] of the token and the
//!   optional `Toolgate-Conversation` header, passed to the handler in an internal header that
//!   is stripped from every client request first. Any process serving the workspace may answer
//!   it (approval states verify on every process given the same
//!   [`super::mrtr::STATE_KEY_FILE_ENV`] key file).
//! - A session ended with `DELETE` is answered 204 No Content.

mod admit;
mod allowlist;
mod fast;
mod quiet;
mod repoll;
mod request;
mod sessions;
mod stateless;

pub use super::token::{default_token_file, Tokens, TOKEN_FILE_NAME};
pub use allowlist::Allowlist;

use super::McpConnection;
use crate::gate::Gate;
use crate::state::serving::{Company, Servers};
use crate::userdirs::UserDirs;
use anyhow::{bail, Context};
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use quiet::{Quiet, QUIET_FOR};
use request::{busy_response, handle, Served};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sessions::{close_sessions, SessionLimits, Sessions};
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// How long a client may take to send a request's headers by default: a client that trickles
/// them (slowloris) would otherwise hold a connection, and a connection slot, forever.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Most connections open at once by default: each costs a task and buffers, and the server is
/// for a few local clients, not a crowd.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// How long a new connection may take to send its first request head by default (a client
/// sends it at once; an idle socket is closed after this).
pub const DEFAULT_PREAUTH_TIMEOUT: Duration = Duration::from_secs(3);

/// Most connections without a valid token yet, by default; over that the oldest is closed.
pub const DEFAULT_MAX_PREAUTH: usize = 128;

/// Most connections without a valid token yet from one address, by default.
pub const DEFAULT_MAX_PREAUTH_PER_PEER: usize = 32;

/// Most live sessions by default: each costs a task, channels and a toolgate session (tens of
/// KiB), and the server is for a few local clients.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// How long a session may sit unused by default before it is closed.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// Connections over the cap that still get a 503 answer (beyond these they are closed at once),
/// so a flood of connections costs a bounded number of tasks.
const OVERFLOW_RESPONDERS: usize = 16;

/// The header carrying the MCP session id.
const SESSION_HEADER: &str = "mcp-session-id";

/// The header a 2026-07-28 client may send to name its conversation (any visible ASCII, at
/// most [`MAX_CONVERSATION_CHARS`]); without it, all its stateless requests with one token are
/// one conversation.
pub const CONVERSATION_HEADER: &str = "toolgate-conversation";

/// The longest conversation name accepted.
pub const MAX_CONVERSATION_CHARS: usize = 256;

/// The header the server itself puts on a stateless request for the MCP handler: the
/// toolgate session of its conversation. Removed from every client request first.
pub(super) const INTERNAL_CONVERSATION_HEADER: &str = "x-toolgate-internal-conversation";

/// How to serve over HTTP.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// Allow a non-loopback bind address.
    pub allow_remote: bool,
    /// Extra host names accepted in `Host`/`Origin` (with or without a port).
    pub allowed_hosts: Vec<String>,
    /// The bearer-token file: one token a line (blank lines and `# comments` skipped), mode
    /// 0600. Created with one fresh token if it does not exist. `None`: [`default_token_file`].
    pub token_file: Option<PathBuf>,
    /// How long a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// Most authenticated connections open at once; more are answered 503.
    pub max_connections: usize,
    /// How long a new connection may take to send its first request head (at most
    /// `header_timeout`).
    pub preauth_timeout: Duration,
    /// Most connections without a valid token yet; over that the oldest is closed.
    pub max_preauth: usize,
    /// Most connections without a valid token yet from one address; over that its oldest is
    /// closed.
    pub max_preauth_per_peer: usize,
    /// Most live MCP sessions at once; an `initialize` over that is answered 503 (no session
    /// is evicted for it). The policy's `[http] max_sessions` sets it for `toolgate serve`.
    pub max_sessions: usize,
    /// A session with no request for this long (and none in flight) is closed; its id then
    /// gets 404. The policy's `[http] session_idle_secs` sets it for `toolgate serve`.
    pub session_idle: Duration,
}

impl HttpOptions {
    /// Options for `addr` with the defaults: loopback only, the default token file, 10 s for
    /// headers, 64 connections.
    pub fn new(addr: SocketAddr) -> Self {
        HttpOptions {
            addr,
            allow_remote: false,
            allowed_hosts: Vec::new(),
            token_file: None,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            preauth_timeout: DEFAULT_PREAUTH_TIMEOUT,
            max_preauth: DEFAULT_MAX_PREAUTH,
            max_preauth_per_peer: DEFAULT_MAX_PREAUTH_PER_PEER,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
        }
    }
}

/// What [`serve_http`] tells its caller once it accepts connections.
#[derive(Clone, Debug)]
pub struct Listening {
    /// The bound address.
    pub addr: SocketAddr,
    /// The token file in use.
    pub token_file: PathBuf,
    /// Whether the token file was created just now.
    pub created: bool,
    /// How many tokens it holds.
    pub tokens: usize,
    /// The console's address, with the file's first token in its fragment (`/#token=…`):
    /// for the person who started the server, never for a log.
    pub console: String,
}

/// How long a server on its way in waits for one serving alone to make room.
const JOIN_PATIENCE: Duration = Duration::from_secs(30);

/// Take this server's place among those serving the workspace (see `state::serving`).
async fn join_servers(gate: &Arc<Gate>) -> anyhow::Result<Servers> {
    let db = gate.state().path().to_path_buf();
    let joined = {
        let db = db.clone();
        tokio::task::spawn_blocking(move || Servers::join(&db, JOIN_PATIENCE)).await
    };
    let mut servers = joined
        .context("joining the workspace's servers failed")?
        .with_context(|| {
            format!(
                "cannot join the servers of the workspace at {}",
                db.display()
            )
        })?;
    match servers.company() {
        Company::Others => gate.state().share_reads_at_once(),
        Company::Alone => {
            let gate = gate.clone();
            servers.on_knock(&db, move || gate.state().share_reads_now());
        }
    }
    Ok(servers)
}

/// Serve until the listener fails. `ready` is called once it accepts connections, with the
/// bound address and the token file in use.
pub async fn serve_http(
    gate: Arc<Gate>,
    options: HttpOptions,
    ready: impl FnOnce(&Listening),
) -> anyhow::Result<()> {
    if !options.addr.ip().is_loopback() && !options.allow_remote {
        bail!(
            "refusing to listen on {}: it is not a loopback address, and anyone who can reach it could run tools in this workspace; use 127.0.0.1, or pass --allow-remote (with --allowed-host NAME for the names clients use)",
            options.addr
        );
    }
    let (token_file, private_dir) = match &options.token_file {
        Some(f) => (f.clone(), false),
        None => (default_token_file(&UserDirs::from_env()), true),
    };
    let (tokens, created) = Tokens::load_or_create(&token_file, private_dir)?;
    let tokens = Arc::new(tokens.with_console_token()?);
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let mut extra = options.allowed_hosts.clone();
    if options.allow_remote && !local.ip().is_unspecified() && !local.ip().is_loopback() {
        extra.push(local.to_string());
    }
    let allowlist = Allowlist::new(local.port(), &extra);

    // The Host/Origin check above runs first and is the one relied on; rmcp's own check is
    // turned off so the two cannot disagree about spelling (e.g. `[::1]`).
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_legacy_session_mode(true)
        // A stateless (2026-07-28) answer with nothing before it is plain JSON, not a stream.
        .with_json_response(true);
    let state_key = super::mrtr::StateKey::process()?;
    // A 2026-07-28 conversation's next request may land on another process serving this
    // workspace, which knows a read only from the database: while others may serve it, a
    // call that read answers once its read record is committed, not after the writer's
    // linger. A server alone (the kernel's lock says so) commits them all when another
    // comes, before letting it in (`state::serving`).
    let _servers = join_servers(&gate).await?;
    gate.state().serve_many();
    gate.run_scans_apart();
    // Sessions expire by our idle rule (which spares a session with a call in flight), not by
    // rmcp's keep-alive, which would end a session whose call runs long without messages.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let console = crate::console::Console::new(gate.clone());
    let forms = Arc::new(super::render::ToolForms::default());
    // One maker of connections, for rmcp's factory and for the calls run beside rmcp.
    // A session is named for the token of the request that made it (rmcp calls the factory
    // inside that request's task, where `request::OWNER` is set).
    let connect: Arc<request::Connect> = {
        let gate = gate.clone();
        Arc::new(move || {
            let owner = request::OWNER.try_with(Clone::clone).ok().flatten();
            McpConnection::owned(
                gate.clone(),
                state_key.clone(),
                forms.clone(),
                owner.as_deref(),
            )
        })
    };
    let factory = connect.clone();
    let service = StreamableHttpService::new(
        move || {
            let made = factory();
            // Called inside the request's own task: `handle` learns the session's connection.
            let _ = request::MADE.try_with(|slot| {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(made.downgrade());
            });
            Ok(made)
        },
        manager.clone(),
        config,
    );
    let sessions = Arc::new(Sessions::default());
    let limits = SessionLimits {
        max: options.max_sessions.max(1),
        idle: options.session_idle,
    };
    {
        let (sessions, manager) = (sessions.clone(), manager.clone());
        let every = (limits.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                close_sessions(&manager, sessions.take_expired(limits.idle)).await;
            }
        });
    }
    let connections = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let admission = admit::Admission::new(options.max_preauth, options.max_preauth_per_peer);
    let preauth_deadline = options.preauth_timeout.min(options.header_timeout);
    let overflow = Arc::new(Semaphore::new(OVERFLOW_RESPONDERS));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    let console_url = format!("http://{local}/#token={}", tokens.console());
    let served = Arc::new(Served {
        service,
        console,
        allowlist,
        tokens: tokens.clone(),
        sessions,
        manager,
        limits,
        quiet: Quiet::new(QUIET_FOR),
        modern: stateless::ModernPeer::new(connect()),
        connect,
        gate,
    });
    ready(&Listening {
        addr: local,
        console: console_url,
        token_file,
        created,
        tokens: tokens.in_file(),
    });

    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                // Out of file descriptors, most likely: give the open connections a moment.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers are written in pieces (an SSE stream's events): without this, Nagle's
        // algorithm holds each piece for the client's delayed ACK, ~40 ms a request (measured
        // on a keep-alive 2025-11-25 session).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "setting TCP_NODELAY failed");
        }
        let mut place = admission.admit(peer.ip());
        let (served, connections, overflow) =
            (served.clone(), connections.clone(), overflow.clone());
        let quiet = served.clone();
        let mut builder = builder.clone();
        let max = options.max_connections;
        let conn = async move {
            let mut stream = stream;
            let tokens = served.tokens.clone();
            let (head, token) =
                match admit::read_head(&mut stream, &mut place, preauth_deadline, &tokens).await {
                    admit::Head::Read(head, token) => (head, token),
                    admit::Head::Gone => return,
                };
            let io = TokioIo::new(admit::Rewind::new(head, stream));
            let handler = {
                let served = served.clone();
                hyper::service::service_fn(move |req: Request<Incoming>| {
                    let served = served.clone();
                    async move { Ok::<_, Infallible>(handle(req, &served).await) }
                })
            };
            if token.is_none() {
                // No valid token: this one request is answered (the page, a 401, a 403), and
                // the connection keeps its pre-auth place until it is closed.
                builder.keep_alive(false);
                let serving = builder.serve_connection(io, handler);
                tokio::select! {
                    _ = serving => {}
                    _ = &mut place.displaced => {}
                }
                return;
            }
            drop(place);
            let Ok(permit) = connections.try_acquire_owned() else {
                let Ok(permit) = overflow.try_acquire_owned() else {
                    tracing::warn!(%peer, "too many connections; closed one unanswered");
                    return;
                };
                tracing::warn!(%peer, max, "too many connections; answering 503");
                builder.keep_alive(false);
                let busy = hyper::service::service_fn(|_req: Request<Incoming>| async {
                    Ok::<_, Infallible>(busy_response())
                });
                let _ = builder.serve_connection(io, busy).await;
                drop(permit);
                return;
            };
            if let Err(e) = builder.serve_connection(io, handler).await {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
            drop(permit);
        };
        // While the server is quiet, a connection's wakes of itself keep it on its worker.
        tokio::spawn(repoll::Repoll::new(conn, move || quiet.quiet.is_quiet()));
    }
}

/// The toolgate session of the conversation `named` by the holder of the token with
/// `digest`: the same name with another token is another conversation, and the session name
/// reveals neither.
///
/// The name carries the token's owner tag (`conv-TAG-…`), so the console shows the
/// conversation to that token and the person's only.
pub fn conversation_session(digest: &[u8; 32], named: &str) -> String {
    let h = Sha256::new()
        .chain_update(b"toolgate conversation v1\0")
        .chain_update(digest)
        .chain_update(b"\0")
        .chain_update(named.as_bytes())
        .finalize();
    format!(
        "conv-{}-{}",
        super::token::owner_tag(digest),
        &hex::encode(h)[..32]
    )
}
