//! The `toolgate:lsp` capability's host side: a tool's question about a file becomes LSP
//! requests to the file's language server, and the answer comes back as JSON with
//! workspace-relative paths and 1-based lines and columns in characters (the shapes are
//! documented in the guest SDK's `lsp` module).
//!
//! Every path a tool names is scoped again here (the workspace's deny-list and secrets apply),
//! every file is read through `read_regular` (no FIFO, device or 8 MiB+ file), and every answer
//! is bounded: at most [`MAX_LOCATIONS`] places, [`MAX_WORKSPACE_FILES`] files.

use super::convert::{chars_of_utf16, find_word, line_text, utf16_of_chars, word_at};
use super::langs::{language_id, Language, LspConfig};
use super::{path_of, Server, Servers};
use crate::exec::{ExecError, ExecHost};
use crate::workspace::{Access, Workspace, GUEST_ROOT};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[path = "plan.rs"]
mod plan;
#[path = "questions.rs"]
mod questions;
pub use plan::PlannedFile;

/// Largest file sent to a server or read for a location's line.
pub const MAX_FILE: u64 = 8 << 20;
/// Most places (locations, symbols, calls) one answer lists.
pub const MAX_LOCATIONS: usize = 200;
/// Most files the workspace-wide diagnostics open.
pub const MAX_WORKSPACE_FILES: usize = 200;
/// Most bytes of text the workspace-wide diagnostics send in all.
pub const MAX_WORKSPACE_BYTES: usize = 64 << 20;
/// Most directory entries the workspace walk looks at.
const MAX_WALK_ENTRIES: usize = 20_000;

/// A place in a file as a tool names it.
#[derive(Clone, Debug)]
pub struct Pos {
    /// The path as the tool sees it (under the workspace root) or workspace-relative.
    pub path: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column in characters.
    pub column: Option<u32>,
    /// A name on the line, when no column is given.
    pub symbol: Option<String>,
}

/// What a tool asks.
#[derive(Clone, Debug)]
pub enum Query {
    /// A file's diagnostics, or the workspace's.
    Diagnostics(Option<String>),
    /// Where the symbol is defined.
    Definition(Pos),
    /// Where it is used.
    References(Pos),
    /// A file's symbols.
    DocumentSymbols(String),
    /// Symbols matching a query.
    WorkspaceSymbols(String),
    /// Callers of the function.
    IncomingCalls(Pos),
    /// What it calls.
    OutgoingCalls(Pos),
}

/// A workspace file, scoped and read.
struct Doc {
    rel: String,
    host: PathBuf,
    text: String,
}

/// The language servers of one workspace and how they are asked.
pub struct LspHost {
    exec: Arc<ExecHost>,
    workspace: Workspace,
    config: LspConfig,
    servers: Servers,
}

