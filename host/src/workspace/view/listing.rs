//! Reading one directory: its entries classified by what the directory is (the working tree,
//! a git directory, git's `modules/` and `worktrees/`, or the inside of a secret directory).

use super::plan::SecretInode;
use crate::workspace::STATE_DIR;
use rustix::fs::{statat, AtFlags, Dir, FileType};
use rustix::io::Errno;
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd};

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

/// How a directory is looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Role {
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
pub(super) struct Child {
    pub(super) name: Vec<u8>,
    pub(super) rel: String,
    /// Whether `rel` is the exact path (every component valid UTF-8).
    pub(super) exact: bool,
    pub(super) role: Role,
}

/// What one directory's entries yield.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Listing {
    pub(super) entries: usize,
    pub(super) secret_files: Vec<String>,
    pub(super) secret_dirs: Vec<String>,
    pub(super) git_dirs: Vec<String>,
    pub(super) git_readonly: Vec<String>,
    pub(super) git_files: Vec<String>,
    pub(super) git_unprotected: Vec<String>,
    /// Paths that must be masked but cannot be named as a `String` (not valid UTF-8).
    pub(super) unnamable: Vec<String>,
    pub(super) descend: Vec<Child>,
    /// The deny-listed non-directories' identities (one `fstatat` each when read).
    pub(super) secret_inodes: Vec<SecretInode>,
    /// The inode numbers (`d_ino`, no system call) of the other regular files, sorted: where a
    /// second name of a secret could be.
    pub(super) file_inos: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    Link,
    File,
    /// FIFOs, sockets, devices.
    Other,
}

impl super::Finder {
    /// Read a directory's entries and classify them for `role`.
    pub(super) fn read(
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
}

/// Why a directory could not be read.
pub(super) enum ReadError {
    Io(Errno),
    TooMany,
}

impl From<Errno> for ReadError {
    fn from(e: Errno) -> Self {
        ReadError::Io(e)
    }
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
pub(super) fn inode_of(st: &rustix::fs::Stat, path: String) -> SecretInode {
    SecretInode {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        path,
    }
}
