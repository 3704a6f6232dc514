//! Helpers shared by the integration tests: a fresh temp workspace per test, a gate over it
//! that shares one component cache, and small accessors for observations.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
use toolgate::sandbox::Limits;
use toolgate::{Gate, GateOptions, Observation, Status};

/// The session most tests use.
pub const SESSION: &str = "test";

/// Compiled components are cached here once for every test (and every CLI process); a test
/// run as another user ([`crate::modes`]) has a cache of its own, named by
/// `TOOLGATE_TEST_CACHE_DIR`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os(crate::modes::CACHE_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(shared_cache_dir)
}

/// The cache the tests share when they run as themselves.
pub fn shared_cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// The misbehaving test guest (a copy a test run as another user can read, when its build
/// directory is out of that user's reach).
pub fn hostile_component() -> PathBuf {
    if let Some(copy) = std::env::var_os(crate::modes::HOSTILE_VAR) {
        return PathBuf::from(copy);
    }
    PathBuf::from(format!(
        "{}/toolgate_tool_test_hostile.wasm",
        toolgate::tools::registry::GUEST_ARTIFACT_DIR
    ))
}

/// A fresh temporary workspace.
pub struct Ws {
    dir: tempfile::TempDir,
    /// The user's own config and state directories (outside the workspace), so no test reads
    /// or writes the real `~/.config/toolgate`.
    user: tempfile::TempDir,
}

impl Ws {
    pub fn new() -> Self {
        Ws {
            dir: tempfile::tempdir().unwrap(),
            user: tempfile::tempdir().unwrap(),
        }
    }

    /// The user's toolgate directories for this test (config: trust, signing key, user
    /// policy; state: the HTTP token).
    pub fn user_dirs(&self) -> toolgate::userdirs::UserDirs {
        toolgate::userdirs::UserDirs {
            config: self.user.path().join("xdg-config/toolgate"),
            state: self.user.path().join("xdg-state/toolgate"),
        }
    }

    /// The directory holding `XDG_CONFIG_HOME` (`xdg-config`) and `XDG_STATE_HOME`
    /// (`xdg-state`) for CLI runs; [`Ws::user_dirs`] names the same places.
    pub fn user_root(&self) -> PathBuf {
        self.user.path().to_path_buf()
    }

    /// The workspace root (canonical, so it compares with what the host stores).
    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    /// Absolute path of `rel`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Write `text` to `rel`, creating parent directories. The test's user trusts a
    /// workspace policy the test itself writes (as if it ran `toolgate trust`); attacks plant
    /// a hostile repository's files with [`Ws::plant`] instead.
    pub fn write(&self, rel: &str, text: impl AsRef<[u8]>) -> &Self {
        self.plant(rel, text.as_ref());
        if rel == ".toolgate/policy.toml" {
            toolgate::policy::trust::TrustStore::new(&self.user_dirs().config)
                .trust(
                    &self.root(),
                    &toolgate::policy::trust::sha256_hex(text.as_ref()),
                )
                .unwrap();
        }
        self
    }

    /// Write `text` to `rel` as a cloned repository would have it: nothing is trusted.
    pub fn plant(&self, rel: &str, text: impl AsRef<[u8]>) -> &Self {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, text).unwrap();
        self
    }

    /// The user's signing key for this test.
    pub fn keyring(&self) -> std::sync::Arc<toolgate::policy::trust::Keyring> {
        std::sync::Arc::new(toolgate::policy::trust::Keyring::new(
            &self.user_dirs().config,
        ))
    }

    /// The workspace's plugin store, signing records with this test user's key (what
    /// `toolgate plugin add` does).
    pub fn plugin_store(&self) -> toolgate::plugins::PluginStore {
        toolgate::plugins::PluginStore::signed(
            &self.path(".toolgate"),
            &self.root(),
            self.keyring(),
            false,
        )
    }

    /// Create the directory `rel` (and its parents).
    pub fn mkdir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.path(rel)).unwrap();
        self
    }

    /// The text of `rel`.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// The bytes of `rel`.
    pub fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    /// Set the modification time of `rel` to `secs_ago` seconds ago.
    pub fn age(&self, rel: &str, secs_ago: u64) -> &Self {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.path(rel))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
            .unwrap();
        self
    }

    /// A gate with the default limits (plus the hostile test guest).
    pub async fn gate(&self, allow_writes: bool) -> Gate {
        self.open(allow_writes, None).await
    }

    /// A gate with `limits`.
    pub async fn gate_with(&self, allow_writes: bool, limits: Limits) -> Gate {
        self.open(allow_writes, Some(limits)).await
    }

    async fn open(&self, allow_writes: bool, limits: Option<Limits>) -> Gate {
        Gate::open(GateOptions {
            workspace: self.root(),
            allow_writes,
            cache_dir: Some(cache_dir()),
            extra_components: vec![hostile_component()],
            limits,
            user_dirs: Some(self.user_dirs()),
            ..Default::default()
        })
        .await
        .unwrap()
    }
}

/// A gate over `ws` with `grants` for this run (session scope) and nothing else added.
pub async fn gate_granting(ws: &Ws, grants: &[&str]) -> Gate {
    Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        grants: grants.iter().map(|g| g.to_string()).collect(),
        user_dirs: Some(ws.user_dirs()),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// The `toolgate` binary that `cargo test` built beside this test binary (the integration
/// tests are their own package, so cargo sets no `CARGO_BIN_EXE_toolgate` for them):
/// `TARGET/PROFILE/deps/integration-HASH` → `TARGET/PROFILE/toolgate`.
pub fn toolgate_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let bin = exe
            .parent()
            .and_then(Path::parent)
            .map(|profile| profile.join("toolgate"))
            .unwrap();
        assert!(
            bin.is_file(),
            "{} is missing: run the tests with `cargo test --workspace`, which builds it",
            bin.display()
        );
        bin
    })
    .clone()
}

