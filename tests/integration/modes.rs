//! Running one test as someone other than the privileged root `cargo test --workspace` runs as
//! on CI: the test binary runs itself again, for exactly that test, through `setpriv`.
//!
//! - [`Mode::Nobody`]: uid and gid 65534, no groups, no capabilities. The host must build each
//!   command's namespaces inside a user namespace of its own (`mode: "user-namespace"`).
//! - [`Mode::RootWithoutCaps`]: uid 0 without `CAP_SYS_ADMIN` and `CAP_SETPCAP` (a container's
//!   root): the same, for root.
//! - [`Mode::NobodyWithoutUserns`]: as `Nobody`, under a seccomp filter that refuses user
//!   namespaces (`unshare` and `clone` with `CLONE_NEWUSER` fail with `EPERM`, `clone3` with
//!   `ENOSYS` so libc falls back to `clone`), as on hosts that forbid them: Landlock, seccomp,
//!   `no_new_privs` and rlimits only (`mode: "landlock-only"`), or a refusal naming what is
//!   missing.
//!
//! The child gets a `TMPDIR` of its own (a fresh directory it owns, removed afterwards; also
//! its `HOME` as nobody, while root keeps its own), a component cache it can write (pre-warmed from the tests' shared one, which
//! the host keeps `0600` for root), and binaries it can reach (copied next to that directory
//! when the checkout is not traversable by others). [`mode_is_in_effect`] first checks, in a
//! child set up the same way, that the mode really took: uid, capabilities, and that user
//! namespaces are refused (or not) as the mode says.
//!
//! Under `CI`, a mode that cannot be set up here fails its test; elsewhere it is skipped with
//! the reason.

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that tells a child run which mode it is in.
pub const MODE_VAR: &str = "TOOLGATE_TEST_MODE";
/// The component cache [`crate::common::cache_dir`] uses in a child run.
pub const CACHE_VAR: &str = "TOOLGATE_TEST_CACHE_DIR";
/// The hostile test guest, when its build directory is out of the child's reach.
pub const HOSTILE_VAR: &str = "TOOLGATE_TEST_HOSTILE";

/// `nobody` on Debian (and the overflow uid everywhere).
const NOBODY: u32 = 65534;
/// How long one child test may take (a confined `cargo test` of a tiny crate included).
const CHILD_DEADLINE: Duration = Duration::from_secs(20 * 60);
/// The test every run first runs in the same mode.
const CHECK: &str = "modes::mode_is_in_effect";
/// What the check panics with when the machine, not the runner, lacks something.
const UNAVAILABLE: &str = "mode unavailable:";

const CAP_SETPCAP: u32 = 8;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_DAC_OVERRIDE: u32 = 1;

/// Who a child run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// uid/gid 65534, no groups, no capabilities.
    Nobody,
    /// uid 0 without `CAP_SYS_ADMIN` and `CAP_SETPCAP` (bounding set included).
    RootWithoutCaps,
    /// As `Nobody`, and user namespaces are refused.
    NobodyWithoutUserns,
}

impl Mode {
    /// Every mode, in the order the wrappers run them.
    pub const ALL: [Mode; 3] = [
        Mode::Nobody,
        Mode::RootWithoutCaps,
        Mode::NobodyWithoutUserns,
    ];

    /// The value of [`MODE_VAR`].
    pub fn name(self) -> &'static str {
        match self {
            Mode::Nobody => "nobody",
            Mode::RootWithoutCaps => "root-without-caps",
            Mode::NobodyWithoutUserns => "nobody-without-userns",
        }
    }

    fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The uid (and gid) the child runs as.
    pub fn uid(self) -> u32 {
        match self {
            Mode::Nobody | Mode::NobodyWithoutUserns => NOBODY,
            Mode::RootWithoutCaps => 0,
        }
    }

    /// Whether the child is uid 65534.
    pub fn is_nobody(self) -> bool {
        self.uid() == NOBODY
    }

    /// The `data.confinement.mode` a command that runs in this mode reports.
    pub fn confinement_mode(self) -> &'static str {
        match self {
            Mode::Nobody | Mode::RootWithoutCaps => "user-namespace",
            Mode::NobodyWithoutUserns => "landlock-only",
        }
    }

    fn setpriv_args(self) -> &'static [&'static str] {
        match self {
            Mode::Nobody | Mode::NobodyWithoutUserns => &[
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ],
            Mode::RootWithoutCaps => &["--inh-caps=-all", "--bounding-set=-sys_admin,-setpcap"],
        }
    }
}

