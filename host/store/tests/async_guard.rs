//! The async guard (`intentkey_store::tokio::AsyncGuard`, cargo feature
//! `tokio`) drives the core's run flow on a tokio runtime: an effect runs
//! once per key on the memory store, on PostgreSQL (`PgStore`) and on
//! MariaDB (`AsyncMysqlStore`, many concurrent attempts), and recovery of a crashed run re-executes once
//! with the same key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[allow(dead_code)]
mod common;
#[path = "common/mysql_db.rs"]
mod mysql_db;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use intentkey::claim::{
    ClaimOutcome, EffectResult, Finished, Lookup, Recovered, RecoveryAction, Response, Status,
};
use intentkey_store::tokio::{
    memory, AsyncGateway, AsyncGuard, AsyncMysqlStore, AsyncStore, PgStore,
};

use common::{attempt, PgSchema};

const NOW: i64 = 1_700_000_000;

/// Three runs of one attempt, one after the other: one effect, then replays.
async fn runs_once_in_sequence(store: &dyn AsyncStore) {
    let guard = AsyncGuard::new(store);
    let effects = AtomicU32::new(0);
    let mut answers = Vec::new();
    for _ in 0..3 {
        let answer = guard
            .run(&attempt("seq-1", "fp"), NOW, |key| {
                effects.fetch_add(1, Ordering::SeqCst);
                async move { Response::json(201, format!(r#"{{"paid_with_key":"{key}"}}"#)) }
            })
            .await
            .unwrap();
        answers.push(answer);
    }
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    assert_eq!(answers[0].outcome, ClaimOutcome::Owned);
    assert_eq!(answers[0].finished, Some(Finished::Stored));
    assert!(!answers[0].replayed);
    for again in &answers[1..] {
        assert!(again.replayed, "{again:?}");
        assert_eq!(again.status, 201);
        assert_eq!(again.body_text(), r#"{"paid_with_key":"seq-1"}"#);
    }
    // Another payload under the same key is refused, and runs nothing.
    let conflict = guard
        .run(&attempt("seq-1", "other"), NOW, |_| async {
            panic!("a conflicting attempt ran its effect")
        })
        .await
        .unwrap();
    assert_eq!(conflict.status, 422);
    assert_eq!(conflict.outcome, ClaimOutcome::PayloadConflict);
}

/// Many attempts of one key at once, from tasks on several threads: one effect.
async fn runs_once_concurrently(store: Arc<dyn AsyncStore>) {
    let effects = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = Arc::clone(&store);
        let effects = Arc::clone(&effects);
        tasks.push(tokio::spawn(async move {
            let guard = AsyncGuard::new(&*store);
            guard
                .run(&attempt("race-1", "fp"), NOW, |_| async move {
                    effects.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    Response::json(201, r#"{"ok":true}"#)
                })
                .await
                .unwrap()
        }));
    }
    let mut owned = 0;
    for task in tasks {
        let answer = task.await.unwrap();
        if answer.outcome == ClaimOutcome::Owned {
            owned += 1;
        }
    }
    assert_eq!(owned, 1);
    assert_eq!(effects.load(Ordering::SeqCst), 1);
}

/// A destination that says a key was never paid, and can be trusted on it.
struct Absent;

impl AsyncGateway for Absent {
    fn ask<'a>(&'a self, _key: &'a str) -> Pin<Box<dyn Future<Output = Lookup> + Send + 'a>> {
        Box::pin(async { Lookup::Absent })
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

/// A run that crashed (its effect failed, the record stays in flight) is
/// recovered once it is stale: the destination says absent, the effect is
/// re-executed once with the same key, and a second recovery finds it done.
async fn recovers_a_crashed_run(store: &dyn AsyncStore) {
    let guard = AsyncGuard::new(store);
    let (answer, ran) = guard
        .run_with(&attempt("crash-1", "fp"), NOW, |_| async {
            EffectResult::Failed
        })
        .await
        .unwrap();
    assert_eq!(ran, Some(EffectResult::Failed));
    assert_eq!(answer.outcome, ClaimOutcome::Owned);
    assert_eq!(
        store.get("crash-1".into()).await.unwrap().unwrap().status,
        Status::InFlight
    );
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let reexecute = move |key: String| -> Pin<Box<dyn Future<Output = EffectResult> + Send>> {
        counted.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { EffectResult::Answered(Response::json(201, format!("\"{key}\""))) })
    };
    // Not due yet: left alone.
    let early = guard
        .recover("crash-1", &Absent, NOW + 1, Some(&reexecute))
        .await
        .unwrap();
    assert!(
        matches!(early.outcome, Recovered::NotDue { .. }),
        "{early:?}"
    );
    let later = NOW + 600;
    let recovered = guard
        .recover_due(&Absent, later, 10, Some(&reexecute))
        .await
        .unwrap();
    assert_eq!(recovered.len(), 1);
    let (key, recovery) = &recovered[0];
    assert_eq!(key, "crash-1");
    assert!(
        matches!(
            recovery.outcome,
            Recovered::Applied(RecoveryAction::ReExecute)
        ),
        "{recovery:?}"
    );
    assert_eq!(recovery.finished, Some(Finished::Stored));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let again = guard
        .recover("crash-1", &Absent, later, Some(&reexecute))
        .await
        .unwrap();
    assert_eq!(again.outcome, Recovered::NotInFlight(Status::Done));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The retry replays the re-executed answer.
    let replay = guard
        .run(&attempt("crash-1", "fp"), later, |_| async {
            panic!("a recovered key ran its effect again")
        })
        .await
        .unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.body_text(), "\"crash-1\"");
}

#[test]
fn the_async_guard_runs_an_effect_once_on_the_memory_store() {
    common::runtime(4).block_on(async {
        runs_once_in_sequence(&memory()).await;
        runs_once_concurrently(Arc::new(memory())).await;
        recovers_a_crashed_run(&memory()).await;
    });
}

#[test]
fn the_async_guard_runs_an_effect_once_on_postgres() {
    let Some(schema) = PgSchema::new("async_guard") else {
        return;
    };
    let url = schema.url();
    common::runtime(4).block_on(async {
        let store = PgStore::connect(&url, 8).await.unwrap();
        runs_once_in_sequence(&store).await;
        runs_once_concurrently(Arc::new(store.clone())).await;
        recovers_a_crashed_run(&store).await;
    });
    drop(schema);
}

#[test]
fn the_async_guard_runs_an_effect_once_on_mysql() {
    let Some(db) = mysql_db::MysqlDb::new("async_guard_mysql") else {
        return;
    };
    let url = db.url();
    common::runtime(4).block_on(async {
        let store = AsyncMysqlStore::connect(&url, 8).await.unwrap();
        runs_once_in_sequence(&store).await;
        runs_once_concurrently(Arc::new(store.clone())).await;
        recovers_a_crashed_run(&store).await;
        // A duplicate key is "not inserted", never an error; a key past
        // MySQL's 255 characters is refused by name.
        let r = intentkey::claim::Record::in_flight(&attempt("dup", "fp"), "tok", NOW);
        assert!(store.insert(r.clone()).await.unwrap());
        assert!(!store.insert(r).await.unwrap());
        let long =
            intentkey::claim::Record::in_flight(&attempt(&"k".repeat(256), "fp"), "tok", NOW);
        let e = store.insert(long).await.unwrap_err();
        assert!(e.message().contains("key is 256 characters"), "{e}");
    });
    drop(db);
}
