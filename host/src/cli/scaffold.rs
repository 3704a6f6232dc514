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
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const PLACEHOLDERS: &[&str] = &["__NAME__", "__CRATE__", "__SDK__"];

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn writes_a_crate_with_the_name_everywhere() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my-tool");
        let sdk = tmp.path().join("sdk");
        let files = scaffold("my-tool", &dir, Some(&sdk)).unwrap();

        let expected: Vec<PathBuf> = FILES.iter().map(|(rel, _)| dir.join(rel)).collect();
        assert_eq!(files, expected);
        for f in &files {
            assert!(f.is_file(), "{} missing", f.display());
            let text = read(f);
            for p in PLACEHOLDERS {
                assert!(!text.contains(p), "{} still has {p}", f.display());
            }
        }

        let manifest_path = dir.join("toolgate-plugin.toml");
        let manifest =
            toolgate::plugins::Manifest::parse("toolgate-plugin.toml", &read(&manifest_path))
                .unwrap();
        assert_eq!(manifest.name, "my-tool");
        assert_eq!(manifest.wit, "toolgate:tool@0.1.0");
        assert_eq!(manifest.capabilities.fs_read, ["."]);
        assert!(manifest.sha256.is_none());

        let cargo: toml::Table = toml::from_str(&read(&dir.join("Cargo.toml"))).unwrap();
        assert_eq!(
            cargo["package"]["name"].as_str(),
            Some("toolgate-plugin-my-tool")
        );
        assert_eq!(cargo["package"]["edition"].as_str(), Some("2021"));
        assert_eq!(
            cargo["lib"]["crate-type"].as_array().unwrap()[0].as_str(),
            Some("cdylib")
        );
        assert_eq!(
            cargo["dependencies"]["toolgate-guest"]["path"].as_str(),
            sdk.to_str()
        );
        assert!(cargo["workspace"].as_table().unwrap().is_empty());
        assert_eq!(cargo["profile"]["release"]["panic"].as_str(), Some("abort"));

        let lib = read(&dir.join("src/lib.rs"));
        assert!(lib.contains("\"my-tool\","), "{lib}");
        assert!(lib.contains("toolgate_guest::register_tool!(Plugin);"));
        let readme = read(&dir.join("README.md"));
        assert!(readme.contains("plugin__my-tool"), "{readme}");
        assert!(readme.contains("toolgate_plugin_my_tool.wasm"), "{readme}");
        assert_eq!(read(&dir.join(".gitignore")), "/target\n");
    }

    #[test]
    fn the_sdk_path_is_absolute_and_escaped() {
        let tmp = tempfile::tempdir().unwrap();
        let sdk = tmp.path().join("we\"ird\\sdk");
        let dir = tmp.path().join("p");
        scaffold("p", &dir, Some(&sdk)).unwrap();
        let cargo: toml::Table = toml::from_str(&read(&dir.join("Cargo.toml"))).unwrap();
        assert_eq!(
            cargo["dependencies"]["toolgate-guest"]["path"].as_str(),
            sdk.to_str()
        );

        let dir = tmp.path().join("q");
        scaffold("q", &dir, Some(Path::new("relative/sdk"))).unwrap();
        let cargo: toml::Table = toml::from_str(&read(&dir.join("Cargo.toml"))).unwrap();
        let path = cargo["dependencies"]["toolgate-guest"]["path"]
            .as_str()
            .unwrap();
        assert!(Path::new(path).is_absolute(), "{path}");
        assert!(path.ends_with("relative/sdk"), "{path}");
    }

    #[test]
    fn an_empty_existing_directory_is_used() {
        let tmp = tempfile::tempdir().unwrap();
        let files = scaffold("x1", tmp.path(), Some(Path::new("/sdk"))).unwrap();
        assert_eq!(files.len(), FILES.len());
    }

    #[test]
    fn bad_names_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let long = "a".repeat(41);
        for bad in [
            "",
            "Tool",
            "1tool",
            "-tool",
            "_tool",
            "my tool",
            "my.tool",
            "a/b",
            "../x",
            "tööl",
            long.as_str(),
        ] {
            let dir = tmp.path().join("d");
            let err = scaffold(bad, &dir, None).unwrap_err();
            assert!(
                err.to_string().contains("not a valid plugin name"),
                "{bad}: {err}"
            );
            assert!(!dir.exists(), "{bad}: something was written");
        }
        assert!(scaffold(&"a".repeat(40), &tmp.path().join("ok"), None).is_ok());
    }

    #[test]
    fn python_and_js_plugins_get_their_sources_wit_manifest_and_readme() {
        let tmp = tempfile::tempdir().unwrap();
        let py_dir = tmp.path().join("py-tool");
        let files = scaffold_lang("py-tool", &py_dir, Lang::Python).unwrap();
        let js_dir = tmp.path().join("js-tool");
        let js_files = scaffold_lang("js-tool", &js_dir, Lang::Js).unwrap();
        for f in files.iter().chain(&js_files) {
            let text = read(f);
            assert!(
                !text.contains("__NAME__"),
                "{} still has __NAME__",
                f.display()
            );
            assert!(!text.contains("__COMPONENTIZE"), "{}", f.display());
        }
        for (dir, name) in [(&py_dir, "py-tool"), (&js_dir, "js-tool")] {
            let m = toolgate::plugins::Manifest::parse(
                "toolgate-plugin.toml",
                &read(&dir.join("toolgate-plugin.toml")),
            )
            .unwrap();
            assert_eq!(m.name, name);
            assert_eq!(m.capabilities.fs_read, ["."]);
            let readme = read(&dir.join("README.md"));
            assert!(
                readme.contains(&format!(
                    "toolgate plugin add /path/to/this/folder/{name}.wasm"
                )),
                "{readme}"
            );
            assert!(
                readme.contains(&format!("toolgate call plugin__{name} ")),
                "{readme}"
            );
        }
        // Python: the app, the helpers, the binary's WIT, and the pinned toolchain.
        let app = read(&py_dir.join("app.py"));
        assert!(
            app.contains("class WitWorld(wit_world.WitWorld):") && app.contains("name=\"py-tool\""),
            "{app}"
        );
        assert!(read(&py_dir.join("toolgate_guest.py")).contains("def is_denied"));
        assert!(read(&py_dir.join("wit/tool.wit")).contains("package toolgate:tool@0.1.0;"));
        let readme = read(&py_dir.join("README.md"));
        assert!(
            readme.contains(&format!(
                "pip install componentize-py=={}",
                py::COMPONENTIZE_PY
            )),
            "{readme}"
        );
        assert!(
            readme.contains("componentize-py -d wit -w tool componentize app -o py-tool.wasm"),
            "{readme}"
        );
        // JavaScript: one module with the helpers, the world with its WASI deps, package.json.
        let app = read(&js_dir.join("app.js"));
        assert!(
            app.contains("import { getDirectories }")
                && app.contains("class Budget")
                && app.contains("export function call(")
                && app.contains("name: \"js-tool\""),
            "{app}"
        );
        assert!(
            !app.contains("word-count"),
            "the example's tool leaked into the scaffold"
        );
        assert!(read(&js_dir.join("wit/world.wit")).contains("include toolgate:tool/tool@0.1.0;"));
        assert!(read(&js_dir.join("wit/deps/toolgate-tool/tool.wit"))
            .contains("package toolgate:tool@0.1.0;"));
        assert!(read(&js_dir.join("wit/deps/wasi-filesystem/package.wit"))
            .contains("package wasi:filesystem@0.2.12;"));
        let pkg: serde_json::Value =
            serde_json::from_str(&read(&js_dir.join("package.json"))).unwrap();
        assert_eq!(
            pkg["devDependencies"]["@bytecodealliance/componentize-js"],
            js::COMPONENTIZE_JS
        );
        assert!(pkg["scripts"]["build"]
            .as_str()
            .unwrap()
            .ends_with("-o js-tool.wasm"));
        // The same refusals as for a Rust crate.
        let err = scaffold_lang("Bad", &tmp.path().join("bad"), Lang::Python).unwrap_err();
        assert!(err.to_string().contains("not a valid plugin name"), "{err}");
        let err = scaffold_lang("py-tool", &py_dir, Lang::Js).unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
    }

    #[test]
    fn a_non_empty_directory_or_a_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("keep.txt"), "mine").unwrap();
        let err = scaffold("p", tmp.path(), None).unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
        assert!(!tmp.path().join("Cargo.toml").exists());
        assert_eq!(read(&tmp.path().join("keep.txt")), "mine");

        let file = tmp.path().join("keep.txt");
        let err = scaffold("p", &file, None).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }
}

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
