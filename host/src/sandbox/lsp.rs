//! The `toolgate:lsp` capability linked into every store: the guest's questions go to the
//! call's [`LspGrant`](crate::exec::lsp::LspGrant), on a blocking thread (a server may take
//! seconds to answer). A call without the grant is refused.

use super::CallState;
use crate::exec::lsp::{Pos, Query};
use std::time::Duration;

use super::bindings::since_v0_1_0::lsp::toolgate::lsp::lsp as w;

/// The interface whose import makes a component session-capped, like exec: its server runs
/// project code on the host (confined read-only).
pub const LSP_INTERFACE_PREFIX: &str = "toolgate:lsp/lsp";

const NO_GRANT: &str =
    "this tool has no language-server capability (only the built-in lsp_* tools do)";

fn pos(p: w::Position) -> Pos {
    Pos {
        path: p.path,
        line: p.line,
        column: p.column,
        symbol: p.symbol,
    }
}

/// Run `f` on a blocking thread and wait for it.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("the language-server request failed inside the host: {e}"))?
}

impl w::Host for CallState {
    async fn ask(&mut self, q: w::Query, timeout_ms: u32) -> Result<String, String> {
        let grant = self.lsp.clone().ok_or(NO_GRANT)?;
        let q = match q {
            w::Query::Diagnostics(p) => Query::Diagnostics(p),
            w::Query::Definition(p) => Query::Definition(pos(p)),
            w::Query::References(p) => Query::References(pos(p)),
            w::Query::DocumentSymbols(p) => Query::DocumentSymbols(p),
            w::Query::WorkspaceSymbols(q) => Query::WorkspaceSymbols(q),
            w::Query::IncomingCalls(p) => Query::IncomingCalls(pos(p)),
            w::Query::OutgoingCalls(p) => Query::OutgoingCalls(pos(p)),
        };
        let wait = Duration::from_millis(u64::from(timeout_ms.max(1))).min(grant.max_wait);
        blocking(move || {
            grant
                .host
                .ask(&q, wait)
                .map(|v| v.to_string())
                .map_err(|e| e.to_string())
        })
        .await
    }

    async fn apply(&mut self) -> Result<String, String> {
        let grant = self.lsp.clone().ok_or(NO_GRANT)?;
        let apply = grant
            .apply
            .ok_or("no change was approved for this call; only lsp_rename and lsp_replace_symbol apply one")?;
        blocking(move || apply().map(|v| v.to_string())).await
    }

    async fn restart(&mut self, language: Option<String>) -> Result<String, String> {
        let grant = self.lsp.clone().ok_or(NO_GRANT)?;
        blocking(move || {
            grant
                .host
                .restart(language.as_deref())
                .map(|v| v.to_string())
                .map_err(|e| e.to_string())
        })
        .await
    }
}
