//! OpenTelemetry export of the audit (issue #15 part 5): with `[telemetry] otlp_endpoint` in
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

use opentelemetry::metrics::{Counter, MeterProvider as _};
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};
use opentelemetry_sdk::Resource;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

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
pub(crate) fn record(call_id: &str, session: &str, tool: &str, events: &[(&str, Value)]) {
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

/// A configured export: the SDK's providers, the call spans still open, the counters.
struct Exporter {
    endpoint: String,
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    tracer: SdkTracer,
    decisions: Counter<u64>,
    denials: Counter<u64>,
    open: Mutex<HashMap<String, opentelemetry_sdk::trace::Span>>,
}

impl Exporter {
    fn new(endpoint: &str) -> Result<Exporter, String> {
        let health = Arc::new(Health::new(endpoint));
        let transport: Arc<dyn HttpClient> = Arc::new(Transport::start()?);
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{endpoint}/v1/traces"))
            .with_timeout(REQUEST_TIMEOUT)
            .with_shared_http_client(transport.clone())
            .with_retry_policy(opentelemetry_otlp::RetryPolicy::disabled())
            .build()
            .map_err(|e| e.to_string())?;
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{endpoint}/v1/metrics"))
            .with_timeout(REQUEST_TIMEOUT)
            .with_shared_http_client(transport)
            .with_retry_policy(opentelemetry_otlp::RetryPolicy::disabled())
            .build()
            .map_err(|e| e.to_string())?;
        let resource = resource();
        let tracer_provider = SdkTracerProvider::builder()
            .with_span_processor(
                BatchSpanProcessor::builder(KeptSpans {
                    inner: spans,
                    health: health.clone(),
                    kept: Mutex::new(Vec::new()),
                })
                .build(),
            )
            .with_resource(resource.clone())
            .build();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(
                PeriodicReader::builder(GuardedMetrics {
                    inner: metrics,
                    health,
                })
                .build(),
            )
            .with_resource(resource)
            .build();
        let tracer = tracer_provider.tracer("toolgate");
        let meter = meter_provider.meter("toolgate");
        let decisions = meter
            .u64_counter("toolgate.decisions")
            .with_description("Calls decided, by decision, stage and tool")
            .with_unit("{call}")
            .build();
        let denials = meter
            .u64_counter("toolgate.denials")
            .with_description("Calls denied, by tool and stage")
            .with_unit("{call}")
            .build();
        Ok(Exporter {
            endpoint: endpoint.to_string(),
            tracer_provider,
            meter_provider,
            tracer,
            decisions,
            denials,
            open: Mutex::new(HashMap::new()),
        })
    }

    fn record(&self, call_id: &str, session: &str, tool: &str, events: &[(&str, Value)]) {
        let now = SystemTime::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for (event, detail) in events {
            if !open.contains_key(call_id) {
                if open.len() >= MAX_OPEN {
                    for (_, mut span) in open.drain() {
                        span.end_with_timestamp(now);
                    }
                }
                let span = self.tracer.build_with_context(
                    self.tracer
                        .span_builder(format!("call {tool}"))
                        .with_kind(SpanKind::Internal)
                        .with_start_time(now)
                        .with_attributes([
                            KeyValue::new("toolgate.tool", tool.to_string()),
                            KeyValue::new("toolgate.session", session.to_string()),
                            KeyValue::new("toolgate.call_id", call_id.to_string()),
                        ]),
                    &Context::new(),
                );
                open.insert(call_id.to_string(), span);
            }
            let Some(span) = open.get_mut(call_id) else {
                continue;
            };
            let text = |k: &str| detail.get(k).and_then(Value::as_str).map(cap);
            match *event {
                "intent" => {
                    if let Some(input) = detail.get("input") {
                        span.set_attribute(KeyValue::new(
                            "toolgate.input",
                            cap(&input.to_string()),
                        ));
                    }
                    if let Some(sha) = text("input_sha256") {
                        span.set_attribute(KeyValue::new("toolgate.input_sha256", sha));
                    }
                }
                "decision" => {
                    let decision = text("decision").unwrap_or_default();
                    let stage = text("stage").unwrap_or_default();
                    for k in ["decision", "stage", "source", "reason"] {
                        if let Some(v) = text(k) {
                            span.set_attribute(KeyValue::new(format!("toolgate.{k}"), v));
                        }
                    }
                    // The call's key is audited as `permission` (a field named `key` reads as
                    // a secret's name to the audit's redaction).
                    if let Some(v) = text("permission") {
                        span.set_attribute(KeyValue::new("toolgate.key", v));
                    }
                    self.decisions.add(
                        1,
                        &[
                            KeyValue::new("toolgate.decision", decision.clone()),
                            KeyValue::new("toolgate.stage", stage.clone()),
                            KeyValue::new("toolgate.tool", tool.to_string()),
                        ],
                    );
                    if decision == "deny" {
                        self.denials.add(
                            1,
                            &[
                                KeyValue::new("toolgate.tool", tool.to_string()),
                                KeyValue::new("toolgate.stage", stage),
                            ],
                        );
                    }
                }
                "completed" => {
                    for k in ["status", "error_code", "summary"] {
                        if let Some(v) = text(k) {
                            span.set_attribute(KeyValue::new(format!("toolgate.{k}"), v));
                        }
                    }
                    if let Some(us) = detail.get("duration_us").and_then(Value::as_u64) {
                        span.set_attribute(KeyValue::new(
                            "toolgate.duration_us",
                            i64::try_from(us).unwrap_or(i64::MAX),
                        ));
                    }
                    if let Some(t) = detail.get("truncated").and_then(Value::as_bool) {
                        span.set_attribute(KeyValue::new("toolgate.truncated", t));
                    }
                    if text("status").as_deref() == Some("error") {
                        span.set_status(Status::error(
                            text("error_code").unwrap_or_else(|| "error".into()),
                        ));
                    }
                }
                _ => {}
            }
            span.add_event_with_timestamp(event.to_string(), now, Vec::new());
            if *event == "completed" {
                if let Some(mut span) = open.remove(call_id) {
                    span.end_with_timestamp(now);
                }
            }
        }
    }

    /// End the spans of calls still open (the process is closing).
    fn end_open(&self) {
        let now = SystemTime::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for (_, mut span) in open.drain() {
            span.end_with_timestamp(now);
        }
    }

    fn shutdown(&self) {
        self.end_open();
        let _ = self.tracer_provider.shutdown_with_timeout(FLUSH_BOUND);
        let _ = self.meter_provider.shutdown_with_timeout(FLUSH_BOUND);
    }
}

/// `service.name` is `toolgate` unless `OTEL_SERVICE_NAME` says otherwise (the SDK reads it
/// and `OTEL_RESOURCE_ATTRIBUTES`).
fn resource() -> Resource {
    let mut builder = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none_or(|v| v.is_empty()) {
        builder = builder.with_service_name("toolgate");
    }
    builder
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

/// `s` cut to [`MAX_ATTR`] bytes on a char boundary.
fn cap(s: &str) -> String {
    if s.len() <= MAX_ATTR {
        return s.to_string();
    }
    let mut cut = MAX_ATTR;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} bytes]", &s[..cut], s.len())
}

