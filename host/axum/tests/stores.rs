//! The same requests through the layer on each async store: memory,
//! SQLite on tokio's blocking threads, and PostgreSQL. The first request
//! runs the handler, a retry is replayed byte for byte, a retry while the
//! first runs gets 409, another payload 422, and a release status (503)
//! lets a retry run the handler again.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use http_body_util::BodyExt;
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{memory, AsyncStore, Blocking, IdempotencyLayer, PgStore};
use intentkey_store::SqliteStore;
use tower::ServiceExt;

async fn handler(Extension(runs): Extension<Arc<AtomicU32>>, body: Bytes) -> Response {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    let text = String::from_utf8_lossy(&body).into_owned();
    if text.contains("slow") {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    if text.contains("busy") && n == 1 {
        return (StatusCode::SERVICE_UNAVAILABLE, "try later").into_response();
    }
    (
        StatusCode::CREATED,
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::LOCATION, "/files/1"),
        ],
        vec![0u8, 0xff, 0x25, 0x50, n as u8],
    )
        .into_response()
}

fn request(key: &str, body: &str) -> Request<Body> {
    Request::post("/files")
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap()
}

async fn send(app: &Router, key: &str, body: &str) -> (u16, Option<String>, Vec<u8>) {
    let r = app.clone().oneshot(request(key, body)).await.unwrap();
    let replayed = r
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_owned());
    let status = r.status().as_u16();
    (
        status,
        replayed,
        r.into_body().collect().await.unwrap().to_bytes().to_vec(),
    )
}

