//! Cold start of the component in wasmtime: what a process pays before its
//! first key. Compiling each component from its bytes (what
//! [`WasmEngine::from_file`] does at every start), loading the same component
//! precompiled by [`WasmEngine::precompile`] (`intentkey precompile`), then
//! instantiating the world-`pure` component and deriving its first key.
//!
//! `cargo xtask build-component && cargo bench -p intentkey-wasmtime --bench cold`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use intentkey_wasmtime::{WasmEngine, WasmIntent, WasmKeys};

fn intent() -> WasmIntent {
    WasmIntent {
        tenant_id: "t".into(),
        action_type: "pix.send".into(),
        payload_json: r#"{"creditor_key":"123.456.789-09","amount":10.5,"currency":"brl","remittance":"Fatura 1"}"#
            .into(),
        intent_epoch: 1_700_000_000,
    }
}

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let scratch = std::env::temp_dir().join(format!("ik-cold-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut group = c.benchmark_group("cold");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(8));
    for (world, file) in [
        ("pure", "intentkey-pure.wasm"),
        ("intentkey", "intentkey.wasm"),
    ] {
        let bytes = std::fs::read(root.join("dist").join(file))
            .expect("run cargo xtask build-component first");
        let precompiled = scratch.join(format!("{world}.cwasm"));
        std::fs::write(&precompiled, WasmEngine::precompile(&bytes).unwrap()).unwrap();
        println!(
            "{file}: {} bytes; precompiled {} bytes",
            bytes.len(),
            std::fs::metadata(&precompiled).unwrap().len()
        );
        group.bench_function(
            format!("{world}: compile from the component's bytes"),
            |b| {
                b.iter(|| black_box(WasmEngine::from_bytes(&bytes).unwrap()));
            },
        );
        group.bench_function(format!("{world}: load precompiled"), |b| {
            b.iter(|| black_box(WasmEngine::from_precompiled_file(&precompiled).unwrap()));
        });
    }
    let engine = WasmEngine::from_file(root.join("dist/intentkey-pure.wasm")).unwrap();
    let secret = [0x5c_u8; 32];
    let intent = intent();
    group.bench_function("pure: instantiate and derive the first key", |b| {
        b.iter(|| {
            let mut keys = WasmKeys::new(&engine).unwrap();
            let keyer = keys.keyer(None, &secret).unwrap();
            black_box(keys.derive(&keyer, &intent).unwrap())
        });
    });
    group.finish();
    std::fs::remove_dir_all(&scratch).ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
