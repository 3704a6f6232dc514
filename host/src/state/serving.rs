//! Which `serve --http` processes serve one workspace, so a server alone may keep its read
//! records for its writer thread instead of committing each before the call answers.
//!
//! A 2026-07-28 conversation is stateless: its next request may reach any process serving
//! the workspace, and that process knows a read only from the database. A server that may
//! have company therefore commits a call's read records before the call answers
//! ([`StateDb::reads_shared`], ~35 µs a call). A server that is surely alone does not need
//! to: nobody else can serve the next request. "Surely" is decided by the kernel, with three
//! `flock(2)` locks beside the database:
//!
//! - `state.db-serving`: every server holds it while it serves, exclusively while it is alone,
//!   shared once it has (or had) company;
//! - `state.db-door`: held exclusively by a server on its way in (one at a time);
//! - `state.db-knock`: held exclusively by one on its way in that found a server alone.
//!
//! A server on its way in takes the door, then tries the serving lock exclusively (it is
//! alone). If that fails, it knocks and waits for the serving lock shared, then leaves. A
//! server that is alone looks at the knock every [`KNOCK_EVERY`]; finding it held, it first
//! commits every read record it has not yet committed and turns to committing each call's
//! reads before the answer, and only then turns its exclusive lock into a shared one, which
//! is what lets the newcomer in. `flock` makes that turn in two steps (the exclusive lock
//! goes, then the shared one comes); in between, nobody can take the lock exclusively: the
//! one knocking tried that before it knocked and now asks only for a shared lock, and every
//! other newcomer waits at the door it holds. So no process serves while another keeps a
//! read the database does not show. A server never becomes alone again (it would need to
//! know that nobody is on the way in).
//!
//! The lock files are the host's own state: one that exists as a link, directory, FIFO or
//! device, or with a second name, is refused (never opened through), and the server then
//! counts as having company (it commits each call's reads, as every server did before).

use crate::workspace::layout::check_state_file;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a server that is alone looks for one on its way in.
pub const KNOCK_EVERY: Duration = Duration::from_millis(20);

/// How often one on its way in tries again.
const RETRY: Duration = Duration::from_millis(1);

/// Whether the server has company.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Company {
    /// No other server serves this workspace (the kernel's lock says so), until one knocks.
    Alone,
    /// Others may serve this workspace: every call's reads are committed before it answers.
    Others,
}

/// A server's place among the servers of a workspace; dropping it gives the place up.
pub struct Servers {
    /// Whether this server was alone when it came in.
    company: Company,
    /// The serving lock, held by this value while the server has company.
    serving: Option<File>,
    /// The watcher for knocks while alone: told to stop, then joined, on drop.
    watcher: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
}

/// The lock file beside the database at `db` with `suffix`.
fn lock_path(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Open (creating) a lock file: never through a link, never a FIFO or device, never a file
/// with a second name. Its content is never read or written.
fn open_lock(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    check_state_file(path)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    // What was opened, not what the name showed a moment before.
    let meta = file.metadata()?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file of its own; delete it (a fresh one is made when a server starts)",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Take `lock` on `file` (`try_lock` or `try_lock_shared`), trying again until `deadline`;
/// `waiting` is said once if it takes longer than a second.
/// One of `File::try_lock` and `File::try_lock_shared`.
type Lock = fn(&File) -> Result<(), TryLockError>;

fn take(
    file: &File,
    lock: Lock,
    deadline: Instant,
    waiting: &mut dyn FnMut(),
) -> std::io::Result<()> {
    let began = Instant::now();
    let mut said = false;
    loop {
        match lock(file) {
            Ok(()) => return Ok(()),
            Err(TryLockError::Error(e)) => return Err(e),
            Err(TryLockError::WouldBlock) => {}
        }
        if Instant::now() >= deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            ));
        }
        if !said && began.elapsed() >= Duration::from_secs(1) {
            said = true;
            waiting();
        }
        std::thread::sleep(RETRY);
    }
}

