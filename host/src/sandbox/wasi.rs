//! Capability set -> WASI context. Deny by default: the context starts empty and gets only the
//! preopens listed; no environment, arguments, stdio, network or inherited anything.

use super::fsguard::{FsDeny, BLOCKING_CURRENT_THREAD};
use crate::error::{Error, Result};
use std::path::PathBuf;
use std::sync::Arc;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

/// One directory made visible to the guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preopen {
    /// The canonical host directory.
    pub host: PathBuf,
    /// Where the guest sees it.
    pub guest: String,
    /// Whether the guest may create, change or remove files below it.
    pub writable: bool,
}

/// Everything one call may touch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Directories visible to the guest. Nested preopens are fine: the guest's libc resolves a
    /// path against the longest matching preopen.
    pub preopens: Vec<Preopen>,
    /// What the guest may not touch inside the preopens below [`crate::workspace::GUEST_ROOT`]
    /// (`None`: everything in them).
    pub deny: Option<Arc<FsDeny>>,
    /// The host exec capability for this call: the one approved command, or this session's
    /// jobs (`None`: the exec functions refuse).
    pub exec: Option<crate::exec::ExecGrant>,
    /// The language servers (`toolgate:lsp`), for built-in `lsp_*` tools (`None`: refused).
    pub lsp: Option<crate::exec::lsp::LspGrant>,
    /// Outgoing HTTP through the host (`None`: every request is refused).
    pub net: Option<super::net::NetGrant>,
    /// Environment variables the guest sees (none unless a plugin's grant names them).
    pub env: Vec<(String, String)>,
}

impl Capabilities {
    /// No capabilities at all.
    pub fn none() -> Self {
        Capabilities::default()
    }

    pub(crate) fn build_ctx(&self) -> Result<WasiCtx> {
        let mut builder = WasiCtxBuilder::new();
        // Filesystem calls run on the calling thread instead of a blocking pool: a large speedup
        // for file-heavy tools. Must be set before the preopens are added.
        builder.allow_blocking_current_thread(BLOCKING_CURRENT_THREAD);
        // No sockets at all: tools that need the network get it through the host. Plugins may
        // import `wasi:sockets` (language toolchains link it in; see plugins/imports.rs): with
        // these off, creating a TCP or UDP socket fails with `access-denied` before any OS
        // socket exists and name lookup fails, and the default address check (never replaced
        // here) refuses every address as well.
        builder
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for (k, v) in &self.env {
            builder.env(k, v);
        }
        for p in &self.preopens {
            let perms = if p.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(&p.host, &p.guest, perms)
                .map_err(|e| Error::Sandbox(format!("preopening {}: {e:#}", p.host.display())))?;
        }
        Ok(builder.build())
    }
}
