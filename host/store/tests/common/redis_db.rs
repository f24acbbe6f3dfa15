//! Redis for the store test binaries (stores.rs, fencing.rs; not the axum
//! tests that share `common`): a key prefix of each test's own, on the one
//! server or on the Redis Cluster that `scripts/redis-cluster.sh` starts.

use std::time::Duration;

use crate::common::{rand_u32, skipped};

/// The Redis the tests use: database 1 (database 0 belongs to other suites),
/// each test under a key prefix of its own.
pub const REDIS_BASE: &str = "redis://127.0.0.1:6379/1";

/// A Redis key prefix of one test's own; its keys are deleted at the end
/// (only keys under the prefix: never FLUSHDB).
///
/// When the server is unreachable: under `CI=true` the test fails; otherwise
/// it prints a line starting `SKIPPED:` naming the test and why, and the
/// caller returns.
pub struct RedisPrefix {
    pub prefix: String,
    /// On the cluster (`redis+cluster://`), not the one server.
    pub cluster: bool,
}

/// The cluster the tests use: `INTENTKEY_REDIS_CLUSTER`, else the one
/// `scripts/redis-cluster.sh start` makes (`scripts/test-all.sh` starts it
/// and stops it at the end).
pub fn cluster_url() -> String {
    std::env::var("INTENTKEY_REDIS_CLUSTER")
        .unwrap_or_else(|_| "redis+cluster://127.0.0.1:7000".to_owned())
}

/// The cluster's node URLs (`redis://host:port`) as the cluster client takes them.
fn cluster_nodes() -> Vec<String> {
    let url = cluster_url();
    let hosts = url
        .split_once("://")
        .map_or("", |(_, rest)| rest)
        .split(['/', '?'])
        .next()
        .unwrap_or_default()
        .to_owned();
    hosts.split(',').map(|h| format!("redis://{h}")).collect()
}

/// A connection to the cluster, or `None` after the skip rule (see [`RedisPrefix`]).
pub fn cluster_admin(test: &str) -> Option<redis::cluster::ClusterConnection> {
    let url = cluster_url();
    match redis::cluster::ClusterClient::builder(cluster_nodes())
        .connection_timeout(Duration::from_secs(5))
        .build()
        .and_then(|c| c.get_connection())
    {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true and no Redis Cluster at {url} (scripts/redis-cluster.sh start): {e}"
            );
            skipped(&format!(
                "{test}: no Redis Cluster at {url} ({e}); start one with bash scripts/redis-cluster.sh start (it fails under CI=true)"
            ));
            None
        }
    }
}

impl RedisPrefix {
    pub fn new(test: &str) -> Option<RedisPrefix> {
        redis_admin(test)?;
        Some(RedisPrefix {
            prefix: format!("ik-rs-{test}-{}-{}", std::process::id(), rand_u32()),
            cluster: false,
        })
    }

    /// A prefix on the cluster.
    pub fn cluster(test: &str) -> Option<RedisPrefix> {
        cluster_admin(test)?;
        Some(RedisPrefix {
            prefix: format!("ik-rs-{test}-{}-{}", std::process::id(), rand_u32()),
            cluster: true,
        })
    }

    /// The store URL: every key starts with the prefix (on the cluster,
    /// with the bucket's hash tag: `{prefix:NN}`).
    pub fn url(&self) -> String {
        if self.cluster {
            format!("{}?prefix={}", cluster_url(), self.prefix)
        } else {
            format!("{REDIS_BASE}?prefix={}", self.prefix)
        }
    }
}

impl Drop for RedisPrefix {
    fn drop(&mut self) {
        if self.cluster {
            let Some(mut c) = cluster_admin("cleanup") else {
                return;
            };
            // KEYS goes to every master; each key is deleted on its own slot.
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{{{}:*", self.prefix))
                .query(&mut c)
                .unwrap_or_default();
            for key in keys {
                let _: Result<i64, _> = redis::cmd("DEL").arg(key).query(&mut c);
            }
            return;
        }
        let Ok(mut c) = redis::Client::open(REDIS_BASE).and_then(|c| c.get_connection()) else {
            return;
        };
        let pattern = format!("{}:*", self.prefix);
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query(&mut c)
            .unwrap_or_default();
        for chunk in keys.chunks(500) {
            let _: Result<i64, _> = redis::cmd("DEL").arg(chunk).query(&mut c);
        }
    }
}

/// A connection to the test database, or `None` after the skip rule (see [`RedisPrefix`]).
pub fn redis_admin(test: &str) -> Option<redis::Connection> {
    match redis::Client::open(REDIS_BASE)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
    {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true and Redis is not reachable at {REDIS_BASE}: {e}"
            );
            skipped(&format!(
                "{test}: Redis is not reachable at {REDIS_BASE} ({e}); this test needs it (it fails under CI=true)"
            ));
            None
        }
    }
}

/// How many keys match `pattern` on each master of the cluster, asked of
/// each master directly (`CLUSTER NODES` names them).
#[allow(dead_code)] // stores.rs uses it; fencing.rs shares this module
pub fn keys_per_master(pattern: &str) -> Vec<usize> {
    let mut admin = cluster_admin("keys_per_master").expect("the cluster");
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut admin)
        .unwrap();
    nodes
        .lines()
        .filter(|l| {
            l.split(' ').nth(2).is_some_and(|f| f.contains("master")) && !l.contains("fail")
        })
        .map(|l| {
            let addr = l.split(' ').nth(1).unwrap().split('@').next().unwrap();
            let mut c = redis::Client::open(format!("redis://{addr}"))
                .and_then(|c| c.get_connection())
                .unwrap();
            let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut c).unwrap();
            keys.len()
        })
        .collect()
}
