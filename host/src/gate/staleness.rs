//! Read-before-write, checked before anyone is asked about a call that cannot run: the session
//! must have read each file the call writes, as it is now.

use super::decision::{Code, Refusal, Stage};
use super::observe;
use super::Gate;
use crate::state::FileStamp;
use crate::tools::registry::{PathUse, RegisteredTool};
use crate::workspace::ScopedPath;

/// A path the call writes and, when it exists, its stamp and content before the call (the
/// content only when history keeps it: not over 8 MiB or `stamp_bytes`).
pub(crate) type WriteTarget = (ScopedPath, Option<(FileStamp, Option<Vec<u8>>)>);

impl Gate {
    /// Each written path as it is before the call; a refusal when one is not a file, or was not
    /// read in this session as it is now.
    pub(crate) fn check_writes(
        &self,
        session: &str,
        tool: &RegisteredTool,
        paths: &[(String, PathUse, ScopedPath)],
        call_id: &str,
    ) -> Result<Vec<WriteTarget>, Refusal> {
        let tool_name = tool.info.name.as_str();
        let fail = |code: Code, message: String, hint: Option<String>| {
            observe::error_at(tool_name, call_id, Stage::Staleness, code, message, hint)
        };
        let mut before = Vec::new();
        for (_, usage, scoped) in paths {
            if *usage != PathUse::Write {
                continue;
            }
            // One non-blocking open of regular files only: a FIFO, device or socket is
            // refused here, before any read (and before the guest), so it cannot hang the call.
            let current = match FileStamp::for_history(&scoped.host, self.limits.stamp_bytes) {
                Ok(current) => current,
                Err(e) if e.is_not_found() => {
                    before.push((scoped.clone(), None));
                    continue;
                }
                Err(e) if e.is_directory() => {
                    return Err(fail(
                        Code::IsDirectory,
                        format!("{} is a directory", scoped.rel),
                        Some("give the path of a file".into()),
                    ))
                }
                Err(e @ crate::fsutil::OpenError::NotRegular { .. }) => {
                    return Err(fail(
                        Code::Open(e.code()),
                        e.message_for(&scoped.rel),
                        Some(format!("{} cannot be changed with this tool", scoped.rel)),
                    ))
                }
                Err(e) => return Err(fail(Code::Open(e.code()), e.message_for(&scoped.rel), None)),
            };
            match self.state.last_read(session, &scoped.host) {
                Ok(Some(seen)) if seen.same_content(&current.0) => {}
                Ok(Some(seen)) => {
                    return Err(fail(
                        Code::Stale,
                        format!(
                            "{} changed since it was last read in this session ({} -> {} bytes)",
                            scoped.rel, seen.size, current.0.size
                        ),
                        Some(format!(
                            "read {} again, then retry the change against what it contains now",
                            scoped.rel
                        )),
                    ))
                }
                Ok(None) => {
                    return Err(fail(
                        Code::NotRead,
                        format!("{} has not been read in this session", scoped.rel),
                        Some(format!(
                        "call `read` on {} first, so the change is made against what it contains",
                        scoped.rel
                    )),
                    ))
                }
                Err(e) => return Err(fail(Code::State, e.to_string(), None)),
            }
            before.push((scoped.clone(), Some(current)));
        }
        Ok(before)
    }
}
