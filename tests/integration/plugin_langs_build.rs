//! Building the Python and JavaScript plugins for the tests and the bench: the toolchains come
//! from `tests/scripts/install-plugin-toolchains.sh` (PyPI and npm, cached under
//! `target/plugin-toolchains/`), and each component is built from a copy of its sources under
//! `target/tmp/plugin-langs/` (nothing is written into the source tree) and kept there keyed by
//! the sha256 of its sources, so a second test process, or the bench, reuses it.

#![allow(dead_code)]

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The installed toolchains; `None` with the reason when one could not be installed.
pub struct Toolchains {
    pub python: Result<PathBuf, String>,
    pub js: Result<PathBuf, String>,
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-langs")
}

/// Run the install script (it reuses its cache) and read which toolchains it reports.
pub fn toolchains() -> Toolchains {
    let script = repo().join("tests/scripts/install-plugin-toolchains.sh");
    let out = Command::new("bash").arg(&script).output();
    let (stdout, stderr) = match &out {
        Ok(o) => (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (
            String::new(),
            format!("cannot run {}: {e}", script.display()),
        ),
    };
    let find = |key: &str, what: &str| -> Result<PathBuf, String> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(PathBuf::from)
            .ok_or_else(|| {
                let why: Vec<&str> = stderr
                    .lines()
                    .filter(|l| l.starts_with(&format!("{key} toolchain")))
                    .collect();
                format!("{what} is not installed: {}", why.join("; "))
            })
    };
    Toolchains {
        python: find("python", "componentize-py (PyPI)"),
        js: find("js", "componentize-js (npm)"),
    }
}

/// sha256 over every file under `dir` (names and bytes, in name order), skipping build
/// leftovers.
fn tree_digest(dir: &Path, hasher: &mut Sha256) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if matches!(name.as_str(), "__pycache__" | "node_modules" | ".venv")
            || name.ends_with(".wasm")
        {
            continue;
        }
        if p.is_dir() {
            tree_digest(&p, hasher);
        } else {
            hasher.update(name.as_bytes());
            hasher.update(std::fs::read(&p).unwrap());
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_owned();
        let s = name.to_string_lossy();
        if s == "__pycache__" || s == "node_modules" || s == ".venv" || s.ends_with(".wasm") {
            continue;
        }
        if p.is_dir() {
            copy_tree(&p, &to.join(&name));
        } else {
            std::fs::copy(&p, to.join(&name)).unwrap();
        }
    }
}

/// The language of a plugin's sources.
#[derive(Clone, Copy, Debug)]
pub enum Lang {
    Python,
    Js,
}

/// Build the plugin whose sources are in `src` (world `world`; for Python the WIT folder is
/// `wit_dir`, relative to `src` or absolute) into a cached component. `label` names it in
/// messages and file names.
pub fn build(
    tc: &Path,
    lang: Lang,
    label: &str,
    src: &Path,
    wit_dir: &str,
    world: &str,
) -> Result<PathBuf, String> {
    let mut h = Sha256::new();
    h.update(format!("{lang:?} {wit_dir} {world} {}", tc.display()));
    tree_digest(src, &mut h);
    if !Path::new(wit_dir).is_relative() {
        tree_digest(Path::new(wit_dir), &mut h);
    }
    let key = hex::encode(&h.finalize()[..8]);
    let out = work_dir().join(format!("{label}-{key}.wasm"));
    if out.is_file() {
        return Ok(out);
    }
    let build_dir = work_dir().join(format!("{label}-{key}.src"));
    let _ = std::fs::remove_dir_all(&build_dir);
    copy_tree(src, &build_dir);
    let partial = work_dir().join(format!("{label}-{key}.partial.wasm"));
    let mut cmd = Command::new(tc);
    match lang {
        Lang::Python => {
            cmd.args(["-d", wit_dir, "-w", world, "componentize", "app", "-o"])
                .arg(&partial)
                .env("PYTHONDONTWRITEBYTECODE", "1");
        }
        Lang::Js => {
            cmd.args(["app.js", "--wit", wit_dir, "--world-name", world, "-o"])
                .arg(&partial);
        }
    }
    let started = std::time::Instant::now();
    let o = cmd
        .current_dir(&build_dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tc.display()))?;
    if !o.status.success() || !partial.is_file() {
        return Err(format!(
            "building {label} with {} failed ({}):\n{}\n{}",
            tc.display(),
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    std::fs::rename(&partial, &out).unwrap();
    let _ = std::fs::remove_dir_all(&build_dir);
    eprintln!(
        "built {label} ({} bytes) in {:.1} s",
        std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0),
        started.elapsed().as_secs_f64()
    );
    Ok(out)
}

/// The Python word-count example.
pub fn word_count_py(tc: &Path) -> Result<PathBuf, String> {
    let src = repo().join("guest-tools/examples/word-count-py");
    let wit = repo().join("tools-wit/wit/since_v0.1.0");
    build(
        tc,
        Lang::Python,
        "word-count-py",
        &src,
        wit.to_str().unwrap(),
        "tool",
    )
}

/// The JavaScript word-count example.
pub fn word_count_js(tc: &Path) -> Result<PathBuf, String> {
    let src = repo().join("guest-tools/examples/word-count-js");
    build(tc, Lang::Js, "word-count-js", &src, "wit", "plugin")
}

/// The hostile Python test plugin.
pub fn hostile_py(tc: &Path) -> Result<PathBuf, String> {
    let src = repo().join("tests/plugins/hostile-py");
    build(tc, Lang::Python, "hostile-py", &src, "wit", "plugin")
}

/// Whether a missing toolchain must fail the test instead of skipping it (on CI, where the
/// registries are reachable).
pub fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
        || std::env::var_os("TOOLGATE_REQUIRE_PLUGIN_TOOLCHAINS").is_some()
}
