//! Where the axum layer's first request on PostgreSQL spends its time, layer
//! by layer, in one process and one run.
//!
//! ```sh
//! cargo bench -p intentkey-axum --bench pg_first -- [--rounds R] [--calls N] [--async-commit] [--statements] [--only TEXT]
//! ```
//!
//! The layers take turns call by call (so that a slow moment of the disk
//! falls on all of them alike), in an order shuffled at each turn (a call
//! costs a few µs more right after some others: a fixed order charges that
//! to the same layer every time), `rounds × calls` calls each, each call a
//! new key; a figure is a quantile of the calls' µs:
//!
//! - **two commits, the store's table**: the floor of `benches/layer.rs`, a
//!   bare `INSERT … ON CONFLICT DO NOTHING` of eight columns and a bare
//!   `UPDATE` writing the answer, prepared, on one pooled connection;
//! - **the core's insert + complete**: its two statements (every column of
//!   the claim, the completion fenced on the owner token), the values made by
//!   the core (`sql::insert_params`, `sql::complete_params`) and bound here,
//!   each on a connection of its own from the pool, as the store runs them;
//! - **the core's claim + complete**: the same with the one-statement claim
//!   (the insert, and the record it lost to: a replay is one round trip);
//! - **`PgStore` claim + complete**: those two through the store
//!   (`AsyncStore::claim_insert`, `AsyncStore::complete`: the claim's
//!   registration until its insert ends, the row read by the core);
//! - **the layer, PostgreSQL**: a request through `IdempotencyLayer` on that
//!   store (`oneshot`, no socket): admit, claim, the handler, capture, the
//!   completion;
//! - **the layer, memory** and **bare axum**: what the layer itself costs
//!   when the store is free, and the handler alone;
//! - with `--statements`, the claim's statement alone, three ways that
//!   answer a replay in one round trip or not: the core's `insert` (a replay
//!   would need a second round trip), the core's one-statement `claim`, and
//!   the `insert` and `get` pipelined on one connection (one round trip, two
//!   statements).
//!
//! `--async-commit` runs every PostgreSQL layer with `synchronous_commit`
//! off (the session's setting): both sides still commit twice, but no commit
//! waits for the WAL flush, most of the noise on a shared disk; what is left
//! is the client's and the server's CPU. A fresh schema, dropped at the end.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use intentkey::claim::sql::{self, Kind};
use intentkey::claim::{Attempt, Completion, Record, Response};
use intentkey_axum::{memory, AsyncStore, PgStore};
use intentkey_store::pg_sql::{bind, refs, text};
use intentkey_store::tokio::Inserted;
use tower::ServiceExt;

mod common;

use common::{bare, guarded, two_commits, ANSWER, BODY, PG};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

static NEXT: AtomicU64 = AtomicU64::new(0);

fn fresh(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A new key as long as a storage key (64 characters), for the layers that
/// write the core's records themselves.
fn storage_key(prefix: &str) -> String {
    format!("{:0>64}", fresh(prefix))
}

fn now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_secs()).unwrap()
}

fn request(key: &str) -> Request<Body> {
    Request::post("/orders")
        .header("Idempotency-Key", format!("\"{key}\""))
        .header("Content-Type", "application/json")
        .body(Body::from(BODY))
        .unwrap()
}

/// A claim as the layer makes it: every column the core writes.
fn record(key: String) -> Record {
    let attempt = Attempt {
        key,
        fingerprint: "a3f1c2d4e5b60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90".into(),
        tenant_id: "default".into(),
        action_type: "POST /orders".into(),
        prior: None,
    };
    Record::in_flight(&attempt, TOKEN, now())
}

fn completion(key: String) -> Completion {
    Completion {
        key,
        owner_token: TOKEN.into(),
        response: Response {
            status: 201,
            content_type: "application/json".into(),
            headers: vec![("location".into(), "/orders/ord_1".into())],
            body: ANSWER.as_bytes().to_vec(),
        },
        expires_at: now() + 86_400,
        fast: false,
    }
}

/// One of the core's statements on a connection of its own from the pool,
/// as `PgStore` runs it: the rows it answered.
async fn core_statement(
    pool: &deadpool_postgres::Pool,
    kind: Kind,
    values: Vec<sql::Value>,
) -> Vec<deadpool_postgres::tokio_postgres::Row> {
    let c = pool.get().await.unwrap();
    let statement = c.prepare_cached(text(kind).unwrap()).await.unwrap();
    let params = bind(values, statement.params()).unwrap();
    c.query(&statement, &refs(&params)).await.unwrap()
}

