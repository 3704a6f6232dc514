//! A confined shell command reaches the network only through the host's egress proxy, and only
//! the hosts the policy, a grant or a person allowed (issue #20 part 1). Every server here is
//! one the test starts on loopback; `[network] allow_private` names it, as a user would for a
//! service on their own machine.

use crate::common::{cache_dir, gate_granting, Ws, SESSION};
use crate::modes::{self, Mode};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use toolgate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::{Gate, GateOptions, Observation};

/// A loopback HTTP server answering every request with `reply` (a whole response), counting
/// connections. It stops when the test process ends.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

fn server_on(addr: &str, reply: impl Fn(u16) -> String + Send + 'static) -> Server {
    let l = TcpListener::bind((addr, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let count = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = s.write_all(reply(port).as_bytes());
        }
    });
    Server { port, hits }
}

fn ok_server(body: &'static str) -> Server {
    server_on("127.0.0.1", move |_| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    })
}

/// Whether commands get a network namespace of their own here, so the test can go on; else
/// it skips (with the reason). Run as another user ([`crate::modes`]) it never skips: as nobody
/// or as root without CAP_SYS_ADMIN the host makes the namespace inside a user namespace, and
/// with user namespaces refused a command must get no network at all, which is checked here
/// instead.
async fn namespaces_work() -> bool {
    match modes::current() {
        Some(Mode::NobodyWithoutUserns) => {
            no_network_without_namespaces().await;
            false
        }
        Some(_) => true,
        None if toolgate::exec::netns::create().is_err() => {
            eprintln!("skipped: this machine cannot create network namespaces for commands");
            false
        }
        None => true,
    }
}

/// Without a network namespace no proxy can be the only way out, so a command that asks for a
/// listed, allowed server never reaches it: it is refused naming the missing layer, or runs
/// with no network (and says so).
async fn no_network_without_namespaces() {
    let s = ok_server("must-not-be-reached");
    let ws = Ws::new();
    let policy = format!(
        "mode = \"ask\"\n[shell]\nnetwork = [\"127.0.0.1:{p}\"]\n[network]\nallow_private = [\"127.0.0.1:{p}\"]\n",
        p = s.port
    );
    let g = gate_with(&ws, &policy, &["shell"]).await;
    let o = sh(&g, &fetch_cmd(&format!("http://127.0.0.1:{}/", s.port))).await;
    assert!(!o.content.contains("BODY"), "{o:#?}");
    assert_eq!(
        s.hits.load(Ordering::SeqCst),
        0,
        "reached without a namespace: {o:#?}"
    );
    if !modes::refused_for_a_missing_layer(&o) {
        let c = &o.data["confinement"];
        assert!(
            o.data.get("command").is_some(),
            "neither ran nor refused: {o:#?}"
        );
        assert_eq!(c["mode"], json!("landlock-only"), "{o:#?}");
        assert_ne!(c["egress_proxy"], json!(true), "{o:#?}");
    }
}

/// A python3 one-liner fetching `url` through the environment's proxy, printing the body or
/// the HTTP error with its body.
fn fetch_cmd(url: &str) -> String {
    format!(
        "python3 -c \"import urllib.request,urllib.error,sys\ntry:\n print('BODY', urllib.request.urlopen('{url}', timeout=20).read().decode())\nexcept urllib.error.HTTPError as e:\n print('HTTP', e.code, e.read().decode())\nexcept Exception as e:\n print('FAILED', e)\""
    )
}

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(SESSION, "shell", json!({ "command": command }))
        .await
}

