//! Ignore files: `.ignore` and `.gitignore` read through their directory's descriptor where
//! the guest could read them too, compiled in chunks within the walk's pattern budget.

use super::listing::{real_path, Child, DirFd};
use super::WalkScope;
use crate::workspace::Access;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use rustix::fd::{AsFd as _, BorrowedFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Larger ignore files are skipped (and counted as an error).
const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;
/// Patterns compiled at a time: the deadline and cancellation are checked between chunks (a
/// compiled chunk is one matcher; a file of many chunks matches as one, the last match wins).
pub(super) const IGNORE_CHUNK: usize = 1024;
/// Host memory a compiled ignore pattern costs, per byte of its text (measured: ~360 for
/// patterns globset compiles to regexes, such as `dir-1/**/*.gen-1`; see the lib test
/// `ignore_memory_per_byte`). The walk's byte budget keeps the compiled patterns within a
/// quarter of the call's memory limit (512 MiB: ~370 KB of patterns).
const IGNORE_MEMORY_PER_BYTE: usize = 360;

/// One ignore file's patterns, compiled in chunks (in file order).
#[derive(Default, Clone)]
pub(super) struct Matcher(Vec<Gitignore>);

impl Matcher {
    /// Whether it has no patterns (it then matches nothing).
    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().all(|g| g.is_empty())
    }

    /// The file's verdict: the last matching pattern's.
    pub(super) fn matched(&self, path: &Path, is_dir: bool) -> Match<()> {
        for chunk in self.0.iter().rev() {
            match chunk.matched(path, is_dir) {
                Match::None => {}
                Match::Ignore(_) => return Match::Ignore(()),
                Match::Whitelist(_) => return Match::Whitelist(()),
            }
        }
        Match::None
    }
}

/// What a walk may still spend on ignore files.
pub(super) struct Budget {
    patterns: usize,
    bytes: usize,
    deadline: Option<Instant>,
}

impl Budget {
    pub(super) fn new(scope: &WalkScope) -> Self {
        Budget {
            patterns: scope.ignore_patterns,
            bytes: scope
                .ignore_bytes
                .min(scope.memory_bytes / 4 / IGNORE_MEMORY_PER_BYTE),
            deadline: scope.deadline,
        }
    }

    pub(super) fn late(&self, cancel: Option<&std::sync::atomic::AtomicBool>) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
            || cancel.is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// Where an ignore file is looked for.
pub(super) struct IgnoreAt<'a> {
    pub(super) dir: BorrowedFd<'a>,
    pub(super) dev: u64,
    pub(super) host: &'a Path,
    pub(super) real_rel: Option<&'a str>,
    pub(super) name: &'a str,
    /// The inode the directory's listing gave it (`None` for the start's parents, which are
    /// opened without a listing).
    pub(super) ino: Option<u64>,
}

impl WalkScope {
    /// The `.ignore` and `.gitignore` matchers of the directory open as `dir`, whose entries
    /// are `children` (only names present there are looked at).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ignore_files(
        &self,
        dir: &DirFd,
        dev: u64,
        host: &Path,
        real_rel: Option<&str>,
        children: &[Child],
        errors: &mut u32,
        budget: &mut Budget,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> (Matcher, Matcher) {
        let mut read = |name: &str| match children.binary_search_by(|c| c.name.as_str().cmp(name)) {
            Ok(i) => self.ignore_file(
                IgnoreAt {
                    dir: dir.as_fd(),
                    dev,
                    host,
                    real_rel,
                    name,
                    ino: Some(children[i].ino),
                },
                errors,
                budget,
                cancel,
            ),
            Err(_) => Matcher::default(),
        };
        (read(".ignore"), read(".gitignore"))
    }

