//! Per-key cost of the component on wasmtime against the native core, single
//! calls and batched, on the same inputs (`bench/inputs.json`).
//!
//! The pure component (`dist/intentkey-pure.wasm`, world `pure`).
//!
//! `cargo xtask build-component && cargo bench -p intentkey-wasmtime --bench wasm`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use intentkey::{Deriver, Intent, Payload, Policy, Secret};
use intentkey_wasmtime::{WasmEngine, WasmIntent, WasmKeys};
use serde_json::Value;

const BATCH: usize = 1000;

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let inputs: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("bench/inputs.json")).unwrap())
            .unwrap();
    let engine = WasmEngine::from_file(root.join("dist/intentkey-pure.wasm"))
        .expect("run cargo xtask build-component first");
    let mut keys = WasmKeys::new(&engine).unwrap();
    for (case, input) in inputs["cases"].as_object().unwrap() {
        let secret_hex = input["secret_hex"].as_str().unwrap();
        let secret = Secret::from_hex(secret_hex).unwrap();
        let secret_bytes: Vec<u8> = (0..secret_hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&secret_hex[i..i + 2], 16).unwrap())
            .collect();
        let intent = WasmIntent {
            tenant_id: input["tenant_id"].as_str().unwrap().into(),
            action_type: input["action_type"].as_str().unwrap().into(),
            payload_json: input["payload"].to_string(),
            intent_epoch: input["intent_epoch"].as_i64().unwrap(),
        };
        let keyer = keys.keyer(None, &secret_bytes).unwrap();
        let deriver = Deriver::new(&secret, Policy::default());
        let native_key = {
            let payload = Payload::from_json(&intent.payload_json).unwrap();
            deriver
                .derive(&Intent {
                    tenant_id: &intent.tenant_id,
                    action_type: &intent.action_type,
                    payload: &payload,
                    intent_epoch: intent.intent_epoch,
                })
                .unwrap()
        };
        assert_eq!(keys.derive(&keyer, &intent).unwrap(), native_key.as_str());

        let mut group = c.benchmark_group(format!("wasm-{case}"));
        group.bench_function("native key from payload JSON text", |b| {
            b.iter(|| {
                let payload = Payload::from_json(black_box(&intent.payload_json)).unwrap();
                deriver
                    .derive(&Intent {
                        tenant_id: &intent.tenant_id,
                        action_type: &intent.action_type,
                        payload: &payload,
                        intent_epoch: intent.intent_epoch,
                    })
                    .unwrap()
            })
        });
        group.bench_function("wasmtime derive, one call per key", |b| {
            b.iter(|| keys.derive(&keyer, black_box(&intent)).unwrap())
        });
        let batch = vec![intent.clone(); BATCH];
        group.throughput(Throughput::Elements(BATCH as u64));
        group.bench_function("wasmtime derive-many, 1000 keys per call", |b| {
            b.iter(|| keys.derive_many(&keyer, black_box(&batch)).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
