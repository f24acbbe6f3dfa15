//! intentkey's stores and its Guard: where records live and the unique
//! constraint decides.
//!
//! Every store keeps the same record (the one schema, `intentkey::claim::schema`,
//! documented in `docs/store-schema.md`) and offers the same few atomic
//! operations ([`Store`]): an insert that loses on conflict, a read, and
//! writes fenced on the owner token. The order of those operations is the
//! core's ([`intentkey::claim::flow`]): [`run_flow`] performs what a flow
//! asks, and [`guard::Guard`] builds on it to run an effect at most once per
//! intent and replay its response. No store sequences claims itself.
//!
//! Stores: [`MemoryStore`]; `SqliteStore` (cargo feature `sqlite`, on by
//! default: the embedded store); `PostgresStore` (cargo feature `postgres`:
//! many app servers share one unique index); `RedisStore` (cargo feature
//! `redis`: many app servers share one Redis, through the core's Lua
//! scripts); `MysqlStore` (cargo feature `mysql`: MySQL 8 or MariaDB, the
//! core's MySQL dialect). [`open`] picks one by URL.
//!
//! For async services (cargo feature `tokio`): `tokio::AsyncStore` and
//! `tokio::AsyncGuard`, the same flows awaited, over the memory store, a
//! synchronous store on tokio's blocking threads (`tokio::Blocking`), or
//! PostgreSQL without blocking (`tokio::PgStore`, with `postgres` too).
//!
//! ```
//! use intentkey::claim::{Attempt, ClaimFlow, ClaimOutcome};
//! use intentkey_store::{open, run_flow};
//!
//! let store = open("memory:")?;
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "tenant-1".into(), action_type: "pix.send".into(), prior: None };
//! let first = run_flow(store.as_ref(), ClaimFlow::new(&attempt, "owner-a", 1_700_000_000), None)?;
//! assert_eq!(first, ClaimOutcome::Owned);
//! let again = run_flow(store.as_ref(), ClaimFlow::new(&attempt, "owner-b", 1_700_000_001), None)?;
//! assert_eq!(again, ClaimOutcome::InFlight);
//! # Ok::<(), intentkey_store::StoreError>(())
//! ```

#[cfg(feature = "dynamodb")]
mod dynamo;
pub mod guard;
pub mod journal;
mod memory;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
pub mod pg_sql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "tokio")]
pub mod tokio;

use std::fmt;

use intentkey::claim::{
    drive, ClaimStore, Completion, DriveError, Flow, FlowError, Lookup, OpResult, Record, Release,
    Replacement, Status,
};
use intentkey::ErrorCode;

#[cfg(feature = "dynamodb")]
pub use self::dynamo::DynamoStore;
pub use self::guard::Gateway;
pub use self::memory::MemoryStore;
#[cfg(feature = "mysql")]
pub use self::mysql::MysqlStore;
#[cfg(feature = "postgres")]
pub use self::postgres::PostgresStore;
#[cfg(feature = "redis")]
pub use self::redis::RedisStore;
#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteStore;

/// The repository README's examples, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;

/// The agents and queues guide's Rust example, run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/agents-and-queues.md")]
pub struct AgentsAndQueuesGuide;

/// The Rust examples of the key modes (`docs/keys.md`), run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/keys.md")]
pub struct KeysGuide;

/// The Rust example of rotating the secret (`docs/rotation.md`), run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/rotation.md")]
pub struct RotationGuide;

/// The Rust example of the guard (`docs/claims.md`), run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/claims.md")]
pub struct ClaimsGuide;

/// The Rust example of the Redis store (`docs/redis.md`), compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/redis.md")]
pub struct RedisGuide;

/// A store failure: a stable code, what went wrong and whether retrying may help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    code: ErrorCode,
    message: String,
}

impl StoreError {
    /// A failure that will not go away by retrying (bad URL, bad schema, bad
    /// data): `store-failed`.
    pub fn fatal(message: impl Into<String>) -> Self {
        StoreError {
            code: ErrorCode::StoreFailed,
            message: message.into(),
        }
    }

