//! PostgreSQL without blocking the runtime: a pool of `tokio-postgres`
//! connections over the one schema and migration, executing the core's
//! statements (`intentkey::claim::sql`, through `intentkey_store::pg_sql`),
//! the ones the synchronous store and the npm package's `pgStore` prepare.
//! Node and Rust services can share a database.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::pg_sql::{bind, error, read_claim, read_row, refs, text};
use crate::{PostgresStore, StoreError};
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use intentkey::claim::sql::{self, Claimed, Kind, Value};
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use tokio_postgres::{Config, NoTls};

use super::{AsyncStore, Inserted, StoreFuture};

/// How long an operation waits for a pooled connection, or for a new one.
const WAIT: Duration = Duration::from_secs(5);

/// The PostgreSQL store for async services.
///
/// Every operation is one statement, prepared once per connection. A
/// dropped connection or a server that is restarting gives a retryable
/// error (`store-unavailable`: the layer answers 503 and nothing was done);
/// the pool opens new connections once the server is back. Fast completions
/// (`Rules::fast_completion`) use a second pool whose sessions run with
/// `synchronous_commit = off`.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    fast: Pool,
    config: Config,
    /// Whether fenced writes that changed a record send the core's `notify`
    /// statement (on with [`PgStore::notify`], and once this process waits).
    notify: Arc<AtomicBool>,
    /// The one listening connection of this store, started by the first wait.
    listener: Arc<Listener>,
    /// Claim statements still running (one whose caller gave up at the
    /// deadline still ends, in a task of its own): the release
    /// of a claim waits for its statement, sent on another connection it
    /// could otherwise overtake.
    inserting: super::Inserts,
}

/// The listening task, stopped when the last clone of the store goes.
#[derive(Default)]
struct Listener(OnceLock<::tokio::task::JoinHandle<()>>);

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(task) = self.0.get() {
            task.abort();
        }
    }
}

/// The `application_name` of the listening connection.
pub const LISTENER_APPLICATION_NAME: &str = "intentkey-listener";

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("connections", &self.pool.status().max_size)
            .finish()
    }
}

fn pool(config: Config, size: usize) -> Result<Pool, StoreError> {
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(WAIT))
        .create_timeout(Some(WAIT))
        .build()
        .map_err(|e| StoreError::fatal(format!("postgres: cannot build the pool: {e}")))
}

impl PgStore {
    /// Connects with at most `connections` sessions (and as many again for
    /// fast completions) and applies every missing migration of the one
    /// schema, under the shared advisory lock (the same code as the
    /// synchronous store, on a blocking thread). `url` is a libpq URL or
    /// key-value string; `options=-c search_path=…` selects a schema.
    ///
    /// # Errors
    /// A bad URL, a server that cannot be reached, or a database with a
    /// newer schema.
    pub async fn connect(url: &str, connections: usize) -> Result<Self, StoreError> {
        let config = Config::from_str(url)
            .map_err(|e| StoreError::fatal(format!("postgres: bad connection string: {e}")))?;
        let owned = url.to_owned();
        ::tokio::task::spawn_blocking(move || PostgresStore::connect(&owned).map(drop))
            .await
            .map_err(|e| {
                StoreError::fatal(format!("postgres: the migration task failed: {e}"))
            })??;
        let mut fast = config.clone();
        let options = match config.get_options() {
            Some(o) if !o.is_empty() => format!("{o} -c synchronous_commit=off"),
            _ => "-c synchronous_commit=off".to_owned(),
        };
        fast.options(&options);
        let size = connections.max(1);
        Ok(PgStore {
            pool: pool(config.clone(), size)?,
            fast: pool(fast, size)?,
            config,
            notify: Arc::new(AtomicBool::new(false)),
            listener: Arc::new(Listener::default()),
            inserting: super::Inserts::default(),
        })
    }

    /// Whether this store's writes that change a record (completion,
    /// release, recovery write) notify waiting processes: one more
    /// statement (`pg_notify`) after each of them. Off by default; it turns
    /// on by itself in a process that waits (the first wait starts the
    /// listener). Turn it on in processes that only write, so that waiters
    /// elsewhere wake at once instead of at their next re-check.
    #[must_use]
    pub fn notify(self, on: bool) -> Self {
        self.notify.store(on, Ordering::Relaxed);
        self
    }

    /// After a fenced write: wakes this process's waiters of `key`, and
    /// other processes' when notifying is on. A failed notification is not
    /// the write's failure: the waiters re-check on their own.
    async fn changed(&self, key: &str, written: bool) {
        if !written {
            return;
        }
        super::watch::changed(key);
        if self.notify.load(Ordering::Relaxed) {
            let _ =
                Self::execute(&self.pool, Kind::Notify, vec![Value::Text(key.to_owned())]).await;
        }
    }

    /// Starts the listening connection once.
    fn listen(&self) {
        self.notify.store(true, Ordering::Relaxed);
        let config = self.config.clone();
        self.listener
            .0
            .get_or_init(|| ::tokio::spawn(listen(config)));
    }

