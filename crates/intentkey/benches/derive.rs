//! `fields` derivation with the default policy, against the bare HMAC-SHA256 of
//! the same material (the floor). The Python oracle runs on the same inputs in
//! `bench/oracle_bench.py`; BENCHMARKS.md records both.
//!
//! `cargo bench -p intentkey --bench derive`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use hmac::{Hmac, Mac};
use intentkey::{Deriver, Intent, Normalizer, Payload, Policy, Secret};
use serde_json::Value;
use sha2::Sha256;

fn inputs() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/inputs.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("bench/inputs.json")).expect("JSON")
}

fn bench(c: &mut Criterion) {
    let inputs = inputs();
    for (case, input) in inputs["cases"].as_object().unwrap() {
        let secret_hex = input["secret_hex"].as_str().unwrap();
        let secret = Secret::from_hex(secret_hex).unwrap();
        let secret_bytes: Vec<u8> = (0..secret_hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&secret_hex[i..i + 2], 16).unwrap())
            .collect();
        let payload_text = input["payload"].to_string();
        let payload = Payload::from_json(&payload_text).unwrap();
        let deriver = Deriver::new(&secret, Policy::default());
        let intent = Intent {
            tenant_id: input["tenant_id"].as_str().unwrap(),
            action_type: input["action_type"].as_str().unwrap(),
            payload: &payload,
            intent_epoch: input["intent_epoch"].as_i64().unwrap(),
        };
        let material = deriver.material(&intent).unwrap();

        let mut group = c.benchmark_group(case.to_string());
        group.bench_function("intentkey fields key", |b| {
            b.iter(|| deriver.derive(black_box(&intent)).unwrap())
        });
        group.bench_function("bare HMAC-SHA256 of the material", |b| {
            b.iter(|| {
                let mut mac =
                    <Hmac<Sha256> as Mac>::new_from_slice(black_box(&secret_bytes)).unwrap();
                mac.update(black_box(&material));
                mac.finalize().into_bytes()
            })
        });
        let keyed = <Hmac<Sha256> as Mac>::new_from_slice(&secret_bytes).unwrap();
        group.bench_function("HMAC-SHA256 of the material, key schedule cached", |b| {
            b.iter(|| {
                let mut mac = keyed.clone();
                mac.update(black_box(&material));
                mac.finalize().into_bytes()
            })
        });
        group.bench_function("intentkey material only", |b| {
            b.iter(|| deriver.material(black_box(&intent)).unwrap())
        });
        group.bench_function("intentkey key from payload JSON text", |b| {
            b.iter(|| {
                let payload = Payload::from_json(black_box(&payload_text)).unwrap();
                deriver
                    .derive(&Intent {
                        payload: &payload,
                        ..intent
                    })
                    .unwrap()
            })
        });
        // The same, keeping of the payload only what the key reads (the
        // component's `derive`).
        let policy = Policy::default();
        group.bench_function(
            "intentkey key from payload JSON text, read for the key",
            |b| {
                b.iter(|| {
                    let payload =
                        Payload::from_json_for_key(black_box(&payload_text), &policy).unwrap();
                    deriver
                        .derive(&Intent {
                            payload: &payload,
                            ..intent
                        })
                        .unwrap()
                })
            },
        );
        // A line of `intentkey derive --jsonl` (the CLI's batch): the line's
        // JSON parsed, its members checked, the key derived, the answer line
        // written; the secret is the same on every line, as in a batch.
        let line = format!(
            r#"{{"id":"r-1","secret_hex":"{secret_hex}","tenant_id":{},"action_type":{},"payload":{payload_text},"intent_epoch":{}}}"#,
            input["tenant_id"], input["action_type"], input["intent_epoch"]
        );
        let mut answerer = intentkey::request::RequestAnswerer::new(Policy::default());
        assert!(answerer.answer_line(&line).contains("\"key\""));
        group.bench_function("intentkey answer to a JSON line (CLI)", |b| {
            b.iter(|| answerer.answer_line(black_box(&line)))
        });
        group.bench_function("intentkey fingerprint", |b| {
            b.iter(|| {
                deriver
                    .fingerprint(intent.tenant_id, intent.action_type, black_box(&payload))
                    .unwrap()
            })
        });
        for (name, normalizer) in [
            ("creditor_key", Normalizer::PixKey),
            ("amount", Normalizer::Decimal { scale: 2 }),
            ("currency", Normalizer::Currency),
            ("remittance", Normalizer::Text),
        ] {
            let value = payload.get(name).unwrap().clone();
            let mut out = String::with_capacity(64);
            group.bench_function(format!("normalize {name}"), |b| {
                b.iter(|| {
                    out.clear();
                    normalizer
                        .apply_into(name, black_box(&value), &mut out)
                        .unwrap();
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
