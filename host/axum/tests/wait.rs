//! Waiting for the first attempt, through a real server on each async
//! store (memory, SQLite on blocking threads, Redis, PostgreSQL): 32 concurrent
//! duplicates of one slow request run the handler once and all get its
//! answer (no 409); a handler slower than the wait gives the duplicate 409
//! with `Retry-After`; another payload is 422 at once, with no wait; the
//! waiter is woken by the store, not by its next re-check; and on
//! PostgreSQL a waiter whose listening connection is killed still gets the
//! replay.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../../store/tests/common/redis_db.rs"]
mod redis_db;
mod support;
use support::common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post as route_post;
use axum::{Extension, Router};
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{memory, AsyncStore, Blocking, IdempotencyLayer, PgStore};
use intentkey_store::{RedisStore, SqliteStore};
use support::{post_once, serve, Answer};

/// Sleeps as long as the body's `"ms"` says, then answers 201 with the run number.
async fn handler(Extension(runs): Extension<Arc<AtomicU32>>, body: Bytes) -> Response {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    let text = String::from_utf8_lossy(&body).into_owned();
    let ms: u64 = text
        .split("\"ms\":")
        .nth(1)
        .and_then(|rest| rest.trim_end_matches('}').trim().parse().ok())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    (
        StatusCode::CREATED,
        [(header::CONTENT_TYPE, "application/json")],
        format!(r#"{{"run":{n}}}"#),
    )
        .into_response()
}

async fn server(
    store: Arc<dyn AsyncStore>,
    wait: Duration,
) -> (std::net::SocketAddr, Arc<AtomicU32>) {
    let runs = Arc::new(AtomicU32::new(0));
    let layer = IdempotencyLayer::with_shared_store(
        Secret::new([5u8; 32]).unwrap(),
        Options::new(Profile::Ietf),
        store,
    )
    .wait(wait)
    .unwrap()
    .on_error(|_, _| {});
    let app = Router::new()
        .route("/orders", route_post(handler))
        .layer(layer)
        .layer(Extension(Arc::clone(&runs)));
    (serve(app).await, runs)
}

async fn post(addr: std::net::SocketAddr, key: &str, body: &str) -> Answer {
    let headers = [
        ("Idempotency-Key", key),
        ("Content-Type", "application/json"),
    ];
    post_once(addr, "/orders", &headers, body).await.unwrap()
}

fn unique(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        support::common::rand_u32()
    )
}

