//! MySQL and MariaDB: many app servers share one unique index. An executor
//! of the core's statements ([`Dialect::Mysql`]: `schema/mysql.sql`).
//!
//! The claim is a plain `INSERT`; a duplicate key (error 1062, the core's
//! [`Dialect::duplicate_key_error`]) means "not inserted". Every later write
//! compares the owner token in its `WHERE` clause. Connections are made with
//! `CLIENT_FOUND_ROWS`, so an `UPDATE` counts the rows it matched.

use std::time::Duration;

use intentkey::claim::ddl::MYSQL_KEY_CHARS;
use intentkey::claim::migrate::{MigrationOp, MigrationResult};
use intentkey::claim::sql::{self, Dialect, ErrorClass, Kind, Statements, Value};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use mysql::consts::{CapabilityFlags, ColumnType};
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts, Row};

use super::{redact, Store, StoreError};

/// The binary character set: a column of bytes, not text.
const BINARY_CHARSET: u16 = 63;

/// How long a connection attempt or one statement may take before the
/// operation fails (retryably).
const TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections one store keeps open.
const MAX_CONNECTIONS: usize = 16;

/// A server error as the store reports it, by the core's class of its code
/// ([`Dialect::error_class`]): retryable when the connection was lost or a
/// retry may pass (nothing was written), else fatal.
pub(crate) fn server_error(code: u16, message: &str) -> StoreError {
    let text = format!("mysql: {message} ({code})");
    match Dialect::Mysql.error_class(code) {
        ErrorClass::ConnectionLost | ErrorClass::Retryable => StoreError::retryable(text),
        ErrorClass::DuplicateKey | ErrorClass::Failed => StoreError::fatal(text),
    }
}

/// The key-length check of the claim: MySQL's key column holds 255 characters.
pub(crate) fn check_key(key: &str) -> Result<(), StoreError> {
    let chars = key.chars().count();
    if chars > MYSQL_KEY_CHARS {
        return Err(StoreError::fatal(format!(
            "mysql: key is {chars} characters; a MySQL store holds keys of at most {MYSQL_KEY_CHARS} (intentkey's own keys and storage keys are 64 at most)"
        )));
    }
    Ok(())
}

/// A MySQL or MariaDB store: a pool of connections to the database the URL
/// names (`mysql://user:password@host:port/database`). Opening it applies
/// every missing migration of the one schema, translated for MySQL by the
/// core, under a named lock.
pub struct MysqlStore {
    pool: Pool,
    statements: Statements,
    url: String,
}

/// Whether `e` leaves the connection unusable: it is closed, not pooled.
fn connection_lost(e: &mysql::Error) -> bool {
    match e {
        mysql::Error::MySqlError(m) => {
            Dialect::Mysql.error_class(m.code) == ErrorClass::ConnectionLost
        }
        e => e.is_connectivity_error(),
    }
}

fn error(url: &str, e: &mysql::Error) -> StoreError {
    match e {
        mysql::Error::MySqlError(m) => server_error(m.code, &m.message),
        e if e.is_connectivity_error() => {
            StoreError::retryable(format!("mysql: {} unreachable: {e}", redact(url)))
        }
        e => StoreError::fatal(format!("mysql: {e}")),
    }
}

pub(crate) fn param(value: Value) -> mysql::Value {
    match value {
        Value::Null => mysql::Value::NULL,
        Value::Integer(n) => mysql::Value::Int(n),
        Value::Text(s) => mysql::Value::Bytes(s.into_bytes()),
        Value::Bytes(b) => mysql::Value::Bytes(b),
    }
}

/// A statement's values in its placeholders' order.
pub(crate) fn params(statement: &sql::Statement, values: &[Value]) -> Vec<mysql::Value> {
    sql::bind(statement, values)
        .into_iter()
        .map(param)
        .collect()
}

fn is_bytes_column(column: &mysql::Column) -> bool {
    column.character_set() == BINARY_CHARSET
        && matches!(
            column.column_type(),
            ColumnType::MYSQL_TYPE_BLOB
                | ColumnType::MYSQL_TYPE_LONG_BLOB
                | ColumnType::MYSQL_TYPE_MEDIUM_BLOB
                | ColumnType::MYSQL_TYPE_TINY_BLOB
                | ColumnType::MYSQL_TYPE_VAR_STRING
                | ColumnType::MYSQL_TYPE_STRING
                | ColumnType::MYSQL_TYPE_VARCHAR
        )
}