/// The mode this process runs in (set by [`run_in`]); `None` in an ordinary run.
pub fn current() -> Option<Mode> {
    let name = std::env::var(MODE_VAR).ok()?;
    Some(Mode::from_name(&name).unwrap_or_else(|| panic!("{MODE_VAR}={name:?} names no mode")))
}

/// Whether this run has no user namespaces (so no namespaces at all): `landlock-only`.
pub fn without_userns() -> bool {
    current() == Some(Mode::NobodyWithoutUserns)
}

/// Whether this process can make namespaces itself: root with `CAP_SYS_ADMIN`.
pub fn privileged() -> bool {
    rustix::process::geteuid().is_root()
        && own_caps("CapEff").is_ok_and(|c| c & (1 << CAP_SYS_ADMIN) != 0)
}

/// The layers a host without user namespaces cannot have, as its refusals name them.
pub const NAMESPACE_LAYERS: [&str; 4] = [
    "mount namespace",
    "PID namespace",
    "network namespace",
    "user namespace",
];

/// Whether `o` is a shell call refused (it did not run) with a message naming a namespace
/// layer that is missing: what a host without user namespaces may answer instead of running
/// a command in `landlock-only` mode.
pub fn refused_for_a_missing_layer(o: &toolgate::Observation) -> bool {
    let said = format!(
        "{} {} {}",
        o.content,
        o.reason.as_deref().unwrap_or(""),
        o.summary
    );
    o.status != toolgate::Status::Ok
        && o.data.get("command").is_none()
        && NAMESPACE_LAYERS.iter().any(|l| said.contains(l))
}

/// Whether `CI` asks for every test to run (a mode that cannot be set up then fails).
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// A mode that cannot be set up: fails under CI, else says so and lets the caller return.
pub fn unavailable(mode: Mode, test: &str, why: &str) {
    assert!(!under_ci(), "CI must run {test} as {}: {why}", mode.name());
    eprintln!("skipped: {test} as {}: {why}", mode.name());
}

/// Run `test` (its path in this binary, e.g. `shell_kernel::confined_root_has_no_capabilities`)
/// in `mode`, after `prepare` (run here, as root, before privileges are dropped: installing
/// what the child needs; an error means the mode cannot be set up). Panics with the child's
/// whole output unless it passed exactly that one test.
pub fn run_prepared(mode: Mode, test: &str, prepare: fn(Mode) -> Result<(), String>) {
    if let Err(why) = prepare(mode) {
        return unavailable(mode, test, &why);
    }
    run_in(mode, test);
}

/// Run `test` in `mode` (see [`run_prepared`]).
pub fn run_in(mode: Mode, test: &str) {
    match try_run_in(mode, test) {
        Ok(took) => eprintln!("{test} passed as {}: {took}", mode.name()),
        Err(RunError::Unavailable(why)) => unavailable(mode, test, &why),
        Err(RunError::Failed(why)) => panic!("{test} as {}: {why}", mode.name()),
    }
}

/// Why a run did not pass.
#[derive(Debug)]
pub enum RunError {
    /// The mode cannot be set up on this machine.
    Unavailable(String),
    /// The child ran and did not pass exactly the one test (its whole output included).
    Failed(String),
}

