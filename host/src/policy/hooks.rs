//! The `[[hooks]]` a policy configures: PreToolUse commands the gate runs before a call
//! (see `gate::hooks` for how they run and what their answers mean).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Default per-hook timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// One configured hook (deserialized from the policy's `[[hooks]]` tables).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    /// argv: program and arguments; run without a shell, cwd = workspace root.
    pub command: Vec<String>,
    /// Tools it applies to (exact names; empty or absent = all tools).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Per-hook timeout in ms (default 10_000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Let the call through when this hook crashes or times out (default false: fail closed).
    #[serde(default)]
    pub fail_open: bool,
    /// For a hook of the workspace's own policy: every argv element naming a workspace path,
    /// pinned to what the user trusted (see [`verified_argv`]). `None` for the other layers'.
    #[serde(skip)]
    pub pins: Option<Vec<Pin>>,
}

impl HookSpec {
    /// The hook's name in messages and the audit: its command joined with spaces.
    pub fn name(&self) -> String {
        self.command.join(" ")
    }

    /// Whether this hook runs for `tool`.
    pub fn applies_to(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|t| t == tool)
    }
}

/// The most bytes of one bound file that are read, hashed and copied (a larger file cannot be
/// verified, so a hook naming it does not run).
pub const MAX_BOUND_BYTES: u64 = 64 << 20;

/// [`BoundFile::state`] of a path that names nothing (yet).
pub const ABSENT: &str = "absent";
/// [`BoundFile::state`] of a directory (its contents are not bound).
pub const DIRECTORY: &str = "directory";

/// One workspace file a trusted workspace policy makes the host run or read (a hook's
/// program or argument, a language server's), and what it was when the user trusted it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BoundFile {
    /// The path as shown: relative to the workspace root when it lies under it.
    pub path: String,
    /// The sha256 of its bytes, or [`ABSENT`], [`DIRECTORY`], or a word saying why it cannot
    /// be verified (`special file`, `unreadable`, `too large`).
    pub state: String,
}

impl BoundFile {
    /// Whether [`BoundFile::state`] is a content hash.
    pub fn is_hash(&self) -> bool {
        self.state.len() == 64 && self.state.bytes().all(|b| b.is_ascii_hexdigit())
    }
}

/// An argv element that names a path inside the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// Its index in the argv.
    pub index: usize,
    /// What precedes the path in the element (`--config=` of `--config=x.toml`, else empty).
    pub prefix: String,
    /// The path it names (absolute, as spelt: not canonicalised).
    pub path: PathBuf,
    /// The path as shown (relative to the workspace when under it).
    pub shown: String,
}

/// A [`Named`] element pinned to the state the user trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// Its index in the argv.
    pub index: usize,
    /// The path it names.
    pub path: PathBuf,
    /// The trusted state ([`BoundFile::state`]).
    pub state: String,
}

/// `path` with `.` and `..` resolved by spelling alone (`None` when `..` climbs above `/`).
fn lexical(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir => out.push("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Some(out)
}

/// Whether `path` lies under `workspace`, by spelling or once symlinks are resolved.
fn inside(path: &Path, workspace: &Path) -> bool {
    lexical(path).is_some_and(|p| p.starts_with(workspace))
        || std::fs::canonicalize(path).is_ok_and(|p| p.starts_with(workspace))
}

/// Where the program `name` (no `/`) is found on `path_var`; relative entries (and the empty
/// one) are relative to `cwd`, as they are for a hook.
fn which(name: &str, path_var: &std::ffi::OsStr, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_var)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                cwd.to_path_buf()
            } else {
                cwd.join(dir)
            }
        })
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Every element of `argv` (run with `workspace` as its working directory) that names a path
/// inside the workspace: the program (a relative or absolute path, or a bare name `PATH`
/// finds there), and every argument that is not an option (`--name=PATH` counts for its
/// value). Arguments are taken as paths whether or not they exist now: one that names
/// nothing is bound as [`ABSENT`], so a file created there later is a change.
pub fn named_files(argv: &[String], workspace: &Path) -> Vec<Named> {
    let mut out = Vec::new();
    let mut push = |index: usize, prefix: &str, path: PathBuf| {
        if inside(&path, workspace) {
            let shown = lexical(&path)
                .and_then(|p| {
                    p.strip_prefix(workspace)
                        .ok()
                        .map(|r| r.display().to_string())
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| path.display().to_string());
            out.push(Named {
                index,
                prefix: prefix.to_string(),
                path,
                shown,
            });
        }
    };
    for (index, arg) in argv.iter().enumerate() {
        if arg.is_empty() || arg.contains('\0') {
            continue;
        }
        if index == 0 {
            if arg.contains('/') {
                push(0, "", workspace.join(arg));
            } else if let Some(found) =
                std::env::var_os("PATH").and_then(|p| which(arg, &p, workspace))
            {
                push(0, "", found);
            }
            continue;
        }
        let (prefix, value) = match arg.strip_prefix("--").and_then(|r| r.split_once('=')) {
            Some((name, value)) => (format!("--{name}="), value),
            None if arg.starts_with('-') || arg.contains("://") => continue,
            None => (String::new(), arg.as_str()),
        };
        if value.is_empty() || value.contains("://") {
            continue;
        }
        push(index, &prefix, workspace.join(value));
    }
    out
}

/// What `path` is now ([`BoundFile::state`]) and, for a regular file, its bytes. The file is
/// opened once (without blocking on a FIFO) and what was read is what is hashed.
pub fn observe(path: &Path) -> (String, Option<Vec<u8>>) {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return (ABSENT.into(), None)
        }
        Err(_) => return ("unreadable".into(), None),
    };
    let Ok(meta) = file.metadata() else {
        return ("unreadable".into(), None);
    };
    if meta.is_dir() {
        return (DIRECTORY.into(), None);
    }
    if !meta.is_file() {
        return ("special file".into(), None);
    }
    let mut bytes = Vec::new();
    match file.take(MAX_BOUND_BYTES + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 > MAX_BOUND_BYTES => ("too large".into(), None),
        Ok(_) => (crate::state::keyring::sha256_hex(&bytes), Some(bytes)),
        Err(_) => ("unreadable".into(), None),
    }
}