    /// One ignore file's matcher, read only when the guest could read it too: a regular file
    /// (or a symlink to one) inside a preopen, not denied, not too large; and only as much of
    /// it as the walk's budget still allows.
    pub(super) fn ignore_file(
        &self,
        at: IgnoreAt<'_>,
        errors: &mut u32,
        budget: &mut Budget,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Matcher {
        let path = at.host.join(at.name);
        let shown = match at.real_rel {
            Some("") => at.name.to_string(),
            Some(rel) => format!("{rel}/{}", at.name),
            None => path.display().to_string(),
        };
        let Some(file) = self.open_ignore_file(&at, &path, &shown) else {
            return Matcher::default();
        };
        let Ok(stat) = rustix::fs::fstat(&file) else {
            return Matcher::default();
        };
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if size > MAX_IGNORE_FILE_BYTES {
            *errors += 1;
            return Matcher::default();
        }
        if budget.patterns == 0 || budget.bytes == 0 || budget.late(cancel) {
            self.cut(shown);
            return Matcher::default();
        }
        let mut text = Vec::new();
        {
            use std::io::Read as _;
            let mut file = std::fs::File::from(file);
            if (&mut file)
                .take(MAX_IGNORE_FILE_BYTES + 1)
                .read_to_end(&mut text)
                .is_err()
                || text.len() as u64 > MAX_IGNORE_FILE_BYTES
            {
                *errors += 1;
                return Matcher::default();
            }
        }
        let text = String::from_utf8_lossy(&text);
        let mut chunks = Vec::new();
        let mut builder = GitignoreBuilder::new(at.host);
        let mut in_chunk = 0usize;
        let mut cut = false;
        for (i, line) in text.lines().enumerate() {
            let line = if i == 0 {
                line.trim_start_matches('\u{feff}')
            } else {
                line
            };
            let pattern = !line.trim().is_empty() && !line.starts_with('#');
            if !pattern {
                continue;
            }
            if budget.patterns == 0 || line.len() + 1 > budget.bytes {
                cut = true;
                break;
            }
            budget.patterns -= 1;
            budget.bytes -= line.len() + 1;
            if builder.add_line(Some(path.clone()), line).is_err() {
                *errors += 1;
            }
            in_chunk += 1;
            if in_chunk == IGNORE_CHUNK {
                chunks.push(builder.build().unwrap_or_else(|_| {
                    *errors += 1;
                    Gitignore::empty()
                }));
                builder = GitignoreBuilder::new(at.host);
                in_chunk = 0;
                if budget.late(cancel) {
                    cut = true;
                    break;
                }
            }
        }
        if in_chunk > 0 {
            chunks.push(builder.build().unwrap_or_else(|_| {
                *errors += 1;
                Gitignore::empty()
            }));
        }
        if cut {
            self.cut(shown);
        }
        Matcher(chunks)
    }

    /// Open an ignore file through its directory's descriptor without blocking: the listed
    /// file itself (a regular file, not denied); or, for a symlink, what it leads to when that
    /// is a regular file whose real path is inside a preopen and not denied.
    #[allow(clippy::unnecessary_cast)]
    fn open_ignore_file(&self, at: &IgnoreAt<'_>, path: &Path, shown: &str) -> Option<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        match rustix::fs::openat(at.dir, at.name, flags | OFlags::NOFOLLOW, Mode::empty()) {
            Ok(fd) => {
                let stat = rustix::fs::fstat(&fd).ok()?;
                if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                    return None;
                }
                // Not what the listing named (swapped since): not read.
                if at
                    .ino
                    .is_some_and(|ino| stat.st_dev as u64 == at.dev && stat.st_ino as u64 != ino)
                {
                    return None;
                }
                let allowed = match (&self.deny, at.real_rel) {
                    (Some(deny), Some(_)) => !deny.denied(shown, 0, Access::Read),
                    (Some(_), None) => false,
                    (None, _) => true,
                };
                allowed.then_some(fd)
            }
            Err(rustix::io::Errno::LOOP) => {
                // A symlink: judged by what was opened, so a swap cannot make the host read
                // elsewhere.
                let fd = rustix::fs::openat(at.dir, at.name, flags, Mode::empty()).ok()?;
                let stat = rustix::fs::fstat(&fd).ok()?;
                if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                    return None;
                }
                let real = real_path(&fd, path)?;
                let inside = self.preopens.iter().any(|p| real.starts_with(&p.host));
                let allowed = inside
                    && match &self.deny {
                        Some(deny) => real
                            .strip_prefix(deny.host_root())
                            .ok()
                            .and_then(Path::to_str)
                            .is_some_and(|rel| !deny.denied(rel, 0, Access::Read)),
                        None => true,
                    };
                allowed.then_some(fd)
            }
            Err(_) => None,
        }
    }

    /// Note that `shown`'s patterns were cut (once per call).
    fn cut(&self, shown: String) {
        if let Ok(mut cut) = self.cut.lock() {
            if !cut.contains(&shown) && cut.len() < 64 {
                cut.push(shown);
            }
        }
    }
}
