//! What a keyring costs: a `fields` key through a two-secret `Keyer` against
//! a one-secret `Deriver`, and an HTTP admission inside the rotation window
//! (a second storage key and fingerprint under the previous secret) against
//! one outside it. Figures: BENCHMARKS.md.
//!
//!     cargo bench -p intentkey --bench rotation

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use intentkey::http::{Endpoint, Incoming, Options, Profile};
use intentkey::{Deriver, Intent, Keyer, Keyring, Payload, Policy, Secret};

const ROTATION: i64 = 1_800_000_000;

fn keyring() -> Keyring {
    Keyring::new(vec![
        ("old".into(), 0, Secret::new([1u8; 32]).unwrap()),
        ("new".into(), ROTATION, Secret::new([2u8; 32]).unwrap()),
    ])
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let payload = Payload::from_json(
        r#"{"creditor_key":"123.456.789-09","amount":"10.50","currency":"BRL","remittance":"Fatura 1"}"#,
    )
    .unwrap();
    let intent = Intent {
        tenant_id: "t1",
        action_type: "pix.send",
        payload: &payload,
        intent_epoch: ROTATION + 5,
    };
    let mut group = c.benchmark_group("fields key");
    let deriver = Deriver::new(&Secret::new([2u8; 32]).unwrap(), Policy::default());
    let keyer = Keyer::new(&keyring(), Policy::default());
    group.bench_function("one secret (Deriver)", |b| {
        b.iter(|| deriver.derive(black_box(&intent)).unwrap())
    });
    group.bench_function("keyring of two (Keyer)", |b| {
        b.iter(|| keyer.derive(black_box(&intent)).unwrap())
    });
    group.finish();

    let body = br#"{"amount":2000,"currency":"usd","customer":"cus_1","description":"order 42"}"#;
    let request = Incoming {
        tenant_id: "acct_1",
        method: "POST",
        route: "/v1/charges",
        key_values: &["\"order-42\""],
        content_type: Some("application/json"),
        body,
    };
    let endpoint = Endpoint::with_keyring(keyring(), Options::new(Profile::Ietf));
    let mut group = c.benchmark_group("HTTP admit");
    group.bench_function("outside the window", |b| {
        b.iter(|| {
            endpoint
                .admit(black_box(&request), ROTATION + 200_000)
                .unwrap()
        })
    });
    group.bench_function("inside the window (prior key too)", |b| {
        b.iter(|| endpoint.admit(black_box(&request), ROTATION + 5).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
