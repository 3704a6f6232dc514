//! Compiled artifacts on disk, keyed by the component's digest, the wasmtime version and the
//! engine's settings. A corrupt or foreign entry is rebuilt, never trusted.

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::Engine;

pub(crate) struct ArtifactCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

impl ArtifactCache {
    pub(crate) fn new(dir: Option<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}", hasher.finish());
        ArtifactCache {
            dir: dir.or_else(default_dir),
            engine_key,
        }
    }

    /// The compiled component and the hex sha256 of `bytes`.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        name: &str,
        bytes: &[u8],
    ) -> Result<(Component, String)> {
        let digest = hex::encode(Sha256::digest(bytes));
        let Some(dir) = &self.dir else {
            return Ok((compile(engine, name, bytes)?, digest));
        };
        let file = dir.join(format!(
            "{digest}-{}-toolgate{}.cwasm",
            self.engine_key,
            env!("CARGO_PKG_VERSION")
        ));
        if let Some(component) = read_artifact(engine, &file) {
            return Ok((component, digest));
        }
        let component = compile(engine, name, bytes)?;
        if let Ok(artifact) = component.serialize() {
            // Failing to cache only costs time on the next start.
            let _ = write_artifact(dir, &file, &artifact);
        }
        Ok((component, digest))
    }
}

fn compile(engine: &Engine, name: &str, bytes: &[u8]) -> Result<Component> {
    Component::new(engine, bytes).map_err(|e| Error::ComponentLoad {
        name: name.to_string(),
        message: format!("{e:#}"),
    })
}

/// An artifact file is `sha256(artifact) || artifact`; anything that does not check out is
/// ignored (and rebuilt by the caller).
fn read_artifact(engine: &Engine, file: &Path) -> Option<Component> {
    let bytes = std::fs::read(file).ok()?;
    if bytes.len() < 32 {
        return None;
    }
    let (sum, artifact) = bytes.split_at(32);
    if Sha256::digest(artifact).as_slice() != sum {
        return None;
    }
    // SAFETY: the bytes are an artifact this host serialized itself with an engine of the same
    // compatibility hash (it is in the file name), and they passed the checksum written next to
    // them, so they are not truncated or corrupted. wasmtime also checks the header.
    #[allow(unsafe_code)]
    unsafe {
        Component::deserialize(engine, artifact).ok()
    }
}

fn write_artifact(dir: &Path, file: &Path, artifact: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut bytes = Vec::with_capacity(artifact.len() + 32);
    bytes.extend_from_slice(&Sha256::digest(artifact));
    bytes.extend_from_slice(artifact);
    crate::fsutil::write_atomic(file, &bytes)
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
