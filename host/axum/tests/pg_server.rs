//! The layer in a real axum server on PostgreSQL, with real sockets:
//! 16 concurrent clients × 200 keys give exactly one handler run per key and
//! no 5xx; a client that hangs up mid-request gets the stored answer when it
//! retries, and the handler ran once.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Extension, Router};
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{Idempotency, IdempotencyLayer, PgStore};
use support::{on_postgres, post_once, serve, Client};
use tokio::io::AsyncWriteExt;

const SECRET: [u8; 32] = [0x5c; 32];

/// Handler runs per storage key.
#[derive(Default)]
struct Runs(Mutex<HashMap<String, u32>>);

impl Runs {
    fn count(&self) -> HashMap<String, u32> {
        self.0.lock().unwrap().clone()
    }
}

#[derive(Clone)]
struct Slow(Duration);

async fn create_order(
    Extension(runs): Extension<Arc<Runs>>,
    Extension(slow): Extension<Slow>,
    Extension(id): Extension<Idempotency>,
) -> impl IntoResponse {
    let n = {
        let mut runs = runs.0.lock().unwrap();
        let entry = runs.entry(id.key.clone()).or_default();
        *entry += 1;
        runs.len()
    };
    tokio::time::sleep(slow.0).await;
    (
        StatusCode::CREATED,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::LOCATION, format!("/orders/ord_{n}")),
        ],
        format!(r#"{{"id":"ord_{n}","key":"{}"}}"#, &id.key[..16]),
    )
}

async fn app_on(url: &str, runs: Arc<Runs>, slow: Duration) -> Router {
    let store = PgStore::connect(url, 8).await.unwrap();
    let layer = IdempotencyLayer::new(
        Secret::new(SECRET).unwrap(),
        Options::new(Profile::Ietf),
        store,
    )
    .on_error(|phase, message| eprintln!("intentkey {phase:?}: {message}"));
    Router::new()
        .route("/orders", post(create_order))
        .layer(layer)
        .layer(Extension(runs))
        .layer(Extension(Slow(slow)))
}

#[test]
fn sixteen_clients_two_hundred_keys_one_run_per_key_no_5xx() {
    on_postgres("axum_load", load);
}

async fn load(url: String) {
    const CLIENTS: usize = 16;
    const KEYS: usize = 200;
    let runs = Arc::new(Runs::default());
    let addr = serve(app_on(&url, Arc::clone(&runs), Duration::from_millis(2)).await).await;
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        clients.push(tokio::spawn(async move {
            let mut client = Client::connect(addr).await.unwrap();
            let mut seen = Vec::with_capacity(KEYS);
            let mut statuses: HashMap<u16, u32> = HashMap::new();
            for k in 0..KEYS {
                // Every client sends the same keys in the same order: they race on each.
                let key = format!("\"load-{k:03}\"");
                let body = format!(r#"{{"sku":"A{k}","qty":2}}"#);
                let headers = [
                    ("Idempotency-Key", key.as_str()),
                    ("Content-Type", "application/json"),
                ];
                let answer = loop {
                    let answer = client.post("/orders", &headers, &body).await.unwrap();
                    *statuses.entry(answer.status).or_default() += 1;
                    assert!(
                        answer.status < 500,
                        "client {c}, key {k}: {} {}",
                        answer.status,
                        answer.text()
                    );
                    if answer.status == 409 {
                        assert_eq!(answer.header("retry-after"), Some("1"));
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                    break answer;
                };
                assert_eq!(answer.status, 201, "client {c}, key {k}: {}", answer.text());
                seen.push((answer.text(), answer.header("location").map(str::to_owned)));
            }
            (seen, statuses)
        }));
    }
    let mut by_key: Vec<Option<(String, Option<String>)>> = vec![None; KEYS];
    let mut statuses: HashMap<u16, u32> = HashMap::new();
    for client in clients {
        let (seen, counted) = client.await.unwrap();
        for (status, n) in counted {
            *statuses.entry(status).or_default() += n;
        }
        for (k, answer) in seen.into_iter().enumerate() {
            match &by_key[k] {
                None => by_key[k] = Some(answer),
                // Every client got the owner's answer: the replay is byte for byte.
                Some(first) => {
                    assert_eq!(first, &answer, "key {k}: two clients got different answers")
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let runs = runs.count();
    assert_eq!(runs.len(), KEYS, "every key ran the handler");
    assert!(runs.values().all(|&n| n == 1), "a key ran twice: {runs:?}");
    let requests: u32 = statuses.values().sum();
    println!(
        "axum on PostgreSQL: {CLIENTS} clients x {KEYS} keys in {elapsed:?}: {requests} requests ({statuses:?}), \
         {} handler runs, each key once, no 5xx",
        runs.len()
    );
}

#[test]
fn a_client_that_hangs_up_gets_the_stored_answer_when_it_retries() {
    on_postgres("axum_hangup", hang_up);
}

async fn hang_up(url: String) {
    let runs = Arc::new(Runs::default());
    let addr = serve(app_on(&url, Arc::clone(&runs), Duration::from_millis(300)).await).await;
    let headers = [
        ("Idempotency-Key", "\"hangup-1\""),
        ("Content-Type", "application/json"),
    ];
    let body = r#"{"sku":"A1","qty":2}"#;

    // The request goes out, and the connection drops before the answer.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(&support::post_bytes("/orders", &headers, body))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(stream);

    // The retry: 409 while the first run finishes, then the stored answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = loop {
        let answer = post_once(addr, "/orders", &headers, body).await.unwrap();
        if answer.status == 409 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        break answer;
    };
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(answer.header("idempotent-replayed"), Some("true"));
    assert_eq!(answer.header("location"), Some("/orders/ord_1"));
    assert!(
        answer.text().starts_with(r#"{"id":"ord_1""#),
        "{}",
        answer.text()
    );
    assert_eq!(runs.count().values().copied().collect::<Vec<_>>(), vec![1]);
}

#[test]
fn the_claim_statement_reads_the_record_it_loses_to() {
    on_postgres("axum_claim_sql", |url| async move {
        use intentkey::claim::{Attempt, Record, Status};
        use intentkey_axum::{AsyncStore, Inserted};
        let store = PgStore::connect(&url, 2).await.unwrap();
        let attempt = Attempt {
            key: "k-claim".into(),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "POST /orders".into(),
            prior: None,
        };
        let first = Record::in_flight(&attempt, "owner-1", 100);
        assert_eq!(
            store.claim_insert(first.clone()).await.unwrap(),
            Inserted::Won
        );
        let again = Record::in_flight(&attempt, "owner-2", 101);
        match store.claim_insert(again).await.unwrap() {
            Inserted::Existing(existing) => {
                assert_eq!(*existing, first, "the record it lost to, as stored");
                assert_eq!(existing.status, Status::InFlight);
            }
            other => panic!("a repeat must read the winner in the same statement: {other:?}"),
        }
        // The winner's row is untouched.
        assert_eq!(
            store
                .get("k-claim".into())
                .await
                .unwrap()
                .unwrap()
                .owner_token,
            "owner-1"
        );
    });
}
