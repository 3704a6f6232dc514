//! The spawner off Linux: there is none, and commands are started by the host.

use super::{Request, StartError};
use std::os::fd::OwnedFd;

/// Without Linux there is no spawner: commands are started by the host.
#[derive(Default)]
pub struct Spawner;

impl Spawner {
    /// The same as the default here.
    pub fn disabled() -> Spawner {
        Spawner
    }

    /// The same as the default here.
    pub fn with_pids_limit(_max: u32) -> Spawner {
        Spawner
    }

    /// No spawner, so no process limit of its own.
    pub fn shared_pids_limit(&self) -> Option<u32> {
        None
    }

    /// Always unavailable here.
    pub fn start(
        &self,
        _req: Request,
        _fds: Vec<OwnedFd>,
        _on_exit: Box<dyn FnOnce(Option<i32>, Option<i32>) + Send>,
    ) -> Result<i32, StartError> {
        Err(StartError::Unavailable("no spawner on this OS".into()))
    }

    /// Never running here.
    pub fn pid(&self) -> Option<u32> {
        None
    }
}

/// The spawner only exists on Linux.
pub fn serve() -> std::process::ExitCode {
    eprintln!("toolgate: the spawner is only used on Linux");
    std::process::ExitCode::from(2)
}
