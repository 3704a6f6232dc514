//! The walk rules the host and the guest tools share, so that a host-assisted walk (or
//! read-ahead) and a guest's own walk through WASI list and read the same files: the directory
//! names never entered ([`DEFAULT_IGNORES`]) and the `include` filter ([`Include`]).
//!
//! Built for the host and for `wasm32-wasip2`; its only dependency is `globset`, which both
//! already use.

/// Directory names never entered by a walk, whatever the ignore files say.
pub const DEFAULT_IGNORES: &[&str] = &[".git", "node_modules", "target", "dist", ".toolgate"];

/// Whether a walk skips the directory called `name` (one of [`DEFAULT_IGNORES`]).
pub fn is_default_ignored(name: &str) -> bool {
    DEFAULT_IGNORES.contains(&name)
}

/// The caller's extra globs of names to prune (a trailing `/` is dropped; a pattern that does
/// not parse is skipped). `None` when there are none.
pub fn extra_globs(patterns: &[String]) -> Option<globset::GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        if let Ok(g) = globset::Glob::new(p.trim_end_matches('/')) {
            set.add(g);
        }
    }
    set.build().ok()
}

/// A filter on files: a glob on the file name, or, when it contains `/`, on the path below the
/// walk's start (`*` does not cross `/`, `**` does). A leading `./` is ignored.
#[derive(Debug, Clone)]
pub struct Include {
    /// The glob as given.
    glob: String,
    matcher: globset::GlobMatcher,
    on_path: bool,
}

impl Include {
    /// Compile `source`, or say why it is not a valid glob.
    pub fn new(source: &str) -> Result<Self, String> {
        let on_path = source.contains('/');
        let glob = source.trim_start_matches("./");
        let matcher = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("`include` glob `{glob}` is invalid: {e}"))?
            .compile_matcher();
        Ok(Include {
            glob: source.to_string(),
            matcher,
            on_path,
        })
    }

    /// The glob as given.
    pub fn glob(&self) -> &str {
        &self.glob
    }

    /// Whether the file at `under` (its `/`-separated path below the walk's start) passes.
    pub fn matches(&self, under: &str) -> bool {
        if self.on_path {
            self.matcher.is_match(under)
        } else {
            let name = under.rsplit('/').next().unwrap_or(under);
            self.matcher.is_match(name)
        }
    }
}

/// The filter of a walk that returns only the files whose `/`-separated path below the
/// walk's start matches `glob` (`*`, `?` and `[..]` do not cross `/`, `**` does, `{a,b}`
/// works): the host's walk (`toolgate:fs/walk@0.2.0`, `files-matching`) and the guest's own
/// walk compile it here, so both pick the same files. The error says why `glob` is not valid.
pub fn files_matching(glob: &str) -> Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("`{glob}` is not a valid glob: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn files_matching_keeps_separators_literal() {
        let m = files_matching("**/*.rs").unwrap();
        assert!(m.is_match("main.rs"));
        assert!(m.is_match("a/b/main.rs"));
        assert!(!m.is_match("a/main.rs.orig"));
        let one = files_matching("*/x.rs").unwrap();
        assert!(one.is_match("a/x.rs"));
        assert!(!one.is_match("a/b/x.rs"), "`*` must not cross `/`");
        assert!(files_matching("{src,lib}/*.rs")
            .unwrap()
            .is_match("lib/a.rs"));
        let e = files_matching("a[").unwrap_err();
        assert!(e.contains("`a[`"), "{e}");
    }

    #[test]
    fn include_matches_names_or_paths() {
        let by_name = Include::new("*.rs").unwrap();
        assert!(by_name.matches("src/main.rs"));
        assert!(by_name.matches("main.rs"));
        assert!(!by_name.matches("src/main.rs.orig"));
        let by_path = Include::new("./src/*.rs").unwrap();
        assert!(by_path.matches("src/main.rs"));
        assert!(!by_path.matches("src/a/main.rs"));
        assert_eq!(by_path.glob(), "./src/*.rs");
        assert!(Include::new("a[").is_err());
    }

    #[test]
    fn extra_globs_skip_bad_patterns_and_trailing_slashes() {
        assert!(extra_globs(&[]).is_none());
        let set =
            extra_globs(&["build/".to_string(), "a[".to_string(), "*.tmp".to_string()]).unwrap();
        assert!(set.is_match("build"));
        assert!(set.is_match("x.tmp"));
        assert!(!set.is_match("src"));
    }

    #[test]
    fn default_ignores_are_directory_names() {
        for name in [".git", "node_modules", "target", "dist", ".toolgate"] {
            assert!(is_default_ignored(name));
        }
        assert!(!is_default_ignored("src"));
        assert!(DEFAULT_IGNORES.iter().all(|n| !n.contains('/')));
    }
}
