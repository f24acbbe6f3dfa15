//! Secret rotation in the middle of a retry storm: intents first tried
//! before the rotation and retried after it run once, with client keys
//! (HTTP, the prior-key look-up) and with `fields` keys (the intent's own
//! epoch). Without the rotation window the same storm runs effects twice,
//! which shows what the window is for (and that this test can fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;

use intentkey::claim::{
    drive, perform, ClaimFlow, ClaimOutcome, EffectResult, FinishFlow, Finished, Flow,
    MemoryClaims, Op, Response, Rules, Step,
};
use intentkey::http::{
    Endpoint, Handled, Incoming, Options, Profile, ServeFlow, ServePath, Served,
};
use intentkey::{Intent, Keyer, Keyring, Payload, Policy, Secret};

/// The rotation instant and the window (= the TTL of done records).
const ROTATION: i64 = 10_000;
const WINDOW: i64 = 3_600;
const CLIENTS: u64 = 400;

fn keyring(window: i64) -> Keyring {
    Keyring::new(vec![
        ("2026-11".into(), 0, Secret::new([0x11; 32]).unwrap()),
        ("2026-12".into(), ROTATION, Secret::new([0x22; 32]).unwrap()),
    ])
    .unwrap()
    .with_window(window)
    .unwrap()
}

fn rules() -> Rules {
    Rules {
        ttl_seconds: WINDOW,
        ..Rules::default()
    }
}

/// A small deterministic generator (splitmix64), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One event of the storm: client `client` sends (or its effect finishes) at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at: i64,
    kind: Kind,
    client: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The owner's effect ends and it finishes the record (an index into
    /// the storm's owners).
    Finish(usize),
    /// A request (the first or a retry); `changed` sends another body.
    Send { changed: bool },
}

/// What a storm did: effects per client, answers by status, replays that
/// differed from the stored answer.
#[derive(Debug, Default)]
struct Storm {
    effects: BTreeMap<u64, u32>,
    statuses: BTreeMap<u16, u32>,
    replays: u32,
    straddling: u32,
}

/// Clients send first between ROTATION - 600 and ROTATION + 600 and retry
/// up to 6 times over the next 20 minutes (some with another body); an
/// owner's effect takes 0 to 15 minutes, so many are still in flight when
/// the secret changes.
fn events(seed: u64) -> Vec<Event> {
    let mut rng = Rng(seed);
    let mut events = Vec::new();
    for client in 0..CLIENTS {
        let first = ROTATION - 600 + rng.below(1_200) as i64;
        events.push(Event {
            at: first,
            kind: Kind::Send { changed: false },
            client,
        });
        for _ in 0..1 + rng.below(6) {
            events.push(Event {
                at: first + 1 + rng.below(1_200) as i64,
                kind: Kind::Send {
                    changed: rng.below(10) == 0,
                },
                client,
            });
        }
    }
    events.sort();
    events
}

fn body(client: u64, changed: bool) -> Vec<u8> {
    format!(
        r#"{{"order":{client},"amount":"{}.00"}}"#,
        if changed { 2 } else { 1 }
    )
    .into_bytes()
}

/// One request with the client key `order-1`.
fn order_one() -> Incoming<'static> {
    Incoming {
        tenant_id: "shop",
        method: "POST",
        route: "/orders",
        key_values: &["\"order-1\""],
        content_type: Some("application/json"),
        body: b"{}",
    }
}

/// The owner stores its answer (a fenced completion that must write).
fn finish(store: &mut MemoryClaims, key: &str, token: &str, response: Response, at: i64) {
    let flow = FinishFlow::new(key, token, EffectResult::Answered(response), at, &rules());
    let finished = drive(flow, store, &mut |_| unreachable!()).unwrap();
    assert_eq!(finished, Finished::Stored);
}

/// Drives a serve flow over the store until it needs the handler or ends.
fn drive_serve(
    flow: &mut ServeFlow,
    store: &mut MemoryClaims,
    mut step: Step<Served>,
) -> Step<Served> {
    loop {
        match step {
            Step::Io(Op::Effect(_)) | Step::Done(_) => return step,
            Step::Io(op) => {
                step = flow
                    .resume(perform(store, &op, &mut |_| unreachable!()).unwrap())
                    .unwrap()
            }
        }
    }
}

