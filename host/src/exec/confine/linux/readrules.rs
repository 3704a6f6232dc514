//! Landlock rules for a command that runs without a mount namespace ("landlock-only"): where
//! the host forbids unprivileged user namespaces (Ubuntu's
//! `apparmor_restrict_unprivileged_userns`, `user.max_user_namespaces=0`, Docker's seccomp
//! profile) no mask can be bound over a secret, so Landlock alone must keep secrets unread.
//!
//! Landlock is an allow-list of "these accesses beneath this path" rules. A rule is attached to
//! the inode its path names when the rule is added, covers everything beneath a directory, and
//! what a process may do to a file is the union of the rules on the file and every directory
//! above it. So [`read_rules`] grants each place a command needs and makes sure that no hidden
//! path is at or beneath any rule granting more than listing:
//!
//! - read: the system directories (`/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`, `/opt`) less the
//!   host's secrets (`/etc/shadow`, `/etc/gshadow`, their `-` backups, `/etc/ssh`,
//!   `/etc/sudoers`), `/proc`, the toolchain homes under `$HOME` less their credentials
//!   (`~/.cargo/credentials*`), the PATH directories, the policy's `[shell] read` paths and
//!   `.toolgate/outputs` (the one place under `.toolgate` a tool may read);
//! - read and write: the workspace less its secrets (the plan's deny-listed files and
//!   directories, hard links to them included) and `.toolgate`, the call's private `/tmp` and
//!   `$HOME`, the policy's `[shell] write` paths, and `/dev/{null,zero,full,tty,random,urandom}`
//!   (never creating a device node). The read-only class reads the workspace and the write paths
//!   and writes only its private `/tmp` and `$HOME` (and those device files);
//! - nothing else: the rest of `$HOME` (no rule is `$HOME` or holds it: a granted directory
//!   holding it is split around it), `/tmp`, `/run`, `/sys`, `/dev`, `/var`, other users'
//!   homes.
//!
//! # Split directories
//! A directory holding a hidden path cannot be granted whole. It is *split*: every entry in it
//! that is neither hidden nor a symlink gets its own rule, an entry that holds a hidden path
//! is split in turn, and the split directory itself gets no rule (with
//! [`ReadInputs::list_split_dirs`], a listing-only rule). The workspace root is always split,
//! since `.toolgate` lives there (hidden even while absent, so a state file the host makes
//! during the command is not readable either); so are `/etc`, `~/.cargo` with credentials, and
//! every directory above a workspace secret. What that costs, and why:
//! - **Entries created in a split directory after the rules were made are not readable**: no
//!   rule covers them. Landlock cannot grant "everything in this directory but `.env`".
//! - **No entry can be created, removed or renamed directly in a split directory** (`touch new`
//!   or `sed -i` at the workspace root fail; inside `src/` everything works). A write rule on a
//!   split directory is recursive too, and would let the command rename `.env` to a name the
//!   deny-list does not match (same directory: remove and create rights only), which the next
//!   command's plan would no longer hide; or overwrite `.toolgate/state.db` (its session
//!   grants) and plant files in `.toolgate/`. Existing files at the root stay readable and
//!   writable in place, since each has its own rule.
//! - Without [`ReadInputs::list_split_dirs`] a split directory cannot be opened, so `ls`, a
//!   shell glob, `rg`, `go build ./...` or the untracked files of `git status` fail at the
//!   workspace root. With it the split directory gets `ReadDir` alone, which Landlock also
//!   applies beneath it: every directory below can be listed, so the *names* (never the
//!   contents) inside secret directories and `.toolgate` can be listed.
//! - Git's config, hooks and pointers (the plan's `git_readonly`, `git_unprotected`,
//!   `git_files`) are readable, never writable: a git directory holding them is split, so
//!   nothing is created in it either (no `commondir`, and no `index.lock`: git reads, and
//!   cannot commit, in this mode).
//! - `.toolgate/outputs` and `.toolgate/.gitignore` are readable (a listing shows the names;
//!   a project walk that meets a name it cannot read may give up).
//! - Rules hold inodes: a file replaced in a split directory after they were made (the host
//!   writes by renaming over) is beyond them. [`ReadRules::still_current`] says so, and a
//!   language server is then started again.
//!
//! Moving a secret out of its directory into a readable one is refused by Landlock itself: a
//! rename or link to another directory must not give the file rights it did not have (and a
//! split directory has none to give up).
//!
//! # Identity, symlinks, races
//! - Hidden paths are matched both as spelled and resolved, and by (device, inode): an entry
//!   whose inode is a hidden file's or directory's (a hard link, whatever its name; the plan's
//!   secret inodes included) gets no rule. Hard links inside directories that are granted whole
//!   are found by the workspace walk, which lists every name of a secret in the plan.
//! - Symlinks never get a rule: Landlock resolves a rule's path when it is added, so a rule on
//!   a link would grant its target. Nothing is lost, since an access through a link is judged
//!   by where it lands, which is granted (or not) on its own.
//! - Every rule keeps the (device, inode) its path had; [`landlock_only_ruleset`] opens each
//!   path refusing every symlink on the way (`RESOLVE_NO_SYMLINKS`) and drops the rule when the
//!   path names another inode now (a directory swapped for another or for a link since the
//!   rules were made): it fails closed.
//!
//! # The cache
//! Enumerating the split directories costs every command, so the rules are kept for
//! [`KEEP_FOR`] per (workspace, plan, host paths, class), and reused only while no split
//! directory changed (its device, inode, mtime and ctime are checked: an entry created or
//! removed there is seen at once) and none had changed within [`RACY_WINDOW`] of being listed
//! (a change in the same timestamp granule leaves the mtime as it was).

