//! A call's store, and the work on stores that can wait until the server has answered.
//!
//! Every call runs in a store of its own whose state holds exactly the capabilities the gate
//! granted. Two parts of a store's life cost time but need none of the call's capabilities,
//! so the stdio server ([`Stores::idle`] after writing an answer, when no other call is in
//! flight) does them off the call's path:
//! - **Instantiating** the tool's component: a *spare* is instantiated ahead in a store whose
//!   state grants nothing at all (no preopens, no exec, no network). A call that finds a spare
//!   of its component (with its memory limit) replaces that state with its own before any
//!   guest export runs, and the spare is never used again. A spare whose instantiation left
//!   anything in the resource table is thrown away, so nothing made under the empty state
//!   reaches the call.
//! - **Dropping** a finished call's store (resetting its instance slot's memory): kept for
//!   later only for calls that could touch nothing but files and directories (no exec, no
//!   language server, no network, no writable preopen), so no process, connection or open file
//!   for writing outlives its call for longer than an answer takes. At most [`MAX_DONE`] wait;
//!   a call that finds that many drops them first.
//!
//! A process that never calls [`Stores::idle`] (a one-shot call, the library) keeps neither:
//! its stores are made and dropped on the call's path. The HTTP server calls it beside an
//! answer only while it is quiet (one request at a time, `mcp/http/quiet.rs`), and under load
//! calls [`Stores::under_load`], which keeps nothing until the next idle moment: under the
//! load script (100 calls in flight) the idle work competed with the calls, ~12% fewer calls a
//! second.

use super::{limiter, net, tool_bindings, walk, CallState, Capabilities, Limits, Loaded};
use super::{Cancelled, EPOCH_TICK};
use crate::cancel::CancelToken;
use crate::error::Result;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, Trap};

/// Most spares kept (one per component).
const MAX_SPARES: usize = 4;

/// Most finished stores waiting to be dropped: a call that finds one waiting drops it first,
/// so calls that overlap (no idle moment between them) drop stores as they would without this,
/// one call later, and never in bursts. (Measured under the load script: keeping eight made
/// HTTP calls ~10% slower, the stores' memory reset cold.)
const MAX_DONE: usize = 1;

/// How long a spare's instantiation may run (it runs no export; a component's start
/// functions, if any, get this long).
const SPARE_TICKS: u64 = 100;

/// A component instantiated ahead, in a store that grants nothing.
pub(super) struct Spare {
    store: Store<CallState>,
    tool: tool_bindings::Tool,
}

/// The spares, the components wanted as spares and the stores waiting to be dropped.
#[derive(Default)]
pub(super) struct Stores {
    inner: Mutex<Inner>,
    /// Whether anyone calls [`Stores::idle`] (a server): until then nothing is kept for it.
    serving: AtomicBool,
    /// Calls that ran in a spare.
    pub(super) spares_used: AtomicU64,
}

#[derive(Default)]
struct Inner {
    /// Component digest, the memory limit the spare was made under, and the spare; oldest
    /// first.
    ready: Vec<(String, usize, Spare)>,
    /// Components called since the last idle moment, with their calls' memory limits.
    wanted: Vec<(Loaded, usize)>,
    /// Stores of finished calls.
    done: Vec<Store<CallState>>,
}

impl Stores {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A call of `loaded` under `limits` with exactly `caps`: a spare of the component with the
    /// call's state put in (`Some` tool), or a fresh store (`None`: instantiate it).
    pub(super) fn for_call(
        &self,
        engine: &Engine,
        loaded: &Loaded,
        caps: &Capabilities,
        limits: &Limits,
        cancel: &CancelToken,
    ) -> Result<(Store<CallState>, Option<tool_bindings::Tool>)> {
        if !self.serving.load(Ordering::Relaxed) {
            return Ok((fresh(engine, caps, limits, cancel)?, None));
        }
        // Stores are dropped after the lock: the finished ones, and a spare made under
        // another memory limit.
        let (spare, done) = {
            let mut inner = self.lock();
            let spare = inner
                .ready
                .iter()
                .position(|r| r.0 == loaded.digest)
                .map(|i| inner.ready.remove(i));
            if !inner.wanted.iter().any(|(l, _)| l.digest == loaded.digest) {
                inner.wanted.push((loaded.clone(), limits.max_memory_bytes));
            }
            let done = match inner.done.len() >= MAX_DONE {
                true => std::mem::take(&mut inner.done),
                false => Vec::new(),
            };
            (spare, done)
        };
        drop(done);
        let spare = match spare {
            Some((_, memory, spare)) if memory == limits.max_memory_bytes => Some(spare),
            _ => None,
        };
        Ok(match spare {
            Some(Spare { mut store, tool }) => {
                self.spares_used.fetch_add(1, Ordering::Relaxed);
                let state = call_state(caps, limits, cancel)?;
                let table = std::mem::take(&mut store.data_mut().table);
                *store.data_mut() = CallState { table, ..state };
                arm(&mut store, limits, cancel.clone());
                (store, Some(tool))
            }
            None => (fresh(engine, caps, limits, cancel)?, None),
        })
    }

