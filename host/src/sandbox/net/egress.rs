//! The egress proxy: how a confined shell command reaches the network.
//!
//! A command gets no route out; the only thing it can reach is this proxy, which speaks HTTP
//! `CONNECT` (for HTTPS and anything tunnelled) and plain HTTP forwarding (an absolute
//! `http://` request target). Every connection is judged by host and port before anything is
//! sent:
//! - a `deny` pattern wins over everything;
//! - the destination must match an `allow` pattern; a pattern without a port means the default
//!   ports only (80 and 443), so naming a host opens its web service, not every port;
//! - the name is resolved here, and every address is checked by the same code as `fetch`'s
//!   ([`super::resolve_checked`]): loopback, private, link-local, metadata and translated forms
//!   are refused unless `[network] allow_private` names them; shorthand IPv4 spellings are
//!   refused outright; the connection goes to the checked address;
//! - `limited` allows only `GET`, `HEAD` and `OPTIONS` on plain HTTP (and `CONNECT` to an
//!   allowed host, whose contents the proxy cannot see).
//!
//! A refusal is answered `403 Forbidden` with the reason in the body, and every connection,
//! allowed or refused, is recorded with the bytes sent each way for the call's audit and
//! observation. Plain HTTP is forwarded one request per connection: the judged head (with
//! `Connection: close`) and exactly the body it frames ([`http1`]: two `Content-Length`s,
//! `Transfer-Encoding` with `Content-Length`, a coding other than `chunked` or a folded header
//! line are refused as request smuggling), never a byte after it. A second request on the same
//! connection (pipelined or kept alive) is not forwarded; it is recorded as refused with the
//! host it named, and the connection is closed after the first answer.
//!
//! Brokered credentials ([`super::creds`], [`super::scrub`]): every answer from a host a
//! credential is bound to is scrubbed of every form of every credential's value before the
//! command sees it (head and body, on the stream; compression refused), and a CONNECT to such a
//! host is refused, since the proxy cannot see into the tunnel.
//!
//! A destination no rule names is put to [`EgressPolicy::ask`]: the gate answers it with the
//! ladder for the key `net:<host>` (grants, the mode, a person; refused headless).

use super::http1::{self, Framing};
use super::{resolve_checked, shorthand_refusal, HostPattern, Unreachable};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes buffered each way while relaying a connection.
const RELAY_BUF: usize = 64 << 10;

/// Most connections recorded for one call; later ones are counted, not listed.
const MAX_RECORDED: usize = 256;

/// What a command may reach through the proxy.
#[derive(Clone, Debug, Default)]
pub struct EgressPolicy {
    /// Destinations allowed (`host`, `*.domain`, `host:port`).
    pub allow: Vec<HostPattern>,
    /// Destinations refused even when `allow` names them.
    pub deny: Vec<HostPattern>,
    /// Only `GET`/`HEAD`/`OPTIONS` on plain HTTP (and `CONNECT` to allowed hosts).
    pub limited: bool,
    /// Hosts or addresses that may resolve to non-public addresses (`[network] allow_private`).
    pub allow_private: Vec<HostPattern>,
    /// Bound on the name lookup, on connecting, and on reading the request head.
    pub timeout: Duration,
    /// Asked about a destination no rule names (`None`: refused). Deny rules, `limited` and
    /// the address check are never asked about.
    pub ask: Option<Asker>,
    /// Credentials put into plain-HTTP requests to their hosts; a placeholder going anywhere
    /// else (CONNECT included) is refused as a leak attempt.
    pub credentials: super::creds::Credentials,
}

/// What the proxy asks about a destination no rule names: `Ok(how)` lets it through (`how`
/// says who allowed it, for the record), `Err(why)` refuses it.
pub type AskFn = dyn Fn(
        String,
        u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>>
    + Send
    + Sync;

/// The ladder's question for the proxy (the gate answers it: grants, mode, a person).
#[derive(Clone)]
pub struct Asker(pub Arc<AskFn>);

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Asker")
    }
}

/// What the rules say of one destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judged {
    /// An allow pattern names it (the pattern as written).
    Allowed(String),
    /// A deny rule or the address form refuses it: never asked about.
    Denied(String),
    /// No rule names it (why, with the policy line that would allow it).
    Unlisted(String),
}

impl EgressPolicy {
    /// Whether `host:port` may be reached, before any lookup (`Err`: why not, in words).
    pub fn judge(&self, scheme: &str, host: &str, port: u16) -> Result<(), String> {
        match self.rules(scheme, host, port) {
            Judged::Allowed(_) => Ok(()),
            Judged::Denied(why) | Judged::Unlisted(why) => Err(why),
        }
    }