impl Servers {
    /// Join the servers of the workspace whose state database is `db`, waiting at most
    /// `patience` for a server that is alone to make room. A lock file that cannot be used
    /// (refused, or the file system has no locks) means [`Company::Others`], with a warning.
    pub fn join(db: &Path, patience: Duration) -> std::io::Result<Servers> {
        let with_company = |what: &Path, e: &std::io::Error| {
            tracing::warn!(
                path = %what.display(),
                error = %crate::fsutil::plain_error(e),
                "cannot use the servers' lock file; this server commits each call's read records before it answers, as if other servers shared the workspace"
            );
            Servers {
                company: Company::Others,
                serving: None,
                watcher: None,
            }
        };
        let (door_path, serving_path) = (lock_path(db, "-door"), lock_path(db, "-serving"));
        let knock_path = lock_path(db, "-knock");
        let door = match open_lock(&door_path) {
            Ok(f) => f,
            Err(e) => return Ok(with_company(&door_path, &e)),
        };
        let serving = match open_lock(&serving_path) {
            Ok(f) => f,
            Err(e) => return Ok(with_company(&serving_path, &e)),
        };
        let deadline = Instant::now() + patience;
        let mut waiting = || {
            tracing::info!(
                path = %serving_path.display(),
                "waiting for the toolgate server already serving this workspace to make room (it commits its read records first)"
            );
        };
        // Waiting too long is an error that names the files; a lock the file system cannot
        // take at all (no `flock` there) means company, as a refused file does.
        let timed_out = |e: &std::io::Error| e.kind() == std::io::ErrorKind::TimedOut;
        let stuck = || {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "another process has held {}, {} or {} for {} s without making room for this server; if a toolgate server there is stuck, stop it, then start this one again",
                    door_path.display(),
                    knock_path.display(),
                    serving_path.display(),
                    patience.as_secs()
                ),
            )
        };
        match take(&door, File::try_lock, deadline, &mut waiting) {
            Ok(()) => {}
            Err(e) if timed_out(&e) => return Err(stuck()),
            Err(e) => return Ok(with_company(&door_path, &e)),
        }
        let company = match serving.try_lock() {
            Ok(()) => Company::Alone,
            Err(TryLockError::Error(e)) => return Ok(with_company(&serving_path, &e)),
            Err(TryLockError::WouldBlock) => {
                // Knock only now, after the one exclusive try: the server alone turns its
                // lock shared only after a knock, so that try never meets the turn's gap.
                let knock = match open_lock(&knock_path) {
                    Ok(f) => f,
                    Err(e) => return Ok(with_company(&knock_path, &e)),
                };
                let steps: [(&File, Lock, &Path); 2] = [
                    (&knock, File::try_lock, &knock_path),
                    (&serving, File::try_lock_shared, &serving_path),
                ];
                for (file, lock, path) in steps {
                    match take(file, lock, deadline, &mut waiting) {
                        Ok(()) => {}
                        Err(e) if timed_out(&e) => return Err(stuck()),
                        Err(e) => return Ok(with_company(path, &e)),
                    }
                }
                Company::Others
            }
        };
        drop(door);
        Ok(Servers {
            company,
            serving: Some(serving),
            watcher: None,
        })
    }

    /// Whether this server had company when it came in, or has since made room on the
    /// caller's thread (room made later by the knock watcher is not seen here).
    pub fn company(&self) -> Company {
        self.company
    }

    /// Room made on this thread (no watcher can be): `make_room`, then the lock shared.
    fn room_made_here(&mut self, make_room: impl FnOnce(), serving: File) {
        make_room_now(make_room, &serving);
        self.serving = Some(serving);
        self.company = Company::Others;
    }

    /// While this server is alone: when another knocks, run `make_room` (which must leave
    /// nothing this server knows that the database does not show, and make later calls commit
    /// before they answer), then let it in. Does nothing for a server with company.
    pub fn on_knock(&mut self, db: &Path, make_room: impl FnOnce() + Send + 'static) {
        if self.company == Company::Others || self.watcher.is_some() {
            return;
        }
        let Some(serving) = self.serving.take() else {
            return;
        };
        let knock = match open_lock(&lock_path(db, "-knock")) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %crate::fsutil::plain_error(&e), "cannot watch for servers knocking; committing each call's read records before it answers");
                self.room_made_here(make_room, serving);
                return;
            }
        };
        // What the watcher needs, where this thread can take it back if no watcher starts.
        type Room = (Box<dyn FnOnce() + Send>, File);
        let room: Arc<std::sync::Mutex<Option<Room>>> =
            Arc::new(std::sync::Mutex::new(Some((Box::new(make_room), serving))));
        let stop = Arc::new(AtomicBool::new(false));
        let (stopping, watched) = (stop.clone(), room.clone());
        let spawned = std::thread::Builder::new()
            .name("toolgate-knock".into())
            .spawn(move || {
                while !stopping.load(Ordering::Acquire) {
                    std::thread::park_timeout(KNOCK_EVERY);
                    match knock.try_lock_shared() {
                        Ok(()) => {
                            let _ = knock.unlock();
                            continue;
                        }
                        Err(TryLockError::WouldBlock) => {}
                        Err(TryLockError::Error(e)) => {
                            tracing::warn!(error = %e, "watching for servers knocking failed; committing each call's read records before it answers");
                        }
                    }
                    let taken = watched.lock().unwrap_or_else(|p| p.into_inner()).take();
                    let Some((make_room, serving)) = taken else {
                        return;
                    };
                    make_room_now(make_room, &serving);
                    // Held shared until the server ends.
                    while !stopping.load(Ordering::Acquire) {
                        std::thread::park();
                    }
                    return;
                }
            });
        match spawned {
            Ok(handle) => self.watcher = Some((stop, handle)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the watcher for servers knocking; committing each call's read records before it answers");
                let taken = room.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some((make_room, serving)) = taken {
                    self.room_made_here(make_room, serving);
                }
            }
        }
    }
}

/// Make room, then turn the serving lock shared, which lets the newcomer in. It asks only for a
/// shared lock, so the turn cannot be overtaken by another that thinks it is alone.
fn make_room_now(make_room: impl FnOnce(), serving: &File) {
    make_room();
    if let Err(e) = serving.lock_shared() {
        tracing::warn!(error = %e, "sharing the servers' lock failed");
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Some((stop, handle)) = self.watcher.take() {
            stop.store(true, Ordering::Release);
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "serving_tests.rs"]
mod tests;