/// Run `test` in `mode`; on success, how long the setup, the check and the test took.
pub fn try_run_in(mode: Mode, test: &str) -> Result<String, RunError> {
    assert!(
        current().is_none(),
        "run_in({}, {test}) inside a child run",
        mode.name()
    );
    let began = Instant::now();
    let child = Child::prepare(mode).map_err(RunError::Unavailable)?;
    let set_up = began.elapsed();
    let checked = Instant::now();
    match child.run(CHECK) {
        Ok(()) => {}
        Err(out) if out.contains(UNAVAILABLE) || !out.contains("running 1 test") => {
            return Err(RunError::Unavailable(format!(
                "the mode did not take (the check `{CHECK}` in it did not run or found the \
                 machine lacking):\n{out}"
            )))
        }
        Err(out) => {
            return Err(RunError::Failed(format!(
                "the mode did not take: the check `{CHECK}` failed in it:\n{out}"
            )))
        }
    }
    let checked = checked.elapsed();
    let ran = Instant::now();
    child.run(test).map_err(RunError::Failed)?;
    Ok(format!(
        "setup {:.1} s, check {:.1} s, test {:.1} s",
        set_up.as_secs_f64(),
        checked.as_secs_f64(),
        ran.elapsed().as_secs_f64()
    ))
}

/// One child run's directory and command line.
struct Child {
    mode: Mode,
    /// Removed (with everything the child left in it) when the run ends.
    dir: tempfile::TempDir,
    /// `TMPDIR` (and nobody's `HOME`), owned by the child's uid; its working directory.
    home: PathBuf,
    exe: PathBuf,
    setpriv: PathBuf,
    env: Vec<(String, String)>,
    /// The child's filter (`NobodyWithoutUserns`): refuse with `EPERM`, then with `ENOSYS`.
    filters: Option<[seccompiler::BpfProgram; 2]>,
}

