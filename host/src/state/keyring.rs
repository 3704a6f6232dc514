//! The per-user signing key (`signing.key`, 0600, kept outside every workspace) that signs
//! the host state toolgate itself writes into a workspace: project grants, plugin records and
//! session grants. An entry a repository shipped (or anyone else wrote) carries no valid
//! signature and is ignored, because the key never enters a workspace.

use crate::workspace::layout::read_state_file;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Write a file of the user's own (0600, atomically), creating its directory (0700).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    crate::fsutil::write_atomic(path, bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The per-user signing key, loaded on first use and created only when something is signed.
pub struct Keyring {
    path: PathBuf,
    /// Cached once found (a missing key is looked for again: another process may create it).
    key: OnceLock<[u8; 32]>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring").field("path", &self.path).finish()
    }
}

impl Keyring {
    /// The key kept in `config_dir/signing.key`.
    pub fn new(config_dir: &Path) -> Self {
        Keyring {
            path: config_dir.join("signing.key"),
            key: OnceLock::new(),
        }
    }

    /// The key file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn load(&self) -> Option<[u8; 32]> {
        if let Some(k) = self.key.get() {
            return Some(*k);
        }
        let bytes = read_state_file(&self.path).ok()??;
        let text = String::from_utf8(bytes).ok()?;
        let raw = hex::decode(text.trim()).ok()?;
        let key: [u8; 32] = raw.try_into().ok()?;
        Some(*self.key.get_or_init(|| key))
    }

    fn load_or_create(&self) -> Result<[u8; 32], String> {
        if let Some(k) = self.load() {
            return Ok(k);
        }
        let mut key = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| format!("cannot read random bytes for a signing key: {e}"))?;
        // Created with link(2) from a private temp file, so two processes creating it at once
        // agree on one key: the loser reads the winner's.
        let tmp = self
            .path
            .with_extension(format!("tmp-{}", std::process::id()));
        write_private(&tmp, format!("{}\n", hex::encode(key)).as_bytes())?;
        let linked = std::fs::hard_link(&tmp, &self.path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", self.path.display())),
        }
        let on_disk = read_state_file(&self.path)?
            .and_then(|b| hex::decode(String::from_utf8_lossy(&b).trim()).ok())
            .and_then(|raw| <[u8; 32]>::try_from(raw).ok())
            .ok_or_else(|| {
                format!(
                    "{} does not hold a key; delete it and toolgate makes a new one (your grants must then be added again)",
                    self.path.display()
                )
            })?;
        Ok(*self.key.get_or_init(|| on_disk))
    }

    /// Sign `parts` (joined unambiguously): `hmac-sha256:<hex>`. Creates the key on first use.
    pub fn sign(&self, parts: &[&str]) -> Result<String, String> {
        let key = self.load_or_create()?;
        Ok(format!("hmac-sha256:{}", hex::encode(hmac(&key, parts))))
    }

    /// Whether `signature` is this user's signature of `parts`. Without a key nothing verifies.
    pub fn verify(&self, parts: &[&str], signature: &str) -> bool {
        let Some(key) = self.load() else {
            return false;
        };
        let Some(hexsig) = signature.strip_prefix("hmac-sha256:") else {
            return false;
        };
        let Ok(given) = hex::decode(hexsig) else {
            return false;
        };
        let want = hmac(&key, parts);
        given.len() == want.len()
            && given
                .iter()
                .zip(want.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// HMAC-SHA256 (RFC 2104) of `parts`, each length-prefixed so no two lists collide.
fn hmac(key: &[u8; 32], parts: &[&str]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    for p in parts {
        inner.update((p.len() as u64).to_be_bytes());
        inner.update(p.as_bytes());
    }
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_shape_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let k = Keyring::new(dir.path());
        assert!(
            !k.verify(&["a"], "hmac-sha256:00"),
            "no key, nothing verifies"
        );
        let s = k.sign(&["ws", "write:**"]).unwrap();
        assert!(k.verify(&["ws", "write:**"], &s));
        assert!(!k.verify(&["ws", "write:*"], &s));
        assert!(!k.verify(&["wswrite:**"], &s), "parts are length-prefixed");
        // Another user's key signs differently.
        let other = tempfile::tempdir().unwrap();
        let k2 = Keyring::new(other.path());
        assert!(!k2.verify(&["ws", "write:**"], &s));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(k.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is private");
    }
}
