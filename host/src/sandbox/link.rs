//! The linker every call's store is instantiated against: WASI with the guarded filesystem,
//! `wasi:http`, and the host's own WIT interfaces.

use super::bindings::since_v0_1_0::{exec, fs, lsp, tool};
use super::bindings::since_v0_2_0::fs as fs2;
use super::{fsguard, fstrace, read_ahead, CallState};
use crate::error::{Error, Result};
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime::Engine;

/// A linker with every import a tool may use.
pub(super) fn linker(engine: &Engine) -> Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    add_wasi_to_linker(&mut linker).map_err(|e| Error::Sandbox(format!("linking WASI: {e:#}")))?;
    tool::Tool::add_to_linker::<_, wasmtime::component::HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| Error::Sandbox(format!("linking toolgate:tool: {e:#}")))?;
    exec::ExecHost::add_to_linker::<_, wasmtime::component::HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| Error::Sandbox(format!("linking toolgate:host/exec: {e:#}")))?;
    lsp::LspHost::add_to_linker::<_, wasmtime::component::HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| Error::Sandbox(format!("linking toolgate:lsp: {e:#}")))?;
    fs::WalkHost::add_to_linker::<_, wasmtime::component::HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| Error::Sandbox(format!("linking toolgate:fs/walk@0.1.0: {e:#}")))?;
    fs2::WalkHost::add_to_linker::<_, wasmtime::component::HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| Error::Sandbox(format!("linking toolgate:fs/walk@0.2.0: {e:#}")))?;
    read_ahead::bindings::ReadAheadHost::add_to_linker::<
        _,
        wasmtime::component::HasSelf<CallState>,
    >(&mut linker, |s| s)
    .map_err(|e| Error::Sandbox(format!("linking toolgate:search/read-ahead: {e:#}")))?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
        .map_err(|e| Error::Sandbox(format!("linking wasi:http: {e:#}")))?;
    Ok(linker)
}

/// [`HasData`] for the `wasi:io` interfaces, which need only the resource table.
struct HasIo;

impl HasData for HasIo {
    type Data<'a> = &'a mut ResourceTable;
}

/// `wasmtime_wasi::p2::add_to_linker_async`, interface by interface, with the guarded
/// `wasi:filesystem/types` and `wasi:filesystem/preopens` in place of wasmtime-wasi's own.
fn add_wasi_to_linker(l: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, io, random, sockets};
    use wasmtime_wasi::random::{WasiRandom, WasiRandomView as _};
    use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView as _};
    type T = CallState;

    fn guarded_fs(s: &mut CallState) -> fstrace::TracedFsView<'_> {
        let inner = wasmtime_wasi::filesystem::WasiFilesystemCtxView {
            ctx: s.wasi.filesystem(),
            table: &mut s.table,
        };
        let guard = &mut s.fsguard;
        fstrace::TracedFsView {
            g: fsguard::GuardedFsView { inner, guard },
        }
    }

    let options = wasmtime_wasi::p2::bindings::LinkOptions::default();
    io::error::add_to_linker::<T, HasIo>(l, |t| &mut t.table)?;
    io::poll::add_to_linker::<T, HasIo>(l, |t| &mut t.table)?;
    io::streams::add_to_linker::<T, HasIo>(l, |t| &mut t.table)?;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    filesystem::preopens::add_to_linker::<T, fstrace::TracedFs>(l, guarded_fs)?;
    filesystem::types::add_to_linker::<T, fstrace::TracedFs>(l, guarded_fs)?;
    random::random::add_to_linker::<T, WasiRandom>(l, T::random)?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, T::random)?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, T::random)?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    sockets::tcp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::instance_network::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::network::add_to_linker::<T, WasiSockets>(l, &(&options).into(), T::sockets)?;
    sockets::ip_name_lookup::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::tcp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::udp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::udp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    Ok(())
}
