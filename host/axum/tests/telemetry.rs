//! The layer's telemetry, read back from in-memory collectors: a `tracing`
//! layer that keeps every `intentkey.request` span's fields, and
//! OpenTelemetry's in-memory metric exporter on the global meter provider.
//! A scripted sequence (owned, replayed, conflict, in flight, waited then
//! replayed, released) gives one span per request with the core's decision,
//! the decision counter counts each, the store histogram has points, and no
//! exported attribute holds the client's key, the secret or the body.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post as route_post;
use axum::Router;
use intentkey::http::{Options, Profile};
use intentkey::telemetry::names;
use intentkey::Secret;
use intentkey_axum::{memory, IdempotencyLayer};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

type Fields = HashMap<String, String>;

/// Keeps the fields of every closed `intentkey.request` span.
#[derive(Clone, Default)]
struct Spans {
    open: Arc<Mutex<HashMap<u64, Fields>>>,
    closed: Arc<Mutex<Vec<Fields>>>,
    /// The fields of every event that carries a decision.
    events: Arc<Mutex<Vec<Fields>>>,
}

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() != names::SPAN {
            return;
        }
        let mut fields = Fields::new();
        attrs.record(&mut Collect(&mut fields));
        self.open.lock().unwrap().insert(id.into_u64(), fields);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(fields) = self.open.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Collect(fields));
        }
    }
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Collect(&mut fields));
        if fields.contains_key(names::DECISION) {
            self.events.lock().unwrap().push(fields);
        }
    }
    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if let Some(fields) = self.open.lock().unwrap().remove(&id.into_u64()) {
            self.closed.lock().unwrap().push(fields);
        }
    }
}

