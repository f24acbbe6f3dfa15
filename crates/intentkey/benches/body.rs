//! A JSON request body's canonical form (RFC 8785), which every HTTP
//! admission fingerprints: the core's one-pass writer against
//! `serde_json_canonicalizer` (the reference it is tested against) on the
//! same parsed value, and the parse alone. Figures: BENCHMARKS.md.
//!
//!     cargo bench -p intentkey --bench body

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use intentkey::http::{canonical_json, Endpoint, Incoming, Options, Profile};
use intentkey::Secret;

const BODIES: [(&str, &str); 3] = [
    ("order", r#"{"sku":"A1","qty":2}"#),
    (
        "charge",
        r#"{"amount":2000,"currency":"usd","customer":"cus_1","description":"order 42"}"#,
    ),
    (
        "nested",
        r#"{"items":[{"sku":"A1","qty":2,"price":19.9},{"sku":"B2","qty":1,"price":5}],"ship_to":{"name":"Ana Conceição","city":"São Paulo","zip":"01310-100"},"note":"deixar na portaria","gift":false}"#,
    ),
];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("canonical JSON");
    for (name, body) in BODIES {
        let body = body.as_bytes();
        assert_eq!(
            canonical_json(body).unwrap(),
            serde_json_canonicalizer::to_vec(
                &serde_json::from_slice::<serde_json::Value>(body).unwrap()
            )
            .unwrap()
        );
        group.bench_function(format!("{name}: intentkey"), |b| {
            b.iter(|| canonical_json(black_box(body)).unwrap())
        });
        group.bench_function(format!("{name}: parse + serde_json_canonicalizer"), |b| {
            b.iter(|| {
                let value: serde_json::Value = serde_json::from_slice(black_box(body)).unwrap();
                serde_json_canonicalizer::to_vec(&value).unwrap()
            })
        });
        group.bench_function(format!("{name}: parse alone"), |b| {
            b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(body)).unwrap())
        });
    }
    group.finish();

    let endpoint = Endpoint::new(Secret::new([2u8; 32]).unwrap(), Options::new(Profile::Ietf));
    let mut group = c.benchmark_group("HTTP admit");
    for (name, body) in BODIES {
        let body = body.as_bytes();
        let request = Incoming {
            tenant_id: "acct_1",
            method: "POST",
            route: "/orders",
            key_values: &["\"order-42\""],
            content_type: Some("application/json"),
            body,
        };
        group.bench_function(name, |b| {
            b.iter(|| endpoint.admit(black_box(&request), 1_800_000_000).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
