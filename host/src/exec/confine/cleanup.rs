//! The shell's cleanup thread: removing a command's directories (and making the next one's)
//! off the call's path. Removing a directory that was a mount point in a namespace the kernel
//! is still tearing down waits for it (~8 ms a directory on this machine kind), which no call
//! should pay for.

use std::sync::{Arc, Condvar, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

struct Cleaner {
    tx: Mutex<std::sync::mpsc::Sender<Job>>,
    /// Jobs sent and not done yet.
    pending: Arc<(Mutex<usize>, Condvar)>,
}

fn cleaner() -> Option<&'static Cleaner> {
    static CLEANER: OnceLock<Option<Cleaner>> = OnceLock::new();
    CLEANER
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let pending = Arc::new((Mutex::new(0usize), Condvar::new()));
            let counter = pending.clone();
            std::thread::Builder::new()
                .name("toolgate-shell-cleanup".into())
                .spawn(move || {
                    for job in rx {
                        job();
                        let (lock, cv) = &*counter;
                        let mut n = lock.lock().unwrap_or_else(|p| p.into_inner());
                        *n = n.saturating_sub(1);
                        cv.notify_all();
                    }
                })
                .ok()?;
            Some(Cleaner {
                tx: Mutex::new(tx),
                pending,
            })
        })
        .as_ref()
}

/// Run `job` on the cleanup thread (here, when there is none).
pub(super) fn later(job: Job) {
    let Some(c) = cleaner() else {
        job();
        return;
    };
    let (lock, _) = &*c.pending;
    *lock.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    let tx = c.tx.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(std::sync::mpsc::SendError(job)) = tx.send(job) {
        *lock.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        drop(tx);
        job();
    }
}

/// Remove `dir` on the cleanup thread, off the call's path.
pub(super) fn remove_later(dir: tempfile::TempDir) {
    later(Box::new(move || drop(dir)));
}

/// Wait (up to `timeout`) until every job sent so far is done.
pub(super) fn wait_idle(timeout: std::time::Duration) {
    let Some(c) = cleaner() else { return };
    let (lock, cv) = &*c.pending;
    let deadline = std::time::Instant::now() + timeout;
    let mut n = lock.lock().unwrap_or_else(|p| p.into_inner());
    while *n > 0 {
        let now = std::time::Instant::now();
        if now >= deadline {
            return;
        }
        n = cv
            .wait_timeout(n, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}