/// The storm against one endpoint with client keys (the IETF profile).
fn http_storm(endpoint: &Endpoint, seed: u64) -> Storm {
    let mut store = MemoryClaims::default();
    let mut storm = Storm::default();
    let mut queue = events(seed);
    let mut rng = Rng(seed ^ 0xabcd);
    let mut owners: Vec<ServeFlow> = Vec::new();
    let mut claimed_at: BTreeMap<u64, i64> = BTreeMap::new();
    let mut i = 0;
    while i < queue.len() {
        let event = queue[i];
        i += 1;
        let key = format!("\"order-{}\"", event.client);
        match event.kind {
            Kind::Send { changed } => {
                let body = body(event.client, changed);
                let request = Incoming {
                    tenant_id: "shop",
                    method: "POST",
                    route: "/orders",
                    key_values: &[&key],
                    content_type: Some("application/json"),
                    body: &body,
                };
                let seed = rng.next().to_be_bytes();
                let mut seed16 = [0u8; 16];
                seed16[..8].copy_from_slice(&seed);
                seed16[8..].copy_from_slice(&(i as u64).to_be_bytes());
                let mut flow =
                    ServeFlow::new(endpoint, &request, rules(), seed16, event.at).unwrap();
                let step = flow.start();
                match drive_serve(&mut flow, &mut store, step) {
                    Step::Io(Op::Effect(_)) => {
                        *storm.effects.entry(event.client).or_default() += 1;
                        let ends = event.at + rng.below(900) as i64;
                        owners.push(flow);
                        claimed_at.entry(event.client).or_insert(event.at);
                        let at = queue.partition_point(|e| e.at <= ends).max(i);
                        queue.insert(
                            at,
                            Event {
                                at: ends,
                                kind: Kind::Finish(owners.len() - 1),
                                client: event.client,
                            },
                        );
                    }
                    Step::Done(served) => {
                        assert_ne!(
                            served.path,
                            ServePath::Unguarded,
                            "every request carries a key"
                        );
                        let reply = served.reply.unwrap();
                        *storm.statuses.entry(reply.status).or_default() += 1;
                        if reply.is_replay() {
                            storm.replays += 1;
                            assert_eq!(
                                reply.body,
                                format!(r#"{{"order":{}}}"#, event.client).into_bytes(),
                                "client {} got another client's or a changed answer",
                                event.client
                            );
                        }
                        if let Some(claimed) = claimed_at.get(&event.client) {
                            if *claimed < ROTATION && event.at >= ROTATION {
                                storm.straddling += 1;
                            }
                        }
                    }
                    Step::Io(op) => panic!("the drive stops only at the handler: {op:?}"),
                }
            }
            Kind::Finish(owner) => {
                let flow = &mut owners[owner];
                let body = format!(r#"{{"order":{}}}"#, event.client).into_bytes();
                let handled = Handled::Answered {
                    status: 201,
                    headers: vec![("Content-Type".into(), "application/json".into())],
                    body,
                };
                let step = flow.handled(handled, event.at).unwrap();
                let Step::Done(served) = drive_serve(flow, &mut store, step) else {
                    panic!("the flow ends after the handler")
                };
                assert_eq!(served.finished, Some(Finished::Stored));
            }
        }
    }
    storm
}

#[test]
fn client_keys_retried_across_a_rotation_run_once() {
    for seed in [1, 2, 3] {
        let endpoint = Endpoint::with_keyring(keyring(WINDOW), Options::new(Profile::Ietf));
        let storm = http_storm(&endpoint, seed);
        let sent: u32 = storm.statuses.values().sum::<u32>() + storm.effects.values().sum::<u32>();
        println!(
            "seed {seed}: {sent} requests from {CLIENTS} clients, answers {:?}, {} replays, {} answered after the rotation from a record claimed before it",
            storm.statuses, storm.replays, storm.straddling
        );
        assert_eq!(
            storm.effects.len() as u64,
            CLIENTS,
            "seed {seed}: every client's effect ran"
        );
        let twice: Vec<_> = storm.effects.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "seed {seed}: effects ran more than once: {twice:?}"
        );
        // The storm did straddle the rotation: retries after it answered
        // from records claimed before it (replays, 409s and 422s).
        assert!(storm.straddling > 50, "seed {seed}: {storm:?}");
        for status in [201, 409, 422] {
            let seen = storm.statuses.get(&status).copied().unwrap_or(0);
            assert!(seen > 0, "seed {seed}: no {status} answers in {storm:?}");
        }
        let others: Vec<_> = storm
            .statuses
            .keys()
            .filter(|s| ![201, 409, 422].contains(*s))
            .collect();
        assert!(
            others.is_empty(),
            "seed {seed}: unexpected answers {others:?}"
        );
        assert!(storm.replays > 0, "seed {seed}: {storm:?}");
    }
}

#[test]
fn without_the_window_the_same_storm_runs_effects_twice() {
    let endpoint = Endpoint::with_keyring(keyring(0), Options::new(Profile::Ietf));
    let storm = http_storm(&endpoint, 1);
    let twice = storm.effects.values().filter(|n| **n > 1).count();
    println!("with no window: {twice} of {CLIENTS} clients' effects ran twice");
    assert!(
        twice > 20,
        "a rotation with no look-up of the previous key should duplicate: {storm:?}"
    );
}

/// The `fields` storm: every attempt derives its key and fingerprint with
/// `secret_epoch(recorded, now)`; returns effects per client.
fn fields_storm(secret_epoch: impl Fn(i64, i64) -> i64) -> BTreeMap<u64, u32> {
    let keyer = Keyer::new(&keyring(WINDOW), Policy::default());
    let mut store = MemoryClaims::default();
    let mut rng = Rng(7);
    let mut effects: BTreeMap<u64, u32> = BTreeMap::new();
    let all = events(7);
    let mut recorded: BTreeMap<u64, i64> = BTreeMap::new();
    for event in &all {
        // The intent is recorded at the client's first send; every attempt
        // carries that epoch, whatever the clock says when it runs.
        let recorded = *recorded.entry(event.client).or_insert(event.at);
        // A retry carries a new request id (an ignored field): the intent is the same.
        let payload = Payload::from_json(&format!(
            r#"{{"creditor_key":"client{}@example.com","amount":"1.00","currency":"BRL","request_id":"r-{}"}}"#,
            event.client,
            rng.next()
        ))
        .unwrap();
        let epoch = secret_epoch(recorded, event.at);
        let deriver = keyer.deriver_at(epoch).unwrap();
        let intent = Intent {
            tenant_id: "shop",
            action_type: "pix.send",
            payload: &payload,
            intent_epoch: recorded,
        };
        let attempt = intentkey::claim::Attempt {
            key: deriver.derive(&intent).unwrap().into_string(),
            fingerprint: deriver
                .fingerprint("shop", "pix.send", &payload)
                .unwrap()
                .to_string(),
            tenant_id: "shop".into(),
            action_type: "pix.send".into(),
            prior: None,
        };
        let token = format!("{:032x}", rng.next());
        let outcome = drive(
            ClaimFlow::new(&attempt, &token, event.at),
            &mut store,
            &mut |_| unreachable!(),
        )
        .unwrap();
        if outcome == ClaimOutcome::Owned {
            *effects.entry(event.client).or_default() += 1;
            finish(
                &mut store,
                &attempt.key,
                &token,
                Response::json(201, "{}"),
                event.at,
            );
        } else {
            assert!(matches!(outcome, ClaimOutcome::Done(_)), "{outcome:?}");
        }
    }
    effects
}

#[test]
fn fields_keys_keep_the_secret_of_their_intent_epoch() {
    let keyer = Keyer::new(&keyring(WINDOW), Policy::default());
    // What `Keyer::derive` does: the secret of the intent's own epoch.
    let payload =
        Payload::from_json(r#"{"creditor_key":"a@b.c","amount":"1","currency":"BRL"}"#).unwrap();
    let intent = Intent {
        tenant_id: "shop",
        action_type: "pix.send",
        payload: &payload,
        intent_epoch: ROTATION - 1,
    };
    assert_eq!(
        keyer.derive(&intent).unwrap(),
        keyer
            .deriver_at(ROTATION - 1)
            .unwrap()
            .derive(&intent)
            .unwrap()
    );
    assert_ne!(
        keyer.derive(&intent).unwrap(),
        keyer.deriver_at(ROTATION).unwrap().derive(&intent).unwrap()
    );

    let effects = fields_storm(|recorded, _now| recorded);
    assert_eq!(effects.len() as u64, CLIENTS);
    assert!(effects.values().all(|n| *n == 1), "{effects:?}");

    // Keyed by the secret of the attempt's clock instead, intents recorded
    // before the rotation and retried after it run twice.
    let naive = fields_storm(|_recorded, now| now);
    println!(
        "fields keys by the intent's epoch: 0 duplicates; by the attempt's clock: {} of {CLIENTS} intents ran twice",
        naive.values().filter(|n| **n > 1).count()
    );
    assert!(naive.values().filter(|n| **n > 1).count() > 20, "{naive:?}");
}

#[test]
fn after_the_window_the_previous_secret_can_be_dropped() {
    let full = keyring(WINDOW);
    let request = order_one();
    let admit = |endpoint: &Endpoint, now| match endpoint.admit(&request, now).unwrap() {
        intentkey::http::Admission::Guarded(a) => a,
        other => panic!("{other:?}"),
    };
    let with_old = Endpoint::with_keyring(full.clone(), Options::new(Profile::Ietf));
    assert!(admit(&with_old, ROTATION + WINDOW - 1).prior.is_some());
    let after = admit(&with_old, ROTATION + WINDOW);
    assert!(after.prior.is_none());

    // Dropping the old secret changes nothing for client keys after the window.
    let dropped = full.retire("2026-11").unwrap();
    let without_old = Endpoint::with_keyring(dropped.clone(), Options::new(Profile::Ietf));
    assert_eq!(admit(&without_old, ROTATION + WINDOW), after);

    // `fields` keys of intents recorded after the rotation are unchanged;
    // those recorded before it are refused, never keyed under the new secret.
    let payload =
        Payload::from_json(r#"{"creditor_key":"a@b.c","amount":"1","currency":"BRL"}"#).unwrap();
    let intent = |epoch| Intent {
        tenant_id: "shop",
        action_type: "pix.send",
        payload: &payload,
        intent_epoch: epoch,
    };
    let (old, new) = (
        Keyer::new(&full, Policy::default()),
        Keyer::new(&dropped, Policy::default()),
    );
    assert_eq!(
        old.derive(&intent(ROTATION)).unwrap(),
        new.derive(&intent(ROTATION)).unwrap()
    );
    let refused = new.derive(&intent(ROTATION - 1)).unwrap_err();
    assert_eq!(refused.code().as_str(), "secret-retired");
    assert_eq!(refused.field_name(), Some("intent_epoch"));
    assert!(
        refused.message().contains("2026-12"),
        "{}",
        refused.message()
    );
}

#[test]
fn a_keyring_refuses_what_would_make_keys_ambiguous() {
    let s = || Secret::new([1u8; 32]).unwrap();
    let code = |r: intentkey::Result<Keyring>| r.unwrap_err().code().as_str();
    assert_eq!(code(Keyring::new(vec![])), "invalid-keyring");
    assert_eq!(
        code(Keyring::new(vec![
            ("a".into(), 0, s()),
            ("b".into(), 0, s())
        ])),
        "invalid-keyring"
    );
    assert_eq!(
        code(Keyring::new(vec![
            ("a".into(), 0, s()),
            ("a".into(), 1, s())
        ])),
        "invalid-keyring"
    );
    assert_eq!(
        code(Keyring::new(vec![("".into(), 0, s())])),
        "invalid-keyring"
    );
    assert_eq!(
        code(Keyring::new(vec![("has space".into(), 0, s())])),
        "invalid-keyring"
    );
    assert_eq!(
        code(Keyring::new(vec![("x".repeat(65), 0, s())])),
        "invalid-keyring"
    );
    assert_eq!(code(keyring(1).with_window(-1)), "invalid-keyring");
    assert_eq!(code(Keyring::from_json("[]")), "invalid-keyring");
    assert_eq!(
        code(Keyring::from_json(r#"{"secrets":[],"extra":1}"#)),
        "invalid-keyring"
    );
    assert_eq!(
        code(Keyring::from_json(
            r#"{"secrets":[{"id":"a","active_from":0,"secret_hex":"abcd"}]}"#
        )),
        "secret-too-short"
    );
    // A secret pasted as a member name is not echoed (found by fuzzing).
    let pasted = format!(r#"{{"secrets":[],"{}":1}}"#, "ab".repeat(32));
    let error = Keyring::from_json(&pasted).unwrap_err();
    assert_eq!(error.code().as_str(), "invalid-keyring");
    assert!(
        !error.message().contains(&"ab".repeat(8)),
        "{}",
        error.message()
    );
    // Entries may come in any order; activation decides.
    let shuffled = Keyring::new(vec![("new".into(), 5, s()), ("old".into(), -5, s())]).unwrap();
    assert_eq!(shuffled.at(0).unwrap().id(), "old");
    // The secret bytes never show.
    let debug = format!("{:?}", keyring(1));
    assert!(
        !debug.contains("17, 17") && !debug.contains("1111"),
        "{debug}"
    );
    assert!(
        debug.contains("2026-11") && debug.contains("redacted"),
        "{debug}"
    );
    // A multi-secret keyer refuses calls that carry no epoch.
    let keyer = Keyer::new(&keyring(1), Policy::default());
    assert_eq!(
        keyer.sole_deriver().unwrap_err().code().as_str(),
        "invalid-keyring"
    );
    assert!(Keyer::new(&Keyring::single(s()), Policy::default())
        .sole_deriver()
        .is_ok());
}

#[test]
fn an_endpoint_with_no_secret_active_now_says_so() {
    let future = Keyring::new(vec![(
        "later".into(),
        ROTATION,
        Secret::new([3u8; 32]).unwrap(),
    )])
    .unwrap();
    let endpoint = Endpoint::with_keyring(future, Options::new(Profile::Ietf));
    let request = order_one();
    let error = endpoint.admit(&request, ROTATION - 1).unwrap_err();
    assert_eq!(
        (error.code().as_str(), error.field_name()),
        ("secret-retired", Some("keyring"))
    );
    assert!(
        error.message().contains("`later`") && error.message().contains("active now"),
        "{}",
        error.message()
    );
}
