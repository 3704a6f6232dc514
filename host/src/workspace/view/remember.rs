//! Secrets by identity across plans: a deny-listed file or directory seen once keeps being a
//! secret under any later name, for as long as it exists.
//!
//! A plan derives which objects are secrets from their names at the moment it reads their
//! directory. A process outside the host that exchanges a secret directory with a plain one
//! (`renameat2(RENAME_EXCHANGE)` in a loop) makes a later plan see the secret under the plain
//! name and the plain directory under the secret's, so names alone would flip. The finder
//! therefore remembers every identity (device, inode) it has seen under a deny-listed name and
//! adds the remembered ones to every later plan. The plain directory seen under the secret's
//! name stays refused too (fail closed: it was, for a while, the secret's name).
//!
//! Each remembered object is held by an `O_PATH` descriptor (its *anchor*): while it is held the
//! inode cannot be freed, so its number is never reused for another file, and the object is
//! forgotten exactly when it is deleted (its link count is 0). Whether it is still somewhere in
//! the workspace cannot be told from a walk: a walk racing the exchanges can miss it. An object
//! that could not be anchored (moved between its listing and the anchoring open) is kept until
//! the host stops. At most [`MAX_REMEMBERED`] objects are remembered, directories first; past
//! that, a secret is a secret by identity only while a plan finds it under its own name.

use super::plan::{Plan, SecretInode};
use rustix::fs::{fstat, Mode, OFlags, ResolveFlags};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};

/// Most identities remembered (one descriptor each): directories, then files.
pub(super) const MAX_REMEMBERED: usize = 256;

/// One remembered secret.
#[derive(Debug)]
pub(super) struct Remembered {
    /// The path it was a secret at.
    path: String,
    dir: bool,
    /// Held while it exists (see the module docs); `None` when it could not be opened as the
    /// object the plan named.
    anchor: Option<OwnedFd>,
}

/// Identity -> the remembered secret.
pub(super) type Memory = BTreeMap<(u64, u64), Remembered>;

/// Forget the remembered objects that were deleted, remember `plan`'s secret identities (as
/// room allows), and add the remembered ones the plan does not have to it. `root` is the
/// workspace root's descriptor, the anchors are opened below it.
pub(super) fn remember(memory: &mut Memory, plan: &mut Plan, root: &OwnedFd) {
    memory.retain(|_, r| match &r.anchor {
        Some(fd) => fstat(fd).map_or(true, |st| st.st_nlink > 0),
        None => true,
    });
    let current: HashSet<(u64, u64)> = plan
        .secret_inodes
        .iter()
        .chain(&plan.secret_dir_inodes)
        .map(|s| (s.dev, s.ino))
        .collect();
    for (list, dir) in [
        (&plan.secret_dir_inodes, true),
        (&plan.secret_inodes, false),
    ] {
        for s in list {
            let id = (s.dev, s.ino);
            let room = memory.len() < MAX_REMEMBERED;
            match memory.entry(id) {
                Entry::Occupied(mut o) => {
                    if o.get().anchor.is_none() {
                        o.get_mut().anchor = anchor(root, s);
                    }
                }
                Entry::Vacant(v) if room => {
                    v.insert(Remembered {
                        path: s.path.clone(),
                        dir,
                        anchor: anchor(root, s),
                    });
                }
                Entry::Vacant(_) => {}
            }
        }
    }
    for (&(dev, ino), r) in memory.iter() {
        if current.contains(&(dev, ino)) {
            continue;
        }
        let entry = SecretInode {
            dev,
            ino,
            path: r.path.clone(),
        };
        if r.dir {
            plan.secret_dir_inodes.push(entry);
        } else {
            plan.secret_inodes.push(entry);
        }
    }
}

/// An `O_PATH` descriptor of `s`, when its path (below `root`, no symlinks) still is it.
#[allow(clippy::unnecessary_cast)]
fn anchor(root: &OwnedFd, s: &SecretInode) -> Option<OwnedFd> {
    let fd = rustix::fs::openat2(
        root.as_fd(),
        s.path.as_str(),
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    )
    .ok()?;
    let st = fstat(&fd).ok()?;
    (st.st_dev as u64 == s.dev && st.st_ino as u64 == s.ino).then_some(fd)
}
