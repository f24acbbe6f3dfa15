//! Claim, replay and recovery on every store, against the real servers:
//! outcomes, races (threads and processes), crash faults, and recovery.
//!
//! PostgreSQL tests use 127.0.0.1:5432 (trust auth, database `test`), each in
//! a schema of its own; Redis tests use 127.0.0.1:6379 database 1, each under
//! a key prefix of its own. Without a server they fail under `CI=true` and
//! print `SKIPPED: <test>: …` otherwise.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;
#[path = "common/dynamo_db.rs"]
mod dynamo_db;
#[path = "common/mysql_db.rs"]
mod mysql_db;
#[path = "common/redis_db.rs"]
mod redis_db;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use intentkey::claim::{
    ClaimOutcome, Completion, EffectResult, Finished, Lookup, OpResult, Record, Recovered,
    RecoveryAction, Release, Replacement, Response, Status,
};
use intentkey_store::guard::{Gateway, Guard};
use intentkey_store::{open, Store, StoreError};

use common::{
    attempt, open_effects, rand_u32, record_effect, spawn_child, temp_path, EffectsFile, PgSchema,
    TempSqlite,
};
use dynamo_db::DynamoTable;
use mysql_db::MysqlDb;
use redis_db::RedisPrefix;

/// A fake destination: counts effects per key, answers look-ups.
#[derive(Default)]
struct FakeDestination {
    effects: std::sync::Mutex<HashMap<String, u32>>,
    read_your_writes: bool,
    unknown: bool,
}

impl FakeDestination {
    fn pay(&self, key: &str) -> Response {
        *self.effects.lock().unwrap().entry(key.into()).or_default() += 1;
        Response::json(201, format!(r#"{{"paid":"{key}"}}"#))
    }
    fn effects(&self, key: &str) -> u32 {
        self.effects.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

impl Gateway for FakeDestination {
    fn lookup(&self, key: &str) -> Lookup {
        if self.unknown {
            return Lookup::Unknown;
        }
        match self.effects(key) {
            0 => Lookup::Absent,
            _ => Lookup::Found(Response::json(201, format!(r#"{{"paid":"{key}"}}"#))),
        }
    }
    fn read_your_writes(&self) -> bool {
        self.read_your_writes
    }
}

/// A store that counts the reads (`get`) made through it.
struct CountingGets<'s> {
    inner: &'s dyn Store,
    gets: AtomicU32,
}

impl Store for CountingGets<'_> {
    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        self.inner.insert(record)
    }
    fn claim(&self, record: &Record) -> Result<OpResult, StoreError> {
        self.inner.claim(record)
    }
    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key)
    }
    fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
        self.inner.complete(completion)
    }
    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
        self.inner.replace(replacement)
    }
    fn release(&self, release: &Release) -> Result<bool, StoreError> {
        self.inner.release(release)
    }
    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        self.inner.list(status, limit)
    }
    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.inner.purge(now)
    }
}

/// `Store::claim` on `store`: a first claim inserts; a repeat answers "not
/// inserted" or the record it lost to (exactly the stored one). A guarded
/// replay then reads nothing after the claim when the store answers the
/// record, and reads it when it does not. Whether it answered the record.
fn claim_answers(store: &dyn Store) -> bool {
    let key = format!("k-claim-{}", rand_u32());
    let core_attempt = |fp: &str| intentkey::claim::Attempt {
        key: key.clone(),
        fingerprint: fp.into(),
        tenant_id: "t".into(),
        action_type: "pay".into(),
        prior: None,
    };
    let first = Record::in_flight(&core_attempt("fp"), &"a".repeat(32), 1_700_000_000);
    assert_eq!(store.claim(&first).unwrap(), OpResult::Inserted(true));
    let second = Record::in_flight(&core_attempt("fp"), &"b".repeat(32), 1_700_000_001);
    let answered = match store.claim(&second).unwrap() {
        OpResult::Inserted(false) => false,
        OpResult::Existing(existing) => {
            assert_eq!(existing, first, "the record the claim lost to");
            assert_eq!(store.get(&key).unwrap().as_ref(), Some(&first));
            true
        }
        other => panic!("a repeated claim answered {other:?}"),
    };
    // A guarded replay through a store that counts its reads.
    let counting = CountingGets {
        inner: store,
        gets: AtomicU32::new(0),
    };
    let guard = Guard::new(&counting);
    let dest = FakeDestination::default();
    let replayed = attempt(&format!("{key}-replay"), "fp");
    let now = 1_700_000_000;
    guard.run(&replayed, now, |k| dest.pay(k)).unwrap();
    let before = counting.gets.load(Ordering::SeqCst);
    let again = guard.run(&replayed, now + 1, |k| dest.pay(k)).unwrap();
    assert!(again.replayed);
    let reads = counting.gets.load(Ordering::SeqCst) - before;
    assert_eq!(reads, u32::from(!answered), "reads after a repeated claim");
    answered
}

