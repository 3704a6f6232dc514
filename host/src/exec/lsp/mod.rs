//! Language servers for the LSP tools, the host side: a server runs as a confined
//! process with the shell's confinement (it runs project code: build scripts, proc macros,
//! plugins), one per workspace and language, restarted when it dies, spoken to over LSP.
//!
//! Everything a server sends is bounded: one message at most [`framing::MAX_MESSAGE`] bytes,
//! every request waits at most its timeout, and diagnostics are kept for at most
//! [`MAX_DOCUMENTS`] documents. A server's own requests (configuration, progress tokens,
//! capability registration) get an empty answer so it never waits on the host.

mod convert;
pub mod framing;
mod host;
mod langs;
mod servers;

pub use host::{Apply, LspGrant, LspHost, PlannedFile, Pos, Query};
pub use langs::{Language, LspConfig, KNOWN as KNOWN_SERVERS};
pub use servers::Servers;

use super::{ApprovedCommand, ExecHost, Plan};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Most documents whose diagnostics are kept; the oldest are dropped past it.
pub const MAX_DOCUMENTS: usize = 4096;

/// Most answers waiting to be picked up (a server answering ids nobody asked is dropped).
const MAX_PENDING: usize = 256;

/// Diagnostics of one document as last published.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// The document version they are for, when the server said.
    pub version: Option<i64>,
    /// The diagnostics, as the server sent them.
    pub diagnostics: Vec<Value>,
    /// How many publications this document has had.
    pub count: u64,
}

#[derive(Default)]
struct State {
    answers: HashMap<i64, Value>,
    diagnostics: HashMap<String, Published>,
    /// Why the server is gone (`None`: running).
    ended: Option<String>,
}

/// One running language server.
pub struct Server {
    child: Mutex<Child>,
    stdin: Arc<Mutex<ChildStdin>>,
    shared: Arc<(Mutex<State>, Condvar)>,
    next_id: AtomicI64,
    /// Each open document's version, the hash of the text last sent, and how many
    /// diagnostics publications it had had when that text was sent.
    versions: Mutex<HashMap<String, (i64, u64, u64)>>,
    root: PathBuf,
    /// What the server said it can do (`initialize`'s `capabilities`).
    capabilities: Value,
    /// The command's private directories and pids cgroup, kept while it runs.
    _prepared: super::run::Prepared,
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LspError {
    /// The server did not answer in time.
    Timeout(Duration),
    /// The server is gone (why).
    Ended(String),
    /// The server answered with an error (its message).
    Server(String),
}

impl std::fmt::Display for LspError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LspError::Timeout(d) => write!(
                f,
                "the language server did not answer within {} ms",
                d.as_millis()
            ),
            LspError::Ended(why) => write!(f, "the language server is not running ({why})"),
            LspError::Server(m) => write!(f, "the language server answered with an error: {m}"),
        }
    }
}

