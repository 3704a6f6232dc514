//! `type`: ripgrep's file types (`rg -t`), from the `ignore` crate's definitions.
//!
//! A type is a list of globs on the file name (`rust` is `*.rs`; `make` is `Makefile`,
//! `*.mk`, ...). No default glob contains `/`, `{`, `}` or `,`, so the selected types become
//! one glob `{g1,g2,...}` that the host's read-ahead applies while it walks: files of other
//! types are never read.

use ignore::types::TypesBuilder;
use toolgate_guest::files::Include;
use toolgate_guest::{json, ToolError};

/// Names suggested when a type is unknown and nothing close is found.
const COMMON: &[&str] = &[
    "rust", "py", "js", "ts", "go", "java", "c", "cpp", "md", "json", "yaml", "toml",
];

/// The selected types: their names and one filter matching any of their globs.
#[derive(Debug)]
pub struct FileTypes {
    pub names: Vec<String>,
    pub include: Include,
}

/// Every type name and its globs, sorted by name.
pub fn definitions() -> Vec<(String, Vec<String>)> {
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    builder
        .definitions()
        .into_iter()
        .map(|d| (d.name().to_string(), d.globs().to_vec()))
        .collect()
}

/// The types named by `spec` (one name, or several separated by commas), or a `bad-input`
/// error naming the unknown one and a few that exist.
pub fn select(spec: &str) -> Result<FileTypes, ToolError> {
    let defs = definitions();
    let mut names = Vec::new();
    let mut globs: Vec<String> = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some((_, def_globs)) = defs.iter().find(|(n, _)| n == name) else {
            return Err(unknown(name, &defs));
        };
        names.push(name.to_string());
        for g in def_globs {
            if !globs.contains(g) {
                globs.push(g.clone());
            }
        }
    }
    let glob = match globs.as_slice() {
        [one] => one.clone(),
        _ => format!("{{{}}}", globs.join(",")),
    };
    let include = Include::new(&glob).map_err(|e| {
        ToolError::new(
            "bad-input",
            format!("`type` `{spec}` gives a glob that does not compile: {e}"),
        )
    })?;
    Ok(FileTypes { names, include })
}

fn unknown(name: &str, defs: &[(String, Vec<String>)]) -> ToolError {
    let max = if name.len() <= 3 { 1 } else { 2 };
    let mut close: Vec<(usize, &str)> = defs
        .iter()
        .map(|(n, _)| n.as_str())
        .filter_map(|n| {
            let d = distance(name, n);
            (d <= max || (name.len() >= 2 && n.starts_with(name))).then_some((d, n))
        })
        .collect();
    close.sort();
    let close: Vec<&str> = close.into_iter().take(6).map(|(_, n)| n).collect();
    let mut message = format!("`type` `{name}` is not a file type ripgrep knows. ");
    if !close.is_empty() {
        message.push_str(&format!("Close names: {}. ", close.join(", ")));
    }
    message.push_str(&format!(
        "Common ones: {}; all {} names are in data.known_types. Or filter by name with \
         `include` (e.g. `*.ext`).",
        COMMON.join(", "),
        defs.len()
    ));
    let known: Vec<&str> = defs.iter().map(|(n, _)| n.as_str()).collect();
    ToolError::new("bad-input", message).data(json!({"type": name, "known_types": known}))
}

/// Edit distance with adjacent transpositions (`rsut` is 1 from `rust`); type names are
/// short ASCII.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}
