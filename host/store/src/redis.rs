//! Redis: many app servers share one Redis. The record layout and every Lua
//! script are the core's (`intentkey::claim::redis`), so a Node process
//! (`intentkey/stores/redis`) serves the same records.
//!
//! The claim is `SET … NX` with no expiry; completion, recovery writes and
//! release are scripts fenced on the owner token; only `done` records get a
//! TTL. What Redis persistence the guarantee needs is in `docs/redis.md`
//! ("Persistence").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use intentkey::claim::redis as layout;
use intentkey::claim::{Completion, Record, Release, Replacement, Status};
use redis::{Client, Connection, RedisError, RetryMethod, Script};

use super::{redact, Store, StoreError};

/// How long connecting, and each reply, may take before the operation fails
/// as retryable.
const TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many connections per store, opened as threads need them.
const POOL: usize = 8;

/// The core's scripts, loaded once (each invocation is `EVALSHA`, falling
/// back to `EVAL` when the server does not know it yet).
struct Scripts {
    insert: Script,
    complete: Script,
    replace: Script,
    release: Script,
    list: Script,
    purge: Script,
}

impl Scripts {
    fn new() -> Self {
        Scripts {
            insert: Script::new(layout::INSERT),
            complete: Script::new(layout::COMPLETE),
            replace: Script::new(layout::REPLACE),
            release: Script::new(layout::RELEASE),
            list: Script::new(layout::LIST),
            purge: Script::new(layout::PURGE),
        }
    }
}

/// Records in Redis: `{prefix}:rec:{key}` strings and per-status sorted-set
/// indexes (`docs/store-schema.md`, "Redis"). A small pool of connections
/// (up to 8, each behind a mutex, opened when threads first need them),
/// each re-established after a failure: an operation that meets a dropped
/// connection fails with a retryable error (every operation is one script or
/// one command, so nothing is half-done) and the next one reconnects.
pub struct RedisStore {
    client: Client,
    /// The URL without a password, for messages.
    shown: String,
    prefix: String,
    scripts: Scripts,
    pool: Vec<Mutex<Option<Connection>>>,
    next: AtomicUsize,
}

impl RedisStore {
    /// Connects to `redis://[user:password@]host:port[/db][?prefix=P]`
    /// (`rediss://` needs a build of the `redis` crate with TLS). `prefix`
    /// (default `intentkey`) starts every key the store writes.
    ///
    /// # Errors
    /// `store-failed` for a malformed URL; `store-unavailable` when the
    /// server cannot be reached.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let (url, prefix) = split_prefix(url)?;
        let shown = redact(&url);
        let client = Client::open(url.as_str())
            .map_err(|e| StoreError::fatal(format!("redis: bad URL {shown}: {e}")))?;
        let store = RedisStore {
            client,
            shown,
            prefix,
            scripts: Scripts::new(),
            pool: (0..POOL).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        };
        store.with(|c| redis::cmd("PING").query::<String>(c))?;
        Ok(store)
    }

    /// The prefix of every key this store writes.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A free connection slot (an open one first), or else the next one in turn.
    fn slot(&self) -> MutexGuard<'_, Option<Connection>> {
        let mut empty = None;
        for slot in &self.pool {
            match slot.try_lock() {
                Ok(guard) if guard.is_some() => return guard,
                Ok(guard) => {
                    if empty.is_none() {
                        empty = Some(guard);
                    } else {
                        drop(guard);
                    }
                }
                Err(TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        if let Some(guard) = empty {
            return guard;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        lock(&self.pool[i])
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, RedisError>,
    ) -> Result<T, StoreError> {
        let mut slot = self.slot();
        if slot.is_none() {
            let c = self
                .client
                .get_connection_with_timeout(TIMEOUT)
                .map_err(|e| {
                    StoreError::retryable(format!("redis: cannot connect to {}: {e}", self.shown))
                })?;
            let _ = c.set_read_timeout(Some(TIMEOUT));
            let _ = c.set_write_timeout(Some(TIMEOUT));
            *slot = Some(c);
        }
        let Some(c) = slot.as_mut() else {
            return Err(StoreError::retryable("redis: no connection"));
        };
        f(c).map_err(|e| {
            let e = error(&e);
            if e.is_retryable() {
                *slot = None;
            }
            e
        })
    }

    fn write(&self, script: &Script, key: &str, args: Vec<String>) -> Result<bool, StoreError> {
        let keys = layout::keys(&self.prefix, key);
        let written: i64 = self.with(|c| {
            let mut call = script.prepare_invoke();
            for k in &keys {
                call.key(k);
            }
            for a in &args {
                call.arg(a);
            }
            call.invoke(c)
        })?;
        Ok(written == 1)
    }

    fn list_status(&self, status: Status, limit: usize) -> Result<Vec<Record>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let pairs: Vec<String> = self.with(|c| {
            self.scripts
                .list
                .key(layout::index_key(&self.prefix, status))
                .arg(status.as_str())
                .arg(limit)
                .arg(layout::record_key_prefix(&self.prefix))
                .arg(layout::BATCH)
                .invoke(c)
        })?;
        pairs
            .chunks(2)
            .map(|kv| match kv {
                [k, v] => decode(k, v),
                _ => Err(StoreError::fatal(
                    "redis: the list script answered an odd count",
                )),
            })
            .collect()
    }
}

fn lock(slot: &Mutex<Option<Connection>>) -> MutexGuard<'_, Option<Connection>> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes `prefix=…` out of the URL's query.
fn split_prefix(url: &str) -> Result<(String, String), StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), layout::DEFAULT_PREFIX.to_owned()));
    };
    let mut prefix = layout::DEFAULT_PREFIX.to_owned();
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.strip_prefix("prefix=") {
            Some(p) if !p.is_empty() && !p.contains(char::is_whitespace) => p.clone_into(&mut prefix),
            Some(_) => {
                return Err(StoreError::fatal(
                    "redis: the URL's prefix= must be non-empty, without spaces (for example ?prefix=payments)",
                ))
            }
            None => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, prefix))
}