/// Every outcome of the table in DESIGN.md, on one store.
fn outcomes(store: &dyn Store) {
    let guard = Guard::new(store).with_ttl(100);
    let dest = FakeDestination::default();
    let now = 1_700_000_000;
    // First time: owned, the effect runs with the key.
    let a = guard
        .run(&attempt("k-a", "fp-a"), now, |k| dest.pay(k))
        .unwrap();
    assert_eq!(
        (a.outcome.as_str(), a.finished, a.status, a.replayed),
        ("owned", Some(Finished::Stored), 201, false)
    );
    // Repeat after completion: the stored response, replayed.
    let again = guard
        .run(&attempt("k-a", "fp-a"), now + 1, |k| dest.pay(k))
        .unwrap();
    assert_eq!(
        (
            again.outcome.as_str(),
            again.finished,
            again.status,
            again.replayed,
            again.body_text()
        ),
        ("done", None, 201, true, a.body_text())
    );
    assert_eq!(dest.effects("k-a"), 1);
    // A binary body (every byte value, a NUL, invalid UTF-8) and its
    // headers come back byte for byte.
    let pdf: Vec<u8> = b"%PDF-1.7\n"
        .iter()
        .copied()
        .chain((0..=255u8).rev())
        .collect();
    let stored = Response::new(200, "application/pdf", pdf.clone())
        .with_header("Content-Disposition", "attachment; filename=\"r.pdf\"");
    let first = guard
        .run(&attempt("k-pdf", "fp-pdf"), now, |_| stored.clone())
        .unwrap();
    let replay = guard
        .run(&attempt("k-pdf", "fp-pdf"), now + 1, |_| unreachable!())
        .unwrap();
    assert_eq!(
        (
            first.replayed,
            replay.replayed,
            replay.content_type.as_str()
        ),
        (false, true, "application/pdf")
    );
    assert_eq!(replay.body, pdf, "a binary body replays byte for byte");
    assert_eq!(replay.headers, stored.headers);
    // Same key, other payload: 422.
    let conflict = guard
        .run(&attempt("k-a", "fp-other"), now + 2, |k| dest.pay(k))
        .unwrap();
    assert_eq!(
        (conflict.outcome, conflict.status),
        (ClaimOutcome::PayloadConflict, 422)
    );
    assert_eq!(conflict.content_type, "application/problem+json");
    // While the original runs: 409.
    let owner = guard.claim(&attempt("k-b", "fp-b"), now).unwrap();
    assert_eq!(owner.outcome, ClaimOutcome::Owned);
    assert_eq!(owner.owner_token.len(), 32, "an owner token is 32 hex");
    let busy = guard
        .run(&attempt("k-b", "fp-b"), now + 3, |k| dest.pay(k))
        .unwrap();
    assert_eq!((busy.outcome, busy.status), (ClaimOutcome::InFlight, 409));
    assert_eq!(dest.effects("k-b"), 0);
    // Errors are stored and replayed too.
    let failed = guard
        .run(&attempt("k-c", "fp-c"), now, |_| {
            Response::json(402, r#"{"error":"insufficient_funds"}"#)
        })
        .unwrap();
    let replayed = guard
        .run(&attempt("k-c", "fp-c"), now + 5, |k| dest.pay(k))
        .unwrap();
    assert_eq!(
        (failed.status, replayed.status, replayed.replayed),
        (402, 402, true)
    );
    assert_eq!(dest.effects("k-c"), 0);
    // Only the owner completes; a late completion never overwrites a finished record.
    let late = |status| EffectResult::Answered(Response::json(status, "late"));
    assert_eq!(
        guard
            .finish("k-b", "not-the-owner", late(500), now + 9)
            .unwrap(),
        Finished::Superseded
    );
    assert_eq!(
        guard
            .finish("k-b", &owner.owner_token, late(500), now + 10)
            .unwrap(),
        Finished::Stored
    );
    assert_eq!(
        guard
            .finish("k-b", &owner.owner_token, late(200), now + 11)
            .unwrap(),
        Finished::Superseded,
        "only in-flight records are completed"
    );
    let k_b = store.get("k-b").unwrap().unwrap();
    assert_eq!(
        (
            k_b.status,
            k_b.response.as_ref().map(|r| r.status),
            k_b.owner_token.as_str()
        ),
        (Status::Done, Some(500), owner.owner_token.as_str())
    );
    // Purge: only done records past their expiry; in_flight never, whatever its age.
    let ancient = guard.claim(&attempt("k-old", "fp"), 0).unwrap();
    assert_eq!(ancient.outcome, ClaimOutcome::Owned);
    assert_eq!(guard.purge(now + 50).unwrap(), 0);
    assert_eq!(
        guard.purge(now + 200).unwrap(),
        4,
        "k-a, k-pdf, k-b and k-c expired"
    );
    assert_eq!(
        store.get("k-old").unwrap().unwrap().status,
        Status::InFlight
    );
    assert!(store.get("k-a").unwrap().is_none());
    assert_eq!(store.list(Some(Status::InFlight), 10).unwrap().len(), 1);
    claim_answers(store);
}

/// Recovery: found → done; absent trusted only with read-your-writes; unknown
/// backs off 1, 2, 4 minutes, ends in reconciliation, never re-executes.
fn recovery(store: &dyn Store) {
    let guard = Guard::new(store);
    let now = 1_700_000_000;
    let later = now + 600; // past the default stale-after (5 minutes)
    assert_eq!(
        guard
            .recover("r-missing", &FakeDestination::default(), later, None)
            .unwrap()
            .outcome,
        Recovered::Missing
    );
    // Crash after the effect: found.
    let dest = FakeDestination::default();
    guard.claim(&attempt("r-found", "fp"), now).unwrap();
    dest.pay("r-found");
    let mut runs = 0;
    let actions = guard
        .recover_due(
            &dest,
            later,
            300,
            Some(&mut |_: &str| {
                runs += 1;
                EffectResult::Answered(Response::json(201, ""))
            }),
        )
        .unwrap();
    assert!(
        matches!(actions.as_slice(), [(k, r)] if k == "r-found"
            && matches!(r.outcome, Recovered::Applied(RecoveryAction::RecordDone(_)))
            && r.finished.is_none()),
        "{actions:?}"
    );
    assert_eq!((runs, dest.effects("r-found")), (0, 1));
    assert_eq!(store.get("r-found").unwrap().unwrap().status, Status::Done);
    assert_eq!(
        guard
            .recover("r-found", &dest, later, None)
            .unwrap()
            .outcome,
        Recovered::NotInFlight(Status::Done)
    );
    // Crash before the effect, read-your-writes destination: absent → re-execute once, same key.
    let ryw = FakeDestination {
        read_your_writes: true,
        ..FakeDestination::default()
    };
    let original = guard.claim(&attempt("r-absent", "fp"), now).unwrap();
    let actions = guard
        .recover_due(
            &ryw,
            later,
            300,
            Some(&mut |k: &str| EffectResult::Answered(ryw.pay(k))),
        )
        .unwrap();
    let [(_, taken)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!(
        (&taken.outcome, taken.finished),
        (
            &Recovered::Applied(RecoveryAction::ReExecute),
            Some(Finished::Stored)
        )
    );
    assert_ne!(taken.owner_token, original.owner_token);
    assert_eq!(ryw.effects("r-absent"), 1);
    let record = store.get("r-absent").unwrap().unwrap();
    assert_eq!(
        (record.status, record.owner_token.as_str()),
        (Status::Done, taken.owner_token.as_str())
    );
    // Absent from a destination without read-your-writes counts as unknown.
    let eventual = FakeDestination::default();
    guard.claim(&attempt("r-eventual", "fp"), now).unwrap();
    let r = guard
        .recover(
            "r-eventual",
            &eventual,
            later,
            Some(&mut |k: &str| EffectResult::Answered(eventual.pay(k))),
        )
        .unwrap();
    assert!(
        matches!(
            r.outcome,
            Recovered::Applied(RecoveryAction::CheckLater { lookups: 1, .. })
        ),
        "{r:?}"
    );
    assert_eq!(eventual.effects("r-eventual"), 0);
    // Unknown: never re-executes; 1, 2, 4 minutes; then needs_reconciliation.
    let unknown = FakeDestination {
        unknown: true,
        read_your_writes: true,
        ..FakeDestination::default()
    };
    guard.claim(&attempt("r-unknown", "fp"), now).unwrap();
    let mut t = later;
    let mut waits = Vec::new();
    let mut reexecuted = 0;
    for _ in 0..10 {
        let actions = guard
            .recover(
                "r-unknown",
                &unknown,
                t,
                Some(&mut |_: &str| {
                    reexecuted += 1;
                    EffectResult::Answered(Response::json(201, ""))
                }),
            )
            .unwrap();
        match actions.outcome {
            Recovered::Applied(RecoveryAction::CheckLater { next_lookup_at, .. }) => {
                waits.push(next_lookup_at - t);
                // Not due before its time.
                assert_eq!(
                    guard
                        .recover("r-unknown", &unknown, next_lookup_at - 1, None)
                        .unwrap()
                        .outcome,
                    Recovered::NotDue {
                        due_at: next_lookup_at
                    }
                );
                t = next_lookup_at;
            }
            Recovered::Applied(RecoveryAction::Reconcile { lookups: 4 }) => break,
            other => panic!("unexpected recovery {other:?}"),
        }
    }
    assert_eq!(waits, [60, 120, 240]);
    assert_eq!(reexecuted, 0, "unknown never re-executes");
    assert_eq!(unknown.effects("r-unknown"), 0);
    let listed = store.list(Some(Status::NeedsReconciliation), 10).unwrap();
    assert_eq!(
        listed.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["r-unknown"]
    );
    let blocked = guard
        .run(&attempt("r-unknown", "fp"), t + 60, |k| unknown.pay(k))
        .unwrap();
    assert_eq!(blocked.status, 409);
    assert_eq!(unknown.effects("r-unknown"), 0);
    assert_eq!(
        guard
            .recover("r-unknown", &ryw, t + 10_000, None)
            .unwrap()
            .outcome,
        Recovered::NotInFlight(Status::NeedsReconciliation)
    );
}

#[test]
fn memory_store() {
    let store = open("memory:").unwrap();
    outcomes(store.as_ref());
    let store = open("memory:").unwrap();
    recovery(store.as_ref());
}

#[test]
fn sqlite_store() {
    let db = TempSqlite::new("outcomes");
    outcomes(open(&db.url()).unwrap().as_ref());
    let db = TempSqlite::new("recovery");
    recovery(open(&db.url()).unwrap().as_ref());
    // Reopening runs no migration twice and keeps the records.
    assert_eq!(open(&db.url()).unwrap().list(None, 10).unwrap().len(), 4);
}

#[test]
fn postgres_store() {
    let Some(schema) = PgSchema::new("postgres_store") else {
        return;
    };
    outcomes(open(&schema.url()).unwrap().as_ref());
    let Some(schema) = PgSchema::new("postgres_store") else {
        return;
    };
    recovery(open(&schema.url()).unwrap().as_ref());
    // A second connection migrates nothing twice.
    assert_eq!(
        open(&schema.url()).unwrap().list(None, 10).unwrap().len(),
        4
    );
}

#[test]
fn mysql_store() {
    let Some(db) = MysqlDb::new("mysql_store") else {
        return;
    };
    outcomes(open(&db.url()).unwrap().as_ref());
    let Some(db) = MysqlDb::new("mysql_store") else {
        return;
    };
    recovery(open(&db.url()).unwrap().as_ref());
    // A second store migrates nothing twice and sees the same records.
    assert_eq!(open(&db.url()).unwrap().list(None, 10).unwrap().len(), 4);
}

/// MySQL's own: keys compare byte for byte (not the default
/// case-insensitive collation), a key past 255 characters is refused by
/// name, bodies past MySQL's 64 KiB TEXT replay whole, and eight stores
/// opened at once on a new database all migrate (the named lock).
#[test]
fn mysql_store_keys_bodies_and_concurrent_migrations() {
    let Some(db) = MysqlDb::new("mysql_specifics") else {
        return;
    };
    let url = db.url();
    let stores: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(|| open(&url))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    let store = stores[0].as_ref();
    let guard = Guard::new(store);
    // Case, accents and trailing spaces make other keys (the `_bin`
    // collations ignore trailing spaces: the key column is binary).
    for key in ["Key-A", "key-a", "key-á", "key-a ", "key-a  "] {
        let c = guard.claim(&attempt(key, "fp"), 1_700_000_000).unwrap();
        assert_eq!(c.outcome, ClaimOutcome::Owned, "{key:?}");
        assert_eq!(store.get(key).unwrap().unwrap().key, key);
    }
    let long = "k".repeat(256);
    let e = store
        .insert(&intentkey::claim::Record::in_flight(
            &attempt(&long, "fp"),
            "t",
            1,
        ))
        .unwrap_err();
    assert!(
        !e.is_retryable() && e.message().contains("key is 256 characters"),
        "{e}"
    );
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let body = big.clone();
    let first = guard
        .run(&attempt("big", "fp"), 1_700_000_000, move |_| {
            Response::new(200, "application/octet-stream", body)
        })
        .unwrap();
    assert!(!first.replayed);
    let replay = stores[7]
        .get("big")
        .unwrap()
        .and_then(|r| r.response)
        .unwrap();
    assert_eq!(replay.body, big);
    assert_eq!(store.list(None, 10).unwrap().len(), 6);
}

/// A connection the server kills (as a restart or a proxy would) costs one
/// retryable error, never a wrong answer, and the store heals by itself:
/// the next operation runs on a new connection.
#[test]
fn mysql_store_heals_after_its_connections_are_killed() {
    use mysql::prelude::Queryable;
    let Some(db) = MysqlDb::new("mysql_killed") else {
        return;
    };
    let store = open(&db.url()).unwrap();
    let guard = Guard::new(store.as_ref());
    let first = guard.claim(&attempt("k1", "fp"), 1_700_000_000).unwrap();
    assert_eq!(first.outcome, ClaimOutcome::Owned);
    let mut admin = mysql_db::mysql_admin("mysql_killed").unwrap();
    let ids: Vec<u64> = admin
        .exec(
            "SELECT id FROM information_schema.processlist WHERE db = ?",
            (db.name.as_str(),),
        )
        .unwrap();
    assert!(!ids.is_empty(), "the store holds a connection");
    for id in ids {
        admin.query_drop(format!("KILL {id}")).unwrap();
    }
    let mut errors = 0;
    let again = loop {
        match guard.claim(&attempt("k1", "fp"), 1_700_000_001) {
            Ok(c) => break c,
            Err(e) => {
                assert!(e.is_retryable(), "a killed connection is retryable: {e}");
                errors += 1;
                assert!(errors <= 1, "one failure, then a new connection");
            }
        }
    };
    // The pooled connection was dead: one retryable error, then a new one.
    assert_eq!(errors, 1, "the killed connection fails once");
    // The record survived, and it is still the first owner's.
    assert_eq!(again.outcome, ClaimOutcome::InFlight);
    assert_eq!(
        store.get("k1").unwrap().unwrap().owner_token,
        first.owner_token
    );
}

#[test]
fn redis_store() {
    let Some(prefix) = RedisPrefix::new("redis_store") else {
        return;
    };
    outcomes(open(&prefix.url()).unwrap().as_ref());
    assert!(
        claim_answers(open(&prefix.url()).unwrap().as_ref()),
        "Redis: a repeated claim answers the record in one round trip"
    );
    let Some(prefix) = RedisPrefix::new("redis_store") else {
        return;
    };
    recovery(open(&prefix.url()).unwrap().as_ref());
    // A second connection sees the same records.
    assert_eq!(
        open(&prefix.url()).unwrap().list(None, 10).unwrap().len(),
        4
    );
}

/// The conformance suite on the Redis Cluster (the cluster layout: each
/// record and its bucket's indexes in one slot), and the records spread
/// over every master.
#[test]
fn redis_cluster_store() {
    let Some(prefix) = RedisPrefix::cluster("redis_cluster_store") else {
        return;
    };
    outcomes(open(&prefix.url()).unwrap().as_ref());
    assert!(
        claim_answers(open(&prefix.url()).unwrap().as_ref()),
        "Redis Cluster: a repeated claim answers the record in one round trip"
    );
    let Some(prefix) = RedisPrefix::cluster("redis_cluster_store") else {
        return;
    };
    let store = open(&prefix.url()).unwrap();
    recovery(store.as_ref());
    assert_eq!(
        open(&prefix.url()).unwrap().list(None, 10).unwrap().len(),
        4
    );
    // 200 records: on every master, each with its bucket's tag, and every
    // one listed, inspected and purged through the store.
    spread(store.as_ref(), 200);
    let per_master = redis_db::keys_per_master(&format!("{{{}:*:rec:*", prefix.prefix));
    assert_eq!(per_master.len(), 3, "three masters: {per_master:?}");
    assert!(
        per_master.iter().all(|&n| n > 0),
        "records on every master: {per_master:?}"
    );
    assert_eq!(per_master.iter().sum::<usize>(), 204);
    list_and_purge_the_spread(store.as_ref(), 200, 2);
    assert_eq!(
        redis_db::keys_per_master(&format!("{{{}:*:rec:*", prefix.prefix))
            .iter()
            .sum::<usize>(),
        4
    );
}

/// The conformance suite on DynamoDB (a table of its own on dynalite), the
/// records listed and purged through both indexes, and a response over the
/// item limit refused with nothing written.
#[test]
fn dynamodb_store() {
    let Some(t) = DynamoTable::new("dynamodb_store") else {
        return;
    };
    outcomes(open(&t.url()).unwrap().as_ref());
    let Some(t) = DynamoTable::new("dynamodb_store") else {
        return;
    };
    let store = open(&t.url()).unwrap();
    recovery(store.as_ref());
    assert_eq!(open(&t.url()).unwrap().list(None, 10).unwrap().len(), 4);
    spread(store.as_ref(), 120);
    list_and_purge_the_spread(store.as_ref(), 120, 2);
    assert_eq!(store.list(None, 1000).unwrap().len(), 4);
    // A body over DynamoDB's 400 KB item: response-too-large, the record
    // left in flight as it was (nothing half-written).
    let guard = Guard::new(store.as_ref());
    let owner = guard.claim(&attempt("big", "fp"), 1_700_000_000).unwrap();
    let big = Response::new(200, "application/octet-stream", vec![1; 500 * 1024]);
    let e = store
        .complete(&intentkey::claim::Completion {
            key: "big".into(),
            owner_token: owner.owner_token.clone(),
            response: big,
            expires_at: 1_800_000_000,
            fast: false,
        })
        .unwrap_err();
    assert_eq!(e.code().as_str(), "response-too-large", "{e}");
    let left = store.get("big").unwrap().unwrap();
    assert_eq!((left.status, left.response), (Status::InFlight, None));
    // 300 KB fits.
    let fits = Response::new(200, "application/octet-stream", vec![2; 300 * 1024]);
    guard
        .finish(
            "big",
            &owner.owner_token,
            EffectResult::Answered(fits.clone()),
            1_700_000_001,
        )
        .unwrap();
    assert_eq!(store.get("big").unwrap().unwrap().response, Some(fits));
}

/// `n` done records (`spread-000` …), expiring at 1_700_000_010.
fn spread(store: &dyn Store, n: usize) {
    let guard = Guard::new(store).with_ttl(10);
    for i in 0..n {
        guard
            .run(
                &attempt(&format!("spread-{i:03}"), "fp"),
                1_700_000_000,
                |_| Response::json(200, "{}"),
            )
            .unwrap();
    }
}

/// Every `done` record listed in order (the spread's `n` and `others`), a
/// limit that keeps the oldest, and a purge that deletes exactly the spread.
fn list_and_purge_the_spread(store: &dyn Store, n: usize, others: usize) {
    let done = store.list(Some(Status::Done), 1000).unwrap();
    assert_eq!(done.len(), n + others, "{n} spread and {others} others");
    assert!(done
        .windows(2)
        .all(|w| (w[0].created_at, &w[0].key) <= (w[1].created_at, &w[1].key)));
    assert_eq!(store.list(Some(Status::Done), 7).unwrap(), done[..7]);
    assert_eq!(store.purge(1_700_000_011).unwrap(), n as u64);
}

/// The same on DynamoDB.
#[test]
fn race_threads_dynamodb_one_store() {
    let Some(t) = DynamoTable::new("race_threads_dynamodb") else {
        return;
    };
    race_threads(&t.url(), "dynamodb threads");
}

#[test]
fn race_processes_dynamodb() {
    let Some(t) = DynamoTable::new("race_processes_dynamodb") else {
        return;
    };
    race_processes(&t.url(), "dynamodb processes");
}

#[test]
fn faults_kill_the_owner_between_effect_and_completion_dynamodb() {
    let Some(t) = DynamoTable::new("faults_dynamodb") else {
        return;
    };
    faults(&t.url(), "dynamodb");
}

const CONTENDERS: usize = 16;
const KEYS: usize = 1000;

/// Claims every key in a contender-specific order; returns the keys it owns.
fn contend(store: &dyn Store, contender: usize) -> Vec<String> {
    let guard = Guard::new(store);
    let mut order: Vec<usize> = (0..KEYS).collect();
    // Each contender walks the keys from a different offset, so they collide.
    order.rotate_left(contender * KEYS / CONTENDERS);
    let mut owned = Vec::new();
    for i in order {
        let key = format!("race-{i:04}");
        let claimed = loop {
            match guard.claim(&attempt(&key, "fp"), 1_700_000_000) {
                Ok(c) => break c,
                Err(e) if e.is_retryable() => continue,
                Err(e) => panic!("contender {contender}: {e}"),
            }
        };
        if claimed.outcome == ClaimOutcome::Owned {
            owned.push(key);
        } else {
            assert_eq!(claimed.outcome, ClaimOutcome::InFlight);
        }
    }
    owned
}

fn assert_one_owner_per_key(owned: &[Vec<String>], store: &dyn Store, what: &str) {
    let mut owners: BTreeMap<&str, usize> = BTreeMap::new();
    for keys in owned {
        for k in keys {
            *owners.entry(k).or_default() += 1;
        }
    }
    assert_eq!(owners.len(), KEYS, "{what}: every key has an owner");
    assert!(
        owners.values().all(|&n| n == 1),
        "{what}: exactly one owner per key"
    );
    assert_eq!(
        store.list(None, KEYS * 2).unwrap().len(),
        KEYS,
        "{what}: no lost or extra records"
    );
    eprintln!(
        "{what}: {CONTENDERS} contenders × {KEYS} keys: {} keys, one owner each, {KEYS} records",
        owners.len()
    );
}

#[test]
fn race_threads_postgres() {
    let Some(schema) = PgSchema::new("race_threads_postgres") else {
        return;
    };
    race_threads(&schema.url(), "postgres threads");
}

/// 16 threads, each with a store of its own, racing over the same keys.
fn race_threads(url: &str, what: &str) {
    open(url).unwrap(); // migrate once before the race
    let barrier = Arc::new(Barrier::new(CONTENDERS));
    let owned: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CONTENDERS)
            .map(|c| {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    let store = open(url).unwrap();
                    barrier.wait();
                    contend(store.as_ref(), c)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_one_owner_per_key(&owned, open(url).unwrap().as_ref(), what);
}

/// The child side of the process races: claims every key, writes the owned keys.
#[test]
fn race_child_process() {
    let (Ok(url), Ok(contender)) = (
        std::env::var("IK_RACE_URL"),
        std::env::var("IK_RACE_CONTENDER"),
    ) else {
        return; // only runs as a child of a race test
    };
    let store = open(&url).unwrap();
    let start = std::env::var("IK_RACE_START").unwrap();
    while !Path::new(&start).exists() {
        std::thread::yield_now();
    }
    // Owned keys go to a file: the test harness's own output shares stdout.
    let owned = contend(store.as_ref(), contender.parse().unwrap());
    std::fs::write(std::env::var("IK_RACE_OUT").unwrap(), owned.join("\n")).unwrap();
}

fn race_processes(url: &str, what: &str) {
    open(url).unwrap();
    let start = temp_path("race-start", "");
    let outs: Vec<_> = (0..CONTENDERS)
        .map(|c| temp_path(&format!("race-out-{c}"), ""))
        .collect();
    let children: Vec<_> = (0..CONTENDERS)
        .map(|c| {
            spawn_child(
                "race_child_process",
                &[
                    ("IK_RACE_URL", url.to_owned()),
                    ("IK_RACE_CONTENDER", c.to_string()),
                    ("IK_RACE_START", start.display().to_string()),
                    ("IK_RACE_OUT", outs[c].display().to_string()),
                ],
            )
        })
        .collect();
    std::fs::write(&start, b"go").unwrap();
    let owned: Vec<Vec<String>> = children
        .into_iter()
        .enumerate()
        .map(|(c, child)| {
            common::wait_ok(child, &format!("{what}: contender {c}"));
            let keys = std::fs::read_to_string(&outs[c]).unwrap();
            let _ = std::fs::remove_file(&outs[c]);
            keys.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect();
    let _ = std::fs::remove_file(&start);
    assert_one_owner_per_key(&owned, open(url).unwrap().as_ref(), what);
}

#[test]
fn race_threads_mysql() {
    let Some(db) = MysqlDb::new("race_threads_mysql") else {
        return;
    };
    race_threads(&db.url(), "mysql threads");
}

#[test]
fn race_processes_mysql() {
    let Some(db) = MysqlDb::new("race_processes_mysql") else {
        return;
    };
    race_processes(&db.url(), "mysql processes");
}

#[test]
fn faults_kill_the_owner_between_effect_and_completion_mysql() {
    let Some(db) = MysqlDb::new("faults_mysql") else {
        return;
    };
    faults(&db.url(), "mysql");
}

#[test]
fn race_processes_postgres() {
    let Some(schema) = PgSchema::new("race_processes_postgres") else {
        return;
    };
    race_processes(&schema.url(), "postgres processes");
}

/// One Redis store shared by 16 threads (its connection pool), racing.
#[test]
fn race_threads_redis_one_store() {
    let Some(prefix) = RedisPrefix::new("race_threads_redis") else {
        return;
    };
    let store = open(&prefix.url()).unwrap();
    let barrier = Barrier::new(CONTENDERS);
    let owned: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CONTENDERS)
            .map(|c| {
                let (store, barrier) = (store.as_ref(), &barrier);
                s.spawn(move || {
                    barrier.wait();
                    contend(store, c)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_one_owner_per_key(&owned, store.as_ref(), "redis threads, one store");
}

/// The same on the Redis Cluster.
#[test]
fn race_threads_redis_cluster_one_store() {
    let Some(prefix) = RedisPrefix::cluster("race_threads_redis_cluster") else {
        return;
    };
    race_threads(&prefix.url(), "redis cluster threads");
}

#[test]
fn race_processes_redis_cluster() {
    let Some(prefix) = RedisPrefix::cluster("race_processes_redis_cluster") else {
        return;
    };
    race_processes(&prefix.url(), "redis cluster processes");
}

#[test]
fn race_processes_redis() {
    let Some(prefix) = RedisPrefix::new("race_processes_redis") else {
        return;
    };
    race_processes(&prefix.url(), "redis processes");
}

#[test]
fn race_processes_sqlite() {
    let db = TempSqlite::new("race");
    race_processes(&db.url(), "sqlite processes");
}

/// The child side of the fault test: runs one guarded payment, pausing a
/// random moment between the effect and the completion; the parent kills it.
#[test]
fn fault_child_process() {
    let (Ok(url), Ok(dest_path), Ok(key)) = (
        std::env::var("IK_FAULT_URL"),
        std::env::var("IK_FAULT_DEST"),
        std::env::var("IK_FAULT_KEY"),
    ) else {
        return;
    };
    let store = open(&url).unwrap();
    let dest = open_effects(&dest_path);
    let pause: u64 = std::env::var("IK_FAULT_PAUSE_US").unwrap().parse().unwrap();
    Guard::new(store.as_ref())
        .run(&attempt(&key, "fp"), 1_700_000_000, |key| {
            record_effect(&dest, key, "owner");
            std::thread::sleep(Duration::from_micros(pause));
            Response::json(201, "{}")
        })
        .unwrap();
}

/// The effects file as a read-your-writes destination.
struct FileGateway<'a>(&'a EffectsFile);

impl Gateway for FileGateway<'_> {
    fn lookup(&self, key: &str) -> Lookup {
        match self.0.effects(key) {
            0 => Lookup::Absent,
            _ => Lookup::Found(Response::json(201, "{}")),
        }
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

#[test]
fn faults_kill_the_owner_between_effect_and_completion() {
    let db = TempSqlite::new("faults");
    faults(&db.url(), "sqlite");
}

#[test]
fn faults_kill_the_owner_between_effect_and_completion_redis() {
    let Some(prefix) = RedisPrefix::new("faults_redis") else {
        return;
    };
    faults(&prefix.url(), "redis");
}

#[test]
fn faults_kill_the_owner_between_effect_and_completion_redis_cluster() {
    let Some(prefix) = RedisPrefix::cluster("faults_redis_cluster") else {
        return;
    };
    faults(&prefix.url(), "redis cluster");
}

fn faults(url: &str, what: &str) {
    const TRIALS: usize = 200;
    let url = url.to_owned();
    let store = open(&url).unwrap();
    let dest = EffectsFile::new("faults-dest");
    let gateway = FileGateway(&dest);
    let guard = Guard::new(store.as_ref());
    let (mut killed_mid_effect, mut finished, mut before_effect) = (0, 0, 0);
    let recoveries = AtomicU32::new(0);
    for trial in 0..TRIALS {
        let key = format!("fault-{trial:03}");
        let mut child = spawn_child(
            "fault_child_process",
            &[
                ("IK_FAULT_URL", url.clone()),
                ("IK_FAULT_DEST", dest.path.display().to_string()),
                ("IK_FAULT_KEY", key.clone()),
                ("IK_FAULT_PAUSE_US", (rand_u32() % 20_000).to_string()),
            ],
        );
        // Kill at a random point. Even trials: a random moment after the
        // spawn (before, during or after the effect). Odd trials: a random
        // moment after the effect is seen at the destination, so that many
        // kills land between the effect and its completion however slowly
        // the machine starts processes.
        if trial % 2 == 1 {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while dest.effects(&key) == 0
                && std::time::Instant::now() < deadline
                && child.try_wait().unwrap().is_none()
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(Duration::from_micros(u64::from(rand_u32() % 5_000)));
        } else {
            std::thread::sleep(Duration::from_micros(u64::from(rand_u32() % 40_000)));
        }
        let _ = child.kill();
        let _ = child.wait();
        // What did the kill interrupt?
        let record = store.get(&key).unwrap();
        match (record.as_ref().map(|r| r.status), dest.effects(&key)) {
            (Some(Status::InFlight), 1) => killed_mid_effect += 1,
            (Some(Status::Done), 1) => finished += 1,
            _ => before_effect += 1,
        }
        // A redelivery never re-runs an in-flight effect.
        let effects_before = dest.effects(&key);
        let redelivery = guard
            .run(&attempt(&key, "fp"), 1_700_000_100, |k| {
                dest.record(k, "redelivery");
                Response::json(201, "{}")
            })
            .unwrap();
        if record.is_some_and(|r| r.status == Status::InFlight) {
            // 409, unless the completion the child had already sent when it
            // was killed landed after the read above (a slow server, such
            // as dynalite): then the redelivery replays it. Either way the
            // redelivery did not run the effect.
            let now = store.get(&key).unwrap().map(|r| r.status);
            assert!(
                redelivery.status == 409 || (now == Some(Status::Done) && redelivery.status == 201),
                "{key}: an in-flight record is never released ({}, now {now:?})",
                redelivery.status
            );
            assert_eq!(
                dest.effects(&key),
                effects_before,
                "{key}: the redelivery ran no effect"
            );
        }
        // Recovery settles the in-flight records by asking the destination.
        let actions = guard
            .recover_due(
                &gateway,
                1_700_001_000,
                300,
                Some(&mut |k: &str| {
                    dest.record(k, "recovery");
                    EffectResult::Answered(Response::json(201, "{}"))
                }),
            )
            .unwrap();
        recoveries.fetch_add(u32::try_from(actions.len()).unwrap(), Ordering::Relaxed);
        assert!(dest.effects(&key) <= 1, "{key}: duplicate effect");
        assert_eq!(
            store.get(&key).unwrap().map(|r| r.status),
            Some(Status::Done),
            "{key}: settled"
        );
        assert_eq!(
            dest.effects(&key),
            1,
            "{key}: exactly one effect after recovery"
        );
    }
    eprintln!(
        "faults ({what}): {TRIALS} trials: killed between effect and completion {killed_mid_effect}, before the effect {before_effect}, \
         finished {finished}; recoveries {}; duplicate effects 0",
        recoveries.load(Ordering::Relaxed)
    );
    assert!(
        killed_mid_effect >= 20,
        "too few kills landed between effect and completion ({killed_mid_effect})"
    );
}

/// Redis: the claim has no expiry; only `done` records get a TTL (when their
/// expiry is in the future by Redis's clock); purge removes what Redis
/// expired from the indexes, and a new claim replaces such leftovers.
#[test]
fn redis_ttl_only_on_done_records_and_purge_cleans_the_indexes() {
    let Some(p) = RedisPrefix::new("redis_ttl") else {
        return;
    };
    let store = open(&p.url()).unwrap();
    let mut admin = redis_db::redis_admin("redis_ttl").unwrap();
    let rec = |key: &str| format!("{}:rec:{key}", p.prefix);
    let done_idx = format!("{}:idx:done", p.prefix);
    let exp_idx = format!("{}:exp", p.prefix);
    let pttl = |c: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("PTTL").arg(rec(key)).query(c).unwrap()
    };
    let score = |c: &mut redis::Connection, set: &str, key: &str| -> Option<f64> {
        redis::cmd("ZSCORE").arg(set).arg(key).query(c).unwrap()
    };
    let now_seconds = || {
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
        )
        .unwrap()
    };
    let now = now_seconds();
    let ok = |_: &str| Response::json(201, "{}");
    let guard = Guard::new(store.as_ref()).with_ttl(3600);

    // In flight: no TTL, however old; the value is the core's layout.
    let owner = guard.claim(&attempt("ttl-flight", "fp"), 0).unwrap();
    assert_eq!(owner.outcome, ClaimOutcome::Owned);
    assert_eq!(
        pttl(&mut admin, "ttl-flight"),
        -1,
        "an in-flight record has no TTL"
    );
    let raw: String = redis::cmd("GET")
        .arg(rec("ttl-flight"))
        .query(&mut admin)
        .unwrap();
    assert!(
        raw.starts_with(&format!("ik1 in_flight {} 0 0 - -\n", owner.owner_token)),
        "{raw}"
    );
    // A recovery that leaves it in flight (unknown) gives it no TTL either.
    let unknown = FakeDestination {
        unknown: true,
        ..FakeDestination::default()
    };
    let r = guard.recover("ttl-flight", &unknown, 1000, None).unwrap();
    assert!(
        matches!(
            r.outcome,
            Recovered::Applied(RecoveryAction::CheckLater { .. })
        ),
        "{r:?}"
    );
    assert_eq!(pttl(&mut admin, "ttl-flight"), -1);

    // Done, expiry in the future: a TTL to it.
    guard.run(&attempt("ttl-done", "fp"), now, ok).unwrap();
    let t = pttl(&mut admin, "ttl-done");
    assert!(
        (3_590_000..=3_600_000).contains(&t),
        "done record TTL {t} ms"
    );
    // Done, expiry already past (a test epoch): no TTL; purge deletes it.
    guard
        .run(&attempt("ttl-past", "fp"), 1_700_000_000, ok)
        .unwrap();
    assert_eq!(pttl(&mut admin, "ttl-past"), -1);
    // Recovery that records a done outcome: a TTL too.
    let found = FakeDestination::default();
    guard
        .claim(&attempt("ttl-found", "fp"), now - 1000)
        .unwrap();
    found.pay("ttl-found");
    let r = guard.recover("ttl-found", &found, now, None).unwrap();
    assert!(
        matches!(r.outcome, Recovered::Applied(RecoveryAction::RecordDone(_))),
        "{r:?}"
    );
    assert!(pttl(&mut admin, "ttl-found") > 3_500_000);

    // Redis expires two done records (1 s TTL); their index members stay.
    // Their clock is the next whole second, so that the expiry is still ahead
    // of the server's clock when they are written however long the steps
    // above took (from the floored `now` it could already be past: no TTL).
    let soon = now_seconds() + 1;
    let short = Guard::new(store.as_ref()).with_ttl(1);
    for key in ["ttl-short-a", "ttl-short-b"] {
        short.run(&attempt(key, "fp"), soon, ok).unwrap();
        assert!(pttl(&mut admin, key) > 0);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while pttl(&mut admin, "ttl-short-b") != -2 {
        assert!(
            std::time::Instant::now() < deadline,
            "Redis did not expire the record"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for key in ["ttl-short-a", "ttl-short-b"] {
        assert!(score(&mut admin, &done_idx, key).is_some());
        assert!(score(&mut admin, &exp_idx, key).is_some());
    }
    let listed: Vec<String> = store
        .list(Some(Status::Done), 10)
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(
        listed,
        ["ttl-past", "ttl-found", "ttl-done"],
        "list skips what Redis expired"
    );
    // A new claim of an expired key replaces its leftovers.
    assert_eq!(
        guard
            .claim(&attempt("ttl-short-a", "fp"), now)
            .unwrap()
            .outcome,
        ClaimOutcome::Owned
    );
    assert_eq!(score(&mut admin, &done_idx, "ttl-short-a"), None);
    assert_eq!(score(&mut admin, &exp_idx, "ttl-short-a"), None);
    assert_eq!(pttl(&mut admin, "ttl-short-a"), -1);
    // Purge: deletes the expired done record, removes the expired record's
    // index members, leaves the rest.
    assert_eq!(store.purge(now + 10).unwrap(), 1, "ttl-past");
    assert_eq!(score(&mut admin, &done_idx, "ttl-short-b"), None);
    assert_eq!(score(&mut admin, &exp_idx, "ttl-short-b"), None);
    assert!(store.get("ttl-past").unwrap().is_none());
    let card: i64 = redis::cmd("ZCARD").arg(&exp_idx).query(&mut admin).unwrap();
    assert_eq!(card, 2, "ttl-done and ttl-found wait for their expiry");
    let in_flight: Vec<String> = store
        .list(Some(Status::InFlight), 10)
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(in_flight, ["ttl-flight", "ttl-short-a"]);
}

/// Redis: a purge over more expired records than one script call looks at
/// runs in batches and deletes them all.
#[test]
fn redis_purge_runs_in_batches() {
    let Some(p) = RedisPrefix::new("redis_purge_batches") else {
        return;
    };
    let store = open(&p.url()).unwrap();
    let guard = Guard::new(store.as_ref()).with_ttl(10);
    let n = intentkey::claim::redis::BATCH as usize * 2 + 7;
    for i in 0..n {
        guard
            .run(&attempt(&format!("p-{i:05}"), "fp"), 1_700_000_000, |_| {
                Response::json(200, "{}")
            })
            .unwrap();
    }
    guard.claim(&attempt("p-flight", "fp"), 0).unwrap();
    assert_eq!(store.purge(1_700_000_010).unwrap(), n as u64);
    assert_eq!(store.list(None, 10).unwrap().len(), 1);
}

/// Rust and Node share one Redis and the same records: a key the Node store
/// completed is replayed here, one this store completed (or holds in flight)
/// is replayed (or a 409) there. Runs `js/test/support/redis-interop.mjs`
/// with `node`; it needs the npm package built (`cd js && npm ci && npm run
/// build`), else it is skipped (and fails under `CI=true`).
#[test]
fn redis_node_and_rust_share_records() {
    let Some(p) = RedisPrefix::new("redis_interop") else {
        return;
    };
    node_and_rust_share_records(&p.url(), "redis-interop.mjs", "ioredis");
}

/// The same on the Redis Cluster.
#[test]
fn redis_cluster_node_and_rust_share_records() {
    let Some(p) = RedisPrefix::cluster("redis_cluster_interop") else {
        return;
    };
    node_and_rust_share_records(&p.url(), "redis-interop.mjs", "ioredis");
}

/// The same on one DynamoDB table (`js/test/support/dynamo-interop.mjs`).
#[test]
fn dynamodb_node_and_rust_share_records() {
    let Some(t) = DynamoTable::new("dynamodb_interop") else {
        return;
    };
    node_and_rust_share_records(&t.url(), "dynamo-interop.mjs", "@aws-sdk/client-dynamodb");
}

/// The same on one MySQL / MariaDB database (`js/test/support/mysql-interop.mjs`).
#[test]
fn mysql_node_and_rust_share_records() {
    let Some(db) = MysqlDb::new("mysql_interop") else {
        return;
    };
    node_and_rust_share_records(&db.url(), "mysql-interop.mjs", "mysql2");
}

/// Node (`js/test/support/SCRIPT URL KEY BODY`, over the npm package's store
/// whose driver is `driver`) and this host on the store at `url`: each
/// replays what the other completed, and a key in flight here is 409 there.
fn node_and_rust_share_records(url: &str, script: &str, driver: &str) {
    let js = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../js");
    let script = js.join("test/support").join(script);
    let built = js.join("vendor/intentkey.js").exists()
        && js.join("node_modules").join(driver).exists()
        && script.exists();
    let node_ok = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(built && node_ok) {
        let why = format!(
            "node_and_rust_share_records ({}): needs node and the npm package built (cd js && npm ci && npm run build)",
            script.display()
        );
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        common::skipped(&why);
        return;
    }
    let node = |key: &str, body: &str| -> String {
        let out = std::process::Command::new("node")
            .arg(&script)
            .args([url, key, body])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "node: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let store = open(url).unwrap();
    let guard = Guard::new(store.as_ref());
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    // Claimed and completed by Node: a replay here.
    assert_eq!(
        node("from-node", "node"),
        r#"{"outcome":"owned","replayed":false,"status":201,"body":"node"}"#
    );
    let replay = guard
        .run(&attempt("from-node", "fp"), now, |_| panic!("must not run"))
        .unwrap();
    assert_eq!(
        (replay.outcome.as_str(), replay.replayed, replay.body_text()),
        ("done", true, "node")
    );
    // Completed here (a binary-safe body, a header): a replay there.
    guard
        .run(&attempt("from-rust", "fp"), now, |_| {
            Response::new(201, "text/plain", b"rust".to_vec()).with_header("Location", "/r/1")
        })
        .unwrap();
    assert_eq!(
        node("from-rust", "other"),
        r#"{"outcome":"done","replayed":true,"status":201,"body":"rust"}"#
    );
    // In flight here: a 409 there, and the record stays this owner's.
    let owner = guard.claim(&attempt("held-by-rust", "fp"), now).unwrap();
    let busy = node("held-by-rust", "node");
    assert!(
        busy.contains(r#""outcome":"in-flight""#) && busy.contains(r#""status":409"#),
        "{busy}"
    );
    assert_eq!(
        store.get("held-by-rust").unwrap().unwrap().owner_token,
        owner.owner_token
    );
    assert_eq!(store.list(None, 10).unwrap().len(), 3);
}