    /// What the rules alone say of `host:port`.
    pub fn rules(&self, scheme: &str, host: &str, port: u16) -> Judged {
        if let Some(why) = shorthand_refusal(scheme, host, port) {
            return Judged::Denied(why);
        }
        let names = |p: &&HostPattern| {
            // Without a port a pattern means the web ports; with one, exactly that port.
            p.matches(scheme, host, port) && (p.port().is_some() || port == 80 || port == 443)
        };
        if let Some(p) = self.deny.iter().find(names) {
            return Judged::Denied(format!(
                "{host}:{port} is refused by the shell's network deny rule `{p}`"
            ));
        }
        match self.allow.iter().find(names) {
            Some(p) => Judged::Allowed(format!("[shell] network `{p}`")),
            None => Judged::Unlisted(format!(
                "{host}:{port} is not on the shell's network allowlist (add \"{}\" to `[shell] network` in the policy to allow it)",
                net_target(host, port)
            )),
        }
    }
}

/// The target of a destination's key `net:TARGET`: the host for the web ports (80, 443),
/// `host:port` for any other.
pub fn net_target(host: &str, port: u16) -> String {
    if port == 80 || port == 443 {
        host.to_string()
    } else if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// One connection a command made through the proxy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Connection {
    /// The destination host as the command named it (lower case).
    pub host: String,
    /// The destination port.
    pub port: u16,
    /// `CONNECT`, or the plain-HTTP method.
    pub method: String,
    /// Whether it was let through.
    pub allowed: bool,
    /// Why it was refused (or why it failed after being allowed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What allowed it: the policy's pattern, a grant, the mode or a person's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_by: Option<String>,
    /// Credentials the proxy put into the request (their names; never their values).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
    /// A credential's placeholder was sent where it is not bound (refused).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub leak: bool,
    /// Bytes from the command to the destination (after the request head for plain HTTP).
    pub sent: u64,
    /// Bytes from the destination to the command.
    pub received: u64,
}

/// What the proxy recorded so far.
#[derive(Debug, Default)]
struct Log {
    connections: Vec<Connection>,
    unrecorded: u64,
}

/// A running proxy; it stops when dropped.
pub struct Egress {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    task: tokio::task::JoinHandle<()>,
}

