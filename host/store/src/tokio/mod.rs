//! Stores for async services on tokio (cargo feature `tokio`): the
//! operations of the one claim flow, awaited ([`AsyncStore`]), the loops
//! that perform what a core flow asks ([`drive`], [`drive_run`]), the
//! [`AsyncGuard`] that runs an effect at most once per intent, and the
//! [`Recoverer`] of abandoned claims.
//!
//! The order of the operations is the core's (`intentkey::claim::flow`): a
//! store never sequences claims itself. `PgStore` (features `tokio` and
//! `postgres`) talks to PostgreSQL without blocking the runtime, and
//! `AsyncMysqlStore` (features `tokio` and `mysql`) to MySQL or MariaDB; [`Inline`]
//! runs a store whose operations never block (the memory store, [`memory`]);
//! [`Blocking`] runs a synchronous one (SQLite) on tokio's blocking threads.
//!
//! ```
//! use intentkey::claim::{Attempt, Response};
//! use intentkey_store::tokio::{memory, AsyncGuard};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = memory();
//! let guard = AsyncGuard::new(&store);
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
//! let mut effects = 0;
//! for _ in 0..3 {
//!     let answer = guard.run(&attempt, 1_700_000_000, |key| {
//!         effects += 1;
//!         async move { Response::json(201, format!(r#"{{"paid_with_key":"{key}"}}"#)) }
//!     }).await?;
//!     assert_eq!(answer.status, 201);
//! }
//! assert_eq!(effects, 1);
//! # Ok::<(), intentkey_store::StoreError>(())
//! # }).unwrap();
//! ```

mod guard;
mod inserts;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod pg;
mod recovery;
pub mod watch;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::{MemoryStore, Store, StoreError};
use intentkey::claim::{
    Completion, EffectResult, Finished, Flow, Lookup, Op, OpResult, Record, Release, ReleaseFlow,
    Replacement, RunFlow, RunOutcome, Status, Step,
};

use self::inserts::Inserts;

pub use self::guard::AsyncGuard;
#[cfg(feature = "mysql")]
pub use self::mysql::AsyncMysqlStore;
#[cfg(feature = "postgres")]
pub use self::pg::{PgStore, LISTENER_APPLICATION_NAME};
pub use self::recovery::{Recoverer, RecoveryReport, Reexecute};

/// What a store operation returns: a boxed future, so a store can sit
/// behind `Arc<dyn AsyncStore>`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The operations every async store offers, each one atomic statement: an
/// insert that loses on conflict, a read, and writes fenced on the owner
/// token (see `intentkey_store::Store`, their synchronous twin).
pub trait AsyncStore: Send + Sync + 'static {
    /// `insert … on conflict do nothing`: `true` when this call inserted.
    fn insert(&self, record: Record) -> StoreFuture<'_, bool>;
    /// The claim's insert, answered with the record it lost to when the
    /// store can read it in the same statement ([`Inserted::Existing`]: a
    /// repeat costs one round trip instead of two). By default it is
    /// [`AsyncStore::insert`], and the claim flow reads the record after.
    fn claim_insert(&self, record: Record) -> StoreFuture<'_, Inserted> {
        Box::pin(async move {
            Ok(if self.insert(record).await? {
                Inserted::Won
            } else {
                Inserted::Lost
            })
        })
    }
    /// Reads one record.
    fn get(&self, key: String) -> StoreFuture<'_, Option<Record>>;
    /// The fenced completion: `true` when it wrote.
    fn complete(&self, completion: Completion) -> StoreFuture<'_, bool>;
    /// The fenced recovery write: `true` when it wrote.
    fn replace(&self, replacement: Replacement) -> StoreFuture<'_, bool>;
    /// The fenced release (delete): `true` when it deleted.
    fn release(&self, release: Release) -> StoreFuture<'_, bool>;
    /// Records with `status` (all when `None`), oldest first, at most `limit`.
    fn list(&self, status: Option<Status>, limit: u32) -> StoreFuture<'_, Vec<Record>>;
    /// Deletes `done` records expired at `now`: how many.
    fn purge(&self, now: i64) -> StoreFuture<'_, u64>;
    /// Returns when the store says the record of `key` changed (completed,
    /// released, taken over), or after `ms` milliseconds, whichever comes
    /// first: a retry waiting for the first attempt (the core's
    /// `Op::Watch`). By default it sleeps `ms` (polling; the core's
    /// intervals carry the back-off and jitter); a store with notifications
    /// returns early on them.
    fn watch(&self, key: String, ms: u32) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let _ = key;
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(
            u64::from(ms),
        )))
    }
    /// The store's kind, as telemetry names it (`custom` by default).
    fn kind(&self) -> &'static str {
        "custom"
    }
    /// How many records have `status` (a cheap count, for the records
    /// gauge); `None` when the store cannot count cheaply.
    fn count(&self, status: Status) -> StoreFuture<'_, Option<u64>> {
        let _ = status;
        Box::pin(std::future::ready(Ok(None)))
    }
}

