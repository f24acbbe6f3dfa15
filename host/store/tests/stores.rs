//! Claim, replay and recovery on every store, against the real servers:
//! outcomes, races (threads and processes), crash faults, and recovery.
//!
//! PostgreSQL tests use 127.0.0.1:5432 (trust auth, database `test`), each in
//! a schema of its own. Without a server they fail under `CI=true` and skip
//! with a message otherwise.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};

use intentkey::claim::{ClaimOutcome, Lookup, Record, RecoveryAction, Response, Status};
use intentkey_store::guard::{Attempt, Gateway, Guard};
use intentkey_store::{claim, open, Store};

const PG_BASE: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A PostgreSQL schema of this test's own, dropped at the end.
struct PgSchema {
    name: String,
}

impl PgSchema {
    fn new(tag: &str) -> Option<PgSchema> {
        let mut client = match postgres::Client::connect(PG_BASE, postgres::NoTls) {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true and PostgreSQL is not reachable at {PG_BASE}: {e}"
                );
                eprintln!("SKIPPED: PostgreSQL is not reachable at {PG_BASE} ({e}); these tests need it (they fail under CI=true)");
                return None;
            }
        };
        let name = format!("ik_rs_{tag}_{}_{}", std::process::id(), rand_u32());
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .unwrap();
        Some(PgSchema { name })
    }

    fn url(&self) -> String {
        format!("{PG_BASE}?options=-csearch_path%3D{}", self.name)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(PG_BASE, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).unwrap();
    u32::from_le_bytes(b)
}

fn temp_sqlite(tag: &str) -> (String, PathBuf) {
    let path = std::env::temp_dir().join(format!(
        "ik-{tag}-{}-{}.sqlite",
        std::process::id(),
        rand_u32()
    ));
    (format!("sqlite:{}", path.display()), path)
}

fn remove_sqlite(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn attempt(key: &str, fingerprint: &str) -> Attempt {
    Attempt {
        key: key.into(),
        fingerprint: fingerprint.into(),
        tenant_id: "t1".into(),
        action_type: "pix.send".into(),
    }
}

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
        (a.outcome.as_str(), a.status, a.replayed),
        ("owned", 201, false)
    );
    // Repeat after completion: the stored response, replayed.
    let again = guard
        .run(&attempt("k-a", "fp-a"), now + 1, |k| dest.pay(k))
        .unwrap();
    assert_eq!(
        (
            again.outcome.as_str(),
            again.status,
            again.replayed,
            again.body.as_str()
        ),
        ("done", 201, true, a.body.as_str())
    );
    assert_eq!(dest.effects("k-a"), 1);
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
    let owner = Record::in_flight("k-b", "fp-b", "t1", "pix.send", now);
    assert_eq!(claim(store, &owner).unwrap(), ClaimOutcome::Owned);
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
    // A late completion never overwrites a finished record.
    let mut late = owner.clone();
    late.complete(Response::json(500, "late"), now + 10, 100);
    assert!(store.replace_in_flight(&late).unwrap());
    assert!(
        !store.replace_in_flight(&late).unwrap(),
        "only in-flight records are replaced"
    );
    // Purge: only done records past their expiry; in_flight never, whatever its age.
    let ancient = Record::in_flight("k-old", "fp", "t1", "pix.send", 0);
    assert_eq!(claim(store, &ancient).unwrap(), ClaimOutcome::Owned);
    assert_eq!(store.purge(now + 50).unwrap(), 0);
    assert_eq!(
        store.purge(now + 200).unwrap(),
        3,
        "k-a, k-b and k-c expired"
    );
    assert_eq!(
        store.get("k-old").unwrap().unwrap().status,
        Status::InFlight
    );
    assert!(store.get("k-a").unwrap().is_none());
    assert_eq!(store.list(Some(Status::InFlight), 10).unwrap().len(), 1);
}

