//! The bounded wait of `ServeFlow` and `RunFlow`: a retry that finds its key
//! in flight watches the record and claims again, driven over the memory
//! store with the first attempt interleaved by hand.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::claim::{
    perform, Attempt, EffectResult, FinishFlow, Finished, Flow, MemoryClaims, Op, OpResult,
    Response, Rules, RunFlow, RunKind, RunOutcome, RunSpec, Status, Step, WatchRequest,
};
use intentkey::http::{Endpoint, Handled, Incoming, Options, Profile, ServeFlow, ServePath};
use intentkey::Secret;

const NOW: i64 = 1_700_000_000;

fn endpoint(wait_max_ms: u32) -> Endpoint {
    let mut options = Options::new(Profile::Ietf);
    options.wait_max_ms = wait_max_ms;
    Endpoint::new(Secret::new([7u8; 32]).unwrap(), options)
}

fn request(body: &[u8]) -> Incoming<'_> {
    Incoming {
        tenant_id: "acct_1",
        method: "POST",
        route: "/orders",
        key_values: &["k-1"],
        content_type: Some("application/json"),
        body,
    }
}

const ORDER: &[u8] = br#"{"sku":"A1","qty":2}"#;

fn no_ask(_: &str) -> intentkey::claim::Lookup {
    unreachable!("no destination here")
}

/// Starts the first request and stops at its handler: the record is in flight.
fn first_in_flight(e: &Endpoint, store: &mut MemoryClaims) -> ServeFlow {
    let mut flow = ServeFlow::new(e, &request(ORDER), Rules::default(), [1; 16], NOW).unwrap();
    let mut step = flow.start();
    loop {
        step = match step {
            Step::Io(Op::Effect(_)) => return flow,
            Step::Io(op) => flow
                .resume(perform(store, &op, &mut no_ask).unwrap())
                .unwrap(),
            Step::Done(s) => panic!("the first request ended: {s:?}"),
        };
    }
}

/// Drives `flow` over `store` until it watches (returned) or ends.
fn until_watch(
    flow: &mut ServeFlow,
    mut step: Step<intentkey::http::Served>,
    store: &mut MemoryClaims,
) -> Step<intentkey::http::Served> {
    loop {
        step = match step {
            Step::Io(Op::Watch(_)) | Step::Done(_) | Step::Io(Op::Effect(_)) => return step,
            Step::Io(op) => flow
                .resume(perform(store, &op, &mut no_ask).unwrap())
                .unwrap(),
        };
    }
}

fn created() -> Handled {
    Handled::Answered {
        status: 201,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: br#"{"id":1}"#.to_vec(),
    }
}

/// Finishes the first request with `handled` over `store`.
fn finish_first(mut first: ServeFlow, handled: Handled, store: &mut MemoryClaims) {
    let mut step = first.handled(handled, NOW + 1).unwrap();
    loop {
        step = match step {
            Step::Done(_) => return,
            Step::Io(op) => first
                .resume(perform(store, &op, &mut no_ask).unwrap())
                .unwrap(),
        };
    }
}

