//! The soak test's worker: `POST /soak/effects` behind the intentkey layer on
//! PostgreSQL, whose effect is one row inserted into a `soak_effects` table
//! in the same database. That table plays the destination: the handler
//! writes to it under the storage key, and recovery looks the key up in it
//! (`lookup`). It has no unique constraint, so an effect that ran twice
//! shows as two rows.
//!
//! `tests/soak.rs` runs two of these in child processes (its own test
//! binary, with this file compiled in), restarts PostgreSQL and kills one of
//! them under load. By hand:
//!
//! ```sh
//! cargo run -p intentkey-axum --example soak-worker
//! ```
//!
//! `SOAK_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`; add
//! `?options=-csearch_path%3D<schema>` for a schema of its own) picks the
//! database, `PORT` (default 3001; 0 for a free one) the port, `SOAK_WORKER`
//! (default `w`) the name written beside each effect, `SOAK_CONNECTIONS`
//! (default 16) the pool size, `SOAK_WAIT_MS` (default 0: off) how long a
//! retry that finds its key in flight waits for the first attempt
//! (`IdempotencyLayer::wait`), and `INTENTKEY_SECRET` (64 hex digits) the
//! secret (default: a fixed demo secret, never for real keys). Every worker
//! of one service needs the same secret. `GET /stats` answers the worker's
//! counters as JSON.
//!
//! The request body is JSON; its `delay_ms` (at most 5000) makes the handler
//! wait before the effect, so that a duplicate sent meanwhile gets 409.
//!
//! How the handler answers, so that every outcome is known:
//! - the effect runs in a transaction that first takes an advisory lock on
//!   the storage key; the row is committed, or nothing happened;
//! - no connection, or an error before `COMMIT`: nothing happened, so
//!   503 with `Retry-After` (a release status: the layer deletes the claim
//!   and the client's retry runs the effect);
//! - an error during `COMMIT` (the connection dropped: it may have
//!   committed): the handler waits for the lock (any transaction still open
//!   on the key has ended) and reads the table: the row's 201, or 503;
//! - the table cannot be read for 30 s: the outcome is unknown, the body
//!   fails, and the layer answers the core's 500 and leaves the record in
//!   flight for recovery.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use deadpool_postgres::Pool;
use intentkey::claim::{Lookup, Response as Stored};
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{AsyncGateway, AsyncStore, Idempotency, IdempotencyLayer, PgStore, Phase};

/// The destination's table: one row per effect, no unique constraint.
pub const EFFECTS_TABLE_SQL: &str = "CREATE TABLE IF NOT EXISTS soak_effects (
    id          BIGSERIAL PRIMARY KEY,
    storage_key TEXT NOT NULL,
    worker      TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS soak_effects_key ON soak_effects (storage_key)";

/// The effect: the key's advisory lock, held until the transaction ends,
/// and the row.
const INSERT_SQL: &str = "INSERT INTO soak_effects (storage_key, worker)
    SELECT $1, $2 FROM (SELECT pg_advisory_xact_lock(hashtextextended($1, 0))) AS held
    RETURNING id";

/// Waits until no transaction holds the key's lock (any effect of the key
/// still open has committed or rolled back).
const BARRIER_SQL: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

const LOOKUP_SQL: &str =
    "SELECT id, worker FROM soak_effects WHERE storage_key = $1 ORDER BY id LIMIT 1";

/// How long an ambiguous `COMMIT` waits for the table to answer.
const SETTLE_FOR: Duration = Duration::from_secs(30);

/// One effect, as the table holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectRow {
    /// The row's id.
    pub id: i64,
    /// The storage key the effect ran under.
    pub key: String,
    /// Who ran it (a worker's name, or `recovery`).
    pub worker: String,
}

impl EffectRow {
    /// The answer's body: the same bytes from the handler and from a look-up.
    pub fn body(&self) -> String {
        format!(
            r#"{{"effect":{},"key":"{}","worker":"{}"}}"#,
            self.id, self.key, self.worker
        )
    }

    /// The answer's `Location`.
    pub fn location(&self) -> String {
        format!("/soak/effects/{}", self.id)
    }

    /// The answer, as recovery records it.
    pub fn stored(&self) -> Stored {
        Stored::json(201, self.body()).with_header("Location", self.location())
    }

    /// The answer, as the handler sends it.
    pub fn response(&self) -> Response {
        (
            StatusCode::CREATED,
            [
                (header::CONTENT_TYPE, "application/json".to_owned()),
                (header::LOCATION, self.location()),
            ],
            self.body(),
        )
            .into_response()
    }
}

/// What running the effect did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// It ran (committed, or found committed after an ambiguous `COMMIT`).
    Ran(EffectRow),
    /// It did not run.
    NotRun(String),
    /// Nobody can tell yet.
    Unknown(String),
}