/// What the claim's insert did ([`AsyncStore::claim_insert`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The insert took the key: this attempt owns it.
    Won,
    /// The insert lost; the record it lost to was not read.
    Lost,
    /// The insert lost to this record, read in the same statement.
    Existing(Box<Record>),
}

/// The destination, as recovery sees it, asked without blocking.
pub trait AsyncGateway: Send + Sync {
    /// Whether the effect with this key happened (asked with the same key).
    fn ask<'a>(&'a self, key: &'a str) -> Pin<Box<dyn Future<Output = Lookup> + Send + 'a>>;
    /// Whether an `absent` answer can be trusted (the destination documents
    /// read-your-writes); otherwise `absent` counts as unknown.
    fn read_your_writes(&self) -> bool;
}

/// A synchronous store whose operations never block (the memory store),
/// run in place.
#[derive(Debug, Default)]
pub struct Inline<S>(pub S);

/// A store in process memory, for tests and single-process services.
pub fn memory() -> Inline<MemoryStore> {
    Inline(MemoryStore::default())
}

/// A fenced write's answer, waking the waiters of `key` when it changed the
/// record.
fn woke(key: &str, written: Result<bool, StoreError>) -> Result<bool, StoreError> {
    if matches!(written, Ok(true)) {
        watch::changed(key);
    }
    written
}

impl<S: Store + 'static> AsyncStore for Inline<S> {
    fn insert(&self, record: Record) -> StoreFuture<'_, bool> {
        Box::pin(std::future::ready(self.0.insert(&record)))
    }
    fn get(&self, key: String) -> StoreFuture<'_, Option<Record>> {
        Box::pin(std::future::ready(self.0.get(&key)))
    }
    fn complete(&self, completion: Completion) -> StoreFuture<'_, bool> {
        let written = self.0.complete(&completion);
        Box::pin(std::future::ready(woke(&completion.key, written)))
    }
    fn replace(&self, replacement: Replacement) -> StoreFuture<'_, bool> {
        let written = self.0.replace(&replacement);
        Box::pin(std::future::ready(woke(&replacement.record.key, written)))
    }
    fn release(&self, release: Release) -> StoreFuture<'_, bool> {
        let written = self.0.release(&release);
        Box::pin(std::future::ready(woke(&release.key, written)))
    }
    fn watch(&self, key: String, ms: u32) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(watch::until_changed(key, ms))
    }
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    fn list(&self, status: Option<Status>, limit: u32) -> StoreFuture<'_, Vec<Record>> {
        Box::pin(std::future::ready(self.0.list(status, limit as usize)))
    }
    /// A memory store counts by listing (it holds every record in memory).
    fn count(&self, status: Status) -> StoreFuture<'_, Option<u64>> {
        let listed = self.0.list(Some(status), usize::MAX);
        Box::pin(std::future::ready(listed.map(|r| Some(r.len() as u64))))
    }
    fn purge(&self, now: i64) -> StoreFuture<'_, u64> {
        Box::pin(std::future::ready(self.0.purge(now)))
    }
}

/// A synchronous store that blocks on I/O (SQLite), run on tokio's blocking
/// threads so the runtime's workers never wait on it.
pub struct Blocking<S> {
    store: Arc<S>,
    /// Inserts still running on a blocking thread: one abandoned by its
    /// caller (its deadline passed) still runs to its end, and the release
    /// of that claim waits for it, never overtakes it.
    inserting: Inserts,
}

