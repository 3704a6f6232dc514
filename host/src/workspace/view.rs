//! What a shell command must not see or change inside the workspace (secrets, the host's
//! state, git's hooks and config): this module *finds* the paths, the mount code masks them.
//!
//! [`Finder::plan`] walks the whole workspace (secrets can be anywhere, `node_modules/` and
//! `target/` included) and returns a [`Plan`]: the deny-listed files and directories to hide,
//! the git directories to pin as mount points and the entries in them git executes or reads its
//! configuration from, to freeze read-only.
//!
//! # How the walk stays safe
//! - Every directory is opened relative to its parent's descriptor with
//!   `O_DIRECTORY | O_NOFOLLOW`, so a directory swapped for a symlink mid-walk fails to open and
//!   is skipped, never followed, and nothing outside the workspace is ever walked.
//! - Only `getdents` and `fstatat(AT_SYMLINK_NOFOLLOW)` touch entries: no non-directory is ever
//!   opened, so FIFOs and devices cannot block the walk.
//! - Symlinks are never listed, not even one whose name is deny-listed: a bind mount over a
//!   symlink would land on its *target*. That is fine because the shell sees what the file tools
//!   see: the file tools deny the symlink's name, and the target is judged by its own path (if the
//!   target is a deny-listed path inside the workspace it is masked where it is; if it is outside,
//!   the command's filesystem view does not contain it).
//! - A deny-listed directory is masked whole and not descended into; `.git` directories are read
//!   only to find their configuration and the git directories nested in `modules/` and
//!   `worktrees/` (never `objects/`). `.toolgate/` (the host's state) is left to the mount code.
//! - The work is bounded: [`MAX_DEPTH`] directories deep, [`MAX_ENTRIES`] entries in all,
//!   [`MAX_MOUNTS`] masks; past any of them the plan fails closed with a message.
//! - A directory the host cannot read is hidden whole (listed in [`Plan::secret_dirs`]): what is
//!   below it is unknown, and a command running as the same user could `chmod` it back and read a
//!   secret the walk never saw.
//!
//! # The cache
//! A [`Finder`] keeps one node per directory with what its listing yielded, keyed by the
//! directory's (device, inode, mtime, ctime). Creating, removing or renaming an entry changes its
//! directory's mtime, so [`Finder::plan`] checks every cached directory (an `O_PATH` `openat`
//! and an `fstat`; a leaf directory, one `fstatat(AT_SYMLINK_NOFOLLOW)` of its name) and re-reads
//! only the directories whose key changed. A directory
//! modified within [`RACY_WINDOW`] of being read is read again next time too, because file system
//! timestamps are coarse (a file created in the same clock tick leaves the mtime unchanged; git's
//! "racily clean" problem). When the walk yields the plan it yielded last time, the same
//! `Arc<Plan>` is returned.

