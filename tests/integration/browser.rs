//! A headless Chromium driven over the DevTools protocol (written by the browser helper).
//!
//! No websocket: Chromium runs with `--remote-debugging-pipe`, reads commands from fd 3 and
//! writes replies and events to fd 4, each message a JSON text ended by a NUL byte. A reader
//! thread routes replies by `id` to the waiting caller and keeps a bounded log of console
//! messages and exceptions. Everything is synchronous (std threads), so it works from plain
//! `#[test]`s and from `#[tokio::test]`s alike. Nothing leaves loopback: a dead proxy and
//! host-resolver rules that resolve no name but 127.0.0.1 and localhost.

use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long one DevTools command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How many console lines and exceptions are kept (the oldest go first).
const LOG_LIMIT: usize = 200;
/// No sandbox (the tests may run as root), no GPU, no first-run or background chatter, and a
/// proxy nobody listens on for anything but loopback (which Chromium never proxies).
const FLAGS: &str = "--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --no-default-browser-check --disable-background-networking \
    --disable-component-update --disable-sync --disable-extensions --disable-default-apps \
    --metrics-recording-only --disable-domain-reliability --password-store=basic \
    --window-size=1280,1000 --remote-debugging-pipe --proxy-server=http://127.0.0.1:9";

/// A headless Chromium with a fresh profile. Drop closes it, kills what is left of its process
/// group, waits for it and removes the profile.
pub struct Browser {
    conn: Arc<Conn>,
    child: Child,
    dir: tempfile::TempDir,
}

/// One tab, attached in flat mode (its commands carry the session id).
pub struct Page {
    conn: Arc<Conn>,
    session: String,
    /// The target id.
    tab: String,
}

struct Conn {
    writer: Mutex<std::io::PipeWriter>,
    next_id: AtomicU64,
    /// Callers waiting for a reply, by id; Err(why) once the reader stopped.
    waiting: Mutex<Result<HashMap<u64, mpsc::Sender<Value>>, String>>,
    /// (session id, line): console messages and exceptions, newest last.
    log: Mutex<VecDeque<(String, String)>>,
    stderr_log: PathBuf,
}

/// The Chromium to run: `TOOLGATE_CHROMIUM`, else what `tests/scripts/install-chromium.sh`
/// prints (run at most once per process): `chromium`, `chromium-browser` or `google-chrome`
/// on PATH, else the one it installs with apt-get. A launcher shell script (Debian's
/// /usr/bin/chromium) gives way to the binary it runs, so its extra flags do not apply.
pub fn chromium() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(find_chromium).clone()
}

