//! Redis: many app servers share one Redis, or one Redis Cluster. The record
//! layout and every Lua script are the core's (`intentkey::claim::redis`),
//! so a Node process (`intentkey/stores/redis`) serves the same records.
//!
//! The claim is `SET … NX` with no expiry; completion, recovery writes and
//! release are scripts fenced on the owner token; only `done` records get a
//! TTL. On a cluster (`redis+cluster://`) the core's cluster layout puts
//! each record with its bucket's indexes in one slot, so no script is
//! `CROSSSLOT`, and listing and purging visit every bucket. With `wait=N`
//! every write waits for `N` replicas (`WAIT`) before it counts. What Redis
//! persistence the guarantee needs is in `docs/redis.md` ("Persistence").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use intentkey::claim::redis::{self as layout, Call, Layout};
use intentkey::claim::{Completion, Op, OpResult, Record, Release, Replacement, Status};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Client, Connection, ConnectionLike, RedisError, RetryMethod, Script};

use super::{redact, Store, StoreError};

/// How long connecting, and each reply, may take before the operation fails
/// as retryable.
const TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many connections per store, opened as threads need them.
const POOL: usize = 8;

/// The core's scripts by name, each invoked as `EVALSHA`, falling back to
/// `EVAL` when the server does not know it yet.
struct Scripts(Vec<(&'static str, Script)>);

impl Scripts {
    fn new() -> Self {
        Scripts(
            layout::scripts()
                .into_iter()
                .map(|(name, source)| (name, Script::new(source)))
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Result<&Script, StoreError> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s)
            .ok_or_else(|| StoreError::fatal(format!("redis: the core has no script {name:?}")))
    }
}

/// One server's client, or a cluster's.
enum Clients {
    One(Client),
    Cluster(ClusterClient),
}

/// One connection to a server, or to every master of a cluster.
enum Conn {
    One(Connection),
    Cluster(Box<ClusterConnection>),
}

impl Conn {
    fn like(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Conn::One(c) => c,
            Conn::Cluster(c) => c.as_mut(),
        }
    }

    /// `WAIT replicas timeout` on the connection (on a cluster, the
    /// connection to the master of `key`'s slot) that just wrote `key`.
    fn wait(&mut self, key: &str, wait: Wait) -> Result<i64, RedisError> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(wait.replicas).arg(wait.timeout_ms);
        match self {
            Conn::One(c) => cmd.query(c),
            Conn::Cluster(c) => {
                let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                let value = c.route_command(
                    &cmd,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )?;
                Ok(redis::from_redis_value(value)?)
            }
        }
    }
}

/// `wait=N` and `wait_timeout_ms=M` of a store URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wait {
    replicas: u32,
    timeout_ms: u64,
}

/// How long a `WAIT` waits when the URL names no `wait_timeout_ms`.
const DEFAULT_WAIT_TIMEOUT_MS: u64 = 1000;

/// Records in Redis: `{prefix}:rec:{key}` strings and per-status sorted-set
/// indexes (`docs/store-schema.md`, "Redis"), on one server or, under hash
/// tags, over a cluster. A small pool of connections (up to 8, each behind
/// a mutex, opened when threads first need them; on a cluster each one
/// reaches every master), each re-established after a failure: an
/// operation that meets a dropped connection fails with a retryable error
/// (every operation is one script or one command, so nothing is half-done)
/// and the next one reconnects.
pub struct RedisStore {
    client: Clients,
    /// The URL without a password, for messages.
    shown: String,
    layout: Layout,
    wait: Option<Wait>,
    scripts: Scripts,
    pool: Vec<Mutex<Option<Conn>>>,
    next: AtomicUsize,
    /// Set when the store is dropped: its listening thread, if any, ends.
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    listening: std::sync::OnceLock<()>,
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl RedisStore {
    /// Connects to `redis://[user:password@]host:port[/db][?options]`, or to
    /// a cluster at `redis+cluster://[user:password@]host:port[,host:port…][?options]`
    /// (any of its nodes; `rediss://` needs a build of the `redis` crate with
    /// TLS). Options: `prefix=P` (default `intentkey`) starts every key the
    /// store writes; `wait=N` makes every write wait for `N` replicas to
    /// acknowledge it (`WAIT N wait_timeout_ms`, default 1000 ms) and fail
    /// as retryable when fewer do; `protocol=` goes to the `redis` crate
    /// (one server). Any other option is refused by name.
    ///
    /// # Errors
    /// `store-failed` for a malformed URL or an unknown option;
    /// `store-unavailable` when the server cannot be reached.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let options = Options::parse(url)?;
        let shown = redact(url);
        let layout = Layout::new(&options.prefix, options.cluster)
            .map_err(|e| StoreError::fatal(format!("redis: {}", e.message())))?;
        let client = if options.cluster {
            let nodes: Vec<String> = options.nodes.clone();
            ClusterClient::builder(nodes)
                .connection_timeout(TIMEOUT)
                .response_timeout(TIMEOUT)
                .build()
                .map(Clients::Cluster)
        } else {
            Client::open(options.nodes[0].as_str()).map(Clients::One)
        }
        .map_err(|e| StoreError::fatal(format!("redis: bad URL {shown}: {e}")))?;
        let store = RedisStore {
            client,
            shown,
            layout,
            wait: options.wait,
            scripts: Scripts::new(),
            pool: (0..POOL).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            stop: std::sync::Arc::default(),
            listening: std::sync::OnceLock::new(),
        };
        store.with(|c| redis::cmd("PING").query::<String>(c.like()))?;
        Ok(store)
    }

