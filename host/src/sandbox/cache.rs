//! Compiled artifacts on disk, keyed by the component's digest, the wasmtime version and the
//! engine's settings. A corrupt or foreign entry is rebuilt, never trusted.
//!
//! Each entry is two files with one stem:
//! - `STEM.cwasm`: the artifact exactly as wasmtime serialized it, so a start maps it from the
//!   page cache ([`Component::deserialize_file`]) instead of reading and copying it;
//! - `STEM.json`: a sidecar (its own sha256 on the first line, then JSON) with the artifact's
//!   length and sha256, and the tool's self-description and imports once they are known, so a
//!   listing needs no compiled code at all.
//!
//! The artifact is mapped only after its bytes matched the sidecar's sha256 (streamed, no copy),
//! or when the file is the very one that was hashed: the sidecar records the artifact's identity
//! (device, inode, length, modification and change times) when this host wrote or last verified
//! it, and any write to the file, a rename over it or a copy of the cache changes that identity
//! (the change time is set by the kernel; no call lets user space choose it). Hashing the
//! ~10 MB artifact was a third of a one-shot call's start.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wasmtime::component::Component;
use wasmtime::Engine;

/// What a tool said about itself and what it imports: everything the registry derives a
/// tool's view (risk, schema, ceiling) from, kept beside its artifact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ToolMeta {
    pub name: String,
    pub description: String,
    pub input_schema: String,
    /// `read-only`, `write`, `exec` or `network`, as declared.
    pub risk: String,
    /// `(field, "read" | "write")`.
    pub path_fields: Vec<(String, String)>,
    pub imports: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Sidecar {
    artifact_len: u64,
    artifact_sha256: String,
    /// The artifact file's identity when its bytes last matched `artifact_sha256`.
    #[serde(default)]
    artifact_stamp: Option<Stamp>,
    #[serde(default)]
    meta: Option<ToolMeta>,
}

/// A path that opens the very file `file` is (its `/proc/self/fd` link), else `name` (no
/// `/proc`).
fn opened_path(file: &std::fs::File, name: &Path) -> PathBuf {
    let by_fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    if by_fd.exists() {
        by_fd
    } else {
        name.to_path_buf()
    }
}

/// An artifact whose bytes are the recorded ones: its identity, and the open file checked.
struct Verified {
    stamp: Stamp,
    file: std::fs::File,
}

/// A file's identity: a write to it, a rename over it or a copy changes at least one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt as _;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

pub(crate) struct ArtifactCache {
    dir: Option<PathBuf>,
    engine_key: String,
    /// Say on stderr when a component is compiled (the command line).
    progress: bool,
}

/// Roughly how fast cranelift compiles a component on one core of a small machine (bytes of
/// wasm per second); only for the estimate in the progress line.
const COMPILE_BYTES_PER_SEC: f64 = 1.5e6;

impl ArtifactCache {
    pub(crate) fn new(dir: Option<PathBuf>, engine: &Engine, progress: bool) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}", hasher.finish());
        ArtifactCache {
            dir: dir.or_else(default_dir),
            engine_key,
            progress,
        }
    }

    fn stem(&self, digest: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!(
            "{digest}-{}-toolgate{}",
            self.engine_key,
            env!("CARGO_PKG_VERSION")
        )))
    }

    /// The self-description recorded beside the artifact of the component `digest`, if any
    /// (nothing is compiled or mapped).
    pub(crate) fn meta(&self, digest: &str) -> Option<ToolMeta> {
        read_sidecar(&with_ext(&self.stem(digest)?, "json"))?.meta
    }

    /// The compiled component of `bytes` (whose sha256 is `digest`): mapped from a verified
    /// artifact, or compiled now (and cached). Also the recorded self-description, if any.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        name: &str,
        bytes: &[u8],
        digest: &str,
    ) -> Result<(Component, Option<ToolMeta>)> {
        let Some(stem) = self.stem(digest) else {
            return Ok((self.compile(engine, name, bytes)?, None));
        };
        let (artifact, sidecar) = (with_ext(&stem, "cwasm"), with_ext(&stem, "json"));
        if let Some(mut found) = read_sidecar(&sidecar) {
            if let Some(Verified { stamp, file }) = artifact_matches(&artifact, &found) {
                if found.artifact_stamp != Some(stamp) {
                    // Hashed now (a cache written by an older host, or copied): remember the
                    // file, so the next start need not hash it again. Failing costs only time.
                    found.artifact_stamp = Some(stamp);
                    let _ = write_sidecar(&sidecar, &found);
                }
                if let Some(component) = map_checked(engine, file, &artifact) {
                    return Ok((component, found.meta));
                }
            }
        }
        let component = self.compile(engine, name, bytes)?;
        if let Ok(serialized) = component.serialize() {
            // Failing to cache only costs time on the next start.
            if write_entry(&artifact, &sidecar, &serialized).is_ok() {
                drop(serialized);
                // Served from the artifact just written, checked as at any start, instead of
                // the compiler's copy: mapped, its code is pages of the file, which the kernel
                // shares and can drop, not the process's own memory.
                let checked = read_sidecar(&sidecar).and_then(|f| artifact_matches(&artifact, &f));
                if let Some(mapped) = checked.and_then(|v| map_checked(engine, v.file, &artifact)) {
                    return Ok((mapped, None));
                }
            }
        }
        Ok((component, None))
    }

    /// Record a component's self-description beside its artifact (after a compile).
    pub(crate) fn record_meta(&self, digest: &str, meta: &ToolMeta) {
        let Some(stem) = self.stem(digest) else {
            return;
        };
        let sidecar = with_ext(&stem, "json");
        let Some(mut found) = read_sidecar(&sidecar) else {
            return;
        };
        if found.meta.as_ref() == Some(meta) {
            return;
        }
        found.meta = Some(meta.clone());
        let _ = write_sidecar(&sidecar, &found);
    }

    fn compile(&self, engine: &Engine, name: &str, bytes: &[u8]) -> Result<Component> {
        let started = Instant::now();
        if self.progress {
            let secs = bytes.len() as f64 / COMPILE_BYTES_PER_SEC;
            let estimate = if secs < 0.95 {
                format!("{:.1}", secs.max(0.1))
            } else {
                format!("{secs:.0}")
            };
            eprintln!("toolgate: compiling {name} (first use, ~{estimate} s)…");
        }
        let component = Component::new(engine, bytes).map_err(|e| Error::ComponentLoad {
            name: name.to_string(),
            message: format!("{e:#}"),
        })?;
        tracing::debug!(
            tool = name,
            ms = started.elapsed().as_millis() as u64,
            "compiled"
        );
        Ok(component)
    }
}