use crate::exec::confine::{
    DEV_NODES, SYSTEM_DIRS, SYSTEM_SECRETS, TOOLCHAIN_HOMES, TOOLCHAIN_SECRETS,
};
use crate::workspace::view::Plan;
use crate::workspace::{OUTPUTS_DIR, STATE_DIR};
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Bound;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// The file-system access rights handled (ABI 3: reads, writes, truncation, refer).
const ABI_FS: ABI = ABI::V3;

/// Host files no command needs beyond the view's masks: the backups `passwd`/`shadow` tools
/// keep hold the same hashes.
const MORE_SYSTEM_SECRETS: &[&str] = &["/etc/shadow-", "/etc/gshadow-"];

/// Places a PATH entry or a policy path may not be in (the view gives the command private
/// ones; here they are simply not granted).
const NOT_GRANTED: &[&str] = &["/tmp", "/proc", "/sys", "/dev", "/run", "/var/run"];

/// Most rules one command's ruleset may hold: each is an `open` and a `landlock_add_rule` per
/// command and kernel memory while it runs. A workspace past it (a secret inside a directory of
/// thousands of entries) fails closed with a message saying what to do.
pub const MAX_RULES: usize = 16_384;

/// How long computed rules are reused (while no split directory changed).
pub const KEEP_FOR: Duration = Duration::from_secs(5);

/// A split directory changed this close to being listed is listed again next time: an entry
/// made in the same timestamp granule would not change its mtime.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// What [`read_rules`] builds the rules from.
pub struct ReadInputs<'a> {
    /// The workspace (canonical host path).
    pub workspace: &'a Path,
    /// What to hide in the workspace: `secret_files`, `secret_dirs` and `secret_inodes` are
    /// used (it must come from the workspace walk, which lists hard links to secrets too).
    pub plan: &'a Plan,
    /// The call's private temp dir (read-write).
    pub tmp: &'a Path,
    /// The call's private home directory (read-write).
    pub private_home: &'a Path,
    /// `$HOME` of the host, if any: never readable but for the toolchain homes.
    pub home: Option<&'a Path>,
    /// PATH entries the command may use (absolute host directories, symlinks resolved).
    pub path_dirs: &'a [PathBuf],
    /// Extra host paths, read-only (`[shell] read`).
    pub extra_read: &'a [PathBuf],
    /// Extra host paths, writable for normal commands (`[shell] write`).
    pub extra_write: &'a [PathBuf],
    /// The read-only class: no write anywhere but the private temp dir and home.
    pub read_only: bool,
    /// Let split directories be listed (see the module's documentation for what it shows).
    pub list_split_dirs: bool,
}

/// What a rule lets the command do beneath its path.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Grant {
    /// Open (list) directories, nothing else: split directories, when asked.
    List,
    /// Read files, list directories, execute.
    Read,
    /// Read and write, never creating a device node.
    ReadWrite,
}

