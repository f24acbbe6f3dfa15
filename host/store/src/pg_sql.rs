//! The PostgreSQL executor's glue: the core's statements
//! (`intentkey::claim::sql`, [`Dialect::Postgres`]: `schema/postgres.sql`),
//! bound and read through `tokio-postgres` types (the `postgres` crate
//! re-exports them). Shared by the synchronous [`crate::PostgresStore`] and
//! the asynchronous store of `intentkey-axum`; the npm package's `pgStore`
//! prepares the same statements through the component, so a Rust service,
//! the CLI and a Node service write the same rows the same way.
//!
//! Every operation is one statement; the fenced ones compare the owner token
//! in their `WHERE` clause, so the database decides, never a read before a
//! write.

use std::sync::LazyLock;

use intentkey::claim::sql::{self, Claimed, Dialect, Kind, Statements, Value};
use intentkey::claim::Record;
use postgres::types::{ToSql, Type};

use crate::StoreError;

static STATEMENTS: LazyLock<Result<Statements, intentkey::Error>> =
    LazyLock::new(|| sql::statements(Dialect::Postgres, None));

/// The core's PostgreSQL statements (on the table `search_path` finds).
///
/// # Errors
/// `store-failed` if the core's statement file is malformed (its tests
/// parse it: never in a release).
pub fn statements() -> Result<&'static Statements, StoreError> {
    STATEMENTS.as_ref().map_err(core_error)
}

/// The text of the core's statement `kind`.
///
/// # Errors
/// As [`statements`], or when the dialect has no such statement.
pub fn text(kind: Kind) -> Result<&'static str, StoreError> {
    statements()?
        .statement(kind)
        .map(|s| s.text.as_str())
        .map_err(|e| core_error(&e))
}

fn core_error(e: &intentkey::Error) -> StoreError {
    StoreError::fatal(format!("postgres: {}", e.message()))
}

/// One bound parameter.
pub type Param = Box<dyn ToSql + Sync + Send>;

/// The core's parameter values as `tokio-postgres` parameters, at the widths
/// the prepared statement asks for (`types`: `Statement::params()`): an
/// integer binds as `int2`, `int4` or `int8`.
///
/// # Errors
/// `store-failed` when an integer does not fit its parameter.
pub fn bind(values: Vec<Value>, types: &[Type]) -> Result<Vec<Param>, StoreError> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| -> Result<Param, StoreError> {
            let ty = types.get(i).unwrap_or(&Type::INT8);
            let too_big = |_| {
                StoreError::fatal(format!(
                    "postgres: parameter ${} is out of range for {ty}",
                    i + 1
                ))
            };
            Ok(match value {
                Value::Null => null(ty),
                Value::Integer(n) if *ty == Type::INT2 => {
                    Box::new(i16::try_from(n).map_err(too_big)?)
                }
                Value::Integer(n) if *ty == Type::INT4 => {
                    Box::new(i32::try_from(n).map_err(too_big)?)
                }
                Value::Integer(n) => Box::new(n),
                Value::Text(s) => Box::new(s),
                Value::Bytes(b) => Box::new(b),
            })
        })
        .collect()
}

/// NULL as a parameter of type `ty`.
fn null(ty: &Type) -> Param {
    match *ty {
        Type::INT2 => Box::new(Option::<i16>::None),
        Type::INT4 => Box::new(Option::<i32>::None),
        Type::INT8 => Box::new(Option::<i64>::None),
        Type::BOOL => Box::new(Option::<bool>::None),
        Type::BYTEA => Box::new(Option::<Vec<u8>>::None),
        _ => Box::new(Option::<String>::None),
    }
}

/// The parameters as the driver takes them.
pub fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// A row's columns as the core's values, by each column's type.
///
/// # Errors
/// `store-failed` for a column of a type no statement of the core returns.
pub fn row_values(row: &postgres::Row) -> Result<Vec<Value>, StoreError> {
    let read = |i: usize, ty: &Type| -> Result<Value, postgres::Error> {
        Ok(match *ty {
            Type::INT2 => row
                .try_get::<_, Option<i16>>(i)?
                .map_or(Value::Null, |n| Value::Integer(n.into())),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(i)?
                .map_or(Value::Null, |n| Value::Integer(n.into())),
            Type::INT8 => row
                .try_get::<_, Option<i64>>(i)?
                .map_or(Value::Null, Value::Integer),
            Type::BOOL => row
                .try_get::<_, Option<bool>>(i)?
                .map_or(Value::Null, |b| Value::Integer(b.into())),
            Type::BYTEA => row
                .try_get::<_, Option<Vec<u8>>>(i)?
                .map_or(Value::Null, Value::Bytes),
            _ => row
                .try_get::<_, Option<String>>(i)?
                .map_or(Value::Null, Value::Text),
        })
    };
    row.columns()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            read(i, c.type_())
                .map_err(|e| StoreError::fatal(format!("postgres: column {}: {e}", c.name())))
        })
        .collect()
}

/// A row of the `get` or `list` statement as a record (the core decodes it).
///
/// # Errors
/// `store-failed` for a row this build cannot read.
pub fn read_row(row: &postgres::Row) -> Result<Record, StoreError> {
    sql::decode_row(&row_values(row)?).map_err(|e| core_error(&e))
}

/// What the `claim` statement answered.
///
/// # Errors
/// `store-failed` for a row this build cannot read.
pub fn read_claim(row: &postgres::Row) -> Result<Claimed, StoreError> {
    sql::decode_claim(&row_values(row)?).map_err(|e| core_error(&e))
}

/// A driver error as a [`StoreError`]: a dropped connection, a server that
/// is starting or shutting down, or too many clients are retryable
/// (`store-unavailable`); anything else is `store-failed`.
pub fn error(e: &postgres::Error) -> StoreError {
    let closed = e.is_closed()
        || e.code().is_some_and(|c| {
            c.code().starts_with("08") || c.code().starts_with("57P") || c.code() == "53300"
        })
        || e.as_db_error().is_none();
    let message = match e.as_db_error() {
        Some(db) => format!("postgres: {}: {}", db.code().code(), db.message()),
        None => format!("postgres: {e}"),
    };
    if closed {
        StoreError::retryable(message)
    } else {
        StoreError::fatal(message)
    }
}
