//! Schema migration: a database made by version 1 (before owner tokens and
//! response headers) is migrated to the latest version when a store opens it, keeps
//! its records, and its old in-flight record (owner token '') can be
//! recovered; a database from a newer build (version 4) is refused. Version 3
//! moves response bodies to bytes: a body written as text before it replays
//! as the same bytes.
//!
//! PostgreSQL tests use 127.0.0.1:5432 (trust auth, database `test`), each in
//! a schema of its own. Without a server they fail under `CI=true` and print
//! `SKIPPED: <test>: …` otherwise.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

use intentkey::claim::schema::{migrations, migrations_table, SCHEMA_VERSION};
use intentkey::claim::{
    ClaimOutcome, Lookup, Recovered, RecoveryAction, Response, Status, DEFAULT_TTL_SECONDS,
};
use intentkey_store::guard::{Gateway, Guard};
use intentkey_store::{open, Store};

use common::{attempt, PgSchema, TempSqlite};

const NOW: i64 = 1_700_000_000;

/// The two version-1 rows, with version-1 columns only.
const V1_ROWS: &str = "\
    INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, created_at, lookups) \
        VALUES ('v1-in-flight', 'fp', 't1', 'pix.send', 'in_flight', 1699990000, 0); \
    INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, response_status, \
        response_content_type, response_body, created_at, expires_at, lookups) \
        VALUES ('v1-done', 'fp', 't1', 'pix.send', 'done', 201, 'application/json', '{\"id\":\"pay_v1\"}', \
        1699990000, 1800000000, 0)";

/// The destination found the old in-flight record's effect.
struct Found;

