//! The guard and the journal as drivers of the core's run flow: an intent
//! keyed under a two-secret keyring runs once across the rotation, and a
//! step whose record is taken away on every try ends with the one bounded,
//! retryable error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::convert::Infallible;

use intentkey::claim::{Completion, Record, Release, Replacement, Response, Status};
use intentkey::journal::Run;
use intentkey::{ErrorCode, Intent, Keyer, Keyring, Payload, Policy, Secret};
use intentkey_store::guard::Guard;
use intentkey_store::journal::{Journal, JournalError};
use intentkey_store::{open, MemoryStore, Store, StoreError};
use serde_json::{json, Value};

const ROTATION: i64 = 1_700_000_000;

fn keyring() -> Keyring {
    Keyring::new(vec![
        ("k1".into(), 0, Secret::new([0x11; 32]).unwrap()),
        ("k2".into(), ROTATION, Secret::new([0x22; 32]).unwrap()),
    ])
    .unwrap()
}

#[test]
fn an_intent_under_a_two_secret_keyring_runs_once_across_the_rotation() {
    let keyer = Keyer::new(&keyring(), Policy::default());
    let payload = Payload::from_json(
        r#"{"creditor_key":"ana@example.com","amount":"10.00","currency":"BRL","remittance":"rent"}"#,
    )
    .unwrap();
    // Recorded an hour before the rotation; retried before and after it.
    let intent = Intent {
        tenant_id: "acme",
        action_type: "pix.send",
        payload: &payload,
        intent_epoch: ROTATION - 3_600,
    };
    let store = open("memory:").unwrap();
    let guard = Guard::new(store.as_ref());
    let mut keys = Vec::new();
    let mut effects = 0;
    for now in [ROTATION - 60, ROTATION + 60, ROTATION + 7_200] {
        let attempt = keyer.intent_attempt(&intent, None, None).unwrap();
        let answer = guard
            .run(&attempt, now, |key| {
                effects += 1;
                keys.push(key.to_owned());
                Response::json(201, r#"{"id":"pay_1"}"#)
            })
            .unwrap();
        assert_eq!(answer.status, 201);
    }
    assert_eq!(effects, 1, "one effect across the rotation");
    // The key is the first secret's: the one active at the intent's epoch.
    let first = keyer
        .deriver_at(ROTATION - 3_600)
        .unwrap()
        .derive(&intent)
        .unwrap();
    assert_eq!(keys, [first.as_str()]);
    // The intent-hmac mode too.
    let a = keyer
        .intent_attempt(&intent, Some("intent-7"), None)
        .unwrap();
    assert_eq!(
        a.key,
        keyer
            .intent_key(
                "acme",
                "intent-7",
                ROTATION - 3_600,
                intentkey::KeyLength::FULL
            )
            .unwrap()
            .as_str()
    );
}

/// A store that takes every record away from its owner just before the
/// owner completes it: each completion finds the record gone.
#[derive(Default)]
struct TakenAway(MemoryStore);

impl Store for TakenAway {
    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        self.0.insert(record)
    }
    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.0.get(key)
    }
    fn complete(&self, c: &Completion) -> Result<bool, StoreError> {
        self.0.release(&Release {
            key: c.key.clone(),
            owner_token: c.owner_token.clone(),
        })?;
        self.0.complete(c)
    }
    fn replace(&self, r: &Replacement) -> Result<bool, StoreError> {
        self.0.replace(r)
    }
    fn release(&self, r: &Release) -> Result<bool, StoreError> {
        self.0.release(r)
    }
    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        self.0.list(status, limit)
    }
    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.0.purge(now)
    }
}

#[test]
fn a_step_superseded_on_every_try_ends_with_record_vanished() {
    let store = TakenAway::default();
    let keyer = Keyer::new(&keyring(), Policy::default());
    let journal = Journal::new(&store, &keyer);
    let run = Run {
        tenant_id: "acme",
        intent_id: "run-1",
        intent_epoch: ROTATION,
    };
    let mut samples = 0;
    let err = journal
        .step(
            &run,
            "plan",
            None,
            ROTATION,
            &mut || -> Result<Value, Infallible> {
                samples += 1;
                Ok(json!({ "sample": samples }))
            },
        )
        .unwrap_err();
    let JournalError::Store(e) = &err else {
        panic!("a store error, not {err}");
    };
    assert_eq!(e.code(), ErrorCode::RecordVanished);
    assert!(e.is_retryable(), "{e}");
    assert_eq!(err.code(), Some(ErrorCode::RecordVanished));
    assert_eq!(samples, 3, "one step per claim, three claims");
}