use rustix::fs::{fstat, openat, statat, AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::CStr;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Most masks one command may need; past it `plan` fails closed with a message saying how many
/// were found and what to do (a hostile repository with 100k `.env` files must not exhaust the
/// kernel's mount table).
pub const MAX_MOUNTS: usize = 4096;
/// How many directories deep the walk goes; a deeper tree fails closed.
pub const MAX_DEPTH: usize = 256;
/// How many directory entries the walk reads in all; a larger tree fails closed.
pub const MAX_ENTRIES: usize = 2_000_000;
/// A directory whose mtime or ctime is this close to the moment it was read is read again on the
/// next plan: an entry created in the same timestamp granule would not change it.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The host's state directory at the workspace root, handled by the mount code.
use crate::workspace::STATE_DIR;

/// The entries of a git directory that git executes or reads configuration from, bound
/// read-only when they exist:
/// - `config`: `core.hooksPath`, `core.fsmonitor`, `core.sshCommand`, `core.pager`, aliases,
///   diff/merge/filter drivers, `include.path`: each runs a program or redirects to one;
/// - `config.worktree`: the same settings, read when `extensions.worktreeConfig` is set;
/// - `hooks`: programs git runs on commit, checkout, merge, push…;
/// - `commondir`: redirects git to another directory's `config` and `hooks`.
///
/// Not `info/`: `info/attributes` and `info/exclude` have exact working-tree equivalents
/// (`.gitattributes`, `.gitignore`) the command can write anyway, drivers named there are defined
/// in the (frozen) config, and `git sparse-checkout` writes `info/sparse-checkout`.
pub const GIT_READONLY: &[&str] = &["commondir", "config", "config.worktree", "hooks"];

/// Entries of a git directory that are git's own data, never searched for nested git dirs.
const GIT_DATA: &[&str] = &[
    "objects",
    "refs",
    "logs",
    "hooks",
    "info",
    "branches",
    "remotes",
    "rr-cache",
    "lfs",
    "reftable",
    "sequencer",
    "rebase-merge",
    "rebase-apply",
    "modules",
    "worktrees",
];

/// What a command's mount namespace must hide or freeze inside the workspace (all paths
/// workspace-relative, `/`-separated, no leading `./`, never containing `..`, sorted, no
/// duplicates).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// Deny-listed non-directories (regular files, FIFOs, sockets, devices; never symlinks): an
    /// empty read-only file is bound over each.
    pub secret_files: Vec<String>,
    /// Deny-listed directories, and directories the host could not read: an empty read-only
    /// tmpfs is mounted over each (nothing below them is listed).
    pub secret_dirs: Vec<String>,
    /// Every git directory (a directory named `.git` at any depth, every directory under
    /// `<gitdir>/modules/` that is itself a git dir (has `HEAD`, `config` or `objects`), and
    /// `<gitdir>/worktrees/*`): each becomes a mount point so it cannot be renamed or removed.
    pub git_dirs: Vec<String>,
    /// Inside each git dir, the existing entries of [`GIT_READONLY`] (not symlinks): each is
    /// bound read-only.
    pub git_readonly: Vec<String>,
    /// Every `.git` that is a regular file (a submodule's or linked worktree's `gitdir: …`
    /// pointer): bound read-only onto itself, so it cannot be pointed at a planted git dir.
    pub git_files: Vec<String>,
    /// The directories between the workspace root and each git dir or git file, not themselves
    /// git dirs (`vendor` for `vendor/lib/.git`, `.git/modules` for `.git/modules/x`): each must
    /// become a mount point too (a writable bind onto itself). Renaming a directory *above* a
    /// mount point is allowed and moves the mount along, so without these `mv vendor v2 &&
    /// mkdir -p vendor/lib/.git` would replace a nested repository with a planted one.
    pub pinned_dirs: Vec<String>,
    /// Entries of [`GIT_READONLY`] a bind cannot freeze: absent ones (the command could create
    /// them; `commondir` is absent in every main repository and would redirect git to a planted
    /// `config`) and symlinks (a bind would land on the target, the link stays replaceable). Not
    /// mounts: the mount code decides (create `hooks`/an empty `config` beforehand, check after
    /// the command that none appeared or changed).
    pub git_unprotected: Vec<String>,
    /// The (device, inode) of every deny-listed non-directory in the workspace (files inside
    /// deny-listed directories included), sorted by (device, inode): a file with more than one
    /// link whose inode is here is a second name of a secret. Not mounts: the file tools ask
    /// [`Plan::linked_secret`], and the names found linking to them are in `secret_files`.
    #[serde(default)]
    pub secret_inodes: Vec<SecretInode>,
}

/// One deny-listed file's identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct SecretInode {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// Its workspace-relative path (lossy when not UTF-8).
    pub path: String,
}

impl Plan {
    /// The deny-listed file whose inode `(dev, ino)` is, if any.
    pub fn linked_secret(&self, dev: u64, ino: u64) -> Option<&str> {
        let i = self
            .secret_inodes
            .partition_point(|s| (s.dev, s.ino) < (dev, ino));
        self.secret_inodes
            .get(i)
            .filter(|s| (s.dev, s.ino) == (dev, ino))
            .map(|s| s.path.as_str())
    }

    /// How many mounts the plan needs (`git_unprotected` are not mounts).
    pub fn mounts(&self) -> usize {
        self.secret_files.len()
            + self.secret_dirs.len()
            + self.git_dirs.len()
            + self.git_readonly.len()
            + self.git_files.len()
            + self.pinned_dirs.len()
    }
}