impl Child {
    fn prepare(mode: Mode) -> Result<Child, String> {
        if !rustix::process::geteuid().is_root() {
            return Err(format!(
                "the tests do not run as root, so they cannot run a child as {} (uid {})",
                mode.name(),
                mode.uid()
            ));
        }
        let setpriv = which("setpriv")
            .ok_or("util-linux's setpriv is not installed (Debian: apt-get install util-linux)")?;
        if mode == Mode::RootWithoutCaps {
            let eff = own_caps("CapEff")?;
            if eff & (1 << CAP_SETPCAP) == 0 {
                return Err(
                    "this process lacks CAP_SETPCAP, so it cannot drop capabilities from a child's bounding set"
                        .into(),
                );
            }
        }
        let filters = if mode == Mode::NobodyWithoutUserns {
            Some(no_userns_filters()?)
        } else {
            None
        };
        let base = std::env::temp_dir();
        let base = if mode.is_nobody() && !others_can(&base, 0o001) {
            PathBuf::from("/tmp")
        } else {
            base
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("toolgate-as-{}-", mode.name()))
            .tempdir_in(&base)
            .map_err(|e| format!("a temporary directory in {}: {e}", base.display()))?;
        let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| io("chmod the run directory", e))?;
        let home = dir.path().join("home");
        std::fs::create_dir(&home).map_err(|e| io("mkdir home", e))?;
        std::os::unix::fs::chown(&home, Some(mode.uid()), Some(mode.uid()))
            .map_err(|e| io("chown home", e))?;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io("chmod home", e))?;
        if mode.is_nobody() && !others_can(dir.path(), 0o001) {
            return Err(format!(
                "{} is not reachable by uid {NOBODY}",
                dir.path().display()
            ));
        }

        let mut env = vec![
            (MODE_VAR.to_string(), mode.name().to_string()),
            ("TMPDIR".into(), home.display().to_string()),
        ];
        // Root keeps its own HOME, as a container's root does: rustup's and pyenv's shims on
        // PATH find their toolchains through it (under another HOME every `cargo` and
        // `python3` would fail before the test looked at anything).
        if mode.is_nobody() {
            env.push(("HOME".into(), home.display().to_string()));
        }
        let mut exe = std::env::current_exe().map_err(|e| io("this test binary", e))?;
        if mode.is_nobody() {
            exe = reachable_binaries(&exe, dir.path())?;
            let hostile = crate::common::hostile_component();
            if hostile.is_file() && !others_can(&hostile, 0o004) {
                let copy = dir.path().join("bin").join(hostile.file_name().unwrap());
                std::fs::copy(&hostile, &copy).map_err(|e| io("copying the hostile guest", e))?;
                std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644))
                    .map_err(|e| io("chmod the hostile guest", e))?;
                env.push((HOSTILE_VAR.into(), copy.display().to_string()));
            }
            let cache = nobody_cache(dir.path())?;
            env.push((CACHE_VAR.into(), cache.display().to_string()));
            env.push(("TOOLGATE_CACHE_DIR".into(), cache.display().to_string()));
            // What nobody can run: root's toolchains (/root/.cargo, pyenv) are out of reach.
            let path = std::env::var_os("PATH").unwrap_or_default();
            let path = std::env::split_paths(&path)
                .filter(|d| d.is_absolute() && others_can(d, 0o001))
                .collect::<Vec<_>>();
            let path = std::env::join_paths(path).map_err(|e| e.to_string())?;
            env.push(("PATH".into(), path.to_string_lossy().into_owned()));
        } else {
            warm_shared_cache()?;
        }
        Ok(Child {
            mode,
            dir,
            home,
            exe,
            setpriv,
            env,
            filters,
        })
    }

    /// Run exactly `test` in the child; its whole output unless it passed exactly that test.
    fn run(&self, test: &str) -> Result<(), String> {
        let log_path = self.dir.path().join(format!(
            "output-{}.log",
            test.replace("::", "-").replace('/', "-")
        ));
        let log = std::fs::File::create(&log_path).map_err(|e| format!("the log: {e}"))?;
        let log_err = log.try_clone().map_err(|e| format!("the log: {e}"))?;
        let mut cmd = Command::new(&self.setpriv);
        cmd.args(self.mode.setpriv_args())
            .arg(&self.exe)
            .args([test, "--exact", "--test-threads=1", "--nocapture"])
            .current_dir(&self.home)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        for var in [
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "XDG_STATE_HOME",
            "XDG_DATA_HOME",
            "XDG_RUNTIME_DIR",
            MODE_VAR,
            CACHE_VAR,
            HOSTILE_VAR,
        ] {
            cmd.env_remove(var);
        }
        if self.mode.is_nobody() {
            // Root's toolchain homes: nobody can read none of them.
            for var in [
                "CARGO",
                "CARGO_HOME",
                "RUSTUP_HOME",
                "RUSTUP_TOOLCHAIN",
                "PYENV_ROOT",
            ] {
                cmd.env_remove(var);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some([eperm, enosys]) = self.filters.clone() {
            use std::os::unix::process::CommandExt as _;
            let install = move || -> std::io::Result<()> {
                rustix::thread::set_no_new_privs(true)?;
                for filter in [&eperm, &enosys] {
                    seccompiler::apply_filter(filter).map_err(|e| match e {
                        seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
                        _ => std::io::Error::from_raw_os_error(libc::EINVAL),
                    })?;
                }
                Ok(())
            };
            // SAFETY: between fork and exec the hook only makes two system calls per filter
            // (prctl and seccomp) on programs compiled before the fork; it allocates nothing
            // unless a call fails.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(install);
            }
        }
        let began = Instant::now();
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "{UNAVAILABLE} could not start {} as {}: {e}",
                self.setpriv.display(),
                self.mode.name()
            )
        })?;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if began.elapsed() > CHILD_DEADLINE => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "still running after {CHILD_DEADLINE:?}, killed:\n{}",
                        read_log(&log_path)
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("waiting for the child: {e}")),
            }
        };
        let out = read_log(&log_path);
        let summary = out
            .lines()
            .find(|l| l.starts_with("test result: "))
            .unwrap_or("");
        if status.success() && summary.starts_with("test result: ok. 1 passed; 0 failed;") {
            Ok(())
        } else {
            Err(format!(
                "`{} {} {} {test} --exact --test-threads=1 --nocapture` ({status}, {:.1} s) did not pass exactly 1 test:\n{out}",
                self.setpriv.display(),
                self.mode.setpriv_args().join(" "),
                self.exe.display(),
                began.elapsed().as_secs_f64()
            ))
        }
    }
}

