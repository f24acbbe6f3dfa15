//! SQLite: the embedded default (rusqlite, bundled SQLite, durable settings).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use intentkey::claim::{Record, Status};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{record_from_columns, Store, StoreError, COLUMNS, SCHEMA_V1};

/// The schema version this build writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

/// A SQLite file shared by any number of processes: WAL journal,
/// `synchronous = FULL` (a completed record survives power loss), and a busy
/// timeout so concurrent writers wait instead of failing.
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

fn err(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            StoreError::retryable(format!("sqlite: {e}"))
        }
        _ => StoreError::fatal(format!("sqlite: {e}")),
    }
}

fn row_to_record(row: &Row<'_>) -> rusqlite::Result<Result<Record, StoreError>> {
    Ok(record_from_columns(
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        &row.get::<_, String>(4)?,
        (row.get(5)?, row.get(6)?, row.get(7)?),
        row.get(8)?,
        row.get(9)?,
        row.get(10)?,
        row.get(11)?,
    ))
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it.
    ///
    /// # Errors
    /// When the file cannot be opened, or holds a newer schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let conn = Connection::open(path.as_ref()).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        let store = SqliteStore {
            conn: Mutex::new(conn),
        };
        store.migrate()?;
        Ok(store)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err)?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(err)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::fatal(format!(
                "sqlite: the database has schema version {version}; this build knows {SCHEMA_VERSION}: upgrade intentkey"
            )));
        }
        if version < 1 {
            tx.execute_batch(SCHEMA_V1).map_err(err)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(err)?;
        }
        tx.commit().map_err(err)
    }
}

impl Store for SqliteStore {
    fn insert_if_absent(&self, r: &Record) -> Result<bool, StoreError> {
        let inserted = self
            .conn()
            .prepare_cached(
                "INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, created_at, lookups) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0) ON CONFLICT (key) DO NOTHING",
            )
            .and_then(|mut st| {
                st.execute(params![r.key, r.fingerprint, r.tenant_id, r.action_type, r.status.as_str(), r.created_at])
            })
            .map_err(err)?;
        Ok(inserted == 1)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM intentkey_records WHERE key = ?1"
            ))
            .and_then(|mut st| st.query_row(params![key], row_to_record).optional())
            .map_err(err)?
            .transpose()
    }

    fn replace_in_flight(&self, r: &Record) -> Result<bool, StoreError> {
        let response = r.response.as_ref();
        let changed = self
            .conn()
            .prepare_cached(
                "UPDATE intentkey_records SET status = ?2, response_status = ?3, response_content_type = ?4, \
                 response_body = ?5, expires_at = ?6, lookups = ?7, next_lookup_at = ?8 \
                 WHERE key = ?1 AND status = 'in_flight'",
            )
            .and_then(|mut st| {
                st.execute(params![
                    r.key,
                    r.status.as_str(),
                    response.map(|x| i64::from(x.status)),
                    response.map(|x| x.content_type.as_str()),
                    response.map(|x| x.body.as_str()),
                    r.expires_at,
                    i64::from(r.lookups),
                    r.next_lookup_at,
                ])
            })
            .map_err(err)?;
        Ok(changed == 1)
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM intentkey_records WHERE (?1 IS NULL OR status = ?1) ORDER BY created_at, key LIMIT ?2"
            ))
            .map_err(err)?;
        let rows = st
            .query_map(
                params![
                    status.map(Status::as_str),
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                row_to_record,
            )
            .map_err(err)?;
        rows.map(|row| row.map_err(err).and_then(|r| r)).collect()
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        let n = self
            .conn()
            .execute(
                "DELETE FROM intentkey_records WHERE status = 'done' AND expires_at <= ?1",
                params![now],
            )
            .map_err(err)?;
        Ok(n as u64)
    }
}