impl Grant {
    /// The Landlock rights (for a directory; a file's rule keeps the file rights of these).
    pub fn access(self) -> BitFlags<AccessFs> {
        match self {
            Grant::List => AccessFs::ReadDir.into(),
            Grant::Read => AccessFs::from_read(ABI_FS),
            Grant::ReadWrite => {
                AccessFs::from_all(ABI_FS) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
            }
        }
    }
}

/// One rule: `grant` beneath `path`, which named the inode (`dev`, `ino`) when it was made.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rule {
    /// An absolute path with no symlink in it.
    pub path: PathBuf,
    /// What the rule allows beneath it.
    pub grant: Grant,
    dev: u64,
    ino: u64,
}

/// The rules of one command: the part kept between commands and the call's own directories.
///
/// Sent to the spawner as the list of rules (the spawner builds the ruleset, opening each path
/// and checking its inode); the split directories' stamps stay with the host, which alone asks
/// [`ReadRules::still_current`].
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(from = "Vec<Rule>", into = "Vec<Rule>")]
pub struct ReadRules {
    shared: Arc<[Rule]>,
    own: Vec<Rule>,
    /// The split directories as they were listed for these rules.
    stamps: Arc<[Stamp]>,
}

impl From<Vec<Rule>> for ReadRules {
    fn from(own: Vec<Rule>) -> ReadRules {
        ReadRules {
            shared: Arc::from([]),
            own,
            stamps: Arc::from([]),
        }
    }
}

impl From<ReadRules> for Vec<Rule> {
    fn from(r: ReadRules) -> Vec<Rule> {
        r.iter().cloned().collect()
    }
}

impl ReadRules {
    /// Every rule.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.shared.iter().chain(&self.own)
    }

    /// How many rules.
    pub fn len(&self) -> usize {
        self.shared.len() + self.own.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no split directory changed since these rules were made. A rule holds the inode
    /// its path named then: an entry made or replaced since in a split directory (a file the
    /// host wrote by renaming over it) is beyond a process confined by them, so a long-lived
    /// one (a language server) is started again with fresh rules.
    pub fn still_current(&self) -> bool {
        self.stamps.iter().all(Stamp::unchanged)
    }
}

/// A split directory as it was listed: reused while it is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    path: PathBuf,
    id: (u64, u64),
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path, m: &std::fs::Metadata) -> Stamp {
        Stamp {
            path: path.to_path_buf(),
            id: (m.dev(), m.ino()),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    fn unchanged(&self) -> bool {
        self.path
            .symlink_metadata()
            .is_ok_and(|m| Stamp::of(&self.path, &m) == *self)
    }
}

/// Builds the rules around the hidden paths.
struct Builder<'h> {
    hidden: &'h Hidden,
    list: bool,
    rules: Vec<Rule>,
    split: Vec<Stamp>,
    /// A split directory changed within [`RACY_WINDOW`] of its listing.
    racy: bool,
}