fn find_chromium() -> Result<PathBuf, String> {
    if let Some(given) = std::env::var_os("TOOLGATE_CHROMIUM") {
        let p = PathBuf::from(given);
        let not = format!(
            "TOOLGATE_CHROMIUM={} is not an executable file",
            p.display()
        );
        return is_executable(&p).then_some(p).ok_or(not);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scripts/install-chromium.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("").trim();
    if out.status.success() && is_executable(Path::new(last)) {
        return Ok(unwrap_launcher(PathBuf::from(last)));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = tail(&format!("{stdout}{stderr}"), 800);
    let script = script.display();
    Err(format!("{script} failed ({}): {}", out.status, said.trim()))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Debian's and Ubuntu's `chromium` is a shell script that adds flags and execs the binary.
fn unwrap_launcher(p: PathBuf) -> PathBuf {
    let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
    let is_script = std::fs::read(&real).is_ok_and(|b| b.starts_with(b"#!"));
    if is_script {
        let bins = [
            "/usr/lib/chromium/chromium",
            "/usr/lib/chromium-browser/chromium-browser",
        ];
        if let Some(bin) = bins.into_iter().find(|b| is_executable(Path::new(b))) {
            return PathBuf::from(bin);
        }
    }
    p
}

fn tail(s: &str, max_chars: usize) -> String {
    let n = s.chars().count();
    s.chars().skip(n.saturating_sub(max_chars)).collect()
}

impl Browser {
    /// None when no Chromium can be had (it prints `skipped: needs chromium (why)`). A
    /// Chromium that is found but does not answer is a failure, not a skip: it panics with
    /// the end of its stderr.
    pub fn launch() -> Option<Browser> {
        let bin = match chromium() {
            Ok(bin) => bin,
            Err(why) => {
                eprintln!("skipped: needs chromium ({why})");
                return None;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let stderr_log = dir.path().join("chromium-stderr.log");
        let log_file = std::fs::File::create(&stderr_log).unwrap();
        // Commands go in on the child's fd 3, replies and events come out on its fd 4.
        let (cmd_r, cmd_w) = std::io::pipe().unwrap();
        let (ev_r, ev_w) = std::io::pipe().unwrap();
        let (child_in, child_out) = (cmd_r.as_raw_fd(), ev_w.as_raw_fd());
        let mut cmd = Command::new(&bin);
        cmd.args(FLAGS.split_whitespace())
            .arg("--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE localhost")
            .arg(format!("--user-data-dir={}", dir.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .process_group(0);
        #[allow(unsafe_code)]
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec. The pipe
        // ends are first copied above fd 10 so that putting one on 3 cannot clobber the other;
        // the copies are close-on-exec and dup2 clears close-on-exec on 3 and 4.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(child_in, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(child_out, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let spawned = cmd.spawn();
        let child = spawned.unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        drop((cmd_r, ev_w));
        let conn = Arc::new(Conn {
            writer: Mutex::new(cmd_w),
            next_id: AtomicU64::new(1),
            waiting: Mutex::new(Ok(HashMap::new())),
            log: Mutex::new(VecDeque::new()),
            stderr_log,
        });
        let reader = Arc::clone(&conn);
        std::thread::spawn(move || reader.read_loop(ev_r));
        let browser = Browser { conn, child, dir };
        browser.conn.call("Browser.getVersion", json!({}), None);
        Some(browser)
    }

    /// A new tab showing `url`, loaded (`document.readyState` is "complete").
    pub fn open(&self, url: &str) -> Page {
        let c = &self.conn;
        let tab = c.call("Target.createTarget", json!({"url": "about:blank"}), None);
        let tab = tab["targetId"].as_str().unwrap().to_string();
        let attach = json!({"targetId": tab, "flatten": true});
        let attached = c.call("Target.attachToTarget", attach, None);
        let session = attached["sessionId"].as_str().unwrap().to_string();
        let conn = Arc::clone(c);
        let page = Page { conn, session, tab };
        page.call("Page.enable", json!({}));
        page.call("Runtime.enable", json!({}));
        let nav = page.call("Page.navigate", json!({"url": url}));
        if let Some(err) = nav["errorText"].as_str().filter(|e| !e.is_empty()) {
            panic!("Page.navigate to {url} failed: {err}");
        }
        page.wait_for("document.readyState === 'complete'", COMMAND_TIMEOUT);
        page
    }

    /// The temporary profile directory (removed on drop).
    pub fn profile_dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let c = &self.conn;
        let _ = c.send("Browser.close", json!({}), None, Duration::from_secs(5));
        for _ in 0..250 {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The whole group: the browser if it is still there, and any helper it left behind.
        let pid = i32::try_from(self.child.id()).ok();
        if let Some(pid) = pid.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }
}

impl Conn {
    fn read_loop(&self, pipe: std::io::PipeReader) {
        let mut r = BufReader::new(pipe);
        let mut buf = Vec::new();
        let why = loop {
            buf.clear();
            match r.read_until(0, &mut buf) {
                Ok(0) => break "chromium closed its DevTools pipe".to_string(),
                Ok(_) => {}
                Err(e) => break format!("reading the DevTools pipe failed: {e}"),
            }
            let text = buf.strip_suffix(&[0]).unwrap_or(&buf);
            let Ok(msg) = serde_json::from_slice::<Value>(text) else {
                continue;
            };
            if let Some(id) = msg["id"].as_u64() {
                if let Some(tx) = self.take(id) {
                    let _ = tx.send(msg);
                }
            } else {
                self.event(&msg);
            }
        };
        // Dropping the senders wakes every caller with Disconnected.
        *self.waiting.lock().unwrap() = Err(why);
    }

    fn event(&self, msg: &Value) {
        let p = &msg["params"];
        let line = match msg["method"].as_str() {
            Some("Runtime.consoleAPICalled") => {
                let args = p["args"].as_array().map(Vec::as_slice).unwrap_or_default();
                let args: Vec<String> = args.iter().map(remote_text).collect();
                let kind = p["type"].as_str().unwrap_or("log");
                format!("console.{kind}: {}", args.join(" "))
            }
            Some("Runtime.exceptionThrown") => {
                format!("exception: {}", exception_text(&p["exceptionDetails"]))
            }
            Some("Inspector.targetCrashed") => "the tab crashed".to_string(),
            _ => return,
        };
        let session = msg["sessionId"].as_str().unwrap_or("").to_string();
        let mut log = self.log.lock().unwrap();
        if log.len() == LOG_LIMIT {
            log.pop_front();
        }
        log.push_back((session, line));
    }

    /// Sends one command and waits for its reply: Ok(result) or Err(plain words).
    fn send(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let (tx, rx) = mpsc::channel();
        match self.waiting.lock().unwrap().as_mut() {
            Ok(m) => m.insert(id, tx),
            Err(_) => return Err(self.why_closed()),
        };
        let mut bytes = serde_json::to_vec(&msg).map_err(|e| e.to_string())?;
        bytes.push(0);
        if let Err(e) = self.writer.lock().unwrap().write_all(&bytes) {
            self.take(id);
            return Err(format!("writing to chromium failed: {e}"));
        }
        let reply = match rx.recv_timeout(timeout) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.take(id);
                return Err(format!("no reply within {timeout:?}"));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(self.why_closed()),
        };
        match reply.get("error") {
            Some(err) => Err(err["message"].as_str().unwrap_or("error").to_string()),
            None => Ok(reply["result"].clone()),
        }
    }

    /// Like `send`, but panics with a message naming the method.
    fn call(&self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.send(method, params, session, COMMAND_TIMEOUT)
            .unwrap_or_else(|e| panic!("DevTools {method} failed: {e}"))
    }

    fn take(&self, id: u64) -> Option<mpsc::Sender<Value>> {
        self.waiting.lock().unwrap().as_mut().ok()?.remove(&id)
    }

    fn why_closed(&self) -> String {
        let why = self.waiting.lock().unwrap().as_ref().err().cloned();
        let why = why.unwrap_or_default();
        let stderr = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
        format!("{why}; its stderr ends with:\n{}", tail(&stderr, 2000))
    }
}

/// A console argument as text: its value, else its description.
fn remote_text(o: &Value) -> String {
    match &o["value"] {
        Value::String(s) => s.clone(),
        Value::Null => {
            let keys = ["description", "subtype", "type"];
            let text = keys.iter().find_map(|k| o[k].as_str());
            text.unwrap_or("?").to_string()
        }
        v => v.to_string(),
    }
}

fn exception_text(d: &Value) -> String {
    let texts = ["/exception/description", "/exception/value", "/text"];
    let text = texts.iter().find_map(|p| d.pointer(p)?.as_str());
    text.unwrap_or("unknown exception").to_string()
}

/// JavaScript's idea of truth, for values that came back as JSON.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A JavaScript string literal for `s`.
fn js_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

impl Page {
    fn call(&self, method: &str, params: Value) -> Value {
        self.conn.call(method, params, Some(&self.session))
    }

    /// Ok(value) or Err(exception text).
    fn try_eval(&self, js: &str) -> Result<Value, String> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "awaitPromise": true, "returnByValue": true}),
        );
        if r.get("exceptionDetails").is_some() {
            return Err(exception_text(&r["exceptionDetails"]));
        }
        Ok(r["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    /// The value of `js` (promises awaited; undefined is null). Panics with the exception text
    /// when it throws.
    pub fn eval(&self, js: &str) -> Value {
        self.try_eval(js)
            .unwrap_or_else(|e| panic!("javascript threw: {e}\n  evaluating: {js}"))
    }

    /// Polls `js` every 50 ms until its value is truthy and returns it. A throw counts as not
    /// yet. On timeout panics with the js, the last value, the page's text and console log.
    pub fn wait_for(&self, js: &str, timeout: Duration) -> Value {
        self.poll(js, timeout).unwrap_or_else(|last| {
            let page = self.describe();
            panic!("waited {timeout:?} for `{js}`; last value: {last}\n{page}")
        })
    }

    /// Ok(the first truthy value) or Err(the last value) after `timeout`.
    fn poll(&self, js: &str, timeout: Duration) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.try_eval(js) {
                Ok(v) if truthy(&v) => return Ok(v),
                Ok(v) => v.to_string(),
                Err(e) => format!("threw {e}"),
            };
            if Instant::now() >= deadline {
                return Err(last);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The page's text (first 2000 characters) and its console log, for failure messages.
    pub fn describe(&self) -> String {
        let body = match self.try_eval("String(document.body?.innerText ?? '(no body)')") {
            Ok(v) => v.as_str().unwrap_or_default().chars().take(2000).collect(),
            Err(e) => format!("(cannot read it: {e})"),
        };
        let log = self.console_log().join("\n");
        format!("--- page text ---\n{body}\n--- console ---\n{log}")
    }

    /// Clicks the first element matching `css`, waiting up to 10 s for it to exist.
    pub fn click(&self, css: &str) {
        let sel = js_str(css);
        let there = format!("document.querySelector({sel}) !== null");
        if self.poll(&there, Duration::from_secs(10)).is_err() {
            panic!(
                "click: no element matches `{css}` after 10 s\n{}",
                self.describe()
            );
        }
        self.eval(&format!("document.querySelector({sel}).click()"));
    }

    /// The innerText of the first element matching `css` ("" when there is none).
    pub fn text(&self, css: &str) -> String {
        let js = format!("document.querySelector({})?.innerText ?? ''", js_str(css));
        match self.eval(&js) {
            Value::String(s) => s,
            v => v.to_string(),
        }
    }

    /// A PNG of the whole page, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let data = r["data"].as_str().unwrap_or_default();
        let png = base64_decode(data).unwrap_or_else(|e| panic!("Page.captureScreenshot: {e}"));
        assert!(!png.is_empty(), "Page.captureScreenshot sent no data");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// This tab's console lines and exceptions, oldest first.
    pub fn console_log(&self) -> Vec<String> {
        let log = self.conn.log.lock().unwrap();
        let mine = log.iter().filter(|(s, _)| *s == self.session);
        mine.map(|(_, l)| l.clone()).collect()
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let (c, params) = (&self.conn, json!({"targetId": self.tab}));
        let _ = c.send("Target.closeTarget", params, None, Duration::from_secs(2));
    }
}

/// Standard base64 (padding and whitespace ignored).
fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\n' | b'\r' | b' ' => continue,
            _ => return Err(format!("not base64: byte {c:#04x}")),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// Serves `html` at `/` on 127.0.0.1 (404 for anything else) to at most `max` connections,
/// then stops. Returns the page's address.
fn serve_html(html: &'static str, max: usize) -> String {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(max) {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut req = Vec::new();
            let mut chunk = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16384 {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&chunk[..n]),
                }
            }
            let root = req.starts_with(b"GET / ");
            let status = if root { "200 OK" } else { "404 Not Found" };
            let body = if root { html } else { "" };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(body.as_bytes());
        }
    });
    format!("http://{addr}/")
}

const SMOKE_PAGE: &str = r#"<!doctype html><meta charset="utf-8">
<title>toolgate browser smoke</title><h1>Browser smoke test</h1>
<p id="out">not clicked</p><button id="go">Press</button>
<script>document.getElementById("go").addEventListener("click", () => {
  document.getElementById("out").textContent = "clicked once";
  console.log("the button was pressed");
});</script>"#;

#[test]
fn base64_decodes_what_chromium_sends() {
    assert_eq!(base64_decode("aGVsbG8gd29ybGQ=").unwrap(), b"hello world");
    assert_eq!(base64_decode("iVBORw0KGgo=").unwrap(), b"\x89PNG\r\n\x1a\n");
    assert_eq!(base64_decode("").unwrap(), b"");
    assert!(base64_decode("a*b").is_err());
}

#[test]
fn chromium_renders_a_page_and_takes_a_screenshot() {
    let Some(browser) = Browser::launch() else {
        return;
    };
    let url = serve_html(SMOKE_PAGE, 8);
    let page = browser.open(&url);
    assert_eq!(page.eval("document.title"), json!("toolgate browser smoke"));
    assert_eq!(page.text("#out"), "not clicked");
    assert_eq!(page.text("#absent"), "");
    assert_eq!(page.eval("Promise.resolve(40 + 2)"), json!(42));
    page.click("#go");
    let shown = page.wait_for(
        "document.getElementById('out').textContent === 'clicked once' && 'yes'",
        Duration::from_secs(10),
    );
    assert_eq!(shown, json!("yes"));
    // The event came on the pipe before the reply to the click's evaluation.
    let log = page.console_log();
    assert!(
        log.iter()
            .any(|l| l == "console.log: the button was pressed"),
        "{log:?}"
    );
    let shot = browser.profile_dir().join("smoke.png");
    page.screenshot(&shot);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.len() > 1024, "screenshot is only {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
}

#[test]
fn a_javascript_exception_in_eval_panics_with_its_message() {
    let Some(browser) = Browser::launch() else {
        return;
    };
    let page = browser.open("about:blank");
    let thrown = panic_message(|| page.eval("(() => { throw new Error('boom from the page') })()"));
    assert!(
        thrown.contains("threw: Error: boom from the page"),
        "{thrown}"
    );
    let rejected = panic_message(|| page.eval("Promise.reject(new Error('rejected promise'))"));
    assert!(rejected.contains("rejected promise"), "{rejected}");
    // The page still answers after a throw.
    assert_eq!(page.eval("1 + 1"), json!(2));
}

fn panic_message(f: impl FnOnce() -> Value) -> String {
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
    e.downcast_ref::<String>().cloned().unwrap_or_default()
}
