//! `Endpoint::serve`: admission, claim and answer in one call, on the
//! memory store (the reference every store is tested against).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::claim::{
    drive, owner_token, EffectResult, FinishFlow, Finished, MemoryClaims, Response, Rules, Status,
};
use intentkey::http::{Endpoint, Incoming, Options, Profile, ServeError, Served};
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

fn token(n: u8) -> String {
    owner_token([n; 16])
}

fn serve(e: &Endpoint, store: &mut MemoryClaims, r: &Incoming<'_>, n: u8) -> Served {
    e.serve(store, r, &token(n), NOW).unwrap()
}

fn finish(store: &mut MemoryClaims, key: &str, n: u8, response: Response) -> Finished {
    let flow = FinishFlow::new(
        key,
        &token(n),
        EffectResult::Answered(response),
        NOW,
        &Rules::default(),
    );
    drive(flow, store, &mut |_| unreachable!("a finish asks nothing")).unwrap()
}

#[test]
fn the_owner_then_409_then_the_replay_then_the_payload_conflict() {
    let e = endpoint(Profile::Ietf);
    let mut store = MemoryClaims::default();
    let first = request(&["\"k-1\""], br#"{"sku":"A1","qty":2}"#);

    let Served::Owned(attempt) = serve(&e, &mut store, &first, 1) else {
        panic!("the first request owns the effect")
    };
    // The same attempt as admit derives, stored under the tenant-scoped key.
    let intentkey::http::Admission::Guarded(admitted) = e.admit(&first, NOW).unwrap() else {
        panic!("admitted")
    };
    assert_eq!(attempt, admitted);
    assert_eq!(store.records()[&attempt.key].status, Status::InFlight);
    assert_eq!(store.records()[&attempt.key].owner_token, token(1));

    // In flight: 409 with Retry-After, and the record keeps its owner.
    let Served::Answer(busy) = serve(&e, &mut store, &first, 2) else {
        panic!("409")
    };
    assert_eq!(busy.status, 409);
    assert!(busy.headers.iter().any(|(n, _)| n == "Retry-After"));
    assert_eq!(store.records()[&attempt.key].owner_token, token(1));

    let stored = Response::new(201, "application/pdf", vec![0x25, 0x50, 0xff, 0x00])
        .with_header("Location", "/orders/1");
    assert_eq!(
        finish(&mut store, &attempt.key, 1, stored),
        Finished::Stored
    );

    // Done: the replay, byte for byte, with its Location and the marker.
    let Served::Answer(replay) = serve(&e, &mut store, &first, 3) else {
        panic!("replay")
    };
    assert_eq!(replay.status, 201);
    assert_eq!(replay.body, vec![0x25, 0x50, 0xff, 0x00]);
    assert!(replay.is_replay());
    assert!(replay
        .headers
        .iter()
        .any(|(n, v)| n == "Location" && v == "/orders/1"));

    // The same key with another body: 422, nothing claimed.
    let other = request(&["\"k-1\""], br#"{"sku":"A1","qty":3}"#);
    let Served::Answer(conflict) = serve(&e, &mut store, &other, 4) else {
        panic!("422")
    };
    assert_eq!(conflict.status, 422);
    assert_eq!(store.records().len(), 1);
}

#[test]
fn refusals_store_nothing_in_every_profile() {
    for profile in [Profile::Ietf, Profile::Stripe, Profile::Ofb] {
        let e = endpoint(profile);
        let mut store = MemoryClaims::default();
        let long = "k".repeat(10_000);
        for values in [vec![], vec![long.as_str()], vec!["a\u{1}b"]] {
            let Served::Answer(reply) = serve(&e, &mut store, &request(&values, b"{}"), 1) else {
                panic!("{profile:?} refuses {values:?}")
            };
            assert_eq!(reply.status, 400, "{profile:?} {values:?}");
        }
        let bad_json = request(&["\"k\""], b"{not json");
        let key = if profile == Profile::Ietf {
            "\"k\""
        } else {
            "k"
        };
        let bad_json = Incoming {
            key_values: &[key],
            ..bad_json
        };
        let Served::Answer(reply) = serve(&e, &mut store, &bad_json, 1) else {
            panic!("{profile:?} refuses a body that is not JSON")
        };
        assert_eq!(reply.status, 400, "{profile:?}");
        assert!(store.records().is_empty(), "{profile:?} stored a refusal");
    }
}

#[test]
fn an_optional_key_runs_unguarded_and_stores_nothing() {
    let options = Options {
        key_required: false,
        ..Options::new(Profile::Stripe)
    };
    let e = Endpoint::new(Secret::new([7u8; 32]).unwrap(), options);
    let mut store = MemoryClaims::default();
    assert_eq!(
        serve(&e, &mut store, &request(&[], b"{}"), 1),
        Served::Unguarded
    );
    assert!(store.records().is_empty());
}

/// A store that cannot be reached.
struct Down;

impl intentkey::claim::ClaimStore for Down {
    type Error = &'static str;
    fn insert(&mut self, _: &intentkey::claim::Record) -> Result<bool, &'static str> {
        Err("connection refused")
    }
    fn get(&mut self, _: &str) -> Result<Option<intentkey::claim::Record>, &'static str> {
        Err("connection refused")
    }
    fn complete(&mut self, _: &intentkey::claim::Completion) -> Result<bool, &'static str> {
        Err("connection refused")
    }
    fn replace(&mut self, _: &intentkey::claim::Replacement) -> Result<bool, &'static str> {
        Err("connection refused")
    }
    fn release(&mut self, _: &intentkey::claim::Release) -> Result<bool, &'static str> {
        Err("connection refused")
    }
    fn list(&mut self, _: Status, _: u32) -> Result<Vec<intentkey::claim::Record>, &'static str> {
        Err("connection refused")
    }
    fn purge(&mut self, _: i64) -> Result<u64, &'static str> {
        Err("connection refused")
    }
}

#[test]
fn a_store_failure_is_the_stores_error_and_a_server_mistake_is_a_rules_error() {
    let e = endpoint(Profile::Ietf);
    let served = e.serve(&mut Down, &request(&["\"k\""], b"{}"), &token(1), NOW);
    assert_eq!(served, Err(ServeError::Store("connection refused")));
    // A refusal is decided before the store is touched.
    let refused = e.serve(&mut Down, &request(&[], b"{}"), &token(1), NOW);
    assert!(matches!(refused, Ok(Served::Answer(r)) if r.status == 400));
    let no_tenant = Incoming {
        tenant_id: "",
        ..request(&["\"k\""], b"{}")
    };
    let Err(ServeError::Rules(error)) = endpoint(Profile::Ietf).serve::<MemoryClaims>(
        &mut MemoryClaims::default(),
        &no_tenant,
        &token(1),
        NOW,
    ) else {
        panic!("an empty tenant is the server's mistake")
    };
    assert_eq!(error.code().as_str(), "invalid-tenant-id");
}