fn read_log(path: &Path) -> String {
    let mut bytes = Vec::new();
    let _ = std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes));
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether someone who is neither the owner nor in the group can reach `path`: every
/// directory on the way is searchable by others and `path` itself has `bits` (of `0o007`).
pub fn others_can(path: &Path, bits: u32) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    let mut up = path.parent();
    while let Some(dir) = up {
        if !std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0) {
            return false;
        }
        up = dir.parent();
    }
    std::fs::metadata(&path).is_ok_and(|m| m.mode() & bits == bits)
}

/// A capability set of this process, from `/proc/self/status`.
fn own_caps(set: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    status_caps(&status, set)
}

fn status_caps(status: &str, set: &str) -> Result<u64, String> {
    let hex = status_field(status, set).ok_or(format!("no {set} in /proc/self/status"))?;
    u64::from_str_radix(hex, 16).map_err(|e| format!("{set}: {hex}: {e}"))
}

fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The test binary, and the `toolgate` binary the host and the tests look for beside it, where
/// uid 65534 can run them: in place when the checkout is reachable, else linked (or copied)
/// into `dir/bin` with the same layout (`deps/integration-HASH` and `toolgate` one level up).
fn reachable_binaries(exe: &Path, dir: &Path) -> Result<PathBuf, String> {
    let toolgate = crate::common::toolgate_bin();
    if others_can(exe, 0o005) && others_can(&toolgate, 0o005) {
        return Ok(exe.to_path_buf());
    }
    let bin = dir.join("bin");
    let deps = bin.join("deps");
    std::fs::create_dir_all(&deps).map_err(|e| format!("mkdir {}: {e}", deps.display()))?;
    for d in [&bin, &deps] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("chmod {}: {e}", d.display()))?;
    }
    let exe_copy = deps.join(exe.file_name().ok_or("the test binary has no name")?);
    place_executable(exe, &exe_copy)?;
    place_executable(&toolgate, &bin.join("toolgate"))?;
    Ok(exe_copy)
}

/// `from` at `to`, runnable by anyone: a hard link when `from` already is (no copy of a
/// binary of hundreds of MB), else a copy.
pub fn place_executable(from: &Path, to: &Path) -> Result<(), String> {
    let mode = std::fs::metadata(from)
        .map_err(|e| format!("{}: {e}", from.display()))?
        .mode();
    if mode & 0o005 == 0o005 && std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to)
        .and_then(|_| std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)))
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

/// Compiled components for a child running as uid 65534. The host keeps its cache files
/// `0600` (host/src/sandbox/cache.rs), so the tests' shared cache is root's alone; a cache it
/// cannot write would only cost a compile per component on every start. So nobody has a cache
/// of its own: kept beside the shared one when the build directory is reachable (it stays
/// warm between runs), else in the run's directory. Entries it lacks are copied from the
/// shared cache first (the child hashes each copy once before mapping it).
pub fn nobody_cache(run_dir: &Path) -> Result<PathBuf, String> {
    warm_shared_cache()?;
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = if others_can(&tmp, 0o001) {
        tmp.join(format!("component-cache-uid{NOBODY}"))
    } else {
        run_dir.join("cache")
    };
    static SYNC: Mutex<()> = Mutex::new(());
    let _one = SYNC.lock().unwrap_or_else(|e| e.into_inner());
    let io = |what: &str, p: &Path, e: std::io::Error| format!("{what} {}: {e}", p.display());
    std::fs::create_dir_all(&dir).map_err(|e| io("mkdir", &dir, e))?;
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).map_err(|e| io("chown", &dir, e))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| io("chmod", &dir, e))?;
    let shared = crate::common::shared_cache_dir();
    let Ok(entries) = std::fs::read_dir(&shared) else {
        return Ok(dir);
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".cwasm") || n.ends_with(".json"))
        .collect();
    // Artifacts before their sidecars: a sidecar is only ever found beside its artifact.
    names.sort_by_key(|n| (n.ends_with(".json"), n.clone()));
    for name in names {
        let to = dir.join(&name);
        if to.exists() {
            continue;
        }
        let part = dir.join(format!(".{name}.{}.part", std::process::id()));
        std::fs::copy(shared.join(&name), &part).map_err(|e| io("copy", &part, e))?;
        std::os::unix::fs::chown(&part, Some(NOBODY), Some(NOBODY))
            .map_err(|e| io("chown", &part, e))?;
        std::fs::rename(&part, &to).map_err(|e| io("rename", &to, e))?;
    }
    Ok(dir)
}

