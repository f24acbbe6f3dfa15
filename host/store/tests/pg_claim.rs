//! The one-statement claim on PostgreSQL (`PgStore::claim_insert`, the
//! core's `claim`): an insert that loses reads the record it lost to in the
//! same statement, as one JSON column, and gets it back whole (every byte
//! of a binary answer, its headers, its times), whichever text format the
//! server writes `bytea` in (`bytea_output`: hex, the default, or escape).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[allow(dead_code)]
mod common;

use intentkey::claim::{Completion, Record, Response, Status};
use intentkey_store::tokio::{AsyncStore, Inserted, PgStore};

use common::{attempt, PgSchema};

const NOW: i64 = 1_700_000_000;

/// Every byte value, and the ones each text format escapes.
fn binary_body() -> Vec<u8> {
    let mut body: Vec<u8> = (0..=255).collect();
    body.extend_from_slice(b"\\\\x00\"\\000");
    body
}

#[test]
fn a_claim_that_loses_reads_the_record_it_lost_to_in_either_bytea_format() {
    let Some(schema) = PgSchema::new("pg_claim") else {
        return;
    };
    common::runtime(2).block_on(async {
        for format in ["hex", "escape"] {
            let url = format!("{}%20-cbytea_output%3D{format}", schema.url());
            let store = PgStore::connect(&url, 2).await.unwrap();
            let client = store.pool().get().await.unwrap();
            let row = client.query_one("SHOW bytea_output", &[]).await.unwrap();
            assert_eq!(
                row.get::<_, String>(0),
                format,
                "the session writes bytea as {format}"
            );

            let key = format!("k-{format}");
            let first = Record::in_flight(&attempt(&key, "fp"), &"a1".repeat(16), NOW);
            assert!(matches!(
                store.claim_insert(first.clone()).await.unwrap(),
                Inserted::Won
            ));

            // In flight: a second claim gets the owner's record, in flight.
            let second = Record::in_flight(&attempt(&key, "fp"), &"b2".repeat(16), NOW + 1);
            let Inserted::Existing(seen) = store.claim_insert(second.clone()).await.unwrap() else {
                panic!("{format}: the claim that lost reads the record in flight");
            };
            assert_eq!(*seen, first, "{format}: the record in flight, as written");

            // Done: a retry gets the stored answer byte for byte.
            let response = Response {
                status: 201,
                content_type: "application/octet-stream".into(),
                headers: vec![
                    ("location".into(), "/orders/ord_\"1\"".into()),
                    ("x-note".into(), "caf\u{e9} \\ done".into()),
                ],
                body: binary_body(),
            };
            let done = store
                .complete(Completion {
                    key: key.clone(),
                    owner_token: first.owner_token.clone(),
                    response: response.clone(),
                    expires_at: NOW + 86_400,
                    fast: false,
                })
                .await
                .unwrap();
            assert!(done, "{format}: the owner completes its record");
            let Inserted::Existing(seen) = store.claim_insert(second).await.unwrap() else {
                panic!("{format}: the retry reads the done record");
            };
            assert_eq!(seen.status, Status::Done, "{format}");
            assert_eq!(seen.owner_token, first.owner_token, "{format}");
            assert_eq!(seen.expires_at, Some(NOW + 86_400), "{format}");
            assert_eq!(
                seen.response.as_ref(),
                Some(&response),
                "{format}: the answer whole"
            );
            assert_eq!(
                Some(&*seen),
                store.get(key).await.unwrap().as_ref(),
                "{format}: as get reads it"
            );
        }
    });
}
