//! The component on wasmtime: every golden vector, no WASI imports, trap
//! recovery, and agreement with the native core.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use intentkey_vectors::{Answer, Refusal, Subject};
use intentkey_wasmtime::{HostError, WasmEngine, WasmIntent, WasmKeyer, WasmKeys};
use serde_json::Value;

fn component_path() -> PathBuf {
    std::env::var_os("INTENTKEY_COMPONENT").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../dist/intentkey.wasm"),
        PathBuf::from,
    )
}

fn engine() -> &'static WasmEngine {
    static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        WasmEngine::from_file(component_path())
            .unwrap_or_else(|e| panic!("{e}; run `cargo xtask build-component` first"))
    })
}

struct Wasm<'e> {
    keys: WasmKeys<'e>,
    keyers: HashMap<(Option<String>, String), WasmKeyer>,
}

fn refusal(e: HostError) -> Refusal {
    match e {
        HostError::Intentkey(e) => Refusal {
            code: e.code().as_str().to_owned(),
            field: e.field_name().map(str::to_owned),
        },
        other => panic!("the component failed: {other}"),
    }
}

fn secret_bytes(hex: &str) -> Result<Vec<u8>, Refusal> {
    // Hex decoding is the runner's job here (the vectors carry hex); the core
    // still validates the bytes (length) when the keyer is created.
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|p| u8::from_str_radix(p, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .filter(|_| hex.len().is_multiple_of(2))
        .ok_or(Refusal {
            code: "invalid-secret".into(),
            field: None,
        })
}

impl Wasm<'_> {
    fn keyer(&mut self, policy: Option<&Value>, secret_hex: &str) -> Answer<&WasmKeyer> {
        let key = (policy.map(Value::to_string), secret_hex.to_owned());
        if !self.keyers.contains_key(&key) {
            let secret = secret_bytes(secret_hex)?;
            let keyer = self
                .keys
                .keyer(key.0.as_deref(), &secret)
                .map_err(refusal)?;
            self.keyers.insert(key.clone(), keyer);
        }
        Ok(&self.keyers[&key])
    }
}

impl Subject for Wasm<'_> {
    fn fields(
        &mut self,
        p: Option<&Value>,
        secret: &str,
        tenant: &str,
        action: &str,
        payload: &str,
        epoch: i64,
    ) -> Answer<(String, String)> {
        let intent = WasmIntent {
            tenant_id: tenant.into(),
            action_type: action.into(),
            payload_json: payload.into(),
            intent_epoch: epoch,
        };
        self.keyer(p, secret)?;
        let keyer = &self.keyers[&(p.map(Value::to_string), secret.to_owned())];
        let material = self.keys.material(keyer, &intent).map_err(refusal)?;
        let key = self.keys.derive(keyer, &intent).map_err(refusal)?;
        Ok((material, key))
    }

    fn request_line(&mut self, line: &str) -> String {
        let mut answers = self
            .keys
            .answer_lines(&[line.to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answers.len(), 1);
        answers.remove(0)
    }

    fn policy(&mut self, p: &Value) -> Answer<()> {
        self.keys
            .keyer(Some(&p.to_string()), &[0x11; 32])
            .map(|_| ())
            .map_err(refusal)
    }

    fn intent_hmac(
        &mut self,
        secret: &str,
        tenant: &str,
        intent_id: &str,
        length: u32,
    ) -> Answer<String> {
        self.keyer(None, secret)?;
        let keyer = &self.keyers[&(None, secret.to_owned())];
        self.keys
            .intent_key(keyer, tenant, intent_id, Some(length))
            .map_err(refusal)
    }

    fn fingerprint(
        &mut self,
        p: Option<&Value>,
        secret: &str,
        tenant: &str,
        action: &str,
        payload: &str,
    ) -> Answer<(String, String)> {
        self.keyer(p, secret)?;
        let keyer = &self.keyers[&(p.map(Value::to_string), secret.to_owned())];
        self.keys
            .fingerprint(keyer, tenant, action, payload)
            .map_err(refusal)
    }

    fn uuid(&mut self, random: &[u8]) -> Answer<String> {
        self.keys.uuid_key(random).map_err(refusal)
    }
}

#[test]
fn golden_vectors_wasmtime() {
    let mut subject = Wasm {
        keys: WasmKeys::new(engine()).unwrap(),
        keyers: HashMap::new(),
    };
    let report = intentkey_vectors::run(&mut subject).unwrap_or_else(|e| panic!("{e}"));
    report.assert_passed("wasmtime");
    assert_eq!(subject.keys.reinstantiations(), 0, "no vector may trap");
}

#[test]
fn the_component_imports_no_wasi() {
    let imports = engine().import_names();
    assert!(!imports.is_empty());
    let wasi: Vec<&String> = imports
        .iter()
        .filter(|name| name.starts_with("wasi:"))
        .collect();
    assert!(wasi.is_empty(), "WASI imports: {wasi:?}");
    for name in &imports {
        assert!(
            name.starts_with("intentkey:core/"),
            "unexpected import {name}"
        );
    }
}

