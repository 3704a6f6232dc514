//! Second names of secrets: the regular files whose inode is a deny-listed file's, found from
//! the cached listings and confirmed with one `fstatat` each.

use super::listing::{inode_of, Role};
use super::plan::Plan;
use super::walk::Node;
use rustix::fs::{statat, AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::os::fd::OwnedFd;

impl super::Finder {
    /// Add to `plan.secret_files` the other names of deny-listed files: the regular files whose
    /// `d_ino` (kept from the listings, no system call) is a secret's inode number, confirmed by
    /// one `fstatat` of each candidate (same device and inode). Only directories holding a
    /// candidate are read again.
    pub(super) fn linked_names(
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
