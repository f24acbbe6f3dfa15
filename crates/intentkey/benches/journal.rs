//! What the journal's keys cost: a step's attempt (key and input fingerprint)
//! and a tool call's attempt (key over the normalized arguments, and their
//! fingerprint) against the plain `intent-hmac` key and the `fields` key and
//! fingerprint of the same payment. Figures: BENCHMARKS.md.
//!
//!     cargo bench -p intentkey --bench journal

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use intentkey::journal::{step_output, Run, DEFAULT_MAX_OUTPUT_BYTES};
use intentkey::{Intent, KeyLength, Keyer, Keyring, Payload, Policy, Secret};

fn bench(c: &mut Criterion) {
    let keyer = Keyer::new(
        &Keyring::single(Secret::new([3u8; 32]).unwrap()),
        Policy::default(),
    );
    let run = Run {
        tenant_id: "acme",
        intent_id: "rent-2026-03",
        intent_epoch: 1_764_547_200,
    };
    let payload = Payload::from_json(
        r#"{"creditor_key":"ana@example.com","amount":"150.00","currency":"BRL","remittance":"Rent for March"}"#,
    )
    .unwrap();
    let prompt: serde_json::Value = serde_json::json!([
        {"role": "system", "content": "You pay bills with the send_pix tool."},
        {"role": "user", "content": "Pay Ana the March rent: 150.00 BRL to the Pix key ana@example.com."}
    ]);
    let completion = serde_json::json!({"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "send_pix",
        "arguments": "{\"amount\":\"150.00\",\"currency\":\"BRL\",\"pix_key\":\"ana@example.com\"}"}}]}}]})
    .to_string();

    let mut group = c.benchmark_group("journal keys");
    group.bench_function("intent-hmac key (baseline)", |b| {
        b.iter(|| {
            keyer
                .intent_key(
                    "acme",
                    black_box("rent-2026-03"),
                    1_764_547_200,
                    KeyLength::FULL,
                )
                .unwrap()
        })
    });
    group.bench_function("step attempt, no input", |b| {
        b.iter(|| keyer.step_attempt(black_box(&run), "plan", None).unwrap())
    });
    group.bench_function("step attempt, a 2-message prompt as input", |b| {
        b.iter(|| {
            keyer
                .step_attempt(black_box(&run), "plan", Some(&prompt))
                .unwrap()
        })
    });
    let intent = Intent {
        tenant_id: "acme",
        action_type: "pix.send",
        payload: &payload,
        intent_epoch: 1_764_547_200,
    };
    group.bench_function("fields key + fingerprint (baseline)", |b| {
        b.iter(|| {
            (
                keyer.derive(black_box(&intent)).unwrap(),
                keyer
                    .fingerprint("acme", "pix.send", black_box(&payload), 1_764_547_200)
                    .unwrap(),
            )
        })
    });
    group.bench_function("tool-call attempt", |b| {
        b.iter(|| {
            keyer
                .tool_call_attempt(black_box(&run), "pix.send", black_box(&payload))
                .unwrap()
        })
    });
    group.bench_function("step output check (a 300 B completion)", |b| {
        b.iter(|| step_output("plan", black_box(&completion), DEFAULT_MAX_OUTPUT_BYTES).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