/// The worker's counters (`GET /stats`).
#[derive(Debug, Default)]
pub struct Stats {
    /// Handler runs.
    pub runs: AtomicU64,
    /// Effects committed.
    pub ran: AtomicU64,
    /// Effects that did not run (answered 503).
    pub not_run: AtomicU64,
    /// `COMMIT`s that failed and were settled by reading the table.
    pub settled: AtomicU64,
    /// Outcomes left unknown (answered 500, left in flight).
    pub unknown: AtomicU64,
    /// The layer's errors, by phase: claim, handler, complete, config.
    pub errors: [AtomicU64; 4],
}

impl Stats {
    fn json(&self) -> String {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            r#"{{"runs":{},"ran":{},"not_run":{},"settled":{},"unknown":{},"claim_errors":{},"handler_errors":{},"complete_errors":{},"config_errors":{}}}"#,
            n(&self.runs),
            n(&self.ran),
            n(&self.not_run),
            n(&self.settled),
            n(&self.unknown),
            n(&self.errors[0]),
            n(&self.errors[1]),
            n(&self.errors[2]),
            n(&self.errors[3]),
        )
    }
}

/// Runs the effect for `key` once: the row, committed, or nothing; and
/// whether a failed `COMMIT` was settled by reading the table.
pub async fn run_effect(pool: &Pool, key: &str, worker: &str) -> (Effect, bool) {
    let mut client = match pool.get().await {
        Ok(client) => client,
        Err(e) => return (Effect::NotRun(format!("no connection: {e}")), false),
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => return (Effect::NotRun(format!("BEGIN failed: {e}")), false),
    };
    let id: i64 = match tx.query_one(INSERT_SQL, &[&key, &worker]).await {
        Ok(row) => match row.try_get(0) {
            Ok(id) => id,
            Err(e) => return (Effect::NotRun(format!("bad row: {e}")), false),
        },
        // Not committed: the transaction is rolled back (or its session is gone).
        Err(e) => return (Effect::NotRun(format!("INSERT failed: {e}")), false),
    };
    match tx.commit().await {
        Ok(()) => (
            Effect::Ran(EffectRow {
                id,
                key: key.to_owned(),
                worker: worker.to_owned(),
            }),
            false,
        ),
        // It may have committed: read the table once the key's lock is free.
        Err(_) => {
            drop(client);
            (settle(pool, key).await, true)
        }
    }
}

