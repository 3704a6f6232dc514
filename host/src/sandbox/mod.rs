//! The sandbox: one wasmtime engine, compiled components cached on disk, and a fresh store per
//! call whose WASI context holds exactly the capabilities the gate granted.

mod bindings;
pub(crate) mod bulk;
mod cache;
mod fsguard;
mod fstrace;
mod limiter;
mod limits;
mod link;
mod lsp;
pub mod net;
mod read_ahead;
mod store;
pub mod trace;
mod trap;
mod walk;
mod wasi;

use trap::{classify, Cancelled};

pub(crate) use cache::ToolMeta;
pub use fsguard::FsDeny;
pub use limits::Limits;
pub use lsp::LSP_INTERFACE_PREFIX;
pub use read_ahead::SEARCH_INTERFACE_PREFIX;
pub use walk::WALK_INTERFACE_PREFIX;
pub use wasi::{Capabilities, Preopen};

use crate::cancel::CancelToken;
use crate::error::{Error, Limit, Result};
use sha2::Digest as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use bindings::since_v0_1_0::exec::toolgate::host::exec as wexec;
use bindings::since_v0_1_0::tool as tool_bindings;
pub(crate) use tool_bindings::toolgate::tool::types as wit;

/// Calls that can run at the same time (instance slots in the pooling allocator). A call
/// beyond this fails with an error instead of queueing without bound.
const POOL_SLOTS: u32 = 128;

/// Bytes of each instance slot's linear memory kept resident between calls (reset by memset).
const KEEP_RESIDENT: usize = 4 << 20;

/// How often the epoch ticks. Deadlines are counted in ticks, so a deadline overshoots by at
/// most about one tick.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Per-store state: the call's WASI context and resource table, and its limits.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The memory and table limits, and which one a refused growth hit.
    limits: limiter::CallLimiter,
    /// The deny-list inside the preopens, and the paths of the guest's directory descriptors.
    fsguard: fsguard::FsGuard,
    /// What this call may do with the host exec capability (`None`: nothing).
    exec: Option<crate::exec::ExecGrant>,
    lsp: Option<crate::exec::lsp::LspGrant>,
    /// `wasi:http` state; requests go through `net`, which checks them against the grant.
    http: wasmtime_wasi_http::WasiHttpCtx,
    net: net::NetHooks,
    /// What the host-assisted walk may list: the call's preopens and deny-list.
    walk: walk::WalkScope,
    /// Whether a read-ahead reader of this call is open (one at a time).
    read_ahead_open: bool,
    /// The call's cancel token: the epoch callback, the host walk and a shell command's wait
    /// look at it.
    pub(crate) cancel: CancelToken,
}

impl wasmtime_wasi_http::WasiHttpView for CallState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit::Host for CallState {}

fn to_wit_outcome(o: crate::exec::Outcome) -> wexec::Outcome {
    use crate::exec::run::State;
    let stream = |s: crate::exec::run::StreamView| wexec::StreamOutput {
        preview: s.preview,
        truncated: s.truncated,
        total_bytes: s.total_bytes,
        total_lines: s.total_lines,
    };
    wexec::Outcome {
        state: match o.state {
            State::Exited => wexec::State::Exited,
            State::Running => wexec::State::Running,
            State::TimedOut => wexec::State::TimedOut,
            State::Killed => wexec::State::Killed,
        },
        exit_code: o.exit_code,
        signal: o.signal,
        stdout: stream(o.stdout),
        stderr: stream(o.stderr),
        duration_ms: o.duration_ms,
        job_id: o.job_id,
        full_output_ref: o.full_output_ref,
        data: o.data.to_string(),
    }
}

impl wexec::Host for CallState {
    async fn run(&mut self, cmd: wexec::Command) -> Result<wexec::Outcome, String> {
        crate::exec::host_run(self.exec.as_mut(), &cmd.text, cmd.background, &self.cancel)
            .await
            .map(to_wit_outcome)
            .map_err(|e| e.to_string())
    }

    async fn job_output(&mut self, job_id: String) -> Result<wexec::Outcome, String> {
        crate::exec::host_job_output(self.exec.as_ref(), &job_id)
            .await
            .map(to_wit_outcome)
            .map_err(|e| e.to_string())
    }

    async fn job_kill(&mut self, job_id: String) -> Result<wexec::Outcome, String> {
        crate::exec::host_job_kill(self.exec.as_ref(), &job_id)
            .await
            .map(to_wit_outcome)
            .map_err(|e| e.to_string())
    }
}

