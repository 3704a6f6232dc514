//! Issue #49 items 4 and 6: the managed layer is a ceiling for the network (a managed
//! `[shell] network = false` leaves commands no way out; a managed host list bounds every
//! `net:` decision, and the hosts `fetch` and `download` reach), and a background job's
//! connections are audited and shown by `job_output` whenever they happen. Every server is one
//! the test starts on loopback; `[network] allow_private` names it.

use crate::common::{cache_dir, Ws, SESSION};
use crate::modes::{self, Mode as RunMode};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate::gate::approval::{Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::policy::Mode;
use toolgate::{Gate, GateOptions, Observation};

/// A loopback HTTP server answering every request with `reply`, counting connections.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

fn server(reply: impl Fn(u16) -> String + Send + 'static) -> Server {
    let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
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
    server(move |_| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    })
}

/// A python3 one-liner fetching `url` through the environment's proxy.
fn fetch_cmd(url: &str) -> String {
    format!(
        "python3 -c \"import urllib.request,urllib.error,sys\ntry:\n print('BODY', urllib.request.urlopen('{url}', timeout=20).read().decode())\nexcept urllib.error.HTTPError as e:\n print('HTTP', e.code, e.read().decode())\nexcept Exception as e:\n print('FAILED', e)\""
    )
}

fn url(s: &Server) -> String {
    format!("http://127.0.0.1:{}/", s.port)
}

fn net_key(s: &Server) -> String {
    format!("net:127.0.0.1:{}", s.port)
}

/// Whether commands get a network namespace (and so a proxy) here. Without one a command has
/// no network at all, which the ceiling tests still check; the job test needs a proxy.
fn namespaces_work() -> bool {
    match modes::current() {
        Some(RunMode::NobodyWithoutUserns) => false,
        Some(_) => true,
        None => {
            let works = toolgate::exec::netns::create().is_ok();
            // Under CI (root) namespaces work: a failure is a regression, never a skip.
            assert!(
                works || std::env::var_os("CI").is_none(),
                "commands get no network namespace here (CI=true: not a skip)"
            );
            works
        }
    }
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

/// One way a destination could be allowed below the managed layer.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// The (trusted) workspace's own `[shell] network` list.
    WorkspaceList,
    /// An allow rule `net:HOST` in the trusted workspace policy.
    AllowRule,
    /// `--grant 'net:HOST'` on the command line.
    CommandLineGrant,
    /// A grant kept for the session (as a person's session answer leaves it).
    SessionGrant,
    /// A person who answers `session`.
    PersonsAnswer,
    /// `--mode allow-all`.
    AllowAll,
}

const ROUTES: [Route; 6] = [
    Route::WorkspaceList,
    Route::AllowRule,
    Route::CommandLineGrant,
    Route::SessionGrant,
    Route::PersonsAnswer,
    Route::AllowAll,
];

/// A gate whose managed layer is `managed`, and where `route` allows `target` (a server the
/// workspace's `allow_private` names with `also`).
async fn gate_by(
    ws: &Ws,
    managed: &str,
    route: Route,
    target: &Server,
    also: &[&Server],
) -> (Gate, Arc<Scripted>) {
    let managed_file: PathBuf = ws.user_root().join("managed.toml");
    std::fs::write(&managed_file, managed).unwrap();
    let private: Vec<String> = std::iter::once(target)
        .chain(also.iter().copied())
        .map(|s| format!("\"127.0.0.1:{}\"", s.port))
        .collect();
    let listed: Vec<String> = also
        .iter()
        .map(|s| format!("\"127.0.0.1:{}\"", s.port))
        .collect();
    let mut policy = "mode = \"ask\"\n".to_string();
    let key = net_key(target);
    if let Route::AllowRule = route {
        policy.push_str(&format!(
            "[[rules]]\nkey = \"{key}\"\ndecision = \"allow\"\n"
        ));
    }
    let mut list = listed.clone();
    if let Route::WorkspaceList = route {
        list.push(format!("\"127.0.0.1:{}\"", target.port));
    }
    policy.push_str(&format!(
        "[shell]\nnetwork = [{}]\n[network]\nallow_private = [{}]\n",
        list.join(", "),
        private.join(", ")
    ));
    ws.write(".toolgate/policy.toml", policy);
    let approver = Arc::new(Scripted {
        answer: Answer::Session,
        requests: Mutex::new(Vec::new()),
    });
    let mut grants = vec!["shell".to_string()];
    if let Route::CommandLineGrant = route {
        grants.push(key.clone());
    }
    let g = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        approver: matches!(route, Route::PersonsAnswer)
            .then(|| approver.clone() as Arc<dyn Approver>),
        grants,
        mode: matches!(route, Route::AllowAll).then_some(Mode::AllowAll),
        user_dirs: Some(ws.user_dirs()),
        managed_policy: Some(managed_file),
        ..Default::default()
    })
    .await
    .unwrap();
    if let Route::SessionGrant = route {
        g.state().add_session_grant(SESSION, &key, None).unwrap();
    }
    (g, approver)
}

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(SESSION, "shell", json!({ "command": command }))
        .await
}

