//! The walk itself: a [`Walker`] goes down from the start one listed directory at a time,
//! depth first, applying the default ignores, the caller's globs, the deny-list and ignore files.

use super::ignores::{Budget, IgnoreAt, Matcher};
use super::listing::{fstat_dev, open_listed_dir, open_root, read_children, Child, DirFd, Kind};
use super::start::Start;
use super::{WalkScope, DEFAULT_IGNORES};
use crate::workspace::{Access, LinkSnapshot};
use ignore::Match;
use rustix::fd::AsFd as _;
use rustix::fs::{Mode, OFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Directories the start must have for a walk to be split over two threads.
const SPLIT_DIRS: usize = 8;

/// One directory being listed.
struct Dir {
    fd: DirFd,
    /// Its filesystem (an opened child on another one is a mount point, not a swap).
    dev: u64,
    host: PathBuf,
    /// Path relative to the start (`""` for the start).
    sub: String,
    /// Real workspace-relative path (for the deny-list).
    real_rel: Option<String>,
    depth: u32,
    children: Vec<Child>,
    next: usize,
    ignore: Matcher,
    gitignore: Matcher,
    /// Whether this directory lies on the resume point's path (its children up to the
    /// resume point were returned already).
    on_resume: bool,
    /// Whether its or an ancestor's ignore files (or the start's parents') have patterns: if
    /// not, its entries need no matching and no host path.
    rules: bool,
}

/// One entry a [`Walker`] found.
pub(crate) struct Found {
    /// Path relative to the start, `/`-separated.
    pub(crate) sub: String,
    /// The directory it was listed in (open it with `openat` on this, never by path).
    pub(crate) dir: DirFd,
    /// Where its name in `dir` starts in `sub` ([`Found::name`]).
    name_at: usize,
    /// The inode the listing gave: an open of `name` must find this one.
    pub(crate) ino: u64,
    /// The filesystem of `dir`.
    pub(crate) dev: u64,
    pub(crate) is_dir: bool,
    /// Level below the start (the start's own entries are 1).
    pub(crate) depth: u32,
}

impl Found {
    /// Its name in [`Found::dir`].
    pub(crate) fn name(&self) -> &str {
        &self.sub[self.name_at..]
    }
}

/// How a [`Walker`] walks (the WIT `options` without the paging).
#[derive(Default, Clone)]
pub(crate) struct WalkOptions {
    pub(crate) max_depth: Option<u32>,
    pub(crate) ignore: Vec<String>,
    pub(crate) no_ignore_files: bool,
    /// Entries up to and including this path (relative to the start) are not returned.
    pub(crate) resume: Option<String>,
}

/// A walk in progress, one entry at a time (depth first, names in byte order).
pub(crate) struct Walker {
    scope: WalkScope,
    start: Start,
    extra: Option<globset::GlobSet>,
    resume: Vec<String>,
    options: WalkOptions,
    /// Ignore matchers of the start's parents inside a preopen, outermost first.
    parents: Vec<(Matcher, Matcher)>,
    stack: Vec<Dir>,
    /// Directories and ignore files that could not be read so far (and names that no longer
    /// were what the listing named when opened).
    pub(crate) errors: u32,
    /// Shared with a walker split off this one ([`Walker::split`]): one budget for the walk.
    budget: Arc<std::sync::Mutex<Budget>>,
    real_buf: String,
    listing_buf: Vec<std::mem::MaybeUninit<u8>>,
    visited: usize,
    /// Where the secrets are (their identities), looked up when the walk starts: a directory
    /// or file whose identity is a secret's is skipped under any name.
    ids: LinkSnapshot,
}

impl Walker {
    /// Start walking below `start` (a guest path), or say why it cannot be walked.
    #[cfg(test)]
    pub(crate) fn new(scope: WalkScope, start: &str, options: WalkOptions) -> Result<Self, String> {
        Self::new_cancellable(scope, start, options, None)
    }

    /// [`Walker::new`], stopping the ignore files' compilation when `cancel` is set.
    #[allow(clippy::unnecessary_cast)]
    pub(crate) fn new_cancellable(
        scope: WalkScope,
        start: &str,
        options: WalkOptions,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<Self, String> {
        let start = scope.resolve(start)?;
        let extra = toolgate_walk_rules::extra_globs(&options.ignore);
        let resume: Vec<String> = options
            .resume
            .as_deref()
            .map(|r| {
                r.split('/')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let mut errors = 0u32;
        let mut budget = Budget::new(&scope);
        let mut ids = match &scope.deny {
            Some(deny) => deny.snapshot(),
            None => LinkSnapshot::default(),
        };
        let use_ignore_files = !options.no_ignore_files;
        let cannot = |e: std::io::Error| {
            format!(
                "{} could not be listed: {e}",
                display_rel(&start.lexical_rel)
            )
        };
        // Down from the outermost preopen's root to the start, one component at a time and
        // never through a symlink, reading the parents' ignore files on the way.
        let mut fd = open_root(&start.top).map_err(cannot)?;
        let mut host = start.top.clone();
        let mut parents: Vec<(Matcher, Matcher)> = Vec::new();
        let below: Vec<String> = start
            .host
            .strip_prefix(&start.top)
            .unwrap_or(Path::new(""))
            .components()
            .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
            .collect();
        for part in &below {
            if use_ignore_files {
                let real = scope.real_rel_of(&host);
                let dev = fstat_dev(&fd);
                let mut read = |name: &str| {
                    scope.ignore_file(
                        IgnoreAt {
                            dir: fd.as_fd(),
                            dev,
                            host: &host,
                            real_rel: real.as_deref(),
                            name,
                            ino: None,
                        },
                        &mut errors,
                        &mut budget,
                        cancel,
                    )
                };
                parents.push((read(".ignore"), read(".gitignore")));
            }
            fd = rustix::fs::openat(
                &fd,
                part.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| cannot(e.into()))?;
            host.push(part);
            secret_start(&scope, &mut ids, &fd, &start.lexical_rel)?;
        }
        let stat = rustix::fs::fstat(&fd).map_err(|e| cannot(e.into()))?;
        let dev = stat.st_dev as u64;
        let mut listing_buf = Vec::new();
        let children = read_children(fd.as_fd(), &mut listing_buf, &mut errors).map_err(cannot)?;
        let fd: DirFd = Arc::new(fd);
        let (ignore, gitignore) = if use_ignore_files {
            scope.ignore_files(
                &fd,
                dev,
                &start.host,
                start.real_rel.as_deref(),
                &children,
                &mut errors,
                &mut budget,
                cancel,
            )
        } else {
            (Matcher::default(), Matcher::default())
        };
        let rules = !(ignore.is_empty() && gitignore.is_empty())
            || parents.iter().any(|(i, g)| !(i.is_empty() && g.is_empty()));
        let stack = vec![Dir {
            fd,
            dev,
            rules,
            ignore,
            gitignore,
            host: start.host.clone(),
            sub: String::new(),
            real_rel: start.real_rel.clone(),
            depth: 0,
            children,
            next: 0,
            on_resume: !resume.is_empty(),
        }];
        if !resume.is_empty() {
            // The start and its parents were read by the page that began the walk, which
            // counted what could not be read there.
            errors = 0;
        }
        Ok(Walker {
            scope,
            start,
            extra,
            resume,
            options,
            parents,
            stack,
            errors,
            budget: Arc::new(std::sync::Mutex::new(budget)),
            real_buf: String::new(),
            listing_buf,
            visited: 0,
            ids,
        })
    }

    /// Split a fresh walk into up to `parts` consecutive parts of its order, for more than one
    /// thread: this walker keeps the start's entries before the first cut, each returned one
    /// the next range (cut before one of the start's directories, so each part's entries all
    /// come after the previous part's). None when the walk is resumed, does not go below the
    /// start's own entries, or the start has fewer than [`SPLIT_DIRS`] directories to enter.
    pub(crate) fn split(&mut self, parts: usize) -> Vec<Walker> {
        if !self.resume.is_empty() || self.options.max_depth.is_some_and(|d| d < 2) {
            return Vec::new();
        }
        let [top] = self.stack.as_mut_slice() else {
            return Vec::new();
        };
        if top.next != 0 {
            return Vec::new();
        }
        let dirs: Vec<usize> = (top.children.iter().enumerate())
            .filter(|(_, c)| c.kind == Kind::Dir && !DEFAULT_IGNORES.contains(&c.name.as_str()))
            .map(|(i, _)| i)
            .collect();
        if dirs.len() < SPLIT_DIRS || parts < 2 {
            return Vec::new();
        }
        let parts = parts.min(dirs.len() / 2);
        let mut cuts: Vec<usize> = (1..parts).map(|k| dirs[k * dirs.len() / parts]).collect();
        cuts.dedup();
        let mut later = Vec::with_capacity(cuts.len());
        // From the last cut back, so each split-off range is the tail at that point.
        for &at in cuts.iter().rev() {
            let theirs = Dir {
                fd: top.fd.clone(),
                dev: top.dev,
                host: top.host.clone(),
                sub: top.sub.clone(),
                real_rel: top.real_rel.clone(),
                depth: top.depth,
                children: top.children.split_off(at),
                next: 0,
                ignore: top.ignore.clone(),
                gitignore: top.gitignore.clone(),
                on_resume: false,
                rules: top.rules,
            };
            // The same walk from the same start, with the same rules and one ignore budget;
            // what the start's listing and ignore files cost was counted here.
            later.push(Walker {
                scope: self.scope.clone(),
                start: self.start.clone(),
                extra: self.extra.clone(),
                resume: Vec::new(),
                options: self.options.clone(),
                parents: self.parents.clone(),
                stack: vec![theirs],
                errors: 0,
                budget: self.budget.clone(),
                real_buf: String::new(),
                listing_buf: Vec::new(),
                visited: 0,
                ids: self.ids.clone(),
            });
        }
        later.reverse();
        later
    }

    /// Whether entries are left after the last one returned.
    pub(crate) fn more(&self) -> bool {
        self.stack.iter().any(|d| d.next < d.children.len())
    }

    /// The next entry, `None` at the end; an error when `cancel` was set.
    #[allow(clippy::unnecessary_cast)]
    pub(crate) fn next(
        &mut self,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<Option<Found>, String> {
        let use_ignore_files = !self.options.no_ignore_files;
        while let Some(top) = self.stack.last_mut() {
            // Each child is visited once: its name is taken, not copied.
            let Some(child) = top.children.get_mut(top.next) else {
                self.stack.pop();
                continue;
            };
            let (name, kind, ino) = (std::mem::take(&mut child.name), child.kind, child.ino);
            top.next += 1;
            let top = &*top;
            let depth = top.depth + 1;
            self.visited += 1;
            if self.visited.is_multiple_of(1024)
                && cancel.is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err("the call was cancelled".to_string());
            }
            // Where the entry stands relative to the resume point.
            let mut emit = true;
            let mut child_on_resume = false;
            if top.on_resume {
                let i = top.depth as usize;
                match self.resume.get(i).map(|r| name.as_str().cmp(r)) {
                    Some(std::cmp::Ordering::Less) => continue,
                    Some(std::cmp::Ordering::Equal) => {
                        emit = false;
                        child_on_resume = i + 1 < self.resume.len();
                    }
                    _ => {}
                }
            }
            let is_dir = kind == Kind::Dir;
            if let Some(max) = self.options.max_depth {
                if depth > max {
                    continue;
                }
            }
            if is_dir && DEFAULT_IGNORES.contains(&name.as_str()) {
                continue;
            }
            let sub = join_rel(&top.sub, &name);
            if let Some(set) = &self.extra {
                let lexical = join_rel(&self.start.lexical_rel, &sub);
                if set.is_match(&name) || set.is_match(&lexical) {
                    continue;
                }
            }
            // Whether `real_buf` now holds the entry's real workspace path.
            let has_real = match (&self.scope.deny, &top.real_rel) {
                (Some(deny), Some(parent)) => {
                    self.real_buf.clear();
                    self.real_buf.push_str(parent);
                    if !self.real_buf.is_empty() {
                        self.real_buf.push('/');
                    }
                    self.real_buf.push_str(&name);
                    if deny.denied(&self.real_buf, parent.len(), Access::Read) {
                        continue;
                    }
                    true
                }
                _ => false,
            };
            // A secret under another name (exchanged with or renamed to this one) is skipped
            // as its own name is: by the identity the listing gave (an open of a directory
            // checks it is that one).
            if let Some(deny) = &self.scope.deny {
                if deny.secret_identity(&mut self.ids, top.dev, ino, 1, is_dir) {
                    continue;
                }
            }
            // The host path is for ignore-file matching and for a directory entered.
            let rules = use_ignore_files && top.rules;
            let descend = is_dir && self.options.max_depth.is_none_or(|max| depth < max);
            let host = (rules || descend).then(|| top.host.join(&name));
            let (parent, parent_dev, parent_rules) = (top.fd.clone(), top.dev, top.rules);
            if let (true, Some(host)) = (rules, &host) {
                if ignored(&self.stack, &self.parents, host, is_dir) {
                    continue;
                }
            }
            let real_rel = (has_real && descend).then(|| self.real_buf.clone());
            let name_at = sub.len() - name.len();
            let (found_sub, dir_sub) = if descend {
                (sub.clone(), Some(sub))
            } else {
                (sub, None)
            };
            let mut found = None;
            if emit {
                found = Some(Found {
                    name_at,
                    sub: found_sub,
                    dir: parent.clone(),
                    ino,
                    dev: parent_dev,
                    is_dir,
                    depth,
                });
            }
            if let (Some(host), Some(sub)) = (host, dir_sub) {
                // The resume point and the directories on its path were entered by an earlier
                // page, which counted what their listings and ignore files could not read.
                let errors_before = self.errors;
                // Entered through the listed directory's descriptor, and only when the name
                // still is the directory the listing named.
                let listing_buf = &mut self.listing_buf;
                let errors = &mut self.errors;
                let opened = open_listed_dir(parent.as_fd(), &name, ino, parent_dev).and_then(
                    |(fd, dev)| {
                        let children = read_children(fd.as_fd(), listing_buf, errors)?;
                        Ok((fd, dev, children))
                    },
                );
                match opened {
                    Ok((fd, dev, children)) => {
                        let fd: DirFd = Arc::new(fd);
                        let (ignore, gitignore) = if use_ignore_files {
                            self.scope.ignore_files(
                                &fd,
                                dev,
                                &host,
                                real_rel.as_deref(),
                                &children,
                                &mut self.errors,
                                &mut self.budget.lock().unwrap_or_else(|p| p.into_inner()),
                                cancel,
                            )
                        } else {
                            (Matcher::default(), Matcher::default())
                        };
                        let rules = parent_rules || !(ignore.is_empty() && gitignore.is_empty());
                        self.stack.push(Dir {
                            fd,
                            dev,
                            rules,
                            host,
                            sub,
                            real_rel,
                            depth,
                            children,
                            next: 0,
                            ignore,
                            gitignore,
                            on_resume: child_on_resume,
                        });
                    }
                    Err(_) => self.errors += 1,
                }
                if !emit {
                    self.errors = errors_before;
                }
            }
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

/// Whether the ignore files of the walked directories and the start's parents skip `path`:
/// the closest `.ignore` that has an opinion decides, else the closest `.gitignore`.
fn ignored(stack: &[Dir], parents: &[(Matcher, Matcher)], path: &Path, is_dir: bool) -> bool {
    let levels = || {
        stack
            .iter()
            .rev()
            .map(|d| (&d.ignore, &d.gitignore))
            .chain(parents.iter().rev().map(|(i, g)| (i, g)))
    };
    for (ignore, _) in levels() {
        match ignore.matched(path, is_dir) {
            Match::None => {}
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
        }
    }
    for (_, gitignore) in levels() {
        match gitignore.matched(path, is_dir) {
            Match::None => {}
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
        }
    }
    false
}

/// Refuse a start whose directory (or one on the way to it) is a secret under another name.
#[allow(clippy::unnecessary_cast)]
fn secret_start(
    scope: &super::WalkScope,
    ids: &mut LinkSnapshot,
    fd: &rustix::fd::OwnedFd,
    start: &str,
) -> Result<(), String> {
    let Some(deny) = &scope.deny else {
        return Ok(());
    };
    let Ok(st) = rustix::fs::fstat(fd) else {
        return Ok(());
    };
    if deny.secret_identity(ids, st.st_dev as u64, st.st_ino as u64, 1, true) {
        return Err(format!(
            "`{}` is denied to tools: it is a secret directory under another name (moved or exchanged after it was seen under a deny-listed name)",
            display_rel(start)
        ));
    }
    Ok(())
}

fn join_rel(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}/{name}")
    }
}

fn display_rel(rel: &str) -> &str {
    if rel.is_empty() {
        "."
    } else {
        rel
    }
}