/// A component compiled and linked, ready to be instantiated once per call.
#[derive(Clone)]
pub struct Loaded {
    pre: tool_bindings::ToolPre<CallState>,
    /// The interfaces the component imports, e.g. `wasi:filesystem/types@0.2.6`.
    pub imports: Vec<String>,
    /// Hex sha256 of the component's bytes.
    pub digest: String,
}

/// What a guest returned from a call that ran to completion.
pub enum GuestResult {
    /// The tool succeeded.
    Output(wit::Output),
    /// The tool reported a structured error.
    ToolError(wit::ToolError),
}

/// What one call returned, with what the host refused along the way (also when the guest
/// trapped, hit a limit or was cancelled after a refused request).
pub struct CallReport {
    /// What the guest returned, or why the call failed.
    pub result: Result<GuestResult>,
    /// The network requests the host refused during the call, in words (at most 32).
    pub net_refusals: Vec<String>,
}

/// The engine and linker shared by every call.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<CallState>,
    cache: cache::ArtifactCache,
    stop_ticker: Arc<AtomicBool>,
    /// Spares and finished calls' stores (see [`store`]).
    stores: Arc<store::Stores>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Sandbox {
    /// Create the engine, the WASI linker and the epoch ticker. `cache_dir` holds compiled
    /// artifacts (`None`: the user's cache directory).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self> {
        Self::with_options(cache_dir, SandboxOptions::default())
    }

    /// [`Sandbox::new`] with options (the command line's one-shot calls).
    pub fn with_options(cache_dir: Option<PathBuf>, options: SandboxOptions) -> Result<Self> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .cranelift_opt_level(wasmtime::OptLevel::Speed);
        if !options.one_shot {
            // A server compiles a cold cache's components side by side, one per core
            // (`Sandbox::load_many`), so the compiler's own thread pool adds nothing there:
            // its threads would only stay, idle, each keeping the allocator's pages of what
            // it compiled (a server idle after a cold start sat at ~600 MB of RSS with them,
            // ~250 MB without). A one-shot call compiles the one component it calls on every
            // core.
            config.parallel_compilation(false);
        }
        let engine = if options.one_shot {
            // One call per process: reserving 128 instance slots (and tearing them down)
            // costs more than mapping the one instance's memory on demand.
            Engine::new(&config).map_err(|e| Error::Sandbox(format!("{e:#}")))?
        } else {
            pooled_engine(&config)?
        };
        let linker = link::linker(&engine)?;

        let stop_ticker = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = stop_ticker.clone();
            std::thread::Builder::new()
                .name("toolgate-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| Error::Sandbox(format!("starting the epoch ticker: {e}")))?;
        }
        let cache = cache::ArtifactCache::new(cache_dir, &engine, options.progress);
        Ok(Sandbox {
            engine,
            linker,
            cache,
            stop_ticker,
            stores: Arc::default(),
        })
    }

    /// Compile (or load from the artifact cache) and link a component.
    pub fn load(&self, name: &str, bytes: &[u8]) -> Result<Loaded> {
        let digest = hex::encode(sha2::Sha256::digest(bytes));
        Ok(self.load_digest(name, bytes, &digest)?.0)
    }

    /// [`Sandbox::load_digest`] for each of `items` (a name, the bytes and their sha256),
    /// side by side on at most one thread per core; the results in the order of `items`.
    pub(crate) fn load_many(&self, items: &[(&str, &[u8], &str)]) -> Vec<LoadResult> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut done: Vec<(usize, LoadResult)> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..cores.min(items.len()))
                .map(|_| {
                    sc.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(name, bytes, digest)) = items.get(i) else {
                                return mine;
                            };
                            mine.push((i, self.load_digest(name, bytes, digest)));
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        done.sort_by_key(|(i, _)| *i);
        let mut done = done.into_iter().peekable();
        (0..items.len())
            .map(|i| match done.next_if(|(j, _)| *j == i) {
                Some((_, r)) => r,
                None => Err(Error::ComponentLoad {
                    name: items[i].0.to_string(),
                    message: "the compiler thread panicked".into(),
                }),
            })
            .collect()
    }

    /// [`Sandbox::load`] for bytes whose sha256 is known (`digest`, hex), with the
    /// self-description recorded beside the cached artifact, if there is one.
    pub(crate) fn load_digest(
        &self,
        name: &str,
        bytes: &[u8],
        digest: &str,
    ) -> Result<(Loaded, Option<cache::ToolMeta>)> {
        let (component, meta) = self.cache.load(&self.engine, name, bytes, digest)?;
        let digest = digest.to_string();
        let imports = component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let instance_pre =
            self.linker
                .instantiate_pre(&component)
                .map_err(|e| Error::ComponentLoad {
                    name: name.to_string(),
                    message: format!("{e:#}"),
                })?;
        let pre = tool_bindings::ToolPre::new(instance_pre).map_err(|e| Error::ComponentLoad {
            name: name.to_string(),
            message: format!("it does not export the toolgate:tool@0.1.0 world: {e:#}"),
        })?;
        Ok((
            Loaded {
                pre,
                imports,
                digest,
            },
            meta,
        ))
    }

    /// The self-description recorded beside the cached artifact of component `digest`
    /// (nothing compiled or mapped), if any.
    pub(crate) fn cached_meta(&self, digest: &str) -> Option<cache::ToolMeta> {
        self.cache.meta(digest)
    }

    /// Record a component's self-description beside its cached artifact.
    pub(crate) fn record_meta(&self, digest: &str, meta: &cache::ToolMeta) {
        self.cache.record_meta(digest, meta);
    }

    /// Ask a loaded component to describe itself, with no capabilities at all.
    pub async fn describe(&self, loaded: &Loaded, limits: &Limits) -> Result<wit::Descriptor> {
        let mut store = store::fresh(
            &self.engine,
            &Capabilities::none(),
            limits,
            &CancelToken::never(),
        )?;
        let tool = loaded
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| classify(e, limits, store.data().limits.hit))?;
        tool.call_describe(&mut store)
            .await
            .map_err(|e| classify(e, limits, store.data().limits.hit))
    }

    /// Run one call in a fresh store with exactly `caps`, under `limits`.
    pub async fn call(
        &self,
        loaded: &Loaded,
        caps: &Capabilities,
        limits: &Limits,
        input: &str,
        context: &wit::CallContext,
        cancel: &CancelToken,
    ) -> Result<GuestResult> {
        self.call_report(loaded, caps, limits, input, context, cancel)
            .await
            .result
    }

    /// [`Sandbox::call`], with the network refusals of the call returned by value, whether
    /// the guest returned or not.
    pub async fn call_report(
        &self,
        loaded: &Loaded,
        caps: &Capabilities,
        limits: &Limits,
        input: &str,
        context: &wit::CallContext,
        cancel: &CancelToken,
    ) -> CallReport {
        match self.call_store(loaded, caps, limits, cancel) {
            Ok((mut store, tool)) => {
                let result = run_call(&mut store, loaded, tool, limits, input, context).await;
                let report = report(&store, result);
                self.stores.finished(store, store::files_only(caps));
                report
            }
            Err(e) => report_err(e),
        }
    }

    /// [`Sandbox::call_report`] as a future that owns what it needs, so it can run on
    /// another runtime (see [`bulk`]). The store is made here, on the caller's task.
    pub(crate) fn call_report_owned(
        &self,
        loaded: Loaded,
        caps: &Capabilities,
        limits: Limits,
        input: String,
        context: wit::CallContext,
        cancel: &CancelToken,
    ) -> impl std::future::Future<Output = CallReport> + Send + 'static {
        let store = self.call_store(&loaded, caps, &limits, cancel);
        let stores = self.stores.clone();
        let files_only = store::files_only(caps);
        async move {
            match store {
                Ok((mut store, tool)) => {
                    let result =
                        run_call(&mut store, &loaded, tool, &limits, &input, &context).await;
                    let report = report(&store, result);
                    stores.finished(store, files_only);
                    report
                }
                Err(e) => report_err(e),
            }
        }
    }

    /// The server is under load: see [`store::Stores::under_load`].
    pub fn under_load(&self) {
        self.stores.under_load();
    }

    /// The server has answered and waits for the next request: do what finished calls left
    /// and make the next calls' instances ahead (see [`store`]).
    pub async fn idle(&self) {
        self.stores.idle(&self.engine).await;
    }

    /// A call's store (and its tool, if it was instantiated ahead), with the call's trace (if
    /// one is being taken) attached.
    fn call_store(
        &self,
        loaded: &Loaded,
        caps: &Capabilities,
        limits: &Limits,
        cancel: &CancelToken,
    ) -> Result<(Store<CallState>, Option<tool_bindings::Tool>)> {
        let (mut store, tool) = self
            .stores
            .for_call(&self.engine, loaded, caps, limits, cancel)?;
        if let Some(t) = trace::current() {
            let mounts = caps
                .preopens
                .iter()
                .map(|p| trace::mount(&p.guest, p.writable));
            trace::with(Some(&t), |t| t.mounts = mounts.collect());
            (store.data_mut().fsguard.trace, store.data_mut().net.trace) =
                (Some(t.clone()), Some(t));
        }
        Ok((store, tool))
    }
}