async fn handler(body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    if text.contains("slow") {
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert!(
        !text.contains("panic"),
        "the handler fails: its outcome is unknown"
    );
    if text.contains("busy") {
        return (StatusCode::SERVICE_UNAVAILABLE, "later").into_response();
    }
    (StatusCode::CREATED, "paid").into_response()
}

/// A destination that has every effect.
struct Found;

impl intentkey_axum::AsyncGateway for Found {
    fn ask<'a>(
        &'a self,
        _key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = intentkey::claim::Lookup> + Send + 'a>>
    {
        Box::pin(async {
            intentkey::claim::Lookup::Found(intentkey::claim::Response::json(201, "{}"))
        })
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

const CLIENT_KEY: &str = "client-key-7f3a9";
const SECRET: [u8; 32] = [0x5a; 32];

#[test]
fn spans_and_metrics_of_a_scripted_sequence() {
    let spans = Spans::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(spans.clone()))
        .unwrap();
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    opentelemetry::global::set_meter_provider(provider.clone());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let layer = |wait: bool| {
            let layer = IdempotencyLayer::new(
                Secret::new(SECRET).unwrap(),
                Options::new(Profile::Ietf),
                memory(),
            );
            let layer = if wait {
                layer.wait(Duration::from_secs(5)).unwrap()
            } else {
                layer.records_gauge(Duration::from_millis(50))
            };
            Router::new()
                .route("/pay", route_post(handler))
                .layer(layer.on_error(|_, _| {}))
        };
        let plain = support::serve(layer(false)).await;
        let waiting = support::serve(layer(true)).await;
        let post = |addr, key: &'static str, body: &'static str| async move {
            support::post_once(
                addr,
                "/pay",
                &[
                    ("Idempotency-Key", key),
                    ("Content-Type", "application/json"),
                ],
                body,
            )
            .await
            .unwrap()
            .status
        };
        let body = r#"{"amount":"19.90","card":"4111"}"#;
        assert_eq!(post(plain, CLIENT_KEY, body).await, 201); // owned
        assert_eq!(post(plain, CLIENT_KEY, body).await, 201); // replayed
        assert_eq!(post(plain, CLIENT_KEY, r#"{"amount":"1"}"#).await, 422); // conflict
        let slow = tokio::spawn(post(plain, "k-slow", r#"{"slow":1}"#));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(post(plain, "k-slow", r#"{"slow":1}"#).await, 409); // in flight
        assert_eq!(slow.await.unwrap(), 201);
        let first = tokio::spawn(post(waiting, "k-wait", r#"{"slow":2}"#));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(post(waiting, "k-wait", r#"{"slow":2}"#).await, 201); // waited, replayed
        assert_eq!(first.await.unwrap(), 201);
        assert_eq!(post(plain, "k-busy", r#"{"busy":1}"#).await, 503); // released
        assert_eq!(post(plain, "k-panic", r#"{"panic":1}"#).await, 500); // owned, left in flight
                                                                         // The gauge's task counts again (every 50 ms).
        tokio::time::sleep(Duration::from_millis(150)).await;
        // Recovery of the panicked request's record, found at the destination.
        let recovery_store: Arc<dyn intentkey_axum::AsyncStore> = Arc::new(memory());
        let stale = intentkey::claim::Attempt {
            key: "stale-key".into(),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "pay".into(),
            prior: None,
        };
        recovery_store
            .insert(intentkey::claim::Record::in_flight(&stale, "tok", 1))
            .await
            .unwrap();
        let recovered = intentkey_axum::Recoverer::new(recovery_store, Arc::new(Found))
            .recover("stale-key", 1_000)
            .await
            .unwrap();
        assert!(matches!(
            recovered.outcome,
            intentkey::claim::Recovered::Applied(_)
        ));
        // The owners' spans close when their tasks end.
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Collect while the gauge's task (and its instrument) still lives.
        tokio::task::block_in_place(|| provider.force_flush().unwrap());
    });
    drop(runtime);

    // One span per guarded request, the core's decision on each.
    let closed = spans.closed.lock().unwrap().clone();
    let mut decisions: Vec<String> = closed.iter().map(|f| f[names::DECISION].clone()).collect();
    decisions.sort();
    let mut expected = vec![
        "owned",
        "replayed",
        "conflict",
        "owned",
        "in-flight",
        "owned",
        "replayed",
        "released",
        "owned",
    ];
    expected.sort_unstable();
    assert_eq!(decisions, expected, "{closed:#?}");
    for fields in &closed {
        assert_eq!(fields[names::PROFILE], "ietf");
        assert_eq!(fields[names::STORE], "memory");
        assert_eq!(fields[names::KEY_DIGEST].len(), 12, "{fields:?}");
        assert!(fields.contains_key(names::STORE_MS), "{fields:?}");
    }
    let waited = closed
        .iter()
        .find(|f| f[names::DECISION] == "replayed" && f[names::WAIT_MS] != "0")
        .expect("the waiter's span");
    assert!(waited[names::WAIT_MS].parse::<u64>().unwrap() > 0);

    // The recovery's decision, as an event.
    let events = spans.events.lock().unwrap().clone();
    let recovery = events
        .iter()
        .find(|e| e[names::DECISION] == "recovered-found")
        .expect("the recovery's event");
    assert_eq!(recovery[names::STORE], "memory");
    assert_eq!(recovery[names::KEY_DIGEST].len(), 12);

    // The counter, by decision; the histograms have points.
    let metrics = exporter.get_finished_metrics().unwrap();
    let mut counted: HashMap<String, u64> = HashMap::new();
    let mut store_points = 0;
    let mut wait_points = 0;
    let mut gauge: HashMap<String, u64> = HashMap::new();
    let mut attribute_values = Vec::new();
    for resource in &metrics {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics() {
                match (metric.name(), metric.data()) {
                    (n, AggregatedMetrics::U64(MetricData::Sum(sum))) if n == names::DECISIONS => {
                        for p in sum.data_points() {
                            for kv in p.attributes() {
                                attribute_values.push(kv.value.to_string());
                                if kv.key.as_str() == names::DECISION {
                                    *counted.entry(kv.value.to_string()).or_default() = p.value();
                                }
                            }
                        }
                    }
                    (n, AggregatedMetrics::F64(MetricData::Histogram(h)))
                        if n == names::STORE_DURATION =>
                    {
                        store_points += h.data_points().map(|p| p.count()).sum::<u64>();
                        for p in h.data_points() {
                            attribute_values.extend(p.attributes().map(|kv| kv.value.to_string()));
                        }
                    }
                    (n, AggregatedMetrics::U64(MetricData::Gauge(g))) if n == names::RECORDS => {
                        for p in g.data_points() {
                            for kv in p.attributes() {
                                gauge.insert(kv.value.to_string(), p.value());
                            }
                        }
                    }
                    (n, AggregatedMetrics::F64(MetricData::Histogram(h)))
                        if n == names::WAIT_DURATION =>
                    {
                        wait_points += h.data_points().map(|p| p.count()).sum::<u64>();
                    }
                    _ => {}
                }
            }
        }
    }
    let expect: HashMap<String, u64> = [
        ("owned", 5), // the 503 owned its claim, then released it
        ("replayed", 2),
        ("conflict", 1),
        ("in-flight", 1),
        ("waited", 1),
        ("released", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counted, expect);
    assert!(store_points >= 10, "store calls timed: {store_points}");
    assert_eq!(wait_points, 1);
    // The panicked request's record is the one in flight.
    assert_eq!(gauge.get("in_flight"), Some(&1), "{gauge:?}");
    assert_eq!(gauge.get("needs_reconciliation"), Some(&0), "{gauge:?}");

    // Nothing exported holds the client's key, the secret or the body.
    let secret_hex: String = SECRET.iter().map(|b| format!("{b:02x}")).collect();
    let everything: Vec<String> = closed
        .iter()
        .flat_map(|f| f.iter().flat_map(|(k, v)| [k.clone(), v.clone()]))
        .chain(attribute_values)
        .collect();
    for value in &everything {
        for needle in [CLIENT_KEY, secret_hex.as_str(), "4111", "19.90"] {
            assert!(!value.contains(needle), "{value:?} holds {needle:?}");
        }
    }
}