/// Whether the collector is reachable, shared by the span and metric exporters: one failure
/// message per outage, and a backoff during which nothing is tried.
#[derive(Debug)]
pub(crate) struct Health {
    endpoint: String,
    state: Mutex<HealthState>,
}

#[derive(Debug, Default)]
struct HealthState {
    /// Set while the collector cannot be reached: when the next attempt may be made.
    next_try: Option<Instant>,
    backoff: Duration,
    /// Spans dropped during this outage (more than [`MAX_KEPT`] waiting).
    dropped: u64,
}

impl Health {
    pub(crate) fn new(endpoint: &str) -> Self {
        Health {
            endpoint: endpoint.to_string(),
            state: Mutex::new(HealthState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a send may be attempted now (not inside a backoff).
    pub(crate) fn may_try(&self, now: Instant) -> bool {
        self.state().next_try.is_none_or(|t| now >= t)
    }

    /// A send failed: start or lengthen the backoff. Returns whether this began an outage
    /// (and so was said on stderr).
    pub(crate) fn failed(&self, now: Instant, why: &str) -> bool {
        let mut s = self.state();
        let first = s.next_try.is_none();
        s.backoff = if first {
            FIRST_BACKOFF
        } else {
            (s.backoff * 2).min(MAX_BACKOFF)
        };
        s.next_try = Some(now + s.backoff);
        drop(s);
        if first {
            tracing::warn!(
                "cannot send the audit to the OpenTelemetry collector at {}: {why}; calls go on and the audit stays in the state database; sending is retried with a backoff of up to {} s (said once until the collector answers again)",
                self.endpoint,
                MAX_BACKOFF.as_secs()
            );
        }
        first
    }

    /// A send succeeded: end an outage (and say so).
    pub(crate) fn succeeded(&self) {
        let mut s = self.state();
        if s.next_try.take().is_some() {
            let dropped = std::mem::take(&mut s.dropped);
            drop(s);
            tracing::warn!(
                "the OpenTelemetry collector at {} answers again; export resumed ({dropped} spans were dropped meanwhile)",
                self.endpoint
            );
        }
    }

    fn dropped(&self, n: usize) {
        self.state().dropped += n as u64;
    }
}

/// The OTLP span exporter, keeping what could not be sent for the next attempt.
#[derive(Debug)]
struct KeptSpans<E> {
    inner: E,
    health: Arc<Health>,
    kept: Mutex<Vec<SpanData>>,
}

impl<E> KeptSpans<E> {
    fn keep(&self, mut spans: Vec<SpanData>) {
        if spans.len() > MAX_KEPT {
            let over = spans.len() - MAX_KEPT;
            spans.drain(..over);
            self.health.dropped(over);
        }
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = spans;
    }
}

impl<E: SpanExporter> SpanExporter for KeptSpans<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut spans = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|p| p.into_inner()));
        spans.extend(batch);
        if spans.is_empty() {
            return Ok(());
        }
        if !self.health.may_try(Instant::now()) {
            self.keep(spans);
            return Ok(());
        }
        let copy = spans.clone();
        match self.inner.export(spans).await {
            Ok(()) => self.health.succeeded(),
            Err(e) => {
                self.health.failed(Instant::now(), &e.to_string());
                self.keep(copy);
            }
        }
        // The processor is told all is well either way: what failed is kept and retried here.
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP metric exporter, skipping attempts during a backoff (counters are cumulative, so
/// the next export that arrives carries the totals).
struct GuardedMetrics<E> {
    inner: E,
    health: Arc<Health>,
}

impl<E: PushMetricExporter> PushMetricExporter for GuardedMetrics<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        if !self.health.may_try(Instant::now()) {
            return Ok(());
        }
        match self.inner.export(metrics).await {
            Ok(()) => self.health.succeeded(),
            Err(e) => {
                self.health.failed(Instant::now(), &e.to_string());
            }
        }
        Ok(())
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// One request for the sender thread.
struct Job {
    request: Request<Bytes>,
    reply: tokio::sync::oneshot::Sender<Result<Response<Bytes>, String>>,
}

/// The HTTP client the OTLP exporters send with: requests go to a thread of its own running a
/// single-threaded runtime with hyper (HTTP/1.1; TLS with the webpki roots for https), so the
/// SDK's exporter threads need no runtime and no caller's runtime is touched.
#[derive(Debug)]
struct Transport {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl Transport {
    fn start() -> Result<Transport, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the sender's runtime: {e}"))?;
        let (jobs, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
        std::thread::Builder::new()
            .name("toolgate-otlp".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(job) = rx.recv().await {
                        tokio::spawn(async move {
                            let answer = tokio::time::timeout(REQUEST_TIMEOUT, post(job.request))
                                .await
                                .unwrap_or_else(|_| {
                                    Err(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))
                                });
                            let _ = job.reply.send(answer);
                        });
                    }
                })
            })
            .map_err(|e| format!("cannot start the sender thread: {e}"))?;
        Ok(Transport { jobs })
    }
}

