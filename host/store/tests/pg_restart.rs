//! Restarting PostgreSQL in the middle of a run: every failure is a clear,
//! retryable error, and nothing is lost: after recovery every intent is done
//! with exactly one effect.
//!
//! This restarts the machine's PostgreSQL (with `pg_ctlcluster`), so it lives
//! in a test binary of its own: cargo runs test binaries one at a time. It
//! needs the server and root; under `CI=true` their absence fails the test.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use intentkey::claim::{EffectResult, Lookup, Response, Status};
use intentkey_store::guard::{Attempt, Gateway, Guard};
use intentkey_store::open;

#[allow(dead_code)]
mod common;
use common::restart_postgres;

const PG_BASE: &str = "postgres://postgres@127.0.0.1:5432/test";
const KEYS: usize = 400;

const TEST: &str = "postgres_restart_mid_run_loses_nothing";

fn skip_or_fail(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{TEST}: CI=true: {why}"
    );
    // Straight to stderr, past the test harness's capture, so logs show it.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {TEST}: {why}");
}

#[derive(Default)]
struct Destination {
    effects: Mutex<HashMap<String, u32>>,
}

impl Destination {
    fn pay(&self, key: &str) -> Response {
        *self.effects.lock().unwrap().entry(key.into()).or_default() += 1;
        Response::json(201, "{}")
    }
}

impl Gateway for Destination {
    fn lookup(&self, key: &str) -> Lookup {
        match self.effects.lock().unwrap().get(key) {
            Some(_) => Lookup::Found(Response::json(201, "{}")),
            None => Lookup::Absent,
        }
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

#[test]
fn postgres_restart_mid_run_loses_nothing() {
    let mut admin = match postgres::Client::connect(PG_BASE, postgres::NoTls) {
        Ok(c) => c,
        Err(e) => return skip_or_fail(&format!("PostgreSQL is not reachable at {PG_BASE}: {e}")),
    };
    let schema = format!("ik_rs_restart_{}", std::process::id());
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap();
    drop(admin);
    let url = format!("{PG_BASE}?options=-csearch_path%3D{schema}");
    let store = open(&url).unwrap();
    let dest = Arc::new(Destination::default());
    let errors = Mutex::new(Vec::<String>::new());
    let restarted = AtomicBool::new(false);

    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let guard = Guard::new(store.as_ref());
            for i in 0..KEYS {
                let key = format!("restart-{i:04}");
                let attempt = Attempt {
                    key: key.clone(),
                    fingerprint: "fp".into(),
                    tenant_id: "t".into(),
                    action_type: "a".into(),
                    prior: None,
                };
                // Retry the same attempt until the store answers: a retry never
                // re-runs an effect whose claim already landed (it sees in-flight).
                loop {
                    match guard.run(&attempt, 1_700_000_000, |k| dest.pay(k)) {
                        Ok(_) => break,
                        Err(e) => {
                            assert!(
                                e.is_retryable() && e.code().as_str() == "store-unavailable",
                                "a restart must give retryable errors (store-unavailable), got {}: {e}",
                                e.code().as_str()
                            );
                            errors.lock().unwrap().push(e.to_string());
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
                if i == KEYS / 4 {
                    restarted.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        while !restarted.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Err(why) = restart_postgres() {
            skip_or_fail(&format!("{why}; the run went on without a restart"));
        }
        worker.join().unwrap();
    });

    // Recovery settles what the restart interrupted, without duplicates.
    let guard = Guard::new(store.as_ref());
    let recovered = loop {
        match guard.recover_due(
            dest.as_ref(),
            1_700_001_000,
            300,
            Some(&mut |k: &str| EffectResult::Answered(dest.pay(k))),
        ) {
            Ok(actions) => break actions,
            Err(e) if e.is_retryable() => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("{e}"),
        }
    };
    let records = store.list(None, KEYS * 2).unwrap();
    let errors = errors.into_inner().unwrap();
    eprintln!(
        "postgres restart: {KEYS} intents, {} retryable errors during the restart (first: {:?}), {} settled by recovery",
        errors.len(),
        errors.first(),
        recovered.len()
    );
    assert_eq!(records.len(), KEYS, "nothing lost");
    assert!(
        records.iter().all(|r| r.status == Status::Done),
        "every intent done"
    );
    let effects = dest.effects.lock().unwrap();
    assert_eq!(effects.len(), KEYS);
    assert!(
        effects.values().all(|&n| n == 1),
        "exactly one effect per intent"
    );
    assert!(
        errors.iter().all(|e| e.contains("postgres")),
        "errors name the store: {errors:?}"
    );
    let mut admin = postgres::Client::connect(PG_BASE, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .unwrap();
}