/// A hook's argv ready to run: pinned files replaced by sealed in-memory copies of the
/// verified bytes (`/proc/self/fd/N`), and the descriptors that must stay open (and be
/// inherited) until the hook has been started.
pub struct VerifiedArgv {
    /// The program to execute.
    pub program: PathBuf,
    /// What the program is told its name is (`argv[0]` as configured).
    pub arg0: String,
    /// The arguments.
    pub args: Vec<String>,
    /// The sealed copies (close-on-exec; the child clears the flag before `exec`).
    pub fds: Vec<std::os::fd::OwnedFd>,
}

/// A sealed, executable in-memory copy of `bytes`.
fn sealed_copy(bytes: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let base = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    // MFD_EXEC (Linux 6.3+) keeps it executable where `vm.memfd_noexec` defaults otherwise;
    // older kernels refuse the flag, and their copies are executable anyway.
    let fd = rustix::fs::memfd_create("toolgate-hook", base | MemfdFlags::EXEC)
        .or_else(|_| rustix::fs::memfd_create("toolgate-hook", base))?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes)?;
    rustix::fs::fcntl_add_seals(
        &file,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )?;
    // Keep only a read-only descriptor: nothing that inherits it can even try to write.
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
    let ro = std::fs::File::open(path)?;
    Ok(ro.into())
}

/// `hook`'s argv, checked against its pins. A hook without pins (another layer's) runs as
/// configured (a relative program is the workspace's). A pinned hook runs only if every
/// element naming a workspace path is pinned and still what the user trusted; each pinned
/// file is read once, hashed, and run or read from a sealed copy of exactly those bytes, so
/// a file swapped after the check is never what runs. `Err`: why it must not run.
pub fn verified_argv(hook: &HookSpec, workspace: &Path) -> Result<VerifiedArgv, String> {
    let Some(program) = hook.command.first() else {
        return Err("has an empty command".into());
    };
    let mut argv = hook.command.clone();
    let mut resolved_program = if program.contains('/') && Path::new(program).is_relative() {
        workspace.join(program)
    } else {
        PathBuf::from(program)
    };
    let mut fds = Vec::new();
    if let Some(pins) = &hook.pins {
        // A bare name is looked up once, here: what is checked is what runs.
        if !program.contains('/') {
            if let Some(found) =
                std::env::var_os("PATH").and_then(|p| which(program, &p, workspace))
            {
                resolved_program = found;
            }
        }
        let mut spelled = hook.command.clone();
        spelled[0] = resolved_program.to_string_lossy().into_owned();
        for named in named_files(&spelled, workspace) {
            let again = "run `toolgate trust` to review it and trust the workspace again";
            let Some(pin) = pins
                .iter()
                .find(|p| p.index == named.index && p.path == named.path)
            else {
                return Err(format!(
                    "names `{}`, which your trust does not cover (it was not there when you trusted the workspace); not run: {again}",
                    crate::text::escape_name(&named.shown)
                ));
            };
            let (state, bytes) = observe(&named.path);
            if state != pin.state {
                return Err(format!(
                    "runs `{}`, which changed since you trusted the workspace ({} then, {} now); not run: {again}",
                    crate::text::escape_name(&named.shown),
                    short(&pin.state),
                    short(&state)
                ));
            }
            let Some(bytes) = bytes else {
                if state == ABSENT || state == DIRECTORY {
                    continue;
                }
                return Err(format!(
                    "runs `{}`, which cannot be verified ({state}); not run",
                    crate::text::escape_name(&named.shown)
                ));
            };
            let fd = sealed_copy(&bytes).map_err(|e| {
                format!(
                    "runs `{}`, whose verified copy cannot be made ({e}); not run",
                    crate::text::escape_name(&named.shown)
                )
            })?;
            let copy = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
            if named.index == 0 {
                resolved_program = PathBuf::from(&copy);
            } else {
                argv[named.index] = format!("{}{copy}", named.prefix);
            }
            fds.push(fd);
        }
    }
    Ok(VerifiedArgv {
        program: resolved_program,
        arg0: program.clone(),
        args: argv.split_off(1),
        fds,
    })
}

/// A state for a message: a hash cut to 12 characters.
fn short(state: &str) -> String {
    if state.len() == 64 {
        format!("sha256 {}…", &state[..12])
    } else {
        state.to_string()
    }
}

/// Let `cmd`'s child inherit `fds` (the sealed copies a hook runs): the close-on-exec flag
/// is cleared after the fork, so no other process the host starts meanwhile inherits them.
pub fn inherit(cmd: &mut std::process::Command, fds: &[std::os::fd::OwnedFd]) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    if fds.is_empty() {
        return;
    }
    let raw: Vec<i32> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    // SAFETY: runs in the forked child before `exec`; it only makes fcntl(2) calls on
    // descriptors the parent keeps open until the spawn returns, and allocates nothing.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            for fd in &raw {
                let fd = std::os::fd::BorrowedFd::borrow_raw(*fd);
                rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            }
            Ok(())
        });
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