impl Gateway for Found {
    fn lookup(&self, _key: &str) -> Lookup {
        Lookup::Found(Response::json(201, r#"{"id":"found"}"#))
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

/// What a migrated store must show: both rows, the done one replayed, the
/// in-flight one recoverable, and new claims fenced as usual.
fn check_migrated(store: &dyn Store, what: &str) {
    let done = store.get("v1-done").unwrap().unwrap();
    let response = done.response.clone().unwrap();
    assert_eq!(
        (
            done.status,
            done.owner_token.as_str(),
            response.status,
            response.body_text().unwrap(),
            response.headers.len(),
            done.expires_at
        ),
        (
            Status::Done,
            "",
            201,
            r#"{"id":"pay_v1"}"#,
            0,
            Some(1_800_000_000)
        ),
        "{what}: the done row survives"
    );
    let in_flight = store.get("v1-in-flight").unwrap().unwrap();
    assert_eq!(
        (
            in_flight.status,
            in_flight.owner_token.as_str(),
            in_flight.created_at
        ),
        (Status::InFlight, "", 1_699_990_000),
        "{what}: the in-flight row survives, with the empty token"
    );
    let guard = Guard::new(store);
    // The done row replays; the in-flight row blocks a repeat.
    let replay = guard
        .run(&attempt("v1-done", "fp"), NOW, |_| panic!("must not run"))
        .unwrap();
    assert_eq!(
        (replay.status, replay.replayed, replay.body_text()),
        (201, true, r#"{"id":"pay_v1"}"#),
        "{what}"
    );
    assert_eq!(
        guard
            .claim(&attempt("v1-in-flight", "fp"), NOW)
            .unwrap()
            .outcome,
        ClaimOutcome::InFlight,
        "{what}"
    );
    // The old in-flight record is recovered: found → done.
    let recovery = guard.recover("v1-in-flight", &Found, NOW, None).unwrap();
    assert!(
        matches!(
            recovery.outcome,
            Recovered::Applied(RecoveryAction::RecordDone(_))
        ),
        "{what}: {recovery:?}"
    );
    let recovered = store.get("v1-in-flight").unwrap().unwrap();
    assert_eq!(
        (
            recovered.status,
            recovered.response.map(|r| r.body),
            recovered.expires_at
        ),
        (
            Status::Done,
            Some(br#"{"id":"found"}"#.to_vec()),
            Some(NOW + DEFAULT_TTL_SECONDS)
        ),
        "{what}"
    );
    // New claims write tokens and headers in the migrated table.
    let answer = guard
        .run(&attempt("v2-new", "fp"), NOW, |_| {
            Response::json(201, "{}").with_header("Location", "/p/1")
        })
        .unwrap();
    assert_eq!(answer.outcome, ClaimOutcome::Owned, "{what}");
    let new = store.get("v2-new").unwrap().unwrap();
    assert_eq!(new.owner_token.len(), 32, "{what}");
    assert_eq!(
        new.response.unwrap().headers,
        [("Location".to_owned(), "/p/1".to_owned())],
        "{what}"
    );
}

fn sqlite_version(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[test]
fn sqlite_version_1_migrates_to_latest() {
    assert_eq!(SCHEMA_VERSION, 3);
    let db = TempSqlite::new("migrate-v1");
    {
        let conn = rusqlite::Connection::open(&db.path).unwrap();
        for statement in &migrations()[0].statements {
            conn.execute_batch(statement).unwrap();
        }
        conn.execute_batch(V1_ROWS).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    assert_eq!(sqlite_version(&db.path), 1);
    let store = open(&db.url()).unwrap();
    assert_eq!(sqlite_version(&db.path), 3, "migrated to version 3");
    check_migrated(store.as_ref(), "sqlite from version 1");
    // Opening again migrates nothing twice.
    let again = open(&db.url()).unwrap();
    assert_eq!(sqlite_version(&db.path), 3);
    assert_eq!(again.list(None, 10).unwrap().len(), 3);
}

#[test]
fn sqlite_newer_schema_is_refused() {
    let db = TempSqlite::new("schema-v4");
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .pragma_update(None, "user_version", 4)
        .unwrap();
    let Err(e) = open(&db.url()) else {
        panic!("a version-4 database was opened")
    };
    eprintln!("sqlite version 4: {e}");
    assert_eq!(e.code().as_str(), "store-failed");
    assert!(!e.is_retryable());
    assert!(
        e.message().contains("schema version 4") && e.message().contains("upgrade"),
        "a clear error: {e}"
    );
    assert_eq!(sqlite_version(&db.path), 4, "left as it was");
}

fn pg_client(schema: &PgSchema) -> postgres::Client {
    let mut client = postgres::Client::connect(common::PG_BASE, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!("SET search_path = {}", schema.name))
        .unwrap();
    client
}

fn pg_versions(schema: &PgSchema) -> Vec<i32> {
    pg_client(schema)
        .query(
            "SELECT version FROM intentkey_schema_migrations ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn postgres_version_1_migrates_to_latest() {
    let Some(schema) = PgSchema::new("postgres_version_1_migrates_to_latest") else {
        return;
    };
    {
        let mut client = pg_client(&schema);
        client.batch_execute(&migrations_table()).unwrap();
        for statement in &migrations()[0].statements {
            client.batch_execute(statement).unwrap();
        }
        client
            .batch_execute(
                "INSERT INTO intentkey_schema_migrations (version, applied_at) \
                 VALUES (1, extract(epoch from now())::bigint)",
            )
            .unwrap();
        client.batch_execute(V1_ROWS).unwrap();
    }
    assert_eq!(pg_versions(&schema), [1]);
    let store = open(&schema.url()).unwrap();
    assert_eq!(pg_versions(&schema), [1, 2, 3], "migrated to version 3");
    check_migrated(store.as_ref(), "postgres from version 1");
    let again = open(&schema.url()).unwrap();
    assert_eq!(pg_versions(&schema), [1, 2, 3], "nothing migrated twice");
    assert_eq!(again.list(None, 10).unwrap().len(), 3);
}

#[test]
fn postgres_newer_schema_is_refused() {
    let Some(schema) = PgSchema::new("postgres_newer_schema_is_refused") else {
        return;
    };
    {
        let mut client = pg_client(&schema);
        client.batch_execute(&migrations_table()).unwrap();
        client
            .batch_execute(
                "INSERT INTO intentkey_schema_migrations (version, applied_at) \
                 VALUES (4, extract(epoch from now())::bigint)",
            )
            .unwrap();
    }
    let Err(e) = open(&schema.url()) else {
        panic!("a version-4 database was opened")
    };
    eprintln!("postgres version 4: {e}");
    assert_eq!(e.code().as_str(), "store-failed");
    assert!(!e.is_retryable());
    assert!(
        e.message().contains("schema version 4") && e.message().contains("upgrade"),
        "a clear error: {e}"
    );
    assert_eq!(pg_versions(&schema), [4], "left as it was");
}