/// The artifact `file` (opened from `artifact` and checked against its sidecar), mapped.
fn map_checked(engine: &Engine, file: std::fs::File, artifact: &Path) -> Option<Component> {
    // SAFETY: the file is an artifact this host serialized itself with an engine of the same
    // compatibility hash (it is in the file name), and its bytes matched the length and sha256
    // recorded beside it when it was written (just now, or when this very file, unchanged
    // since, was last hashed), so it is not truncated or corrupted. wasmtime also checks the
    // header. The cache directory is the user's own (files 0600): whoever can replace both
    // files can already run code as the user. It is mapped through the descriptor that was
    // checked (`/proc/self/fd/N` opens that very file), not by its name again: a file renamed
    // over the artifact between the check and the map is not the one mapped.
    let map = opened_path(&file, artifact);
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize_file(engine, &map) };
    drop(file);
    component.ok()
}

fn with_ext(stem: &Path, ext: &str) -> PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// A sidecar is `hex(sha256(json))\n` then the JSON; anything else is ignored.
fn read_sidecar(file: &Path) -> Option<Sidecar> {
    let text = std::fs::read_to_string(file).ok()?;
    let (sum, body) = text.split_once('\n')?;
    if hex::encode(Sha256::digest(body.as_bytes())) != sum {
        return None;
    }
    serde_json::from_str(body).ok()
}

fn write_sidecar(file: &Path, sidecar: &Sidecar) -> std::io::Result<()> {
    let body = serde_json::to_string(sidecar)?;
    let text = format!("{}\n{body}", hex::encode(Sha256::digest(body.as_bytes())));
    crate::fsutil::write_atomic(file, text.as_bytes())
}

/// The artifact file's identity when it has the length and sha256 its sidecar recorded: not
/// read at all when it is the file the sidecar says was verified, else read in blocks (no copy
/// of the whole file) and hashed.
fn artifact_matches(file: &Path, sidecar: &Sidecar) -> Option<Verified> {
    let mut f = std::fs::File::open(file).ok()?;
    let meta = f.metadata().ok()?;
    let stamp = Stamp::of(&meta);
    if !meta.is_file() || meta.len() != sidecar.artifact_len {
        return None;
    }
    if sidecar.artifact_stamp == Some(stamp) {
        return Some(Verified { stamp, file: f });
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                total += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    (total == sidecar.artifact_len && hex::encode(hasher.finalize()) == sidecar.artifact_sha256)
        .then_some(Verified { stamp, file: f })
}

fn write_entry(artifact: &Path, sidecar: &Path, serialized: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = artifact.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::fsutil::write_atomic(artifact, serialized)?;
    // The file as it lies now (the rename was its last change): what the next start checks.
    let artifact_stamp = std::fs::symlink_metadata(artifact)
        .ok()
        .filter(|m| m.is_file() && m.len() == serialized.len() as u64)
        .map(|m| Stamp::of(&m));
    write_sidecar(
        sidecar,
        &Sidecar {
            artifact_len: serialized.len() as u64,
            artifact_sha256: hex::encode(Sha256::digest(serialized)),
            artifact_stamp,
            meta: None,
        },
    )
}

fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TOOLGATE_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("toolgate"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("toolgate"))
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