/// A Redis failure as a store error: a lost or refused connection, a
/// timeout, a server that is loading, read-only or asks to try again is
/// retryable; anything else (a script's refusal, malformed data, a bad
/// password) is fatal.
fn error(e: &RedisError) -> StoreError {
    let retryable = e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.retry_method(),
            RetryMethod::WaitAndRetry | RetryMethod::RetryImmediately
        )
        || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "BUSY"));
    let message = format!("redis: {e}");
    if retryable {
        StoreError::retryable(message)
    } else {
        StoreError::fatal(message)
    }
}

fn decode(key: &str, value: &str) -> Result<Record, StoreError> {
    layout::decode(key, value).map_err(|e| StoreError::fatal(format!("redis: {}", e.message())))
}

impl Store for RedisStore {
    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        self.write(
            &self.scripts.insert,
            &record.key,
            layout::insert_args(record),
        )
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let value: Option<String> = self.with(|c| {
            redis::cmd("GET")
                .arg(layout::record_key(&self.prefix, key))
                .query(c)
        })?;
        value.map(|v| decode(key, &v)).transpose()
    }

    fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
        self.write(
            &self.scripts.complete,
            &completion.key,
            layout::complete_args(completion),
        )
    }

    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
        self.write(
            &self.scripts.replace,
            &replacement.record.key,
            layout::replace_args(replacement),
        )
    }

    fn release(&self, release: &Release) -> Result<bool, StoreError> {
        self.write(
            &self.scripts.release,
            &release.key,
            layout::release_args(release),
        )
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let Some(status) = status else {
            let mut all = Vec::new();
            for status in Status::ALL {
                all.extend(self.list_status(status, limit)?);
            }
            all.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
            all.truncate(limit);
            return Ok(all);
        };
        self.list_status(status, limit)
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        let mut deleted = 0u64;
        loop {
            let (n, looked_at): (u64, u32) = self.with(|c| {
                self.scripts
                    .purge
                    .key(layout::expiry_key(&self.prefix))
                    .key(layout::index_key(&self.prefix, Status::Done))
                    .arg(now)
                    .arg(layout::BATCH)
                    .arg(layout::record_key_prefix(&self.prefix))
                    .invoke(c)
            })?;
            deleted += n;
            if looked_at < layout::BATCH {
                return Ok(deleted);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_leaves_the_url() {
        let split = |u: &str| split_prefix(u).map_err(|e| e.message().to_owned());
        assert_eq!(
            split("redis://127.0.0.1:6379/1"),
            Ok(("redis://127.0.0.1:6379/1".into(), "intentkey".into()))
        );
        assert_eq!(
            split("redis://h/2?prefix=pay&protocol=resp3"),
            Ok(("redis://h/2?protocol=resp3".into(), "pay".into()))
        );
        assert!(split("redis://h/2?prefix=").is_err());
        assert_eq!(
            redact("redis://u:secret@h:6379/1"),
            "redis://u@h:6379/1".to_owned()
        );
    }
}
