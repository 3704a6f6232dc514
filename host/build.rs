//! Builds the guest components listed in `host/builtins.toml` (the built-in tools, the test
//! components and the example plugin, all in `guest-tools/`) for `wasm32-wasip2` so the
//! `toolgate` binary can carry the tools, and writes the table's rows for the registry and the
//! `Builtin` enum into `$OUT_DIR/builtins.rs`. Installs the `wasm32-wasip2` target with rustup
//! when it is missing, since `RUSTUP_AUTO_INSTALL=0` machines never do it on their own.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

#[path = "build/builtins.rs"]
mod builtins;

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
    write_plugin_kit(&repo)?;
    let table = builtin_table(&manifest_dir, &guests)?;

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
    for guest in table.artifacts() {
        let file = out.join(format!("{guest}.wasm"));
        if !file.is_file() {
            return Err(format!(
                "the guest build did not produce {}",
                file.display()
            ));
        }
    }
    println!("cargo:rustc-env=TOOLGATE_GUEST_DIR={}", out.display());
    // The digests of the built-ins, computed here once instead of at every start (the
    // registry names each tool's digest and keys its compiled artifact by it).
    for guest in table.embedded() {
        let file = out.join(format!("{guest}.wasm"));
        let bytes =
            std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        println!(
            "cargo:rustc-env=TOOLGATE_SHA256_{guest}={}",
            hex(&sha256(&bytes))
        );
    }
    Ok(())
}

/// Read `host/builtins.toml`, check its crates are guest workspace members and write
/// `$OUT_DIR/builtins.rs` from it.
fn builtin_table(manifest_dir: &Path, guests: &Path) -> Result<builtins::Table, String> {
    let path = manifest_dir.join("builtins.toml");
    println!("cargo:rerun-if-changed={}", path.display());
    let table = builtins::read(&path)?;
    builtins::check_members(&table, &guests.join("Cargo.toml"))?;
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?).join("builtins.rs");
    std::fs::write(&out, table.generated())
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let out = out.with_file_name("parts.rs");
    std::fs::write(&out, table.generated_parts())
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    Ok(table)
}

/// `$OUT_DIR/plugin_kit.rs`: every file a new plugin crate vendors (`toolgate plugin new`), so
/// it builds without this checkout: the guest SDK and the walk rules (manifests and sources),
/// the WIT packages, the guest workspace's manifest (for the inherited settings) and lock file.
fn write_plugin_kit(repo: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    let guests = repo.join("guest-tools");
    for (from, to) in [
        (guests.join("sdk"), "sdk"),
        (repo.join("walk-rules"), "walk-rules"),
    ] {
        files.push((format!("{to}/Cargo.toml"), from.join("Cargo.toml")));
        collect(&from.join("src"), &format!("{to}/src"), &mut files)?;
    }
    collect(&repo.join("tools-wit").join("wit"), "wit", &mut files)?;
    files.push(("workspace.toml".into(), guests.join("Cargo.toml")));
    files.push(("Cargo.lock".into(), guests.join("Cargo.lock")));
    files.sort();
    let mut text = String::from(
        "/// Generated by host/build.rs: (path in the kit, contents).\npub const KIT: &[(&str, &[u8])] = &[\n",
    );
    for (rel, abs) in &files {
        text.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?})),\n",
            abs.display().to_string()
        ));
    }
    text.push_str("];\n");
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?).join("plugin_kit.rs");
    std::fs::write(&out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// Every file below `dir`, as `(prefix/relative path, path)`.
fn collect(dir: &Path, prefix: &str, into: &mut Vec<(String, PathBuf)>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            collect(&path, &format!("{prefix}/{name}"), into)?;
        } else if path.is_file() {
            into.push((format!("{prefix}/{name}"), path));
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (FIPS 180-4). The build script has no dependencies; the registry's unit test
/// checks these digests against the `sha2` crate.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, word) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&word.to_be_bytes());
    }
    out
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
    // The walk rules shared with the host (a path dependency of the guest SDK).
    let rules = guests.join("..").join("walk-rules");
    println!(
        "cargo:rerun-if-changed={}",
        rules.join("Cargo.toml").display()
    );
    println!("cargo:rerun-if-changed={}", rules.join("src").display());
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
                // The model-facing description, embedded with `include_str!`.
                println!(
                    "cargo:rerun-if-changed={}",
                    path.join("description.md").display()
                );
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