/// How `--statements` sends a claim.
#[derive(Clone, Copy)]
enum Claim {
    /// The core's `insert`: a replay would need a second round trip.
    Insert,
    /// The core's `claim`: the insert, and the record it lost to.
    OneStatement,
    /// The `insert` and the core's `get` pipelined on one connection: one
    /// round trip, two statements.
    Pipelined,
}

async fn claim_alone(pool: deadpool_postgres::Pool, claim: Claim) {
    let k = storage_key("alone");
    let c = pool.get().await.unwrap();
    let kind = match claim {
        Claim::OneStatement => Kind::Claim,
        Claim::Insert | Claim::Pipelined => Kind::Insert,
    };
    let statement = c.prepare_cached(text(kind).unwrap()).await.unwrap();
    let params = bind(sql::insert_params(&record(k.clone())), statement.params()).unwrap();
    let params = refs(&params);
    match claim {
        Claim::Insert => assert_eq!(c.execute(&statement, &params).await.unwrap(), 1),
        Claim::OneStatement => {
            let rows = c.query(&statement, &params).await.unwrap();
            let values = intentkey_store::pg_sql::row_values(&rows[0]).unwrap();
            assert_eq!(sql::decode_claim(&values).unwrap(), sql::Claimed::Won);
        }
        Claim::Pipelined => {
            let get = c.prepare_cached(text(Kind::Get).unwrap()).await.unwrap();
            let key = bind(sql::get_params(&k), get.params()).unwrap();
            let key = refs(&key);
            let (inserted, got) =
                futures_util::join!(c.execute(&statement, &params), c.query(&get, &key));
            assert_eq!(inserted.unwrap(), 1);
            assert_eq!(got.unwrap().len(), 1, "the get reads the row just inserted");
        }
    }
}

type Call = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

struct Layer {
    name: &'static str,
    call: Call,
    /// µs, one per call.
    samples: Vec<f64>,
}

fn layer(name: &'static str, call: Call) -> Layer {
    Layer {
        name,
        call,
        samples: Vec::new(),
    }
}

/// A fixed-seed xorshift, to shuffle the layers' order at each turn the
/// same way in every run (Fisher–Yates).
struct Shuffle(u64);

