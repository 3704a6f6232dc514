//! The cancel token of one call: a surface whose client can give up on a call (MCP's
//! `notifications/cancelled`) makes one, passes it to [`crate::gate::Gate::call_cancellable`],
//! and cancels it; the gate hands the same token to every stage that waits (the approval
//! prompt, the guest's epoch ticks, the host walk, a shell command's wait), so each stops at
//! its next look. A call made without one ([`CancelToken::never`]) cannot be cancelled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether a call was cancelled. Cheap to clone: clones share one flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Option<Arc<AtomicBool>>);

impl CancelToken {
    /// A token that can be cancelled.
    pub fn new() -> Self {
        CancelToken(Some(Arc::new(AtomicBool::new(false))))
    }

    /// A token for a call nobody can cancel: waiting stages skip their checks.
    pub fn never() -> Self {
        CancelToken(None)
    }

    /// Cancel the call (every clone sees it).
    pub fn cancel(&self) {
        if let Some(f) = &self.0 {
            f.store(true, Ordering::SeqCst);
        }
    }

    /// Whether the call was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(Ordering::SeqCst))
    }

    /// Whether anyone can cancel this call (a guest's epoch ticks are checked only then).
    pub fn can_cancel(&self) -> bool {
        self.0.is_some()
    }

    /// The shared flag, for loops that poll it (`None` for [`CancelToken::never`]).
    pub fn flag(&self) -> Option<&AtomicBool> {
        self.0.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag_and_never_cannot_be_cancelled() {
        let t = CancelToken::new();
        let seen = t.clone();
        assert!(!seen.is_cancelled());
        t.cancel();
        assert!(seen.is_cancelled());
        let n = CancelToken::never();
        n.cancel();
        assert!(!n.is_cancelled());
        assert!(!n.can_cancel() && n.flag().is_none());
    }
}
