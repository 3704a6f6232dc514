//! What a new plugin crate vendors so it builds on a machine without the toolgate repository:
//! the guest SDK (`vendor/toolgate-guest/`, with the WIT packages it binds under its `wit/`),
//! the walk rules it depends on (`vendor/toolgate-walk-rules/`), and a `Cargo.lock` pinning the
//! versions toolgate's own tools are built with. All of it is carried in the binary
//! (`host/build.rs` writes the list), so what a plugin builds against is exactly the SDK of the
//! `toolgate` that scaffolded it.

use anyhow::{anyhow, Context, Result};
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/plugin_kit.rs"));

/// Where the vendored SDK goes in a new crate, relative to its root.
pub(super) const SDK_DIR: &str = "vendor/toolgate-guest";
/// Where the vendored walk rules go.
const RULES_DIR: &str = "vendor/toolgate-walk-rules";

fn kit(rel: &str) -> Result<&'static [u8]> {
    KIT.iter()
        .find(|(r, _)| *r == rel)
        .map(|(_, bytes)| *bytes)
        .ok_or_else(|| anyhow!("this toolgate was built without `{rel}` in its plugin kit"))
}

/// The WIT files a plugin may use, as `(path under wit/, text)`, in name order.
pub(super) fn wit_files() -> Vec<(&'static str, &'static str)> {
    KIT.iter()
        .filter_map(|(rel, bytes)| {
            let rel = rel.strip_prefix("wit/")?;
            Some((rel, std::str::from_utf8(bytes).ok()?))
        })
        .collect()
}

/// Write the vendored SDK, walk rules and lock file into the new crate at `dir`. Returns the
/// files written.
pub(super) fn vendor(dir: &Path) -> Result<Vec<PathBuf>> {
    let workspace: toml::Table = toml::from_str(text(kit("workspace.toml")?)?)
        .context("the kit's workspace manifest is not TOML")?;
    let mut written = Vec::new();
    let mut put = |rel: String, bytes: &[u8]| -> Result<()> {
        let path = dir.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    for (rel, bytes) in KIT {
        if let Some(rest) = rel.strip_prefix("sdk/") {
            let out = if rest == "Cargo.toml" {
                standalone_manifest(text(bytes)?, &workspace)?.into_bytes()
            } else if rest.ends_with(".rs") {
                // The bindings name the WIT folder beside the vendored crate, not the checkout's.
                text(bytes)?
                    .replace("\"../../tools-wit/wit/", "\"wit/")
                    .into_bytes()
            } else {
                bytes.to_vec()
            };
            put(format!("{SDK_DIR}/{rest}"), &out)?;
        } else if let Some(rest) = rel.strip_prefix("walk-rules/") {
            put(format!("{RULES_DIR}/{rest}"), bytes)?;
        } else if rel.starts_with("wit/") {
            put(format!("{SDK_DIR}/{rel}"), bytes)?;
        } else if *rel == "Cargo.lock" {
            put("Cargo.lock".into(), bytes)?;
        }
    }
    Ok(written)
}

fn text(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).context("a file of the plugin kit is not UTF-8")
}

