//! PostgreSQL finds the row of every fenced write by its key, whatever the
//! statistics say.
//!
//! The fenced writes (complete, complete-fast, replace, release) test the
//! record's status as well as its key and owner token. When the table's
//! statistics see few records in flight (the usual case: most records are
//! done), a plain `status = 'in_flight'` leads the planner to the status
//! index, which then reads every in-flight entry, live or not yet vacuumed,
//! on every write: a completion's cost grows with the records in flight. The
//! core's statements are checked here against that table, with generic and
//! custom plans, beside a control statement written plainly that shows the
//! table does lead the planner astray.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
mod common;

use common::PgSchema;
use intentkey::claim::sql::{self, Kind, Value};
use intentkey::claim::{Attempt, Completion, Record, Release, Replacement, Response};
use intentkey_store::pg_sql::text;
use intentkey_store::PostgresStore;

/// Records done (seen by `ANALYZE`), then records in flight (not seen).
const DONE: u32 = 20_000;
const IN_FLIGHT: u32 = 5_000;

fn literal(value: &Value) -> String {
    match value {
        Value::Null => "NULL".to_owned(),
        Value::Integer(n) => n.to_string(),
        Value::Text(s) => format!("'{}'", s.replace('\'', "''")),
        Value::Bytes(b) => {
            let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
            format!("'\\x{hex}'::bytea")
        }
    }
}

/// The plan of `statement` executed with `values`, under `mode`
/// (`plan_cache_mode`), as EXPLAIN prints it.
fn plan(client: &mut postgres::Client, statement: &str, values: &[Value], mode: &str) -> String {
    client
        .batch_execute(&format!(
            "SET plan_cache_mode = {mode}; PREPARE fenced AS {statement}"
        ))
        .unwrap();
    let arguments: Vec<String> = values.iter().map(literal).collect();
    let rows = client
        .query(
            &format!("EXPLAIN EXECUTE fenced ({})", arguments.join(", ")),
            &[],
        )
        .unwrap();
    client.batch_execute("DEALLOCATE fenced").unwrap();
    rows.iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn fenced_writes_find_their_row_by_key_whatever_the_statistics() {
    let test = "fenced_writes_find_their_row_by_key";
    let Some(schema) = PgSchema::new("pg_plans") else {
        return;
    };
    drop(PostgresStore::connect(&schema.url()).unwrap());
    let mut client = postgres::Client::connect(&schema.url(), postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "ALTER TABLE intentkey_records SET (autovacuum_enabled = false);
             INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status,
                 owner_token, response_status, created_at, expires_at, lookups)
             SELECT 'done-' || g, 'fp', 't', 'POST /orders', 'done', 'token-' || g, 201,
                 1700000000 + g, 1700086400 + g, 0
             FROM generate_series(1, {DONE}) g;
             ANALYZE intentkey_records;
             INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status,
                 owner_token, created_at, lookups)
             SELECT 'flight-' || g, 'fp', 't', 'POST /orders', 'in_flight', 'token-' || g,
                 1700100000 + g, 0
             FROM generate_series(1, {IN_FLIGHT}) g;"
        ))
        .unwrap();

    let key = "flight-17".to_owned();
    let token = "token-17".to_owned();
    let completion = Completion {
        key: key.clone(),
        owner_token: token.clone(),
        response: Response {
            status: 201,
            content_type: "application/json".into(),
            headers: vec![("location".into(), "/orders/1".into())],
            body: br#"{"id":1}"#.to_vec(),
        },
        expires_at: 1_700_186_400,
        fast: false,
    };
    let attempt = Attempt {
        key: key.clone(),
        fingerprint: "fp".into(),
        tenant_id: "t".into(),
        action_type: "POST /orders".into(),
        prior: None,
    };
    let replacement = Replacement {
        expected_token: token.clone(),
        expected_lookups: 0,
        record: Record::in_flight(&attempt, "token-new", 1_700_100_017),
    };
    let release = Release {
        key: key.clone(),
        owner_token: token.clone(),
    };
    let fenced = [
        (Kind::Complete, sql::complete_params(&completion)),
        (Kind::CompleteFast, sql::complete_params(&completion)),
        (Kind::Replace, sql::replace_params(&replacement)),
        (Kind::Release, sql::release_params(&release)),
    ];

    // The control: the release written plainly goes to the status index on
    // this table (if it did not, this test would show nothing).
    let plain = "DELETE FROM intentkey_records WHERE key = $1 AND status = 'in_flight' AND owner_token = $2";
    let control = plan(
        &mut client,
        plain,
        &sql::release_params(&release),
        "force_generic_plan",
    );
    assert!(
        control.contains("intentkey_records_status"),
        "{test}: the control no longer reaches the status index on this table, so the \
         check below shows nothing; make the table's statistics more lopsided. Its plan:\n{control}"
    );

    for (kind, values) in &fenced {
        for mode in ["force_generic_plan", "force_custom_plan"] {
            let statement = text(*kind).unwrap();
            let plan = plan(&mut client, statement, values, mode);
            assert!(
                plan.contains("intentkey_records_pkey")
                    && !plan.contains("intentkey_records_status"),
                "{test}: the core's {kind:?} statement ({mode}) does not find its row by key:\n{plan}"
            );
        }
    }

    // And they still write the row they fence on, and only while it is in flight.
    let bind = |values: &[Value]| -> Vec<String> { values.iter().map(literal).collect() };
    let run = |client: &mut postgres::Client, kind: Kind, values: &[Value]| -> u64 {
        client
            .batch_execute(&format!("PREPARE w AS {}", text(kind).unwrap()))
            .unwrap();
        let n = client
            .execute(&format!("EXECUTE w ({})", bind(values).join(", ")), &[])
            .unwrap();
        client.batch_execute("DEALLOCATE w").unwrap();
        n
    };
    assert_eq!(run(&mut client, Kind::Complete, &fenced[0].1), 1);
    assert_eq!(
        run(&mut client, Kind::Complete, &fenced[0].1),
        0,
        "a done record is not completed again"
    );
    assert_eq!(
        run(&mut client, Kind::Release, &fenced[3].1),
        0,
        "a done record is not released"
    );
    let other = Release {
        key: "flight-18".into(),
        owner_token: "token-18".into(),
    };
    assert_eq!(
        run(&mut client, Kind::Release, &sql::release_params(&other)),
        1
    );
    let stale = Replacement {
        expected_token: "token-19".into(),
        expected_lookups: 0,
        record: Record::in_flight(
            &Attempt {
                key: "flight-19".into(),
                ..attempt.clone()
            },
            "token-new",
            1_700_100_019,
        ),
    };
    assert_eq!(
        run(&mut client, Kind::Replace, &sql::replace_params(&stale)),
        1
    );
    assert_eq!(
        run(&mut client, Kind::Replace, &sql::replace_params(&stale)),
        0,
        "a replaced record carries the new token"
    );
}
