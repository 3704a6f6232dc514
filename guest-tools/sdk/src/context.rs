//! What the host tells a tool about one call.

use crate::__wit::toolgate::tool::types as wit;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use std::cell::OnceCell;
use std::path::{Path, PathBuf};

/// The call's context: where the workspace is mounted, the output budget, and what to skip.
#[derive(Debug)]
pub struct Context {
    root: PathBuf,
    max_output_bytes: usize,
    denied_globs: Vec<String>,
    /// Compiled on first use: building the regexes costs far more than a small call itself,
    /// and tools that never walk (read, write, edit) never need them.
    denied: OnceCell<GlobSet>,
}

fn compile(patterns: &[String]) -> GlobSet {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        // A pattern the host sent that does not parse is skipped here; the host enforces
        // the deny-list on its own side as well.
        if let Ok(glob) = GlobBuilder::new(pattern).literal_separator(true).build() {
            set.add(glob);
        }
    }
    set.build().unwrap_or_else(|_| GlobSet::empty())
}

impl Context {
    pub(crate) fn from_wit(cx: wit::CallContext) -> Self {
        Context {
            root: PathBuf::from(cx.workspace_root),
            max_output_bytes: usize::try_from(cx.max_output_bytes).unwrap_or(usize::MAX),
            denied_globs: cx.denied_globs,
            denied: OnceCell::new(),
        }
    }

    /// A context for tests of tool logic outside a component.
    pub fn for_tests(root: impl Into<PathBuf>, max_output_bytes: usize, denied: &[&str]) -> Self {
        Context {
            root: root.into(),
            max_output_bytes,
            denied_globs: denied.iter().map(|s| s.to_string()).collect(),
            denied: OnceCell::new(),
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
        self.denied
            .get_or_init(|| compile(&self.denied_globs))
            .is_match(rel)
    }
}