    /// A failure that may pass (the server is restarting, the connection
    /// dropped, the database is busy): `store-unavailable`.
    pub fn retryable(message: impl Into<String>) -> Self {
        StoreError {
            code: ErrorCode::StoreUnavailable,
            message: message.into(),
        }
    }

    /// A failure with one of the core's codes (for example
    /// `response-too-large`, which a store refuses before writing).
    pub fn with_code(code: ErrorCode, message: impl Into<String>) -> Self {
        StoreError {
            code,
            message: message.into(),
        }
    }

    /// Whether retrying the operation may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::StoreUnavailable | ErrorCode::RecordVanished
        )
    }

    /// The stable code: `store-unavailable`, `store-failed`, `record-vanished`
    /// or `flow-misuse`.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if self.is_retryable() {
            f.write_str(" (retryable: nothing was lost; try again)")?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreError {}

impl From<FlowError> for StoreError {
    fn from(e: FlowError) -> Self {
        StoreError {
            code: e.code(),
            message: e.to_string(),
        }
    }
}

impl From<DriveError<StoreError>> for StoreError {
    fn from(e: DriveError<StoreError>) -> Self {
        match e {
            DriveError::Store(e) => e,
            DriveError::Flow(e) => e.into(),
        }
    }
}

/// A connection URL without its password, for messages.
#[cfg(any(feature = "postgres", feature = "redis", feature = "mysql"))]
pub(crate) fn redact(url: &str) -> String {
    redact_any(url)
}

/// The operations every store offers, each one atomic statement. The fenced
/// writes compare the owner token (and, for recovery writes, the look-up
/// count) and report whether they wrote. The core decides their order.
pub trait Store: Send + Sync {
    /// Inserts `record` unless its key exists (`insert … on conflict do
    /// nothing`); `true` when this call inserted it.
    ///
    /// # Errors
    /// When the store cannot be reached or refuses the write.
    fn insert(&self, record: &Record) -> Result<bool, StoreError>;

    /// The claim's insert: `OpResult::Inserted`, or `OpResult::Existing`
    /// with the record it lost to when the store reads it in the same
    /// round trip (Redis: the core's `claim` script), so that a repeat costs
    /// one round trip. By default [`Store::insert`], and the claim flow
    /// reads the record after.
    ///
    /// # Errors
    /// As [`Store::insert`].
    fn claim(&self, record: &Record) -> Result<OpResult, StoreError> {
        Ok(OpResult::Inserted(self.insert(record)?))
    }

    /// Reads one record.
    ///
    /// # Errors
    /// When the store cannot be reached or holds a malformed row.
    fn get(&self, key: &str) -> Result<Option<Record>, StoreError>;

    /// Completes an `in_flight` record still owned by `completion.owner_token`.
    ///
    /// # Errors
    /// When the store cannot be reached or refuses the write.
    fn complete(&self, completion: &Completion) -> Result<bool, StoreError>;

    /// Writes a recovery decision over an `in_flight` record still owned by
    /// `expected_token` with `expected_lookups` look-ups made.
    ///
    /// # Errors
    /// When the store cannot be reached or refuses the write.
    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError>;

    /// Deletes an `in_flight` record still owned by `release.owner_token`.
    ///
    /// # Errors
    /// When the store cannot be reached or refuses the delete.
    fn release(&self, release: &Release) -> Result<bool, StoreError>;

    /// Records with `status` (all when `None`), oldest first (`created_at`,
    /// then key), at most `limit`.
    ///
    /// # Errors
    /// When the store cannot be reached.
    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError>;

    /// Deletes `done` records whose expiry has passed; returns how many.
    /// Never touches `in_flight` or `needs_reconciliation` records.
    ///
    /// # Errors
    /// When the store cannot be reached.
    fn purge(&self, now: i64) -> Result<u64, StoreError>;