impl Egress {
    /// Serve `listener` (in the command's network namespace, or on loopback in tests) with
    /// `policy` until the returned value is dropped. Needs a tokio runtime.
    pub fn serve(listener: TcpListener, policy: EgressPolicy) -> std::io::Result<Egress> {
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Log::default()));
        let policy = Arc::new(policy);
        let task = tokio::spawn({
            let log = log.clone();
            async move {
                // The connections live in this task's set: aborting the task (on drop) ends
                // every tunnel still open, so none outlives the call.
                let mut open = tokio::task::JoinSet::new();
                loop {
                    tokio::select! {
                        accepted = listener.accept() => {
                            let Ok((client, _)) = accepted else { break };
                            let (policy, log) = (policy.clone(), log.clone());
                            open.spawn(async move {
                                for c in handle(client, &policy).await {
                                    record(&log, c);
                                }
                            });
                        }
                        Some(_) = open.join_next(), if !open.is_empty() => {}
                    }
                }
            }
        });
        Ok(Egress { addr, log, task })
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connections so far, and how many more were made but not listed.
    pub fn connections(&self) -> (Vec<Connection>, u64) {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        (log.connections.clone(), log.unrecorded)
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(log: &Mutex<Log>, c: Connection) {
    tracing::info!(host = %c.host, port = c.port, method = %c.method, allowed = c.allowed,
        sent = c.sent, received = c.received, "egress connection");
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    if log.connections.len() < MAX_RECORDED {
        log.connections.push(c);
    } else {
        log.unrecorded += 1;
    }
}

/// Split `host:port` (`[v6]:port`), lower-casing the host.
fn authority(s: &str, default: u16) -> Option<(String, u16)> {
    let (host, port) = super::split_host_port(s)?;
    let host = host.to_ascii_lowercase();
    if host.parse::<std::net::IpAddr>().is_err() && !super::valid_hostname(&host) {
        return None;
    }
    Some((host, port.unwrap_or(default)))
}

/// Answer a refusal and close.
async fn refuse(client: &mut TcpStream, status: &str, why: &str) {
    let body = format!("toolgate egress proxy: {why}\n");
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(reply.as_bytes()).await;
    let _ = client.shutdown().await;
}

/// Serve one client connection; the records of it (none: not an HTTP request at all; two: a
/// second request came on the connection and was not forwarded).
async fn handle(mut client: TcpStream, policy: &EgressPolicy) -> Vec<Connection> {
    let mut head = match http1::read_head(&mut client, policy.timeout).await {
        Ok(h) => h,
        Err(why) => {
            refuse(
                &mut client,
                "400 Bad Request",
                &format!("the request: {why}"),
            )
            .await;
            return Vec::new();
        }
    };
    let connect = head.method.eq_ignore_ascii_case("CONNECT");
    let (scheme, dest) = if connect {
        ("https", authority(&head.target, 443))
    } else {
        match head.target.split_once("://") {
            Some((s, rest)) if s.eq_ignore_ascii_case("http") => {
                let auth = rest.split(['/', '?', '#']).next().unwrap_or("");
                ("http", authority(auth, 80).filter(|_| !auth.contains('@')))
            }
            _ => {
                let why = format!(
                    "`{}` is not an absolute http:// URL or a CONNECT authority (for HTTPS, a client sends CONNECT)",
                    head.target
                );
                refuse(&mut client, "400 Bad Request", &why).await;
                return Vec::new();
            }
        }
    };
    let Some((host, port)) = dest else {
        let why = format!("`{}` does not name a host and port", head.target);
        refuse(&mut client, "400 Bad Request", &why).await;
        return Vec::new();
    };
    let mut conn = Connection {
        host: host.clone(),
        port,
        method: head.method.to_ascii_uppercase(),
        allowed: false,
        reason: None,
        allowed_by: None,
        credentials: Vec::new(),
        leak: false,
        sent: 0,
        received: 0,
    };
    let judged = if policy.limited
        && !connect
        && !matches!(conn.method.as_str(), "GET" | "HEAD" | "OPTIONS")
    {
        Err(format!(
            "{} is not allowed: the shell's network is `limited` (GET, HEAD and OPTIONS only)",
            conn.method
        ))
    } else {
        match policy.rules(scheme, &host, port) {
            Judged::Allowed(by) => Ok(by),
            Judged::Denied(why) => Err(why),
            Judged::Unlisted(why) => match &policy.ask {
                Some(ask) => (ask.0)(host.clone(), port).await,
                None => Err(why),
            },
        }
    };
    let judged = judged.map(|by| conn.allowed_by = Some(by));
    // Credentials: put into a plain-HTTP request to a bound host; a placeholder anywhere else
    // (or in a CONNECT, whose tunnel the proxy cannot see into) is a leak attempt.
    let judged = judged.and_then(|()| {
        let mut headers = head.headers.clone();
        match super::creds::broker(
            &policy.credentials,
            scheme,
            &host,
            port,
            &head.target,
            &mut headers,
        ) {
            Ok(used) if !connect => {
                head.headers = headers;
                conn.credentials = used;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(r) if connect && !r.leak => Ok(()),
            Err(r) => {
                conn.leak = r.leak;
                Err(r.why)
            }
        }
    });
    // A host a credential is bound to may answer with the value (reflected, or kept from an
    // earlier request): the proxy must see the bytes to take it out, and a TLS tunnel hides them.
    let judged = judged.and_then(|()| match super::scrub::bound_here(&policy.credentials, &host, port) {
        Some(name) if connect => Err(format!(
            "CONNECT to {host}:{port} is refused: credential `{name}` is bound to {host}, and the proxy cannot see into a TLS tunnel to take the credential's value out of what the server answers (a server can reflect or keep it); reach {host} with plain http:// through the proxy, where the credential is brokered and scrubbed, or with the `fetch` tool"
        )),
        _ => Ok(()),
    });
    // Every shape of body two parsers could delimit differently is refused before sending.
    let judged = judged.and_then(|()| match connect {
        true => Ok(Framing::Empty),
        false => http1::request_framing(&head),
    });
    let framing = match judged {
        Ok(f) => f,
        Err(why) => {
            refuse(&mut client, "403 Forbidden", &why).await;
            conn.reason = Some(why);
            return vec![conn];
        }
    };
    let addrs =
        match resolve_checked(&policy.allow_private, scheme, &host, port, policy.timeout).await {
            Ok(a) => a,
            Err(e) => {
                let (status, why) = match e {
                    Unreachable::Private(why) => ("403 Forbidden", why),
                    Unreachable::Timeout => (
                        "504 Gateway Timeout",
                        format!("{host}: the name lookup timed out"),
                    ),
                    Unreachable::NoName(why) => (
                        "502 Bad Gateway",
                        format!("{host}: the name does not resolve ({why})"),
                    ),
                    Unreachable::NoAddress => (
                        "502 Bad Gateway",
                        format!("{host}: the name has no address"),
                    ),
                };
                refuse(&mut client, status, &why).await;
                conn.reason = Some(why);
                return vec![conn];
            }
        };
    let mut upstream =
        match tokio::time::timeout(policy.timeout, TcpStream::connect(&addrs[..])).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                let why = format!("{host}:{port}: could not connect ({e})");
                refuse(&mut client, "502 Bad Gateway", &why).await;
                conn.allowed = true;
                conn.reason = Some(why);
                return vec![conn];
            }
            Err(_) => {
                let why = format!("{host}:{port}: connecting timed out");
                refuse(&mut client, "504 Gateway Timeout", &why).await;
                conn.allowed = true;
                conn.reason = Some(why);
                return vec![conn];
            }
        };
    conn.allowed = true;
    if connect {
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
            || upstream.write_all(&head.rest).await.is_err()
        {
            return vec![conn];
        }
        conn.sent = head.rest.len() as u64;
        // 64 KiB each way: with tokio's default 8 KiB a 100 MB download ran at a quarter of a
        // direct connection's speed (docs/benchmarks.md, "The egress proxy").
        let relay = tokio::io::copy_bidirectional_with_sizes(
            &mut client,
            &mut upstream,
            RELAY_BUF,
            RELAY_BUF,
        );
        if let Ok((up, down)) = relay.await {
            conn.sent += up;
            conn.received = down;
        }
        return vec![conn];
    }
    // Plain HTTP: this one request (its head and the body it frames), then the response.
    let scrubber = super::scrub::for_host(&policy.credentials, &host, port);
    let first = http1::forward_head(&head, scrubber.is_some());
    if upstream.write_all(&first).await.is_err() {
        return vec![conn];
    }
    conn.sent = first.len() as u64;
    let rest = std::mem::take(&mut head.rest);
    let request = (conn.method.clone(), head.version.clone());
    let (surplus, outcome) = relay_one(
        &mut client,
        &mut upstream,
        rest,
        framing,
        scrubber,
        (&host, &request.0, &request.1),
        policy.timeout,
        &mut conn,
    )
    .await;
    if let Err((why, fresh)) = outcome {
        if fresh {
            refuse(&mut client, "502 Bad Gateway", &why).await;
        }
        conn.reason = Some(why);
    }
    let _ = client.shutdown().await;
    let second = second_request(&conn, &surplus);
    std::iter::once(conn).chain(second).collect()
}

