//! The PostgreSQL statements of the one schema, their parameters and the
//! reading of a row: shared by the synchronous [`crate::PostgresStore`] and
//! the asynchronous store of `intentkey-axum` (both drive `tokio-postgres`
//! types: the `postgres` crate re-exports them), so a Rust service, the CLI
//! and the npm package's `pgStore` write the same rows the same way.
//!
//! Every operation is one statement; the fenced ones compare the owner token
//! in their `WHERE` clause, so the database decides, never a read before a
//! write.

use intentkey::claim::schema::headers_to_column;
use intentkey::claim::{Completion, Record, Replacement};
use postgres::types::ToSql;

use crate::columns::Row;
use crate::StoreError;

/// Reads one record by key.
pub const GET_SQL: &str = "SELECT key, fingerprint, tenant_id, action_type, status, owner_token, response_status, \
     response_content_type, response_headers, response_body, response_body_bytes, created_at, expires_at, \
     lookups, next_lookup_at FROM intentkey_records WHERE key = $1";

/// The claim: insert-on-conflict, one row or none ([`insert_params`]).
pub const INSERT_SQL: &str = "INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, 0) ON CONFLICT (key) DO NOTHING";

/// The claim in one round trip: the insert of [`INSERT_SQL`] (the same
/// parameters) and, when it loses, the record it lost to, read in the same
/// statement. One row: `inserted`, then the columns of [`GET_SQL`] (all NULL
/// when the insert won, or when the winner committed after the statement
/// began and is not visible to it: read it with [`GET_SQL`]).
pub const CLAIM_SQL: &str = "WITH ins AS (INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, 0) ON CONFLICT (key) DO NOTHING RETURNING key) \
     SELECT EXISTS (SELECT 1 FROM ins), r.key, r.fingerprint, r.tenant_id, r.action_type, r.status, r.owner_token, r.response_status, \
     r.response_content_type, r.response_headers, r.response_body, r.response_body_bytes, r.created_at, r.expires_at, \
     r.lookups, r.next_lookup_at FROM (VALUES (1)) AS one (x) \
     LEFT JOIN intentkey_records r ON r.key = $1 AND NOT EXISTS (SELECT 1 FROM ins)";

/// The fenced completion ([`CompleteParams`]).
pub const COMPLETE_SQL: &str = "UPDATE intentkey_records SET status = 'done', response_status = $3, \
     response_content_type = $4, response_headers = $5, response_body = NULL, response_body_bytes = $6, expires_at = $7, \
     next_lookup_at = NULL WHERE key = $1 AND status = 'in_flight' AND owner_token = $2";

/// The fenced recovery write ([`ReplaceParams`]).
pub const REPLACE_SQL: &str =
    "UPDATE intentkey_records SET status = $4, owner_token = $5, response_status = $6, \
     response_content_type = $7, response_headers = $8, response_body = NULL, response_body_bytes = $9, created_at = $10, \
     expires_at = $11, lookups = $12, next_lookup_at = $13 \
     WHERE key = $1 AND status = 'in_flight' AND owner_token = $2 AND lookups = $3";

/// The fenced release: `$1` key, `$2` owner token.
pub const RELEASE_SQL: &str =
    "DELETE FROM intentkey_records WHERE key = $1 AND status = 'in_flight' AND owner_token = $2";

/// Records by status (`$1`, all when NULL), oldest first, at most `$2`.
pub const LIST_SQL: &str = "SELECT key, fingerprint, tenant_id, action_type, status, owner_token, response_status, \
     response_content_type, response_headers, response_body, response_body_bytes, created_at, expires_at, \
     lookups, next_lookup_at FROM intentkey_records WHERE ($1::text IS NULL OR status = $1) \
     ORDER BY created_at, key LIMIT $2";

/// Deletes `done` records expired at `$1`.
pub const PURGE_SQL: &str =
    "DELETE FROM intentkey_records WHERE status = 'done' AND expires_at <= $1";

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

/// A row of [`GET_SQL`] or [`LIST_SQL`] as a record, or a clear error naming
/// the malformed column.
///
/// # Errors
/// `store-failed` for a row this build cannot read.
pub fn read_row(row: &postgres::Row) -> Result<Record, StoreError> {
    read_row_at(row, 0)
}

