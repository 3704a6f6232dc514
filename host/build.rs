//! Builds the built-in guest tools (`guest-tools/`) for `wasm32-wasip2` so the `toolgate`
//! binary can carry them. Installs the `wasm32-wasip2` target with rustup when it is missing,
//! since `RUSTUP_AUTO_INSTALL=0` machines never do it on their own.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// Every guest component the host embeds or the tests load, by artifact file stem
/// (`<stem>.wasm` in the guest target dir): the built-in tools, the test components and the
/// example plugin.
const GUESTS: &[&str] = &[
    "toolgate_tool_read",
    "toolgate_tool_ls",
    "toolgate_tool_glob",
    "toolgate_tool_grep",
    "toolgate_tool_write",
    "toolgate_tool_edit",
    "toolgate_tool_multiedit",
    "toolgate_tool_test_hostile",
    "toolgate_tool_shell",
    "toolgate_tool_job_output",
    "toolgate_tool_job_kill",
    "toolgate_tool_fetch",
    "toolgate_tool_test_plugin",
    "toolgate_tool_test_sockets",
    "toolgate_plugin_word_count",
];

fn main() {
    if let Err(message) = run() {
        // A panic message is what cargo shows for a failed build script; make it the fix.
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let repo = manifest_dir
        .parent()
        .ok_or("host/ has no parent directory")?
        .to_path_buf();
    let guests = repo.join("guest-tools");
    watch(&guests, &repo.join("tools-wit"));

    ensure_target()?;

    let target_dir = guest_target_dir(&repo);
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&guests)
        .args(["build", "--release", "--workspace", "--target", TARGET])
        .arg("--target-dir")
        .arg(&target_dir);
    // The outer build's settings are for the host target; none of them apply to the guests.
    for (key, _) in env::vars() {
        if (key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE")
            || key == "RUSTFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER"
        {
            cmd.env_remove(key);
        }
    }
    let status = cmd
        .status()
        .map_err(|e| format!("could not run cargo to build the guest tools: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the guest tools failed ({status}); run `cargo build --release --target {TARGET}` in {} to see why",
            guests.display()
        ));
    }
    let out = target_dir.join(TARGET).join("release");
    for guest in GUESTS {
        let file = out.join(format!("{guest}.wasm"));
        if !file.is_file() {
            return Err(format!(
                "the guest build did not produce {}",
                file.display()
            ));
        }
    }
    println!("cargo:rustc-env=TOOLGATE_GUEST_DIR={}", out.display());
    Ok(())
}

/// Rebuild when guest sources or the WIT change, but not when anything under a target dir does.
fn watch(guests: &Path, wit: &Path) {
    println!("cargo:rerun-if-changed={}", wit.display());
    println!(
        "cargo:rerun-if-changed={}",
        guests.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        guests.join("Cargo.lock").display()
    );
    println!("cargo:rerun-if-changed={}", guests.join(".cargo").display());
    watch_crates(guests);
    // Example plugins live one level down, in guest-tools/examples/<name>.
    watch_crates(&guests.join("examples"));
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
}

/// Watch the manifest and sources of every crate directly under `dir`.
fn watch_crates(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && path.join("Cargo.toml").is_file() {
                println!(
                    "cargo:rerun-if-changed={}",
                    path.join("Cargo.toml").display()
                );
                println!("cargo:rerun-if-changed={}", path.join("src").display());
            }
        }
    }
}

fn guest_target_dir(repo: &Path) -> PathBuf {
    let base = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { repo.join(p) })
        .unwrap_or_else(|| repo.join("target"));
    base.join("guest")
}

/// Install the wasm32-wasip2 standard library when the active toolchain lacks it.
fn ensure_target() -> Result<(), String> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("could not run `{rustc} --print sysroot`: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .is_dir()
    {
        return Ok(());
    }
    println!(
        "cargo:warning=installing the {TARGET} target with rustup (needed for the guest tools)"
    );
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map_err(|e| format!("the {TARGET} target is missing and rustup could not be run ({e}); install it with `rustup target add {TARGET}`"))?;
    if !status.success() {
        return Err(format!(
            "the {TARGET} target is missing and `rustup target add {TARGET}` failed ({status}); run it by hand and rebuild"
        ));
    }
    Ok(())
}