/// Forward the body of one request and relay its response; what the client sent past the body
/// (not forwarded) and how the relay ended.
#[allow(clippy::too_many_arguments)]
async fn relay_one(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    rest: Vec<u8>,
    framing: Framing,
    scrubber: Option<super::scrub::Scrubber>,
    (host, method, version): (&str, &str, &str),
    timeout: Duration,
    conn: &mut Connection,
) -> (Vec<u8>, Result<(), (String, bool)>) {
    let mut surplus = Vec::new();
    let (mut sent, mut received) = (0u64, 0u64);
    let outcome = {
        let (mut cr, mut cw) = client.split();
        let (mut ur, mut uw) = upstream.split();
        let req = async {
            let r = http1::forward_body(&mut cr, rest, &mut uw, framing, &mut surplus, &mut sent);
            if let Err(why) = r.await {
                return why;
            }
            // Whatever comes next is kept (to be recorded), never forwarded.
            let mut b = [0u8; 4096];
            while surplus.len() < http1::MAX_HEAD {
                match cr.read(&mut b).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => surplus.extend_from_slice(&b[..n]),
                }
            }
            std::future::pending::<String>().await
        };
        let resp = http1::relay_response(
            &mut ur,
            &mut cw,
            scrubber,
            host,
            (method, version),
            timeout,
            &mut received,
        );
        tokio::pin!(req, resp);
        tokio::select! {
            r = &mut resp => r,
            why = &mut req => Err((why, true)),
        }
    };
    conn.sent += sent;
    conn.received = received;
    (
        surplus,
        outcome.map_err(|(why, fresh)| (why, fresh && received == 0)),
    )
}

/// The record of a second request sent on a connection after the first one's body: refused,
/// never forwarded (`None`: nothing but blank lines came).
fn second_request(first: &Connection, surplus: &[u8]) -> Option<Connection> {
    let start = surplus.iter().position(|b| !matches!(b, b'\r' | b'\n'))?;
    let surplus = &surplus[start..];
    let end = surplus
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(surplus.len());
    let head = http1::parse_head(&surplus[..end], Vec::new()).ok();
    let named = head.as_ref().and_then(|h| {
        let auth = match h.target.split_once("://") {
            Some((_, rest)) => rest.split(['/', '?', '#']).next().unwrap_or(""),
            None => h.all("host").first().copied().unwrap_or(""),
        };
        authority(auth, 80)
    });
    let (host, port) = named.unwrap_or_else(|| ("(unparsed)".to_string(), first.port));
    Some(Connection {
        host,
        port,
        method: head.map_or_else(|| "(unparsed)".to_string(), |h| h.method.to_ascii_uppercase()),
        allowed: false,
        reason: Some(
            "a second request on one connection was not forwarded: the proxy forwards one request per connection and then closes it (send each request on a new connection)".to_string(),
        ),
        allowed_by: None,
        credentials: Vec::new(),
        leak: false,
        sent: 0,
        received: 0,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "egress_tests.rs"]
mod tests;