/// After an ambiguous `COMMIT`: the table's answer, read after the key's
/// lock is free, retried for [`SETTLE_FOR`].
async fn settle(pool: &Pool, key: &str) -> Effect {
    let deadline = Instant::now() + SETTLE_FOR;
    loop {
        match lookup(pool, key).await {
            Ok(Some(row)) => return Effect::Ran(row),
            Ok(None) => return Effect::NotRun("the COMMIT did not happen".to_owned()),
            Err(e) if Instant::now() >= deadline => return Effect::Unknown(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Whether an effect ran under `key`: the first row, read after every
/// transaction holding the key's lock has ended.
///
/// # Errors
/// The database could not be asked.
pub async fn lookup(pool: &Pool, key: &str) -> Result<Option<EffectRow>, String> {
    let client = pool.get().await.map_err(|e| e.to_string())?;
    client
        .execute(BARRIER_SQL, &[&key])
        .await
        .map_err(|e| e.to_string())?;
    let rows = client
        .query(LOOKUP_SQL, &[&key])
        .await
        .map_err(|e| e.to_string())?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    Ok(Some(EffectRow {
        id: row.try_get(0).map_err(|e| e.to_string())?,
        key: key.to_owned(),
        worker: row.try_get(1).map_err(|e| e.to_string())?,
    }))
}

/// The destination as recovery asks it: read-your-writes (one primary,
/// synchronous commits, and the look-up waits for open effects of the key).
pub struct EffectsGateway(pub Pool);

impl AsyncGateway for EffectsGateway {
    fn ask<'a>(
        &'a self,
        key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Lookup> + Send + 'a>> {
        Box::pin(async move {
            match lookup(&self.0, key).await {
                Ok(Some(row)) => Lookup::Found(row.stored()),
                Ok(None) => Lookup::Absent,
                Err(_) => Lookup::Unknown,
            }
        })
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

#[derive(Clone)]
struct Worker {
    pool: Pool,
    name: String,
    stats: Arc<Stats>,
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (header::CONTENT_TYPE, "application/problem+json"),
            (header::RETRY_AFTER, "1"),
        ],
        r#"{"type":"https://intentkey.dev/problems/destination-unavailable","title":"The destination could not be reached","status":503,"detail":"Nothing was done. Retry with the same key."}"#,
    )
        .into_response()
}

/// `POST /soak/effects`: the effect, once, under the storage key.
async fn create(
    Extension(worker): Extension<Worker>,
    Extension(id): Extension<Idempotency>,
    body: Bytes,
) -> Response {
    worker.stats.runs.fetch_add(1, Ordering::Relaxed);
    let delay = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("delay_ms").and_then(serde_json::Value::as_u64))
        .unwrap_or(0)
        .min(5_000);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let (effect, settled) = run_effect(&worker.pool, &id.key, &worker.name).await;
    if settled {
        worker.stats.settled.fetch_add(1, Ordering::Relaxed);
    }
    match effect {
        Effect::Ran(row) => {
            worker.stats.ran.fetch_add(1, Ordering::Relaxed);
            row.response()
        }
        Effect::NotRun(_) => {
            worker.stats.not_run.fetch_add(1, Ordering::Relaxed);
            unavailable()
        }
        Effect::Unknown(why) => {
            // A body that fails: the layer leaves the record in flight and
            // answers the core's 500 (the outcome is unknown).
            worker.stats.unknown.fetch_add(1, Ordering::Relaxed);
            let failing = futures_util::stream::once(async move {
                Err::<Bytes, std::io::Error>(std::io::Error::other(why))
            });
            Response::new(Body::from_stream(failing))
        }
    }
}

/// The worker's app on the database at `url` (the effects table is created
/// if missing), and its counters.
///
/// # Errors
/// The database could not be reached or migrated.
pub async fn app(
    url: &str,
    name: &str,
    connections: usize,
    secret: Secret,
) -> Result<(Router, Arc<Stats>), Box<dyn std::error::Error + Send + Sync>> {
    let store = PgStore::connect(url, connections).await?;
    let pool = store.pool().clone();
    pool.get().await?.batch_execute(EFFECTS_TABLE_SQL).await?;
    let store: Arc<dyn AsyncStore> = Arc::new(store);
    let stats = Arc::new(Stats::default());
    let printed = Arc::new(AtomicU64::new(0));
    let layer = {
        let (stats, name) = (Arc::clone(&stats), name.to_owned());
        let wait_ms: u64 = std::env::var("SOAK_WAIT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        IdempotencyLayer::with_shared_store(secret, Options::new(Profile::Ietf), store)
            .wait(Duration::from_millis(wait_ms))?
            .on_error(move |phase, message| {
                let slot = match phase {
                    Phase::Claim => 0,
                    Phase::Handler => 1,
                    Phase::Complete => 2,
                    Phase::Config => 3,
                };
                stats.errors[slot].fetch_add(1, Ordering::Relaxed);
                // The first few only: a restart of the database gives hundreds.
                if printed.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("soak-worker {name}: intentkey {phase:?}: {message}");
                }
            })
    };
    let worker = Worker {
        pool,
        name: name.to_owned(),
        stats: Arc::clone(&stats),
    };
    let counters = Arc::clone(&stats);
    let router = Router::new()
        .route("/soak/effects", post(create))
        .route(
            "/stats",
            get(move || {
                let json = counters.json();
                async move { ([(header::CONTENT_TYPE, "application/json")], json) }
            }),
        )
        .layer(layer)
        .layer(Extension(worker));
    Ok((router, stats))
}

/// Serves the worker on `127.0.0.1:port` until the process ends: retries
/// the database and the port for 30 s (a restarted worker takes its old
/// port back), then prints `soak-worker <name>: listening on http://<addr>`.
///
/// # Errors
/// The database or the port stayed unavailable for 30 s.
pub async fn run(
    url: &str,
    name: &str,
    port: u16,
    connections: usize,
    secret: Secret,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let (router, _) = loop {
        match app(url, name, connections, secret.clone()).await {
            Ok(app) => break app,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    };
    let listener = loop {
        match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => break listener,
            Err(e) if Instant::now() >= deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "soak-worker {name}: listening on http://{}",
            listener.local_addr()?
        )?;
        out.flush()?;
    }
    axum::serve(listener, router).await?;
    Ok(())
}

/// The demo secret (never for real keys).
pub fn demo_secret() -> Result<Secret, intentkey::Error> {
    Secret::from_hex(&"5c".repeat(32))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let env =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let url = env("SOAK_PG_URL", "postgres://postgres@127.0.0.1:5432/test");
    let port: u16 = env("PORT", "3001").parse()?;
    let name = env("SOAK_WORKER", "w");
    let connections: usize = env("SOAK_CONNECTIONS", "16").parse()?;
    let secret = match std::env::var("INTENTKEY_SECRET") {
        Ok(hex) => Secret::from_hex(&hex)?,
        Err(_) => {
            eprintln!("INTENTKEY_SECRET is not set: using the demo secret (never for real keys)");
            demo_secret()?
        }
    };
    run(&url, &name, port, connections, secret).await
}