impl Server {
    /// Start `argv` in `host`'s workspace under the shell's read-only confinement (the
    /// workspace read-only, secrets masked, `.git` frozen, no network, a private writable
    /// `/tmp`) and initialise it. It runs project code, so it gets exactly what a read-only
    /// command gets: whatever it does, it cannot change the workspace.
    pub fn start(
        host: &ExecHost,
        argv: &[String],
        init_timeout: Duration,
    ) -> Result<Server, String> {
        let approved = ApprovedCommand {
            text: argv.join(" "),
            plan: Plan::Argv(argv.to_vec()),
            key: format!("lsp:{}", argv.first().map(String::as_str).unwrap_or("")),
            class: "read-only",
            cwd: host.workspace.clone(),
            timeout: Duration::MAX,
            auto_background: Duration::MAX,
            background: true,
            net: None,
        };
        // `prepare` refuses when the policy requires confinement this host lacks.
        let prepared = super::run::prepare(host, &approved).map_err(|e| e.to_string())?;
        let mut cmd = prepared.request.command();
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        #[cfg(target_os = "linux")]
        prepared.request.confine(
            &mut cmd,
            prepared
                .pids
                .as_ref()
                .map(super::confine::PidsCgroup::procs_fd)
                .transpose()?,
            None,
        )?;
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "could not start the language server `{}`: {e}",
                argv.join(" ")
            )
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the language server's pipes were not made".into());
        };
        let stdin = Arc::new(Mutex::new(stdin));
        let shared: Arc<(Mutex<State>, Condvar)> = Arc::default();
        std::thread::spawn({
            let (shared, stdin) = (shared.clone(), stdin.clone());
            move || read_loop(BufReader::new(stdout), &shared, &stdin)
        });
        let mut server = Server {
            child: Mutex::new(child),
            stdin,
            shared,
            next_id: AtomicI64::new(1),
            versions: Mutex::default(),
            root: host.workspace.clone(),
            capabilities: Value::Null,
            _prepared: prepared,
        };
        let root_uri = uri(&server.root);
        let init = server
            .request(
                "initialize",
                json!({
                    "processId": null,
                    "rootUri": root_uri,
                    "workspaceFolders": [{"uri": root_uri, "name": "workspace"}],
                    "capabilities": {
                        "textDocument": {
                            "publishDiagnostics": {"versionSupport": true},
                            "synchronization": {"didSave": false},
                            "definition": {}, "references": {},
                            "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                            "rename": {"prepareSupport": false},
                            "callHierarchy": {}
                        },
                        "workspace": {"symbol": {}, "workspaceFolders": true, "configuration": true}
                    }
                }),
                init_timeout,
            )
            .map_err(|e| format!("initialising the language server `{}`: {e}", argv.join(" ")))?;
        server.capabilities = init.get("capabilities").cloned().unwrap_or(Value::Null);
        server.notify("initialized", json!({}))?;
        Ok(server)
    }

    /// Whether the server said it provides `provider` (e.g. `callHierarchyProvider`).
    pub fn provides(&self, provider: &str) -> bool {
        match self.capabilities.get(provider) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(_) => true,
        }
    }

    /// Its process id (as the host sees it).
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().ok().map(|c| c.id())
    }

    /// Whether the rules it was confined by still reach every file of the workspace it may
    /// read (landlock-only mode; always so with a mount namespace, whose view follows the
    /// workspace).
    pub fn rules_current(&self) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(rules) = &self._prepared.request.landlock_only {
            return rules.still_current();
        }
        true
    }

    /// Whether it still runs.
    pub fn alive(&self) -> bool {
        let ended = self.lock().ended.is_some();
        !ended && matches!(self.child.lock().map(|mut c| c.try_wait()), Ok(Ok(None)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send a notification.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), String> {
        send(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        )
    }

    /// Send a request and wait at most `timeout` for its answer.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, LspError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        send(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .map_err(LspError::Ended)?;
        let deadline = Instant::now() + timeout;
        let (_, cv) = &*self.shared;
        let mut st = self.lock();
        loop {
            if let Some(answer) = st.answers.remove(&id) {
                return match answer.get("error") {
                    Some(e) => Err(LspError::Server(
                        e.get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("no message")
                            .to_string(),
                    )),
                    None => Ok(answer.get("result").cloned().unwrap_or(Value::Null)),
                };
            }
            if let Some(why) = &st.ended {
                return Err(LspError::Ended(why.clone()));
            }
            let now = Instant::now();
            if now >= deadline {
                // Tell the server to stop working on it; its late answer is dropped.
                drop(st);
                let _ = self.notify("$/cancelRequest", json!({"id": id}));
                return Err(LspError::Timeout(timeout));
            }
            st = cv
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Open `path` (or send its new text when open already and it changed); returns the
    /// document's version and whether anything was sent.
    pub fn sync(&self, path: &Path, language_id: &str, text: &str) -> Result<(i64, bool), String> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        let hash = h.finish();
        let u = uri(path);
        let seen = self.publications(path);
        let mut versions = self.versions.lock().unwrap_or_else(|p| p.into_inner());
        match versions.get_mut(&u) {
            Some((v, h, _)) if *h == hash => Ok((*v, false)),
            Some(entry) => {
                entry.0 += 1;
                entry.1 = hash;
                entry.2 = seen;
                let v = entry.0;
                drop(versions);
                self.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": u, "version": v}, "contentChanges": [{"text": text}]}),
                )?;
                Ok((v, true))
            }
            None => {
                versions.insert(u.clone(), (1, hash, seen));
                drop(versions);
                self.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": u, "languageId": language_id, "version": 1, "text": text}}),
                )?;
                Ok((1, true))
            }
        }
    }

    /// The diagnostics of `path` published after `seen` publications (the count before the
    /// latest change) and for `version` or later, waiting at most `timeout`.
    pub fn diagnostics_after(
        &self,
        path: &Path,
        seen: u64,
        version: i64,
        timeout: Duration,
    ) -> Result<Published, LspError> {
        let u = uri(path);
        let deadline = Instant::now() + timeout;
        let (_, cv) = &*self.shared;
        let mut st = self.lock();
        loop {
            if let Some(p) = st.diagnostics.get(&u) {
                if p.count > seen && p.version.is_none_or(|v| v >= version) {
                    return Ok(p.clone());
                }
            }
            if let Some(why) = &st.ended {
                return Err(LspError::Ended(why.clone()));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(LspError::Timeout(timeout));
            }
            st = cv
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// The diagnostics of `path` for the text last sent: the first publication after that
    /// send (for that version or later, when the server says), waiting at most `timeout`.
    pub fn current_diagnostics(
        &self,
        path: &Path,
        timeout: Duration,
    ) -> Result<Published, LspError> {
        let sent = self
            .versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&uri(path))
            .map(|(v, _, seen)| (*v, *seen));
        let Some((version, seen)) = sent else {
            return Err(LspError::Ended(
                "the document was never sent to the server".into(),
            ));
        };
        self.diagnostics_after(path, seen, version, timeout)
    }

    /// The diagnostics last published for `path`, if any were.
    pub fn published(&self, path: &Path) -> Option<Published> {
        self.lock().diagnostics.get(&uri(path)).cloned()
    }

    /// Whether `path` is open in the server (it was synced).
    pub fn is_open(&self, path: &Path) -> bool {
        self.versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&uri(path))
    }

    /// How many diagnostics publications `path` has had so far.
    pub fn publications(&self, path: &Path) -> u64 {
        self.lock()
            .diagnostics
            .get(&uri(path))
            .map_or(0, |p| p.count)
    }

    /// Stop it: `shutdown` and `exit` if it answers quickly, then kill its process group
    /// and everything left in its cgroup.
    pub fn stop(&self) {
        if self.alive() {
            let _ = self.request("shutdown", Value::Null, Duration::from_millis(500));
            let _ = self.notify("exit", Value::Null);
        }
        if let Ok(mut c) = self.child.lock() {
            if let Ok(pid) = i32::try_from(c.id()) {
                super::process::kill_group(pid);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(p) = &self._prepared.pids {
            p.kill_all();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `file://` URI of an absolute path (percent-encoding what a URI may not hold).
pub fn uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path of a `file://` URI (`None`: another scheme or not decodable).
pub fn path_of(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let mut bytes = Vec::new();
    let mut it = rest.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let h = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&h).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    Some(PathBuf::from(String::from_utf8(bytes).ok()?))
}

fn send(stdin: &Mutex<ChildStdin>, msg: &Value) -> Result<(), String> {
    let mut w = stdin.lock().unwrap_or_else(|p| p.into_inner());
    framing::write_message(&mut *w, msg).map_err(|e| format!("writing to the language server: {e}"))
}

fn read_loop(
    mut r: BufReader<std::process::ChildStdout>,
    shared: &(Mutex<State>, Condvar),
    stdin: &Mutex<ChildStdin>,
) {
    let (lock, cv) = shared;
    loop {
        let msg = match framing::read_message(&mut r) {
            Ok(m) => m,
            Err(e) => {
                let why = match e {
                    framing::ReadError::Closed => {
                        "it closed its output (it exited or crashed)".to_string()
                    }
                    framing::ReadError::Bad(why) => why,
                };
                let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
                st.ended = Some(why);
                cv.notify_all();
                return;
            }
        };
        let method = msg.get("method").and_then(Value::as_str);
        match (method, msg.get("id")) {
            // The server asks something: an empty answer, so it never waits on us.
            (Some(m), Some(id)) => {
                let result = if m == "workspace/configuration" {
                    let n = msg["params"]["items"].as_array().map_or(0, Vec::len);
                    Value::Array(vec![Value::Null; n.min(1024)])
                } else {
                    Value::Null
                };
                let _ = send(
                    stdin,
                    &json!({"jsonrpc": "2.0", "id": id, "result": result}),
                );
            }
            (Some("textDocument/publishDiagnostics"), None) => {
                let params = &msg["params"];
                let Some(u) = params["uri"].as_str() else {
                    continue;
                };
                let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
                if !st.diagnostics.contains_key(u) && st.diagnostics.len() >= MAX_DOCUMENTS {
                    if let Some(k) = st.diagnostics.keys().next().cloned() {
                        st.diagnostics.remove(&k);
                    }
                }
                let entry = st.diagnostics.entry(u.to_string()).or_default();
                entry.version = params["version"].as_i64();
                entry.diagnostics = params["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                entry.count += 1;
                cv.notify_all();
            }
            (None, Some(id)) => {
                let Some(id) = id.as_i64() else { continue };
                let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
                if st.answers.len() < MAX_PENDING {
                    st.answers.insert(id, msg);
                }
                cv.notify_all();
            }
            _ => {}
        }
    }
}

/// The first of `candidates` found on the host's `PATH` (for auto-detection).
pub fn detect(candidates: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    candidates.iter().find_map(|c| {
        std::env::split_paths(&path)
            .map(|d| d.join(c))
            .find(|p| p.is_file())
    })
}

#[cfg(all(test, target_os = "linux"))]
#[path = "tests.rs"]
mod tests;
