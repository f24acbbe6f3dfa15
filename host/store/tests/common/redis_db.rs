//! Redis for the store test binaries (stores.rs, fencing.rs; not the axum
//! tests that share `common`): a key prefix of each test's own.

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
}

impl RedisPrefix {
    pub fn new(test: &str) -> Option<RedisPrefix> {
        redis_admin(test)?;
        Some(RedisPrefix {
            prefix: format!("ik-rs-{test}-{}-{}", std::process::id(), rand_u32()),
        })
    }

    /// The store URL: every key starts with the prefix.
    pub fn url(&self) -> String {
        format!("{REDIS_BASE}?prefix={}", self.prefix)
    }
}

impl Drop for RedisPrefix {
    fn drop(&mut self) {
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
