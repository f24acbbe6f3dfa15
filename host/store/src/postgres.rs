//! PostgreSQL: the production store. Many app servers share one unique index.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use intentkey::claim::schema::{
    headers_to_column, migrations, migrations_table, MIGRATION_LOCK, SCHEMA_VERSION,
};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use postgres::types::ToSql;
use postgres::{Client, NoTls, Statement};

use super::columns::{Row, COLUMNS};
use super::{Store, StoreError};

/// Connections to PostgreSQL, re-established after the server restarts. An
/// operation that meets a dropped connection fails with a retryable error
/// (nothing half-done: every operation is one statement); the next operation
/// reconnects. Fast completions (`Rules::fast_completion`) use a second
/// connection with `synchronous_commit = off`: the commit returns before the
/// WAL reaches the disk, and a completion lost in a crash leaves the record
/// `in_flight` for recovery.
pub struct PostgresStore {
    url: String,
    client: Mutex<Option<Connection>>,
    fast: Mutex<Option<Connection>>,
}

/// A connection and its prepared statements: each is prepared once per
/// connection, so an operation is one round trip.
struct Connection {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Connection {
    fn prepared(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(sql)?;
        self.statements.insert(sql, st.clone());
        Ok(st)
    }

    fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        let st = self.prepared(sql)?;
        self.client.execute(&st, params)
    }
}

const GET_SQL: &str = "SELECT key, fingerprint, tenant_id, action_type, status, owner_token, response_status, \
     response_content_type, response_headers, response_body, response_body_bytes, created_at, expires_at, \
     lookups, next_lookup_at FROM intentkey_records WHERE key = $1";

const INSERT_SQL: &str = "INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, 0) ON CONFLICT (key) DO NOTHING";

const COMPLETE_SQL: &str = "UPDATE intentkey_records SET status = 'done', response_status = $3, \
     response_content_type = $4, response_headers = $5, response_body = NULL, response_body_bytes = $6, expires_at = $7, \
     next_lookup_at = NULL WHERE key = $1 AND status = 'in_flight' AND owner_token = $2";

const REPLACE_SQL: &str =
    "UPDATE intentkey_records SET status = $4, owner_token = $5, response_status = $6, \
     response_content_type = $7, response_headers = $8, response_body = NULL, response_body_bytes = $9, created_at = $10, \
     expires_at = $11, lookups = $12, next_lookup_at = $13 \
     WHERE key = $1 AND status = 'in_flight' AND owner_token = $2 AND lookups = $3";

const RELEASE_SQL: &str =
    "DELETE FROM intentkey_records WHERE key = $1 AND status = 'in_flight' AND owner_token = $2";

fn err(e: &postgres::Error) -> StoreError {
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

fn read_row(row: &postgres::Row) -> Result<Record, StoreError> {
    let get_i32 = |i: usize| -> Option<i64> { row.get::<_, Option<i32>>(i).map(i64::from) };
    Row {
        key: row.get(0),
        fingerprint: row.get(1),
        tenant_id: row.get(2),
        action_type: row.get(3),
        status: row.get(4),
        owner_token: row.get(5),
        response_status: get_i32(6),
        response_content_type: row.get(7),
        response_headers: row.get(8),
        response_body: row.get(9),
        response_body_bytes: row.get(10),
        created_at: row.get(11),
        expires_at: row.get(12),
        lookups: i64::from(row.get::<_, i32>(13)),
        next_lookup_at: row.get(14),
    }
    .into_record()
}

fn lock(slot: &Mutex<Option<Connection>>) -> MutexGuard<'_, Option<Connection>> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PostgresStore {
    /// Connects and applies every missing migration of the one schema (in one
    /// transaction under the shared advisory lock).
    ///
    /// # Errors
    /// When the server cannot be reached, the migration fails, or the
    /// database holds a newer schema.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let store = PostgresStore {
            url: url.to_owned(),
            client: Mutex::new(None),
            fast: Mutex::new(None),
        };
        let newer = store.with(&store.client, "", |client| {
            let mut tx = client.client.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
            tx.batch_execute(&migrations_table())?;
            let version: i32 = tx
                .query_one(
                    "SELECT coalesce(max(version), 0) FROM intentkey_schema_migrations",
                    &[],
                )?
                .get(0);
            if i64::from(version) > i64::from(SCHEMA_VERSION) {
                return Ok(Some(version));
            }
            for migration in migrations() {
                if i64::from(migration.version) <= i64::from(version) {
                    continue;
                }
                for statement in &migration.statements {
                    tx.batch_execute(statement)?;
                }
                let v = i32::try_from(migration.version).unwrap_or(i32::MAX);
                tx.execute(
                    "INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES ($1, extract(epoch from now())::bigint)",
                    &[&v],
                )?;
            }
            tx.commit()?;
            Ok(None)
        })?;
        if let Some(version) = newer {
            return Err(StoreError::fatal(format!(
                "postgres: the database has schema version {version}; this build knows {SCHEMA_VERSION}: upgrade intentkey"
            )));
        }
        Ok(store)
    }

    /// Runs `f` on the connection in `slot`, connecting first when there is
    /// none (then running `setup`); a connection that failed is dropped so
    /// the next call reconnects.
    fn with<T>(
        &self,
        slot: &Mutex<Option<Connection>>,
        setup: &str,
        f: impl FnOnce(&mut Connection) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut slot = lock(slot);
        if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
            let mut client = Client::connect(&self.url, NoTls).map_err(|e| {
                StoreError::retryable(format!(
                    "postgres: cannot connect to {}: {e}",
                    redact(&self.url)
                ))
            })?;
            if !setup.is_empty() {
                client.batch_execute(setup).map_err(|e| err(&e))?;
            }
            *slot = Some(Connection {
                client,
                statements: HashMap::new(),
            });
        }
        let Some(client) = slot.as_mut() else {
            return Err(StoreError::retryable("postgres: no connection"));
        };
        match f(client) {
            Ok(v) => Ok(v),
            Err(e) => {
                let e = err(&e);
                if e.is_retryable() {
                    *slot = None;
                }
                Err(e)
            }
        }
    }

    fn with_client<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        self.with(&self.client, "", f)
    }
}

