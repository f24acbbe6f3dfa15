//! intentkey's stores and its Guard: where records live and the unique
//! constraint decides.
//!
//! Every store keeps the same record (see `docs/store-schema.md`) and offers
//! the same few conditional operations; [`claim`] combines them with the
//! core's decisions. `insert … on conflict do nothing` picks the winner; the
//! loser reads the row and the core decides what it gets. Never
//! check-then-insert. [`guard::Guard`] builds on them: it runs an effect at
//! most once per intent and replays its response.
//!
//! Stores: [`MemoryStore`]; `SqliteStore` (cargo feature `sqlite`, on by
//! default: the embedded store); `PostgresStore` (cargo feature `postgres`:
//! many app servers share one unique index). [`open`] picks one by URL.
//!
//! ```
//! use intentkey::claim::{ClaimOutcome, Record};
//! use intentkey_store::{claim, open};
//!
//! let store = open("memory:")?;
//! let record = Record::in_flight("k1", "fp", "tenant-1", "pix.send", 1_700_000_000);
//! assert_eq!(claim(store.as_ref(), &record)?, ClaimOutcome::Owned);
//! assert_eq!(claim(store.as_ref(), &record)?, ClaimOutcome::InFlight);
//! # Ok::<(), intentkey_store::StoreError>(())
//! ```

pub mod guard;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::fmt;

use intentkey::claim::{claim_in, ClaimOutcome, ClaimStore, DriveError, Record, Status};

pub use self::memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use self::postgres::PostgresStore;
#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteStore;

/// The repository README's examples, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;

/// A store failure: what went wrong and whether retrying may help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    message: String,
    retryable: bool,
}

impl StoreError {
    /// A failure that will not go away by retrying (bad URL, bad schema, bad data).
    pub fn fatal(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            retryable: false,
        }
    }

    /// A failure that may pass (the server is restarting, the connection dropped).
    pub fn retryable(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            retryable: true,
        }
    }

    /// Whether retrying the operation may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if self.retryable {
            f.write_str(" (retryable: nothing was lost; try again)")?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreError {}

/// The operations every store offers. Each is one atomic statement.
pub trait Store: Send + Sync {
    /// Inserts `record` unless its key exists (`insert … on conflict do
    /// nothing`); `true` when this call inserted it.
    ///
    /// # Errors
    /// When the store cannot be reached or refuses the write.
    fn insert_if_absent(&self, record: &Record) -> Result<bool, StoreError>;

    /// Reads one record.
    ///
    /// # Errors
    /// When the store cannot be reached or holds a malformed row.
    fn get(&self, key: &str) -> Result<Option<Record>, StoreError>;

    /// Overwrites the mutable fields (status, response, expiry, look-ups) of
    /// the stored record with `record`'s, only if the stored one is still
    /// `in_flight`; `true` when it did. Completion and recovery both use it,
    /// so a late completion never overwrites a recovered record.
    ///
    /// # Errors
    /// When the store cannot be reached or refuses the write.
    fn replace_in_flight(&self, record: &Record) -> Result<bool, StoreError>;

    /// Records with `status` (all when `None`), oldest first, at most `limit`.
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
}

/// Claims `record.key`: inserts `record` (`in_flight`) unless the key exists;
/// otherwise the core decides from the stored record.
///
/// # Errors
/// The store's errors. A claim that errs owns nothing: do not run the effect.
pub fn claim(store: &dyn Store, record: &Record) -> Result<ClaimOutcome, StoreError> {
    claim_in(&mut Driven(store), record).map_err(driven)
}

/// Lets the core drive a [`Store`] (`intentkey::claim::ClaimStore`).
pub struct Driven<'s>(pub &'s dyn Store);

impl ClaimStore for Driven<'_> {
    type Error = StoreError;
    fn insert_if_absent(&mut self, record: &Record) -> Result<bool, StoreError> {
        self.0.insert_if_absent(record)
    }
    fn get(&mut self, key: &str) -> Result<Option<Record>, StoreError> {
        self.0.get(key)
    }
    fn replace_in_flight(&mut self, record: &Record) -> Result<bool, StoreError> {
        self.0.replace_in_flight(record)
    }
}

/// A drive failure as a store error.
pub fn driven(e: DriveError<StoreError>) -> StoreError {
    match e {
        DriveError::Store(e) => e,
        DriveError::Vanished => {
            StoreError::retryable("the record was purged three times during its claim")
        }
    }
}

/// Opens a store by URL: `memory:`, `sqlite:PATH` or `postgres://…`.
///
/// `sqlite:` needs the cargo feature `sqlite` (on by default) and
/// `postgres://` the feature `postgres`; without its feature a scheme is
/// refused with an error that names the feature.
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
    } else {
        Err(StoreError::fatal(format!(
            "unknown store URL {url:?}: use memory:, sqlite:PATH or postgres://USER@HOST:PORT/DB"
        )))
    }
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

/// The error for a URL scheme whose store was compiled out.
#[cfg(not(all(feature = "sqlite", feature = "postgres")))]
fn missing_feature(scheme: &str, feature: &str) -> StoreError {
    StoreError::fatal(format!(
        "a {scheme} store needs intentkey-store's cargo feature `{feature}`, which this build \
         leaves off: add features = [\"{feature}\"] to the intentkey-store dependency"
    ))
}

/// Builds a record from stored columns (shared by the SQL stores).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_from_columns(
    key: String,
    fingerprint: String,
    tenant_id: String,
    action_type: String,
    status: &str,
    response: (Option<i64>, Option<String>, Option<String>),
    created_at: i64,
    expires_at: Option<i64>,
    lookups: i64,
    next_lookup_at: Option<i64>,
) -> Result<Record, StoreError> {
    let status = Status::parse(status).ok_or_else(|| {
        StoreError::fatal(format!("record {key} has an unknown status {status:?}"))
    })?;
    let response = match response {
        (Some(code), content_type, body) => Some(intentkey::claim::Response {
            status: u16::try_from(code).map_err(|_| {
                StoreError::fatal(format!("record {key} has response status {code}"))
            })?,
            content_type: content_type.unwrap_or_default(),
            body: body.unwrap_or_default(),
        }),
        (None, ..) => None,
    };
    Ok(Record {
        key,
        fingerprint,
        tenant_id,
        action_type,
        status,
        response,
        created_at,
        expires_at,
        lookups: u32::try_from(lookups).unwrap_or(u32::MAX),
        next_lookup_at,
    })
}

/// The version-1 schema, in the SQL both SQLite and PostgreSQL accept.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS intentkey_records (
    key                   TEXT PRIMARY KEY,
    fingerprint           TEXT NOT NULL,
    tenant_id             TEXT NOT NULL,
    action_type           TEXT NOT NULL,
    status                TEXT NOT NULL CHECK (status IN ('in_flight', 'done', 'needs_reconciliation')),
    response_status       INTEGER,
    response_content_type TEXT,
    response_body         TEXT,
    created_at            BIGINT NOT NULL,
    expires_at            BIGINT,
    lookups               INTEGER NOT NULL DEFAULT 0,
    next_lookup_at        BIGINT
);
CREATE INDEX IF NOT EXISTS intentkey_records_expiry ON intentkey_records (expires_at);
";

/// The columns in the order the SQL stores select them.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const COLUMNS: &str =
    "key, fingerprint, tenant_id, action_type, status, response_status, \
     response_content_type, response_body, created_at, expires_at, lookups, next_lookup_at";
