//! OpenTelemetry export of the audit: with `[telemetry] otlp_endpoint` in
//! the policy (or `OTEL_EXPORTER_OTLP_ENDPOINT`), every call's audit events also leave the
//! process over OTLP/HTTP (protobuf) as one span per call, and two counters (decisions,
//! denials) are exported beside them.
//!
//! What is exported is what the audit stores: [`record`] is called by `StateDb::audit` with
//! the details after `scrub`, so a secret the audit would not keep is not exported either.
//!
//! Export never blocks or fails a call: a call only builds its span and hands it to the SDK's
//! batch processor (a bounded queue; when it is full, spans are dropped, never waited for).
//! Sending happens on the processor's own thread through [`Transport`], a small hyper client
//! running on a thread of its own (no runtime of the caller's is needed). A collector that
//! cannot be reached is said once on stderr per outage ([`Health`]); spans are kept (up to
//! [`MAX_KEPT`]) and sent again after a backoff that doubles up to [`MAX_BACKOFF`].
//!
//! A process that exits (the state database closes) waits at most [`FLUSH_BOUND`] for what is
//! queued to be sent ([`flush`]); with no endpoint configured nothing is waited for.

use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

mod export;
mod health;
pub(crate) mod transport;

use export::Exporter;
#[cfg(doc)]
use {health::Health, transport::Transport};

/// The environment variable read when no policy layer sets `[telemetry] otlp_endpoint`.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Longest a closing process waits for queued spans and counters to be sent.
pub const FLUSH_BOUND: Duration = Duration::from_millis(1500);

/// Bound on one request to the collector (connect, send, answer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Spans kept while the collector cannot be reached; older ones are dropped (and counted).
const MAX_KEPT: usize = 4096;

/// The first wait after a failed send; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait between two attempts while the collector cannot be reached.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Calls whose span is open (started, not completed) at most; past this the open ones are
/// ended as they are (a call that never completes must not grow memory).
const MAX_OPEN: usize = 4096;

/// Longest string attribute exported (input, reason, summary); longer ones are cut.
const MAX_ATTR: usize = 4096;

/// Check an OTLP/HTTP endpoint as written in a policy or the environment: an `http://` or
/// `https://` base URL (the collector's address, `/v1/traces` is added), without credentials,
/// query or fragment. Returns it without a trailing `/`.
pub fn check_endpoint(text: &str) -> Result<String, String> {
    let example = "write the collector's OTLP/HTTP base address, e.g. \"http://127.0.0.1:4318\"";
    let trimmed = text.trim();
    let uri: http::Uri = trimmed
        .parse()
        .map_err(|e| format!("`{text}` is not a URL ({e}); {example}"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => {
            return Err(format!(
                "`{text}` uses `{other}://`; OTLP/HTTP needs http:// or https://; {example}"
            ))
        }
        None => return Err(format!("`{text}` has no http:// or https://; {example}")),
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("`{text}` names no host; {example}"))?;
    if authority.as_str().contains('@') {
        return Err(format!(
            "`{text}` carries credentials; leave them out of the URL and pass them as headers in OTEL_EXPORTER_OTLP_HEADERS"
        ));
    }
    if authority.host().is_empty() {
        return Err(format!("`{text}` names no host; {example}"));
    }
    if uri.query().is_some() || trimmed.contains('#') {
        return Err(format!("`{text}` has a query or fragment; {example}"));
    }
    let base = trimmed.trim_end_matches('/');
    if base.ends_with("/v1/traces") || base.ends_with("/v1/metrics") {
        return Err(format!(
            "`{text}` is a signal's own URL; give the base address (without /v1/traces or /v1/metrics), {example}"
        ));
    }
    Ok(base.to_string())
}

/// `[telemetry]`: export of the audit over OTLP/HTTP (this module). Set by the
/// user, command-line, trusted workspace or managed layer (the highest wins; an untrusted
/// workspace's is ignored and named), else by `OTEL_EXPORTER_OTLP_ENDPOINT`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TelemetryPolicy {
    /// The collector's OTLP/HTTP base address (`/v1/traces` and `/v1/metrics` are added).
    pub otlp_endpoint: Option<String>,
    /// Which file (or the environment variable) set it.
    pub source: Option<String>,
}

/// Set when an exporter is configured: the only thing a call pays for when none is.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The process's exporter (one per process: the gates opened in it share it).
static EXPORTER: RwLock<Option<Arc<Exporter>>> = RwLock::new(None);

/// Configure the exporter from the resolved policy (the policy layers, else
/// `OTEL_EXPORTER_OTLP_ENDPOINT`: see `Policy::layered`). Called once per gate; a gate whose
/// endpoint is the one already in use changes nothing, one with none keeps what another gate
/// of this process configured.
pub fn configure(config: &TelemetryPolicy) {
    let Some(endpoint) = config.otlp_endpoint.as_deref() else {
        return;
    };
    let mut slot = EXPORTER.write().unwrap_or_else(|p| p.into_inner());
    if slot.as_ref().is_some_and(|e| e.endpoint == endpoint) {
        return;
    }
    match Exporter::new(endpoint) {
        Ok(exporter) => {
            tracing::debug!(endpoint, source = ?config.source, "exporting the audit over OTLP/HTTP");
            let old = slot.replace(Arc::new(exporter));
            ACTIVE.store(true, Ordering::Release);
            if let Some(old) = old {
                let _ = std::thread::Builder::new()
                    .name("toolgate-otlp-close".into())
                    .spawn(move || old.shutdown());
            }
        }
        Err(e) => tracing::warn!(
            "cannot export the audit to {endpoint} ([telemetry] otlp_endpoint): {e}; calls go on, the audit stays in the state database"
        ),
    }
}

fn current() -> Option<Arc<Exporter>> {
    if !ACTIVE.load(Ordering::Acquire) {
        return None;
    }
    EXPORTER.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Export one call's audit events (already scrubbed as the audit stores them). `intent`
/// opens the call's span, `decision` sets its decision attributes and counts it, `completed`
/// ends it. Never blocks on the network.
pub(crate) fn record<E: AsRef<str>>(
    call_id: &str,
    session: &str,
    tool: &str,
    events: &[(E, Value)],
) {
    if let Some(exporter) = current() {
        exporter.record(call_id, session, tool, events);
    }
}

/// Wait (at most [`FLUSH_BOUND`]) until what was recorded so far has been sent. Called when
/// the state database closes, so a one-shot `toolgate call` delivers its span before it
/// exits; costs nothing when no endpoint is configured.
pub(crate) fn flush() {
    let Some(exporter) = current() else {
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("toolgate-otlp-flush".into())
        .spawn(move || {
            exporter.end_open();
            let _ = exporter.tracer_provider.force_flush();
            let _ = exporter.meter_provider.force_flush();
            let _ = tx.send(());
        });
    if spawned.is_ok() {
        let _ = rx.recv_timeout(FLUSH_BOUND);
    }
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod endpoint_tests;
