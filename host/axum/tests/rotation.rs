//! A secret rotation under the layer: requests first seen before the new
//! secret's activation and retried after it are answered from their
//! records (replay, 409, 422) and never run twice, on memory and on
//! PostgreSQL; after the window the previous secret is dropped.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use http_body_util::BodyExt;
use intentkey::http::{Options, Profile};
use intentkey::{Keyring, Secret};
use intentkey_axum::{memory, AsyncStore, IdempotencyLayer, PgStore};
use tower::ServiceExt;

const ROTATION: i64 = 1_800_000_000;
const WINDOW: i64 = 86_400;

async fn handler(Extension(runs): Extension<Arc<AtomicU32>>, body: Bytes) -> Response {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    if String::from_utf8_lossy(&body).contains("slow") {
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    (
        StatusCode::CREATED,
        [(header::CONTENT_TYPE, "application/json")],
        format!(r#"{{"run":{n}}}"#),
    )
        .into_response()
}

async fn send(app: &Router, key: &str, body: &str) -> (u16, bool, String) {
    let request = Request::post("/payments")
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let r = app.clone().oneshot(request).await.unwrap();
    let replayed = r.headers().contains_key("idempotent-replayed");
    let status = r.status().as_u16();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        replayed,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn keyring() -> Keyring {
    Keyring::new(vec![
        ("2026-11".into(), 0, Secret::new([0x11; 32]).unwrap()),
        ("2026-12".into(), ROTATION, Secret::new([0x22; 32]).unwrap()),
    ])
    .unwrap()
    .with_window(WINDOW)
    .unwrap()
}

fn app(
    store: &Arc<dyn AsyncStore>,
    keyring: Keyring,
    clock: &Arc<AtomicI64>,
    runs: &Arc<AtomicU32>,
) -> Router {
    let clock = Arc::clone(clock);
    let layer = IdempotencyLayer::with_shared_store(
        Secret::new([0x99; 32]).unwrap(),
        Options::new(Profile::Ietf),
        Arc::clone(store),
    )
    .keyring(keyring)
    .clock(move || clock.load(Ordering::SeqCst))
    .on_error(|_, _| {});
    Router::new()
        .route("/payments", post(handler))
        .layer(layer)
        .layer(Extension(Arc::clone(runs)))
}

async fn scenario(name: &str, store: Arc<dyn AsyncStore>) {
    let runs = Arc::new(AtomicU32::new(0));
    let clock = Arc::new(AtomicI64::new(ROTATION - 60));
    let app = app(&store, keyring(), &clock, &runs);

    // Before the activation: one done, one still running when it comes.
    let done = send(&app, "\"pay-1\"", r#"{"amount":"10.00"}"#).await;
    assert_eq!((done.0, done.1), (201, false), "{name}");
    let running = {
        let app = app.clone();
        tokio::spawn(async move { send(&app, "\"pay-2\"", r#"{"slow":true}"#).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The secret changes while pay-2 runs.
    clock.store(ROTATION + 5, Ordering::SeqCst);
    assert_eq!(
        send(&app, "\"pay-2\"", r#"{"slow":true}"#).await.0,
        409,
        "{name}: pay-2 is still in flight under the previous key"
    );
    let replay = send(&app, "\"pay-1\"", r#"{ "amount": "10.00" }"#).await;
    assert_eq!(
        (replay.0, replay.1, replay.2.as_str()),
        (201, true, done.2.as_str()),
        "{name}: pay-1 replays across the rotation"
    );
    assert_eq!(
        send(&app, "\"pay-1\"", r#"{"amount":"99.00"}"#).await.0,
        422,
        "{name}: another payload under pay-1 is still a conflict"
    );
    assert_eq!(running.await.unwrap().0, 201, "{name}");
    let after = send(&app, "\"pay-2\"", r#"{"slow":true}"#).await;
    assert_eq!(
        (after.0, after.1),
        (201, true),
        "{name}: pay-2 replays once done"
    );
    let fresh = send(&app, "\"pay-3\"", r#"{"amount":"1.00"}"#).await;
    assert_eq!(
        (fresh.0, fresh.1),
        (201, false),
        "{name}: a new key is claimed under the new secret"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "{name}: pay-1, pay-2 and pay-3 ran once each"
    );

    // After the window the previous secret is dropped; keys claimed under
    // the new one still replay.
    clock.store(ROTATION + WINDOW, Ordering::SeqCst);
    let dropped = app_without_old(&store, &clock, &runs);
    let again = send(&dropped, "\"pay-3\"", r#"{"amount":"1.00"}"#).await;
    assert_eq!((again.0, again.1), (201, true), "{name}");
    assert_eq!(runs.load(Ordering::SeqCst), 3, "{name}");
    println!("{name}: replay, 409 and 422 across the rotation; 3 runs for 3 keys");
}

fn app_without_old(
    store: &Arc<dyn AsyncStore>,
    clock: &Arc<AtomicI64>,
    runs: &Arc<AtomicU32>,
) -> Router {
    app(store, keyring().retire("2026-11").unwrap(), clock, runs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_on_memory() {
    scenario("memory", Arc::new(memory())).await;
}

#[test]
fn rotation_on_postgres() {
    support::on_postgres("axum_rotation", |url| async move {
        scenario(
            "postgres",
            Arc::new(PgStore::connect(&url, 4).await.unwrap()),
        )
        .await;
    });
}