    /// A call finished with `store`: keep it to drop when idle if the call could touch only
    /// files and directories ([`files_only`] of its capabilities), else drop it now.
    pub(super) fn finished(&self, store: Store<CallState>, files_only: bool) {
        if files_only && self.serving.load(Ordering::Relaxed) {
            let mut inner = self.lock();
            if inner.done.len() < MAX_DONE {
                inner.done.push(store);
                return;
            }
        }
        drop(store);
    }

    /// The server is under load (calls overlap): until the next [`Stores::idle`], calls drop
    /// their stores as they end and use no spare, as in a process that never idles; a store
    /// kept for later is dropped now.
    pub(super) fn under_load(&self) {
        if self.serving.swap(false, Ordering::Relaxed) {
            let done = std::mem::take(&mut self.lock().done);
            drop(done);
        }
    }

    /// The server answered and has nothing to do: drop the finished calls' stores and
    /// instantiate a spare of each component called since the last idle moment.
    pub(super) async fn idle(&self, engine: &Engine) {
        self.serving.store(true, Ordering::Relaxed);
        let (done, wanted) = {
            let mut inner = self.lock();
            (
                std::mem::take(&mut inner.done),
                std::mem::take(&mut inner.wanted),
            )
        };
        drop(done);
        for (loaded, memory) in wanted {
            if self.lock().ready.iter().any(|r| r.0 == loaded.digest) {
                continue;
            }
            let Some(spare) = make_spare(engine, &loaded, memory).await else {
                continue;
            };
            let mut inner = self.lock();
            if inner.ready.iter().any(|r| r.0 == loaded.digest) {
                continue;
            }
            if inner.ready.len() >= MAX_SPARES {
                // The component least recently made a spare of makes room.
                inner.ready.remove(0);
            }
            inner.ready.push((loaded.digest.clone(), memory, spare));
        }
    }
}

/// Whether a call with `caps` can touch nothing but files and directories, and none for
/// writing: its store may outlive it until the server is idle.
pub(super) fn files_only(caps: &Capabilities) -> bool {
    caps.exec.is_none()
        && caps.lsp.is_none()
        && caps.net.is_none()
        && caps.preopens.iter().all(|p| !p.writable)
}

/// `loaded` instantiated in a store that grants nothing, or `None` when that failed or left
/// anything in the resource table.
async fn make_spare(engine: &Engine, loaded: &Loaded, memory: usize) -> Option<Spare> {
    let limits = Limits {
        max_memory_bytes: memory,
        ..Limits::default()
    };
    let state = call_state(&Capabilities::none(), &limits, &CancelToken::never()).ok()?;
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    store.set_epoch_deadline(SPARE_TICKS);
    store.epoch_deadline_trap();
    let tool = loaded.pre.instantiate_async(&mut store).await.ok()?;
    if !store.data().table.is_empty() || store.data().limits.hit.is_some() {
        return None;
    }
    Some(Spare { store, tool })
}

/// A new store for a call with exactly `caps` under `limits`.
pub(super) fn fresh(
    engine: &Engine,
    caps: &Capabilities,
    limits: &Limits,
    cancel: &CancelToken,
) -> Result<Store<CallState>> {
    let mut store = Store::new(engine, call_state(caps, limits, cancel)?);
    store.limiter(|s| &mut s.limits);
    arm(&mut store, limits, cancel.clone());
    Ok(store)
}

/// A call's state: its WASI context with exactly `caps`, its limits and its cancellation.
fn call_state(caps: &Capabilities, limits: &Limits, cancel: &CancelToken) -> Result<CallState> {
    Ok(CallState {
        wasi: caps.build_ctx()?,
        table: ResourceTable::new(),
        limits: limiter::CallLimiter::new(limits.max_memory_bytes),
        fsguard: super::fsguard::FsGuard::new(caps.deny.clone()),
        exec: caps.exec.clone(),
        lsp: caps.lsp.clone(),
        http: wasmtime_wasi_http::WasiHttpCtx::new(),
        net: net::NetHooks {
            grant: caps.net.clone(),
            trace: None,
        },
        walk: walk::WalkScope {
            preopens: caps.preopens.clone(),
            deny: caps.deny.clone(),
            ignore_patterns: limits.ignore_patterns,
            ignore_bytes: limits.ignore_bytes,
            memory_bytes: limits.max_memory_bytes,
            deadline: Instant::now().checked_add(limits.timeout),
            cut: Arc::default(),
        },
        read_ahead_open: false,
        cancel: cancel.clone(),
    })
}

/// Set the call's deadline (and, for a cancellable call, its cancellation) on `store`.
fn arm(store: &mut Store<CallState>, limits: &Limits, cancel: CancelToken) {
    let ticks = limits.deadline_ticks(EPOCH_TICK);
    match cancel.can_cancel() {
        // A cancellable call: check the flag at every tick, yield to the executor, and trap
        // at the deadline.
        true => {
            let mut left = ticks;
            store.set_epoch_deadline(1);
            store.epoch_deadline_callback(move |_| {
                if cancel.is_cancelled() {
                    return Err(wasmtime::Error::new(Cancelled));
                }
                left = left.saturating_sub(1);
                if left == 0 {
                    return Err(Trap::Interrupt.into());
                }
                // Yield at every tick, so the task running the call can notice the
                // cancellation (and send progress) while the guest computes.
                Ok(wasmtime::UpdateDeadline::Yield(1))
            });
        }
        false => {
            store.set_epoch_deadline(ticks);
            store.epoch_deadline_trap();
        }
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