impl LspHost {
    /// The language servers of `exec`'s workspace, as `config` says (none starts yet).
    pub fn new(exec: Arc<ExecHost>, workspace: Workspace, config: LspConfig) -> LspHost {
        LspHost {
            exec,
            workspace,
            config,
            servers: Servers::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LspConfig {
        &self.config
    }

    /// Scope `raw` (as the tool sees it, or workspace-relative) for `access`.
    fn scoped(&self, raw: &str, access: Access) -> Result<crate::workspace::ScopedPath, String> {
        let rel = match raw.strip_prefix(GUEST_ROOT) {
            Some("") => ".",
            Some(r) if r.starts_with('/') => r.trim_start_matches('/'),
            _ => raw,
        };
        self.workspace
            .scope(rel, access)
            .map_err(|d| format!("{}; {}", d.reason, d.hint))
    }

    /// Scope and read a file.
    fn doc(&self, raw: &str) -> Result<Doc, String> {
        let s = self.scoped(raw, Access::Read)?;
        let shown = crate::text::escape_name(&s.rel);
        let bytes = crate::fsutil::read_regular(&s.host, MAX_FILE).map_err(|e| {
            if e.is_not_found() {
                format!("{shown} does not exist")
            } else {
                e.message_for(&shown)
            }
        })?;
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{shown} is not UTF-8 text; language servers read only text"))?;
        Ok(Doc {
            rel: s.rel,
            host: s.host,
            text,
        })
    }

    /// The server for `doc`'s language, started (or started again) as needed; noted in `used`.
    fn server(&self, doc: &Doc, used: &mut Vec<Value>) -> Result<(Arc<Server>, Language), String> {
        let lang = self
            .config
            .language_for(&doc.host)
            .ok_or_else(|| self.config.no_server(&doc.rel))?
            .clone();
        let s = self.server_of(&lang, used)?;
        Ok((s, lang))
    }

    fn server_of(&self, lang: &Language, used: &mut Vec<Value>) -> Result<Arc<Server>, String> {
        let init = self.config.timeout.max(Duration::from_secs(10));
        let (s, restarted) = self
            .servers
            .get(&self.exec, &lang.name, &lang.command, init)
            .map_err(|e| format!("the {} language server could not start: {e}", lang.name))?;
        if !used.iter().any(|u| u["language"] == lang.name.as_str()) {
            used.push(json!({
                "language": lang.name,
                "server": lang.command.first().map(|p| program_name(p)).unwrap_or_default(),
                "restarted": restarted,
            }));
        }
        Ok(s)
    }

    /// Scope and read `raw`, start its language's server and send it the text.
    fn opened(
        &self,
        raw: &str,
        used: &mut Vec<Value>,
    ) -> Result<(Doc, Arc<Server>, Language), String> {
        let doc = self.doc(raw)?;
        let (s, lang) = self.server(&doc, used)?;
        self.open(&s, &lang, &doc)?;
        Ok((doc, s, lang))
    }

    /// `doc`'s symbols as the server sends them (`DocumentSymbol`s or `SymbolInformation`s).
    fn symbols_of(
        &self,
        s: &Server,
        lang: &Language,
        doc: &Doc,
        timeout: Duration,
    ) -> Result<Value, String> {
        s.request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": super::uri(&doc.host)}}),
            timeout,
        )
        .map_err(|e| with_lang(lang, e))
    }

    /// Send `doc`'s current text (nothing when the server has it already).
    fn open(&self, s: &Server, lang: &Language, doc: &Doc) -> Result<(), String> {
        s.sync(&doc.host, &language_id(&lang.name, &doc.host), &doc.text)?;
        Ok(())
    }

    /// The LSP position of `pos` in `doc`, and the word there.
    fn position(&self, doc: &Doc, pos: &Pos) -> Result<(Value, Option<String>), String> {
        let shown = crate::text::escape_name(&doc.rel);
        let line0 = pos.line.checked_sub(1).ok_or("lines start at 1")? as usize;
        let Some(line) = line_text(&doc.text, line0) else {
            let n = doc.text.lines().count();
            return Err(format!(
                "{shown} has {n} lines; line {} is past its end",
                pos.line
            ));
        };
        let len = line.chars().count();
        let col = match (pos.column, pos.symbol.as_deref()) {
            (Some(c), _) => {
                let c = c.checked_sub(1).ok_or("columns start at 1")? as usize;
                if c > len {
                    return Err(format!(
                        "line {} of {shown} has {len} characters; column {} is past its end",
                        pos.line,
                        c + 1
                    ));
                }
                c
            }
            (None, Some(sym)) => find_word(line, sym).ok_or_else(|| {
                format!(
                    "`{sym}` is not on line {} of {shown} (the line reads: `{}`); give the line where it appears, or a column",
                    pos.line,
                    crate::text::escape_name(line.trim())
                )
            })?,
            (None, None) => line.chars().take_while(|c| c.is_whitespace()).count(),
        };
        let word = word_at(line, col);
        Ok((
            json!({"line": line0, "character": utf16_of_chars(line, col)}),
            word,
        ))
    }

    /// A server's place as the tools show it: workspace-relative (with the line's text) or,
    /// outside the workspace, absolute and marked `outside`.
    fn place(&self, u: &str, range: &Value, lines: &mut HashMap<PathBuf, Option<String>>) -> Value {
        let Some(path) = path_of(u) else {
            return json!({"path": u, "line": 0, "column": 0, "outside": true});
        };
        let root = self.workspace.root();
        let inside = path
            .strip_prefix(root)
            .ok()
            .map(|r| r.to_string_lossy().into_owned());
        let (sl, sc) = (
            range["start"]["line"].as_u64().unwrap_or(0),
            range["start"]["character"].as_u64().unwrap_or(0),
        );
        let (el, ec) = (
            range["end"]["line"].as_u64().unwrap_or(sl),
            range["end"]["character"].as_u64().unwrap_or(sc),
        );
        let Some(rel) = inside else {
            return json!({
                "path": path.to_string_lossy(), "outside": true,
                "line": sl + 1, "column": sc + 1, "end_line": el + 1, "end_column": ec + 1,
            });
        };
        // A place in a file no tool may read (a secret, `.toolgate/`): its name, never its text.
        let Ok(scoped) = self.scoped(&rel, Access::Read) else {
            return json!({
                "path": rel, "outside": false,
                "line": sl + 1, "column": sc + 1, "end_line": el + 1, "end_column": ec + 1,
            });
        };
        let text = lines
            .entry(scoped.host.clone())
            .or_insert_with(|| {
                crate::fsutil::read_regular(&scoped.host, MAX_FILE)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
            })
            .as_deref();
        let line_of = |l: u64| text.and_then(|t| line_text(t, usize::try_from(l).ok()?));
        let col = |l: u64, c: u64| line_of(l).map_or(c, |t| chars_of_utf16(t, c)) + 1;
        let mut v = json!({
            "path": scoped.rel, "outside": false,
            "line": sl + 1, "column": col(sl, sc), "end_line": el + 1, "end_column": col(el, ec),
        });
        if let Some(t) = line_of(sl) {
            let t: String = t.trim().chars().take(200).collect();
            v["text"] = json!(t);
        }
        v
    }

    /// Ask; the answer as JSON.
    pub fn ask(&self, q: &Query, timeout: Duration) -> Result<Value, ExecError> {
        self.answer(q, timeout).map_err(ExecError::LanguageServer)
    }

    fn answer(&self, q: &Query, timeout: Duration) -> Result<Value, String> {
        let mut used = Vec::new();
        let mut answer = match q {
            Query::Diagnostics(Some(p)) => self.diagnostics(p, timeout, &mut used)?,
            Query::Diagnostics(None) => self.workspace_diagnostics(timeout, &mut used)?,
            Query::Definition(p) => {
                self.locations(p, "textDocument/definition", timeout, &mut used)?
            }
            Query::References(p) => {
                self.locations(p, "textDocument/references", timeout, &mut used)?
            }
            Query::DocumentSymbols(p) => self.document_symbols(p, timeout, &mut used)?,
            Query::WorkspaceSymbols(query) => self.workspace_symbols(query, timeout, &mut used)?,
            Query::IncomingCalls(p) => self.calls(p, true, timeout, &mut used)?,
            Query::OutgoingCalls(p) => self.calls(p, false, timeout, &mut used)?,
        };
        answer["servers"] = Value::Array(used);
        Ok(answer)
    }

    /// After a tool wrote `host_path`: its new text is sent to its server when that server
    /// runs and has it open, so the next answers are about what the file holds now.
    pub fn after_write(&self, host_path: &Path) {
        let Some(lang) = self.config.language_for(host_path) else {
            return;
        };
        let Some(s) = self.servers.peek(&lang.name) else {
            return;
        };
        if !s.is_open(host_path) {
            return;
        }
        let Ok(rel) = host_path.strip_prefix(self.workspace.root()) else {
            return;
        };
        if let Ok(doc) = self.doc(&rel.to_string_lossy()) {
            let _ = s.sync(&doc.host, &language_id(&lang.name, &doc.host), &doc.text);
        }
    }

    /// The process id of `language`'s server, when one runs (for the console and tests).
    pub fn server_pid(&self, language: &str) -> Option<u32> {
        self.servers.peek(language).and_then(|s| s.pid())
    }

    /// Stop the server of `language` (every server when `None`).
    pub fn restart(&self, language: Option<&str>) -> Result<Value, ExecError> {
        let names: Vec<String> = match language {
            Some(l) => {
                if self.config.named(l).is_none() {
                    return Err(ExecError::UnknownLanguage {
                        language: l.to_string(),
                        known: self.describe_servers(),
                    });
                }
                vec![l.to_string()]
            }
            None => self
                .config
                .languages
                .iter()
                .map(|l| l.name.clone())
                .collect(),
        };
        let (mut restarted, mut not_running) = (Vec::new(), Vec::new());
        for n in names {
            if self.servers.restart(&n) {
                restarted.push(n);
            } else {
                not_running.push(n);
            }
        }
        Ok(json!({"restarted": restarted, "not_running": not_running}))
    }
}

/// A server's error with its language named.
fn with_lang(lang: &Language, e: super::LspError) -> String {
    format!(
        "{} ({}): {e}",
        lang.name,
        lang.command
            .first()
            .map(|p| program_name(p))
            .unwrap_or_default()
    )
}

/// The file name of a program path.
fn program_name(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map_or_else(|| p.to_string(), |n| n.to_string_lossy().into_owned())
}

/// The change a write tool applies, as the gate built it (it writes on directory
/// descriptors, checking each file is still what was approved).
pub type Apply = Arc<dyn Fn() -> Result<Value, String> + Send + Sync>;

/// What one call may do with the lsp capability. Put into the call's capabilities by the gate.
#[derive(Clone)]
pub struct LspGrant {
    /// The workspace's language servers.
    pub host: Arc<LspHost>,
    /// The change approved for this call (`None`: `apply` is refused).
    pub apply: Option<Apply>,
    /// The longest one question may wait (below the call's own deadline).
    pub max_wait: Duration,
}

impl std::fmt::Debug for LspGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspGrant")
            .field("apply", &self.apply.is_some())
            .field("max_wait", &self.max_wait)
            .finish()
    }
}

impl PartialEq for LspGrant {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.host, &other.host)
            && self.apply.is_some() == other.apply.is_some()
            && self.max_wait == other.max_wait
    }
}

impl Eq for LspGrant {}