impl<S: Store + 'static> Blocking<S> {
    /// Wraps `store`.
    pub fn new(store: S) -> Self {
        Blocking {
            store: Arc::new(store),
            inserting: Inserts::default(),
        }
    }

    fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&S) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let store = Arc::clone(&self.store);
        Box::pin(async move {
            ::tokio::task::spawn_blocking(move || op(&store))
                .await
                .map_err(|e| StoreError::fatal(format!("the store's blocking task failed: {e}")))?
        })
    }

    /// `insert` (the store's insert or claim) of `record`, registered until
    /// its blocking thread ends (even when its caller has stopped waiting).
    fn insert_tracked<T: Send + 'static>(
        &self,
        record: Record,
        insert: fn(&S, &Record) -> Result<T, StoreError>,
    ) -> StoreFuture<'_, T> {
        let running = self.inserting.start(&record);
        self.run(move |s| {
            let inserted = insert(s, &record);
            drop(running);
            inserted
        })
    }
}

impl<S: Store + 'static> AsyncStore for Blocking<S> {
    fn insert(&self, record: Record) -> StoreFuture<'_, bool> {
        self.insert_tracked(record, |s, r| s.insert(r))
    }
    /// The store's claim ([`Store::claim`]: Redis answers the record a
    /// repeat lost to in the same round trip), tracked like an insert.
    fn claim_insert(&self, record: Record) -> StoreFuture<'_, Inserted> {
        Box::pin(async move {
            match self.insert_tracked(record, |s, r| s.claim(r)).await? {
                OpResult::Inserted(true) => Ok(Inserted::Won),
                OpResult::Inserted(false) => Ok(Inserted::Lost),
                OpResult::Existing(existing) => Ok(Inserted::Existing(Box::new(existing))),
                other => Err(StoreError::fatal(format!(
                    "the store's claim answered {}",
                    other.as_str()
                ))),
            }
        })
    }
    fn get(&self, key: String) -> StoreFuture<'_, Option<Record>> {
        self.run(move |s| s.get(&key))
    }
    fn complete(&self, completion: Completion) -> StoreFuture<'_, bool> {
        self.run(move |s| woke(&completion.key, s.complete(&completion)))
    }
    fn replace(&self, replacement: Replacement) -> StoreFuture<'_, bool> {
        self.run(move |s| woke(&replacement.record.key, s.replace(&replacement)))
    }
    /// Waits for a running insert of the same key first (one abandoned at
    /// its deadline still commits): a release never overtakes its claim.
    fn release(&self, release: Release) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            self.inserting.settled(&release).await;
            self.run(move |s| woke(&release.key, s.release(&release)))
                .await
        })
    }
    /// Woken by this process's writes, and by other processes' when the
    /// store listens (`Store::listen`: Redis); otherwise other processes'
    /// writes are seen at the end of each of the core's intervals (polling).
    fn watch(&self, key: String, ms: u32) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.store.listen(watch::changed);
        Box::pin(watch::until_changed(key, ms))
    }
    fn kind(&self) -> &'static str {
        self.store.kind()
    }
    fn list(&self, status: Option<Status>, limit: u32) -> StoreFuture<'_, Vec<Record>> {
        self.run(move |s| s.list(status, limit as usize))
    }
    fn purge(&self, now: i64) -> StoreFuture<'_, u64> {
        self.run(move |s| s.purge(now))
    }
}

/// Performs one operation a flow asks for.
async fn perform(
    store: &dyn AsyncStore,
    op: Op,
    gateway: Option<&dyn AsyncGateway>,
) -> Result<OpResult, StoreError> {
    Ok(match op {
        Op::Insert(record) => match store.claim_insert(record).await? {
            Inserted::Won => OpResult::Inserted(true),
            Inserted::Lost => OpResult::Inserted(false),
            Inserted::Existing(existing) => OpResult::Existing(*existing),
        },
        Op::Get(key) => OpResult::Got(store.get(key).await?),
        Op::Complete(c) => OpResult::Written(store.complete(c).await?),
        Op::Replace(r) => OpResult::Written(store.replace(r).await?),
        Op::Release(r) => OpResult::Written(store.release(r).await?),
        Op::List { status, limit } => OpResult::Listed(store.list(Some(status), limit).await?),
        Op::Purge { now } => OpResult::Purged(store.purge(now).await?),
        Op::Ask(key) => match gateway {
            Some(g) => OpResult::Answered(g.ask(&key).await),
            None => {
                return Err(StoreError::fatal(
                    "intentkey: a flow asked the destination outside a recovery (a bug)",
                ))
            }
        },
        Op::Effect(_) => {
            return Err(StoreError::fatal(
                "intentkey: a flow asked for its effect outside a run (a bug)",
            ))
        }
        Op::Wait(ms) => {
            tokio::time::sleep(std::time::Duration::from_millis(u64::from(ms))).await;
            OpResult::Waited
        }
        Op::Watch(w) => {
            let started = std::time::Instant::now();
            store.watch(w.key, w.ms).await;
            let elapsed = started.elapsed().as_millis();
            OpResult::Watched {
                elapsed_ms: u32::try_from(elapsed).unwrap_or(u32::MAX),
                now: unix_now(),
            }
        }
    })
}