    /// The prefix of every key this store writes.
    pub fn prefix(&self) -> &str {
        self.layout.prefix()
    }

    /// Whether the records are in the cluster layout (`redis+cluster://`).
    pub fn is_cluster(&self) -> bool {
        self.layout.is_cluster()
    }

    /// A free connection slot (an open one first), or else the next one in turn.
    fn slot(&self) -> MutexGuard<'_, Option<Conn>> {
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

    fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T, RedisError>) -> Result<T, StoreError> {
        let mut slot = self.slot();
        if slot.is_none() {
            *slot = Some(self.open()?);
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

    fn open(&self) -> Result<Conn, StoreError> {
        let unreachable = |e: RedisError| {
            StoreError::retryable(format!("redis: cannot connect to {}: {e}", self.shown))
        };
        match &self.client {
            Clients::One(client) => {
                let c = client
                    .get_connection_with_timeout(TIMEOUT)
                    .map_err(unreachable)?;
                let _ = c.set_read_timeout(Some(TIMEOUT));
                let _ = c.set_write_timeout(Some(TIMEOUT));
                Ok(Conn::One(c))
            }
            Clients::Cluster(client) => client
                .get_connection()
                .map(|c| Conn::Cluster(Box::new(c)))
                .map_err(unreachable),
        }
    }

    /// Runs one script call; for a write (`wait` set) that wrote, waits
    /// for the replicas the URL asked for.
    fn run<T: redis::FromRedisValue>(&self, call: &Call) -> Result<T, StoreError> {
        let script = self.scripts.get(call.script)?;
        let (value, acked) = self.with(|c| {
            let mut invocation = script.prepare_invoke();
            for k in &call.keys {
                invocation.key(k);
            }
            for a in &call.args {
                invocation.arg(a);
            }
            let value: redis::Value = invocation.invoke(c.like())?;
            let acked = match self.wait {
                Some(wait) if matches!(value, redis::Value::Int(1)) => {
                    Some((wait, c.wait(&call.keys[0], wait)?))
                }
                _ => None,
            };
            Ok((value, acked))
        })?;
        if let Some((wait, acked)) = acked {
            layout::check_replicas(wait.replicas, acked)
                .map_err(|e| StoreError::retryable(format!("redis: {}", e.message())))?;
        }
        redis::from_redis_value(value)
            .map_err(|e| StoreError::fatal(format!("redis: {} answered {e}", call.script)))
    }

    fn write(&self, op: &Op) -> Result<bool, StoreError> {
        let call = self
            .layout
            .write(op)
            .ok_or_else(|| StoreError::fatal(format!("redis: {} is not a write", op.as_str())))?;
        Ok(self.run::<i64>(&call)? == 1)
    }
}

fn lock(slot: &Mutex<Option<Conn>>) -> MutexGuard<'_, Option<Conn>> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a store URL says: the node URLs the `redis` crate opens, and the
/// store's own options.
#[derive(Debug, PartialEq, Eq)]
struct Options {
    nodes: Vec<String>,
    cluster: bool,
    prefix: String,
    wait: Option<Wait>,
}

impl Options {
    fn parse(url: &str) -> Result<Options, StoreError> {
        let bad = |what: String| StoreError::fatal(format!("redis: {what} in {}", redact(url)));
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let cluster = base.starts_with("redis+cluster://") || base.starts_with("rediss+cluster://");
        let mut prefix = layout::DEFAULT_PREFIX.to_owned();
        let (mut replicas, mut timeout_ms) = (None, None);
        let mut passed = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "prefix" => value.clone_into(&mut prefix),
                "wait" => match value.parse::<u32>() {
                    Ok(n) if n > 0 => replicas = Some(n),
                    _ => return Err(bad(format!("wait={value:?} is not a number of replicas (1 or more)"))),
                },
                "wait_timeout_ms" => match value.parse::<u64>() {
                    Ok(n) if n > 0 => timeout_ms = Some(n),
                    _ => {
                        return Err(bad(format!(
                            "wait_timeout_ms={value:?} is not a number of milliseconds (1 or more; WAIT 0 would block forever)"
                        )))
                    }
                },
                "protocol" if !cluster => passed.push(pair),
                _ => {
                    return Err(bad(format!(
                        "unknown option {name:?} (the store takes prefix, wait and wait_timeout_ms{})",
                        if cluster { "" } else { ", and passes protocol on" }
                    )))
                }
            }
        }
        if timeout_ms.is_some() && replicas.is_none() {
            return Err(bad("wait_timeout_ms without wait=N".to_owned()));
        }
        let wait = replicas.map(|replicas| Wait {
            replicas,
            timeout_ms: timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS),
        });
        let nodes = if cluster {
            let (scheme, rest) = base.split_once("+cluster://").unwrap_or(("redis", ""));
            let (auth, hosts) = match rest.rfind('@') {
                Some(at) => (&rest[..=at], &rest[at + 1..]),
                None => ("", rest),
            };
            let hosts = hosts.trim_end_matches('/');
            if hosts.contains('/') {
                return Err(bad(
                    "a database number (a cluster has only database 0)".to_owned()
                ));
            }
            let nodes: Vec<String> = hosts
                .split(',')
                .filter(|h| !h.is_empty())
                .map(|h| format!("{scheme}://{auth}{h}"))
                .collect();
            if nodes.is_empty() {
                return Err(bad(
                    "no node (redis+cluster://HOST:PORT[,HOST:PORT…])".to_owned()
                ));
            }
            nodes
        } else if passed.is_empty() {
            vec![base.to_owned()]
        } else {
            vec![format!("{base}?{}", passed.join("&"))]
        };
        Ok(Options {
            nodes,
            cluster,
            prefix,
            wait,
        })
    }
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
        || matches!(
            e.code(),
            Some(
                "READONLY"
                    | "MASTERDOWN"
                    | "BUSY"
                    | "CLUSTERDOWN"
                    | "TRYAGAIN"
                    | "LOADING"
                    | "NOREPLICAS"
            )
        );
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
    /// One server: a thread of its own subscribes to the layout's change
    /// channels once; a cluster is not subscribed (its waiters poll).
    fn listen(&self, changed: fn(&str)) {
        let Clients::One(client) = &self.client else {
            return;
        };
        self.listening.get_or_init(|| {
            let (client, channels, stop) = (
                client.clone(),
                self.layout.channels(),
                std::sync::Arc::clone(&self.stop),
            );
            let _ = std::thread::Builder::new()
                .name("intentkey-redis-listener".into())
                .spawn(move || listen(client, channels, changed, stop));
        });
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        self.write(&Op::Insert(record.clone()))
    }

    /// The core's `claim` script: a lost claim answers the record it lost
    /// to, so a repeat is one round trip (no `GET` follows).
    fn claim(&self, record: &Record) -> Result<OpResult, StoreError> {
        let op = Op::Insert(record.clone());
        // The core's command for a claim (its `claim` script).
        let Some(layout::Command::Script { name, keys, args }) = self.layout.command(&op) else {
            return Err(StoreError::fatal(
                "redis: the core has no script for a claim",
            ));
        };
        let call = Call {
            script: name,
            keys: keys.into(),
            args,
        };
        let value: redis::Value = self.run(&call)?;
        let reply = match &value {
            redis::Value::Int(n) => layout::Reply::Integer(*n),
            redis::Value::Nil => layout::Reply::Nil,
            redis::Value::BulkString(bytes) => layout::Reply::Bulk(
                std::str::from_utf8(bytes)
                    .map_err(|_| StoreError::fatal("redis: a record's value is not UTF-8"))?,
            ),
            other => {
                return Err(StoreError::fatal(format!(
                    "redis: the claim script answered {other:?}"
                )))
            }
        };
        layout::op_result(&op, reply)
            .map_err(|e| StoreError::fatal(format!("redis: {}", e.message())))
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let value: Option<String> = self.with(|c| {
            redis::cmd("GET")
                .arg(self.layout.record_key(key))
                .query(c.like())
        })?;
        value.map(|v| decode(key, &v)).transpose()
    }

    fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
        self.write(&Op::Complete(completion.clone()))
    }

    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
        self.write(&Op::Replace(replacement.clone()))
    }

    fn release(&self, release: &Release) -> Result<bool, StoreError> {
        self.write(&Op::Release(release.clone()))
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let replies = self
            .layout
            .list(status, limit)
            .iter()
            .map(|call| self.run::<Vec<String>>(call))
            .collect::<Result<Vec<_>, _>>()?;
        layout::listed(limit, &replies)
            .map_err(|e| StoreError::fatal(format!("redis: {}", e.message())))
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        let mut deleted = 0u64;
        for call in self.layout.purge(now) {
            loop {
                let (n, looked_at): (u64, u64) = self.run(&call)?;
                deleted += n;
                if !layout::purge_again(looked_at) {
                    break;
                }
            }
        }
        Ok(deleted)
    }
}

