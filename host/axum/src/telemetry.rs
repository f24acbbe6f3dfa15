//! What the layer reports, in the core's vocabulary
//! (`intentkey::telemetry`): one `tracing` span per guarded request, named
//! and attributed as the core names them, an event with its decision, and
//! (cargo feature `otel`) OpenTelemetry metrics on the global meter
//! provider: the decision counter and the store and wait histograms.
//!
//! The span's fields: `intentkey.decision` (the primary decision),
//! `intentkey.profile`, `intentkey.store` (the store's kind),
//! `intentkey.key_digest` (a 12-hex digest of the storage key: never the
//! client's key, the secret or the body), `intentkey.wait_ms` and
//! `intentkey.store_ms`. `tracing-opentelemetry` bridges them to OTel
//! spans.

use std::time::Duration;

use intentkey::http::Served;
use intentkey::telemetry::{self, names};

/// The span of one guarded request, its fields still empty but the ones
/// known at the start. The field names are the core's (`names::*`; a test
/// checks that they match).
pub(crate) fn span(profile: &'static str, store: &'static str) -> tracing::Span {
    tracing::info_span!(
        "intentkey.request",
        "intentkey.decision" = tracing::field::Empty,
        "intentkey.profile" = profile,
        "intentkey.store" = store,
        "intentkey.key_digest" = tracing::field::Empty,
        "intentkey.wait_ms" = tracing::field::Empty,
        "intentkey.store_ms" = tracing::field::Empty,
    )
}

/// Records how a request ended on its span, as an event, and in the metrics.
pub(crate) fn served(
    span: &tracing::Span,
    served: &Served,
    key: Option<&str>,
    store: &'static str,
    store_time: Duration,
) {
    let decisions = telemetry::served(served);
    let primary = decisions.primary.as_str();
    let store_ms = store_time.as_secs_f64() * 1_000.0;
    span.record(names::DECISION, primary);
    span.record(names::WAIT_MS, u64::from(served.waited_ms));
    span.record(names::STORE_MS, store_ms);
    // The digest is worked out only for a span a subscriber records.
    if let (Some(key), false) = (key, span.is_disabled()) {
        span.record(names::KEY_DIGEST, telemetry::key_digest(key).as_str());
    }
    tracing::debug!(parent: span, decision = primary, "intentkey decision");
    #[cfg(feature = "otel")]
    otel::served(&decisions, served.waited_ms, store);
    #[cfg(not(feature = "otel"))]
    let _ = (decisions, store);
}

/// One store call's duration, for the store histogram.
pub(crate) fn store_call(op: &'static str, took: Duration, store: &'static str) {
    #[cfg(feature = "otel")]
    otel::store_call(op, took, store);
    #[cfg(not(feature = "otel"))]
    let _ = (op, took, store);
}

/// A background release's decision (released, superseded).
pub(crate) fn released(finished: intentkey::claim::Finished, store: &'static str) {
    let decision = telemetry::released(finished);
    tracing::debug!(
        decision = decision.as_str(),
        "intentkey release of a claim whose handler never ran"
    );
    #[cfg(feature = "otel")]
    otel::count(decision, store);
    #[cfg(not(feature = "otel"))]
    let _ = store;
}

#[cfg(feature = "otel")]
pub(crate) mod otel {
    use std::sync::OnceLock;
    use std::time::Duration;

    use intentkey::telemetry::{names, Decision, Decisions};
    use opentelemetry::metrics::{Counter, Histogram};
    use opentelemetry::KeyValue;

    struct Instruments {
        decisions: Counter<u64>,
        store: Histogram<f64>,
        wait: Histogram<f64>,
    }

    /// The instruments, made once from the global meter provider (install
    /// the provider before the first request).
    fn instruments() -> &'static Instruments {
        static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
        INSTRUMENTS.get_or_init(|| {
            let meter = opentelemetry::global::meter("intentkey");
            Instruments {
                decisions: meter
                    .u64_counter(names::DECISIONS)
                    .with_description("intentkey decisions, by kind")
                    .build(),
                store: meter
                    .f64_histogram(names::STORE_DURATION)
                    .with_unit("ms")
                    .with_description("intentkey store calls")
                    .build(),
                wait: meter
                    .f64_histogram(names::WAIT_DURATION)
                    .with_unit("ms")
                    .with_description("waits for the first attempt's answer")
                    .build(),
            }
        })
    }

    pub(super) fn count(decision: Decision, store: &'static str) {
        instruments().decisions.add(
            1,
            &[
                KeyValue::new(names::DECISION, decision.as_str()),
                KeyValue::new(names::STORE, store),
            ],
        );
    }

    pub(super) fn served(decisions: &Decisions, waited_ms: u32, store: &'static str) {
        for d in &decisions.all {
            count(*d, store);
        }
        if waited_ms > 0 {
            instruments()
                .wait
                .record(f64::from(waited_ms), &[KeyValue::new(names::STORE, store)]);
        }
    }

    /// Registers the observable gauge of records in flight and needing
    /// reconciliation, read from `store`'s cheap count every `every` by a
    /// task of its own (the gauge's callback only reads the last count).
    pub(crate) fn records_gauge(
        store: std::sync::Arc<dyn intentkey_store::tokio::AsyncStore>,
        every: Duration,
    ) {
        use intentkey::claim::Status;
        use std::sync::atomic::{AtomicI64, Ordering};
        use std::sync::Arc;
        let counts: Arc<[AtomicI64; 2]> = Arc::new([AtomicI64::new(-1), AtomicI64::new(-1)]);
        let statuses = [Status::InFlight, Status::NeedsReconciliation];
        let read = Arc::clone(&counts);
        let gauge = opentelemetry::global::meter("intentkey")
            .u64_observable_gauge(names::RECORDS)
            .with_description("intentkey records by status (in flight, needing reconciliation)")
            .with_callback(move |observer| {
                for (status, count) in statuses.iter().zip(read.iter()) {
                    if let Ok(n) = u64::try_from(count.load(Ordering::Relaxed)) {
                        observer.observe(n, &[KeyValue::new(names::STATUS, status.as_str())]);
                    }
                }
            })
            .build();
        tokio::spawn(async move {
            let _gauge = gauge;
            loop {
                for (status, count) in statuses.iter().zip(counts.iter()) {
                    if let Ok(Some(n)) = store.count(*status).await {
                        count.store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
                    }
                }
                if std::sync::Arc::strong_count(&store) == 1 {
                    return;
                }
                tokio::time::sleep(every).await;
            }
        });
    }

    pub(super) fn store_call(op: &'static str, took: Duration, store: &'static str) {
        instruments().store.record(
            took.as_secs_f64() * 1_000.0,
            &[
                KeyValue::new(names::STORE, store),
                KeyValue::new(names::OP, op),
            ],
        );
    }
}
