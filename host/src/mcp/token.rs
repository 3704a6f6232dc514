//! The bearer tokens of `toolgate serve --http`: a private file of one token a line, kept in
//! memory as SHA-256 digests and compared in constant time.
//!
//! Each token is one client: it sees and answers only the sessions it made (their names carry
//! its [`owner_tag`]). A line `person TOKEN` marks the person's own token, which sees every
//! session; the console's address carries the first such token, or, when the file has none,
//! a token the server makes for itself at start (in memory only, never in the file), so that
//! no client's token is the person's unless the file says so.

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
    /// Whether token `i` is the person's (sees every session).
    persons: Vec<bool>,
    /// The owner tag of token `i` (see [`owner_tag`]).
    tags: Vec<String>,
    /// How many tokens came from the file (the console's own comes after them).
    from_file: usize,
    /// The token the console's address carries: the file's first `person` token, else the
    /// server's own (see [`Tokens::with_console_token`]); the file's first token until then.
    console: String,
}

pub use crate::gate::approval::OWNER_TAG_CHARS;

/// The tag that marks the sessions a token made (`mcp-TAG-…`, `conv-TAG-…`): 64 bits of a
/// hash of the token's digest, so it tells nothing of the token, and is the same for a token
/// in every server process given the same file.
pub fn owner_tag(digest: &[u8; 32]) -> String {
    let h = Sha256::new()
        .chain_update(b"toolgate owner tag v1\0")
        .chain_update(digest)
        .finalize();
    hex::encode(h)[..OWNER_TAG_CHARS].to_string()
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

    /// Tokens from a token file's text: one a line, blank lines and `#` comments skipped. A
    /// line is a token (a client's), or `person TOKEN` (the person's own: it sees every
    /// session), or `client TOKEN` (the same as the token alone).
    pub fn parse(text: &str) -> anyhow::Result<Tokens> {
        let mut tokens = Tokens {
            digests: Vec::new(),
            persons: Vec::new(),
            tags: Vec::new(),
            from_file: 0,
            console: String::new(),
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // The label is never echoed: a line with a space may be a mangled token.
            let (person, token) = match line.split_once(|c: char| c.is_ascii_whitespace()) {
                None => (false, line),
                Some(("person", rest)) => (true, rest.trim()),
                Some(("client", rest)) => (false, rest.trim()),
                Some(_) => bail!(
                    "line {}: a line is a token, `person TOKEN` (the person's own token, which sees every client's sessions) or `client TOKEN`; a token has no spaces",
                    n + 1
                ),
            };
            if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&token.len())
                || !token.bytes().all(|b| b.is_ascii_graphic())
            {
                bail!(
                    "line {}: a token is {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} visible ASCII characters with no spaces (e.g. 64 hex digits: `openssl rand -hex 32`)",
                    n + 1
                );
            }
            let first_person = person && !tokens.persons.contains(&true);
            if tokens.digests.is_empty() || first_person {
                tokens.console = token.to_string();
            }
            tokens.push(Sha256::digest(token.as_bytes()).into(), person);
        }
        if tokens.digests.is_empty() {
            bail!("write one token a line (e.g. `openssl rand -hex 32`), or delete the file to have a new one made");
        }
        tokens.from_file = tokens.digests.len();
        Ok(tokens)
    }

    fn push(&mut self, digest: [u8; 32], person: bool) {
        self.tags.push(owner_tag(&digest));
        self.digests.push(digest);
        self.persons.push(person);
    }

    /// The tokens with the console's own: when the file marks no token as the person's, a
    /// fresh random token (kept in memory for this process only) is added as the person's, and
    /// the console's address carries it; otherwise the file's first `person` token.
    pub fn with_console_token(mut self) -> anyhow::Result<Tokens> {
        if self.persons.contains(&true) {
            return Ok(self);
        }
        let token =
            hex::encode(os_random::<TOKEN_BYTES>().context("cannot get random bytes from the OS")?);
        self.push(Sha256::digest(token.as_bytes()).into(), true);
        self.console = token;
        Ok(self)
    }

    /// The token the console's address carries (the person's).
    pub fn console(&self) -> &str {
        &self.console
    }

    /// How many tokens there are (the console's own included, once added).
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// How many tokens the file holds.
    pub fn in_file(&self) -> usize {
        self.from_file
    }

    /// Whether token `i` is the person's: it sees and answers every session.
    pub fn is_person(&self, i: usize) -> bool {
        self.persons.get(i).copied().unwrap_or(false)
    }

    /// The owner tag of token `i` (see [`owner_tag`]).
    pub fn tag(&self, i: usize) -> Option<&str> {
        self.tags.get(i).map(String::as_str)
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