/// What the last [`Finder::plan`] did, for logs and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Directories opened and `fstat`ed.
    pub dirs_visited: usize,
    /// Directories whose entries were read (new, changed or racy ones).
    pub dirs_read: usize,
    /// Directory entries the plan accounts for (read now or reused from the cache).
    pub entries: usize,
}

/// The bounds of a walk (tests shrink them).
#[derive(Clone, Copy, Debug)]
struct Bounds {
    depth: usize,
    entries: usize,
    mounts: usize,
    racy: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            depth: MAX_DEPTH,
            entries: MAX_ENTRIES,
            mounts: MAX_MOUNTS,
            racy: RACY_WINDOW,
        }
    }
}

/// Finds the [`Plan`] for a workspace, cached and refreshed only where a directory changed.
pub struct Finder {
    workspace: PathBuf,
    is_secret: Box<dyn Fn(&str) -> bool + Send + Sync>,
    bounds: Bounds,
    cache: Mutex<Cache>,
}

impl fmt::Debug for Finder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Finder")
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Cache {
    root: Option<Node>,
    plan: Option<Arc<Plan>>,
    stats: WalkStats,
    /// Paths already warned about (unreadable directories), so the log says it once.
    warned: HashSet<String>,
}

/// What identifies one state of a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DirKey {
    dev: u64,
    ino: u64,
    mtime: i128,
    ctime: i128,
}

/// One cached directory.
struct Node {
    key: DirKey,
    /// Read too close to its last change to trust the key next time.
    racy: bool,
    listing: Listing,
    /// The cached subdirectories, one slot per `listing.descend` entry.
    children: Vec<Option<Node>>,
}

/// How a directory is looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    /// The working tree: deny-list matching, `.git` found.
    Tree,
    /// A git directory.
    Git,
    /// Under `<gitdir>/modules/`: a git dir if it has `HEAD`, `config` or `objects`, else a
    /// container of them (submodule names may contain `/`).
    Modules,
    /// `<gitdir>/worktrees/`: every subdirectory is a git dir.
    Worktrees,
    /// Inside a deny-listed directory (masked whole): read only for its files' inodes.
    Secret,
}

/// A subdirectory to walk.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Child {
    name: Vec<u8>,
    rel: String,
    /// Whether `rel` is the exact path (every component valid UTF-8).
    exact: bool,
    role: Role,
}

/// What one directory's entries yield.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Listing {
    entries: usize,
    secret_files: Vec<String>,
    secret_dirs: Vec<String>,
    git_dirs: Vec<String>,
    git_readonly: Vec<String>,
    git_files: Vec<String>,
    git_unprotected: Vec<String>,
    /// Paths that must be masked but cannot be named as a `String` (not valid UTF-8).
    unnamable: Vec<String>,
    descend: Vec<Child>,
    /// The deny-listed non-directories' identities (one `fstatat` each when read).
    secret_inodes: Vec<SecretInode>,
    /// The inode numbers (`d_ino`, no system call) of the other regular files, sorted: where a
    /// second name of a secret could be.
    file_inos: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    Link,
    File,
    /// FIFOs, sockets, devices.
    Other,
}

/// The plan being assembled by one walk.
#[derive(Default)]
struct Acc {
    plan: Plan,
    unnamable: Vec<String>,
    stats: WalkStats,
    unreadable: Vec<String>,
}

impl Finder {
    /// `is_secret(rel)` is the file tools' deny-list match on a workspace-relative path.
    pub fn new(workspace: PathBuf, is_secret: Box<dyn Fn(&str) -> bool + Send + Sync>) -> Finder {
        Finder::with_bounds(workspace, is_secret, Bounds::default())
    }