/// What a call that ran in `store` returned, with what the host refused.
fn report(store: &Store<CallState>, result: Result<GuestResult>) -> CallReport {
    CallReport {
        result,
        net_refusals: store.data().net.refusals(),
    }
}

/// A call that never got a store.
fn report_err(e: Error) -> CallReport {
    CallReport {
        result: Err(e),
        net_refusals: Vec::new(),
    }
}

/// Instantiate `loaded` in `store` and run its `call`: what the guest returned, within
/// `limits`.
async fn run_call(
    store: &mut Store<CallState>,
    loaded: &Loaded,
    tool: Option<tool_bindings::Tool>,
    limits: &Limits,
    input: &str,
    context: &wit::CallContext,
) -> Result<GuestResult> {
    let tool = match tool {
        Some(tool) => tool,
        None => loaded
            .pre
            .instantiate_async(&mut *store)
            .await
            .map_err(|e| classify(e, limits, store.data().limits.hit))?,
    };
    let result = tool
        .call_call(&mut *store, input, context)
        .await
        .map_err(|e| classify(e, limits, store.data().limits.hit))?;
    let cut = store.data().walk.ignore_files_cut();
    Ok(match result {
        Ok(mut output) => {
            if !cut.is_empty() {
                output.data = with_ignore_files_cut(&output.data, cut);
            }
            let size = output.content.len() + output.data.len() + output.summary.len();
            if size > limits.max_result_bytes {
                return Err(Error::Limit {
                    limit: Limit::ResultBytes,
                    message: format!(
                        "the tool returned {size} bytes, more than the {} byte result limit",
                        limits.max_result_bytes
                    ),
                });
            }
            GuestResult::Output(output)
        }
        Err(error) => GuestResult::ToolError(error),
    })
}

