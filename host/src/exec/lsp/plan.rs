//! The changes `lsp_rename` and `lsp_replace_symbol` would make, computed before anyone is
//! asked: every file's text now and after, so the prompt shows exactly what is written and the
//! gate can refuse a file that changed in between.

use super::super::convert::apply_edits;
use super::super::{path_of, uri};
use super::{Doc, LspHost, Pos};
use crate::exec::ExecError;
use crate::workspace::Access;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Most files one change may touch.
pub const MAX_FILES: usize = 100;

/// One file a change writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedFile {
    /// Workspace-relative path.
    pub rel: String,
    /// Canonical host path.
    pub host: PathBuf,
    /// Its content now.
    pub old: Vec<u8>,
    /// Its content after the change.
    pub new: Vec<u8>,
    /// How many edits the server made in it.
    pub edits: usize,
}

impl LspHost {
    /// What renaming the symbol at `pos` to `new_name` writes, file by file.
    pub fn plan_rename(
        &self,
        pos: &Pos,
        new_name: &str,
        timeout: Duration,
    ) -> Result<Vec<PlannedFile>, ExecError> {
        self.rename_plan(pos, new_name, timeout)
            .map_err(ExecError::LanguageServer)
    }

    /// What replacing the whole definition of `symbol` (a name, or `Outer.inner`) in the file
    /// at `raw` with `new_text` writes.
    pub fn plan_replace_symbol(
        &self,
        raw: &str,
        symbol: &str,
        new_text: &str,
        timeout: Duration,
    ) -> Result<Vec<PlannedFile>, ExecError> {
        self.replace_symbol_plan(raw, symbol, new_text, timeout)
            .map_err(ExecError::LanguageServer)
    }