#[test]
fn a_trap_gives_an_error_and_a_fresh_instance() {
    let mut keys = WasmKeys::new(engine()).unwrap();
    let keyer = keys.keyer(None, &[0x5c; 32]).unwrap();
    let intent = WasmIntent {
        tenant_id: "t1".into(),
        action_type: "pix.send".into(),
        payload_json: r#"{"amount":"10.50"}"#.into(),
        intent_epoch: 1_700_000_000,
    };
    let before = keys.derive(&keyer, &intent).unwrap();
    keys.interrupt_next_call();
    match keys.derive(&keyer, &intent) {
        Err(HostError::Trap(_)) => {}
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_eq!(keys.reinstantiations(), 1);
    // The keyer is rebuilt in the new instance; the key is unchanged.
    assert_eq!(keys.derive(&keyer, &intent).unwrap(), before);
    let uuid = keys.new_uuid_key().unwrap();
    assert_eq!(uuid.len(), 32);
    assert_eq!(&uuid[12..13], "4");
}

#[test]
fn wasm_and_native_agree_on_random_intents() {
    // Same component bytes, same answers as the native core: a quick cross-check
    // beyond the vectors, on the oracle-format example file.
    let lines: Vec<String> = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/intents.jsonl"),
    )
    .unwrap()
    .lines()
    .map(str::to_owned)
    .collect();
    let mut keys = WasmKeys::new(engine()).unwrap();
    let wasm = keys.answer_lines(&lines).unwrap();
    let mut native = intentkey::RequestAnswerer::new(intentkey::Policy::default());
    let native: Vec<String> = lines.iter().map(|l| native.answer_line(l)).collect();
    assert_eq!(wasm, native);
    let keyer = keys.keyer(None, &[1; 32]).unwrap();
    let many = keys
        .derive_many(
            &keyer,
            &[
                WasmIntent {
                    tenant_id: "t".into(),
                    action_type: "a".into(),
                    payload_json: r#"{"amount":1}"#.into(),
                    intent_epoch: 0,
                },
                WasmIntent {
                    tenant_id: "t".into(),
                    action_type: "a".into(),
                    payload_json: r#"{"coupon":1}"#.into(),
                    intent_epoch: 0,
                },
            ],
        )
        .unwrap();
    assert!(many[0].is_ok());
    assert!(
        matches!(&many[1], Err(HostError::Intentkey(e)) if e.code().as_str() == "unclassified-fields")
    );
    assert!(
        matches!(keys.keyer(None, &[1; 31]), Err(HostError::Intentkey(e)) if e.code().as_str() == "secret-too-short")
    );
}

/// A destination for the component's guard: counts nothing, answers unknown
/// or found.
struct Destination(Option<intentkey::claim::Response>);

impl intentkey_store::guard::Gateway for Destination {
    fn lookup(&self, _key: &str) -> intentkey::claim::Lookup {
        self.0.clone().map_or(
            intentkey::claim::Lookup::Unknown,
            intentkey::claim::Lookup::Found,
        )
    }
    fn read_your_writes(&self) -> bool {
        false
    }
}

#[test]
fn the_component_drives_a_host_store() {
    use intentkey::claim::{Response, Status};
    let path = std::env::temp_dir().join(format!("ik-wasm-guard-{}.sqlite", std::process::id()));
    let url = format!("sqlite:{}", path.display());
    let mut keys = WasmKeys::new(engine()).unwrap();
    // Without a store the guard answers with a clear error, never a trap.
    match keys.guard_claim("k", "fp", "t", "a", 0) {
        Err(HostError::Store(m)) => assert!(m.contains("no store"), "{m}"),
        other => panic!("expected a store error, got {other:?}"),
    }
    keys.set_store(intentkey_store::open(&url).unwrap());
    assert_eq!(
        keys.guard_claim("k1", "fp", "t", "a", 100).unwrap(),
        "owned"
    );
    assert_eq!(
        keys.guard_claim("k1", "fp", "t", "a", 101).unwrap(),
        "in-flight"
    );
    assert_eq!(
        keys.guard_claim("k1", "other", "t", "a", 102).unwrap(),
        "payload-conflict"
    );
    assert!(keys
        .guard_complete("k1", Response::json(201, "{}"), 103, 60)
        .unwrap());
    assert!(!keys
        .guard_complete("k1", Response::json(500, "late"), 104, 60)
        .unwrap());
    assert_eq!(keys.guard_claim("k1", "fp", "t", "a", 105).unwrap(), "done");
    // Recovery through the imported gateway: unknown backs off, then reconciles.
    keys.set_gateway(Box::new(Destination(None)));
    assert_eq!(
        keys.guard_claim("k2", "fp", "t", "a", 100).unwrap(),
        "owned"
    );
    let actions: Vec<&str> = (0..4)
        .map(|i| {
            keys.guard_recover("k2", 1_000 + i * 1_000, 60)
                .unwrap()
                .unwrap()
        })
        .collect();
    assert_eq!(
        actions,
        ["check-later", "check-later", "check-later", "reconcile"]
    );
    assert_eq!(keys.guard_recover("k2", 9_000, 60).unwrap(), None);
    // Found: recorded as done. The same store seen natively agrees.
    keys.set_gateway(Box::new(Destination(Some(Response::json(
        201,
        r#"{"id":1}"#,
    )))));
    assert_eq!(
        keys.guard_claim("k3", "fp", "t", "a", 100).unwrap(),
        "owned"
    );
    assert_eq!(
        keys.guard_recover("k3", 1_000, 60).unwrap(),
        Some("record-done")
    );
    let native = intentkey_store::open(&url).unwrap();
    assert_eq!(
        native.get("k2").unwrap().unwrap().status,
        Status::NeedsReconciliation
    );
    assert_eq!(
        native.get("k3").unwrap().unwrap().response.unwrap().body,
        r#"{"id":1}"#
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