/// The shared cache holds every built-in's artifact (once per test process): `toolgate
/// tools` compiles every component, in a second when they are all there already.
fn warm_shared_cache() -> Result<(), String> {
    static WARM: OnceLock<Result<(), String>> = OnceLock::new();
    WARM.get_or_init(|| {
        let ws = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new(crate::common::toolgate_bin())
            .env("TOOLGATE_CACHE_DIR", crate::common::shared_cache_dir())
            .env("XDG_CONFIG_HOME", ws.path().join("xdg-config"))
            .env("XDG_STATE_HOME", ws.path().join("xdg-state"))
            .env_remove("TOOLGATE_SESSION")
            .env_remove("TOOLGATE_WORKSPACE")
            .env_remove("TOOLGATE_MANAGED_POLICY")
            .arg("--workspace")
            .arg(ws.path())
            .arg("tools")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("toolgate tools: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`toolgate tools` could not warm the component cache ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    })
    .clone()
}

/// The seccomp filters of [`Mode::NobodyWithoutUserns`]: `unshare` and `clone` with
/// `CLONE_NEWUSER` fail with `EPERM` (what a container runtime's default profile does), and
/// `clone3` (whose flags a filter cannot read) with `ENOSYS`, so libc falls back to `clone`.
fn no_userns_filters() -> Result<[seccompiler::BpfProgram; 2], String> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    let arch = std::env::consts::ARCH.try_into().map_err(|e| {
        format!(
            "seccompiler has no filters for {}: {e}",
            std::env::consts::ARCH
        )
    })?;
    let newuser = u64::try_from(libc::CLONE_NEWUSER).map_err(|e| e.to_string())?;
    // The flags are the first argument of both calls on every architecture seccompiler knows.
    let with_newuser = || {
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(newuser),
            newuser,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
    };
    let build = || -> Result<[seccompiler::BpfProgram; 2], seccompiler::BackendError> {
        let eperm = SeccompFilter::new(
            [
                (libc::SYS_unshare, vec![with_newuser()?]),
                (libc::SYS_clone, vec![with_newuser()?]),
            ]
            .into(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )?;
        let enosys = SeccompFilter::new(
            [(libc::SYS_clone3, vec![])].into(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )?;
        Ok([eperm.try_into()?, enosys.try_into()?])
    };
    build().map_err(|e| format!("the seccomp filter does not compile: {e}"))
}

/// What [`run_in`] checks in a child before the test: the mode really took. In an ordinary
/// run it checks nothing.
#[test]
fn mode_is_in_effect() {
    let Some(mode) = current() else {
        return;
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status_field(&status, name)
            .unwrap_or_else(|| panic!("no {name}: in /proc/self/status:\n{status}"))
            .to_string()
    };
    let caps = |set: &str| status_caps(&status, set).unwrap();
    let id = mode.uid();
    let ids = format!("{id}\t{id}\t{id}\t{id}");
    assert_eq!(field("Uid"), ids, "{status}");
    assert_eq!(field("Gid"), ids, "{status}");
    assert_eq!(rustix::process::getuid().as_raw(), id);
    match mode {
        Mode::Nobody | Mode::NobodyWithoutUserns => {
            assert_eq!(field("Groups"), "", "{status}");
            for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
                assert_eq!(caps(set), 0, "{set} is not empty as uid {id}:\n{status}");
            }
        }
        Mode::RootWithoutCaps => {
            for set in ["CapPrm", "CapEff", "CapBnd"] {
                for (bit, name) in [
                    (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
                    (CAP_SETPCAP, "CAP_SETPCAP"),
                ] {
                    assert_eq!(
                        caps(set) & (1 << bit),
                        0,
                        "{set} still has {name} (bit {bit}):\n{status}"
                    );
                }
            }
            assert_ne!(
                caps("CapEff") & (1 << CAP_DAC_OVERRIDE),
                0,
                "root lost more than CAP_SYS_ADMIN and CAP_SETPCAP:\n{status}"
            );
        }
    }
    // TMPDIR (and nobody's HOME) are the child's own.
    for var in ["HOME", "TMPDIR"] {
        let dir = PathBuf::from(std::env::var_os(var).unwrap());
        let probe = dir.join(".mode-check");
        std::fs::write(&probe, "x").unwrap_or_else(|e| panic!("{var} {}: {e}", dir.display()));
        std::fs::remove_file(&probe).unwrap();
    }
    assert!(
        crate::common::toolgate_bin().is_file(),
        "the toolgate binary is not reachable"
    );

    let unshare = which("unshare").unwrap_or_else(|| {
        panic!("{UNAVAILABLE} util-linux's unshare is missing, so the mode cannot be checked")
    });
    let userns = Command::new(&unshare)
        .args(["-Ur", "true"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&userns.stderr).into_owned();
    if mode == Mode::NobodyWithoutUserns {
        assert_eq!(field("NoNewPrivs"), "1", "{status}");
        assert_eq!(field("Seccomp"), "2", "{status}");
        assert!(
            !userns.status.success() && said.contains("Operation not permitted"),
            "the filter did not take: `unshare -Ur true` {}: {said}",
            userns.status
        );
        assert_eq!(raw_clone3(), libc::ENOSYS, "clone3 must fail with ENOSYS");
        assert_eq!(
            raw_clone(libc::CLONE_NEWUSER),
            Err(libc::EPERM),
            "clone(CLONE_NEWUSER) must fail with EPERM"
        );
        // Only user namespaces are refused: an ordinary fork works.
        assert_eq!(raw_clone(0), Ok(()), "a plain clone must work");
    } else if !userns.status.success() {
        panic!(
            "{UNAVAILABLE} uid {id} cannot make a user namespace on this machine (`unshare -Ur \
             true` {}: {said}), which {} needs",
            userns.status,
            mode.name()
        );
    }
}

/// `clone3(NULL, 0)`: its errno (`EINVAL` from the kernel, `ENOSYS` from the filter). No
/// process is ever made (the arguments are invalid).
fn raw_clone3() -> i32 {
    // SAFETY: a null, zero-sized argument is rejected before anything is cloned.
    #[allow(unsafe_code)]
    let r = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
    assert_eq!(r, -1, "clone3 with no arguments succeeded");
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `clone(flags | SIGCHLD)` as fork does it: the child exits at once; the errno on failure.
fn raw_clone(flags: i32) -> Result<(), i32> {
    let flags = libc::c_ulong::try_from(flags | libc::SIGCHLD).unwrap();
    // SAFETY: without a new stack the child runs on a copy of this one, as after fork(), and
    // calls nothing but _exit.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid == 0 {
        // SAFETY: the child of the clone above leaves at once.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(0)
        };
    }
    if pid < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
    Ok(())
}

/// Fails in a child run, passes in an ordinary one: [`run_in`] must report the failure.
#[test]
fn fails_in_a_child_run() {
    if let Some(mode) = current() {
        panic!("meant to fail as {}", mode.name());
    }
}

/// Run `tests/scripts/<script>` here (as root, before a child drops privileges), once per
/// test process; its stderr when it fails.
fn install(script: &'static str) -> Result<(), String> {
    static DONE: Mutex<Vec<(&str, Result<(), String>)>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = done.iter().find(|(s, _)| *s == script) {
        return r.clone();
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(script);
    let r = match Command::new("bash")
        .arg(&path)
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{} failed: {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{} could not run: {e}", path.display())),
    };
    done.push((script, r.clone()));
    r
}

/// Nothing to prepare.
pub fn nothing(_: Mode) -> Result<(), String> {
    Ok(())
}

/// A cargo uid 65534 can run (Debian's, at /usr/bin/cargo): root's rustup toolchain is under
/// /root.
pub fn system_cargo(mode: Mode) -> Result<(), String> {
    if mode.is_nobody() {
        install("install-system-cargo.sh")
    } else {
        Ok(())
    }
}

/// Debian's pylsp, which the language-server tests need (the child cannot install it).
pub fn pylsp(_: Mode) -> Result<(), String> {
    install("install-pylsp.sh")
}