    /// The pool, for the service's own statements.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(pool: &Pool) -> Result<Object, StoreError> {
        pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => {
                let e = error(&e);
                if e.is_retryable() {
                    e
                } else {
                    StoreError::retryable(format!("postgres: cannot connect: {}", e.message()))
                }
            }
            other => StoreError::retryable(format!("postgres: no connection: {other}")),
        })
    }

    async fn execute(pool: &Pool, kind: Kind, values: Vec<Value>) -> Result<u64, StoreError> {
        let client = Self::client(pool).await?;
        let statement = client
            .prepare_cached(text(kind)?)
            .await
            .map_err(|e| error(&e))?;
        let params = bind(values, statement.params())?;
        client
            .execute(&statement, &refs(&params))
            .await
            .map_err(|e| error(&e))
    }

    async fn query(
        pool: &Pool,
        kind: Kind,
        values: Vec<Value>,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let client = Self::client(pool).await?;
        let statement = client
            .prepare_cached(text(kind)?)
            .await
            .map_err(|e| error(&e))?;
        let params = bind(values, statement.params())?;
        client
            .query(&statement, &refs(&params))
            .await
            .map_err(|e| error(&e))
    }
}

impl AsyncStore for PgStore {
    /// Run to its end even if its caller gives up, tracked until then
    /// (see `inserting`).
    fn insert(&self, record: Record) -> StoreFuture<'_, bool> {
        let pool = self.pool.clone();
        let params = sql::insert_params(&record);
        self.inserting.run(&record, async move {
            Ok(Self::execute(&pool, Kind::Insert, params).await? == 1)
        })
    }

    /// One statement: the insert, and the record it lost to (the core's
    /// `claim`); run like [`AsyncStore::insert`].
    fn claim_insert(&self, record: Record) -> StoreFuture<'_, Inserted> {
        let pool = self.pool.clone();
        let params = sql::insert_params(&record);
        self.inserting.run(&record, async move {
            let rows = Self::query(&pool, Kind::Claim, params).await?;
            let row = rows.first().ok_or_else(|| {
                StoreError::fatal("postgres: the claim statement answered no row")
            })?;
            Ok(match read_claim(row)? {
                Claimed::Won => Inserted::Won,
                Claimed::Lost => Inserted::Lost,
                Claimed::Existing(existing) => Inserted::Existing(existing),
            })
        })
    }

    fn get(&self, key: String) -> StoreFuture<'_, Option<Record>> {
        Box::pin(async move {
            let rows = Self::query(&self.pool, Kind::Get, sql::get_params(&key)).await?;
            rows.first().map(read_row).transpose()
        })
    }

    fn complete(&self, completion: Completion) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let pool = if completion.fast {
                &self.fast
            } else {
                &self.pool
            };
            let params = sql::complete_params(&completion);
            let n = Self::execute(pool, Kind::Complete, params).await?;
            self.changed(&completion.key, n == 1).await;
            Ok(n == 1)
        })
    }

    fn replace(&self, replacement: Replacement) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let params = sql::replace_params(&replacement);
            let n = Self::execute(&self.pool, Kind::Replace, params).await?;
            self.changed(&replacement.record.key, n == 1).await;
            Ok(n == 1)
        })
    }

    /// Waits for the claim's own statement first, if it still runs.
    fn release(&self, release: Release) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            self.inserting.settled(&release).await;
            let params = sql::release_params(&release);
            let n = Self::execute(&self.pool, Kind::Release, params).await?;
            self.changed(&release.key, n == 1).await;
            Ok(n == 1)
        })
    }

    fn list(&self, status: Option<Status>, limit: u32) -> StoreFuture<'_, Vec<Record>> {
        Box::pin(async move {
            let params = sql::list_params(status, u64::from(limit));
            let rows = Self::query(&self.pool, Kind::List, params).await?;
            rows.iter().map(read_row).collect()
        })
    }

    fn purge(&self, now: i64) -> StoreFuture<'_, u64> {
        Box::pin(
            async move { Self::execute(&self.pool, Kind::Purge, sql::purge_params(now)).await },
        )
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    /// The core's `count` statement (it reads the status index).
    fn count(&self, status: Status) -> StoreFuture<'_, Option<u64>> {
        Box::pin(async move {
            let rows =
                Self::query(&self.pool, Kind::Count, sql::count_params(Some(status))).await?;
            let mut total = 0;
            for row in &rows {
                let values = crate::pg_sql::row_values(row)?;
                total += sql::decode_count(&values)
                    .map_err(|e| StoreError::fatal(format!("postgres: {}", e.message())))?
                    .count;
            }
            Ok(Some(total))
        })
    }

    /// Woken by `LISTEN/NOTIFY` on one connection per store, started by the
    /// first wait; notifications lost while that connection is down are
    /// covered by the core's periodic re-check.
    fn watch(
        &self,
        key: String,
        ms: u32,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        self.listen();
        Box::pin(super::watch::until_changed(key, ms))
    }
}

/// The listening connection: `LISTEN` on the core's channel, each
/// notification's payload (a record key) handed to the process's waiters;
/// reconnected with back-off (100 ms doubling to 5 s) whenever it drops.
async fn listen(mut config: Config) {
    config.application_name(LISTENER_APPLICATION_NAME);
    let mut backoff = Duration::from_millis(100);
    loop {
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let (tx, mut rx) = ::tokio::sync::mpsc::unbounded_channel::<String>();
            let pump = ::tokio::spawn(async move {
                while let Some(Ok(message)) =
                    std::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    if let tokio_postgres::AsyncMessage::Notification(n) = message {
                        let _ = tx.send(n.payload().to_owned());
                    }
                }
            });
            if let Ok(listen) = text(Kind::Listen) {
                if client.batch_execute(listen).await.is_ok() {
                    backoff = Duration::from_millis(100);
                    while let Some(key) = rx.recv().await {
                        super::watch::changed(&key);
                    }
                }
            }
            pump.abort();
        }
        ::tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
