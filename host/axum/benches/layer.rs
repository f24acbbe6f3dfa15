//! What the layer costs an axum service.
//!
//! ```sh
//! cargo bench -p intentkey-axum --bench layer
//! ```
//!
//! 1. criterion, in process (`tower::ServiceExt::oneshot`, no sockets): the
//!    same handler bare and behind the layer, a first request (a new key
//!    each time) and a replay (one key, answered before), on the memory store
//!    and on PostgreSQL (127.0.0.1:5432, database `test`, a fresh schema);
//!    and the floor a first request cannot beat on PostgreSQL: two commits
//!    (an insert and an update of one row, each its own transaction), plus
//!    one round trip (`SELECT 1`), on the same pool.
//! 2. requests per second over real sockets at 16 concurrent keep-alive
//!    connections, 3 s each: bare, the layer on memory, the layer on
//!    PostgreSQL (first requests: every request a new key).
//!
//! Method and results: BENCHMARKS.md.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use criterion::Criterion;
use intentkey_axum::{memory, AsyncStore, PgStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

mod common;

use common::{bare, guarded, two_commits, BODY, PG};

fn request(key: &str) -> Request<Body> {
    Request::post("/orders")
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(Body::from(BODY))
        .unwrap()
}

static NEXT: AtomicU64 = AtomicU64::new(0);

fn fresh_key() -> String {
    format!(
        "\"bench-{}-{}\"",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A schema of its own on the test database, or None (the bench then skips PostgreSQL).
fn pg_schema() -> Option<(String, String)> {
    let mut admin = match postgres::Client::connect(PG, postgres::NoTls) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIPPED: the PostgreSQL benches: {PG} is unreachable ({e})");
            return None;
        }
    };
    let schema = format!("ik_bench_axum_{}", std::process::id());
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap();
    Some((
        schema.clone(),
        format!("{PG}?options=-csearch_path%3D{schema}"),
    ))
}

fn drop_schema(schema: &str) {
    if let Ok(mut admin) = postgres::Client::connect(PG, postgres::NoTls) {
        let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}

fn in_process(c: &mut Criterion, rt: &tokio::runtime::Runtime, pg: Option<&PgStore>) {
    let mut stores: Vec<(&str, Arc<dyn AsyncStore>)> = vec![("memory", Arc::new(memory()))];
    if let Some(pg) = pg {
        stores.push(("postgres", Arc::new(pg.clone())));
    }
    let mut group = c.benchmark_group("axum");
    group.bench_function("bare", |b| {
        let app = bare();
        b.to_async(rt)
            .iter(|| async { app.clone().oneshot(request("\"k\"")).await.unwrap() });
    });
    for (name, store) in stores {
        let app = guarded(store);
        group.bench_function(format!("layer {name}, first request"), |b| {
            b.to_async(rt)
                .iter(|| async { app.clone().oneshot(request(&fresh_key())).await.unwrap() });
        });
        let key = fresh_key();
        rt.block_on(app.clone().oneshot(request(&key))).unwrap();
        group.bench_function(format!("layer {name}, replay"), |b| {
            b.to_async(rt).iter(|| async {
                let r = app.clone().oneshot(request(&key)).await.unwrap();
                assert_eq!(r.headers()["idempotent-replayed"], "true");
                r
            });
        });
    }
    if let Some(pg) = pg {
        let pool = pg.pool().clone();
        rt.block_on(async {
            let c = pool.get().await.unwrap();
            c.batch_execute("CREATE TABLE IF NOT EXISTS floor_rows (k text PRIMARY KEY, v int)")
                .await
                .unwrap();
        });
        group.bench_function("postgres floor: two commits", |b| {
            b.to_async(rt).iter(|| async {
                let c = pool.get().await.unwrap();
                let k = fresh_key();
                let ins = c
                    .prepare_cached("INSERT INTO floor_rows (k, v) VALUES ($1, 0)")
                    .await
                    .unwrap();
                let upd = c
                    .prepare_cached("UPDATE floor_rows SET v = 1 WHERE k = $1")
                    .await
                    .unwrap();
                c.execute(&ins, &[&k]).await.unwrap();
                c.execute(&upd, &[&k]).await.unwrap();
            });
        });
        // The same two commits into the store's own table, as the Node
        // bench's floor.
        group.bench_function("postgres floor: two commits, the store's table", |b| {
            b.to_async(rt)
                .iter(|| async { two_commits(&pool, &fresh_key()).await });
        });
        group.bench_function("postgres floor: one round trip", |b| {
            b.to_async(rt).iter(|| async {
                let c = pool.get().await.unwrap();
                let one = c.prepare_cached("SELECT 1").await.unwrap();
                c.query_one(&one, &[]).await.unwrap();
            });
        });
    }
    group.finish();
}

/// Requests per second at `connections` keep-alive connections for `secs`.
async fn rps(app: Router, connections: usize, secs: u64, new_keys: bool) -> (f64, u64) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (done, errors) = (Arc::clone(&done), Arc::clone(&errors));
        tasks.push(tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut buf = vec![0u8; 4096];
            while Instant::now() < until {
                let key = if new_keys { fresh_key() } else { "\"k\"".to_owned() };
                let req = format!(
                    "POST /orders HTTP/1.1\r\nHost: b\r\nIdempotency-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
                    BODY.len()
                );
                s.write_all(req.as_bytes()).await.unwrap();
                // The answers are small: one read holds the whole answer.
                let n = s.read(&mut buf).await.unwrap();
                if !buf[..n].starts_with(b"HTTP/1.1 201") {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    server.abort();
    (
        done.load(Ordering::Relaxed) as f64 / secs as f64,
        errors.load(Ordering::Relaxed),
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let schema = pg_schema();
    let pg = schema
        .as_ref()
        .map(|(_, url)| rt.block_on(PgStore::connect(url, 16)).unwrap());
    let mut c = Criterion::default().configure_from_args();
    in_process(&mut c, &rt, pg.as_ref());
    c.final_summary();

    let mut rows = vec![
        ("bare axum", bare(), false),
        ("layer, memory", guarded(Arc::new(memory())), true),
    ];
    if let Some(pg) = &pg {
        rows.push(("layer, PostgreSQL", guarded(Arc::new(pg.clone())), true));
    }
    println!("\nrequests per second, 16 keep-alive connections, 3 s each (first requests: a new key each):");
    for (name, app, keyed) in rows {
        let (per_second, errors) = rt.block_on(rps(app, 16, 3, keyed));
        println!("  {name:<20} {per_second:>9.0} req/s  ({errors} answers other than 201)");
    }
    drop(rt);
    if let Some((schema, _)) = schema {
        drop_schema(&schema);
    }
}