/// The tool's `data` (a JSON text) with `ignore_files_cut`: the ignore files whose patterns
/// the host walk cut at `[limits] ignore_patterns` / `ignore_bytes` or the deadline (the walk
/// went on with the patterns it kept).
fn with_ignore_files_cut(data: &str, cut: Vec<String>) -> String {
    let mut value: serde_json::Value =
        serde_json::from_str(data).unwrap_or(serde_json::Value::Null);
    if !value.is_object() {
        value = serde_json::json!({});
    }
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("ignore_files_cut".into(), serde_json::json!(cut));
        map.insert(
            "ignore_files_cut_hint".into(),
            serde_json::json!(
                "these ignore files had more patterns than [limits] ignore_patterns / ignore_bytes allow (or the deadline came first): the walk used the patterns before the cut, so some ignored files may be listed or searched; shorten the files or raise the limits in your own policy"
            ),
        );
    }
    value.to_string()
}

/// An engine with a pool of pre-reserved instance slots (servers: many calls per process).
fn pooled_engine(config: &Config) -> Result<Engine> {
    // A pool of pre-reserved instance slots makes instantiation per call cheap (no mmap and
    // munmap of a fresh memory reservation every time). If the pool cannot be reserved
    // (a low `ulimit -v`), fall back to on-demand allocation rather than not starting.
    let mut pooled = config.clone();
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_SLOTS)
        .total_core_instances(POOL_SLOTS * 8)
        .total_memories(POOL_SLOTS * 2)
        .total_tables(POOL_SLOTS * 4)
        .total_stacks(POOL_SLOTS)
        // Reset a slot's pages in place instead of giving them back to the kernel:
        // each `madvise` is a TLB shootdown across cores and the next call page-faults them
        // in again, which cost more than the whole guest call for small tools.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(256 << 10)
        // Batch what is still decommitted, so one shootdown covers several calls.
        .decommit_batch_size(16)
        // Where the kernel has PAGEMAP_SCAN (Linux 6.7+), reset only the pages the call
        // touched instead of memsetting the whole resident window.
        .pagemap_scan(wasmtime::Enabled::Auto);
    pooled.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = match Engine::new(&pooled) {
        Ok(engine) => engine,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "pooling allocator unavailable; using on-demand allocation");
            Engine::new(config).map_err(|e| Error::Sandbox(format!("{e:#}")))?
        }
    };
    Ok(engine)
}

/// A component loaded, with the self-description recorded beside its artifact, if any.
pub(crate) type LoadResult = Result<(Loaded, Option<cache::ToolMeta>)>;

/// How a [`Sandbox`] is set up.
#[derive(Clone, Copy, Debug, Default)]
pub struct SandboxOptions {
    /// Say on stderr when a component is compiled (first use, or after an upgrade).
    pub progress: bool,
    /// One call in this process (`toolgate call`): no pool of instance slots.
    pub one_shot: bool,
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;
