//! SQLite: the embedded default (rusqlite, bundled SQLite, durable settings).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use intentkey::claim::schema::{headers_to_column, migrations, SCHEMA_VERSION};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use rusqlite::{params, Connection, OptionalExtension};

use super::columns::{Row, COLUMNS};
use super::{Store, StoreError};

/// A SQLite file shared by any number of processes: WAL journal,
/// `synchronous = FULL` (a completed record survives power loss), and a busy
/// timeout so concurrent writers wait instead of failing. A fast completion
/// (`Rules::fast_completion`) runs with `synchronous = NORMAL` for that one
/// statement on the same connection: its commit does not wait for the disk
/// (one connection, so no page cache is invalidated between two).
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

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        key: row.get(0)?,
        fingerprint: row.get(1)?,
        tenant_id: row.get(2)?,
        action_type: row.get(3)?,
        status: row.get(4)?,
        owner_token: row.get(5)?,
        response_status: row.get(6)?,
        response_content_type: row.get(7)?,
        response_headers: row.get(8)?,
        response_body: row.get(9)?,
        response_body_bytes: row.get(10)?,
        created_at: row.get(11)?,
        expires_at: row.get(12)?,
        lookups: row.get(13)?,
        next_lookup_at: row.get(14)?,
    })
}

fn connect(path: &Path, synchronous: &str) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(err)?;
    conn.busy_timeout(Duration::from_secs(30)).map_err(err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(err)?;
    conn.pragma_update(None, "synchronous", synchronous)
        .map_err(err)?;
    Ok(conn)
}

const COMPLETE_SQL: &str = "UPDATE intentkey_records SET status = 'done', response_status = ?3, \
     response_content_type = ?4, response_headers = ?5, response_body = NULL, response_body_bytes = ?6, expires_at = ?7, \
     next_lookup_at = NULL WHERE key = ?1 AND status = 'in_flight' AND owner_token = ?2";

fn complete_on(conn: &Connection, c: &Completion) -> Result<bool, StoreError> {
    let changed = conn
        .prepare_cached(COMPLETE_SQL)
        .and_then(|mut st| {
            st.execute(params![
                c.key,
                c.owner_token,
                i64::from(c.response.status),
                c.response.content_type,
                headers_to_column(&c.response.headers),
                c.response.body,
                c.expires_at,
            ])
        })
        .map_err(err)?;
    Ok(changed == 1)
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it to the
    /// latest version of the one schema.
    ///
    /// # Errors
    /// When the file cannot be opened, or holds a newer schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let conn = connect(path.as_ref(), "FULL")?;
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

    /// Applies every migration above `PRAGMA user_version`, in one
    /// `BEGIN IMMEDIATE` transaction (one writer at a time).
    fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err)?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(err)?;
        if version > i64::from(SCHEMA_VERSION) {
            return Err(StoreError::fatal(format!(
                "sqlite: the database has schema version {version}; this build knows {SCHEMA_VERSION}: upgrade intentkey"
            )));
        }
        for migration in migrations() {
            if i64::from(migration.version) <= version {
                continue;
            }
            for statement in &migration.statements {
                tx.execute_batch(statement).map_err(err)?;
            }
        }
        tx.pragma_update(None, "user_version", i64::from(SCHEMA_VERSION))
            .map_err(err)?;
        tx.commit().map_err(err)
    }
}

impl Store for SqliteStore {
    fn insert(&self, r: &Record) -> Result<bool, StoreError> {
        let inserted = self
            .conn()
            .prepare_cached(
                "INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0) ON CONFLICT (key) DO NOTHING",
            )
            .and_then(|mut st| {
                st.execute(params![r.key, r.fingerprint, r.tenant_id, r.action_type, r.status.as_str(), r.owner_token, r.created_at])
            })
            .map_err(err)?;
        Ok(inserted == 1)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM intentkey_records WHERE key = ?1"
            ))
            .and_then(|mut st| st.query_row(params![key], read_row).optional())
            .map_err(err)?
            .map(Row::into_record)
            .transpose()
    }

    fn complete(&self, c: &Completion) -> Result<bool, StoreError> {
        let conn = self.conn();
        if !c.fast {
            return complete_on(&conn, c);
        }
        // `synchronous` is the connection's and is read at commit: NORMAL for
        // this one autocommit statement, FULL again whatever it answered.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        let completed = complete_on(&conn, c);
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        completed
    }

    fn replace(&self, r: &Replacement) -> Result<bool, StoreError> {
        let next = &r.record;
        let response = next.response.as_ref();
        let changed = self
            .conn()
            .prepare_cached(
                "UPDATE intentkey_records SET status = ?4, owner_token = ?5, response_status = ?6, \
                 response_content_type = ?7, response_headers = ?8, response_body = NULL, response_body_bytes = ?9, created_at = ?10, \
                 expires_at = ?11, lookups = ?12, next_lookup_at = ?13 \
                 WHERE key = ?1 AND status = 'in_flight' AND owner_token = ?2 AND lookups = ?3",
            )
            .and_then(|mut st| {
                st.execute(params![
                    next.key,
                    r.expected_token,
                    i64::from(r.expected_lookups),
                    next.status.as_str(),
                    next.owner_token,
                    response.map(|x| i64::from(x.status)),
                    response.map(|x| x.content_type.as_str()),
                    response.and_then(|x| headers_to_column(&x.headers)),
                    response.map(|x| x.body.as_slice()),
                    next.created_at,
                    next.expires_at,
                    i64::from(next.lookups),
                    next.next_lookup_at,
                ])
            })
            .map_err(err)?;
        Ok(changed == 1)
    }

    fn release(&self, r: &Release) -> Result<bool, StoreError> {
        let deleted = self
            .conn()
            .prepare_cached(
                "DELETE FROM intentkey_records WHERE key = ?1 AND status = 'in_flight' AND owner_token = ?2",
            )
            .and_then(|mut st| st.execute(params![r.key, r.owner_token]))
            .map_err(err)?;
        Ok(deleted == 1)
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
                read_row,
            )
            .map_err(err)?;
        rows.map(|row| row.map_err(err).and_then(Row::into_record))
            .collect()
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
