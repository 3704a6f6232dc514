//! The exporter a configured endpoint gets: the SDK's span and metric pipelines, each call's
//! open span, and the two counters.

use super::health::{GuardedMetrics, Health, KeptSpans};
use super::transport::Transport;
use super::*;
use opentelemetry::metrics::{Counter, MeterProvider as _};
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::HttpClient;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// A configured export: the SDK's providers, the call spans still open, the counters.
pub(super) struct Exporter {
    pub(super) endpoint: String,
    pub(super) tracer_provider: SdkTracerProvider,
    pub(super) meter_provider: SdkMeterProvider,
    tracer: SdkTracer,
    decisions: Counter<u64>,
    denials: Counter<u64>,
    open: Mutex<HashMap<String, opentelemetry_sdk::trace::Span>>,
}

impl Exporter {
    pub(super) fn new(endpoint: &str) -> Result<Exporter, String> {
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

    pub(super) fn record<E: AsRef<str>>(
        &self,
        call_id: &str,
        session: &str,
        tool: &str,
        events: &[(E, Value)],
    ) {
        let now = SystemTime::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for (event, detail) in events {
            let event = &event.as_ref();
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
    pub(super) fn end_open(&self) {
        let now = SystemTime::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for (_, mut span) in open.drain() {
            span.end_with_timestamp(now);
        }
    }

    pub(super) fn shutdown(&self) {
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