fn asked_for(approver: &Scripted, key: &str) -> usize {
    let asked = approver.requests.lock().unwrap();
    asked.iter().filter(|r| r.key == key).count()
}

/// A managed `[shell] network = false`: whatever route below it allows a host, the command
/// gets no proxy and reaches nothing; nobody is asked. Every route is tried; the failures are
/// listed together.
#[tokio::test]
async fn a_managed_network_false_holds_against_every_route() {
    let s = ok_server("must-not-be-reached");
    let mut failures = Vec::new();
    for route in ROUTES {
        let ws = Ws::new();
        let (g, approver) = gate_by(&ws, "[shell]\nnetwork = false\n", route, &s, &[]).await;
        let before = s.hits.load(Ordering::SeqCst);
        let o = sh(&g, &fetch_cmd(&url(&s))).await;
        if o.content.contains("BODY") || s.hits.load(Ordering::SeqCst) != before {
            failures.push(format!("{route:?}: reached the server: {}", o.content));
        }
        if o.data["confinement"]["egress_proxy"] == json!(true) {
            failures.push(format!("{route:?}: the command got a proxy"));
        }
        if asked_for(&approver, &net_key(&s)) != 0 {
            failures.push(format!("{route:?}: a person was asked"));
        }
        if matches!(route, Route::WorkspaceList) {
            // `policy check`'s network line names the ceiling.
            let text = g.policy().shell.network_text();
            if !(text.contains("managed ceiling") && text.contains("managed.toml")) {
                failures.push(format!("policy check does not name the ceiling: {text}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A managed host list: a host outside it is refused with the ceiling's message whatever
/// route below allows it, and never asked about; a host inside it is still reached.
#[tokio::test]
async fn a_managed_host_list_bounds_every_net_decision() {
    let inside = ok_server("inside-the-ceiling");
    let outside = ok_server("must-not-be-reached");
    let managed = format!("[shell]\nnetwork = [\"127.0.0.1:{}\"]\n", inside.port);
    let proxied = namespaces_work();
    let mut failures = Vec::new();
    for route in ROUTES {
        let ws = Ws::new();
        let (g, approver) = gate_by(&ws, &managed, route, &outside, &[&inside]).await;
        let before = outside.hits.load(Ordering::SeqCst);
        let o = sh(&g, &fetch_cmd(&url(&outside))).await;
        if o.content.contains("BODY") || outside.hits.load(Ordering::SeqCst) != before {
            failures.push(format!(
                "{route:?}: reached a host outside the ceiling: {}",
                o.content
            ));
        }
        if asked_for(&approver, &net_key(&outside)) != 0 {
            failures.push(format!("{route:?}: a person was asked"));
        }
        if !proxied {
            continue;
        }
        if !(o.content.contains("managed policy's network ceiling")
            && o.content.contains("managed.toml"))
        {
            failures.push(format!(
                "{route:?}: the refusal does not name the ceiling: {}",
                o.content
            ));
        }
        if o.data["network"]["connections"][0]["allowed"] != json!(false) {
            failures.push(format!(
                "{route:?}: no refused connection recorded: {}",
                o.data
            ));
        }
        // The host inside the ceiling is still reached (the list is a bound, not an off).
        let before = inside.hits.load(Ordering::SeqCst);
        let o = sh(&g, &fetch_cmd(&url(&inside))).await;
        if !o.content.contains("BODY inside-the-ceiling")
            || inside.hits.load(Ordering::SeqCst) != before + 1
        {
            failures.push(format!(
                "{route:?}: the host inside was not reached: {}",
                o.content
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `fetch` and `download` are bounded by the managed host list too: in `allow-all` (which
/// approves the call), a URL outside it is refused naming the ceiling, a redirect from a host
/// inside it to one outside is refused, and `policy explain` says why.
#[tokio::test]
async fn fetch_and_download_stay_inside_a_managed_host_list() {
    let outside = ok_server("must-not-be-fetched");
    let oport = outside.port;
    let redirector = server(move |_| {
        format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{oport}/stolen\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    });
    let inside = ok_server("fetched-inside");
    let ws = Ws::new();
    let managed = format!(
        "[shell]\nnetwork = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n",
        inside.port, redirector.port
    );
    let (g, _) = gate_by(
        &ws,
        &managed,
        Route::AllowAll,
        &outside,
        &[&inside, &redirector],
    )
    .await;

    let o = g
        .call(SESSION, "fetch", json!({ "url": url(&outside) }))
        .await;
    assert_eq!(o.status, toolgate::tools::Status::Denied, "{o:#?}");
    assert!(
        o.content.contains("managed policy's network ceiling"),
        "{}",
        o.content
    );
    let o = g
        .call(
            SESSION,
            "download",
            json!({ "url": url(&outside), "path": "got.txt" }),
        )
        .await;
    assert_eq!(o.status, toolgate::tools::Status::Denied, "{o:#?}");
    assert!(!ws.path("got.txt").exists());
    let o = g
        .call(SESSION, "fetch", json!({ "url": url(&redirector) }))
        .await;
    assert!(!o.content.contains("must-not-be-fetched"), "{o:#?}");
    assert_eq!(outside.hits.load(Ordering::SeqCst), 0, "{o:#?}");
    assert_eq!(redirector.hits.load(Ordering::SeqCst), 1, "{o:#?}");

    let o = g
        .call(SESSION, "fetch", json!({ "url": url(&inside) }))
        .await;
    assert!(o.content.contains("fetched-inside"), "{o:#?}");

    let explained = g.explain(SESSION, "fetch", &json!({ "url": url(&outside) }));
    assert_eq!(explained.decision, "deny", "{explained:#?}");
    let step = explained.stages.last().unwrap();
    assert_eq!(step.stage, "ceiling", "{explained:#?}");
    assert!(step.detail.contains("managed.toml"), "{explained:#?}");
}

/// A fetch or download outside the managed host list is refused before anyone is asked: a
/// person is never shown a question whose every answer would be refused anyway.
#[tokio::test]
async fn a_fetch_outside_the_ceiling_never_asks_a_person() {
    let outside = ok_server("must-not-be-fetched");
    let inside = ok_server("fetched-inside");
    let ws = Ws::new();
    let managed = format!("[shell]\nnetwork = [\"127.0.0.1:{}\"]\n", inside.port);
    let (g, approver) = gate_by(&ws, &managed, Route::PersonsAnswer, &outside, &[&inside]).await;
    for (tool, input) in [
        ("fetch", json!({ "url": url(&outside) })),
        (
            "download",
            json!({ "url": url(&outside), "path": "got.txt" }),
        ),
    ] {
        let o = g.call(SESSION, tool, input).await;
        assert_eq!(o.status, toolgate::tools::Status::Denied, "{o:#?}");
        assert!(
            o.content.contains("managed policy's network ceiling"),
            "{}",
            o.content
        );
        let asked = approver.requests.lock().unwrap().len();
        assert_eq!(asked, 0, "{tool}: a person was asked");
    }
    assert_eq!(outside.hits.load(Ordering::SeqCst), 0);
    assert!(!ws.path("got.txt").exists());
}

/// A background job that waits until its call has returned and then connects: an allowed
/// host and a host nobody can approve any more are both audited (with the job's id, under the
/// call's id) and shown by `job_output`; the last connection, made just before the job ends,
/// is not lost.
#[tokio::test]
async fn a_background_jobs_later_connections_are_audited_and_shown() {
    if !namespaces_work() {
        // Only where user namespaces are refused (landlock-only): commands have no network
        // at all there (checked by shell_network's tests in that mode), so no job can connect.
        eprintln!("not applicable: commands get no network at all in this mode");
        return;
    }
    let allowed = ok_server("late-and-allowed");
    let unlisted = ok_server("must-not-be-reached");
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!(
            "mode = \"ask\"\n[shell]\nnetwork = [\"127.0.0.1:{a}\"]\n[network]\nallow_private = [\"127.0.0.1:{a}\", \"127.0.0.1:{u}\"]\n",
            a = allowed.port,
            u = unlisted.port
        ),
    );
    let approver = Arc::new(Scripted {
        answer: Answer::Once,
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
    let command = format!(
        "sleep 3; {}; {}",
        fetch_cmd(&url(&allowed)),
        fetch_cmd(&url(&unlisted))
    );
    let o = g
        .call(
            SESSION,
            "shell",
            json!({ "command": command, "run_in_background": true }),
        )
        .await;
    let job = o.data["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no job: {o:#?}"))
        .to_string();
    let call_id = o.audit_id.clone();
    assert!(o.data["network"].is_null(), "nothing yet: {o:#?}");

    // Read the job until it has ended, gathering what `job_output` shows of its network.
    let mut shown: Vec<Value> = Vec::new();
    let mut content = String::new();
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < until, "the job did not end: {shown:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let o = g
            .call(SESSION, "job_output", json!({ "job_id": job }))
            .await;
        content.push_str(&o.content);
        if let Some(c) = o.data["network"]["connections"].as_array() {
            shown.extend(c.iter().cloned());
        }
        if o.data["state"] != json!("running") {
            break;
        }
    }
    assert!(content.contains("BODY late-and-allowed"), "{content}");
    assert!(!content.contains("must-not-be-reached"), "{content}");
    assert_eq!(unlisted.hits.load(Ordering::SeqCst), 0);
    assert_eq!(
        asked_for(&approver, &net_key(&unlisted)),
        0,
        "asked after the call"
    );
    let port_of = |c: &Value| c["port"].as_u64().unwrap_or_default() as u16;
    let find = |list: &[Value], port: u16| list.iter().find(|c| port_of(c) == port).cloned();
    let a = find(&shown, allowed.port).unwrap_or_else(|| panic!("not shown: {shown:?}"));
    assert_eq!(a["allowed"], json!(true), "{shown:?}");
    assert_eq!(a["job_id"], json!(job), "{shown:?}");
    let u = find(&shown, unlisted.port).unwrap_or_else(|| panic!("not shown: {shown:?}"));
    assert_eq!(u["allowed"], json!(false), "{shown:?}");
    assert!(
        u["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("has ended"),
        "{u}"
    );

    // The audit has both, under the call that started the job, with the job's id.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let events = g
            .state()
            .audit_events(&toolgate::state::AuditQuery {
                call_id: Some(call_id.clone()),
                ..Default::default()
            })
            .unwrap();
        let net: Vec<&Value> = events
            .iter()
            .filter(|e| e.event == "network")
            .map(|e| &e.detail)
            .collect();
        let audited = |port: u16, allowed: bool| {
            net.iter().any(|d| {
                port_of(d) == port && d["allowed"] == json!(allowed) && d["job_id"] == json!(job)
            })
        };
        if audited(allowed.port, true) && audited(unlisted.port, false) {
            break;
        }
        assert!(Instant::now() < until, "not audited: {net:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

mod unprivileged {
    // `in_modes!(in hostile::network, ..)` names the test `hostile :: network::..` (stringify!
    // spaces a path), which filters out every test: the module path is given as written.
    in_modes!(@wrap a_managed_network_false_holds_against_every_route, "hostile::network", crate::modes::nothing);
    in_modes!(@wrap a_managed_host_list_bounds_every_net_decision, "hostile::network", crate::modes::nothing);
    in_modes!(@wrap a_background_jobs_later_connections_are_audited_and_shown, "hostile::network", crate::modes::nothing);
}