async fn scenario(name: &str, store: Arc<dyn AsyncStore>) {
    let runs = Arc::new(AtomicU32::new(0));
    let layer = IdempotencyLayer::with_shared_store(
        Secret::new([3u8; 32]).unwrap(),
        Options::new(Profile::Ietf),
        store,
    )
    .on_error(|_, _| {});
    let app = Router::new()
        .route("/files", post(handler))
        .layer(layer)
        .layer(Extension(Arc::clone(&runs)));

    let first = send(&app, "\"f-1\"", r#"{"a":1}"#).await;
    assert_eq!((first.0, first.1.as_deref()), (201, None), "{name}");
    let again = send(&app, "\"f-1\"", r#"{ "a": 1 }"#).await;
    assert_eq!((again.0, again.1.as_deref()), (201, Some("true")), "{name}");
    assert_eq!(
        again.2, first.2,
        "{name}: the binary body replays byte for byte"
    );
    assert_eq!(send(&app, "\"f-1\"", r#"{"a":2}"#).await.0, 422, "{name}");

    let slow = {
        let app = app.clone();
        tokio::spawn(async move { send(&app, "\"f-2\"", r#"{"slow":true}"#).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        send(&app, "\"f-2\"", r#"{"slow":true}"#).await.0,
        409,
        "{name}"
    );
    assert_eq!(slow.await.unwrap().0, 201, "{name}");

    // 503 is a release status: nothing happened, so the retry runs.
    let runs_before = runs.load(Ordering::SeqCst);
    runs.store(0, Ordering::SeqCst);
    assert_eq!(
        send(&app, "\"f-3\"", r#"{"busy":true}"#).await.0,
        503,
        "{name}"
    );
    let retried = send(&app, "\"f-3\"", r#"{"busy":true}"#).await;
    assert_eq!(
        (retried.0, retried.1.as_deref()),
        (201, None),
        "{name}: released, so the retry ran"
    );
    assert_eq!(runs_before, 2, "{name}: f-1 and f-2 ran once each");
    println!("{name}: owner, replay, 422, 409, release: as the core says");
}

#[tokio::test]
async fn memory_store() {
    scenario("memory", Arc::new(memory())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_on_blocking_threads() {
    let file = support::common::TempSqlite::new("axum");
    let store = SqliteStore::open(&file.path).unwrap();
    scenario("sqlite", Arc::new(Blocking::new(store))).await;
}

#[test]
fn postgres_store() {
    support::on_postgres("axum_stores", |url| async move {
        scenario(
            "postgres",
            Arc::new(PgStore::connect(&url, 4).await.unwrap()),
        )
        .await;
    });
}

#[tokio::test]
async fn a_64_kb_key_header_and_a_10_mb_body_are_refused_and_run_nothing() {
    let runs = Arc::new(AtomicU32::new(0));
    let layer = IdempotencyLayer::new(
        Secret::new([3u8; 32]).unwrap(),
        Options::new(Profile::Stripe),
        memory(),
    );
    let app = Router::new()
        .route("/files", post(handler))
        .layer(layer)
        .layer(Extension(Arc::clone(&runs)));
    let long = "k".repeat(64 * 1024);
    let r = app.clone().oneshot(request(&long, "{}")).await.unwrap();
    assert_eq!(r.status(), 400);
    let body = r.into_body().collect().await.unwrap().to_bytes();
    assert!(
        body.len() < 1024,
        "the refusal stays small: {} bytes",
        body.len()
    );
    assert!(
        String::from_utf8_lossy(&body).contains("invalid_request_error"),
        "Stripe's shape for a bad request"
    );

    // 10 MB against the 1 MiB default: 413, read no further than the limit.
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(10 << 20));
    let r = app.clone().oneshot(request("k-big", &big)).await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");
}

#[tokio::test]
async fn a_100_000_field_body_is_guarded_and_a_10_000_deep_one_refused() {
    let runs = Arc::new(AtomicU32::new(0));
    let mut options = Options::new(Profile::Ietf);
    options.max_body_bytes = 4 << 20;
    let layer = IdempotencyLayer::new(Secret::new([3u8; 32]).unwrap(), options, memory())
        .on_error(|_, _| {});
    let app = Router::new()
        .route("/files", post(handler))
        .layer(layer)
        .layer(Extension(Arc::clone(&runs)));

    // 100,000 fields (1.3 MB): fingerprinted whole (RFC 8785), run once, replayed.
    let wide = format!(
        "{{{}}}",
        (0..100_000)
            .map(|i| format!("\"f{i:06}\":{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let first = send(&app, "\"wide\"", &wide).await;
    assert_eq!((first.0, first.1.as_deref()), (201, None));
    let again = send(&app, "\"wide\"", &wide).await;
    assert_eq!((again.0, again.1.as_deref()), (201, Some("true")));
    let mut changed = wide.clone();
    changed.replace_range(wide.len() - 3.., "1}");
    assert_eq!(
        send(&app, "\"wide\"", &changed).await.0,
        422,
        "one field of 100,000 changed"
    );

    // 10,000-deep nesting: refused with a small 400 before anything runs.
    let deep = format!("{{\"a\":{}1{}}}", "[".repeat(10_000), "]".repeat(10_000));
    let (status, _, body) = send(&app, "\"deep\"", &deep).await;
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(
        body.len() < 1024,
        "the refusal stays small: {} bytes",
        body.len()
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "only the wide body ran, once"
    );
}

/// A memory store whose first `failures` completions cannot reach it.
struct Flaky {
    inner: Arc<dyn AsyncStore>,
    failures: AtomicU32,
}

impl AsyncStore for Flaky {
    fn insert(&self, record: intentkey::claim::Record) -> intentkey_axum::StoreFuture<'_, bool> {
        self.inner.insert(record)
    }
    fn get(
        &self,
        key: String,
    ) -> intentkey_axum::StoreFuture<'_, Option<intentkey::claim::Record>> {
        self.inner.get(key)
    }
    fn complete(
        &self,
        completion: intentkey::claim::Completion,
    ) -> intentkey_axum::StoreFuture<'_, bool> {
        if self.failures.fetch_sub(1, Ordering::SeqCst) > 0 {
            return Box::pin(async {
                Err(intentkey_store::StoreError::retryable(
                    "the database is restarting",
                ))
            });
        }
        self.inner.complete(completion)
    }
    fn replace(
        &self,
        replacement: intentkey::claim::Replacement,
    ) -> intentkey_axum::StoreFuture<'_, bool> {
        self.inner.replace(replacement)
    }
    fn release(&self, release: intentkey::claim::Release) -> intentkey_axum::StoreFuture<'_, bool> {
        self.inner.release(release)
    }
    fn list(
        &self,
        status: Option<intentkey::claim::Status>,
        limit: u32,
    ) -> intentkey_axum::StoreFuture<'_, Vec<intentkey::claim::Record>> {
        self.inner.list(status, limit)
    }
    fn purge(&self, now: i64) -> intentkey_axum::StoreFuture<'_, u64> {
        self.inner.purge(now)
    }
}

#[tokio::test]
async fn a_completion_the_store_cannot_take_at_once_is_tried_again() {
    let runs = Arc::new(AtomicU32::new(0));
    let store = Arc::new(Flaky {
        inner: Arc::new(memory()),
        failures: AtomicU32::new(2),
    });
    let layer = IdempotencyLayer::with_shared_store(
        Secret::new([3u8; 32]).unwrap(),
        Options::new(Profile::Ietf),
        store.clone(),
    )
    .on_error(|_, _| {});
    let app = Router::new()
        .route("/files", post(handler))
        .layer(layer)
        .layer(Extension(Arc::clone(&runs)));
    let first = send(&app, "\"flaky\"", r#"{"a":1}"#).await;
    assert_eq!(first.0, 201);
    // The record is done (not left in flight for recovery): a retry replays at once.
    let again = send(&app, "\"flaky\"", r#"{"a":1}"#).await;
    assert_eq!(
        (again.0, again.1.as_deref(), &again.2),
        (201, Some("true"), &first.2)
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // A store that stays unreachable: the record is left in flight (409), never released.
    store.failures.store(100, Ordering::SeqCst);
    assert_eq!(send(&app, "\"down\"", r#"{"a":2}"#).await.0, 201);
    assert_eq!(send(&app, "\"down\"", r#"{"a":2}"#).await.0, 409);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}
