//! The workspace's rules, which every layer of the host may use: the scope (every path
//! argument is normalised against the workspace, its nearest existing ancestor canonicalised,
//! and must stay inside the workspace and off the deny-list of secrets and the host's own
//! state), the [`layout`] of the host's files in it, and the [`view`] of its links and
//! secrets the shell's mount namespace is built from.

pub mod layout;
pub mod view;

pub use layout::{GUEST_ROOT, OUTPUTS_DIR, STATE_DIR};

use crate::error::{Error, Result};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use view::{Finder, Plan};

/// Secrets denied to every tool by default (workspace-relative globs; a `**/` prefix matches at
/// any depth). The spec's `id_*` is narrowed to SSH key names so `id_map.rs` stays readable.
pub const DEFAULT_SECRETS: &[&str] = &[
    "**/.env",
    "**/.env.*",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/id_rsa*",
    "**/id_dsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
    "**/.ssh",
    "**/.ssh/**",
    "**/.aws",
    "**/.aws/**",
    "**/.gnupg",
    "**/.gnupg/**",
    "**/.netrc",
    "**/.git-credentials",
    "**/.npmrc",
    "**/.pypirc",
    "**/.docker/config.json",
    // Issue #13: the other files of this class a workspace (or a home directory in one) holds.
    "**/.envrc",
    "**/.kube/config",
    "**/credentials.json",
    "**/application_default_credentials.json",
    "**/service-account*.json",
    "**/*.tfvars",
    "**/*.tfvars.json",
    "**/*.tfstate",
    "**/*.tfstate.backup",
    "**/.terraformrc",
    "**/terraform.rc",
    "**/.pgpass",
    "**/.cargo/credentials",
    "**/.cargo/credentials.toml",
    "**/.config/gh/hosts.yml",
    "**/.vault-token",
    "**/.gem/credentials",
    "**/*.jks",
    "**/*.keystore",
];

/// The hint of every refusal to write a path with a `.git` component.
pub const GIT_HINT: &str = "git internals are host state: no tool writes inside a `.git` directory or a `.git` file (hooks, config and `gitdir:` pointers run or redirect the user's own git); change them with git itself through the shell (`git config`, `git submodule`, `git worktree`)";

/// Whether a `/`-separated path has a `.git` component, case-insensitively (`.GIT` is the
/// same directory on a case-insensitive filesystem).
pub fn has_git_component(rel: &str) -> bool {
    rel.split('/').any(|c| c.eq_ignore_ascii_case(".git"))
}

/// How a path is going to be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read or list.
    Read,
    /// Create or change.
    Write,
}

/// A path that passed the scope check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopedPath {
    /// Canonical host path (the nearest existing ancestor canonicalised, the rest appended).
    pub host: PathBuf,
    /// Relative to the workspace root, `/`-separated; `.` for the root.
    pub rel: String,
    /// The same path as the guest sees it.
    pub guest: String,
}

/// Why a path was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeDenial {
    /// What was refused and why.
    pub reason: String,
    /// What would make it work.
    pub hint: String,
}

/// The workspace: its canonical root and the deny-list.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    /// Compiled once per gate and shared by its copies ([`Workspace::share`]): ~1 ms each.
    secrets: Arc<GlobSet>,
    secret_patterns: Arc<[String]>,
    /// Where the deny-listed files are (their inodes), for their hard links: the shell's
    /// cached walk, refreshed only when a file with more than one link is met.
    links: Finder,
}

/// One call's view of the secrets' inodes: looked up on the first file with more than one link
/// the call meets, then kept for the rest of the call (a grep over many such files pays one
/// refresh, not one each).
#[derive(Clone, Debug, Default)]
pub struct LinkSnapshot(Option<std::result::Result<Arc<Plan>, String>>);

/// What to do about a file the deny-list hides that is not a secret. The built-in patterns
/// cannot be lifted (a policy's `secrets` only adds patterns), so the fix is the file's name.
const SECRET_FIX: &str = "if this file is not a secret, give it a name the deny-list does not match: the built-in patterns cannot be lifted (`secrets` in .toolgate/policy.toml only adds patterns; one you added there can be removed)";

