//! `ServeFlow`: admit → claim → handle → capture → finish → answer, driven
//! over the memory store (the reference every store is tested against), with
//! store failures injected where a real store fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::claim::{
    perform, Finished, Flow, FlowError, MemoryClaims, Op, OpResult, ReleaseFlow, Rules, Status,
    Step, StoreFailure, FINISH_RETRY_DELAYS_MS,
};
use intentkey::http::{
    Endpoint, Handled, Incoming, Options, Profile, ServeFlow, ServePath, Served,
};
use intentkey::Secret;

const NOW: i64 = 1_700_000_000;

fn endpoint(profile: Profile) -> Endpoint {
    Endpoint::new(Secret::new([7u8; 32]).unwrap(), Options::new(profile))
}

fn request<'a>(key_values: &'a [&'a str], body: &'a [u8]) -> Incoming<'a> {
    Incoming {
        tenant_id: "acct_1",
        method: "POST",
        route: "/orders",
        key_values,
        content_type: Some("application/json"),
        body,
    }
}

/// Which store operations fail, and how.
#[derive(Default)]
struct Faults {
    /// The next this-many claim operations (insert, get) fail.
    claim: u32,
    /// The next this-many finishing writes (complete, release) fail.
    finish: u32,
    /// Failures are "unavailable" (else the store answers with an error).
    unavailable: bool,
}

/// What a driver saw.
struct Run {
    served: Served,
    handler_ran: bool,
    waits: Vec<u32>,
}