/// [`perform`] with a deadline on the store's own operations: one that has
/// not answered within it fails as retryable (the flow decides what that
/// means), never hangs. Pauses, watches, look-ups and effects are not
/// bounded here.
async fn perform_within(
    store: &dyn AsyncStore,
    op: Op,
    gateway: Option<&dyn AsyncGateway>,
    deadline: Duration,
) -> Result<OpResult, StoreError> {
    let bounded = matches!(
        op,
        Op::Insert(_)
            | Op::Get(_)
            | Op::Complete(_)
            | Op::Replace(_)
            | Op::Release(_)
            | Op::List { .. }
            | Op::Purge { .. }
    );
    if !bounded {
        return perform(store, op, gateway).await;
    }
    let what = op.as_str();
    match ::tokio::time::timeout(deadline, perform(store, op, gateway)).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::retryable(format!(
            "the store did not answer the {what} within {} ms (the store deadline)",
            deadline.as_millis()
        ))),
    }
}

/// The default deadline of one store call: the core's
/// [`intentkey::claim::STORE_DEADLINE_MS`].
pub const STORE_DEADLINE: Duration =
    Duration::from_millis(intentkey::claim::STORE_DEADLINE_MS as u64);

/// Releases a claim whose handler never ran (`Served::unreleased`): the
/// core's [`ReleaseFlow`], each store call within `deadline`, its pauses
/// slept here. Run it in a task of its own: while the store cannot be
/// reached it tries again for up to five minutes.
pub async fn drive_release(
    release: Release,
    store: &dyn AsyncStore,
    deadline: Duration,
) -> Finished {
    let mut flow = ReleaseFlow::new(release);
    let mut step = flow.start();
    loop {
        step = match step {
            Step::Done(finished) => return finished,
            Step::Io(op) => {
                let result = match perform_within(store, op, None, deadline).await {
                    Ok(result) => result,
                    Err(e) => OpResult::Failed(intentkey::claim::StoreFailure {
                        unavailable: e.is_retryable(),
                        message: e.to_string(),
                    }),
                };
                match flow.resume(result) {
                    Ok(step) => step,
                    Err(_) => return Finished::LeftInFlight,
                }
            }
        };
    }
}

