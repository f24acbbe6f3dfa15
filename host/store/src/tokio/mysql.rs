//! MySQL and MariaDB without blocking the runtime: a pool of `mysql_async`
//! connections executing the core's statements (`intentkey::claim::sql`,
//! [`Dialect::Mysql`]), the ones the synchronous [`crate::MysqlStore`] and the
//! npm and Python stores run. Rust, Node and Python services can share a
//! database.

use intentkey::claim::sql::{self, Dialect, ErrorClass, Kind, Statements, Value};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts, Row};

use super::{AsyncStore, StoreFuture};
use crate::mysql::{check_key, params, record, server_error};
use crate::{redact, MysqlStore, StoreError};

/// The MySQL / MariaDB store for async services.
///
/// Every operation is one autocommit statement, prepared once per
/// connection. The claim is a plain `INSERT` whose duplicate-key error
/// means "not inserted". A dropped connection or a server that is
/// restarting gives a retryable error (`store-unavailable`); the pool opens
/// new connections once the server is back.
///
/// ```no_run
/// use intentkey_store::tokio::{AsyncGuard, AsyncMysqlStore};
/// # async fn run() -> Result<(), intentkey_store::StoreError> {
/// let store = AsyncMysqlStore::connect("mysql://app@127.0.0.1:3306/payments", 16).await?;
/// let guard = AsyncGuard::new(&store);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncMysqlStore {
    pool: Pool,
    statements: std::sync::Arc<Statements>,
    url: String,
    /// Inserts still running (one whose caller gave up at the deadline
    /// still ends, in a task of its own): the release of a claim waits
    /// for its insert, sent on another connection it could overtake.
    inserting: super::Inserts,
}

impl std::fmt::Debug for AsyncMysqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncMysqlStore")
            .field("url", &redact(&self.url))
            .finish()
    }
}

impl AsyncMysqlStore {
    /// Connects with at most `connections` sessions and applies every
    /// missing migration (the synchronous store's code, on a blocking
    /// thread: the core's flow under the named lock).
    ///
    /// # Errors
    /// A bad URL, a server that cannot be reached, a migration lock not had
    /// in time, or a database with a newer schema.
    pub async fn connect(url: &str, connections: usize) -> Result<Self, StoreError> {
        let opts = Opts::from_url(url)
            .map_err(|e| StoreError::fatal(format!("mysql: {}: {e}", redact(url))))?;
        let owned = url.to_owned();
        ::tokio::task::spawn_blocking(move || MysqlStore::connect(&owned).map(drop))
            .await
            .map_err(|e| StoreError::fatal(format!("mysql: the migration task failed: {e}")))??;
        let constraints = PoolConstraints::new(0, connections.max(1))
            .ok_or_else(|| StoreError::fatal("mysql: pool constraints"))?;
        // As the synchronous store: autocommit statements that leave no
        // session state, so connections go back to the pool unreset.
        let opts = OptsBuilder::from_opts(opts)
            .client_found_rows(true)
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(constraints)
                    .with_reset_connection(false),
            );
        let statements = sql::statements(Dialect::Mysql, None)
            .map_err(|e| StoreError::fatal(format!("mysql: {}", e.message())))?;
        Ok(AsyncMysqlStore {
            pool: Pool::new(opts),
            statements: std::sync::Arc::new(statements),
            url: url.to_owned(),
            inserting: super::Inserts::default(),
        })
    }

    fn error(&self, e: &mysql_async::Error) -> StoreError {
        match e {
            mysql_async::Error::Server(s) => server_error(s.code, &s.message),
            e if e.is_fatal() => {
                StoreError::retryable(format!("mysql: {} unreachable: {e}", redact(&self.url)))
            }
            e => StoreError::fatal(format!("mysql: {e}")),
        }
    }

    fn statement(&self, kind: Kind) -> Result<&sql::Statement, StoreError> {
        self.statements
            .statement(kind)
            .map_err(|e| StoreError::fatal(format!("mysql: {}", e.message())))
    }

    /// Runs the statement `kind`: the rows it matched, or the server error.
    async fn run(&self, kind: Kind, values: &[Value]) -> Result<u64, mysql_async::Error> {
        let st = self
            .statements
            .statement(kind)
            .map_err(|e| mysql_async::Error::Other(e.message().into()))?;
        let mut conn = self.pool.get_conn().await?;
        conn.exec_drop(&st.text, params(st, values)).await?;
        Ok(conn.affected_rows())
    }

    async fn execute(&self, kind: Kind, values: &[Value]) -> Result<u64, StoreError> {
        self.run(kind, values).await.map_err(|e| self.error(&e))
    }

    async fn query(&self, kind: Kind, values: &[Value]) -> Result<Vec<Record>, StoreError> {
        let st = self.statement(kind)?;
        let rows: Vec<Row> = async {
            let mut conn = self.pool.get_conn().await?;
            conn.exec(&st.text, params(st, values)).await
        }
        .await
        .map_err(|e| self.error(&e))?;
        rows.iter().map(record).collect()
    }
}

impl AsyncStore for AsyncMysqlStore {
    /// Run to its end even if its caller gives up, tracked until then
    /// (see `inserting`).
    fn insert(&self, record: Record) -> StoreFuture<'_, bool> {
        if let Err(e) = check_key(&record.key) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let store = self.clone();
        let params = sql::insert_params(&record);
        self.inserting.run(&record, async move {
            match store.run(Kind::Insert, &params).await {
                Ok(n) => Ok(n == 1),
                Err(mysql_async::Error::Server(e))
                    if Dialect::Mysql.error_class(e.code) == ErrorClass::DuplicateKey =>
                {
                    Ok(false)
                }
                Err(e) => Err(store.error(&e)),
            }
        })
    }

    fn get(&self, key: String) -> StoreFuture<'_, Option<Record>> {
        Box::pin(async move {
            let mut records = self.query(Kind::Get, &sql::get_params(&key)).await?;
            Ok(records.pop())
        })
    }

    fn complete(&self, completion: Completion) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let n = self
                .execute(Kind::Complete, &sql::complete_params(&completion))
                .await?;
            Ok(n == 1)
        })
    }

    fn replace(&self, replacement: Replacement) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let n = self
                .execute(Kind::Replace, &sql::replace_params(&replacement))
                .await?;
            Ok(n == 1)
        })
    }

    /// Waits for the claim's own insert first, if it still runs.
    fn release(&self, release: Release) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            self.inserting.settled(&release).await;
            let n = self
                .execute(Kind::Release, &sql::release_params(&release))
                .await?;
            Ok(n == 1)
        })
    }

    fn list(&self, status: Option<Status>, limit: u32) -> StoreFuture<'_, Vec<Record>> {
        Box::pin(async move {
            self.query(Kind::List, &sql::list_params(status, u64::from(limit)))
                .await
        })
    }

    fn purge(&self, now: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move { self.execute(Kind::Purge, &sql::purge_params(now)).await })
    }
}
