//! Unit tests of `cli/scaffold.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
        toolgate::plugins::Manifest::parse("toolgate-plugin.toml", &read(&manifest_path)).unwrap();
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
    let pkg: serde_json::Value = serde_json::from_str(&read(&js_dir.join("package.json"))).unwrap();
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
