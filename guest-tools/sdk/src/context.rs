//! What the host tells a tool about one call.

use crate::__wit::toolgate::tool::types as wit;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use std::path::{Path, PathBuf};

/// The call's context: where the workspace is mounted, the output budget, and what to skip.
#[derive(Debug)]
pub struct Context {
    root: PathBuf,
    max_output_bytes: usize,
    denied: GlobSet,
}

impl Context {
    pub(crate) fn from_wit(cx: wit::CallContext) -> Self {
        let mut set = GlobSetBuilder::new();
        for pattern in &cx.denied_globs {
            // A pattern the host sent that does not parse is skipped here; the host enforces
            // the deny-list on its own side as well.
            if let Ok(glob) = GlobBuilder::new(pattern).literal_separator(true).build() {
                set.add(glob);
            }
        }
        Context {
            root: PathBuf::from(cx.workspace_root),
            max_output_bytes: usize::try_from(cx.max_output_bytes).unwrap_or(usize::MAX),
            denied: set.build().unwrap_or_else(|_| GlobSet::empty()),
        }
    }

    /// A context for tests of tool logic outside a component.
    pub fn for_tests(root: impl Into<PathBuf>, max_output_bytes: usize, denied: &[&str]) -> Self {
        let mut set = GlobSetBuilder::new();
        for pattern in denied {
            if let Ok(glob) = GlobBuilder::new(pattern).literal_separator(true).build() {
                set.add(glob);
            }
        }
        Context {
            root: root.into(),
            max_output_bytes,
            denied: set.build().unwrap_or_else(|_| GlobSet::empty()),
        }
    }

    /// Where the workspace root is mounted in this sandbox.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The most bytes of content the host passes on.
    pub fn max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// `path` relative to the workspace root with `/` separators; `.` for the root itself.
    /// A path outside the root is returned as it is.
    pub fn relative(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// Whether the workspace-relative path `rel` is on the host's deny-list.
    pub fn is_denied(&self, rel: &str) -> bool {
        self.denied.is_match(rel)
    }
}