    /// The store's kind, as telemetry names it (`memory`, `sqlite`,
    /// `postgres`, `mysql`, `redis`, `dynamodb`; `custom` by default).
    fn kind(&self) -> &'static str {
        "custom"
    }

    /// Starts (once) whatever makes this store tell the process that a
    /// record changed, from any process: each changed key goes to
    /// `changed` (the wake-ups of waiting retries). Nothing by default (the
    /// waiters re-check on the core's intervals); the Redis store subscribes
    /// to its change channels.
    fn listen(&self, changed: fn(&str)) {
        let _ = changed;
    }

    /// How many records have `status` (every status when `None`), and the
    /// oldest claim among them: the core's `count` statement on the SQL
    /// stores. `None` when the store cannot count without reading every
    /// record (then list them).
    ///
    /// # Errors
    /// When the store cannot be reached.
    fn count(
        &self,
        status: Option<Status>,
    ) -> Result<Option<Vec<intentkey::claim::sql::StatusCount>>, StoreError> {
        let _ = status;
        Ok(None)
    }
}

/// Lets the core drive a [`Store`] (`intentkey::claim::ClaimStore`).
pub struct Driven<'s>(pub &'s dyn Store);

impl ClaimStore for Driven<'_> {
    type Error = StoreError;
    fn insert(&mut self, record: &Record) -> Result<bool, StoreError> {
        self.0.insert(record)
    }
    fn claim(&mut self, record: &Record) -> Result<OpResult, StoreError> {
        self.0.claim(record)
    }
    fn get(&mut self, key: &str) -> Result<Option<Record>, StoreError> {
        self.0.get(key)
    }
    fn complete(&mut self, completion: &Completion) -> Result<bool, StoreError> {
        self.0.complete(completion)
    }
    fn replace(&mut self, replacement: &Replacement) -> Result<bool, StoreError> {
        self.0.replace(replacement)
    }
    fn release(&mut self, release: &Release) -> Result<bool, StoreError> {
        self.0.release(release)
    }
    fn list(&mut self, status: Status, limit: u32) -> Result<Vec<Record>, StoreError> {
        self.0.list(Some(status), limit as usize)
    }
    fn purge(&mut self, now: i64) -> Result<u64, StoreError> {
        self.0.purge(now)
    }
}

/// Runs one of the core's flows to its end on `store`; `gateway` answers the
/// destination look-ups of a recovery (without one, every look-up is
/// `unknown`, which never re-executes).
///
/// # Errors
/// The store's errors, or the flow's (`record-vanished`, `flow-misuse`).
pub fn run_flow<F: Flow>(
    store: &dyn Store,
    flow: F,
    gateway: Option<&dyn Gateway>,
) -> Result<F::Output, StoreError> {
    let mut ask = |key: &str| gateway.map_or(Lookup::Unknown, |g| g.lookup(key));
    drive(flow, &mut Driven(store), &mut ask).map_err(StoreError::from)
}

/// Runs the core's migration flow of `dialect` to its end: `io` performs
/// each operation it names (a statement, or a query answered with the first
/// column of its first row). The flow's own stops (a database at a newer
/// schema: `store-failed`; a migration lock not had in time:
/// `store-unavailable`) are reported as `store`'s errors. Every SQL store
/// migrates through this one loop; what surrounds it (SQLite's and
/// PostgreSQL's transaction, MySQL's connection of its own) is the store's.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn migrate<E: From<StoreError>>(
    dialect: intentkey::claim::sql::Dialect,
    store: &str,
    mut io: impl FnMut(
        intentkey::claim::migrate::MigrationOp,
    ) -> Result<intentkey::claim::migrate::MigrationResult, E>,
) -> Result<(), E> {
    use intentkey::claim::migrate::{MigrationFlow, MigrationStep};
    let stopped = |e: intentkey::Error| {
        let message = format!("{store}: {}", e.message());
        E::from(if e.code() == ErrorCode::StoreUnavailable {
            StoreError::retryable(message)
        } else {
            StoreError::fatal(message)
        })
    };
    let mut flow = MigrationFlow::new(dialect, None).map_err(stopped)?;
    let mut step = flow.start();
    loop {
        let op = match step {
            MigrationStep::Done(_) => return Ok(()),
            MigrationStep::Io(op) => op,
        };
        let result = io(op)?;
        step = flow
            .resume(result)
            .map_err(|e| stopped(intentkey::Error::from(e)))?;
    }
}

