//! What kept rules were made from: reused only for the same inputs.

use super::*;

/// Git's entries the command may read but never write or create, workspace-relative.
pub(super) fn git_frozen(plan: &Plan) -> impl Iterator<Item = &String> {
    plan.git_readonly
        .iter()
        .chain(&plan.git_unprotected)
        .chain(&plan.git_files)
}

/// What the kept rules were made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Key {
    workspace: PathBuf,
    git_frozen: Vec<String>,
    secret_files: Vec<String>,
    secret_dirs: Vec<String>,
    secret_inodes: Vec<(u64, u64)>,
    home: Option<PathBuf>,
    path_dirs: Vec<PathBuf>,
    extra_read: Vec<PathBuf>,
    extra_write: Vec<PathBuf>,
    read_only: bool,
    list_split_dirs: bool,
}

impl Key {
    pub(super) fn of(i: &ReadInputs<'_>) -> Key {
        Key {
            workspace: i.workspace.to_path_buf(),
            git_frozen: git_frozen(i.plan).cloned().collect(),
            secret_files: i.plan.secret_files.clone(),
            secret_dirs: i.plan.secret_dirs.clone(),
            secret_inodes: i
                .plan
                .secret_inodes
                .iter()
                .map(|s| (s.dev, s.ino))
                .collect(),
            home: i.home.map(Path::to_path_buf),
            path_dirs: i.path_dirs.to_vec(),
            extra_read: i.extra_read.to_vec(),
            extra_write: i.extra_write.to_vec(),
            read_only: i.read_only,
            list_split_dirs: i.list_split_dirs,
        }
    }

    /// Whether it was made from `i` (compared in place: no copy on the usual path).
    pub(super) fn matches(&self, i: &ReadInputs<'_>) -> bool {
        self.workspace == i.workspace
            && self.git_frozen.iter().eq(git_frozen(i.plan))
            && self.secret_files == i.plan.secret_files
            && self.secret_dirs == i.plan.secret_dirs
            && self.secret_inodes.len() == i.plan.secret_inodes.len()
            && self
                .secret_inodes
                .iter()
                .zip(&i.plan.secret_inodes)
                .all(|(a, b)| *a == (b.dev, b.ino))
            && self.home.as_deref() == i.home
            && self.path_dirs == i.path_dirs
            && self.extra_read == i.extra_read
            && self.extra_write == i.extra_write
            && self.read_only == i.read_only
            && self.list_split_dirs == i.list_split_dirs
    }
}
