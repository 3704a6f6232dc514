//! Which language server handles which file: the servers toolgate knows (used when found on
//! the host's `PATH`, outside the workspace), then what the policy's `[lsp.<language>]` tables
//! add, replace or turn off.

use std::path::Path;
use std::time::Duration;

/// One language and the server that handles it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Language {
    /// Its name (`python`), as in `[lsp.python]` and `lsp_restart`.
    pub name: String,
    /// The server's argv.
    pub command: Vec<String>,
    /// File extensions it handles, without the dot.
    pub extensions: Vec<String>,
    /// Where it came from, for messages (`detected on PATH`, a policy file).
    pub source: String,
}

/// The language servers of a workspace.
#[derive(Clone, Debug)]
pub struct LspConfig {
    /// The languages with a server, in the order they are looked up.
    pub languages: Vec<Language>,
    /// How long a request waits by default.
    pub timeout: Duration,
    /// `edit`, `write` and `multiedit` append the file's new diagnostics.
    pub diagnostics_after_edit: bool,
    /// Languages toolgate knows whose server is not installed (for messages).
    pub missing: Vec<(String, String)>,
}

impl Default for LspConfig {
    fn default() -> Self {
        LspConfig {
            languages: Vec::new(),
            timeout: Duration::from_secs(30),
            diagnostics_after_edit: false,
            missing: Vec::new(),
        }
    }
}

/// The servers toolgate knows: language, argv, extensions.
pub const KNOWN: &[(&str, &[&str], &[&str])] = &[
    ("python", &["pylsp"], &["py", "pyi"]),
    (
        "c",
        // No background index: it would write `.cache/` into a read-only workspace.
        &["clangd", "--background-index=false"],
        &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
    ),
    ("rust", &["rust-analyzer"], &["rs"]),
    ("go", &["gopls"], &["go"]),
    (
        "typescript",
        &["typescript-language-server", "--stdio"],
        &["ts", "tsx", "js", "jsx", "mjs", "cjs"],
    ),
];

impl LspConfig {
    /// The known servers whose program is found on `dirs` (the host's `PATH` without the
    /// workspace's own directories).
    pub fn detected(dirs: &[std::path::PathBuf]) -> LspConfig {
        let mut config = LspConfig::default();
        for (name, argv, exts) in KNOWN {
            let found = dirs.iter().any(|d| d.join(argv[0]).is_file());
            if found {
                config.languages.push(Language {
                    name: (*name).to_string(),
                    command: argv.iter().map(|s| (*s).to_string()).collect(),
                    extensions: exts.iter().map(|s| (*s).to_string()).collect(),
                    source: "detected on PATH".into(),
                });
            } else {
                config
                    .missing
                    .push(((*name).to_string(), argv[0].to_string()));
            }
        }
        config
    }

    /// Set `language`'s server (replacing a detected one), or turn it off (`command` empty).
    pub fn set(&mut self, language: Language) {
        self.languages.retain(|l| l.name != language.name);
        self.missing.retain(|(n, _)| *n != language.name);
        if !language.command.is_empty() {
            // A configured language comes first: its extensions win over a detected one's.
            self.languages.insert(0, language);
        }
    }

    /// The language handling `path`, by its extension.
    pub fn language_for(&self, path: &Path) -> Option<&Language> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        self.languages
            .iter()
            .find(|l| l.extensions.iter().any(|e| e.eq_ignore_ascii_case(&ext)))
    }

    /// The language called `name`.
    pub fn named(&self, name: &str) -> Option<&Language> {
        self.languages.iter().find(|l| l.name == name)
    }

    /// Why no server handles `path`, in words, with what to do.
    pub fn no_server(&self, path: &str) -> String {
        let ext = Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("");
        let known = KNOWN
            .iter()
            .find(|(_, _, exts)| exts.contains(&ext))
            .map(|(name, argv, _)| (*name, argv[0]));
        match known {
            Some((name, program)) => format!(
                "no language server handles {path}: `{program}` (the {name} server) is not installed on this machine; install it, or set `[lsp.{name}] command = [...]` in the policy"
            ),
            None => format!(
                "no language server handles {path}; set one in the policy: `[lsp.<language>] command = [\"server\", ...]` and `extensions = [\"{}\"]`",
                if ext.is_empty() { "ext" } else { ext }
            ),
        }
    }
}

/// The LSP `languageId` of a file of `language` with extension `ext`.
pub fn language_id(language: &str, path: &Path) -> String {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "py" | "pyi" => "python",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "rs" => "rust",
        "go" => "go",
        "ts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        _ => language,
    }
    .to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_language_wins_and_an_empty_command_turns_one_off() {
        let mut c = LspConfig::default();
        c.set(Language {
            name: "python".into(),
            command: vec!["pylsp".into()],
            extensions: vec!["py".into()],
            source: "detected on PATH".into(),
        });
        c.set(Language {
            name: "mypy".into(),
            command: vec!["/opt/x".into()],
            extensions: vec!["PY".into()],
            source: "user".into(),
        });
        assert_eq!(c.language_for(Path::new("a/b.py")).unwrap().name, "mypy");
        c.set(Language {
            name: "mypy".into(),
            command: vec![],
            extensions: vec![],
            source: "user".into(),
        });
        assert_eq!(c.language_for(Path::new("b.Py")).unwrap().name, "python");
        assert!(c.language_for(Path::new("Makefile")).is_none());
        assert!(c.no_server("x.rs").contains("rust-analyzer"));
        assert!(c.no_server("x.zig").contains("extensions = [\"zig\"]"));
        assert_eq!(language_id("c", Path::new("a.hpp")), "cpp");
    }
}