    fn with_bounds(
        workspace: PathBuf,
        is_secret: Box<dyn Fn(&str) -> bool + Send + Sync>,
        bounds: Bounds,
    ) -> Finder {
        Finder {
            workspace,
            is_secret,
            bounds,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The workspace this finder walks.
    pub fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// What the last [`Finder::plan`] did.
    pub fn stats(&self) -> WalkStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic mid-walk leaves every node either old or new, both valid.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The plan now. Errors are plain-English messages naming the path.
    pub fn plan(&self) -> Result<Arc<Plan>, String> {
        let mut cache = self.lock();
        let root_fd = openat(
            rustix::fs::CWD,
            &self.workspace,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            format!(
                "cannot open the workspace {} to find what to hide from the shell: {e}",
                self.workspace.display()
            )
        })?;
        let mut acc = Acc::default();
        let mut root = cache.root.take();
        let walked = self.walk(&root_fd, &mut root, "", true, Role::Tree, 0, &mut acc);
        cache.root = root;
        let message = match walked {
            Ok(()) => None,
            Err(WalkError::Unreadable) => Some(format!(
                "cannot read the workspace {} to find what to hide from the shell: permission denied",
                self.workspace.display()
            )),
            Err(WalkError::Io(e, rel)) => Some(format!(
                "cannot read `{}` in the workspace {} to find what to hide from the shell: {e}",
                if rel.is_empty() { "." } else { &rel },
                self.workspace.display()
            )),
            Err(WalkError::Bound(message)) => Some(message),
        };
        if let Some(message) = message {
            cache.plan = None;
            return Err(message);
        }
        let Acc {
            mut plan,
            mut unnamable,
            stats,
            unreadable,
        } = acc;
        if let Err(message) =
            self.linked_names(&root_fd, cache.root.as_ref(), &mut plan, &mut unnamable)
        {
            cache.plan = None;
            return Err(message);
        }
        cache.stats = stats;
        for rel in unreadable {
            if cache.warned.insert(rel.clone()) {
                tracing::warn!(
                    path = %rel,
                    "the shell's view hides this workspace directory whole: the host cannot read it, so what is below it is unknown"
                );
            }
        }
        if let Some(rel) = unnamable.first() {
            cache.plan = None;
            return Err(format!(
                "cannot hide `{rel}` from the shell: its path is not valid UTF-8 ({} such path(s) in the workspace); rename it",
                unnamable.len()
            ));
        }
        finish(&mut plan);
        let mounts = plan.mounts();
        if mounts > self.bounds.mounts {
            cache.plan = None;
            return Err(too_many(&plan, mounts, self.bounds.mounts));
        }
        if let Some(old) = &cache.plan {
            if **old == plan {
                return Ok(old.clone());
            }
        }
        let plan = Arc::new(plan);
        cache.plan = Some(plan.clone());
        Ok(plan)
    }

    /// Walk the directory open as `dir` (workspace-relative `rel`), reusing `node` when its key
    /// is unchanged, and add what it and its subdirectories yield to `acc`.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        dir: &OwnedFd,
        node: &mut Option<Node>,
        rel: &str,
        exact: bool,
        role: Role,
        depth: usize,
        acc: &mut Acc,
    ) -> Result<(), WalkError> {
        let io = |e: Errno| match e {
            Errno::ACCESS | Errno::PERM => WalkError::Unreadable,
            e => WalkError::Io(e, rel.to_string()),
        };
        acc.stats.dirs_visited += 1;
        let st = fstat(dir).map_err(io)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            // `O_DIRECTORY` already refuses anything else; never list one.
            return Ok(());
        }
        let key = dir_key(&st);
        let fresh = match node {
            Some(n) => n.key != key || n.racy,
            None => true,
        };
        if fresh {
            let read_at = SystemTime::now();
            let budget = self.bounds.entries.saturating_sub(acc.stats.entries);
            // The visit holds an `O_PATH` descriptor (cheap, no open events); reading needs a
            // real one.
            let mut entries = openat(
                dir,
                c".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .and_then(Dir::new)
            .map_err(io)?;
            let listing = match self.read(&mut entries, rel, exact, role, budget) {
                Ok(listing) => listing,
                Err(ReadError::Io(e)) => return Err(io(e)),
                Err(ReadError::TooMany) => return Err(self.too_large(rel)),
            };
            acc.stats.dirs_read += 1;
            let racy = is_racy(&key, read_at, self.bounds.racy);
            // Keep the cached subdirectories that are still there, in the new order.
            let mut kept: HashMap<(Vec<u8>, Role), Node> = HashMap::new();
            if let Some(old) = node.take() {
                for (c, slot) in old.listing.descend.into_iter().zip(old.children) {
                    if let Some(n) = slot {
                        kept.insert((c.name, c.role), n);
                    }
                }
            }
            let children = listing
                .descend
                .iter()
                .map(|c| kept.remove(&(c.name.clone(), c.role)))
                .collect();
            *node = Some(Node {
                key,
                racy,
                listing,
                children,
            });
        }
        let Some(Node {
            listing, children, ..
        }) = node
        else {
            return Ok(());
        };
        self.account(acc, listing, rel)?;
        if let Some(first) = listing.descend.first() {
            if depth >= self.bounds.depth {
                return Err(WalkError::Bound(format!(
                    "`{}` is more than {} directories deep, too deep to find what to hide from the shell; flatten the tree",
                    first.rel, self.bounds.depth
                )));
            }
        }
        let fd = dir.as_fd();
        for (child, slot) in listing.descend.iter().zip(children.iter_mut()) {
            // A cached leaf (most directories) is checked with one `fstatat` of its name, not
            // opened: `AT_SYMLINK_NOFOLLOW` stats a swapped-in symlink itself, a key mismatch.
            if let Some(leaf) = slot {
                if leaf.listing.descend.is_empty() && !leaf.racy {
                    let same = statat(fd, child.name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| {
                            FileType::from_raw_mode(st.st_mode) == FileType::Directory
                                && dir_key(&st) == leaf.key
                        });
                    if same {
                        acc.stats.dirs_visited += 1;
                        self.account(acc, &leaf.listing, &child.rel)?;
                        continue;
                    }
                }
            }
            match open_child(fd, &child.name) {
                Ok(sub) => {
                    let walked = self.walk(
                        &sub,
                        slot,
                        &child.rel,
                        child.exact,
                        child.role,
                        depth + 1,
                        acc,
                    );
                    match walked {
                        Ok(()) => {}
                        Err(WalkError::Unreadable) => {
                            *slot = None;
                            unreadable(acc, child);
                        }
                        Err(e) => return Err(e),
                    }
                }
                // Gone, or swapped for a symlink or a file since it was listed: not followed.
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {
                    *slot = None;
                    tracing::debug!(path = %child.rel, "changed while the shell's view was planned; skipped");
                }
                Err(Errno::ACCESS | Errno::PERM) => {
                    *slot = None;
                    unreadable(acc, child);
                }
                Err(e) => return Err(WalkError::Io(e, child.rel.clone())),
            }
        }
        Ok(())
    }