/// What [`CLAIM_SQL`] answered: `Ok(None)` when the insert won, else the
/// record it lost to, if the statement could see it (`Some(None)` when not).
///
/// # Errors
/// `store-failed` for a row this build cannot read.
pub fn read_claim(row: &postgres::Row) -> Result<Option<Option<Record>>, StoreError> {
    if row.get::<_, bool>(0) {
        return Ok(None);
    }
    if row.get::<_, Option<String>>(1).is_none() {
        return Ok(Some(None));
    }
    read_row_at(row, 1).map(|r| Some(Some(r)))
}

/// The record in the columns of [`GET_SQL`], starting at column `first`.
fn read_row_at(row: &postgres::Row, first: usize) -> Result<Record, StoreError> {
    let at = |i: usize| first + i;
    let get_i32 = |i: usize| -> Option<i64> { row.get::<_, Option<i32>>(at(i)).map(i64::from) };
    Row {
        key: row.get(at(0)),
        fingerprint: row.get(at(1)),
        tenant_id: row.get(at(2)),
        action_type: row.get(at(3)),
        status: row.get(at(4)),
        owner_token: row.get(at(5)),
        response_status: get_i32(6),
        response_content_type: row.get(at(7)),
        response_headers: row.get(at(8)),
        response_body: row.get(at(9)),
        response_body_bytes: row.get(at(10)),
        created_at: row.get(at(11)),
        expires_at: row.get(at(12)),
        lookups: i64::from(row.get::<_, i32>(at(13))),
        next_lookup_at: row.get(at(14)),
    }
    .into_record()
}

/// The parameters of [`INSERT_SQL`]; `status` is `record.status.as_str()`.
pub fn insert_params<'a>(
    record: &'a Record,
    status: &'a &'static str,
) -> [&'a (dyn ToSql + Sync); 7] {
    [
        &record.key,
        &record.fingerprint,
        &record.tenant_id,
        &record.action_type,
        status,
        &record.owner_token,
        &record.created_at,
    ]
}

/// The parameters of [`COMPLETE_SQL`], converted once.
pub struct CompleteParams<'a> {
    completion: &'a Completion,
    status: i32,
    headers: Option<String>,
}

impl<'a> CompleteParams<'a> {
    /// The converted values of `completion`.
    pub fn new(completion: &'a Completion) -> Self {
        CompleteParams {
            completion,
            status: i32::from(completion.response.status),
            headers: headers_to_column(&completion.response.headers),
        }
    }

    /// `$1` to `$7`.
    pub fn as_params(&self) -> [&(dyn ToSql + Sync); 7] {
        let x = self.completion;
        [
            &x.key,
            &x.owner_token,
            &self.status,
            &x.response.content_type,
            &self.headers,
            &x.response.body,
            &x.expires_at,
        ]
    }
}

/// The parameters of [`REPLACE_SQL`], converted once.
pub struct ReplaceParams<'a> {
    replacement: &'a Replacement,
    expected_lookups: i32,
    status: &'static str,
    response_status: Option<i32>,
    content_type: Option<&'a str>,
    headers: Option<String>,
    body: Option<&'a [u8]>,
    lookups: i32,
}

impl<'a> ReplaceParams<'a> {
    /// The converted values of `replacement`.
    pub fn new(replacement: &'a Replacement) -> Self {
        let next = &replacement.record;
        let response = next.response.as_ref();
        ReplaceParams {
            replacement,
            expected_lookups: i32::try_from(replacement.expected_lookups).unwrap_or(i32::MAX),
            status: next.status.as_str(),
            response_status: response.map(|x| i32::from(x.status)),
            content_type: response.map(|x| x.content_type.as_str()),
            headers: response.and_then(|x| headers_to_column(&x.headers)),
            body: response.map(|x| x.body.as_slice()),
            lookups: i32::try_from(next.lookups).unwrap_or(i32::MAX),
        }
    }

    /// `$1` to `$13`.
    pub fn as_params(&self) -> [&(dyn ToSql + Sync); 13] {
        let r = self.replacement;
        let next = &r.record;
        [
            &next.key,
            &r.expected_token,
            &self.expected_lookups,
            &self.status,
            &next.owner_token,
            &self.response_status,
            &self.content_type,
            &self.headers,
            &self.body,
            &next.created_at,
            &next.expires_at,
            &self.lookups,
            &next.next_lookup_at,
        ]
    }
}