impl Workspace {
    /// Open the workspace at `root` with the default secrets plus `extra_secrets`.
    pub fn new(root: &Path, extra_secrets: &[String]) -> Result<Self> {
        let root = Self::root_of(root)?;
        let mut patterns: Vec<String> = DEFAULT_SECRETS.iter().map(|s| s.to_string()).collect();
        patterns.extend(extra_secrets.iter().cloned());
        let mut set = GlobSetBuilder::new();
        for p in &patterns {
            let glob = GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|e| Error::Workspace {
                    path: root.clone(),
                    message: format!("secret pattern `{p}` is not a valid glob: {e}"),
                })?;
            set.add(glob);
        }
        let secrets = set.build().map_err(|e| Error::Workspace {
            path: root.clone(),
            message: format!("secret patterns: {e}"),
        })?;
        Ok(Self::with(root, Arc::new(secrets), patterns.into()))
    }

    /// The canonical root `root` names, or why it cannot be a workspace (what [`Workspace::new`]
    /// checks first, without compiling the deny-list).
    pub fn root_of(root: &Path) -> Result<PathBuf> {
        let canonical = root.canonicalize().map_err(|e| Error::Workspace {
            path: root.to_path_buf(),
            message: format!("cannot be opened: {e}"),
        })?;
        if !canonical.is_dir() {
            return Err(Error::Workspace {
                path: canonical,
                message: "is not a directory".into(),
            });
        }
        Ok(canonical)
    }

    /// Another handle on this workspace with the same root and deny-list (compiled once), and
    /// its own cache of where the secrets' hard links are.
    pub fn share(&self) -> Workspace {
        Self::with(
            self.root.clone(),
            self.secrets.clone(),
            self.secret_patterns.clone(),
        )
    }

    fn with(root: PathBuf, secrets: Arc<GlobSet>, secret_patterns: Arc<[String]>) -> Workspace {
        let matcher = secrets.clone();
        let links = Finder::new(root.clone(), Box::new(move |rel| matcher.is_match(rel)));
        Workspace {
            root,
            secrets,
            secret_patterns,
            links,
        }
    }

    /// The deny-listed file a regular file with identity `(dev, ino)` and `nlink` links is a
    /// second name of. `None` for a file with one link (no syscall, no lookup) or no such
    /// secret. When the index cannot be built (the workspace is too large to walk, or
    /// unreadable), a file with several links fails closed: `Some` with the reason.
    pub fn linked_secret(
        &self,
        snapshot: &mut LinkSnapshot,
        dev: u64,
        ino: u64,
        nlink: u64,
    ) -> Option<String> {
        if nlink <= 1 {
            return None;
        }
        let plan = snapshot.0.get_or_insert_with(|| self.links.plan());
        match plan {
            Ok(plan) => plan.linked_secret(dev, ino).map(|p| format!("`{p}`")),
            Err(e) => Some(format!(
                "an unknown file (where the secrets are could not be found: {e})"
            )),
        }
    }

    /// The deny-listed file or directory an object with identity `(dev, ino)` is, whatever
    /// its name now (a secret directory exchanged with a plain one is still the secret; see
    /// `view/remember.rs`): the index is looked up once per snapshot. When it cannot be built,
    /// a file with several links fails closed as in [`Workspace::linked_secret`]; anything
    /// else is left to the by-name checks (the reason is logged once per snapshot).
    pub fn secret_identity(
        &self,
        snapshot: &mut LinkSnapshot,
        dev: u64,
        ino: u64,
        nlink: u64,
        is_dir: bool,
    ) -> Option<String> {
        let plan = self.snapshot(snapshot);
        match plan {
            Ok(plan) => plan
                .secret_identity(dev, ino, is_dir)
                .map(|p| format!("`{p}`")),
            Err(e) if !is_dir && nlink > 1 => Some(format!(
                "an unknown file (where the secrets are could not be found: {e})"
            )),
            Err(_) => None,
        }
    }

    /// `snapshot`, looked up now when it was not yet (the reason it could not be is logged).
    pub fn snapshot<'a>(
        &self,
        snapshot: &'a mut LinkSnapshot,
    ) -> &'a std::result::Result<Arc<Plan>, String> {
        snapshot.0.get_or_insert_with(|| {
            let plan = self.links.plan();
            if let Err(e) = &plan {
                tracing::warn!(
                    error = %e,
                    "secrets are denied by name only in this call: where they are could not be found"
                );
            }
            plan
        })
    }

    /// Find where the secrets are now (the index [`Workspace::secret_identity`] asks), so the
    /// identities of the secrets are known before any process outside the host moves them;
    /// called when a gate opens. The error says why it could not be built.
    pub fn index_secrets(&self) -> std::result::Result<(), String> {
        self.links.plan().map(|_| ())
    }

    /// The workspace-relative paths of the deny-listed files and the files inside deny-listed
    /// directories (remembered secrets under their first name), from the index now; empty
    /// when it cannot be built.
    pub fn secret_file_paths(&self) -> Vec<String> {
        let Ok(plan) = self.links.plan() else {
            return Vec::new();
        };
        let mut paths: Vec<String> = plan
            .secret_files
            .iter()
            .cloned()
            .chain(plan.secret_inodes.iter().map(|s| s.path.clone()))
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The host's state directory, `<root>/.toolgate`.
    pub fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    /// Globs a walking guest must skip: the secrets and the host's state directory.
    pub fn guest_denied_globs(&self) -> Vec<String> {
        let mut globs = self.secret_patterns.to_vec();
        globs.push(STATE_DIR.to_string());
        globs.push(format!("{STATE_DIR}/**"));
        globs
    }

    /// Whether the workspace-relative path is a secret.
    pub fn is_secret(&self, rel: &str) -> bool {
        self.secrets.is_match(rel)
    }

    /// Check `raw` (relative to the workspace, or absolute) for `access`.
    pub fn scope(&self, raw: &str, access: Access) -> Result<ScopedPath, ScopeDenial> {
        if raw.contains('\0') {
            return Err(ScopeDenial {
                reason: "the path contains a NUL byte".into(),
                hint: "pass a plain path".into(),
            });
        }
        let given = Path::new(raw);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };
        let normal = normalize(&joined);
        let host = canonicalize_existing_prefix(&normal);
        let Ok(rel_path) = host.strip_prefix(&self.root) else {
            return Err(ScopeDenial {
                reason: format!(
                    "`{raw}` resolves to {}, which is outside the workspace {}",
                    host.display(),
                    self.root.display()
                ),
                hint: "use a path inside the workspace; symlinks are followed before this check"
                    .into(),
            });
        };
        let rel = if rel_path.as_os_str().is_empty() {
            ".".to_string()
        } else {
            rel_path.to_string_lossy().replace('\\', "/")
        };
        if let Some(denial) = self.deny_listed(raw, &rel, access) {
            return Err(denial);
        }
        if let Some(denial) = self.hard_link(raw, &host) {
            return Err(denial);
        }
        let guest = if rel == "." {
            GUEST_ROOT.to_string()
        } else {
            format!("{GUEST_ROOT}/{rel}")
        };
        Ok(ScopedPath { host, rel, guest })
    }

    fn deny_listed(&self, raw: &str, rel: &str, access: Access) -> Option<ScopeDenial> {
        let state = rel == STATE_DIR || rel.starts_with(&format!("{STATE_DIR}/"));
        if state {
            let outputs = rel.starts_with(&format!("{OUTPUTS_DIR}/"));
            if !(outputs && access == Access::Read) {
                return Some(ScopeDenial {
                    reason: format!("`{raw}` is toolgate's own state ({STATE_DIR}/), which no tool may touch"),
                    hint: format!("only files under {OUTPUTS_DIR}/ can be read; manage state with the toolgate CLI"),
                });
            }
        }
        if access == Access::Write && has_git_component(rel) {
            return Some(ScopeDenial {
                reason: format!("`{raw}` is inside git internals (a `.git` path component), which no tool may write"),
                hint: GIT_HINT.into(),
            });
        }
        // The path itself and every ancestor, so `.ssh/config` is caught by `**/.ssh`.
        let mut candidate = Some(rel);
        while let Some(c) = candidate {
            if c != "." && self.is_secret(c) {
                return Some(ScopeDenial {
                    reason: format!("`{raw}` matches the secrets deny-list (`{c}`)"),
                    hint: format!("secrets are never given to tools; {SECRET_FIX}"),
                });
            }
            candidate = c.rfind('/').map(|i| &c[..i]);
        }
        None
    }
}

impl Workspace {
    /// A hard link is the file it links to: an existing regular file with more than one link
    /// whose inode is a deny-listed file's is denied as that file. One `stat` of the canonical
    /// path; the index is consulted only for a file with several links.
    #[cfg(unix)]
    fn hard_link(&self, raw: &str, host: &Path) -> Option<ScopeDenial> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(host).ok()?;
        if !meta.is_file() {
            return None;
        }
        let secret = self.linked_secret(
            &mut LinkSnapshot::default(),
            meta.dev(),
            meta.ino(),
            meta.nlink(),
        )?;
        Some(ScopeDenial {
            reason: format!("`{raw}` is a hard link to {secret}, which matches the secrets deny-list"),
            hint: format!("a hard link is the file it links to: secrets are never given to tools under any name; remove the link, or {SECRET_FIX}"),
        })
    }

    #[cfg(not(unix))]
    fn hard_link(&self, _raw: &str, _host: &Path) -> Option<ScopeDenial> {
        None
    }
}

/// Lexically resolve `.` and `..` (a `..` at the filesystem root stays at the root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Canonicalise the longest existing prefix of `path` and append the rest.
fn canonicalize_existing_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(canon) = existing.canonicalize() {
            let mut out = canon;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
