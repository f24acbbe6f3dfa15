//! The Rust journal on the memory and SQLite stores: steps recorded once and
//! replayed, concurrent attempts never both run a step, failures follow the
//! outcome classes, tool calls keyed by the run and the validated arguments
//! and settled by the destination when left in flight.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use intentkey::claim::{Lookup, Response};
use intentkey::journal::Run;
use intentkey::{ErrorCode, Keyer, Keyring, Payload, Policy, Secret};
use intentkey_store::journal::{Journal, JournalError};
use intentkey_store::{open, Gateway, Store};
use serde_json::{json, Value};

const T0: i64 = 1_700_000_000;
const RUN: Run<'static> = Run {
    tenant_id: "acme",
    intent_id: "run-42",
    intent_epoch: T0,
};

fn keyer() -> Keyer {
    let policy = Policy::from_json(
        r#"{"version":1,"actionTypes":["pix.send"],"fields":{
            "amount":{"class":"key","normalizer":"decimal","scale":2},
            "pix_key":{"class":"key","normalizer":"pix-key"},
            "remittance":{"class":"ignored"}}}"#,
    )
    .unwrap();
    Keyer::new(&Keyring::single(Secret::new([0x4b; 32]).unwrap()), policy)
}

fn sqlite() -> (Box<dyn Store>, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!(
        "intentkey-journal-{}-{:?}.db",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_file(&path);
    (open(&format!("sqlite:{}", path.display())).unwrap(), path)
}

fn code<E>(r: Result<Value, JournalError<E>>) -> Option<ErrorCode> {
    r.err().and_then(|e| e.code())
}

#[test]
fn a_step_runs_once_and_replays_on_every_store() {
    let (db, path) = sqlite();
    for store in [open("memory:").unwrap(), db] {
        let keyer = keyer();
        let journal = Journal::new(store.as_ref(), &keyer);
        let mut calls = 0;
        let mut sample = || -> Result<Value, Infallible> {
            calls += 1;
            Ok(json!({ "sample": calls }))
        };
        let input = json!({"prompt": "pay rent"});
        let first = journal
            .step(&RUN, "plan", Some(&input), T0, &mut sample)
            .unwrap();
        let again = journal
            .step(&RUN, "plan", Some(&input), T0 + 1, &mut sample)
            .unwrap();
        assert_eq!(first, json!({"sample": 1}));
        assert_eq!(again, first);
        let other = journal
            .step(
                &Run {
                    intent_id: "run-43",
                    ..RUN
                },
                "plan",
                Some(&input),
                T0,
                &mut sample,
            )
            .unwrap();
        assert_eq!(other, json!({"sample": 2}));
        let changed = journal.step(&RUN, "plan", Some(&json!("pay twice")), T0, &mut sample);
        assert_eq!(code(changed), Some(ErrorCode::StepInputChanged));
        assert_eq!(calls, 2);
    }
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_failed_step_records_nothing_and_a_bounded_output_names_the_step() {
    let store = open("memory:").unwrap();
    let keyer = keyer();
    let journal = Journal::new(store.as_ref(), &keyer).with_max_output_bytes(32);
    let failed = journal.step(&RUN, "plan", None, T0, &mut || Err("model timed out"));
    assert!(matches!(
        failed,
        Err(JournalError::Failed("model timed out"))
    ));
    let big = journal.step(&RUN, "plan", None, T0, &mut || {
        Ok::<_, Infallible>(json!("x".repeat(64)))
    });
    let Err(JournalError::Journal(e)) = big else {
        panic!("expected step-output-too-large")
    };
    assert_eq!(e.code(), ErrorCode::StepOutputTooLarge);
    assert!(e.message().contains("`plan`"), "{e}");
    let ok = journal
        .step(&RUN, "plan", None, T0, &mut || {
            Ok::<_, Infallible>(json!("ok"))
        })
        .unwrap();
    assert_eq!(ok, json!("ok"), "the claim was released each time");
}

#[test]
fn concurrent_attempts_of_one_step_never_both_run_it() {
    let (store, path) = sqlite();
    let store: Arc<dyn Store> = Arc::from(store);
    let calls = Arc::new(AtomicU32::new(0));
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (store, calls, barrier) = (store.clone(), calls.clone(), barrier.clone());
            std::thread::spawn(move || {
                let keyer = keyer();
                let journal = Journal::new(store.as_ref(), &keyer);
                barrier.wait();
                journal.step(&RUN, "plan", None, T0, &mut || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Ok::<_, Infallible>(json!({ "by": i }))
                })
            })
        })
        .collect();
    let answers: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one attempt ran the step");
    let outputs: Vec<_> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    let in_flight = answers
        .iter()
        .filter(|a| matches!(a, Err(e) if e.code() == Some(ErrorCode::StepInFlight)))
        .count();
    assert_eq!(
        outputs.len() + in_flight,
        8,
        "every other attempt was told to wait"
    );
    assert!(!outputs.is_empty());
    let keyer = keyer();
    let recorded = Journal::new(store.as_ref(), &keyer)
        .step(&RUN, "plan", None, T0 + 1, &mut || {
            Ok::<_, Infallible>(json!("never"))
        })
        .unwrap();
    for output in outputs {
        assert_eq!(output, &recorded);
    }
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_step_left_in_flight_is_taken_over_once_stale() {
    let store = open("memory:").unwrap();
    let keyer = keyer();
    // The crashed attempt: claimed, never finished.
    let guard = intentkey_store::guard::Guard::new(store.as_ref());
    let attempt = keyer.step_attempt(&RUN, "plan", None).unwrap();
    guard.claim(&attempt, T0).unwrap();

    let journal = Journal::new(store.as_ref(), &keyer).with_stale_after(60);
    let mut calls = 0;
    let mut sample = || -> Result<Value, Infallible> {
        calls += 1;
        Ok(json!(calls))
    };
    let early = journal.step(&RUN, "plan", None, T0 + 30, &mut sample);
    assert_eq!(code(early), Some(ErrorCode::StepInFlight));
    let taken = journal
        .step(&RUN, "plan", None, T0 + 61, &mut sample)
        .unwrap();
    assert_eq!(taken, json!(1));
    let replay = journal
        .step(&RUN, "plan", None, T0 + 62, &mut sample)
        .unwrap();
    assert_eq!(replay, json!(1));
    assert_eq!(calls, 1);
}

