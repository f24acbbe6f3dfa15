//! One PostgreSQL database shared by a Rust service (this layer) and a Node
//! service (the npm package's Express middleware, `tests/node/serve.mjs`):
//! the same secret, profile, tenant and route give the same storage key and
//! fingerprint, so a key claimed by one is replayed by the other, a key in
//! flight in one is a 409 in the other, and a reused key with another
//! payload is refused by both.
//!
//! Needs Node and the npm package's dependencies (`cd js && npm ci`): outside
//! CI the test says SKIPPED when they are missing; under `CI=true` it fails.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Extension, Router};
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{IdempotencyLayer, PgStore};
use support::common::skipped;
use support::{on_postgres, post_once, serve, Answer};
use tokio::io::{AsyncBufReadExt, BufReader};

const SECRET: [u8; 32] = [0x5c; 32];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether Node and the npm package's dependencies are here (the skip rule otherwise).
fn node_ready() -> bool {
    let node = std::process::Command::new("node").arg("--version").output();
    let deps = repo().join("js/node_modules/express/package.json").exists()
        && repo().join("js/vendor/intentkey.js").exists();
    if matches!(&node, Ok(o) if o.status.success()) && deps {
        return true;
    }
    let why = "Node or the npm package's build is missing (run scripts/setup.sh, or cd js && npm ci && npm run build)";
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "node_shared: CI=true and {why}"
    );
    skipped(&format!(
        "node_shared: {why}; this test needs them (it fails under CI=true)"
    ));
    false
}

async fn rust_order(Extension(runs): Extension<Arc<AtomicU32>>, body: Bytes) -> impl IntoResponse {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    let text = String::from_utf8_lossy(&body).into_owned();
    if text.contains("\"slow\":true") {
        tokio::time::sleep(Duration::from_millis(800)).await;
    }
    let sku: serde_json::Value = serde_json::from_str(&text).unwrap();
    (
        StatusCode::CREATED,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::LOCATION, format!("/orders/rust_{n}")),
        ],
        serde_json::json!({ "id": format!("rust_{n}"), "served_by": "rust", "sku": sku["sku"] })
            .to_string(),
    )
}

fn headers(key: &str) -> [(&str, &str); 3] {
    [
        ("Idempotency-Key", key),
        ("Content-Type", "application/json"),
        ("x-tenant", "shop-1"),
    ]
}

fn assert_replay_of(replay: &Answer, first: &Answer, what: &str) {
    assert_eq!(replay.status, first.status, "{what}: {}", replay.text());
    assert_eq!(replay.header("idempotent-replayed"), Some("true"), "{what}");
    assert_eq!(
        replay.header("location"),
        first.header("location"),
        "{what}"
    );
    assert_eq!(
        replay.body, first.body,
        "{what}: the replay is the first answer, byte for byte"
    );
}

#[test]
fn node_and_rust_share_one_database() {
    if !node_ready() {
        return;
    }
    on_postgres("axum_node", shared);
}

async fn shared(url: String) {
    let schema = url.rsplit("%3D").next().unwrap().to_owned();
    let store = PgStore::connect(&url, 4).await.unwrap();
    let rust_runs = Arc::new(AtomicU32::new(0));
    let layer = IdempotencyLayer::new(
        Secret::new(SECRET).unwrap(),
        Options::new(Profile::Ietf),
        store.clone(),
    )
    .tenant(|p| {
        p.headers
            .get("x-tenant")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("default")
            .to_owned()
    });
    let rust = serve(
        Router::new()
            .route("/orders", post(rust_order))
            .layer(layer)
            .layer(Extension(Arc::clone(&rust_runs))),
    )
    .await;

    let mut child = tokio::process::Command::new("node")
        .arg(repo().join("host/axum/tests/node/serve.mjs"))
        .env("SECRET", "5c".repeat(32))
        .env("SCHEMA", &schema)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the Node service did not start in 60 s")
        .unwrap()
        .expect("the Node service exited");
    let port: serde_json::Value = serde_json::from_str(&line).unwrap();
    let node: std::net::SocketAddr = format!("127.0.0.1:{}", port["port"]).parse().unwrap();
    let node_runs = || async move {
        let mut s = tokio::net::TcpStream::connect(node).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /runs HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let body = out.split("\r\n\r\n").nth(1).unwrap().to_owned();
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["runs"]
            .as_u64()
            .unwrap()
    };

    // Claimed by Rust, replayed by Node.
    let body_a = r#"{"sku":"A1","qty":2}"#;
    let first = post_once(rust, "/orders", &headers("\"shared-a\""), body_a)
        .await
        .unwrap();
    assert_eq!(first.status, 201, "{}", first.text());
    assert!(first.text().contains("\"served_by\":\"rust\""));
    // The same JSON written differently: the same fingerprint (RFC 8785) on both sides.
    let again = post_once(
        node,
        "/orders",
        &headers("\"shared-a\""),
        r#"{ "qty": 2, "sku": "A1" }"#,
    )
    .await
    .unwrap();
    assert_replay_of(&again, &first, "Node replays what Rust stored");
    assert_eq!(node_runs().await, 0);

    // Claimed by Node, replayed by Rust.
    let body_b = r#"{"sku":"B2","qty":1}"#;
    let first = post_once(node, "/orders", &headers("\"shared-b\""), body_b)
        .await
        .unwrap();
    assert_eq!(first.status, 201, "{}", first.text());
    assert!(first.text().contains("\"served_by\":\"node\""));
    let again = post_once(rust, "/orders", &headers("\"shared-b\""), body_b)
        .await
        .unwrap();
    assert_replay_of(&again, &first, "Rust replays what Node stored");
    assert_eq!(rust_runs.load(Ordering::SeqCst), 1);

    // In flight in Rust: a 409 with Retry-After in Node, then the replay.
    let body_c = r#"{"sku":"C3","qty":1,"slow":true}"#;
    let slow =
        tokio::spawn(
            async move { post_once(rust, "/orders", &headers("\"shared-c\""), body_c).await },
        );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let busy = post_once(node, "/orders", &headers("\"shared-c\""), body_c)
        .await
        .unwrap();
    assert_eq!(busy.status, 409, "{}", busy.text());
    assert_eq!(busy.header("retry-after"), Some("1"));
    let first = slow.await.unwrap().unwrap();
    assert_eq!(first.status, 201);
    let again = post_once(node, "/orders", &headers("\"shared-c\""), body_c)
        .await
        .unwrap();
    assert_replay_of(&again, &first, "Node replays after Rust finished");

    // A reused key with another payload: the same refusal on both sides.
    let other = r#"{"sku":"A1","qty":3}"#;
    let from_node = post_once(node, "/orders", &headers("\"shared-a\""), other)
        .await
        .unwrap();
    let from_rust = post_once(rust, "/orders", &headers("\"shared-a\""), other)
        .await
        .unwrap();
    assert_eq!((from_node.status, from_rust.status), (422, 422));
    assert_eq!(
        from_node.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(
        from_rust.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(from_node.body, from_rust.body, "one core, one answer");

    // Each sees the other's records: three, all done, in one table.
    let rows = store
        .pool()
        .get()
        .await
        .unwrap()
        .query(
            "SELECT status, count(*) FROM intentkey_records GROUP BY status",
            &[],
        )
        .await
        .unwrap();
    let counted: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(counted, vec![("done".to_owned(), 3)]);
    assert_eq!(
        (rust_runs.load(Ordering::SeqCst), node_runs().await),
        (2, 1)
    );
    println!("node and rust share {schema}: 3 keys, each run once (2 in Rust, 1 in Node), each replayed by the other service");
    child.kill().await.unwrap();
}