#[async_trait::async_trait]
impl HttpClient for Transport {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Job { request, reply })
            .map_err(|_| "the OTLP sender thread has stopped")?;
        match answer.await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err("the OTLP sender thread has stopped".into()),
        }
    }
}

/// Most response-body bytes read from the collector.
const MAX_RESPONSE: usize = 4 << 20;

async fn post(request: Request<Bytes>) -> Result<Response<Bytes>, String> {
    let uri = request.uri().clone();
    let https = uri.scheme_str() == Some("https");
    let host = uri
        .host()
        .ok_or("the endpoint names no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect ({e})"))?;
    let _ = tcp.set_nodelay(true);
    let (mut parts, body) = request.into_parts();
    parts.uri = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|e| format!("bad request path: {e}"))?;
    if let Some(authority) = uri.authority() {
        if let Ok(v) = http::HeaderValue::from_str(authority.as_str()) {
            parts.headers.entry(http::header::HOST).or_insert(v);
        }
    }
    let request = Request::from_parts(parts, http_body_util::Full::new(body));
    if https {
        let name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|e| format!("bad host name for TLS: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS failed ({e})"))?;
        exchange(stream, request).await
    } else {
        exchange(tcp, request).await
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>> =
        std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| format!("cannot set up TLS ({e})"))
        })
        .clone()
}

