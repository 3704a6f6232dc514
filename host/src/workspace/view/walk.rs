//! The walk over the workspace and its per-directory cache: each directory is opened below its
//! parent without following symlinks, and read again only when its key changed or was racy.

use super::listing::{Child, Listing, ReadError, Role};
use super::plan::{Plan, SecretInode, WalkStats};
use rustix::fs::{fstat, openat, statat, AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What identifies one state of a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DirKey {
    dev: u64,
    ino: u64,
    mtime: i128,
    ctime: i128,
}

/// One cached directory.
pub(super) struct Node {
    key: DirKey,
    /// Read too close to its last change to trust the key next time.
    racy: bool,
    pub(super) listing: Listing,
    /// The cached subdirectories, one slot per `listing.descend` entry.
    pub(super) children: Vec<Option<Node>>,
}

/// The plan being assembled by one walk.
#[derive(Default)]
pub(super) struct Acc {
    pub(super) plan: Plan,
    pub(super) unnamable: Vec<String>,
    pub(super) stats: WalkStats,
    pub(super) unreadable: Vec<String>,
}

impl Acc {
    /// Keep a visited directory's identity when it is a secret's.
    fn visited(&mut self, key: &DirKey, rel: &str, role: Role) {
        if role == Role::Secret {
            self.plan.secret_dir_inodes.push(SecretInode {
                dev: key.dev,
                ino: key.ino,
                path: rel.to_string(),
            });
        }
    }
}

impl super::Finder {
    /// Walk the directory open as `dir` (workspace-relative `rel`), reusing `node` when its key
    /// is unchanged, and add what it and its subdirectories yield to `acc`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk(
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
        acc.visited(&key, rel, role);
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
                        acc.visited(&leaf.key, &child.rel, child.role);
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
}

/// Why a walk stopped.
pub(super) enum WalkError {
    /// Permission denied: the caller hides the directory whole.
    Unreadable,
    /// Any other failure, with the workspace-relative path.
    Io(Errno, String),
    /// A bound of the walk was passed: the whole message.
    Bound(String),
}

/// Hide an unreadable directory whole (see the `view` module docs).
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
pub(super) fn open_child(parent: BorrowedFd<'_>, name: &[u8]) -> Result<OwnedFd, Errno> {
    openat(
        parent,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
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

/// Add what one directory's listing yields to the plan being assembled.
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