fn connections(o: &Observation) -> Vec<Value> {
    o.data["network"]["connections"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

async fn gate_with(ws: &Ws, policy: &str, grants: &[&str]) -> Gate {
    ws.write(".toolgate/policy.toml", policy);
    gate_granting(ws, grants).await
}

/// An allowed local server is reached through the proxy (the command has no other way out);
/// a port that is not on the list is refused before the server sees anything, with the hint
/// naming the policy line and the grant; both are in `data.network` and the audit.
#[tokio::test]
async fn an_allowed_server_is_reached_and_an_unlisted_port_is_refused_headless() {
    if !namespaces_work().await {
        return;
    }
    let allowed = ok_server("hello-from-upstream");
    let other = ok_server("must-not-be-seen");
    let ws = Ws::new();
    let policy = format!(
        "mode = \"ask\"\n[shell]\nnetwork = [\"127.0.0.1:{a}\"]\n[network]\nallow_private = [\"127.0.0.1:{a}\", \"127.0.0.1:{o}\"]\n",
        a = allowed.port,
        o = other.port
    );
    let g = gate_with(&ws, &policy, &["shell"]).await;
    let o = sh(
        &g,
        &fetch_cmd(&format!("http://127.0.0.1:{}/x", allowed.port)),
    )
    .await;
    assert!(o.content.contains("BODY hello-from-upstream"), "{:#?}", o);
    assert_eq!(o.data["confinement"]["egress_proxy"], json!(true), "{o:#?}");
    assert_eq!(
        o.data["spawner"],
        json!(true),
        "started by the spawner: {o:#?}"
    );
    let c = connections(&o);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["allowed"], json!(true));
    assert_eq!(c[0]["port"], json!(allowed.port));
    assert!(c[0]["received"].as_u64().unwrap() > 0, "{c:?}");
    assert!(
        c[0]["allowed_by"]
            .as_str()
            .unwrap()
            .contains("[shell] network"),
        "{c:?}"
    );

    let o = sh(&g, &fetch_cmd(&format!("http://127.0.0.1:{}/", other.port))).await;
    assert!(o.content.contains("HTTP 403"), "{o:#?}");
    let target = format!("net:127.0.0.1:{}", other.port);
    assert!(
        o.content.contains(&format!("--grant '{target}'")) && o.content.contains("[shell] network"),
        "the refusal names the grant and the policy line: {}",
        o.content
    );
    assert_eq!(other.hits.load(Ordering::SeqCst), 0);
    let c = connections(&o);
    assert_eq!(c[0]["allowed"], json!(false), "{c:?}");
    assert_eq!(o.data["network"]["refused"], json!(1));

    // Each connection is in the audit with the call id.
    let events = g
        .state()
        .audit_events(&toolgate::state::AuditQuery {
            call_id: Some(o.audit_id.clone()),
            ..Default::default()
        })
        .unwrap();
    let net: Vec<_> = events.iter().filter(|e| e.event == "network").collect();
    assert_eq!(net.len(), 1, "{events:?}");
    assert_eq!(net[0].detail["port"], json!(other.port));
    assert_eq!(net[0].detail["allowed"], json!(false));
}

/// Naming a host does not open the user's own network: without `allow_private`, a loopback
/// destination is refused by the same address check `fetch` uses, for CONNECT and plain HTTP.
#[tokio::test]
async fn a_private_address_is_refused_without_allow_private_even_when_listed() {
    if !namespaces_work().await {
        return;
    }
    let s = ok_server("private-service");
    let ws = Ws::new();
    let policy = format!(
        "mode = \"ask\"\n[shell]\nnetwork = [\"127.0.0.1:{p}\", \"localhost:{p}\"]\n",
        p = s.port
    );
    let g = gate_with(&ws, &policy, &["shell"]).await;
    // A raw CONNECT, as an HTTPS client sends it.
    let connect = format!(
        "python3 -c \"import os,socket\nu=os.environ['HTTPS_PROXY'].rsplit(':',1)\nc=socket.create_connection(('127.0.0.1',int(u[1])))\nc.sendall(b'CONNECT localhost:{p} HTTP/1.1\\r\\n\\r\\n')\nprint('REPLY', c.recv(4096).decode())\"",
        p = s.port
    );
    let o = sh(&g, &connect).await;
    assert!(o.content.contains("REPLY HTTP/1.1 403"), "{o:#?}");
    assert!(o.content.contains("allow_private"), "{}", o.content);
    let o = sh(&g, &fetch_cmd(&format!("http://127.0.0.1:{}/", s.port))).await;
    assert!(o.content.contains("HTTP 403"), "{o:#?}");
    assert_eq!(
        s.hits.load(Ordering::SeqCst),
        0,
        "the private service was reached"
    );
}

/// A redirect from an allowed server to one that is not allowed is refused at the proxy: the
/// client's second request is judged like the first.
#[tokio::test]
async fn a_redirect_to_a_host_not_on_the_list_is_refused_at_the_proxy() {
    if !namespaces_work().await {
        return;
    }
    let target = ok_server("redirected-secret");
    let tport = target.port;
    let redirector = server_on("127.0.0.1", move |_| {
        format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{tport}/stolen\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    });
    let ws = Ws::new();
    let policy = format!(
        "mode = \"ask\"\n[shell]\nnetwork = [\"127.0.0.1:{r}\"]\n[network]\nallow_private = [\"127.0.0.1:{r}\", \"127.0.0.1:{tport}\"]\n",
        r = redirector.port
    );
    let g = gate_with(&ws, &policy, &["shell"]).await;
    let o = sh(
        &g,
        &fetch_cmd(&format!("http://127.0.0.1:{}/", redirector.port)),
    )
    .await;
    assert!(o.content.contains("HTTP 403"), "{o:#?}");
    assert!(!o.content.contains("redirected-secret"), "{}", o.content);
    assert_eq!(target.hits.load(Ordering::SeqCst), 0);
    assert_eq!(redirector.hits.load(Ordering::SeqCst), 1);
    let c = connections(&o);
    assert_eq!(c.len(), 2, "{c:?}");
    // Each is recorded when it ends: the first (relayed, then closed) may be recorded after
    // the second (refused at once), so they are told apart by port.
    let allowed_at = |port: u16| {
        c.iter()
            .find(|x| x["port"] == json!(port))
            .map(|x| x["allowed"].clone())
    };
    assert_eq!(
        (allowed_at(redirector.port), allowed_at(tport)),
        (Some(json!(true)), Some(json!(false))),
        "{c:?}"
    );
}

/// `--grant 'net:HOST:PORT'` allows a destination the policy does not list (session scope),
/// and `limited` refuses anything but GET/HEAD/OPTIONS on plain HTTP.
#[tokio::test]
async fn a_net_grant_allows_an_unlisted_host_and_limited_refuses_a_post() {
    if !namespaces_work().await {
        return;
    }
    let s = ok_server("granted");
    let ws = Ws::new();
    let policy = format!(
        "mode = \"ask\"\n[shell]\nnetwork_mode = \"limited\"\n[network]\nallow_private = [\"127.0.0.1:{}\"]\n",
        s.port
    );
    let grant = format!("net:127.0.0.1:{}", s.port);
    let g = gate_with(&ws, &policy, &["shell", &grant]).await;
    let o = sh(&g, &fetch_cmd(&format!("http://127.0.0.1:{}/", s.port))).await;
    assert!(o.content.contains("BODY granted"), "{o:#?}");
    let c = connections(&o);
    assert!(
        c[0]["allowed_by"].as_str().unwrap().contains(&grant),
        "{c:?}"
    );
    let post = format!(
        "python3 -c \"import urllib.request,urllib.error\ntry:\n urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:{}/', data=b'x'), timeout=20)\nexcept urllib.error.HTTPError as e:\n print('HTTP', e.code, e.read().decode())\"",
        s.port
    );
    let before = s.hits.load(Ordering::SeqCst);
    let o = sh(&g, &post).await;
    assert!(
        o.content.contains("HTTP 403") && o.content.contains("limited"),
        "{o:#?}"
    );
    assert_eq!(s.hits.load(Ordering::SeqCst), before);
}

/// Answers every request with one answer and keeps what it was asked.
struct Scripted {
    answer: Answer,
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Scripted {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        self.requests.lock().unwrap().push(request);
        let answer = self.answer;
        Box::pin(async move { Some(answer) })
    }
}

/// With a person to ask, an unlisted destination is asked as `net:<host>`, offering once and
/// the session but never the project (the shell's ceiling); a session answer is kept, so the
/// next command reaches it without asking; the same host is asked once per call.
#[tokio::test]
async fn a_person_is_asked_for_net_and_a_session_answer_is_kept() {
    if !namespaces_work().await {
        return;
    }
    let s = ok_server("approved-by-a-person");
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!(
            "mode = \"ask\"\n[network]\nallow_private = [\"127.0.0.1:{}\"]\n",
            s.port
        ),
    );
    let approver = Arc::new(Scripted {
        answer: Answer::Session,
        requests: Mutex::new(Vec::new()),
    });
    let g = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        approver: Some(approver.clone() as Arc<dyn Approver>),
        grants: vec!["shell".into()],
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap();
    let url = format!("http://127.0.0.1:{}/", s.port);
    let twice = fetch_cmd(&url)
        .replace(
            "print('BODY'",
            "urllib.request.urlopen('URL').read(); print('BODY'",
        )
        .replace("URL", &url);
    let o = sh(&g, &twice).await;
    assert!(o.content.contains("BODY approved-by-a-person"), "{o:#?}");
    let key = format!("net:127.0.0.1:{}", s.port);
    {
        let asked = approver.requests.lock().unwrap();
        let net: Vec<_> = asked.iter().filter(|r| r.key == key).collect();
        assert_eq!(net.len(), 1, "asked once per call: {asked:?}");
        assert!(
            !net[0].choices.contains(&Answer::Project),
            "{:?}",
            net[0].choices
        );
        assert!(net[0]
            .description
            .contains(&format!("127.0.0.1:{}", s.port)));
    }
    assert_eq!(s.hits.load(Ordering::SeqCst), 2);
    let o = sh(&g, &fetch_cmd(&url)).await;
    assert!(o.content.contains("BODY approved-by-a-person"), "{o:#?}");
    let asked = approver.requests.lock().unwrap();
    assert_eq!(
        asked.iter().filter(|r| r.key == key).count(),
        1,
        "{asked:?}"
    );
}

/// A read-only command gets no network at all (no proxy either), and an untrusted workspace's
/// own `[shell] network` list opens nothing.
#[tokio::test]
async fn read_only_commands_and_untrusted_lists_get_no_network() {
    if !namespaces_work().await {
        return;
    }
    let s = ok_server("nope");
    let ws = Ws::new();
    ws.plant(
        ".toolgate/policy.toml",
        format!(
            "mode = \"ask\"\n[shell]\nnetwork = [\"127.0.0.1:{p}\"]\n[network]\nallow_private = [\"127.0.0.1:{p}\"]\n",
            p = s.port
        ),
    );
    let g = gate_granting(&ws, &["shell"]).await;
    let o = sh(&g, &fetch_cmd(&format!("http://127.0.0.1:{}/", s.port))).await;
    assert!(!o.content.contains("BODY nope"), "{o:#?}");
    assert_eq!(s.hits.load(Ordering::SeqCst), 0);
    let o = sh(&g, "printenv").await;
    assert!(
        !o.content.contains("HTTP_PROXY"),
        "a read-only command got a proxy: {o:#?}"
    );
    assert_eq!(
        o.data["confinement"]["egress_proxy"],
        json!(false),
        "{o:#?}"
    );
}