impl Builder<'_> {
    fn push(&mut self, path: &Path, m: &std::fs::Metadata, grant: Grant) -> Result<(), String> {
        if self.rules.len() >= MAX_RULES {
            return Err(too_many(path));
        }
        self.rules.push(Rule {
            path: path.to_path_buf(),
            grant,
            dev: m.dev(),
            ino: m.ino(),
        });
        Ok(())
    }

    /// Grant `root` (absolute, symlinks resolved): whole, split around what it holds, or not
    /// at all when it is hidden, beneath a hidden path, or is `$HOME`.
    fn root(&mut self, root: &Path, grant: Grant) -> Result<(), String> {
        if !root.is_absolute() || self.hidden.covers(root) || self.hidden.is(root) {
            return Ok(());
        }
        let Ok(m) = root.symlink_metadata() else {
            return Ok(());
        };
        if m.file_type().is_symlink() || self.hidden.ids.contains(&(m.dev(), m.ino())) {
            return Ok(());
        }
        self.place(root, &m, grant)
    }

    /// `path` (neither hidden nor a symlink): one rule, or split.
    fn place(&mut self, path: &Path, m: &std::fs::Metadata, grant: Grant) -> Result<(), String> {
        if grant == Grant::ReadWrite && self.hidden.is_frozen(path) {
            return self.place(path, m, Grant::Read);
        }
        let around_frozen = grant == Grant::ReadWrite && self.hidden.frozen_below(path);
        if !self.hidden.below(path) && !around_frozen {
            return self.push(path, m, grant);
        }
        if !m.is_dir() {
            return Ok(());
        }
        let listed_at = SystemTime::now();
        let Ok(entries) = std::fs::read_dir(path) else {
            // Unreadable: nothing beneath it is granted (fail closed).
            return Ok(());
        };
        let stamp = Stamp::of(path, m);
        let recent = listed_at
            .checked_sub(RACY_WINDOW)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(i64::MAX, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.racy |= stamp.mtime.0 >= recent;
        self.split.push(stamp);
        // Listing is recursive: never where it would list `$HOME`.
        if self.list && !self.hidden.holds_home(path) {
            self.push(path, m, Grant::List)?;
        }
        for entry in entries {
            let Ok(entry) = entry else {
                // A listing cut short grants only what it yielded.
                break;
            };
            let child = path.join(entry.file_name());
            if self.hidden.is(&child) {
                continue;
            }
            let Ok(cm) = child.symlink_metadata() else {
                continue;
            };
            if cm.file_type().is_symlink() || self.hidden.ids.contains(&(cm.dev(), cm.ino())) {
                continue;
            }
            self.place(&child, &cm, grant)?;
        }
        Ok(())
    }
}

fn too_many(at: &Path) -> String {
    format!(
        "the shell's Landlock-only confinement would need more than {MAX_RULES} rules to keep the secrets hidden (reached at `{}`): a secret sits in a directory with very many entries; move it, or add that directory to `secrets` in .toolgate/policy.toml so it is hidden whole",
        at.display()
    )
}

/// Rules kept from an earlier command.
struct Kept {
    key: Key,
    at: Instant,
    stamps: Arc<[Stamp]>,
    racy: bool,
    hidden: Arc<Hidden>,
    rules: Arc<[Rule]>,
}

/// The Landlock rules for a command in landlock-only mode (see the module's documentation).
/// Errors are plain-English messages: a policy path that would expose `$HOME` or the workspace
/// whole, or a workspace needing more than [`MAX_RULES`] rules.
pub fn read_rules(inputs: &ReadInputs<'_>) -> Result<ReadRules, String> {
    static KEPT: Mutex<Option<Kept>> = Mutex::new(None);
    let kept = {
        let guard = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .filter(|k| {
                k.key.matches(inputs)
                    && !k.racy
                    && k.at.elapsed() < KEEP_FOR
                    && k.stamps.iter().all(Stamp::unchanged)
            })
            .map(|k| (k.hidden.clone(), k.rules.clone(), k.stamps.clone()))
    };
    let (hidden, shared, stamps) = match kept {
        Some(k) => k,
        None => {
            let hidden = Arc::new(hidden_paths(inputs));
            let (rules, stamps, racy) = shared_rules(inputs, &hidden)?;
            let rules: Arc<[Rule]> = rules.into();
            let stamps: Arc<[Stamp]> = stamps.into();
            *KEPT.lock().unwrap_or_else(|p| p.into_inner()) = Some(Kept {
                key: Key::of(inputs),
                at: Instant::now(),
                stamps: stamps.clone(),
                racy,
                hidden: hidden.clone(),
                rules: rules.clone(),
            });
            (hidden, rules, stamps)
        }
    };
    let mut b = Builder {
        hidden: &hidden,
        list: false,
        rules: Vec::new(),
        split: Vec::new(),
        racy: false,
    };
    for dir in [inputs.tmp, inputs.private_home] {
        if let Some(dir) = resolved(dir) {
            b.root(&dir, Grant::ReadWrite)?;
        }
    }
    Ok(ReadRules {
        shared,
        own: b.rules,
        stamps,
    })
}