async fn exchange<S>(
    stream: S,
    request: Request<http_body_util::Full<Bytes>>,
) -> Result<Response<Bytes>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    use http_body_util::BodyExt;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake failed ({e})"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("the request failed ({e})"))?;
    let (parts, body) = response.into_parts();
    let body = http_body_util::Limited::new(body, MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| format!("reading the answer failed ({e})"))?
        .to_bytes();
    Ok(Response::from_parts(parts, body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(
            check_endpoint("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318"
        );
        assert_eq!(
            check_endpoint("https://otel.example.com/otlp").unwrap(),
            "https://otel.example.com/otlp"
        );
        for bad in [
            "ftp://x:21",
            "127.0.0.1:4318",
            "http://user:pw@collector:4318",
            "http://collector:4318/?a=b",
            "http://collector:4318/v1/traces",
            "not a url",
            "",
        ] {
            let e = check_endpoint(bad).unwrap_err();
            assert!(e.contains("http"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_outage_is_said_once_and_backs_off() {
        let h = Health::new("http://127.0.0.1:9");
        let t0 = Instant::now();
        assert!(h.may_try(t0));
        assert!(h.failed(t0, "refused"), "the first failure is said");
        assert!(!h.may_try(t0 + Duration::from_millis(500)));
        assert!(h.may_try(t0 + FIRST_BACKOFF));
        let mut said = 0;
        let mut t = t0;
        for _ in 0..20 {
            t += MAX_BACKOFF;
            said += usize::from(h.failed(t, "refused"));
        }
        assert_eq!(
            said, 0,
            "later failures of the same outage are not said again"
        );
        assert_eq!(h.state().backoff, MAX_BACKOFF, "the backoff is capped");
        h.succeeded();
        assert!(h.may_try(t));
        assert!(h.failed(t, "refused"), "a new outage is said again");
        assert_eq!(h.state().backoff, FIRST_BACKOFF);
    }
}
