//! The plan a walk yields (what a command's mount namespace must hide or freeze), its
//! assembly once the walk is done, and the fail-closed message past the mount bound.

use std::collections::{BTreeMap, BTreeSet};

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
    /// Inside each git dir, the existing entries of [`GIT_READONLY`](super::GIT_READONLY) (not
    /// symlinks): each is bound read-only.
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
    /// Entries of [`GIT_READONLY`](super::GIT_READONLY) a bind cannot freeze: absent ones (the
    /// command could create them; `commondir` is absent in every main repository and would
    /// redirect git to a planted `config`) and symlinks (a bind would land on the target, the link
    /// stays replaceable). Not mounts: the mount code decides (create `hooks`/an empty `config`
    /// beforehand, check after the command that none appeared or changed).
    pub git_unprotected: Vec<String>,
    /// The (device, inode) of every deny-listed non-directory in the workspace (files inside
    /// deny-listed directories included), sorted by (device, inode): a file with more than one
    /// link whose inode is here is a second name of a secret. Not mounts: the file tools ask
    /// [`Plan::linked_secret`], and the names found linking to them are in `secret_files`.
    #[serde(default)]
    pub secret_inodes: Vec<SecretInode>,
    /// The (device, inode) of every deny-listed directory and every directory inside one,
    /// sorted: a directory reached under another name (exchanged with `renameat2`, renamed) is
    /// still the secret. Not mounts: the file tools ask [`Plan::secret_identity`].
    #[serde(default)]
    pub secret_dir_inodes: Vec<SecretInode>,
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
        find(&self.secret_inodes, dev, ino)
    }

    /// The deny-listed directory whose identity `(dev, ino)` is, if any.
    pub fn secret_dir(&self, dev: u64, ino: u64) -> Option<&str> {
        find(&self.secret_dir_inodes, dev, ino)
    }

    /// The deny-listed file or directory (by [`Plan::linked_secret`] or [`Plan::secret_dir`])
    /// whose identity `(dev, ino)` is, whatever its name now.
    pub fn secret_identity(&self, dev: u64, ino: u64, is_dir: bool) -> Option<&str> {
        if is_dir {
            self.secret_dir(dev, ino)
        } else {
            self.linked_secret(dev, ino)
        }
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

/// The entry of a sorted identity list with identity `(dev, ino)`.
fn find(list: &[SecretInode], dev: u64, ino: u64) -> Option<&str> {
    let i = list.partition_point(|s| (s.dev, s.ino) < (dev, ino));
    list.get(i)
        .filter(|s| (s.dev, s.ino) == (dev, ino))
        .map(|s| s.path.as_str())
}

/// What the last [`Finder::plan`](super::Finder::plan) did, for logs and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Directories opened and `fstat`ed.
    pub dirs_visited: usize,
    /// Directories whose entries were read (new, changed or racy ones).
    pub dirs_read: usize,
    /// Directory entries the plan accounts for (read now or reused from the cache).
    pub entries: usize,
}

/// Sort, deduplicate and derive the pinned directories.
pub(super) fn finish(plan: &mut Plan) {
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
    plan.secret_dir_inodes.sort();
    plan.secret_dir_inodes.dedup();
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

/// The fail-closed message past [`MAX_MOUNTS`](super::MAX_MOUNTS).
pub(super) fn too_many(plan: &Plan, mounts: usize, max: usize) -> String {
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
