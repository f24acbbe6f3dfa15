//! SQLite: the embedded default (rusqlite, bundled SQLite, durable settings).
//! An executor of the core's statements (`intentkey::claim::sql`): it
//! prepares them, binds the values the core makes and hands rows back to it.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use intentkey::claim::migrate::{MigrationOp, MigrationResult};
use intentkey::claim::sql::{self, Dialect, Kind, Statements, Value};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use rusqlite::{Connection, OptionalExtension};

use super::{Store, StoreError};

/// A SQLite file shared by any number of processes: WAL journal,
/// `synchronous = FULL` (a completed record survives power loss), and a busy
/// timeout so concurrent writers wait instead of failing. A fast completion
/// (`Rules::fast_completion`) runs with `synchronous = NORMAL` for that one
/// statement on the same connection: its commit does not wait for the disk
/// (one connection, so no page cache is invalidated between two).
pub struct SqliteStore {
    conn: Mutex<Connection>,
    sql: Statements,
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

/// A core parameter as rusqlite binds it.
fn bind(value: &Value) -> rusqlite::types::ToSqlOutput<'_> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    ToSqlOutput::Borrowed(match value {
        Value::Null => ValueRef::Null,
        Value::Integer(n) => ValueRef::Integer(*n),
        Value::Text(s) => ValueRef::Text(s.as_bytes()),
        Value::Bytes(b) => ValueRef::Blob(b),
    })
}

/// A row's columns as the core's values (for `sql::decode_row`).
fn row_values(row: &rusqlite::Row<'_>) -> rusqlite::Result<Vec<Value>> {
    use rusqlite::types::ValueRef;
    (0..row.as_ref().column_count())
        .map(|i| {
            Ok(match row.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => Value::Integer(n),
                ValueRef::Real(f) => Value::Text(f.to_string()),
                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::Bytes(b.to_vec()),
            })
        })
        .collect()
}

fn decoded(values: Vec<Value>) -> Result<Record, StoreError> {
    sql::decode_row(&values).map_err(|e| StoreError::fatal(format!("sqlite: {}", e.message())))
}

/// Runs a statement of the core's with its parameters: the rows changed.
fn execute(conn: &Connection, text: &str, params: &[Value]) -> Result<usize, StoreError> {
    conn.prepare_cached(text)
        .and_then(|mut st| st.execute(rusqlite::params_from_iter(params.iter().map(bind))))
        .map_err(err)
}

/// Runs a query of the core's with its parameters: the rows as records.
fn query(conn: &Connection, text: &str, params: &[Value]) -> Result<Vec<Record>, StoreError> {
    let mut st = conn.prepare_cached(text).map_err(err)?;
    let rows = st
        .query_map(
            rusqlite::params_from_iter(params.iter().map(bind)),
            row_values,
        )
        .map_err(err)?;
    rows.map(|row| row.map_err(err).and_then(decoded)).collect()
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

fn complete_on(conn: &Connection, text: &str, c: &Completion) -> Result<bool, StoreError> {
    Ok(execute(conn, text, &sql::complete_params(c))? == 1)
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it to the
    /// latest version of the one schema.
    ///
    /// # Errors
    /// When the file cannot be opened, or holds a newer schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let conn = connect(path.as_ref(), "FULL")?;
        let sql = sql::statements(Dialect::Sqlite, None)
            .map_err(|e| StoreError::fatal(format!("sqlite: {}", e.message())))?;
        let store = SqliteStore {
            conn: Mutex::new(conn),
            sql,
        };
        store.migrate()?;
        Ok(store)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs the core's migration flow in one `BEGIN IMMEDIATE` transaction
    /// (one writer at a time): it reads `PRAGMA user_version` and names each
    /// missing migration's statements and the new version.
    fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err)?;
        crate::migrate(Dialect::Sqlite, "sqlite", |op| -> Result<_, StoreError> {
            Ok(match op {
                MigrationOp::Execute(call) => {
                    execute(&tx, &call.text, &call.params)?;
                    MigrationResult::Executed
                }
                MigrationOp::Query(call) => {
                    let value: Option<i64> = tx
                        .query_row(&call.text, [], |r| r.get(0))
                        .optional()
                        .map_err(err)?
                        .flatten();
                    MigrationResult::Queried(value)
                }
            })
        })?;
        tx.commit().map_err(err)
    }
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn insert(&self, r: &Record) -> Result<bool, StoreError> {
        let text = self.sql.text(Kind::Insert);
        Ok(execute(&self.conn(), text, &sql::insert_params(r))? == 1)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let text = self.sql.text(Kind::Get);
        Ok(query(&self.conn(), text, &sql::get_params(key))?
            .into_iter()
            .next())
    }

    fn complete(&self, c: &Completion) -> Result<bool, StoreError> {
        let conn = self.conn();
        if !c.fast {
            return complete_on(&conn, self.sql.text(Kind::Complete), c);
        }
        // `synchronous` is the connection's and is read at commit: NORMAL for
        // this one autocommit statement, FULL again whatever it answered.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        let completed = complete_on(&conn, self.sql.text(Kind::Complete), c);
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        completed
    }

    fn replace(&self, r: &Replacement) -> Result<bool, StoreError> {
        let text = self.sql.text(Kind::Replace);
        Ok(execute(&self.conn(), text, &sql::replace_params(r))? == 1)
    }

    fn release(&self, r: &Release) -> Result<bool, StoreError> {
        let text = self.sql.text(Kind::Release);
        Ok(execute(&self.conn(), text, &sql::release_params(r))? == 1)
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let text = self.sql.text(Kind::List);
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        query(&self.conn(), text, &sql::list_params(status, limit))
    }

    fn count(&self, status: Option<Status>) -> Result<Option<Vec<sql::StatusCount>>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached(self.sql.text(Kind::Count))
            .map_err(err)?;
        let params = sql::count_params(status);
        let rows = st
            .query_map(
                rusqlite::params_from_iter(params.iter().map(bind)),
                row_values,
            )
            .map_err(err)?;
        rows.map(|row| {
            row.map_err(err).and_then(|values| {
                sql::decode_count(&values)
                    .map_err(|e| StoreError::fatal(format!("sqlite: {}", e.message())))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        let text = self.sql.text(Kind::Purge);
        Ok(execute(&self.conn(), text, &sql::purge_params(now))? as u64)
    }
}
