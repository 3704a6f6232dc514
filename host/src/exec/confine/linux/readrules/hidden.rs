//! What no rule may cover: the hidden paths (secrets, `.toolgate`, host secrets, `$HOME`) and
//! git's frozen entries.

use super::*;

/// What must not be at or beneath any rule.
#[derive(Debug, Default)]
pub(super) struct Hidden {
    /// Absolute paths, as spelled and resolved (whether or not they exist).
    pub(super) paths: BTreeSet<PathBuf>,
    /// The (device, inode) of every hidden file or directory that exists, and the plan's
    /// secret inodes.
    pub(super) ids: HashSet<(u64, u64)>,
    /// `$HOME`, as spelled and resolved: no rule may be it or hold it (a directory holding it
    /// is split around it, never listed). Rules beneath it are the host's explicit grants
    /// (toolchain homes, a workspace or call directory there).
    pub(super) homes: Vec<PathBuf>,
    /// Git's config, hooks and the like (the plan's `git_readonly`, `git_unprotected` and
    /// `git_files`): readable, never writable, and never created where absent (`commondir`).
    /// Where writes are granted, a directory holding one is split like one holding a secret,
    /// so the git directory itself takes no new entry (git's lock files included: in
    /// landlock-only mode git can read but not commit).
    pub(super) frozen: BTreeSet<PathBuf>,
}
impl Hidden {
    pub(super) fn add(&mut self, path: PathBuf) {
        if let Ok(m) = path.symlink_metadata() {
            if !m.file_type().is_symlink() {
                self.ids.insert((m.dev(), m.ino()));
            }
        }
        if let Some(resolved) = resolved(&path) {
            if let Ok(m) = resolved.symlink_metadata() {
                self.ids.insert((m.dev(), m.ino()));
            }
            self.paths.insert(resolved);
        }
        self.paths.insert(path);
    }

    /// `path` is a hidden path or beneath one.
    pub(super) fn covers(&self, path: &Path) -> bool {
        path.ancestors().any(|a| self.paths.contains(a))
    }

    /// A hidden path or `$HOME` is strictly beneath `path` (paths beneath one are contiguous
    /// in the component order, right after it).
    pub(super) fn below(&self, path: &Path) -> bool {
        self.paths
            .range::<Path, _>((Bound::Excluded(path), Bound::Unbounded))
            .next()
            .is_some_and(|h| h.starts_with(path))
            || self.holds_home(path)
    }

    /// `$HOME` is strictly beneath `path`.
    pub(super) fn holds_home(&self, path: &Path) -> bool {
        self.homes.iter().any(|h| h != path && h.starts_with(path))
    }

    /// `path` is one of git's frozen entries.
    pub(super) fn is_frozen(&self, path: &Path) -> bool {
        self.frozen.contains(path)
    }

    /// A frozen entry is strictly beneath `path`.
    pub(super) fn frozen_below(&self, path: &Path) -> bool {
        self.frozen
            .range::<Path, _>((Bound::Excluded(path), Bound::Unbounded))
            .next()
            .is_some_and(|f| f.starts_with(path))
    }

    /// `path` is `$HOME` or a hidden path (an entry a split directory leaves out).
    pub(super) fn is(&self, path: &Path) -> bool {
        self.paths.contains(path) || self.homes.iter().any(|h| h == path)
    }
}
/// `path` with its symlinks resolved; for a path that does not exist, its parent's resolved
/// and its name (a credentials file made later is hidden where it will be).
pub(super) fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let parent = path.parent()?.canonicalize().ok()?;
    Some(parent.join(path.file_name()?))
}
/// Everything no rule may reach.
pub(super) fn hidden_paths(inputs: &ReadInputs<'_>) -> Hidden {
    let mut h = Hidden::default();
    let ws = inputs.workspace;
    h.add(ws.join(STATE_DIR));
    for rel in inputs
        .plan
        .secret_files
        .iter()
        .chain(&inputs.plan.secret_dirs)
    {
        h.add(ws.join(rel));
    }
    h.ids
        .extend(inputs.plan.secret_inodes.iter().map(|s| (s.dev, s.ino)));
    for rel in git_frozen(inputs.plan) {
        h.frozen.insert(ws.join(rel));
    }
    for s in SYSTEM_SECRETS.iter().chain(MORE_SYSTEM_SECRETS) {
        h.add(PathBuf::from(s));
    }
    if let Some(home) = usable_home(inputs.home) {
        for s in TOOLCHAIN_SECRETS {
            h.add(home.join(s));
        }
        h.homes.push(home.to_path_buf());
        if let Ok(r) = home.canonicalize() {
            h.homes.push(r);
        }
    }
    h
}
/// `$HOME` when it means something (as the view takes it).
pub(super) fn usable_home(home: Option<&Path>) -> Option<&Path> {
    home.filter(|h| h.is_absolute() && *h != Path::new("/"))
}