/// A destination that counts payments by key.
#[derive(Default)]
struct Bank {
    paid: Mutex<Vec<String>>,
    unknown: bool,
}

impl Bank {
    fn pay(&self, key: &str) -> Result<Value, &'static str> {
        self.paid.lock().unwrap().push(key.to_owned());
        Ok(json!({ "payment": &key[..8] }))
    }
}

impl Gateway for Bank {
    fn lookup(&self, key: &str) -> Lookup {
        if self.unknown {
            return Lookup::Unknown;
        }
        match self.paid.lock().unwrap().iter().any(|k| k == key) {
            true => Lookup::Found(Response::json(
                200,
                format!(r#"{{"payment":"{}","recovered":true}}"#, &key[..8]),
            )),
            false => Lookup::Absent,
        }
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

#[test]
fn a_tool_call_runs_once_per_run_whatever_the_model_wrote() {
    let store = open("memory:").unwrap();
    let keyer = keyer();
    let journal = Journal::new(store.as_ref(), &keyer);
    let bank = Bank::default();
    let args = |remittance: &str, amount: &str| {
        Payload::from_value(
            json!({"amount": amount, "pix_key": "Ana@Example.com", "remittance": remittance}),
        )
        .unwrap()
    };
    let first = journal
        .tool_call(
            &RUN,
            "pix.send",
            &args("Rent for March", "150.00"),
            T0,
            None,
            &mut |k| bank.pay(k),
        )
        .unwrap();
    let resampled = journal
        .tool_call(
            &RUN,
            "pix.send",
            &args("march rent :)", "150"),
            T0 + 5,
            None,
            &mut |k| bank.pay(k),
        )
        .unwrap();
    assert_eq!(first, resampled);
    assert_eq!(bank.paid.lock().unwrap().len(), 1);
    journal
        .tool_call(
            &Run {
                intent_id: "run-43",
                ..RUN
            },
            "pix.send",
            &args("Rent for March", "150"),
            T0,
            None,
            &mut |k| bank.pay(k),
        )
        .unwrap();
    assert_eq!(bank.paid.lock().unwrap().len(), 2, "two runs never collide");
    let invented =
        Payload::from_value(json!({"amount": "1", "pix_key": "a@b.c", "tool_call_id": "call_1"}))
            .unwrap();
    let refused = journal.tool_call(&RUN, "pix.send", &invented, T0, None, &mut |k| bank.pay(k));
    assert_eq!(code(refused), Some(ErrorCode::UnclassifiedFields));
}

#[test]
fn a_tool_call_left_in_flight_is_settled_by_the_destination() {
    let store = open("memory:").unwrap();
    let keyer = keyer();
    let args = Payload::from_value(json!({"amount": "10", "pix_key": "a@b.c"})).unwrap();
    // Crash after the effect, before the completion.
    let attempt = keyer.tool_call_attempt(&RUN, "pix.send", &args).unwrap();
    let guard = intentkey_store::guard::Guard::new(store.as_ref());
    guard.claim(&attempt, T0).unwrap();
    let mut bank = Bank::default();
    bank.pay(&attempt.key).unwrap();

    let journal = Journal::new(store.as_ref(), &keyer).with_stale_after(60);
    let no_gateway =
        journal.tool_call(&RUN, "pix.send", &args, T0 + 61, None, &mut |k| bank.pay(k));
    assert_eq!(code(no_gateway), Some(ErrorCode::StepInFlight));
    bank.unknown = true;
    let unknown = journal.tool_call(&RUN, "pix.send", &args, T0 + 61, Some(&bank), &mut |k| {
        bank.pay(k)
    });
    assert_eq!(code(unknown), Some(ErrorCode::StepInFlight));
    assert_eq!(
        bank.paid.lock().unwrap().len(),
        1,
        "unknown never re-executes"
    );
    bank.unknown = false;
    let found = journal
        .tool_call(&RUN, "pix.send", &args, T0 + 200, Some(&bank), &mut |k| {
            bank.pay(k)
        })
        .unwrap();
    assert_eq!(found["recovered"], json!(true));
    let replay = journal
        .tool_call(&RUN, "pix.send", &args, T0 + 201, None, &mut |k| {
            bank.pay(k)
        })
        .unwrap();
    assert_eq!(replay, found);
    assert_eq!(bank.paid.lock().unwrap().len(), 1);
}