impl Shuffle {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn apply(&mut self, order: &mut [usize]) {
        for i in (1..order.len()).rev() {
            let j = usize::try_from(self.next() % (i as u64 + 1)).unwrap();
            order.swap(i, j);
        }
    }
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn number(args: &[String], name: &str, fallback: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(fallback, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, not {v:?}"))
        })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = number(&args, "--rounds", 7);
    let calls = number(&args, "--calls", 500);
    let async_commit = args.iter().any(|a| a == "--async-commit");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let statements = args.iter().any(|a| a == "--statements");
    let known = [
        "--rounds",
        "--calls",
        "--async-commit",
        "--statements",
        "--only",
        "--bench",
    ];
    for (i, a) in args.iter().enumerate().skip(1) {
        let value_of_previous = matches!(args[i - 1].as_str(), "--rounds" | "--calls" | "--only");
        if a.starts_with("--") && !known.contains(&a.as_str())
            || !a.starts_with("--") && !value_of_previous
        {
            panic!(
                "unknown argument {a:?}: the options are --rounds R, --calls N, \
                 --async-commit, --statements, --only TEXT"
            );
        }
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let schema = format!("ik_bench_pgfirst_{}", std::process::id());
    let mut admin = postgres::Client::connect(PG, postgres::NoTls)
        .unwrap_or_else(|e| panic!("this bench needs PostgreSQL at {PG}: {e}"));
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap();
    let commit = if async_commit {
        "%20-csynchronous_commit%3Doff"
    } else {
        ""
    };
    let url = format!("{PG}?options=-csearch_path%3D{schema}{commit}");
    let store = rt.block_on(PgStore::connect(&url, 16)).unwrap();
    let pool = store.pool().clone();
    rt.block_on(async {
        let c = pool.get().await.unwrap();
        let row = c.query_one("SELECT current_schema()", &[]).await.unwrap();
        let at: String = row.get(0);
        assert_eq!(at, schema, "every layer writes into the bench's own schema");
    });

    let mut layers = Vec::new();
    {
        let pool = pool.clone();
        layers.push(layer(
            "two commits, the store's table (the floor)",
            Box::new(move || {
                let pool = pool.clone();
                Box::pin(async move { two_commits(&pool, &fresh("floor")).await })
            }),
        ));
    }
    for (name, kind) in [
        ("the core's insert + complete", Kind::Insert),
        ("the core's claim + complete", Kind::Claim),
    ] {
        let pool = pool.clone();
        layers.push(layer(
            name,
            Box::new(move || {
                let pool = pool.clone();
                Box::pin(async move {
                    let k = storage_key("core");
                    let claimed =
                        core_statement(&pool, kind, sql::insert_params(&record(k.clone()))).await;
                    if kind == Kind::Claim {
                        let won = sql::decode_claim(
                            &intentkey_store::pg_sql::row_values(&claimed[0]).unwrap(),
                        )
                        .unwrap();
                        assert_eq!(won, sql::Claimed::Won);
                    }
                    let done =
                        core_statement(&pool, Kind::Complete, sql::complete_params(&completion(k)))
                            .await;
                    assert!(done.is_empty());
                })
            }),
        ));
    }
    {
        let store = store.clone();
        layers.push(layer(
            "PgStore claim + complete",
            Box::new(move || {
                let store = store.clone();
                Box::pin(async move {
                    let k = storage_key("store");
                    let won = store.claim_insert(record(k.clone())).await.unwrap();
                    assert!(matches!(won, Inserted::Won));
                    assert!(store.complete(completion(k)).await.unwrap());
                })
            }),
        ));
    }
    for (name, app) in [
        ("the layer, PostgreSQL", guarded(Arc::new(store.clone()))),
        ("the layer, memory", guarded(Arc::new(memory()))),
        ("bare axum", bare()),
    ] {
        layers.push(layer(
            name,
            Box::new(move || {
                let app = app.clone();
                Box::pin(async move {
                    let r = app.oneshot(request(&fresh("layer"))).await.unwrap();
                    assert_eq!(r.status(), StatusCode::CREATED);
                    assert!(!r.headers().contains_key("idempotent-replayed"));
                })
            }),
        ));
    }

    if statements {
        // The claim's statement alone, three ways of one round trip.
        for (name, claim) in [
            ("claim alone: the core's insert", Claim::Insert),
            ("claim alone: the one-statement claim", Claim::OneStatement),
            ("claim alone: insert + get, pipelined", Claim::Pipelined),
        ] {
            let pool = pool.clone();
            layers.push(layer(
                name,
                Box::new(move || {
                    let pool = pool.clone();
                    Box::pin(claim_alone(pool, claim))
                }),
            ));
        }
    }
    // `--only TEXT`: the floor and the layers whose name holds TEXT (to
    // profile one of them, `perf record`).
    if let Some(only) = &only {
        let mut i = 0;
        layers.retain(|l| {
            i += 1;
            i == 1 || l.name.contains(only.as_str())
        });
    }
    // Warm every connection of the pool and every statement on it.
    rt.block_on(async {
        for l in &layers {
            for _ in 0..64 {
                (l.call)().await;
            }
        }
    });
    // The layers take turns call by call: a slow moment of the disk or the
    // machine falls on all of them alike. Their order is shuffled at each
    // turn: a call costs a few µs more right after some others (the state
    // they leave in the caches and the connections), which a fixed order
    // would charge to the same layer every time.
    let mut order: Vec<usize> = (0..layers.len()).collect();
    let mut shuffle = Shuffle(0x9e37_79b9_7f4a_7c15);
    rt.block_on(async {
        for round in 0..rounds {
            for _ in 0..calls {
                shuffle.apply(&mut order);
                for &i in &order {
                    let l = &mut layers[i];
                    let started = Instant::now();
                    (l.call)().await;
                    l.samples.push(started.elapsed().as_secs_f64() * 1e6);
                }
            }
            eprintln!("round {} of {rounds}", round + 1);
        }
    });

    println!(
        "\nµs per call over {} calls each, the layers taking turns call by call{}:",
        rounds * calls,
        if async_commit {
            ", synchronous_commit off"
        } else {
            ""
        }
    );
    println!(
        "  {:<44} {:>8} {:>8} {:>8} {:>16}",
        "", "p25", "median", "p75", "median − floor"
    );
    let floor = quantile(&layers[0].samples, 0.5);
    for l in &layers {
        let m = quantile(&l.samples, 0.5);
        println!(
            "  {:<44} {:>8.1} {m:>8.1} {:>8.1} {:>+16.1}",
            l.name,
            quantile(&l.samples, 0.25),
            quantile(&l.samples, 0.75),
            m - floor,
        );
    }
    if let Some(layer_pg) = layers.iter().find(|l| l.name == "the layer, PostgreSQL") {
        println!(
            "  the layer ÷ the floor (medians): {:.2}",
            quantile(&layer_pg.samples, 0.5) / floor
        );
    }
    drop(layers);
    drop(store);
    drop(rt);
    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
}
