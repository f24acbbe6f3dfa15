//! PostgreSQL: the production store. Many app servers share one unique index.

use std::sync::{Mutex, MutexGuard};

use intentkey::claim::{Record, Status};
use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};

use super::{record_from_columns, Store, StoreError, COLUMNS, SCHEMA_V1};

/// The advisory lock that serializes schema migrations across processes.
const MIGRATION_LOCK: i64 = 7_316_502_411;

/// One connection to PostgreSQL, re-established after the server restarts.
/// An operation that meets a dropped connection fails with a retryable
/// error (nothing half-done: every operation is one statement); the next
/// operation reconnects.
pub struct PostgresStore {
    url: String,
    client: Mutex<Option<Connection>>,
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

const GET_SQL: &str = "SELECT key, fingerprint, tenant_id, action_type, status, response_status, \
     response_content_type, response_body, created_at, expires_at, lookups, next_lookup_at \
     FROM intentkey_records WHERE key = $1";

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

fn row_to_record(row: &Row) -> Result<Record, StoreError> {
    let get_i32 = |i: usize| -> Option<i64> { row.get::<_, Option<i32>>(i).map(i64::from) };
    record_from_columns(
        row.get(0),
        row.get(1),
        row.get(2),
        row.get(3),
        &row.get::<_, String>(4),
        (get_i32(5), row.get(6), row.get(7)),
        row.get(8),
        row.get(9),
        i64::from(row.get::<_, i32>(10)),
        row.get(11),
    )
}

impl PostgresStore {
    /// Connects and applies the schema migration (once, under an advisory lock).
    ///
    /// # Errors
    /// When the server cannot be reached or the migration fails.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let store = PostgresStore {
            url: url.to_owned(),
            client: Mutex::new(None),
        };
        store.with_client(|client| {
            let mut tx = client.client.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS intentkey_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
            )?;
            let applied = tx
                .query_opt("SELECT version FROM intentkey_schema_migrations WHERE version = 1", &[])?
                .is_some();
            if !applied {
                tx.batch_execute(SCHEMA_V1)?;
                tx.execute(
                    "INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES (1, extract(epoch from now())::bigint)",
                    &[],
                )?;
            }
            tx.commit()
        })?;
        Ok(store)
    }

    fn client(&self) -> MutexGuard<'_, Option<Connection>> {
        self.client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the connection, connecting first when there is none; a
    /// connection that failed is dropped so the next call reconnects.
    fn with_client<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut slot = self.client();
        if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
            let client = Client::connect(&self.url, NoTls).map_err(|e| {
                StoreError::retryable(format!(
                    "postgres: cannot connect to {}: {e}",
                    redact(&self.url)
                ))
            })?;
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
    fn insert_if_absent(&self, r: &Record) -> Result<bool, StoreError> {
        self.with_client(|c| {
            c.execute(
                "INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, created_at, lookups) \
                 VALUES ($1, $2, $3, $4, $5, $6, 0) ON CONFLICT (key) DO NOTHING",
                &[&r.key, &r.fingerprint, &r.tenant_id, &r.action_type, &r.status.as_str(), &r.created_at],
            )
        })
        .map(|n| n == 1)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let row = self.with_client(|c| {
            let st = c.prepared(GET_SQL)?;
            c.client.query_opt(&st, &[&key])
        })?;
        row.as_ref().map(row_to_record).transpose()
    }

    fn replace_in_flight(&self, r: &Record) -> Result<bool, StoreError> {
        let response = r.response.as_ref();
        let status = response.map(|x| i32::from(x.status));
        let content_type = response.map(|x| x.content_type.as_str());
        let body = response.map(|x| x.body.as_str());
        let lookups = i32::try_from(r.lookups).unwrap_or(i32::MAX);
        self.with_client(|c| {
            c.execute(
                "UPDATE intentkey_records SET status = $2, response_status = $3, response_content_type = $4, \
                 response_body = $5, expires_at = $6, lookups = $7, next_lookup_at = $8 \
                 WHERE key = $1 AND status = 'in_flight'",
                &[&r.key, &r.status.as_str(), &status, &content_type, &body, &r.expires_at, &lookups, &r.next_lookup_at],
            )
        })
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
        rows.iter().map(row_to_record).collect()
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