#[test]
fn a_waiter_gets_the_replay_when_the_first_request_finishes() {
    let e = endpoint(2_000);
    let mut store = MemoryClaims::default();
    let first = first_in_flight(&e, &mut store);

    let mut retry = ServeFlow::new(&e, &request(ORDER), Rules::default(), [2; 16], NOW).unwrap();
    let step = retry.start();
    let step = until_watch(&mut retry, step, &mut store);
    let Step::Io(Op::Watch(WatchRequest { key, ms })) = step else {
        panic!("the retry watches: {step:?}");
    };
    assert_eq!(
        key,
        retry.attempt().unwrap().key,
        "it watches its own record"
    );
    assert!(ms > 0 && ms <= 50, "the first interval: {ms}");

    // Nothing changed yet: the watch runs out and the retry watches again.
    let step = retry
        .resume(OpResult::Watched {
            elapsed_ms: ms,
            now: NOW,
        })
        .unwrap();
    let step = until_watch(&mut retry, step, &mut store);
    let Step::Io(Op::Watch(WatchRequest { ms: second, .. })) = step else {
        panic!("still in flight, so it watches again: {step:?}");
    };
    assert!(second > ms, "the interval grows: {ms} then {second}");

    // The first request finishes; the notification wakes the waiter early.
    finish_first(first, created(), &mut store);
    let step = retry
        .resume(OpResult::Watched {
            elapsed_ms: 7,
            now: NOW + 1,
        })
        .unwrap();
    let Step::Done(served) = until_watch(&mut retry, step, &mut store) else {
        panic!("the waiter ends with the replay");
    };
    assert_eq!(served.path, ServePath::Replay);
    let reply = served.reply.unwrap();
    assert_eq!(
        (reply.status, reply.body.as_slice()),
        (201, br#"{"id":1}"#.as_slice())
    );
    assert_eq!(served.waited_ms, ms + 7);
}

#[test]
fn another_payload_is_a_conflict_at_once_with_no_wait() {
    let e = endpoint(2_000);
    let mut store = MemoryClaims::default();
    let _first = first_in_flight(&e, &mut store);
    let other = request(br#"{"sku":"B2","qty":1}"#);
    let mut retry = ServeFlow::new(&e, &other, Rules::default(), [2; 16], NOW).unwrap();
    let step = retry.start();
    let Step::Done(served) = until_watch(&mut retry, step, &mut store) else {
        panic!("no watch for another payload");
    };
    assert_eq!(served.path, ServePath::PayloadConflict);
    assert_eq!(served.reply.unwrap().status, 422);
    assert_eq!(served.waited_ms, 0);
}

#[test]
fn a_spent_wait_is_the_profiles_409_with_retry_after() {
    let e = endpoint(1_000);
    let mut store = MemoryClaims::default();
    let _first = first_in_flight(&e, &mut store);
    let mut retry = ServeFlow::new(&e, &request(ORDER), Rules::default(), [2; 16], NOW).unwrap();
    let mut step = retry.start();
    let mut watches = Vec::new();
    let served = loop {
        step = match until_watch(&mut retry, step, &mut store) {
            Step::Io(Op::Watch(w)) => {
                watches.push(w.ms);
                retry
                    .resume(OpResult::Watched {
                        elapsed_ms: w.ms,
                        now: NOW + 1,
                    })
                    .unwrap()
            }
            Step::Done(served) => break served,
            other => panic!("{other:?}"),
        };
    };
    assert_eq!(watches.iter().sum::<u32>(), 1_000, "{watches:?}");
    assert_eq!(served.path, ServePath::InFlight);
    assert_eq!(served.waited_ms, 1_000);
    let reply = served.reply.unwrap();
    assert_eq!(reply.status, 409);
    assert_eq!(reply.header("retry-after"), Some("1"));
}

#[test]
fn a_released_record_is_claimed_by_the_waiter() {
    let e = endpoint(2_000);
    let mut store = MemoryClaims::default();
    let first = first_in_flight(&e, &mut store);
    let mut retry = ServeFlow::new(&e, &request(ORDER), Rules::default(), [2; 16], NOW).unwrap();
    let step = retry.start();
    assert!(matches!(
        until_watch(&mut retry, step, &mut store),
        Step::Io(Op::Watch(_))
    ));
    // The first request's handler chain raised a 4xx: its claim is released.
    finish_first(first, Handled::Raised(400), &mut store);
    let step = retry
        .resume(OpResult::Watched {
            elapsed_ms: 3,
            now: NOW + 1,
        })
        .unwrap();
    let step = until_watch(&mut retry, step, &mut store);
    assert!(
        matches!(step, Step::Io(Op::Effect(_))),
        "the waiter owns the key now: {step:?}"
    );
    let mut step = retry.handled(created(), NOW + 2).unwrap();
    let served = loop {
        step = match step {
            Step::Done(s) => break s,
            Step::Io(op) => retry
                .resume(perform(&mut store, &op, &mut no_ask).unwrap())
                .unwrap(),
        };
    };
    assert_eq!(
        (served.path, served.finished),
        (ServePath::Handler, Some(Finished::Stored))
    );
}

#[test]
fn without_the_option_a_record_in_flight_is_409_at_once() {
    let e = endpoint(0);
    let mut store = MemoryClaims::default();
    let _first = first_in_flight(&e, &mut store);
    let mut retry = ServeFlow::new(&e, &request(ORDER), Rules::default(), [2; 16], NOW).unwrap();
    let step = retry.start();
    let Step::Done(served) = until_watch(&mut retry, step, &mut store) else {
        panic!("no watch without the option");
    };
    assert_eq!((served.path, served.waited_ms), (ServePath::InFlight, 0));
}

#[test]
fn a_record_awaiting_reconciliation_is_not_waited_for() {
    let e = endpoint(2_000);
    let mut store = MemoryClaims::default();
    let first = first_in_flight(&e, &mut store);
    let key = first.attempt().unwrap().key.clone();
    let mut record = store.records()[&key].clone();
    let token = record.owner_token.clone();
    record.status = Status::NeedsReconciliation;
    let replaced = perform(
        &mut store,
        &Op::Replace(intentkey::claim::Replacement {
            expected_token: token,
            expected_lookups: 0,
            record,
        }),
        &mut no_ask,
    )
    .unwrap();
    assert_eq!(replaced, OpResult::Written(true));
    let mut retry = ServeFlow::new(&e, &request(ORDER), Rules::default(), [2; 16], NOW).unwrap();
    let step = retry.start();
    let Step::Done(served) = until_watch(&mut retry, step, &mut store) else {
        panic!("a human settles it: no wait");
    };
    assert_eq!(served.path, ServePath::InFlight);
}

fn attempt() -> Attempt {
    Attempt {
        key: "run-1".into(),
        fingerprint: "fp".into(),
        tenant_id: "t".into(),
        action_type: "pix.send".into(),
        prior: None,
    }
}

/// Starts a run of `spec` and stops at its effect: the record is in flight.
fn run_to_effect(spec: &RunSpec, store: &mut MemoryClaims) -> RunFlow {
    let mut first = RunFlow::new(spec.clone(), [1; 16]);
    let mut step = first.start();
    while let Step::Io(op) = &step {
        if matches!(op, Op::Effect(_)) {
            break;
        }
        step = first
            .resume(perform(store, op, &mut no_ask).unwrap())
            .unwrap();
    }
    first
}

#[test]
fn a_run_waits_for_the_first_run_then_replays_it() {
    let mut store = MemoryClaims::default();
    let mut spec = RunSpec::new(attempt(), RunKind::Effect, NOW);
    spec.wait_max_ms = 5_000;
    // The first run claims and stops at its effect.
    let first = run_to_effect(&spec, &mut store);
    let token = first.owner_token();

    let mut second = RunFlow::new(spec, [2; 16]);
    let mut step = second.start();
    let mut watched = 0;
    let outcome = loop {
        step = match step {
            Step::Done(outcome) => break outcome,
            Step::Io(Op::Watch(w)) => {
                watched += 1;
                if watched == 2 {
                    // The first run finishes between two watches.
                    let result = EffectResult::Answered(Response::json(201, r#"{"paid":true}"#));
                    let mut finish =
                        FinishFlow::new("run-1", &token, result, NOW + 1, &Rules::default());
                    let op = match finish.start() {
                        Step::Io(op) => op,
                        Step::Done(f) => panic!("{f:?}"),
                    };
                    assert_eq!(
                        perform(&mut store, &op, &mut no_ask).unwrap(),
                        OpResult::Written(true)
                    );
                }
                second
                    .resume(OpResult::Watched {
                        elapsed_ms: w.ms,
                        now: NOW + 1,
                    })
                    .unwrap()
            }
            Step::Io(Op::Effect(_)) => panic!("the effect runs once"),
            Step::Io(op) => second
                .resume(perform(&mut store, &op, &mut no_ask).unwrap())
                .unwrap(),
        };
    };
    assert!(
        matches!(outcome, RunOutcome::Replayed { ref response, recovered: false } if response.status == 201),
        "{outcome:?}"
    );
    assert_eq!(watched, 2);
    assert!(second.waited_ms() > 0);
}

#[test]
fn a_run_without_a_wait_answers_in_flight() {
    let mut store = MemoryClaims::default();
    let spec = RunSpec::new(attempt(), RunKind::Effect, NOW);
    let _first = run_to_effect(&spec, &mut store);
    let mut second = RunFlow::new(spec, [2; 16]);
    let mut step = second.start();
    let outcome = loop {
        step = match step {
            Step::Done(outcome) => break outcome,
            Step::Io(Op::Watch(_)) => panic!("no watch without the option"),
            Step::Io(op) => second
                .resume(perform(&mut store, &op, &mut no_ask).unwrap())
                .unwrap(),
        };
    };
    assert_eq!(outcome, RunOutcome::InFlight { recovery: None });
}