/// The listening thread of one server's store: one connection `SSUBSCRIBE`d
/// to every change channel of the layout (the core's scripts publish each
/// changed record's key there), each key handed to `changed`; reconnected
/// with back-off (100 ms doubling to 5 s) when the connection drops, and
/// ended when the store is dropped.
fn listen(
    client: Client,
    channels: Vec<String>,
    changed: fn(&str),
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        if let Ok(mut con) = client.get_connection_with_timeout(TIMEOUT) {
            let subscribed = con
                .set_read_timeout(Some(Duration::from_secs(1)))
                .and_then(|()| {
                    redis::cmd("SSUBSCRIBE")
                        .arg(&channels)
                        .query::<redis::Value>(&mut con)
                });
            if subscribed.is_ok() {
                backoff = Duration::from_millis(100);
                while !stop.load(Ordering::Relaxed) {
                    match con.recv_response() {
                        Ok(redis::Value::Array(parts)) => {
                            if let [kind, _, redis::Value::BulkString(key)] = parts.as_slice() {
                                let smessage = matches!(kind, redis::Value::BulkString(k) if k.as_slice() == b"smessage");
                                if smessage {
                                    changed(&String::from_utf8_lossy(key));
                                }
                            }
                        }
                        Ok(_) => {}
                        Err(e) if e.is_timeout() => {}
                        Err(_) => break,
                    }
                }
            }
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_nodes_and_the_options() {
        let parse = |u: &str| Options::parse(u).map_err(|e| e.message().to_owned());
        let one = parse("redis://127.0.0.1:6379/1").unwrap();
        assert_eq!(
            (one.nodes, one.cluster, one.prefix.as_str(), one.wait),
            (
                vec!["redis://127.0.0.1:6379/1".to_owned()],
                false,
                "intentkey",
                None
            )
        );
        let o = parse("redis://h/2?prefix=pay&protocol=resp3&wait=1").unwrap();
        assert_eq!(o.nodes, ["redis://h/2?protocol=resp3"]);
        assert_eq!(o.prefix, "pay");
        assert_eq!(
            o.wait,
            Some(Wait {
                replicas: 1,
                timeout_ms: DEFAULT_WAIT_TIMEOUT_MS
            })
        );
        let c = parse("redis+cluster://u:pw@a:7000,b:7001/?prefix=p&wait=2&wait_timeout_ms=50")
            .unwrap();
        assert_eq!(c.nodes, ["redis://u:pw@a:7000", "redis://u:pw@b:7001"]);
        assert!(c.cluster);
        assert_eq!(
            c.wait,
            Some(Wait {
                replicas: 2,
                timeout_ms: 50
            })
        );
        for (bad, says) in [
            ("redis://h/2?prefx=p", "unknown option \"prefx\""),
            (
                "redis+cluster://h:1?protocol=resp3",
                "unknown option \"protocol\"",
            ),
            ("redis://h?wait=0", "wait=\"0\""),
            (
                "redis://h?wait=1&wait_timeout_ms=0",
                "WAIT 0 would block forever",
            ),
            ("redis://h?wait_timeout_ms=5", "without wait=N"),
            ("redis+cluster://h:1/1", "database"),
            ("redis+cluster://?prefix=p", "no node"),
            ("redis+cluster://u:secret@?prefix=p", "no node"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
        assert_eq!(
            redact("redis://u:secret@h:6379/1"),
            "redis://u@h:6379/1".to_owned()
        );
    }
}
