//! The bearer tokens of `toolgate serve --http`: a private file of one token a line, kept in
//! memory as SHA-256 digests and compared in constant time.

use super::private_file::read_private_file;
use crate::userdirs::UserDirs;
use anyhow::{bail, Context};
use sha2::{Digest, Sha256};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The name of the token file in the user's state directory.
pub const TOKEN_FILE_NAME: &str = "http-token";

/// Random bytes in a generated token.
const TOKEN_BYTES: usize = 32;

/// Shortest and longest token accepted from a token file: a short token can be guessed, and a
/// huge line is a mistake.
const MIN_TOKEN_CHARS: usize = 32;
const MAX_TOKEN_CHARS: usize = 1024;

/// `http-token` in the user's state directory.
pub fn default_token_file(dirs: &UserDirs) -> PathBuf {
    dirs.state.join(TOKEN_FILE_NAME)
}

/// The tokens a server accepts, kept as SHA-256 digests so comparing takes the same time
/// whatever was presented (its length included).
pub struct Tokens {
    digests: Vec<[u8; 32]>,
    /// The first token, for the console's address.
    first: String,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} tokens)", self.digests.len())
    }
}

impl Tokens {
    /// The tokens in `path`, creating the file with one fresh token when it does not exist
    /// (true in the second field). With `private_dir`, the parent directory is created mode
    /// 0700 if missing, and must be a real directory (not a symlink) no one else can write.
    ///
    /// Refused: a symlink at `path`, anything but a regular file, a file group or others can
    /// read or write, a file of someone else's, and a file with no usable token.
    pub fn load_or_create(path: &Path, private_dir: bool) -> anyhow::Result<(Tokens, bool)> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if private_dir {
            ensure_private_dir(dir)?;
        }
        let created = match std::fs::symlink_metadata(path) {
            Ok(_) => false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_token_file(dir, path)?,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot read the token file {}", path.display()))
            }
        };
        let text = read_private_file(path, "token file")?;
        let tokens = Tokens::parse(&text)
            .with_context(|| format!("the token file {} has no usable token", path.display()))?;
        Ok((tokens, created))
    }

    /// Tokens from a token file's text: one a line, blank lines and `#` comments skipped.
    pub fn parse(text: &str) -> anyhow::Result<Tokens> {
        let mut digests = Vec::new();
        let mut first = None;
        for (n, line) in text.lines().enumerate() {
            let token = line.trim();
            if token.is_empty() || token.starts_with('#') {
                continue;
            }
            if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&token.len())
                || !token.bytes().all(|b| b.is_ascii_graphic())
            {
                bail!(
                    "line {}: a token is {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} visible ASCII characters with no spaces (e.g. 64 hex digits: `openssl rand -hex 32`)",
                    n + 1
                );
            }
            digests.push(Sha256::digest(token.as_bytes()).into());
            first.get_or_insert_with(|| token.to_string());
        }
        if digests.is_empty() {
            bail!("write one token a line (e.g. `openssl rand -hex 32`), or delete the file to have a new one made");
        }
        Ok(Tokens {
            digests,
            first: first.unwrap_or_default(),
        })
    }

    /// The first token of the file (what the console's address carries).
    pub fn first(&self) -> &str {
        &self.first
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether there are none (never, for a loaded file).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// The SHA-256 digest of token `i` (a conversation's name is derived from it).
    pub fn digest(&self, i: usize) -> Option<&[u8; 32]> {
        self.digests.get(i)
    }

    /// Which token (by its place in the file) `presented` is. Every stored token is compared,
    /// each in constant time.
    pub fn identify(&self, presented: &str) -> Option<usize> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (i, stored) in self.digests.iter().enumerate() {
            let diff = stored
                .iter()
                .zip(digest.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if std::hint::black_box(diff) == 0 && found.is_none() {
                found = Some(i);
            }
        }
        found
    }
}

/// Create `dir` mode 0700 if missing; refuse a symlink, a non-directory, or a directory group
/// or others can write (they could put their own token there).
fn ensure_private_dir(dir: &Path) -> anyhow::Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        bail!(
            "{} is not a directory (a symlink is not followed there); remove it, or pass --token-file",
            dir.display()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "{} can be written by group or others, who could replace the token; run `chmod 700 {}`",
            dir.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Write a fresh token to `path` atomically: a private temporary file, then a hard link to
/// the final name, which never replaces anything (a racing server's file, or a symlink someone
/// planted, wins and is then judged as an existing file). True when this call created it.
fn create_token_file(dir: &Path, path: &Path) -> anyhow::Result<bool> {
    let token =
        hex::encode(os_random::<TOKEN_BYTES>().context("cannot get random bytes from the OS")?);
    let suffix = hex::encode(os_random::<8>().context("cannot get random bytes from the OS")?);
    let tmp = dir.join(format!(".{TOKEN_FILE_NAME}.{suffix}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(format!("{token}\n").as_bytes())?;
        f.sync_all()
    };
    let result = write()
        .with_context(|| format!("cannot write a token file in {}", dir.display()))
        .and_then(|()| match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => {
                Err(e).with_context(|| format!("cannot create the token file {}", path.display()))
            }
        });
    let _ = std::fs::remove_file(&tmp);
    result
}

/// `N` random bytes from the operating system's generator.
pub(super) fn os_random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