/// A row's values as the core reads them: text columns as text, binary
/// columns as bytes.
fn row_values(row: &Row) -> Result<Vec<Value>, StoreError> {
    let columns = row.columns_ref();
    (0..row.len())
        .map(|i| {
            let column = columns
                .get(i)
                .ok_or_else(|| StoreError::fatal("mysql: a row without its columns"))?;
            Ok(match row.as_ref(i) {
                None | Some(mysql::Value::NULL) => Value::Null,
                Some(mysql::Value::Int(n)) => Value::Integer(*n),
                Some(mysql::Value::UInt(n)) => Value::Integer(i64::try_from(*n).map_err(|_| {
                    StoreError::fatal(format!(
                        "mysql: column {} is out of range",
                        column.name_str()
                    ))
                })?),
                Some(mysql::Value::Bytes(b)) if is_bytes_column(column) => Value::Bytes(b.clone()),
                Some(mysql::Value::Bytes(b)) => {
                    Value::Text(String::from_utf8(b.clone()).map_err(|_| {
                        StoreError::fatal(format!(
                            "mysql: column {} is not UTF-8 text",
                            column.name_str()
                        ))
                    })?)
                }
                Some(other) => {
                    return Err(StoreError::fatal(format!(
                        "mysql: column {} holds {other:?}, which intentkey never writes",
                        column.name_str()
                    )))
                }
            })
        })
        .collect()
}

pub(crate) fn record(row: &Row) -> Result<Record, StoreError> {
    sql::decode_row(&row_values(row)?)
        .map_err(|e| StoreError::fatal(format!("mysql: {}", e.message())))
}

impl MysqlStore {
    /// Connects and applies every missing migration.
    ///
    /// # Errors
    /// A malformed URL (`store-failed`), a server that cannot be reached
    /// (`store-unavailable`), a migration lock not had within 30 s
    /// (`store-unavailable`), or a database at a newer schema.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let opts = Opts::from_url(url)
            .map_err(|e| StoreError::fatal(format!("mysql: {}: {e}", redact(url))))?;
        let constraints = PoolConstraints::new(0, MAX_CONNECTIONS)
            .ok_or_else(|| StoreError::fatal("mysql: pool constraints"))?;
        let opts = OptsBuilder::from_opts(opts)
            .additional_capabilities(CapabilityFlags::CLIENT_FOUND_ROWS)
            .tcp_connect_timeout(Some(TIMEOUT))
            .read_timeout(Some(TIMEOUT))
            .write_timeout(Some(TIMEOUT))
            // Each operation is one autocommit statement that leaves no
            // session state, so a connection goes back to the pool as it is:
            // no COM_RESET_CONNECTION (a round trip that also drops the
            // prepared statements) and no ping before each use. A connection
            // that failed is closed instead of going back (`MysqlStore::run`).
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(constraints)
                    .with_reset_connection(false)
                    .with_check_health(false),
            );
        let statements = sql::statements(Dialect::Mysql, None)
            .map_err(|e| StoreError::fatal(format!("mysql: {}", e.message())))?;
        // Migrations on a connection of their own, closed after: the named
        // lock is the session's, so a migration that fails gives it back too.
        let mut conn = Conn::new(opts.clone()).map_err(|e| error(url, &e))?;
        migrate(&mut conn).map_err(|e| match e {
            Failure::Driver(e) => error(url, &e),
            Failure::Store(e) => e,
        })?;
        drop(conn);
        let pool = Pool::new(opts).map_err(|e| error(url, &e))?;
        Ok(MysqlStore {
            pool,
            statements,
            url: url.to_owned(),
        })
    }

    fn statement(&self, kind: Kind) -> Result<&sql::Statement, StoreError> {
        self.statements
            .statement(kind)
            .map_err(|e| StoreError::fatal(format!("mysql: {}", e.message())))
    }

    /// Runs `f` on a pooled connection (the statement is prepared once per
    /// connection, by the driver's statement cache). A connection that
    /// failed is closed, not given back to the pool.
    fn run<T>(
        &self,
        f: impl FnOnce(&mut mysql::PooledConn) -> Result<T, mysql::Error>,
    ) -> Result<T, mysql::Error> {
        let mut conn = self.pool.get_conn()?;
        let result = f(&mut conn);
        if let Err(e) = &result {
            if connection_lost(e) {
                drop(conn.unwrap());
            }
        }
        result
    }

    /// Runs the statement `kind`: the rows it changed (matched).
    fn execute(&self, kind: Kind, values: &[Value]) -> Result<u64, StoreError> {
        let st = self.statement(kind)?;
        self.run(|conn| {
            conn.exec_drop(&st.text, params(st, values))?;
            Ok(conn.affected_rows())
        })
        .map_err(|e| error(&self.url, &e))
    }

    /// Runs the query `kind`: its rows.
    fn query(&self, kind: Kind, values: &[Value]) -> Result<Vec<Row>, StoreError> {
        let st = self.statement(kind)?;
        self.run(|conn| conn.exec(&st.text, params(st, values)))
            .map_err(|e| error(&self.url, &e))
    }
}