/// 32 duplicates at once: one run, 31 replays, no 409.
async fn duplicates(name: &str, store: Arc<dyn AsyncStore>) {
    let (addr, runs) = server(store, Duration::from_secs(5)).await;
    let key = unique("dup");
    let body = r#"{"sku":"A1","ms":300}"#;
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let key = key.clone();
            tokio::spawn(async move { post(addr, &key, body).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{name}: one handler run");
    assert!(
        statuses.iter().all(|&s| s == 201),
        "{name}: no 409: {statuses:?}"
    );
    let replays = answers
        .iter()
        .filter(|a| a.header("idempotent-replayed") == Some("true"))
        .count();
    assert_eq!(replays, 31, "{name}: 31 replays");
    assert!(
        answers.iter().all(|a| a.text() == r#"{"run":1}"#),
        "{name}: one answer for all"
    );
    println!("{name}: 32 duplicates: 1 run, 31 replays, 0 x 409");
}

/// A handler slower than the wait: 409 with Retry-After; another payload:
/// 422 at once.
async fn bounded(name: &str, store: Arc<dyn AsyncStore>) {
    let (addr, runs) = server(store, Duration::from_millis(200)).await;
    let key = unique("slow");
    let first = tokio::spawn({
        let key = key.clone();
        async move { post(addr, &key, r#"{"sku":"A1","ms":1500}"#).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let waited = post(addr, &key, r#"{"sku":"A1","ms":1500}"#).await;
    let took = started.elapsed();
    assert_eq!(waited.status, 409, "{name}: {}", waited.text());
    assert!(
        waited.header("retry-after").is_some(),
        "{name}: Retry-After"
    );
    assert!(
        took >= Duration::from_millis(190),
        "{name}: it waited first: {took:?}"
    );
    let started = Instant::now();
    let other = post(addr, &key, r#"{"sku":"B2","ms":1500}"#).await;
    let took = started.elapsed();
    assert_eq!(other.status, 422, "{name}");
    assert!(
        took < Duration::from_millis(150),
        "{name}: 422 with no wait: {took:?}"
    );
    assert_eq!(first.await.unwrap().status, 201);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{name}");
    println!("{name}: slower than the wait: 409 + Retry-After; other payload: 422 in {took:?}");
}

/// The waiter answers within a little of the first request's end: woken by
/// the store (a waiter that only polled would answer at its next re-check,
/// about 450 ms later on the core's intervals).
async fn woken(name: &str, store: Arc<dyn AsyncStore>) -> Duration {
    let (addr, _) = server(store, Duration::from_secs(5)).await;
    let key = unique("wake");
    let body = r#"{"sku":"A1","ms":1200}"#;
    let first = tokio::spawn({
        let key = key.clone();
        async move {
            let a = post(addr, &key, body).await;
            (a, Instant::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiter = post(addr, &key, body).await;
    let answered = Instant::now();
    let (owner, finished) = first.await.unwrap();
    assert_eq!((owner.status, waiter.status), (201, 201), "{name}");
    assert_eq!(waiter.header("idempotent-replayed"), Some("true"), "{name}");
    let late = answered.saturating_duration_since(finished);
    assert!(
        late < Duration::from_millis(250),
        "{name}: woken {late:?} after the first finished"
    );
    println!("{name}: the waiter answered {late:?} after the first request");
    late
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store() {
    let store: Arc<dyn AsyncStore> = Arc::new(memory());
    duplicates("memory", Arc::clone(&store)).await;
    bounded("memory", Arc::clone(&store)).await;
    woken("memory", store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store() {
    let file = support::common::TempSqlite::new("axum-wait");
    let store: Arc<dyn AsyncStore> =
        Arc::new(Blocking::new(SqliteStore::open(&file.path).unwrap()));
    duplicates("sqlite", Arc::clone(&store)).await;
    bounded("sqlite", Arc::clone(&store)).await;
    woken("sqlite", store).await;
}

#[test]
fn redis_store() {
    let Some(prefix) = redis_db::RedisPrefix::new("axum-wait") else {
        return;
    };
    let url = prefix.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store: Arc<dyn AsyncStore> =
            Arc::new(Blocking::new(RedisStore::connect(&url).unwrap()));
        duplicates("redis", Arc::clone(&store)).await;
        bounded("redis", Arc::clone(&store)).await;
        woken("redis", store).await;
    });
}

#[test]
fn postgres_store() {
    support::on_postgres("axum_wait", |url| async move {
        let store: Arc<dyn AsyncStore> = Arc::new(PgStore::connect(&url, 8).await.unwrap());
        duplicates("postgres", Arc::clone(&store)).await;
        bounded("postgres", Arc::clone(&store)).await;
    });
}

/// Two servers (two stores, as two processes would have) on one schema:
/// the waiter's server is woken by `NOTIFY` from the owner's; then the
/// waiter's listening connection is killed mid-wait and it still gets the
/// replay.
#[test]
fn postgres_notify_across_stores_and_a_killed_listener() {
    support::on_postgres("axum_wait_notify", |url| async move {
        let owner: Arc<dyn AsyncStore> =
            Arc::new(PgStore::connect(&url, 4).await.unwrap().notify(true));
        let waiter_store: Arc<dyn AsyncStore> = Arc::new(PgStore::connect(&url, 4).await.unwrap());
        let (owner_addr, runs) = server(owner, Duration::from_secs(5)).await;
        let (waiter_addr, _) = server(waiter_store, Duration::from_secs(5)).await;

        // Start the waiter's listener with a wait that ends at once.
        let warm = unique("warm");
        assert_eq!(post(waiter_addr, &warm, r#"{"ms":0}"#).await.status, 201);

        for round in ["notified", "listener killed"] {
            let key = unique("cross");
            let body = r#"{"sku":"A1","ms":1200}"#;
            let first = tokio::spawn({
                let key = key.clone();
                async move {
                    let a = post(owner_addr, &key, body).await;
                    (a, Instant::now())
                }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let waiting = tokio::spawn({
                let key = key.clone();
                async move {
                    let a = post(waiter_addr, &key, body).await;
                    (a, Instant::now())
                }
            });
            if round == "listener killed" {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let killed = kill_listeners(&url).await;
                assert!(killed >= 1, "a listening connection to kill");
            }
            let (owner_answer, finished) = first.await.unwrap();
            let (waiter_answer, answered) = waiting.await.unwrap();
            assert_eq!(
                (owner_answer.status, waiter_answer.status),
                (201, 201),
                "{round}"
            );
            assert_eq!(
                waiter_answer.header("idempotent-replayed"),
                Some("true"),
                "{round}"
            );
            assert_eq!(waiter_answer.body, owner_answer.body, "{round}");
            let late = answered.saturating_duration_since(finished);
            if round == "notified" {
                assert!(
                    late < Duration::from_millis(250),
                    "woken by NOTIFY: {late:?}"
                );
            }
            println!("postgres, {round}: the waiter answered {late:?} after the owner");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2, "one run per key");
    });
}

/// Terminates the listening connections of this database: how many.
async fn kill_listeners(url: &str) -> u64 {
    let (client, connection) =
        deadpool_postgres::tokio_postgres::connect(url, deadpool_postgres::tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND datname = current_database()",
            &[&intentkey_store::tokio::LISTENER_APPLICATION_NAME],
        )
        .await
        .unwrap();
    rows.len() as u64
}
