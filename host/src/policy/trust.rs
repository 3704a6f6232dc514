//! What the user has trusted, kept outside every workspace.
//!
//! - [`TrustStore`]: `$XDG_CONFIG_HOME/toolgate/trust.toml` records, per canonical workspace
//!   path, the sha256 of the workspace policy the user looked at and trusted (`toolgate trust`).
//!   A changed file is untrusted again.
//! - [`Keyring`]: a per-user secret key (`signing.key`, 0600) that signs the host state
//!   toolgate itself writes into a workspace: project grants, plugin records and session
//!   grants. An entry a repository shipped (or anyone else wrote) carries no valid signature
//!   and is ignored, because the key never enters a workspace.
//!
//! Every file here is read without following a symlink and only when it is a regular file,
//! and written atomically with mode 0600.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The largest policy, grants or trust file toolgate reads (they are hand-sized).
pub const MAX_STATE_FILE_BYTES: u64 = 4 << 20;

/// Read a host state file: a regular file reached without following a symlink at its last
/// component, at most [`MAX_STATE_FILE_BYTES`]. `Ok(None)` when it does not exist. The
/// error text names the file and says how to repair it.
pub fn read_state_file(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    // A workspace's state directory must be a real directory: a repository may ship
    // `.toolgate -> somewhere` to have its files read (or later written) elsewhere.
    if let Some(dir) = path
        .parent()
        .filter(|d| d.file_name() == Some(std::ffi::OsStr::new(crate::workspace::STATE_DIR)))
    {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(format!(
                    "{} cannot be read: {} is {}, not a directory; toolgate keeps its state only in a real directory inside the workspace (delete or rename it, e.g. `rm {}`)",
                    path.display(),
                    dir.display(),
                    crate::fsutil::describe(m.file_type()),
                    dir.display()
                ))
            }
            _ => {}
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!(
                "{} is a symlink; toolgate refuses to follow it (replace it with a regular file or delete it)",
                path.display()
            ))
        }
        Err(e) => {
            return Err(format!(
                "{} cannot be read: {}",
                path.display(),
                crate::fsutil::plain_error(&e)
            ))
        }
    };
    let meta = file.metadata().map_err(|e| {
        format!(
            "{} cannot be read: {}",
            path.display(),
            crate::fsutil::plain_error(&e)
        )
    })?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file ({}); delete it or replace it with a regular file",
            path.display(),
            kind_of(&meta)
        ));
    }
    if meta.len() > MAX_STATE_FILE_BYTES {
        return Err(format!(
            "{} is {} bytes, more than the {} toolgate reads for such a file; shorten or delete it",
            path.display(),
            meta.len(),
            MAX_STATE_FILE_BYTES
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_STATE_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            format!(
                "{} cannot be read: {}",
                path.display(),
                crate::fsutil::plain_error(&e)
            )
        })?;
    Ok(Some(bytes))
}

/// A plain name for what a non-regular file is.
pub fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Write a file of the user's own (0600, atomically), creating its directory (0700).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
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

/// One trusted workspace policy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustEntry {
    /// The canonical workspace path.
    pub path: String,
    /// sha256 of `.toolgate/policy.toml` as the user saw it.
    pub policy_sha256: String,
    /// When (milliseconds since the epoch).
    #[serde(default)]
    pub at_ms: i64,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    #[serde(default)]
    workspace: Vec<TrustEntry>,
}

/// `trust.toml` in the user's config directory.
#[derive(Clone, Debug)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store in `config_dir`.
    pub fn new(config_dir: &Path) -> Self {
        TrustStore {
            path: config_dir.join("trust.toml"),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn entries(&self) -> Result<Vec<TrustEntry>, String> {
        let Some(bytes) = read_state_file(&self.path)? else {
            return Ok(Vec::new());
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{} is not UTF-8 text", self.path.display()))?;
        let file: TrustFile = toml::from_str(&text).map_err(|e| {
            format!(
                "{} is malformed: {} (fix it or delete it; every workspace is then untrusted)",
                self.path.display(),
                e.message()
            )
        })?;
        Ok(file.workspace)
    }

    /// The recorded entry for `workspace`, if any.
    pub fn entry(&self, workspace: &Path) -> Result<Option<TrustEntry>, String> {
        let key = workspace.to_string_lossy();
        Ok(self.entries()?.into_iter().find(|e| e.path == key))
    }

    /// Whether `workspace`'s policy with hash `sha256` is trusted.
    pub fn is_trusted(&self, workspace: &Path, sha256: &str) -> bool {
        matches!(self.entry(workspace), Ok(Some(e)) if e.policy_sha256 == sha256)
    }

    /// Record `workspace`'s policy hash as trusted (replacing an older entry).
    pub fn trust(&self, workspace: &Path, sha256: &str) -> Result<(), String> {
        let key = workspace.to_string_lossy().into_owned();
        let mut entries = self.entries()?;
        entries.retain(|e| e.path != key);
        entries.push(TrustEntry {
            path: key,
            policy_sha256: sha256.to_string(),
            at_ms: crate::state::now_ms(),
        });
        self.write(entries)
    }

    /// Forget `workspace`; returns whether it was there.
    pub fn forget(&self, workspace: &Path) -> Result<bool, String> {
        let key = workspace.to_string_lossy();
        let mut entries = self.entries()?;
        let before = entries.len();
        entries.retain(|e| e.path != key);
        if entries.len() == before {
            return Ok(false);
        }
        self.write(entries)?;
        Ok(true)
    }

    fn write(&self, workspace: Vec<TrustEntry>) -> Result<(), String> {
        let body = toml::to_string(&TrustFile { workspace }).map_err(|e| e.to_string())?;
        let text = format!(
            "# Workspaces whose .toolgate/policy.toml you trusted with `toolgate trust`.\n\
             # A policy whose sha256 no longer matches is untrusted again.\n\n{body}"
        );
        write_private(&self.path, text.as_bytes())
    }
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

    #[test]
    fn trust_is_by_path_and_hash() {
        let dir = tempfile::tempdir().unwrap();
        let t = TrustStore::new(dir.path());
        let ws = Path::new("/w");
        assert!(!t.is_trusted(ws, "aa"));
        t.trust(ws, "aa").unwrap();
        assert!(t.is_trusted(ws, "aa"));
        assert!(!t.is_trusted(ws, "bb"));
        assert!(!t.is_trusted(Path::new("/w2"), "aa"));
        assert!(t.forget(ws).unwrap());
        assert!(!t.is_trusted(ws, "aa"));
    }

    #[test]
    fn state_files_are_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t");
        std::fs::write(&target, "x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(read_state_file(&link).unwrap_err().contains("symlink"));
        assert!(read_state_file(dir.path())
            .unwrap_err()
            .contains("a directory"));
        let fifo = dir.path().join("p");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(read_state_file(&fifo).unwrap_err().contains("named pipe"));
        assert_eq!(read_state_file(&dir.path().join("none")).unwrap(), None);
    }
}