enum Failure {
    Driver(mysql::Error),
    Store(StoreError),
}

impl From<mysql::Error> for Failure {
    fn from(e: mysql::Error) -> Self {
        Failure::Driver(e)
    }
}

/// The core's migration flow, with autocommit (MySQL commits DDL by itself).
fn migrate(conn: &mut Conn) -> Result<(), Failure> {
    crate::migrate(Dialect::Mysql, "mysql", |op| -> Result<_, Failure> {
        Ok(match op {
            MigrationOp::Execute(call) if call.params.is_empty() => {
                conn.query_drop(&call.text)?;
                MigrationResult::Executed
            }
            MigrationOp::Execute(call) => {
                let values: Vec<mysql::Value> = call.params.into_iter().map(param).collect();
                conn.exec_drop(&call.text, values)?;
                MigrationResult::Executed
            }
            MigrationOp::Query(call) => {
                let values: Vec<mysql::Value> = call.params.into_iter().map(param).collect();
                let row: Option<Row> = conn.exec_first(&call.text, values)?;
                let value = match row {
                    Some(row) => row_values(&row).map_err(Failure::Store)?.into_iter().next(),
                    None => None,
                };
                MigrationResult::Queried(match value {
                    Some(Value::Integer(n)) => Some(n),
                    _ => None,
                })
            }
        })
    })
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

impl Store for MysqlStore {
    fn kind(&self) -> &'static str {
        "mysql"
    }

    fn insert(&self, r: &Record) -> Result<bool, StoreError> {
        check_key(&r.key)?;
        let st = self.statement(Kind::Insert)?;
        let inserted = self.run(|conn| {
            conn.exec_drop(&st.text, params(st, &sql::insert_params(r)))?;
            Ok(conn.affected_rows())
        });
        match inserted {
            Ok(n) => Ok(n == 1),
            Err(mysql::Error::MySqlError(e))
                if Dialect::Mysql.error_class(e.code) == ErrorClass::DuplicateKey =>
            {
                Ok(false)
            }
            Err(e) => Err(error(&self.url, &e)),
        }
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.query(Kind::Get, &sql::get_params(key))?
            .first()
            .map(record)
            .transpose()
    }

    fn complete(&self, x: &Completion) -> Result<bool, StoreError> {
        self.execute(Kind::Complete, &sql::complete_params(x))
            .map(|n| n == 1)
    }

    fn replace(&self, r: &Replacement) -> Result<bool, StoreError> {
        self.execute(Kind::Replace, &sql::replace_params(r))
            .map(|n| n == 1)
    }

    fn release(&self, r: &Release) -> Result<bool, StoreError> {
        self.execute(Kind::Release, &sql::release_params(r))
            .map(|n| n == 1)
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        self.query(Kind::List, &sql::list_params(status, limit))?
            .iter()
            .map(record)
            .collect()
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.execute(Kind::Purge, &sql::purge_params(now))
    }

    fn count(&self, status: Option<Status>) -> Result<Option<Vec<sql::StatusCount>>, StoreError> {
        self.query(Kind::Count, &sql::count_params(status))?
            .iter()
            .map(|row| {
                sql::decode_count(&row_values(row)?)
                    .map_err(|e| StoreError::fatal(format!("mysql: {}", e.message())))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}