/// Opens a store by URL: `memory:`, `sqlite:PATH`, `postgres://…`,
/// `mysql://user[:password]@host:port/database` or
/// `redis://[user:password@]host:port[/db][?prefix=P]` (every key the Redis
/// store writes starts with `P:`; default `intentkey`) or
/// `redis+cluster://host:port[,host:port…][?prefix=P]` (a Redis Cluster;
/// see [`RedisStore::connect`] for `wait=N`) or
/// `dynamodb://HOST:PORT/TABLE` (a local endpoint; `dynamodb://aws/TABLE`
/// for AWS; see [`DynamoStore::connect`]).
///
/// `sqlite:` needs the cargo feature `sqlite` (on by default),
/// `postgres://` the feature `postgres`, `mysql://` the feature `mysql`,
/// `redis://` the feature `redis` and `dynamodb://` the feature `dynamodb`;
/// without its feature a scheme is refused with an error that names the
/// feature.
///
/// # Errors
/// An unknown scheme, a scheme whose feature is off, or the store cannot be
/// opened or migrated.
pub fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    if url == "memory:" {
        Ok(Box::new(MemoryStore::default()))
    } else if let Some(path) = url.strip_prefix("sqlite:") {
        open_sqlite(path)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        open_postgres(url)
    } else if url.starts_with("redis://")
        || url.starts_with("rediss://")
        || url.starts_with("redis+cluster://")
        || url.starts_with("rediss+cluster://")
    {
        open_redis(url)
    } else if url.starts_with("mysql://") {
        open_mysql(url)
    } else if url.starts_with("dynamodb://") {
        open_dynamodb(url)
    } else {
        Err(StoreError::fatal(format!(
            "unknown store URL {:?}: use memory:, sqlite:PATH, postgres://USER@HOST:PORT/DB, mysql://USER@HOST:PORT/DB, redis://HOST:PORT/DB, redis+cluster://HOST:PORT or dynamodb://HOST:PORT/TABLE",
            redact_any(url)
        )))
    }
}

/// A URL without the password between `://` and `@`, whatever its scheme.
fn redact_any(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(feature = "dynamodb")]
fn open_dynamodb(url: &str) -> Result<Box<dyn Store>, StoreError> {
    Ok(Box::new(DynamoStore::connect(url)?))
}

#[cfg(not(feature = "dynamodb"))]
fn open_dynamodb(_url: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(missing_feature("dynamodb://", "dynamodb"))
}

#[cfg(feature = "mysql")]
fn open_mysql(url: &str) -> Result<Box<dyn Store>, StoreError> {
    Ok(Box::new(MysqlStore::connect(url)?))
}

#[cfg(not(feature = "mysql"))]
fn open_mysql(_url: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(missing_feature("mysql://", "mysql"))
}

#[cfg(feature = "sqlite")]
fn open_sqlite(path: &str) -> Result<Box<dyn Store>, StoreError> {
    Ok(Box::new(SqliteStore::open(path)?))
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(_path: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(missing_feature("sqlite:", "sqlite"))
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<Box<dyn Store>, StoreError> {
    Ok(Box::new(PostgresStore::connect(url)?))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(missing_feature("postgres://", "postgres"))
}

#[cfg(feature = "redis")]
fn open_redis(url: &str) -> Result<Box<dyn Store>, StoreError> {
    Ok(Box::new(RedisStore::connect(url)?))
}

#[cfg(not(feature = "redis"))]
fn open_redis(_url: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(missing_feature("redis://", "redis"))
}

/// The error for a URL scheme whose store was compiled out.
#[cfg(not(all(
    feature = "sqlite",
    feature = "postgres",
    feature = "redis",
    feature = "mysql"
)))]
fn missing_feature(scheme: &str, feature: &str) -> StoreError {
    StoreError::fatal(format!(
        "a {scheme} store needs intentkey-store's cargo feature `{feature}`, which this build \
         leaves off: add features = [\"{feature}\"] to the intentkey-store dependency"
    ))
}