fn answered(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Handled {
    Handled::Answered {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body: body.to_vec(),
    }
}

/// Drives one request as every adapter does: perform each store operation
/// (or report its failure), run the handler when told, wait when told.
fn serve(
    e: &Endpoint,
    store: &mut MemoryClaims,
    r: &Incoming<'_>,
    seed: u8,
    handler: Handled,
    faults: &mut Faults,
) -> Run {
    let mut flow = ServeFlow::new(e, r, Rules::default(), [seed; 16], NOW).unwrap();
    let mut handler_ran = false;
    let mut waits = Vec::new();
    let mut step = flow.start();
    loop {
        step = match step {
            Step::Done(served) => {
                return Run {
                    served,
                    handler_ran,
                    waits,
                }
            }
            Step::Io(Op::Effect(key)) => {
                assert_eq!(key, flow.attempt().unwrap().key);
                assert!(!handler_ran, "the handler is asked for once");
                handler_ran = true;
                flow.handled(handler.clone(), NOW + 1).unwrap()
            }
            Step::Io(Op::Wait(ms)) => {
                waits.push(ms);
                flow.resume(OpResult::Waited).unwrap()
            }
            Step::Io(op) => {
                let budget = match op {
                    Op::Insert(_) | Op::Get(_) => &mut faults.claim,
                    _ => &mut faults.finish,
                };
                let result = if *budget > 0 {
                    *budget -= 1;
                    OpResult::Failed(StoreFailure {
                        unavailable: faults.unavailable,
                        message: "connection refused".into(),
                    })
                } else {
                    perform(store, &op, &mut |_| {
                        unreachable!("serving asks no destination")
                    })
                    .unwrap()
                };
                flow.resume(result).unwrap()
            }
        };
    }
}

const ORDER: &[u8] = br#"{"sku":"A1","qty":2}"#;

fn created() -> Handled {
    answered(
        201,
        &[
            ("Content-Type", "application/json"),
            ("Location", "/orders/1"),
            ("Set-Cookie", "session=secret"),
        ],
        br#"{"id":1}"#,
    )
}

#[test]
fn the_owner_then_409_then_the_replay_then_the_payload_conflict() {
    let e = endpoint(Profile::Ietf);
    let mut store = MemoryClaims::default();
    let first = request(&["k-1"], ORDER);
    let none = &mut Faults::default();

    // Claimed, the handler runs, but the record is asked about before it ends.
    let mut flow = ServeFlow::new(&e, &first, Rules::default(), [1; 16], NOW).unwrap();
    let mut step = flow.start();
    while let Step::Io(op) = &step {
        if matches!(op, Op::Effect(_)) {
            break;
        }
        step = flow
            .resume(perform(&mut store, op, &mut |_| unreachable!()).unwrap())
            .unwrap();
    }
    let key = flow.attempt().unwrap().key.clone();
    assert_eq!(store.records()[&key].status, Status::InFlight);
    assert_eq!(store.records()[&key].owner_token, flow.owner_token());

    // In flight: 409 with Retry-After; the handler does not run.
    let busy = serve(&e, &mut store, &first, 2, created(), none);
    assert!(!busy.handler_ran);
    assert_eq!(busy.served.path, ServePath::InFlight);
    let reply = busy.served.reply.unwrap();
    assert_eq!(
        (reply.status, reply.header("retry-after")),
        (409, Some("1"))
    );

    // The owner answers: sent as it was (no reply from the core), stored.
    let mut step = flow.handled(created(), NOW + 1).unwrap();
    let owner = loop {
        match step {
            Step::Done(served) => break served,
            Step::Io(op) => {
                step = flow
                    .resume(perform(&mut store, &op, &mut |_| unreachable!()).unwrap())
                    .unwrap()
            }
        }
    };
    assert_eq!(
        (
            owner.path,
            owner.reply,
            owner.finished,
            owner.finish_retries
        ),
        (ServePath::Handler, None, Some(Finished::Stored), 0)
    );

    // Done: the replay with the allow-listed headers only, and the marker.
    let replay = serve(&e, &mut store, &first, 3, created(), none);
    assert!(!replay.handler_ran);
    assert_eq!(replay.served.path, ServePath::Replay);
    let reply = replay.served.reply.unwrap();
    assert_eq!(reply.status, 201);
    assert_eq!(reply.body, br#"{"id":1}"#);
    assert!(reply.is_replay());
    assert_eq!(reply.header("location"), Some("/orders/1"));
    assert_eq!(
        reply.header("set-cookie"),
        None,
        "a header outside the allow-list is not replayed"
    );

    // The same key with another body: 422, nothing claimed.
    let other = request(&["k-1"], br#"{"sku":"A1","qty":3}"#);
    let conflict = serve(&e, &mut store, &other, 4, created(), none);
    assert_eq!(conflict.served.path, ServePath::PayloadConflict);
    assert_eq!(conflict.served.reply.unwrap().status, 422);
    assert!(!conflict.handler_ran);
    assert_eq!(store.records().len(), 1);
}

#[test]
fn a_completion_that_fails_is_tried_again_on_the_cores_schedule() {
    let e = endpoint(Profile::Stripe);
    let mut store = MemoryClaims::default();
    let r = request(&["k-2"], ORDER);
    let mut faults = Faults {
        finish: 2,
        unavailable: true,
        ..Faults::default()
    };
    let run = serve(&e, &mut store, &r, 1, created(), &mut faults);
    assert!(run.handler_ran);
    assert_eq!(run.waits, FINISH_RETRY_DELAYS_MS[..2]);
    assert_eq!(run.served.path, ServePath::Handler);
    assert_eq!(run.served.finished, Some(Finished::Stored));
    assert_eq!(run.served.finish_retries, 2);
    assert_eq!(
        run.served.finish_failures.len(),
        2,
        "each failure is handed to the host to report"
    );
    assert_eq!(run.served.finish_failures[0].message, "connection refused");
    let replay = serve(&e, &mut store, &r, 2, created(), &mut Faults::default());
    assert_eq!(replay.served.path, ServePath::Replay);
    assert!(!replay.handler_ran);
}

#[test]
fn a_completion_that_never_succeeds_leaves_the_record_in_flight() {
    let e = endpoint(Profile::Ietf);
    let mut store = MemoryClaims::default();
    let r = request(&["k-3"], ORDER);
    let mut faults = Faults {
        finish: u32::MAX,
        unavailable: true,
        ..Faults::default()
    };
    let run = serve(&e, &mut store, &r, 1, created(), &mut faults);
    // Every pause of the schedule, then one last try.
    assert_eq!(run.waits, FINISH_RETRY_DELAYS_MS);
    assert_eq!(
        run.served.finish_retries,
        FINISH_RETRY_DELAYS_MS.len() as u32
    );
    // The handler's answer still goes out; the record stays for recovery.
    assert_eq!(
        (run.served.path, run.served.reply, run.served.finished),
        (ServePath::Handler, None, None)
    );
    assert_eq!(
        store.records().values().next().unwrap().status,
        Status::InFlight
    );
    let retry = serve(&e, &mut store, &r, 2, created(), &mut Faults::default());
    assert_eq!(retry.served.path, ServePath::InFlight);
    assert!(!retry.handler_ran);
}

#[test]
fn a_store_error_on_finishing_is_not_tried_again() {
    let e = endpoint(Profile::Ietf);
    let mut store = MemoryClaims::default();
    let mut faults = Faults {
        finish: 1,
        unavailable: false,
        ..Faults::default()
    };
    let run = serve(
        &e,
        &mut store,
        &request(&["k-4"], ORDER),
        1,
        created(),
        &mut faults,
    );
    assert!(run.waits.is_empty());
    assert_eq!(
        (run.served.path, run.served.finished),
        (ServePath::Handler, None)
    );
}

#[test]
fn a_store_that_fails_the_claim_gets_the_cores_answer_and_runs_nothing() {
    for (unavailable, status) in [(true, 503), (false, 500)] {
        for profile in [Profile::Ietf, Profile::Stripe, Profile::Ofb] {
            let e = endpoint(profile);
            let mut store = MemoryClaims::default();
            let key = "k-5";
            let mut faults = Faults {
                claim: 1,
                unavailable,
                ..Faults::default()
            };
            let run = serve(
                &e,
                &mut store,
                &request(&[key], ORDER),
                1,
                created(),
                &mut faults,
            );
            assert!(!run.handler_ran, "{profile:?}");
            assert_eq!(run.served.path, ServePath::Unavailable);
            let reply = run.served.reply.unwrap();
            assert_eq!(
                reply.status, status,
                "{profile:?} unavailable={unavailable}"
            );
            assert!(reply.header("content-type").is_some());
            assert!(!String::from_utf8_lossy(&reply.body).contains("connection refused"));
            assert!(store.records().is_empty());
            let failure = run.served.claim_failure.unwrap();
            assert_eq!(
                (failure.unavailable, failure.message.as_str()),
                (unavailable, "connection refused")
            );
        }
    }
}

#[test]
fn an_error_with_a_client_status_releases_the_claim() {
    let e = endpoint(Profile::Ietf);
    let mut store = MemoryClaims::default();
    let r = request(&["k-6"], b"false");
    let run = serve(
        &e,
        &mut store,
        &r,
        1,
        Handled::Raised(400),
        &mut Faults::default(),
    );
    assert_eq!(
        (run.served.path, run.served.reply, run.served.finished),
        (ServePath::Released, None, Some(Finished::Released))
    );
    assert!(store.records().is_empty());
    // A retry runs again (never 409).
    let again = serve(&e, &mut store, &r, 2, created(), &mut Faults::default());
    assert!(again.handler_ran);
    assert_eq!(again.served.finished, Some(Finished::Stored));
}

#[test]
fn a_handler_that_fails_gets_500_and_the_record_stays_in_flight() {
    for handled in [Handled::Failed, Handled::Raised(502), Handled::Raised(302)] {
        let e = endpoint(Profile::Ietf);
        let mut store = MemoryClaims::default();
        let r = request(&["k-7"], ORDER);
        let run = serve(
            &e,
            &mut store,
            &r,
            1,
            handled.clone(),
            &mut Faults::default(),
        );
        assert_eq!(run.served.path, ServePath::Failed, "{handled:?}");
        assert_eq!(run.served.finished, Some(Finished::LeftInFlight));
        let reply = run.served.reply.unwrap();
        assert_eq!(reply.status, 500);
        assert!(String::from_utf8_lossy(&reply.body).contains("outcome-unknown"));
        assert_eq!(
            store.records().values().next().unwrap().status,
            Status::InFlight
        );
    }
}

#[test]
fn an_answer_past_the_cap_is_not_kept_and_never_run_again() {
    let options = Options {
        max_stored_bytes: 8,
        ..Options::new(Profile::Ietf)
    };
    let e = Endpoint::new(Secret::new([7u8; 32]).unwrap(), options);
    let mut store = MemoryClaims::default();
    let r = request(&["k-8"], ORDER);
    let big = answered(200, &[("Content-Type", "text/plain")], &[b'x'; 64]);
    let run = serve(&e, &mut store, &r, 1, big, &mut Faults::default());
    assert_eq!(
        (run.served.path, run.served.finished),
        (ServePath::Handler, Some(Finished::Stored))
    );
    let retry = serve(&e, &mut store, &r, 2, created(), &mut Faults::default());
    assert!(!retry.handler_ran);
    let reply = retry.served.reply.unwrap();
    assert_eq!(
        (reply.status, reply.header("idempotent-answer-kept")),
        (200, Some("false"))
    );
}

#[test]
fn refusals_and_unguarded_requests_store_nothing() {
    for profile in [Profile::Ietf, Profile::Stripe, Profile::Ofb] {
        let e = endpoint(profile);
        let mut store = MemoryClaims::default();
        let long = "k".repeat(10_000);
        for values in [vec![], vec![long.as_str()], vec!["a\u{1}b"]] {
            let run = serve(
                &e,
                &mut store,
                &request(&values, b"{}"),
                1,
                created(),
                &mut Faults::default(),
            );
            assert_eq!(
                run.served.path,
                ServePath::Refused,
                "{profile:?} {values:?}"
            );
            assert_eq!(run.served.reply.unwrap().status, 400);
            assert!(!run.handler_ran);
        }
        let run = serve(
            &e,
            &mut store,
            &request(&["k"], b"{not json"),
            1,
            created(),
            &mut Faults::default(),
        );
        assert_eq!(run.served.reply.unwrap().status, 400, "{profile:?}");
        assert!(store.records().is_empty(), "{profile:?} stored a refusal");
    }
    let options = Options {
        key_required: false,
        ..Options::new(Profile::Stripe)
    };
    let e = Endpoint::new(Secret::new([7u8; 32]).unwrap(), options);
    let mut store = MemoryClaims::default();
    let run = serve(
        &e,
        &mut store,
        &request(&[], b"{}"),
        1,
        created(),
        &mut Faults::default(),
    );
    assert_eq!(
        (run.served.path, run.served.reply.is_none(), run.handler_ran),
        (ServePath::Unguarded, true, false)
    );
    assert!(store.records().is_empty());
}

#[test]
fn a_server_mistake_is_an_error_and_misuse_is_typed() {
    let e = endpoint(Profile::Ietf);
    let no_tenant = Incoming {
        tenant_id: "",
        ..request(&["k"], b"{}")
    };
    let error = ServeFlow::new(&e, &no_tenant, Rules::default(), [1; 16], NOW).unwrap_err();
    assert_eq!(error.code().as_str(), "invalid-tenant-id");

    let mut flow =
        ServeFlow::new(&e, &request(&["k"], b"{}"), Rules::default(), [1; 16], NOW).unwrap();
    assert!(matches!(
        flow.handled(Handled::Failed, NOW),
        Err(FlowError::Misuse { got: "handled", .. })
    ));
    let Step::Io(Op::Insert(_)) = flow.start() else {
        panic!("the claim inserts first")
    };
    assert!(matches!(
        flow.resume(OpResult::Waited),
        Err(FlowError::Misuse { got: "waited", .. })
    ));
}

#[test]
fn a_record_that_vanishes_on_every_look_is_503_and_runs_nothing() {
    let e = endpoint(Profile::Ietf);
    let mut flow = ServeFlow::new(
        &e,
        &request(&["k-9"], ORDER),
        Rules::default(),
        [1; 16],
        NOW,
    )
    .unwrap();
    // Every insert loses, and every read finds nothing (purged in between).
    let mut step = flow.start();
    let served = loop {
        step = match step {
            Step::Done(served) => break served,
            Step::Io(Op::Insert(_)) => flow.resume(OpResult::Inserted(false)).unwrap(),
            Step::Io(Op::Get(_)) => flow.resume(OpResult::Got(None)).unwrap(),
            Step::Io(op) => panic!("a claim asks for {op:?}"),
        };
    };
    assert_eq!(served.path, ServePath::Unavailable);
    assert_eq!(served.reply.unwrap().status, 503);
    assert!(served.claim_failure.unwrap().unavailable);
}

#[test]
fn an_insert_whose_answer_was_lost_is_503_at_once_and_handed_back_to_be_released() {
    let e = endpoint(Profile::Ietf);
    let mut store = MemoryClaims::default();
    let r = request(&["k-10"], ORDER);
    let mut flow = ServeFlow::new(&e, &r, Rules::default(), [1; 16], NOW).unwrap();
    // The insert is committed, but the store's answer never arrives.
    let Step::Io(insert @ Op::Insert(_)) = flow.start() else {
        panic!("the claim inserts first")
    };
    perform(&mut store, &insert, &mut |_| unreachable!()).unwrap();
    let lost = StoreFailure {
        unavailable: true,
        message: "connection reset".into(),
    };
    let Step::Done(served) = flow.resume(OpResult::Failed(lost)).unwrap() else {
        panic!("the 503 goes out at once, with no store call first")
    };
    assert_eq!(
        (served.path, served.reply.unwrap().status),
        (ServePath::Unavailable, 503)
    );
    let unreleased = served.unreleased.expect("the claim is handed back");
    assert_eq!(unreleased.owner_token, flow.owner_token());
    assert_eq!(store.records().len(), 1, "committed, its answer lost");

    // The host's background release: the store is still down once, then answers.
    let mut release = ReleaseFlow::new(unreleased);
    let mut step = release.start();
    let mut down = 1;
    let finished = loop {
        step = match step {
            Step::Done(f) => break f,
            Step::Io(Op::Wait(_)) => release.resume(OpResult::Waited).unwrap(),
            Step::Io(op) if down > 0 => {
                down -= 1;
                let _ = op;
                release
                    .resume(OpResult::Failed(StoreFailure {
                        unavailable: true,
                        message: "timed out".into(),
                    }))
                    .unwrap()
            }
            Step::Io(op) => release
                .resume(perform(&mut store, &op, &mut |_| unreachable!()).unwrap())
                .unwrap(),
        };
    };
    assert_eq!(finished, Finished::Released);
    assert!(store.records().is_empty(), "the retry is not answered 409");
    let retry = serve(&e, &mut store, &r, 2, created(), &mut Faults::default());
    assert!(retry.handler_ran);

    // Another claim whose insert fails is handed back too.
    let mut faults = Faults {
        claim: 1,
        finish: 0,
        unavailable: true,
    };
    let other = serve(
        &e,
        &mut MemoryClaims::default(),
        &request(&["k-11"], ORDER),
        3,
        created(),
        &mut faults,
    );
    assert_eq!(
        (other.served.path, other.handler_ran),
        (ServePath::Unavailable, false)
    );
    assert!(
        other.served.unreleased.is_some(),
        "the insert failed: handed back"
    );
}

#[test]
fn a_flow_started_twice_answers_500_and_keeps_its_state() {
    let e = endpoint(Profile::Ietf);
    let mut flow = ServeFlow::new(
        &e,
        &request(&["k-12"], ORDER),
        Rules::default(),
        [1; 16],
        NOW,
    )
    .unwrap();
    let Step::Io(Op::Insert(_)) = flow.start() else {
        panic!("the claim inserts first")
    };
    let Step::Done(again) = flow.start() else {
        panic!("a second start ends at once")
    };
    assert_eq!(
        (again.path, again.reply.unwrap().status),
        (ServePath::Failed, 500)
    );
    // The first start goes on.
    let Step::Io(Op::Effect(_)) = flow.resume(OpResult::Inserted(true)).unwrap() else {
        panic!("owned")
    };
}