/// The SDK's manifest with everything it inherits from the guest workspace written out, and
/// its walk-rules dependency pointing at the vendored copy.
fn standalone_manifest(manifest: &str, workspace: &toml::Table) -> Result<String> {
    use toml::Value;
    let mut m: toml::Table = toml::from_str(manifest).context("the SDK's manifest")?;
    let ws = workspace
        .get("workspace")
        .and_then(Value::as_table)
        .ok_or_else(|| anyhow!("the kit's workspace manifest has no [workspace]"))?;
    let empty = toml::Table::new();
    let pkg_defaults = ws
        .get("package")
        .and_then(Value::as_table)
        .unwrap_or(&empty);
    let dep_defaults = ws
        .get("dependencies")
        .and_then(Value::as_table)
        .unwrap_or(&empty);
    if let Some(Value::Table(pkg)) = m.get_mut("package") {
        for (key, value) in pkg.iter_mut() {
            if inherits(value) {
                *value = pkg_defaults
                    .get(key)
                    .cloned()
                    .ok_or_else(|| anyhow!("the workspace has no package.{key}"))?;
            }
        }
    }
    let fix_deps = |deps: &mut toml::Table| -> Result<()> {
        for (name, dep) in deps.iter_mut() {
            if inherits(dep) {
                let mut full = match dep_defaults.get(name) {
                    Some(Value::String(v)) => {
                        let mut t = toml::Table::new();
                        t.insert("version".into(), Value::String(v.clone()));
                        t
                    }
                    Some(Value::Table(t)) => t.clone(),
                    _ => return Err(anyhow!("the workspace has no dependency `{name}`")),
                };
                if let Value::Table(own) = &*dep {
                    for (k, v) in own {
                        if k == "workspace" {
                            continue;
                        }
                        if k == "features" {
                            let mut all = full
                                .get("features")
                                .and_then(Value::as_array)
                                .cloned()
                                .unwrap_or_default();
                            all.extend(v.as_array().cloned().unwrap_or_default());
                            full.insert(k.clone(), Value::Array(all));
                        } else {
                            full.insert(k.clone(), v.clone());
                        }
                    }
                }
                *dep = Value::Table(full);
            } else if name == "toolgate-walk-rules" {
                let mut t = toml::Table::new();
                t.insert(
                    "path".into(),
                    Value::String("../toolgate-walk-rules".into()),
                );
                *dep = Value::Table(t);
            }
        }
        Ok(())
    };
    if let Some(Value::Table(deps)) = m.get_mut("dependencies") {
        fix_deps(deps)?;
    }
    if let Some(Value::Table(targets)) = m.get_mut("target") {
        for (_, t) in targets.iter_mut() {
            if let Some(Value::Table(deps)) = t.get_mut("dependencies") {
                fix_deps(deps)?;
            }
        }
    }
    if m.get("lints").is_some_and(inherits) {
        match ws.get("lints") {
            Some(lints) => {
                m.insert("lints".into(), lints.clone());
            }
            None => {
                m.remove("lints");
            }
        }
    }
    Ok(format!(
        "# The toolgate guest SDK, vendored by `toolgate plugin new` from the toolgate that made\n\
         # this crate. Update it with a newer toolgate's `plugin new` (or replace this folder).\n{}",
        toml::to_string(&m).context("writing the SDK's manifest")?
    ))
}

/// `{ workspace = true }`.
fn inherits(value: &toml::Value) -> bool {
    value
        .as_table()
        .and_then(|t| t.get("workspace"))
        .and_then(toml::Value::as_bool)
        == Some(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_sdk_stands_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let files = vendor(tmp.path()).unwrap();
        assert!(files.iter().any(|f| f.ends_with("Cargo.lock")));
        let manifest =
            std::fs::read_to_string(tmp.path().join(SDK_DIR).join("Cargo.toml")).unwrap();
        assert!(!manifest.contains("workspace = true"), "{manifest}");
        let m: toml::Table = toml::from_str(&manifest).unwrap();
        assert_eq!(m["package"]["name"].as_str(), Some("toolgate-guest"));
        assert!(m["package"]["version"].as_str().is_some());
        assert!(m["dependencies"]["wit-bindgen"]["version"]
            .as_str()
            .is_some());
        assert_eq!(
            m["dependencies"]["toolgate-walk-rules"]["path"].as_str(),
            Some("../toolgate-walk-rules")
        );
        let lib = std::fs::read_to_string(tmp.path().join(SDK_DIR).join("src/lib.rs")).unwrap();
        assert!(
            !lib.contains("../../tools-wit"),
            "the bindings still name the checkout"
        );
        assert!(tmp
            .path()
            .join(SDK_DIR)
            .join("wit/since_v0.1.0/tool.wit")
            .is_file());
        assert!(tmp.path().join(RULES_DIR).join("src/lib.rs").is_file());
        // Nothing names the checkout this toolgate was built from.
        let checkout = env!("CARGO_MANIFEST_DIR");
        for f in &files {
            let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
            assert!(!text.contains(checkout), "{} names {checkout}", f.display());
        }
    }

    #[test]
    fn wit_lists_the_tool_world() {
        let files = wit_files();
        let tool = files
            .iter()
            .find(|(p, _)| *p == "since_v0.1.0/tool.wit")
            .unwrap();
        assert!(tool.1.contains("package toolgate:tool@0.1.0;"));
    }
}