/// The rules that do not depend on the call's own directories, the split directories met, and
/// whether one of them changed too recently to trust its stamp.
fn shared_rules(
    inputs: &ReadInputs<'_>,
    hidden: &Hidden,
) -> Result<(Vec<Rule>, Vec<Stamp>, bool), String> {
    let mut b = Builder {
        hidden,
        list: inputs.list_split_dirs,
        rules: Vec::new(),
        split: Vec::new(),
        racy: false,
    };
    // Canonical already, as a rule; resolved again so a workspace named through a symlink is
    // granted all the same (the hidden paths are kept as spelled and resolved).
    let ws = inputs.workspace.canonicalize().map_err(|e| {
        format!(
            "cannot resolve the workspace {} for the shell's Landlock rules: {e}",
            inputs.workspace.display()
        )
    })?;
    let ws = ws.as_path();
    for dir in SYSTEM_DIRS.iter().chain(&["/proc"]) {
        // `/bin -> usr/bin` is granted where it really is.
        if let Ok(dir) = Path::new(dir).canonicalize() {
            b.root(&dir, Grant::Read)?;
        }
    }
    for node in DEV_NODES {
        b.root(&Path::new("/dev").join(node), Grant::ReadWrite)?;
    }
    if let Some(home) = usable_home(inputs.home) {
        for sub in TOOLCHAIN_HOMES {
            let host = home.join(sub);
            // As the view: a toolchain home holding the workspace is not granted.
            if ws.starts_with(&host) {
                continue;
            }
            if let Ok(dir) = host.canonicalize() {
                if dir.is_dir() {
                    b.root(&dir, Grant::Read)?;
                }
            }
        }
    }
    let usable = |p: &Path| {
        p.is_absolute()
            && p != Path::new("/")
            && !NOT_GRANTED.iter().any(|bad| p.starts_with(bad))
            && !p.components().any(|c| matches!(c, Component::ParentDir))
    };
    for dir in inputs.path_dirs {
        if usable(dir) && !ws.starts_with(dir) {
            if let Ok(dir) = dir.canonicalize() {
                b.root(&dir, Grant::Read)?;
            }
        }
    }
    for (paths, write) in [(inputs.extra_read, false), (inputs.extra_write, true)] {
        for p in paths {
            let system = SYSTEM_DIRS
                .iter()
                .chain(&["/boot", "/var"])
                .any(|d| p.starts_with(d));
            let resolved = p.canonicalize().ok();
            let holds = |inner: &Path| {
                inner.starts_with(p) || resolved.as_ref().is_some_and(|r| inner.starts_with(r))
            };
            if !usable(p)
                || holds(ws)
                || usable_home(inputs.home).is_some_and(holds)
                || (write && system)
            {
                return Err(format!(
                    "the policy's [shell] {} cannot name `{}`: only absolute paths outside /tmp, /proc, /sys, /dev and /run, not holding $HOME or the workspace{}",
                    if write { "write" } else { "read" },
                    p.display(),
                    if write { ", and not inside a system directory (/usr, /etc, /bin, /lib, /opt, /var, /boot …)" } else { "" }
                ));
            }
            if let Some(r) = resolved {
                let grant = if write && !inputs.read_only {
                    Grant::ReadWrite
                } else {
                    Grant::Read
                };
                b.root(&r, grant)?;
            }
        }
    }
    let ws_grant = if inputs.read_only {
        Grant::Read
    } else {
        Grant::ReadWrite
    };
    b.root(ws, ws_grant)?;
    // The saved outputs, read-only, though `.toolgate` is hidden, and its `.gitignore` (a
    // listing shows it: a project walk that meets a name it cannot read may give up, as
    // jedi's does): only a real directory, or a regular file, reached through no symlink.
    for (inside, dir) in [
        (ws.join(OUTPUTS_DIR), true),
        (ws.join(STATE_DIR).join(".gitignore"), false),
    ] {
        if let Ok(m) = inside.symlink_metadata() {
            if (if dir { m.is_dir() } else { m.is_file() })
                && inside.canonicalize().is_ok_and(|r| r == inside)
                && !hidden.below(&inside)
                && !hidden.ids.contains(&(m.dev(), m.ino()))
            {
                b.push(&inside, &m, Grant::Read)?;
            }
        }
    }
    let Builder {
        rules, split, racy, ..
    } = b;
    Ok((merged(rules), split, racy))
}

mod hidden;
mod key;
mod ruleset;

use hidden::{hidden_paths, resolved, usable_home, Hidden};
use key::{git_frozen, Key};
pub use ruleset::landlock_only_ruleset;
use ruleset::merged;
#[cfg(test)]
use ruleset::{open_rule, support};

#[cfg(test)]
#[path = "readrules_tests.rs"]
mod tests;
