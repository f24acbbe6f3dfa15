//! PostgreSQL: the production store. Many app servers share one unique index.
//! An executor of the core's statements ([`crate::pg_sql`]).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use intentkey::claim::migrate::{MigrationOp, MigrationResult};
use intentkey::claim::sql::{self, Dialect, Kind, Value};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use postgres::{Client, NoTls, Statement};

use super::pg_sql::{bind, error as err, read_row, refs, text};
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
    statements: HashMap<Kind, Statement>,
}

/// Why an operation failed: the driver's error, or one of the store's own
/// (a statement the core lacks, a parameter out of range).
enum Failure {
    Driver(postgres::Error),
    Store(StoreError),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        Failure::Driver(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

impl Connection {
    fn prepared(&mut self, kind: Kind) -> Result<Statement, Failure> {
        if let Some(st) = self.statements.get(&kind) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(text(kind)?)?;
        self.statements.insert(kind, st.clone());
        Ok(st)
    }

    /// Runs the core's statement `kind` with `values`: the rows changed.
    fn execute(&mut self, kind: Kind, values: Vec<Value>) -> Result<u64, Failure> {
        let st = self.prepared(kind)?;
        let params = bind(values, st.params())?;
        Ok(self.client.execute(&st, &refs(&params))?)
    }

    /// Runs the core's query `kind` with `values`: the rows.
    fn query(&mut self, kind: Kind, values: Vec<Value>) -> Result<Vec<postgres::Row>, Failure> {
        let st = self.prepared(kind)?;
        let params = bind(values, st.params())?;
        Ok(self.client.query(&st, &refs(&params))?)
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
        store.with(&store.client, "", |client| {
            // The core's migration flow names each statement; this runs them
            // in one transaction.
            let mut tx = client.client.transaction()?;
            crate::migrate(Dialect::Postgres, "postgres", |op| -> Result<_, Failure> {
                Ok(match op {
                    MigrationOp::Execute(call) if call.params.is_empty() => {
                        tx.batch_execute(&call.text)?;
                        MigrationResult::Executed
                    }
                    MigrationOp::Execute(call) => {
                        let statement = tx.prepare(&call.text)?;
                        let params = bind(call.params, statement.params())?;
                        tx.execute(&statement, &refs(&params))?;
                        MigrationResult::Executed
                    }
                    MigrationOp::Query(call) => {
                        let row = tx.query_opt(&call.text, &[])?;
                        let value = match row {
                            Some(row) => super::pg_sql::row_values(&row)?.into_iter().next(),
                            None => None,
                        };
                        MigrationResult::Queried(match value {
                            Some(Value::Integer(n)) => Some(n),
                            _ => None,
                        })
                    }
                })
            })?;
            tx.commit()?;
            Ok(())
        })?;
        Ok(store)
    }

    /// Runs `f` on the connection in `slot`, connecting first when there is
    /// none (then running `setup`); a connection that failed is dropped so
    /// the next call reconnects.
    fn with<T>(
        &self,
        slot: &Mutex<Option<Connection>>,
        setup: &str,
        f: impl FnOnce(&mut Connection) -> Result<T, Failure>,
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
            Err(Failure::Store(e)) => Err(e),
            Err(Failure::Driver(e)) => {
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
        f: impl FnOnce(&mut Connection) -> Result<T, Failure>,
    ) -> Result<T, StoreError> {
        self.with(&self.client, "", f)
    }
}

impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn insert(&self, r: &Record) -> Result<bool, StoreError> {
        self.with_client(|c| c.execute(Kind::Insert, sql::insert_params(r)))
            .map(|n| n == 1)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let rows = self.with_client(|c| c.query(Kind::Get, sql::get_params(key)))?;
        rows.first().map(read_row).transpose()
    }

    fn complete(&self, x: &Completion) -> Result<bool, StoreError> {
        let run = |c: &mut Connection| c.execute(Kind::Complete, sql::complete_params(x));
        let n = if x.fast {
            self.with(&self.fast, "SET synchronous_commit = off", run)?
        } else {
            self.with_client(run)?
        };
        Ok(n == 1)
    }

    fn replace(&self, r: &Replacement) -> Result<bool, StoreError> {
        self.with_client(|c| c.execute(Kind::Replace, sql::replace_params(r)))
            .map(|n| n == 1)
    }

    fn release(&self, r: &Release) -> Result<bool, StoreError> {
        self.with_client(|c| c.execute(Kind::Release, sql::release_params(r)))
            .map(|n| n == 1)
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        let rows = self.with_client(|c| c.query(Kind::List, sql::list_params(status, limit)))?;
        rows.iter().map(read_row).collect()
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.with_client(|c| c.execute(Kind::Purge, sql::purge_params(now)))
    }

    fn count(&self, status: Option<Status>) -> Result<Option<Vec<sql::StatusCount>>, StoreError> {
        let rows = self.with_client(|c| c.query(Kind::Count, sql::count_params(status)))?;
        rows.iter()
            .map(|row| {
                sql::decode_count(&crate::pg_sql::row_values(row)?)
                    .map_err(|e| StoreError::fatal(format!("postgres: {}", e.message())))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}