/// The URL without a password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

impl Store for PostgresStore {
    fn insert(&self, r: &Record) -> Result<bool, StoreError> {
        self.with_client(|c| {
            c.execute(
                INSERT_SQL,
                &[
                    &r.key,
                    &r.fingerprint,
                    &r.tenant_id,
                    &r.action_type,
                    &r.status.as_str(),
                    &r.owner_token,
                    &r.created_at,
                ],
            )
        })
        .map(|n| n == 1)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let row = self.with_client(|c| {
            let st = c.prepared(GET_SQL)?;
            c.client.query_opt(&st, &[&key])
        })?;
        row.as_ref().map(read_row).transpose()
    }

    fn complete(&self, x: &Completion) -> Result<bool, StoreError> {
        let status = i32::from(x.response.status);
        let headers = headers_to_column(&x.response.headers);
        let run = |c: &mut Connection| {
            c.execute(
                COMPLETE_SQL,
                &[
                    &x.key,
                    &x.owner_token,
                    &status,
                    &x.response.content_type,
                    &headers,
                    &x.response.body,
                    &x.expires_at,
                ],
            )
        };
        let n = if x.fast {
            self.with(&self.fast, "SET synchronous_commit = off", run)?
        } else {
            self.with_client(run)?
        };
        Ok(n == 1)
    }

    fn replace(&self, r: &Replacement) -> Result<bool, StoreError> {
        let next = &r.record;
        let response = next.response.as_ref();
        let status = response.map(|x| i32::from(x.status));
        let content_type = response.map(|x| x.content_type.as_str());
        let headers = response.and_then(|x| headers_to_column(&x.headers));
        let body = response.map(|x| x.body.as_slice());
        let expected_lookups = i32::try_from(r.expected_lookups).unwrap_or(i32::MAX);
        let lookups = i32::try_from(next.lookups).unwrap_or(i32::MAX);
        self.with_client(|c| {
            c.execute(
                REPLACE_SQL,
                &[
                    &next.key,
                    &r.expected_token,
                    &expected_lookups,
                    &next.status.as_str(),
                    &next.owner_token,
                    &status,
                    &content_type,
                    &headers,
                    &body,
                    &next.created_at,
                    &next.expires_at,
                    &lookups,
                    &next.next_lookup_at,
                ],
            )
        })
        .map(|n| n == 1)
    }

    fn release(&self, r: &Release) -> Result<bool, StoreError> {
        self.with_client(|c| c.execute(RELEASE_SQL, &[&r.key, &r.owner_token]))
            .map(|n| n == 1)
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let status = status.map(Status::as_str);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.with_client(|c| {
            c.client.query(
                &format!(
                    "SELECT {COLUMNS} FROM intentkey_records WHERE ($1::text IS NULL OR status = $1) \
                     ORDER BY created_at, key LIMIT $2"
                ),
                &[&status, &limit],
            )
        })?;
        rows.iter().map(read_row).collect()
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.with_client(|c| {
            c.execute(
                "DELETE FROM intentkey_records WHERE status = 'done' AND expires_at <= $1",
                &[&now],
            )
        })
    }
}