    fn rename_plan(
        &self,
        pos: &Pos,
        new_name: &str,
        timeout: Duration,
    ) -> Result<Vec<PlannedFile>, String> {
        let mut used = Vec::new();
        let (doc, s, lang) = self.opened(&pos.path, &mut used)?;
        if !s.provides("renameProvider") {
            return Err(format!(
                "the {} language server does not support renaming",
                lang.name
            ));
        }
        let (position, word) = self.position(&doc, pos)?;
        let edit = s
            .request(
                "textDocument/rename",
                json!({"textDocument": {"uri": uri(&doc.host)}, "position": position, "newName": new_name}),
                timeout,
            )
            .map_err(|e| super::with_lang(&lang, e))?;
        let mut by_file: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        if let Some(changes) = edit["changes"].as_object() {
            for (u, edits) in changes {
                by_file
                    .entry(u.clone())
                    .or_default()
                    .extend(edits.as_array().cloned().unwrap_or_default());
            }
        }
        for dc in edit["documentChanges"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
        {
            if dc.get("kind").is_some() {
                return Err("the rename would create, rename or delete files, which these tools do not do; rename the files with the shell, then the symbol".into());
            }
            let Some(u) = dc["textDocument"]["uri"].as_str() else {
                continue;
            };
            by_file
                .entry(u.to_string())
                .or_default()
                .extend(dc["edits"].as_array().cloned().unwrap_or_default());
        }
        let at = format!("{}:{}", doc.rel, pos.line);
        let planned = self.planned(by_file, &doc)?;
        if planned.is_empty() {
            return Err(format!(
                "the language server found nothing to rename at {at}{}",
                word.map(|w| format!(" (`{w}`)")).unwrap_or_default()
            ));
        }
        Ok(planned)
    }

    fn replace_symbol_plan(
        &self,
        raw: &str,
        symbol: &str,
        new_text: &str,
        timeout: Duration,
    ) -> Result<Vec<PlannedFile>, String> {
        let mut used = Vec::new();
        let (doc, s, lang) = self.opened(raw, &mut used)?;
        let result = self.symbols_of(&s, &lang, &doc, timeout)?;
        let items = result.as_array().map_or(&[][..], Vec::as_slice);
        let path: Vec<&str> = symbol.split('.').filter(|p| !p.is_empty()).collect();
        let mut found = Vec::new();
        find_symbol(items, &path, &mut Vec::new(), &mut found);
        let shown = crate::text::escape_name(&doc.rel);
        let range = match found.as_slice() {
            [one] => one.1.clone(),
            [] => {
                let mut names = Vec::new();
                let mut flat = Vec::new();
                super::questions::flatten_symbols(&doc.text, items, 0, &mut flat);
                for f in flat.iter().take(30) {
                    names.push(f["name"].as_str().unwrap_or("").to_string());
                }
                return Err(format!(
                    "{shown} defines no symbol `{symbol}`; it defines: {}",
                    if names.is_empty() {
                        "nothing the language server lists".into()
                    } else {
                        names.join(", ")
                    }
                ));
            }
            many => {
                let at: Vec<String> = many
                    .iter()
                    .map(|(name, r)| {
                        format!(
                            "{name} at line {}",
                            r["start"]["line"].as_u64().unwrap_or(0) + 1
                        )
                    })
                    .collect();
                return Err(format!(
                    "{shown} defines `{symbol}` {} times ({}); name it with its container (`Outer.{symbol}`)",
                    many.len(),
                    at.join(", ")
                ));
            }
        };
        let mut by_file = BTreeMap::new();
        by_file.insert(
            uri(&doc.host),
            vec![json!({"range": range, "newText": new_text})],
        );
        let planned = self.planned(by_file, &doc)?;
        if planned.is_empty() {
            return Err(format!(
                "`{symbol}` in {shown} already reads exactly as the new text; nothing to change"
            ));
        }
        Ok(planned)
    }

    /// Each file's edits applied to its text now (scoped for writing, read from disk).
    fn planned(
        &self,
        by_file: BTreeMap<String, Vec<Value>>,
        first: &Doc,
    ) -> Result<Vec<PlannedFile>, String> {
        if by_file.len() > MAX_FILES {
            return Err(format!(
                "the change would touch {} files, more than the {MAX_FILES} one call may change",
                by_file.len()
            ));
        }
        let mut out = Vec::new();
        for (u, edits) in by_file {
            let Some(path) = path_of(&u) else {
                return Err(format!(
                    "the language server named a file it cannot mean: {u}"
                ));
            };
            let Ok(rel) = path.strip_prefix(self.workspace.root()) else {
                return Err(format!(
                    "the change would also edit {}, outside the workspace; nothing was changed",
                    path.display()
                ));
            };
            let rel = rel.to_string_lossy().into_owned();
            let scoped = self.scoped(&rel, Access::Write).map_err(|e| {
                format!(
                    "the change would also edit {}: {e}",
                    crate::text::escape_name(&rel)
                )
            })?;
            let text = if scoped.host == first.host {
                first.text.clone()
            } else {
                self.doc(&rel)?.text
            };
            let new = apply_edits(&text, &edits).map_err(|e| {
                format!(
                    "{} ({}): {e}",
                    crate::text::escape_name(&rel),
                    "the change cannot be made"
                )
            })?;
            if new == text {
                continue;
            }
            out.push(PlannedFile {
                rel: scoped.rel,
                host: scoped.host,
                old: text.into_bytes(),
                new: new.into_bytes(),
                edits: edits.len(),
            });
        }
        Ok(out)
    }
}

/// Symbols named by `path` (each part a nesting level; a flat `SymbolInformation` matches its
/// last part with its container as the part before), with their full ranges.
fn find_symbol(
    items: &[Value],
    path: &[&str],
    outer: &mut Vec<String>,
    found: &mut Vec<(String, Value)>,
) {
    let Some(last) = path.last() else { return };
    for i in items {
        let name = i["name"].as_str().unwrap_or("");
        let range = i.get("range").or_else(|| i["location"].get("range"));
        let container = i["containerName"].as_str();
        outer.push(name.to_string());
        let nested_match = outer.len() >= path.len()
            && outer[outer.len() - path.len()..]
                .iter()
                .zip(path)
                .all(|(a, b)| a == b);
        let flat_match = i.get("location").is_some()
            && name == *last
            && (path.len() == 1 || container == Some(path[path.len() - 2]));
        if nested_match || flat_match {
            if let Some(r) = range {
                found.push((outer.join("."), r.clone()));
            }
        }
        if let Some(children) = i["children"].as_array() {
            if outer.len() < 32 {
                find_symbol(children, path, outer, found);
            }
        }
        outer.pop();
    }
}
