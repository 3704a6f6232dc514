//! The `toolgate:lsp` capability's host side: a tool's question about a file becomes LSP
//! requests to the file's language server, and the answer comes back as JSON with
//! workspace-relative paths and 1-based lines and columns in characters (the shapes are
//! documented in the guest SDK's `lsp` module).
//!
//! Every path a tool names is scoped again here (the workspace's deny-list and secrets apply),
//! every file is read through `read_regular` (no FIFO, device or 8 MiB+ file), and every answer
//! is bounded: at most [`MAX_LOCATIONS`] places, [`MAX_WORKSPACE_FILES`] files.

use super::convert::{
    chars_of_utf16, find_word, line_text, severity, symbol_kind, utf16_of_chars, word_at,
};
use super::langs::{language_id, Language, LspConfig};
use super::{path_of, uri, Server, Servers};
use crate::exec::ExecHost;
use crate::workspace::{Access, Workspace, GUEST_ROOT};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "plan.rs"]
mod plan;
pub use plan::PlannedFile;

/// Largest file sent to a server or read for a location's line.
pub const MAX_FILE: u64 = 8 << 20;
/// Most places (locations, symbols, calls) one answer lists.
pub const MAX_LOCATIONS: usize = 200;
/// Most files the workspace-wide diagnostics open.
pub const MAX_WORKSPACE_FILES: usize = 200;
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
            .map(|r| r.to_string_lossy().into_owned())
            .and_then(|rel| self.scoped(&rel, Access::Read).ok());
        let (sl, sc) = (
            range["start"]["line"].as_u64().unwrap_or(0),
            range["start"]["character"].as_u64().unwrap_or(0),
        );
        let (el, ec) = (
            range["end"]["line"].as_u64().unwrap_or(sl),
            range["end"]["character"].as_u64().unwrap_or(sc),
        );
        let Some(scoped) = inside else {
            return json!({
                "path": path.to_string_lossy(), "outside": true,
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
    pub fn ask(&self, q: &Query, timeout: Duration) -> Result<Value, String> {
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

    fn diagnostics(
        &self,
        raw: &str,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let doc = self.doc(raw)?;
        let (s, lang) = self.server(&doc, used)?;
        let deadline = Instant::now() + timeout;
        self.open(&s, &lang, &doc)?;
        let mut files = Vec::new();
        let mut timed_out = Vec::new();
        self.collect(&s, &doc, deadline, &mut files, &mut timed_out)?;
        Ok(json!({"files": files, "checked": 1, "timed_out": timed_out, "cut": null}))
    }

    /// `doc`'s diagnostics for the text last sent into `files` (or its name into
    /// `timed_out`).
    fn collect(
        &self,
        s: &Server,
        doc: &Doc,
        deadline: Instant,
        files: &mut Vec<Value>,
        timed_out: &mut Vec<String>,
    ) -> Result<(), String> {
        let published = s.current_diagnostics(
            &doc.host,
            deadline.saturating_duration_since(Instant::now()),
        );
        match published {
            Ok(p) => {
                let diags: Vec<Value> = p
                    .diagnostics
                    .iter()
                    .map(|d| diagnostic(&doc.text, d))
                    .collect();
                files.push(json!({"path": doc.rel, "diagnostics": diags}));
                Ok(())
            }
            Err(super::LspError::Timeout(_)) => {
                timed_out.push(doc.rel.clone());
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Up to `max` workspace files that have a language server, and whether more were left.
    fn workspace_files(&self, max: usize) -> (Vec<String>, bool) {
        let root = self.workspace.root();
        let mut found = Vec::new();
        let mut more = false;
        let walk = ignore::WalkBuilder::new(root)
            .hidden(true)
            .follow_links(false)
            .require_git(false)
            .filter_entry(|e| e.file_name() != ".toolgate" && e.file_name() != ".git")
            .build();
        for (seen, entry) in walk.enumerate() {
            if seen >= MAX_WALK_ENTRIES {
                more = true;
                break;
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            if self.config.language_for(path).is_none() {
                continue;
            }
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let rel = rel.to_string_lossy().into_owned();
            if self.scoped(&rel, Access::Read).is_err() {
                continue;
            }
            if found.len() == max {
                more = true;
                break;
            }
            found.push(rel);
        }
        found.sort();
        (found, more)
    }

    fn workspace_diagnostics(
        &self,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        let (rels, more) = self.workspace_files(MAX_WORKSPACE_FILES);
        if rels.is_empty() {
            return Err(format!(
                "no file in the workspace has a language server here (servers: {}); {}",
                self.describe_servers(),
                "give `path` to check one file, or configure a server with `[lsp.<language>]`"
            ));
        }
        let mut opened = Vec::new();
        let mut files = Vec::new();
        let mut timed_out = Vec::new();
        for rel in &rels {
            let Ok(doc) = self.doc(rel) else { continue };
            let (s, lang) = self.server(&doc, used)?;
            self.open(&s, &lang, &doc)?;
            opened.push((s, doc));
        }
        for (s, doc) in &opened {
            self.collect(s, doc, deadline, &mut files, &mut timed_out)?;
        }
        let checked = files.len();
        files.retain(|f| f["diagnostics"].as_array().is_some_and(|d| !d.is_empty()));
        Ok(json!({
            "files": files,
            "checked": checked + timed_out.len(),
            "timed_out": timed_out,
            "cut": more.then(|| format!("only the first {MAX_WORKSPACE_FILES} files were checked; give `path` for others")),
        }))
    }

    fn describe_servers(&self) -> String {
        if self.config.languages.is_empty() {
            return "none installed".into();
        }
        self.config
            .languages
            .iter()
            .map(|l| format!("{} ({})", l.name, l.extensions.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// A position request (`definition`, `references`) and its places.
    fn locations(
        &self,
        pos: &Pos,
        method: &str,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let doc = self.doc(&pos.path)?;
        let (s, lang) = self.server(&doc, used)?;
        let (position, word) = self.position(&doc, pos)?;
        self.open(&s, &lang, &doc)?;
        let mut params = json!({"textDocument": {"uri": uri(&doc.host)}, "position": position});
        if method == "textDocument/references" {
            params["context"] = json!({"includeDeclaration": true});
        }
        let result = s
            .request(method, params, timeout)
            .map_err(|e| with_lang(&lang, e))?;
        let items: Vec<Value> = match result {
            Value::Array(a) => a,
            Value::Null => Vec::new(),
            one => vec![one],
        };
        let mut lines = HashMap::new();
        let total = items.len();
        let places: Vec<Value> = items
            .iter()
            .take(MAX_LOCATIONS)
            .map(|l| match l.get("targetUri") {
                Some(u) => self.place(
                    u.as_str().unwrap_or_default(),
                    l.get("targetSelectionRange").unwrap_or(&l["targetRange"]),
                    &mut lines,
                ),
                None => self.place(
                    l["uri"].as_str().unwrap_or_default(),
                    &l["range"],
                    &mut lines,
                ),
            })
            .collect();
        Ok(
            json!({"symbol": word, "locations": places, "total": total, "cut": total > MAX_LOCATIONS}),
        )
    }

    fn document_symbols(
        &self,
        raw: &str,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let doc = self.doc(raw)?;
        let (s, lang) = self.server(&doc, used)?;
        self.open(&s, &lang, &doc)?;
        let result = s
            .request(
                "textDocument/documentSymbol",
                json!({"textDocument": {"uri": uri(&doc.host)}}),
                timeout,
            )
            .map_err(|e| with_lang(&lang, e))?;
        let mut out = Vec::new();
        flatten_symbols(
            &doc.text,
            result.as_array().map_or(&[][..], Vec::as_slice),
            0,
            &mut out,
        );
        let total = out.len();
        out.truncate(MAX_LOCATIONS * 5);
        Ok(json!({"path": doc.rel, "symbols": out, "total": total, "cut": total > out.len()}))
    }

    fn workspace_symbols(
        &self,
        query: &str,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        // The languages present in the workspace: one file of each is enough to know.
        let (rels, _) = self.workspace_files(MAX_WORKSPACE_FILES);
        let mut langs: Vec<Language> = Vec::new();
        for rel in &rels {
            if let Some(l) = self.config.language_for(Path::new(rel)) {
                if !langs.iter().any(|x| x.name == l.name) {
                    langs.push(l.clone());
                }
            }
        }
        if langs.is_empty() {
            return Err(format!(
                "no file in the workspace has a language server here (servers: {})",
                self.describe_servers()
            ));
        }
        let mut items = Vec::new();
        let mut unsupported = Vec::new();
        for lang in &langs {
            let s = self.server_of(lang, used)?;
            if !s.provides("workspaceSymbolProvider") {
                unsupported.push(lang.name.clone());
                continue;
            }
            let r = s
                .request("workspace/symbol", json!({"query": query}), timeout)
                .map_err(|e| with_lang(lang, e))?;
            items.extend(r.as_array().cloned().unwrap_or_default());
        }
        if items.is_empty() && !unsupported.is_empty() && unsupported.len() == langs.len() {
            return Err(format!(
                "the language server of {} does not search workspace symbols; use `path` to list one file's symbols, or grep",
                unsupported.join(", ")
            ));
        }
        let mut lines = HashMap::new();
        let total = items.len();
        let symbols: Vec<Value> = items
            .iter()
            .take(MAX_LOCATIONS)
            .map(|i| {
                let loc = &i["location"];
                let range = loc
                    .get("range")
                    .cloned()
                    .unwrap_or(json!({"start": {"line": 0, "character": 0}}));
                let mut v = self.place(loc["uri"].as_str().unwrap_or_default(), &range, &mut lines);
                v["name"] = i["name"].clone();
                v["kind"] = json!(symbol_kind(i["kind"].as_u64().unwrap_or(0)));
                if let Some(c) = i["containerName"].as_str().filter(|c| !c.is_empty()) {
                    v["container"] = json!(c);
                }
                v
            })
            .collect();
        Ok(
            json!({"query": query, "symbols": symbols, "total": total, "cut": total > MAX_LOCATIONS}),
        )
    }

    fn calls(
        &self,
        pos: &Pos,
        incoming: bool,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let doc = self.doc(&pos.path)?;
        let (s, lang) = self.server(&doc, used)?;
        if !s.provides("callHierarchyProvider") {
            return Err(format!(
                "the {} language server ({}) does not support call hierarchy; use lsp_references instead",
                lang.name,
                lang.command.first().map(|p| program_name(p)).unwrap_or_default()
            ));
        }
        let (position, _) = self.position(&doc, pos)?;
        self.open(&s, &lang, &doc)?;
        let items = s
            .request(
                "textDocument/prepareCallHierarchy",
                json!({"textDocument": {"uri": uri(&doc.host)}, "position": position}),
                timeout,
            )
            .map_err(|e| with_lang(&lang, e))?;
        let Some(item) = items.as_array().and_then(|a| a.first()).cloned() else {
            return Ok(json!({"item": null, "calls": []}));
        };
        let mut lines = HashMap::new();
        let describe = |this: &Self, i: &Value, lines: &mut HashMap<PathBuf, Option<String>>| {
            let mut v = this.place(
                i["uri"].as_str().unwrap_or_default(),
                &i["selectionRange"],
                lines,
            );
            v["name"] = i["name"].clone();
            v["kind"] = json!(symbol_kind(i["kind"].as_u64().unwrap_or(0)));
            v
        };
        let (method, side) = if incoming {
            ("callHierarchy/incomingCalls", "from")
        } else {
            ("callHierarchy/outgoingCalls", "to")
        };
        let calls = s
            .request(method, json!({"item": item}), timeout)
            .map_err(|e| with_lang(&lang, e))?;
        let calls: Vec<Value> = calls
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .take(MAX_LOCATIONS)
            .map(|c| {
                let mut v = describe(self, &c[side], &mut lines);
                // `fromRanges` are in the caller's file for incoming calls, in this one for
                // outgoing calls.
                let at_uri = if incoming {
                    c[side]["uri"].as_str()
                } else {
                    item["uri"].as_str()
                };
                let at: Vec<Value> = c["fromRanges"]
                    .as_array()
                    .map_or(&[][..], Vec::as_slice)
                    .iter()
                    .take(20)
                    .map(|r| {
                        let p = self.place(at_uri.unwrap_or_default(), r, &mut lines);
                        json!({"line": p["line"], "column": p["column"]})
                    })
                    .collect();
                v["at"] = json!(at);
                v
            })
            .collect();
        Ok(json!({"item": describe(self, &item, &mut lines), "calls": calls}))
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
    pub fn restart(&self, language: Option<&str>) -> Result<Value, String> {
        let names: Vec<String> = match language {
            Some(l) => {
                if self.config.named(l).is_none() {
                    return Err(format!(
                        "no language `{l}` has a server here; languages: {}",
                        self.describe_servers()
                    ));
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

/// A diagnostic as the tools show it.
fn diagnostic(text: &str, d: &Value) -> Value {
    let r = &d["range"];
    let col = |l: &Value, c: &Value| {
        let (l, c) = (l.as_u64().unwrap_or(0), c.as_u64().unwrap_or(0));
        let chars = usize::try_from(l)
            .ok()
            .and_then(|l| line_text(text, l))
            .map_or(c, |t| chars_of_utf16(t, c));
        (l + 1, chars + 1)
    };
    let (sl, sc) = col(&r["start"]["line"], &r["start"]["character"]);
    let (el, ec) = col(&r["end"]["line"], &r["end"]["character"]);
    let message: String = d["message"]
        .as_str()
        .unwrap_or("")
        .chars()
        .take(2000)
        .collect();
    let mut v = json!({
        "line": sl, "column": sc, "end_line": el, "end_column": ec,
        "severity": severity(d["severity"].as_u64()),
        "message": message,
    });
    if let Some(s) = d["source"].as_str() {
        v["source"] = json!(s);
    }
    match &d["code"] {
        Value::String(c) => v["code"] = json!(c),
        Value::Number(n) => v["code"] = json!(n.to_string()),
        _ => {}
    }
    v
}

/// Document symbols (hierarchical `DocumentSymbol`s or flat `SymbolInformation`s) in pre-order.
/// A flat symbol's depth is how many earlier symbols' ranges enclose it (else, one more than
/// its container's, when an earlier symbol has that name).
fn flatten_symbols(text: &str, items: &[Value], depth: u32, out: &mut Vec<Value>) {
    // Ends of the flat symbols enclosing the current one, with their depths.
    let mut open: Vec<((u64, u64), u32)> = Vec::new();
    let end_of = |r: &Value| {
        (
            r["end"]["line"].as_u64().unwrap_or(0),
            r["end"]["character"].as_u64().unwrap_or(0),
        )
    };
    for i in items {
        let depth = match i["location"].get("range") {
            Some(r) => {
                let start = (
                    r["start"]["line"].as_u64().unwrap_or(0),
                    r["start"]["character"].as_u64().unwrap_or(0),
                );
                while open.last().is_some_and(|(end, _)| start >= *end) {
                    open.pop();
                }
                let by_range = open.last().map(|(_, d)| d + 1);
                let by_container = i["containerName"]
                    .as_str()
                    .filter(|c| !c.is_empty())
                    .and_then(|c| out.iter().rev().find(|s| s["name"] == c))
                    .and_then(|s| s["depth"].as_u64())
                    .and_then(|d| u32::try_from(d + 1).ok());
                let d = by_range.or(by_container).unwrap_or(depth);
                open.push((end_of(r), d));
                d
            }
            None => depth,
        };
        if out.len() >= MAX_LOCATIONS * 10 || depth > 32 {
            return;
        }
        let range = i
            .get("selectionRange")
            .or_else(|| i["location"].get("range"))
            .unwrap_or(&Value::Null);
        let full = i
            .get("range")
            .or_else(|| i["location"].get("range"))
            .unwrap_or(&Value::Null);
        let at = |r: &Value, which: &str| {
            let l = r[which]["line"].as_u64().unwrap_or(0);
            let c = r[which]["character"].as_u64().unwrap_or(0);
            let chars = usize::try_from(l)
                .ok()
                .and_then(|l| line_text(text, l))
                .map_or(c, |t| chars_of_utf16(t, c));
            (l + 1, chars + 1)
        };
        let (line, column) = at(range, "start");
        let (end_line, end_column) = at(full, "end");
        let mut v = json!({
            "name": i["name"], "kind": symbol_kind(i["kind"].as_u64().unwrap_or(0)),
            "line": line, "column": column, "end_line": end_line, "end_column": end_column,
            "depth": depth,
        });
        if let Some(d) = i["detail"].as_str().filter(|d| !d.is_empty()) {
            v["detail"] = json!(d);
        }
        if let Some(c) = i["containerName"].as_str().filter(|c| !c.is_empty()) {
            v["container"] = json!(c);
        }
        out.push(v);
        if let Some(children) = i["children"].as_array() {
            flatten_symbols(text, children, depth + 1, out);
        }
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
