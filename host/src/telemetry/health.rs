//! Whether the collector is reachable, and the span and metric exporters that consult it:
//! one message per outage, a doubling backoff, spans kept for the next try.

use super::*;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
pub(super) struct KeptSpans<E> {
    pub(super) inner: E,
    pub(super) health: Arc<Health>,
    pub(super) kept: Mutex<Vec<SpanData>>,
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
pub(super) struct GuardedMetrics<E> {
    pub(super) inner: E,
    pub(super) health: Arc<Health>,
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

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
