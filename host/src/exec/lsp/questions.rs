//! The questions: diagnostics (a file's, or the workspace's), places (definition,
//! references), symbols and calls, each answered as JSON with the tools' places.

use super::super::convert::{chars_of_utf16, line_text, severity, symbol_kind};
use super::super::langs::Language;
use super::super::{uri, Server};
use super::{
    program_name, with_lang, Doc, LspHost, Pos, MAX_LOCATIONS, MAX_WALK_ENTRIES,
    MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES,
};
use crate::workspace::Access;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

impl LspHost {
    pub(super) fn diagnostics(
        &self,
        raw: &str,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let (doc, s, _) = self.opened(raw, used)?;
        let deadline = Instant::now() + timeout;
        let mut files = Vec::new();
        let mut timed_out = Vec::new();
        self.collect(&s, &doc, deadline, &mut files, &mut timed_out)?;
        Ok(json!({"files": files, "checked": 1, "timed_out": timed_out, "cut": null}))
    }

    /// `doc`'s diagnostics for the text last sent into `files` (or its name into
    /// `timed_out`).
    pub(super) fn collect(
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
            Err(super::super::LspError::Timeout(_)) => {
                timed_out.push(doc.rel.clone());
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Up to `max` workspace files that have a language server, and whether more were left.
    pub(super) fn workspace_files(&self, max: usize) -> (Vec<String>, bool) {
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

    pub(super) fn workspace_diagnostics(
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
        let mut bytes = 0usize;
        let mut more = more;
        for rel in &rels {
            let Ok(doc) = self.doc(rel) else { continue };
            bytes += doc.text.len();
            if bytes > MAX_WORKSPACE_BYTES {
                more = true;
                break;
            }
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
            "cut": more.then(|| format!(
                "only the first {} files were checked (at most {MAX_WORKSPACE_FILES} files and {} MiB of text); give `path` for others",
                opened.len(),
                MAX_WORKSPACE_BYTES >> 20
            )),
        }))
    }

    pub(super) fn describe_servers(&self) -> String {
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
    pub(super) fn locations(
        &self,
        pos: &Pos,
        method: &str,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let (doc, s, lang) = self.opened(&pos.path, used)?;
        let (position, word) = self.position(&doc, pos)?;
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

    pub(super) fn document_symbols(
        &self,
        raw: &str,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let (doc, s, lang) = self.opened(raw, used)?;
        let result = self.symbols_of(&s, &lang, &doc, timeout)?;
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

    pub(super) fn workspace_symbols(
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

    pub(super) fn calls(
        &self,
        pos: &Pos,
        incoming: bool,
        timeout: Duration,
        used: &mut Vec<Value>,
    ) -> Result<Value, String> {
        let (doc, s, lang) = self.opened(&pos.path, used)?;
        if !s.provides("callHierarchyProvider") {
            return Err(format!(
                "the {} language server ({}) does not support call hierarchy; use lsp_references instead",
                lang.name,
                lang.command.first().map(|p| program_name(p)).unwrap_or_default()
            ));
        }
        let (position, _) = self.position(&doc, pos)?;
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
}

/// A diagnostic as the tools show it.
pub(super) fn diagnostic(text: &str, d: &Value) -> Value {
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
pub(super) fn flatten_symbols(text: &str, items: &[Value], depth: u32, out: &mut Vec<Value>) {
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
