//! PostgreSQL restarted under load, behind the axum layer: while the server
//! is down every request that could not be claimed gets a clear 503 with
//! `Retry-After` (nothing ran), nothing is lost (after recovery every key a
//! handler ran for is done, with one run), and the service answers 201s
//! again once the server is back.
//!
//! This restarts the machine's PostgreSQL (with `pg_ctlcluster`), so it lives
//! in a test binary of its own: cargo runs test binaries one at a time. It
//! needs the server and root; under `CI=true` their absence fails the test.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Extension, Router};
use intentkey::claim::{Lookup, Response as Stored, Status};
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{AsyncGateway, AsyncStore, Idempotency, IdempotencyLayer, PgStore, Recoverer};
use support::common::{restart_postgres, skipped};
use support::{on_postgres, Client};

const CLIENTS: usize = 8;

/// Handler runs per storage key: the destination, as recovery asks it.
#[derive(Default)]
struct Ledger(Mutex<HashMap<String, u32>>);

async fn create_order(
    Extension(ledger): Extension<Arc<Ledger>>,
    Extension(id): Extension<Idempotency>,
) -> impl IntoResponse {
    *ledger.0.lock().unwrap().entry(id.key.clone()).or_default() += 1;
    tokio::time::sleep(Duration::from_millis(3)).await;
    (
        StatusCode::CREATED,
        [(header::CONTENT_TYPE, "application/json")],
        format!(r#"{{"key":"{}"}}"#, &id.key[..16]),
    )
}

struct LedgerGateway(Arc<Ledger>);

impl AsyncGateway for LedgerGateway {
    fn ask<'a>(
        &'a self,
        key: &'a str,
    ) -> Pin<Box<dyn std::future::Future<Output = Lookup> + Send + 'a>> {
        let ran = self.0 .0.lock().unwrap().contains_key(key);
        Box::pin(async move {
            if ran {
                Lookup::Found(Stored::json(201, format!(r#"{{"key":"{}"}}"#, &key[..16])))
            } else {
                Lookup::Absent
            }
        })
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

#[derive(Default, Debug)]
struct Tally {
    created: u32,
    unavailable: u32,
    in_flight_left: u32,
    other: Vec<String>,
    after_restart_created: u32,
}

#[test]
fn postgres_restarted_under_load_gives_clear_503s_and_loses_nothing() {
    if !std::path::Path::new("/etc/postgresql").exists() {
        let why = "no PostgreSQL cluster to restart (/etc/postgresql)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: {why}"
        );
        skipped(&format!("axum pg_restart: {why}"));
        return;
    }
    on_postgres("axum_restart", restart_under_load);
}

async fn restart_under_load(url: String) {
    let store: Arc<dyn AsyncStore> = Arc::new(PgStore::connect(&url, 8).await.unwrap());
    let ledger = Arc::new(Ledger::default());
    // Completions the store could not take while it was down (the owner
    // tries again): with the 503s, the evidence that it was down.
    let retried = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = Arc::clone(&retried);
    let layer = IdempotencyLayer::with_shared_store(
        Secret::new([0x5c; 32]).unwrap(),
        Options::new(Profile::Ietf),
        Arc::clone(&store),
    )
    .on_error(move |phase, _| {
        if phase == intentkey_axum::Phase::Complete {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let addr = support::serve(
        Router::new()
            .route("/orders", post(create_order))
            .layer(layer)
            .layer(Extension(Arc::clone(&ledger))),
    )
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let (stop, restarted) = (Arc::clone(&stop), Arc::clone(&restarted));
        clients.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut keys = Vec::new();
            let mut client = None;
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let key = format!("\"restart-{c}-{i}\"");
                keys.push(key.clone());
                let body = format!(r#"{{"n":{i}}}"#);
                let headers = [
                    ("Idempotency-Key", key.as_str()),
                    ("Content-Type", "application/json"),
                ];
                let after = restarted.load(Ordering::SeqCst);
                // Retry the same key until it is answered 201 (or stays in flight).
                let deadline = Instant::now() + Duration::from_secs(30);
                let mut in_flight = 0;
                loop {
                    if client.is_none() {
                        client = Client::connect(addr).await.ok();
                    }
                    let Some(conn) = client.as_mut() else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let answer = match conn.post("/orders", &headers, &body).await {
                        Ok(answer) => answer,
                        Err(_) => {
                            client = None;
                            continue;
                        }
                    };
                    match answer.status {
                        201 => {
                            tally.created += 1;
                            if after {
                                tally.after_restart_created += 1;
                            }
                            break;
                        }
                        503 => {
                            tally.unavailable += 1;
                            if answer.header("retry-after").is_none()
                                || answer.header("content-type") != Some("application/problem+json")
                            {
                                tally.other.push(format!(
                                    "a 503 without Retry-After or problem+json: {answer:?}"
                                ));
                            }
                        }
                        409 => {
                            // The completion was lost in the restart: in flight until recovery.
                            in_flight += 1;
                            if in_flight > 5 {
                                tally.in_flight_left += 1;
                                break;
                            }
                        }
                        s => tally.other.push(format!("{key}: {s} {}", answer.text())),
                    }
                    if Instant::now() > deadline {
                        tally
                            .other
                            .push(format!("{key}: no answer but {} for 30 s", answer.status));
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            (tally, keys)
        }));
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    let result = tokio::task::spawn_blocking(restart_postgres).await.unwrap();
    if let Err(why) = &result {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: {why}"
        );
        skipped(&format!(
            "axum pg_restart: {why}; the run went on without a restart"
        ));
    }
    restarted.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);

    let mut total = Tally::default();
    let mut keys = Vec::new();
    for client in clients {
        let (tally, sent) = client.await.unwrap();
        total.created += tally.created;
        total.unavailable += tally.unavailable;
        total.in_flight_left += tally.in_flight_left;
        total.after_restart_created += tally.after_restart_created;
        total.other.extend(tally.other);
        keys.extend(sent);
    }
    assert!(
        total.other.is_empty(),
        "answers other than 201, 409 and a clear 503: {:?}",
        total.other
    );

    // Recovery settles what the restart interrupted (completions lost with the connection).
    let recoverer = Recoverer::new(
        Arc::clone(&store),
        Arc::new(LedgerGateway(Arc::clone(&ledger))),
    )
    .stale_after(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 1;
    let recovered = recoverer.recover_due(now, 10_000).await.unwrap();

    // Nothing lost: every key a handler ran for is done, and ran once.
    let ran = ledger.0.lock().unwrap().clone();
    assert!(ran.values().all(|&n| n == 1), "a key ran twice: {ran:?}");
    let mut done = 0;
    for key in ran.keys() {
        let record = store
            .get(key.clone())
            .await
            .unwrap()
            .expect("a key that ran has a record");
        assert_eq!(
            record.status,
            Status::Done,
            "{key} is {:?} after recovery",
            record.status
        );
        done += 1;
    }
    assert!(
        total.after_restart_created > 0,
        "the service never answered 201 after the restart"
    );
    println!(
        "axum, PostgreSQL restarted under load ({CLIENTS} clients): {} keys sent, {} answered 201 ({} after the restart), \
         {} clear 503s, {} completions tried again, {} left in flight then settled by recovery ({} recovered), {done} done, each run once",
        keys.len(),
        total.created,
        total.after_restart_created,
        total.unavailable,
        retried.load(std::sync::atomic::Ordering::SeqCst),
        total.in_flight_left,
        recovered.len(),
    );
    if result.is_ok() {
        assert!(
            total.unavailable > 0 || retried.load(std::sync::atomic::Ordering::SeqCst) > 0,
            "the restart gave no 503 and no completion to try again: was the server really down?"
        );
    }
}