/// The `toolgate` binary for `ws`, sharing the tests' component cache, with none of the
/// caller's toolgate environment.
pub fn toolgate_command(ws: &Ws) -> std::process::Command {
    let mut cmd = std::process::Command::new(crate::common::toolgate_bin());
    cmd.env("TOOLGATE_CACHE_DIR", cache_dir())
        .env_remove("TOOLGATE_SESSION")
        .env_remove("TOOLGATE_WORKSPACE")
        .env_remove("TOOLGATE_LOG")
        .env_remove("TOOLGATE_TRUST_WORKSPACE")
        .env_remove("TOOLGATE_MANAGED_POLICY")
        .env("XDG_CONFIG_HOME", ws.user_root().join("xdg-config"))
        .env("XDG_STATE_HOME", ws.user_root().join("xdg-state"))
        .arg("--workspace")
        .arg(ws.root());
    cmd
}

/// Limits small enough that the hostile guest is stopped quickly.
pub fn tight_limits() -> Limits {
    Limits {
        timeout: Duration::from_millis(500),
        max_memory_bytes: 64 << 20,
        max_result_bytes: 1 << 20,
        ..Limits::default()
    }
}

/// One call in the default test session.
pub async fn call(gate: &Gate, tool: &str, input: Value) -> Observation {
    gate.call(SESSION, tool, input).await
}

/// One call that must succeed; returns its observation.
pub async fn ok(gate: &Gate, tool: &str, input: Value) -> Observation {
    let o = gate.call(SESSION, tool, input).await;
    assert_eq!(o.status, Status::Ok, "expected ok, got {o:#?}");
    o
}

/// `read` the file so the session may change it.
pub async fn read_first(gate: &Gate, rel: &str) {
    ok(gate, "read", json!({ "path": rel })).await;
}

/// The observation's error code (or "" when it has none).
pub fn code(o: &Observation) -> &str {
    o.error_code.as_deref().unwrap_or("")
}

/// The observation as JSON with the per-call audit id blanked, for whole-object asserts.
pub fn stable(o: &Observation) -> Value {
    let mut v = serde_json::to_value(o).unwrap();
    v["audit_id"] = json!("<audit>");
    v
}

/// Whether the path exists (without following a final symlink).
pub fn exists(p: &Path) -> bool {
    p.symlink_metadata().is_ok()
}

/// Run the hostile guest's `probe` mode with `ops` (file operations and raw host capability
/// calls, no guest-side checks); one result per op (`ok`, `detail`, and `entries` when it
/// listed something).
pub async fn probe(gate: &Gate, ops: Vec<Value>) -> Vec<Value> {
    let o = ok(gate, "test-hostile", json!({"mode": "probe", "ops": ops})).await;
    o.data["results"].as_array().unwrap().clone()
}

/// The `entries` a probe op listed.
pub fn entries(r: &Value) -> Vec<String> {
    r["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("nothing listed: {r}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Run `toolgate call ... --stats` to the end; its observation, the peak RSS of the host
/// process (KiB, as the process itself reports it from `VmHWM`) and how long it took.
///
/// Not `wait4`'s rusage: Linux carries the parent's resident high-water mark into a child at
/// `exec`, so a child of this many-threaded test process would report this process's peak
/// (hundreds of MiB while other tests run), not its own.
pub fn cli_peak_rss(ws: &Ws, policy: &Path, args: &[&str]) -> (Value, i64, std::time::Duration) {
    let began = std::time::Instant::now();
    let out = toolgate_command(ws)
        .arg("--policy")
        .arg(policy)
        .args(args)
        .arg("--stats")
        .output()
        .unwrap();
    let took = began.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}\nstderr:\n{stderr}"));
    let rss = stderr
        .lines()
        .find_map(|l| l.split_once("host peak memory ").map(|(_, r)| r))
        .and_then(|r| r.strip_suffix(" KiB"))
        .and_then(|n| n.parse::<i64>().ok())
        .unwrap_or_else(|| panic!("no peak memory line on stderr:\n{stderr}"));
    (v, rss, took)
}

/// Write an executable script at `path` without this process ever holding it open for
/// writing: the text goes to a file beside it, and a child `cp` makes the script. (Tests run
/// on many threads; a fork by another test while this process had the script open would carry
/// that descriptor, and running the script would then fail with "Text file busy".)
pub fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let src = path.with_extension("script-src");
    std::fs::write(&src, text).unwrap();
    let copied = std::process::Command::new("cp")
        .arg(&src)
        .arg(path)
        .status()
        .unwrap();
    assert!(copied.success(), "cp {} {}", src.display(), path.display());
    std::fs::remove_file(&src).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The `completed` audit event of the workspace's `test-hostile` call, once there is one.
pub fn hostile_completed(ws: &Ws, since: Instant) -> Value {
    loop {
        let out = toolgate_command(ws)
            .args(["audit", "--json", "--tool", "test-hostile"])
            .output()
            .unwrap();
        let done = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["event"] == "completed");
        if let Some(e) = done {
            return e;
        }
        assert!(
            since.elapsed() < Duration::from_secs(15),
            "the call kept running (its deadline is 30 s)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
