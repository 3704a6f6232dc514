//! `toolgate plugin new`: a new plugin crate to start from. The files are fixed templates with
//! placeholders replaced by plain text substitution (`__NAME__` the plugin's name, `__CRATE__`
//! the library's crate name, `__SDK__` the SDK path escaped for a TOML string).

#[path = "scaffold_js.rs"]
mod js;
#[path = "scaffold_py.rs"]
mod py;
#[path = "scaffold_rust.rs"]
mod rust;

use super::exit::Usage;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

use rust::{FILES, MANIFEST};

/// Create a new plugin crate called `name` at `dir` (which must not exist or be empty),
/// depending on the guest SDK crate at `sdk`, or on a copy vendored into the crate when `sdk`
/// is `None` ([`super::kit`]). Returns the files written.
pub(crate) fn scaffold(name: &str, dir: &Path, sdk: Option<&Path>) -> Result<Vec<PathBuf>> {
    check_target(name, dir)?;
    let sdk_toml = match sdk {
        Some(sdk) => {
            let sdk = std::path::absolute(sdk)
                .with_context(|| format!("cannot make the SDK path {} absolute", sdk.display()))?;
            let Some(sdk_text) = sdk.to_str() else {
                bail!(
                    "the SDK path {} is not valid UTF-8; move the SDK or pass another --sdk",
                    sdk.display()
                );
            };
            toml_escape(sdk_text)
        }
        None => super::kit::SDK_DIR.to_string(),
    };
    let crate_name = format!("toolgate_plugin_{}", name.replace('-', "_"));

    let mut written = Vec::new();
    for (rel, template) in FILES {
        // `__SDK__` last: a path may contain anything, a name cannot contain placeholders.
        let text = template
            .replace("__NAME__", name)
            .replace("__CRATE__", &crate_name)
            .replace("__SDK__", &sdk_toml);
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        write_new(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    if sdk.is_none() {
        written.extend(super::kit::vendor(dir)?);
    }
    Ok(written)
}

/// Refuse an invalid plugin name, and a `dir` that is a file or a non-empty directory.
fn check_target(name: &str, dir: &Path) -> Result<()> {
    if !toolgate::plugins::manifest::valid_plugin_name(name) {
        return Err(Usage(format!(
            "`{name}` is not a valid plugin name: use 1-40 of a-z, 0-9, `-`, `_`, starting with a letter (e.g. `word-count`)"
        )).into());
    }
    if dir.exists() {
        if !dir.is_dir() {
            return Err(Usage(format!(
                "{} exists and is not a directory; pick another place with --dir",
                dir.display()
            ))
            .into());
        }
        let mut entries = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read the directory {}", dir.display()))?;
        if entries.next().is_some() {
            return Err(Usage(format!(
                "{} exists and is not empty; pick a new directory with --dir",
                dir.display()
            ))
            .into());
        }
    }
    Ok(())
}

/// The languages `plugin new` writes a plugin in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Lang {
    /// A Rust crate built with cargo for wasm32-wasip2, with the vendored SDK.
    #[default]
    Rust,
    /// A Python module built with componentize-py (PyPI).
    #[value(alias = "py")]
    Python,
    /// A JavaScript module built with componentize-js (npm).
    #[value(alias = "javascript")]
    Js,
}

/// Create a new Python or JavaScript plugin called `name` at `dir` (which must not exist or
/// be empty). Returns the files written.
pub(crate) fn scaffold_lang(name: &str, dir: &Path, lang: Lang) -> Result<Vec<PathBuf>> {
    check_target(name, dir)?;
    let tool_wit = super::kit::wit_files()
        .into_iter()
        .find(|(p, _)| p.ends_with("tool.wit"))
        .map(|(_, t)| t)
        .ok_or_else(|| {
            anyhow::anyhow!("this toolgate was built without the tool WIT in its plugin kit")
        })?;
    let files: Vec<(&str, String)> = match lang {
        Lang::Rust => return scaffold(name, dir, None),
        Lang::Python => vec![
            ("app.py", py::APP_PY.to_string()),
            ("toolgate_guest.py", py::HELPERS.to_string()),
            ("wit/tool.wit", tool_wit.to_string()),
            ("toolgate-plugin.toml", MANIFEST.to_string()),
            (
                "README.md",
                py::README.replace("__COMPONENTIZE_PY__", py::COMPONENTIZE_PY),
            ),
            (".gitignore", py::GITIGNORE.to_string()),
        ],
        Lang::Js => {
            let mut files = vec![
                ("app.js", js::app_js()),
                (
                    "package.json",
                    js::PACKAGE_JSON.replace("__COMPONENTIZE_JS__", js::COMPONENTIZE_JS),
                ),
                ("wit/world.wit", js::WORLD.to_string()),
                ("wit/deps/toolgate-tool/tool.wit", tool_wit.to_string()),
            ];
            for (rel, text) in js::WASI_DEPS {
                files.push((rel, text.to_string()));
            }
            files.push(("toolgate-plugin.toml", MANIFEST.to_string()));
            files.push(("README.md", js::README.to_string()));
            files.push((".gitignore", js::GITIGNORE.to_string()));
            files
        }
    };
    let mut written = Vec::new();
    for (rel, template) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        write_new(&path, &template.replace("__NAME__", name))
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Write `text` to a file that must not exist yet.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// `s` escaped for the inside of a TOML basic string (`"..."`).
fn toml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "scaffold_tests.rs"]
mod tests;

/// `toolgate plugin new NAME`.
#[derive(clap::Args)]
pub(super) struct NewArgs {
    /// The plugin's name (a-z, 0-9, `-`, `_`).
    name: String,
    /// Where to create it (default: ./NAME).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Depend on this guest SDK crate (e.g. a toolgate checkout's `guest-tools/sdk`)
    /// instead of the copy vendored into the new crate.
    #[arg(long, value_name = "PATH", conflicts_with = "lang")]
    sdk: Option<PathBuf>,
    /// The plugin's language: rust (a cargo crate), python (componentize-py) or js
    /// (componentize-js).
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
}

/// `plugin new`: write the scaffold and say how to build and install it.
pub(super) fn run_new(args: NewArgs) -> Result<std::process::ExitCode> {
    let NewArgs {
        name,
        dir,
        sdk,
        lang,
    } = args;
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let files = match lang {
        Lang::Rust => scaffold(&name, &dir, sdk.as_deref())?,
        other => scaffold_lang(&name, &dir, other)?,
    };
    for f in &files {
        println!("created {}", f.display());
    }
    let next = match lang {
        Lang::Rust => None,
        Lang::Python => Some(format!(
            "python3 -m venv .venv && .venv/bin/pip install componentize-py=={} && .venv/bin/componentize-py -d wit -w tool componentize app -o {name}.wasm",
            py::COMPONENTIZE_PY
        )),
        Lang::Js => Some("npm install && npm run build".to_string()),
    };
    if let Some(next) = next {
        println!(
            "next: cd {} && {next}, then `toolgate plugin add {name}.wasm` there (see README.md)",
            dir.display()
        );
        return Ok(std::process::ExitCode::SUCCESS);
    }
    println!(
        "next: cd {} && cargo build --release --target wasm32-wasip2, then `toolgate plugin add target/wasm32-wasip2/release/toolgate_plugin_{}.wasm` (see README.md there)",
        dir.display(),
        name.replace('-', "_")
    );
    Ok(std::process::ExitCode::SUCCESS)
}