    /// Add what a directory's listing yields to the plan, within the entries bound.
    fn account(&self, acc: &mut Acc, listing: &Listing, rel: &str) -> Result<(), WalkError> {
        acc.stats.entries += listing.entries;
        if acc.stats.entries > self.bounds.entries {
            return Err(self.too_large(rel));
        }
        add(&mut acc.plan, &mut acc.unnamable, listing);
        Ok(())
    }

    fn too_large(&self, rel: &str) -> WalkError {
        WalkError::Bound(format!(
            "the workspace has more than {} files and directories, too many to find what to hide from the shell (stopped in `{}`); remove generated trees from it",
            self.bounds.entries,
            if rel.is_empty() { "." } else { rel }
        ))
    }

    /// Read a directory's entries and classify them for `role`.
    fn read(
        &self,
        dir: &mut Dir,
        rel: &str,
        exact: bool,
        role: Role,
        budget: usize,
    ) -> Result<Listing, ReadError> {
        let mut entries: Vec<(Vec<u8>, Kind, u64)> = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry?;
            let name = entry.file_name();
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            if entries.len() >= budget {
                return Err(ReadError::TooMany);
            }
            let kind = match kind_of(entry.file_type()) {
                Some(kind) => kind,
                None => match stat_kind(dir.fd()?, name) {
                    Ok(kind) => kind,
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(e.into()),
                },
            };
            entries.push((bytes.to_vec(), kind, entry.ino()));
        }
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut l = Listing {
            entries: entries.len(),
            ..Listing::default()
        };
        let join = |name: &[u8]| -> (String, bool) {
            let (part, ok) = match std::str::from_utf8(name) {
                Ok(s) => (s.to_string(), true),
                Err(_) => (String::from_utf8_lossy(name).into_owned(), false),
            };
            let rel = if rel.is_empty() {
                part
            } else {
                format!("{rel}/{part}")
            };
            (rel, ok && exact)
        };
        let push = |list: fn(&mut Listing) -> &mut Vec<String>,
                    l: &mut Listing,
                    path: String,
                    ok: bool| {
            if ok {
                list(l).push(path);
            } else {
                l.unnamable.push(path);
            }
        };
        // A git dir found under `modules/` may hold others (see below).
        let nested = role == Role::Modules;
        let role = match role {
            Role::Modules if is_git_dir(&entries) => Role::Git,
            other => other,
        };
        // A deny-listed file's identity, for its other names; `None` when it is gone.
        let identity = |name: &[u8], path: String| -> Result<Option<SecretInode>, ReadError> {
            match statat(dir.fd()?, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => Ok(Some(inode_of(&st, path))),
                Err(Errno::NOENT) => Ok(None),
                Err(e) => Err(e.into()),
            }
        };
        match role {
            Role::Tree => {
                for (name, kind, ino) in &entries {
                    if *kind == Kind::Link || (rel.is_empty() && name == STATE_DIR.as_bytes()) {
                        continue;
                    }
                    let (path, ok) = join(name);
                    let secret = (self.is_secret)(&path);
                    match (kind, secret) {
                        (Kind::Dir, true) => {
                            // Masked whole, and read for the inodes of what it holds.
                            l.descend.push(Child {
                                name: name.clone(),
                                rel: path.clone(),
                                exact: ok,
                                role: Role::Secret,
                            });
                            push(|l| &mut l.secret_dirs, &mut l, path, ok)
                        }
                        (_, true) => {
                            if let Some(id) = identity(name, path.clone())? {
                                l.secret_inodes.push(id);
                            }
                            push(|l| &mut l.secret_files, &mut l, path, ok)
                        }
                        (Kind::File, false) if name != b".git" => l.file_inos.push(*ino),
                        (Kind::Dir, false) => {
                            let role = if name == b".git" {
                                Role::Git
                            } else {
                                Role::Tree
                            };
                            l.descend.push(Child {
                                name: name.clone(),
                                rel: path,
                                exact: ok,
                                role,
                            });
                        }
                        (Kind::File, false) if name == b".git" => {
                            push(|l| &mut l.git_files, &mut l, path, ok)
                        }
                        _ => {}
                    }
                }
            }
            Role::Git => {
                push(|l| &mut l.git_dirs, &mut l, rel.to_string(), exact);
                for wanted in GIT_READONLY {
                    let (path, ok) = join(wanted.as_bytes());
                    match entries.iter().find(|(n, _, _)| n == wanted.as_bytes()) {
                        Some((_, Kind::Link, _)) | None => {
                            push(|l| &mut l.git_unprotected, &mut l, path, ok)
                        }
                        Some(_) => push(|l| &mut l.git_readonly, &mut l, path, ok),
                    }
                }
                for (name, kind, _) in &entries {
                    if *kind != Kind::Dir {
                        continue;
                    }
                    let role = match name.as_slice() {
                        b"modules" => Role::Modules,
                        b"worktrees" => Role::Worktrees,
                        // A submodule named `a` holds the git dir of one named `a/b` (older git).
                        other if nested && !GIT_DATA.iter().any(|d| d.as_bytes() == other) => {
                            Role::Modules
                        }
                        _ => continue,
                    };
                    let (path, ok) = join(name);
                    l.descend.push(Child {
                        name: name.clone(),
                        rel: path,
                        exact: ok,
                        role,
                    });
                }
            }
            Role::Secret => {
                for (name, kind, _) in &entries {
                    let (path, ok) = join(name);
                    match kind {
                        Kind::Link => {}
                        Kind::Dir => l.descend.push(Child {
                            name: name.clone(),
                            rel: path,
                            exact: ok,
                            role: Role::Secret,
                        }),
                        Kind::File | Kind::Other => {
                            if let Some(id) = identity(name, path)? {
                                l.secret_inodes.push(id);
                            }
                        }
                    }
                }
            }
            Role::Modules | Role::Worktrees => {
                let role = if role == Role::Worktrees {
                    Role::Git
                } else {
                    Role::Modules
                };
                for (name, kind, _) in &entries {
                    if *kind != Kind::Dir {
                        continue;
                    }
                    let (path, ok) = join(name);
                    l.descend.push(Child {
                        name: name.clone(),
                        rel: path,
                        exact: ok,
                        role,
                    });
                }
            }
        }
        l.file_inos.sort_unstable();
        Ok(l)
    }

    /// Add to `plan.secret_files` the other names of deny-listed files: the regular files whose
    /// `d_ino` (kept from the listings, no system call) is a secret's inode number, confirmed by
    /// one `fstatat` of each candidate (same device and inode). Only directories holding a
    /// candidate are read again.
    fn linked_names(
        &self,
        root_fd: &OwnedFd,
        root: Option<&Node>,
        plan: &mut Plan,
        unnamable: &mut Vec<String>,
    ) -> Result<(), String> {
        let Some(root) = root else { return Ok(()) };
        let mut inos: Vec<u64> = plan.secret_inodes.iter().map(|s| s.ino).collect();
        if inos.is_empty() {
            return Ok(());
        }
        inos.sort_unstable();
        inos.dedup();
        plan.secret_inodes.sort();
        let mut stack: Vec<(&Node, String, bool)> = vec![(root, String::new(), true)];
        while let Some((node, rel, exact)) = stack.pop() {
            for (child, slot) in node.listing.descend.iter().zip(&node.children) {
                if let (Some(n), Role::Tree) = (slot, child.role) {
                    stack.push((n, child.rel.clone(), child.exact));
                }
            }
            let hit = node
                .listing
                .file_inos
                .iter()
                .any(|i| inos.binary_search(i).is_ok());
            if !hit {
                continue;
            }
            let here = if rel.is_empty() { "." } else { rel.as_str() };
            let cannot = |e: Errno| {
                format!(
                    "cannot look for hard links to secrets in `{here}` of the workspace {}: {e}",
                    self.workspace.display()
                )
            };
            let fd = match rustix::fs::openat2(
                root_fd,
                here,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_SYMLINKS,
            ) {
                Ok(fd) => fd,
                // Gone or swapped for a symlink since it was listed: its names are gone too.
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP | Errno::XDEV) => continue,
                Err(e) => return Err(cannot(e)),
            };
            let mut dir = Dir::new(fd).map_err(cannot)?;
            while let Some(entry) = dir.read() {
                let entry = entry.map_err(cannot)?;
                if inos.binary_search(&entry.ino()).is_err() {
                    continue;
                }
                let name = entry.file_name();
                let Ok(st) = statat(dir.fd().map_err(cannot)?, name, AtFlags::SYMLINK_NOFOLLOW)
                else {
                    continue;
                };
                if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                    continue;
                }
                let id = inode_of(&st, String::new());
                if plan.linked_secret(id.dev, id.ino).is_none() {
                    continue;
                }
                let part = String::from_utf8_lossy(name.to_bytes()).into_owned();
                let path = if rel.is_empty() {
                    part
                } else {
                    format!("{rel}/{part}")
                };
                if exact && std::str::from_utf8(name.to_bytes()).is_ok() {
                    plan.secret_files.push(path);
                } else {
                    unnamable.push(path);
                }
            }
        }
        Ok(())
    }
}

