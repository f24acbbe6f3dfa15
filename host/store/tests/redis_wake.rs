//! A retry waiting on a Redis store is woken by another store's write (as
//! from another process): the core's completion script publishes the key on
//! the bucket's change channel, and the waiting store's listening thread
//! (`Store::listen`, started by its first wait) hands it to the process's
//! waiters. Without the listener the waiter would sleep the whole interval.

#![cfg(all(feature = "redis", feature = "tokio"))]
#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/redis_db.rs"]
mod redis_db;

use std::time::{Duration, Instant};

use intentkey::claim::{owner_token_from_slice, Attempt, Completion, Record, Response};
use intentkey_store::tokio::{AsyncStore, Blocking};
use intentkey_store::{RedisStore, Store};
use redis_db::RedisPrefix;

#[test]
fn a_waiter_is_woken_by_another_stores_completion() {
    let Some(prefix) = RedisPrefix::new("wake") else {
        return;
    };
    let url = prefix.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let waiter = Blocking::new(RedisStore::connect(&url).unwrap());
        // Another store, written to directly: no in-process wake-up.
        let writer = RedisStore::connect(&url).unwrap();
        let attempt = Attempt {
            key: format!("wake-{}", std::process::id()),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "pay".into(),
            prior: None,
        };
        let token = owner_token_from_slice(&[7u8; 16]).unwrap();
        assert!(writer
            .insert(&Record::in_flight(&attempt, &token, 100))
            .unwrap());
        // The first wait starts the listener; let it subscribe.
        waiter.watch(attempt.key.clone(), 10).await;
        tokio::time::sleep(Duration::from_millis(300)).await;

        for round in 0..2 {
            let started = Instant::now();
            let key = attempt.key.clone();
            let waiting = async {
                waiter.watch(key, 5_000).await;
                started.elapsed()
            };
            let write = async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let completion = Completion {
                    key: attempt.key.clone(),
                    owner_token: token.clone(),
                    response: Response::json(201, "{}"),
                    expires_at: 1_000_000,
                    fast: false,
                };
                // The second time it changes nothing, so it publishes
                // nothing: the waiter sleeps its whole pause.
                assert_eq!(writer.complete(&completion).unwrap(), round == 0);
            };
            let (took, ()) = tokio::join!(waiting, write);
            if round == 0 {
                assert!(
                    took < Duration::from_millis(1_500),
                    "woken by the publish: {took:?}"
                );
                println!("redis: the waiter woke {took:?} after it began (the write at 200 ms)");
            } else {
                assert!(
                    took >= Duration::from_millis(4_900),
                    "nothing to wake it: {took:?}"
                );
            }
        }
    });
}