/// The time now, in seconds since the Unix epoch.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Drives a serve flow ([`intentkey::http::ServeFlow`]) from `step` over an
/// async store until it needs the handler (it returns the step asking for
/// [`Op::Effect`]) or is done: every store operation is awaited here, and one
/// that fails, or does not answer within `deadline`, is handed to the flow,
/// which decides what it means (the core's 503 or 500 before the claim;
/// tried again after the pause it asks for, slept here, while finishing). `failed` hears of each failure, and of
/// the pause that follows it, for the host's reports.
///
/// # Errors
/// Only the flow's own (a bug in the driver): store failures go to the flow.
pub async fn drive_serve(
    flow: &mut intentkey::http::ServeFlow,
    mut step: Step<intentkey::http::Served>,
    store: &dyn AsyncStore,
    deadline: Duration,
    failed: &mut (dyn FnMut(&StoreError) + Send),
    timed: &mut (dyn FnMut(&'static str, Duration) + Send),
) -> Result<Step<intentkey::http::Served>, StoreError> {
    loop {
        step = match step {
            Step::Done(_) | Step::Io(Op::Effect(_)) => return Ok(step),
            Step::Io(op) => {
                let what = op.as_str();
                let started = std::time::Instant::now();
                let performed = perform_within(store, op, None, deadline).await;
                if !matches!(what, "wait" | "watch") {
                    timed(what, started.elapsed());
                }
                match performed {
                    Ok(result) => flow.resume(result)?,
                    Err(e) => {
                        failed(&e);
                        flow.resume(OpResult::Failed(intentkey::claim::StoreFailure {
                            unavailable: e.is_retryable(),
                            message: e.to_string(),
                        }))?
                    }
                }
            }
        };
    }
}

/// An effect a run flow runs: what it reported and when it ended.
pub type RunEffect<'a> =
    dyn FnMut(String) -> Pin<Box<dyn Future<Output = (EffectResult, i64)> + Send + 'a>> + Send + 'a;

/// Runs the core's run flow to its end over an async store: every store
/// operation awaited here (each within [`STORE_DEADLINE`]: past it, a
/// retryable error), the destination asked through `gateway`, the effect
/// run when the flow says so.
///
/// # Errors
/// The store's errors, or the flow's (`record-vanished`, retryable).
pub async fn drive_run(
    flow: &mut RunFlow,
    store: &dyn AsyncStore,
    gateway: Option<&dyn AsyncGateway>,
    effect: &mut RunEffect<'_>,
) -> Result<RunOutcome, StoreError> {
    let mut step = flow.start();
    loop {
        step = match step {
            Step::Done(out) => return Ok(out),
            Step::Io(Op::Effect(key)) => {
                let (result, now) = effect(key).await;
                flow.resume(OpResult::Effected(result, now))?
            }
            Step::Io(op) => {
                flow.resume(perform_within(store, op, gateway, STORE_DEADLINE).await?)?
            }
        };
    }
}

/// Runs a core flow to its end over an async store: the loop of
/// `intentkey::claim::drive`, awaited.
///
/// # Errors
/// The store's errors, or the flow's (as `StoreError`).
pub async fn drive<F: Flow + Send>(
    mut flow: F,
    store: &dyn AsyncStore,
    gateway: Option<&dyn AsyncGateway>,
) -> Result<F::Output, StoreError> {
    let mut step = flow.start();
    loop {
        match step {
            Step::Done(out) => return Ok(out),
            Step::Io(op) => {
                let result = perform_within(store, op, gateway, STORE_DEADLINE).await?;
                step = flow.resume(result)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inserts::tests::{record as claim, release};
    use super::*;
    use std::sync::mpsc;

    /// A memory store whose insert of one owner token waits for a gate: an
    /// insert its caller abandoned, still running on its blocking thread.
    struct Gated {
        store: MemoryStore,
        token: String,
        gate: std::sync::Mutex<mpsc::Receiver<()>>,
    }

    impl Store for Gated {
        fn insert(&self, record: &Record) -> Result<bool, StoreError> {
            if record.owner_token == self.token {
                let _ = self.gate.lock().unwrap().recv();
            }
            self.store.insert(record)
        }
        fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
            self.store.get(key)
        }
        fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
            self.store.complete(completion)
        }
        fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
            self.store.replace(replacement)
        }
        fn release(&self, release: &Release) -> Result<bool, StoreError> {
            self.store.release(release)
        }
        fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
            self.store.list(status, limit)
        }
        fn purge(&self, now: i64) -> Result<u64, StoreError> {
            self.store.purge(now)
        }
    }

    /// Three retries of one key, each claim under its own token: the second
    /// one's insert is abandoned at its deadline and still runs; the third
    /// one's ends first. The second claim's release must wait for its own
    /// insert (not for the key's latest), or that insert lands after the
    /// release and the key stays in flight with no handler ever run.
    #[test]
    fn a_release_waits_for_its_own_claims_insert_when_retries_overlap() {
        let runtime = ::tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (open, gate) = mpsc::channel();
            let store = Blocking::new(Gated {
                store: MemoryStore::default(),
                token: "t2".into(),
                gate: std::sync::Mutex::new(gate),
            });
            assert_eq!(
                store.claim_insert(claim("t1")).await.unwrap(),
                Inserted::Won
            );
            // The second claim's insert waits on the gate; its caller gives up.
            let abandoned =
                ::tokio::time::timeout(Duration::from_millis(50), store.claim_insert(claim("t2")))
                    .await;
            assert!(abandoned.is_err(), "the gated insert is still running");
            assert_eq!(
                store.claim_insert(claim("t3")).await.unwrap(),
                Inserted::Lost
            );
            assert!(store.release(release("t1")).await.unwrap());

            // The second claim's release, sent while its insert still runs.
            let pending = store.release(release("t2"));
            let opener = ::tokio::spawn(async move {
                ::tokio::time::sleep(Duration::from_millis(100)).await;
                open.send(()).unwrap();
            });
            let released = pending.await.unwrap();
            opener.await.unwrap();
            assert!(released, "the release deleted the record its insert wrote");
            assert_eq!(
                store.get("k1".into()).await.unwrap(),
                None,
                "no key left in flight"
            );
        });
    }
}
