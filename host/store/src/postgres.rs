//! PostgreSQL: the production store. Many app servers share one unique index.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use intentkey::claim::schema::{migrations, migrations_table, MIGRATION_LOCK, SCHEMA_VERSION};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use postgres::types::ToSql;
use postgres::{Client, NoTls, Statement};

use super::pg_sql::{
    error as err, read_row, CompleteParams, ReplaceParams, COMPLETE_SQL, GET_SQL, INSERT_SQL,
    LIST_SQL, PURGE_SQL, RELEASE_SQL, REPLACE_SQL,
};
use super::{redact, Store, StoreError};

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

impl Store for PostgresStore {
    fn insert(&self, r: &Record) -> Result<bool, StoreError> {
        let status = r.status.as_str();
        self.with_client(|c| c.execute(INSERT_SQL, &super::pg_sql::insert_params(r, &status)))
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
        let params = CompleteParams::new(x);
        let run = |c: &mut Connection| c.execute(COMPLETE_SQL, &params.as_params());
        let n = if x.fast {
            self.with(&self.fast, "SET synchronous_commit = off", run)?
        } else {
            self.with_client(run)?
        };
        Ok(n == 1)
    }

    fn replace(&self, r: &Replacement) -> Result<bool, StoreError> {
        let params = ReplaceParams::new(r);
        self.with_client(|c| c.execute(REPLACE_SQL, &params.as_params()))
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
            let st = c.prepared(LIST_SQL)?;
            c.client.query(&st, &[&status, &limit])
        })?;
        rows.iter().map(read_row).collect()
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.with_client(|c| c.execute(PURGE_SQL, &[&now]))
    }
}