enum WalkError {
    /// Permission denied: the caller hides the directory whole.
    Unreadable,
    /// Any other failure, with the workspace-relative path.
    Io(Errno, String),
    /// A bound of the walk was passed: the whole message.
    Bound(String),
}

enum ReadError {
    Io(Errno),
    TooMany,
}

impl From<Errno> for ReadError {
    fn from(e: Errno) -> Self {
        ReadError::Io(e)
    }
}

/// Hide an unreadable directory whole (see the module docs).
fn unreadable(acc: &mut Acc, child: &Child) {
    if child.exact {
        acc.plan.secret_dirs.push(child.rel.clone());
    } else {
        acc.unnamable.push(child.rel.clone());
    }
    acc.unreadable.push(child.rel.clone());
}

/// Open a subdirectory for a visit: `O_PATH` (nothing is read through it), `O_DIRECTORY` and
/// `O_NOFOLLOW`, so a symlink or anything not a directory is refused.
fn open_child(parent: BorrowedFd<'_>, name: &[u8]) -> Result<OwnedFd, Errno> {
    openat(
        parent,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn kind_of(t: FileType) -> Option<Kind> {
    Some(match t {
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Link,
        FileType::RegularFile => Kind::File,
        FileType::Unknown => return None,
        _ => Kind::Other,
    })
}

fn stat_kind(dir: BorrowedFd<'_>, name: &CStr) -> Result<Kind, Errno> {
    let st = statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(kind_of(FileType::from_raw_mode(st.st_mode)).unwrap_or(Kind::Other))
}

/// Whether a directory under `modules/` is a git dir.
fn is_git_dir(entries: &[(Vec<u8>, Kind, u64)]) -> bool {
    entries
        .iter()
        .any(|(n, _, _)| n == b"HEAD" || n == b"config" || n == b"objects")
}

// The `Stat` field types differ between architectures.
#[allow(clippy::unnecessary_cast)]
fn inode_of(st: &rustix::fs::Stat, path: String) -> SecretInode {
    SecretInode {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        path,
    }
}

// The `Stat` field types differ between architectures.
#[allow(clippy::unnecessary_cast)]
fn dir_key(st: &rustix::fs::Stat) -> DirKey {
    DirKey {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        mtime: i128::from(st.st_mtime as i64) * 1_000_000_000 + i128::from(st.st_mtime_nsec as i64),
        ctime: i128::from(st.st_ctime as i64) * 1_000_000_000 + i128::from(st.st_ctime_nsec as i64),
    }
}

/// Whether a change after `read_at` could leave the directory's timestamps as they are.
fn is_racy(key: &DirKey, read_at: SystemTime, window: Duration) -> bool {
    let read_at = match read_at.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(_) => return true,
    };
    key.mtime.max(key.ctime) + window.as_nanos() as i128 >= read_at
}

fn add(plan: &mut Plan, unnamable: &mut Vec<String>, l: &Listing) {
    plan.secret_files.extend_from_slice(&l.secret_files);
    plan.secret_dirs.extend_from_slice(&l.secret_dirs);
    plan.git_dirs.extend_from_slice(&l.git_dirs);
    plan.git_readonly.extend_from_slice(&l.git_readonly);
    plan.git_files.extend_from_slice(&l.git_files);
    plan.git_unprotected.extend_from_slice(&l.git_unprotected);
    plan.secret_inodes.extend_from_slice(&l.secret_inodes);
    unnamable.extend_from_slice(&l.unnamable);
}

/// Sort, deduplicate and derive the pinned directories.
fn finish(plan: &mut Plan) {
    for list in [
        &mut plan.secret_files,
        &mut plan.secret_dirs,
        &mut plan.git_dirs,
        &mut plan.git_readonly,
        &mut plan.git_files,
        &mut plan.git_unprotected,
    ] {
        list.sort();
        list.dedup();
    }
    plan.secret_inodes.sort();
    plan.secret_inodes.dedup();
    let git: BTreeSet<&str> = plan.git_dirs.iter().map(String::as_str).collect();
    let mut pinned = BTreeSet::new();
    for path in plan.git_dirs.iter().chain(&plan.git_files) {
        let mut at = path.as_str();
        while let Some(i) = at.rfind('/') {
            at = &at[..i];
            if !git.contains(at) {
                pinned.insert(at.to_string());
            }
        }
    }
    plan.pinned_dirs = pinned.into_iter().collect();
}

/// The fail-closed message past [`MAX_MOUNTS`].
fn too_many(plan: &Plan, mounts: usize, max: usize) -> String {
    let mut by_dir: BTreeMap<&str, usize> = BTreeMap::new();
    for path in plan.secret_files.iter().chain(&plan.secret_dirs) {
        let parent = path.rfind('/').map_or(".", |i| &path[..i]);
        *by_dir.entry(parent).or_default() += 1;
    }
    let most = by_dir
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(dir, n)| {
            format!(
                "; the most are in `{dir}` ({n}): add that directory to `secrets` in .toolgate/policy.toml so one mask hides it whole, or remove the files"
            )
        })
        .unwrap_or_default();
    format!(
        "the workspace needs {mounts} masks to hide its secrets and freeze its git directories from the shell ({} deny-listed files, {} deny-listed directories, {} git directories, {} git config entries, {} git files, {} pinned directories), more than the {max} one command may have, so the command was not run{most}",
        plan.secret_files.len(),
        plan.secret_dirs.len(),
        plan.git_dirs.len(),
        plan.git_readonly.len(),
        plan.git_files.len(),
        plan.pinned_dirs.len(),
    )
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