/// Recovery: found → done; absent trusted only with read-your-writes; unknown
/// backs off 1, 2, 4 minutes, ends in reconciliation, never re-executes.
fn recovery(store: &dyn Store) {
    let guard = Guard::new(store);
    let now = 1_700_000_000;
    // Crash after the effect: found.
    let dest = FakeDestination::default();
    claim(store, &Record::in_flight("r-found", "fp", "t1", "a", now)).unwrap();
    dest.pay("r-found");
    let mut runs = 0;
    let actions = guard
        .recover_due(
            &dest,
            now + 600,
            300,
            Some(&mut |_: &Record| {
                runs += 1;
                Response::json(201, "")
            }),
        )
        .unwrap();
    assert!(matches!(actions.as_slice(), [(k, RecoveryAction::RecordDone(_))] if k == "r-found"));
    assert_eq!((runs, dest.effects("r-found")), (0, 1));
    assert_eq!(store.get("r-found").unwrap().unwrap().status, Status::Done);
    // Crash before the effect, read-your-writes destination: absent → re-execute once, same key.
    let ryw = FakeDestination {
        read_your_writes: true,
        ..FakeDestination::default()
    };
    claim(store, &Record::in_flight("r-absent", "fp", "t1", "a", now)).unwrap();
    let actions = guard
        .recover_due(
            &ryw,
            now + 600,
            300,
            Some(&mut |r: &Record| ryw.pay(&r.key)),
        )
        .unwrap();
    assert!(matches!(
        actions.as_slice(),
        [(_, RecoveryAction::ReExecute)]
    ));
    assert_eq!(ryw.effects("r-absent"), 1);
    assert_eq!(store.get("r-absent").unwrap().unwrap().status, Status::Done);
    // Unknown: never re-executes; 1, 2, 4 minutes; then needs_reconciliation.
    let unknown = FakeDestination {
        unknown: true,
        read_your_writes: true,
        ..FakeDestination::default()
    };
    claim(store, &Record::in_flight("r-unknown", "fp", "t1", "a", now)).unwrap();
    let mut t = now + 600;
    let mut waits = Vec::new();
    let mut reexecuted = 0;
    for _ in 0..10 {
        let actions = guard
            .recover_due(
                &unknown,
                t,
                300,
                Some(&mut |_: &Record| {
                    reexecuted += 1;
                    Response::json(201, "")
                }),
            )
            .unwrap();
        match actions.as_slice() {
            [(_, RecoveryAction::CheckLater { next_lookup_at, .. })] => {
                waits.push(next_lookup_at - t);
                // Not due before its time.
                assert!(guard
                    .recover_due(&unknown, next_lookup_at - 1, 300, None)
                    .unwrap()
                    .is_empty());
                t = *next_lookup_at;
            }
            [(_, RecoveryAction::Reconcile { lookups: 4 })] => break,
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
    let (url, path) = temp_sqlite("outcomes");
    outcomes(open(&url).unwrap().as_ref());
    remove_sqlite(&path);
    let (url, path) = temp_sqlite("recovery");
    recovery(open(&url).unwrap().as_ref());
    // Reopening runs no migration twice and keeps the records.
    assert_eq!(open(&url).unwrap().list(None, 10).unwrap().len(), 3);
    remove_sqlite(&path);
}

#[test]
fn postgres_store() {
    let Some(schema) = PgSchema::new("outcomes") else {
        return;
    };
    outcomes(open(&schema.url()).unwrap().as_ref());
    let Some(schema) = PgSchema::new("recovery") else {
        return;
    };
    recovery(open(&schema.url()).unwrap().as_ref());
    // A second connection migrates nothing twice.
    assert_eq!(
        open(&schema.url()).unwrap().list(None, 10).unwrap().len(),
        3
    );
}

const CONTENDERS: usize = 16;
const KEYS: usize = 1000;

/// Claims every key in a contender-specific order; returns the keys it owns.
fn contend(store: &dyn Store, contender: usize) -> Vec<String> {
    let mut order: Vec<usize> = (0..KEYS).collect();
    // Each contender walks the keys from a different offset, so they collide.
    order.rotate_left(contender * KEYS / CONTENDERS);
    let mut owned = Vec::new();
    for i in order {
        let key = format!("race-{i:04}");
        let record = Record::in_flight(&key, "fp", "t1", "a", 1_700_000_000);
        let outcome = loop {
            match claim(store, &record) {
                Ok(o) => break o,
                Err(e) if e.is_retryable() => continue,
                Err(e) => panic!("contender {contender}: {e}"),
            }
        };
        if outcome == ClaimOutcome::Owned {
            owned.push(key);
        } else {
            assert_eq!(outcome, ClaimOutcome::InFlight);
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
    let Some(schema) = PgSchema::new("race_threads") else {
        return;
    };
    let url = schema.url();
    open(&url).unwrap(); // migrate once before the race
    let barrier = Arc::new(Barrier::new(CONTENDERS));
    let owned: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CONTENDERS)
            .map(|c| {
                let (url, barrier) = (url.clone(), Arc::clone(&barrier));
                s.spawn(move || {
                    let store = open(&url).unwrap();
                    barrier.wait();
                    contend(store.as_ref(), c)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_one_owner_per_key(&owned, open(&url).unwrap().as_ref(), "postgres threads");
}

/// The child side of the process races: claims every key, prints owned keys.
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
    let start = std::env::temp_dir().join(format!(
        "ik-race-start-{}-{}",
        std::process::id(),
        rand_u32()
    ));
    let out =
        |c: usize| std::env::temp_dir().join(format!("ik-race-out-{}-{c}", std::process::id()));
    let children: Vec<_> = (0..CONTENDERS)
        .map(|c| {
            let _ = std::fs::remove_file(out(c));
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "race_child_process",
                    "--exact",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env("IK_RACE_URL", url)
                .env("IK_RACE_CONTENDER", c.to_string())
                .env("IK_RACE_START", &start)
                .env("IK_RACE_OUT", out(c))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(&start, b"go").unwrap();
    let owned: Vec<Vec<String>> = children
        .into_iter()
        .enumerate()
        .map(|(c, child)| {
            let status = child.wait_with_output().unwrap().status;
            assert!(status.success(), "{what}: contender process {c} failed");
            let keys = std::fs::read_to_string(out(c)).unwrap();
            let _ = std::fs::remove_file(out(c));
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
fn race_processes_postgres() {
    let Some(schema) = PgSchema::new("race_procs") else {
        return;
    };
    race_processes(&schema.url(), "postgres processes");
}

#[test]
fn race_processes_sqlite() {
    let (url, path) = temp_sqlite("race");
    race_processes(&url, "sqlite processes");
    remove_sqlite(&path);
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
    let dest = rusqlite::Connection::open(dest_path).unwrap();
    dest.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let pause: u64 = std::env::var("IK_FAULT_PAUSE_US").unwrap().parse().unwrap();
    Guard::new(store.as_ref())
        .run(&attempt(&key, "fp"), 1_700_000_000, |key| {
            dest.execute("INSERT INTO effects (key) VALUES (?1)", [key])
                .unwrap();
            std::thread::sleep(std::time::Duration::from_micros(pause));
            Response::json(201, "{}")
        })
        .unwrap();
}

/// A destination backed by a SQLite file the children write effects to.
struct FileDestination {
    conn: std::sync::Mutex<rusqlite::Connection>,
}

impl FileDestination {
    fn effects(&self, key: &str) -> u32 {
        self.conn
            .lock()
            .unwrap()
            .query_row("SELECT count(*) FROM effects WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .unwrap()
    }
}

impl Gateway for FileDestination {
    fn lookup(&self, key: &str) -> Lookup {
        match self.effects(key) {
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
    const TRIALS: usize = 200;
    let (url, path) = temp_sqlite("faults");
    let store = open(&url).unwrap();
    let dest_path = std::env::temp_dir().join(format!(
        "ik-dest-{}-{}.sqlite",
        std::process::id(),
        rand_u32()
    ));
    let dest = rusqlite::Connection::open(&dest_path).unwrap();
    dest.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE effects (key TEXT NOT NULL)")
        .unwrap();
    dest.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let dest = FileDestination {
        conn: std::sync::Mutex::new(dest),
    };
    let guard = Guard::new(store.as_ref());
    let (mut killed_mid_effect, mut finished, mut before_effect) = (0, 0, 0);
    let recoveries = AtomicU32::new(0);
    for trial in 0..TRIALS {
        let key = format!("fault-{trial:03}");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "fault_child_process",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("IK_FAULT_URL", &url)
            .env("IK_FAULT_DEST", &dest_path)
            .env("IK_FAULT_KEY", &key)
            .env("IK_FAULT_PAUSE_US", (rand_u32() % 20_000).to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill at a random point. Even trials: a random moment after the
        // spawn (before, during or after the effect). Odd trials: a random
        // moment after the effect is seen at the destination, so that many
        // kills land between the effect and its completion however slowly
        // the machine starts processes.
        if trial % 2 == 1 {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while dest.effects(&key) == 0
                && std::time::Instant::now() < deadline
                && child.try_wait().unwrap().is_none()
            {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            std::thread::sleep(std::time::Duration::from_micros(u64::from(
                rand_u32() % 5_000,
            )));
        } else {
            std::thread::sleep(std::time::Duration::from_micros(u64::from(
                rand_u32() % 40_000,
            )));
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
        let redelivery = guard
            .run(&attempt(&key, "fp"), 1_700_000_100, |k| {
                dest.conn
                    .lock()
                    .unwrap()
                    .execute("INSERT INTO effects (key) VALUES (?1)", [k])
                    .unwrap();
                Response::json(201, "{}")
            })
            .unwrap();
        if record.is_some_and(|r| r.status == Status::InFlight) {
            assert_eq!(
                redelivery.status, 409,
                "{key}: an in-flight record is never released"
            );
        }
        // Recovery settles the in-flight records by asking the destination.
        let actions = guard
            .recover_due(
                &dest,
                1_700_001_000,
                300,
                Some(&mut |r: &Record| {
                    dest.conn
                        .lock()
                        .unwrap()
                        .execute("INSERT INTO effects (key) VALUES (?1)", [&r.key])
                        .unwrap();
                    Response::json(201, "{}")
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
        "faults: {TRIALS} trials: killed between effect and completion {killed_mid_effect}, before the effect {before_effect}, \
         finished {finished}; recoveries {}; duplicate effects 0",
        recoveries.load(Ordering::Relaxed)
    );
    assert!(
        killed_mid_effect >= 20,
        "too few kills landed between effect and completion ({killed_mid_effect})"
    );
    remove_sqlite(&path);
    remove_sqlite(&dest_path);
}
