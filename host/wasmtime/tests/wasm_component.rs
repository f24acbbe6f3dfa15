//! The component on wasmtime: every golden vector on the pure component, no
//! WASI imports in either component, trap recovery, agreement with the
//! native core, and the guard driving real stores.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use intentkey::claim::{
    Attempt, ClaimOutcome, EffectResult, Finished, Lookup, Recovered, RecoveryAction,
    RecoveryRules, Response, Rules, Status,
};
use intentkey::ErrorCode;
use intentkey_store::{Gateway, MemoryStore, SqliteStore, Store, StoreError};
use intentkey_vectors::{Answer, Refusal, Subject};
use intentkey_wasmtime::{
    HostError, WasmEngine, WasmGuard, WasmIntent, WasmKeyer, WasmKeys, World,
};
use serde_json::Value;

fn dist(var: &str, file: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../dist")
                .join(file)
        },
        PathBuf::from,
    )
}

/// `dist/intentkey-pure.wasm` (world pure), compiled once for every test.
fn pure_engine() -> &'static WasmEngine {
    static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        WasmEngine::from_file(dist("INTENTKEY_PURE_COMPONENT", "intentkey-pure.wasm"))
            .unwrap_or_else(|e| panic!("{e}; run `cargo xtask build-component` first"))
    })
}

/// `dist/intentkey.wasm` (world intentkey), compiled once for every test.
fn guard_engine() -> &'static WasmEngine {
    static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        WasmEngine::from_file(dist("INTENTKEY_COMPONENT", "intentkey.wasm"))
            .unwrap_or_else(|e| panic!("{e}; run `cargo xtask build-component` first"))
    })
}

struct Wasm<'e> {
    keys: WasmKeys<'e>,
    keyers: HashMap<(Option<String>, String), WasmKeyer>,
}

fn refusal(e: HostError) -> Refusal {
    match e {
        HostError::Core(e) => Refusal {
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
        keys: WasmKeys::new(pure_engine()).unwrap(),
        keyers: HashMap::new(),
    };
    let report = intentkey_vectors::run(&mut subject).unwrap_or_else(|e| panic!("{e}"));
    report.assert_passed("wasmtime");
    assert_eq!(subject.keys.reinstantiations(), 0, "no vector may trap");
    // The policy vectors' keyers were dropped at once: the host holds only
    // the secrets of the keyers the runner keeps.
    assert_eq!(subject.keys.held_secrets(), subject.keyers.len());
}

#[test]
fn neither_component_imports_wasi_and_each_has_its_world() {
    let pure = pure_engine();
    let guard = guard_engine();
    assert_eq!(pure.world(), World::Pure);
    assert_eq!(guard.world(), World::Intentkey);
    for engine in [pure, guard] {
        let imports = engine.import_names();
        let wasi: Vec<&String> = imports.iter().filter(|n| n.starts_with("wasi:")).collect();
        assert!(
            wasi.is_empty(),
            "WASI imports in {}: {wasi:?}",
            engine.world()
        );
        for name in &imports {
            assert!(
                name.starts_with("intentkey:core/"),
                "unexpected import {name}"
            );
        }
    }
    let short = |engine: &WasmEngine| -> Vec<String> {
        let mut names: Vec<String> = engine
            .import_names()
            .iter()
            .filter_map(|n| n.strip_prefix("intentkey:core/"))
            .map(|n| n.split('@').next().unwrap().to_owned())
            .filter(|n| n != "types")
            .collect();
        names.sort();
        names
    };
    assert_eq!(short(pure), ["random", "secrets"]);
    assert_eq!(short(guard), ["gateway", "random", "secrets", "store"]);
    assert!(guard
        .export_names()
        .iter()
        .any(|n| n.starts_with("intentkey:core/guard@")));
    assert!(!pure
        .export_names()
        .iter()
        .any(|n| n.starts_with("intentkey:core/guard@")));
}

#[test]
fn each_instance_type_takes_only_its_world() {
    match WasmKeys::new(guard_engine()) {
        Err(HostError::Load(m)) => assert!(m.contains("WasmGuard"), "{m}"),
        other => panic!("expected a load error, got {other:?}"),
    }
    match WasmGuard::new(
        pure_engine(),
        Arc::new(MemoryStore::default()),
        Arc::new(Destination::unknown()),
    ) {
        Err(HostError::Load(m)) => assert!(m.contains("intentkey.wasm"), "{m}"),
        other => panic!("expected a load error, got {other:?}"),
    }
}

fn intent(payload: &str) -> WasmIntent {
    WasmIntent {
        tenant_id: "t1".into(),
        action_type: "pix.send".into(),
        payload_json: payload.into(),
        intent_epoch: 1_700_000_000,
    }
}

#[test]
fn a_trap_gives_an_error_and_a_fresh_instance() {
    let mut keys = WasmKeys::new(pure_engine()).unwrap();
    let keyer = keys.keyer(None, &[0x5c; 32]).unwrap();
    let intent = intent(r#"{"amount":"10.50"}"#);
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
fn a_keyer_belongs_to_the_instance_that_made_it() {
    let mut one = WasmKeys::new(pure_engine()).unwrap();
    let mut other = WasmKeys::new(pure_engine()).unwrap();
    let keyer = one.keyer(None, &[0x5c; 32]).unwrap();
    match other.derive(&keyer, &intent("{}")) {
        Err(HostError::Misuse(m)) => assert!(m.contains("another instance"), "{m}"),
        other => panic!("expected a misuse error, got {other:?}"),
    }
    assert!(one.derive(&keyer, &intent("{}")).is_ok());
}

#[test]
fn wasm_and_native_agree_and_both_worlds_derive_the_same_keys() {
    // Same component bytes, same answers as the native core: a quick cross-check
    // beyond the vectors, on the oracle-format example file.
    let lines: Vec<String> = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/intents.jsonl"),
    )
    .unwrap()
    .lines()
    .map(str::to_owned)
    .collect();
    let mut keys = WasmKeys::new(pure_engine()).unwrap();
    let wasm = keys.answer_lines(&lines).unwrap();
    let mut native = intentkey::RequestAnswerer::new(intentkey::Policy::default());
    let native: Vec<String> = lines.iter().map(|l| native.answer_line(l)).collect();
    assert_eq!(wasm, native);
    let mut guard = memory_guard(Destination::unknown());
    assert_eq!(guard.answer_lines(&lines).unwrap(), native);

    let keyer = keys.keyer(None, &[1; 32]).unwrap();
    let many = keys
        .derive_many(
            &keyer,
            &[intent(r#"{"amount":1}"#), intent(r#"{"coupon":1}"#)],
        )
        .unwrap();
    assert!(many[0].is_ok());
    assert!(
        matches!(&many[1], Err(e) if e.code() == Some(ErrorCode::UnclassifiedFields)),
        "{many:?}"
    );
    let guard_keyer = guard.keyer(None, &[1; 32]).unwrap();
    assert_eq!(
        guard
            .derive(&guard_keyer, &intent(r#"{"amount":1}"#))
            .unwrap(),
        *many[0].as_ref().unwrap()
    );
    let (_, fingerprint) = keys
        .fingerprint(&keyer, "t1", "pix.send", r#"{"amount":1}"#)
        .unwrap();
    assert!(keys
        .fingerprint_matches(
            &keyer,
            "t1",
            "pix.send",
            r#"{"amount":"1.00"}"#,
            &fingerprint
        )
        .unwrap());
    assert!(matches!(
        keys.keyer(None, &[1; 31]),
        Err(HostError::Core(e)) if e.code() == ErrorCode::SecretTooShort
    ));
}

/// A destination for the guard's recovery.
struct Destination {
    answer: Lookup,
    read_your_writes: bool,
}

impl Destination {
    fn unknown() -> Self {
        Destination {
            answer: Lookup::Unknown,
            read_your_writes: false,
        }
    }
}

impl Gateway for Destination {
    fn lookup(&self, _key: &str) -> Lookup {
        self.answer.clone()
    }
    fn read_your_writes(&self) -> bool {
        self.read_your_writes
    }
}

fn memory_guard(destination: Destination) -> WasmGuard<'static> {
    WasmGuard::new(
        guard_engine(),
        Arc::new(MemoryStore::default()),
        Arc::new(destination),
    )
    .unwrap()
}

fn attempt(key: &str, fingerprint: &str) -> Attempt {
    Attempt {
        key: key.into(),
        fingerprint: fingerprint.into(),
        tenant_id: "t1".into(),
        action_type: "pix.send".into(),
        prior: None,
    }
}

fn recovery_rules(read_your_writes: bool) -> RecoveryRules {
    RecoveryRules {
        stale_after: 60,
        read_your_writes,
        ttl_seconds: 3_600,
    }
}

/// Claim, finish, replay; a repeat in flight; another payload; the store
/// seen natively agrees.
fn claim_finish_replay(store: Arc<dyn Store>) {
    let mut guard = WasmGuard::new(
        guard_engine(),
        Arc::clone(&store),
        Arc::new(Destination::unknown()),
    )
    .unwrap();
    let a = attempt("k1", "fp");
    let (outcome, token) = guard.claim(&a, 100).unwrap();
    assert_eq!(outcome, ClaimOutcome::Owned);
    assert_eq!(token.len(), 32);
    assert_eq!(guard.claim(&a, 101).unwrap().0, ClaimOutcome::InFlight);
    assert_eq!(
        guard.claim(&attempt("k1", "other"), 102).unwrap().0,
        ClaimOutcome::PayloadConflict
    );
    let paid = Response::json(201, r#"{"id":"pay_1"}"#).with_header("Location", "/payments/1");
    let finished = guard
        .finish(
            "k1",
            &token,
            EffectResult::Answered(paid.clone()),
            103,
            &Rules::default(),
        )
        .unwrap();
    assert_eq!(finished, Finished::Stored);
    // Every repeat replays the stored response, headers and all.
    for now in [104, 105] {
        assert_eq!(
            guard.claim(&a, now).unwrap().0,
            ClaimOutcome::Done(paid.clone())
        );
    }
    let native = store.get("k1").unwrap().unwrap();
    assert_eq!(native.status, Status::Done);
    assert_eq!(native.owner_token, token);
    assert_eq!(native.response, Some(paid));
    assert_eq!(
        native.expires_at,
        Some(103 + intentkey::claim::DEFAULT_TTL_SECONDS)
    );
    // Purge: only done records past their expiry.
    assert_eq!(guard.purge(104).unwrap(), 0);
    assert_eq!(
        guard
            .purge(103 + intentkey::claim::DEFAULT_TTL_SECONDS)
            .unwrap(),
        1
    );
    assert!(store.get("k1").unwrap().is_none());
}

#[test]
fn the_guard_drives_a_memory_store() {
    claim_finish_replay(Arc::new(MemoryStore::default()));
}

struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> Self {
        TempDb(std::env::temp_dir().join(format!("ik-wasm-{name}-{}.sqlite", std::process::id())))
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

#[test]
fn the_guard_drives_a_sqlite_store() {
    let db = TempDb::new("replay");
    claim_finish_replay(Arc::new(SqliteStore::open(&db.0).unwrap()));
    // And through the URL opener, as a boxed store.
    let db = TempDb::new("replay-url");
    let store: Arc<dyn Store> = intentkey_store::open(&format!("sqlite:{}", db.0.display()))
        .unwrap()
        .into();
    claim_finish_replay(store);
}

#[test]
fn a_release_deletes_the_record_and_a_retry_owns() {
    let store = Arc::new(MemoryStore::default());
    let mut guard = WasmGuard::new(
        guard_engine(),
        store.clone(),
        Arc::new(Destination::unknown()),
    )
    .unwrap();
    let a = attempt("k", "fp");
    let (outcome, token) = guard.claim(&a, 0).unwrap();
    assert_eq!(outcome, ClaimOutcome::Owned);
    let busy = EffectResult::Answered(Response::json(429, r#"{"error":"slow down"}"#));
    assert_eq!(
        guard
            .finish("k", &token, busy, 1, &Rules::default())
            .unwrap(),
        Finished::Released
    );
    assert!(
        store.get("k").unwrap().is_none(),
        "a released claim is deleted"
    );
    let (again, retry_token) = guard.claim(&a, 2).unwrap();
    assert_eq!(again, ClaimOutcome::Owned);
    assert_ne!(retry_token, token);
    // Refused (nothing happened) releases too; Failed stays in flight.
    assert_eq!(
        guard
            .finish(
                "k",
                &retry_token,
                EffectResult::Refused(None),
                3,
                &Rules::default()
            )
            .unwrap(),
        Finished::Released
    );
    let (_, third) = guard.claim(&a, 4).unwrap();
    assert_eq!(
        guard
            .finish("k", &third, EffectResult::Failed, 5, &Rules::default())
            .unwrap(),
        Finished::LeftInFlight
    );
    assert_eq!(guard.claim(&a, 6).unwrap().0, ClaimOutcome::InFlight);
}

#[test]
fn a_superseded_finish_is_refused() {
    let store = Arc::new(MemoryStore::default());
    let mut guard = WasmGuard::new(
        guard_engine(),
        store.clone(),
        Arc::new(Destination {
            answer: Lookup::Absent,
            read_your_writes: true,
        }),
    )
    .unwrap();
    let a = attempt("k", "fp");
    let (_, first) = guard.claim(&a, 0).unwrap();
    let ok = || EffectResult::Answered(Response::json(200, "{}"));
    assert_eq!(
        guard
            .finish("k", "not-the-owner", ok(), 1, &Rules::default())
            .unwrap(),
        Finished::Superseded
    );
    // Recovery takes the stale record over (read-your-writes absent).
    let (recovered, second) = guard.recover("k", 60, &recovery_rules(true)).unwrap();
    assert_eq!(recovered, Recovered::Applied(RecoveryAction::ReExecute));
    assert_ne!(second, first);
    assert_eq!(store.get("k").unwrap().unwrap().owner_token, second);
    // The first owner's late completion is refused; the new owner's stands.
    assert_eq!(
        guard
            .finish("k", &first, ok(), 61, &Rules::default())
            .unwrap(),
        Finished::Superseded
    );
    assert_eq!(
        guard
            .finish("k", &second, ok(), 62, &Rules::default())
            .unwrap(),
        Finished::Stored
    );
    assert_eq!(
        guard
            .finish("k", &second, ok(), 63, &Rules::default())
            .unwrap(),
        Finished::Superseded
    );
}

#[test]
fn recovery_leaves_a_fresh_claim_alone() {
    let store = Arc::new(MemoryStore::default());
    let mut guard = WasmGuard::new(
        guard_engine(),
        store.clone(),
        Arc::new(Destination {
            answer: Lookup::Absent,
            read_your_writes: true,
        }),
    )
    .unwrap();
    guard.claim(&attempt("k", "fp"), 1_000).unwrap();
    let before = store.get("k").unwrap();
    assert_eq!(
        guard.recover("k", 1_059, &recovery_rules(true)).unwrap().0,
        Recovered::NotDue { due_at: 1_060 }
    );
    assert_eq!(store.get("k").unwrap(), before, "nothing written");
    assert!(guard.due(1_059, 60, 10).unwrap().is_empty());
    assert_eq!(guard.due(1_060, 60, 10).unwrap(), ["k"]);
    assert_eq!(
        guard
            .recover("missing", 2_000, &recovery_rules(true))
            .unwrap()
            .0,
        Recovered::Missing
    );
}

#[test]
fn recovery_asks_the_gateway_and_unknown_never_re_executes() {
    let store = Arc::new(MemoryStore::default());
    // The rules trust absent, but the gateway is not read-your-writes: absent
    // counts as unknown.
    let mut guard = WasmGuard::new(
        guard_engine(),
        store.clone(),
        Arc::new(Destination {
            answer: Lookup::Absent,
            read_your_writes: false,
        }),
    )
    .unwrap();
    let (_, owner) = guard.claim(&attempt("k", "fp"), 0).unwrap();
    let mut now = 60;
    let mut waits = Vec::new();
    loop {
        match guard.recover("k", now, &recovery_rules(true)).unwrap().0 {
            Recovered::Applied(RecoveryAction::CheckLater { next_lookup_at, .. }) => {
                waits.push(next_lookup_at - now);
                now = next_lookup_at;
            }
            Recovered::Applied(RecoveryAction::Reconcile { lookups }) => {
                assert_eq!(lookups, 4);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(waits, [60, 120, 240]);
    let record = store.get("k").unwrap().unwrap();
    assert_eq!(record.status, Status::NeedsReconciliation);
    assert_eq!(record.owner_token, owner);
    assert_eq!(
        guard
            .recover("k", now + 1_000, &recovery_rules(true))
            .unwrap()
            .0,
        Recovered::NotInFlight(Status::NeedsReconciliation)
    );

    // Found: recorded as done, replayed.
    let found = Response::json(201, r#"{"id":1}"#);
    let mut guard = WasmGuard::new(
        guard_engine(),
        store.clone(),
        Arc::new(Destination {
            answer: Lookup::Found(found.clone()),
            read_your_writes: false,
        }),
    )
    .unwrap();
    guard.claim(&attempt("k2", "fp"), 0).unwrap();
    assert_eq!(
        guard.recover("k2", 60, &recovery_rules(false)).unwrap().0,
        Recovered::Applied(RecoveryAction::RecordDone(found.clone()))
    );
    assert_eq!(
        guard.claim(&attempt("k2", "fp"), 61).unwrap().0,
        ClaimOutcome::Done(found)
    );
}

/// A store that always fails, as a restarting server would.
struct Failing {
    retryable: bool,
}

impl Failing {
    fn error(&self) -> StoreError {
        if self.retryable {
            StoreError::retryable("the database is restarting")
        } else {
            StoreError::fatal("the records table is missing")
        }
    }
}

impl Store for Failing {
    fn insert(&self, _: &intentkey::claim::Record) -> Result<bool, StoreError> {
        Err(self.error())
    }
    fn get(&self, _: &str) -> Result<Option<intentkey::claim::Record>, StoreError> {
        Err(self.error())
    }
    fn complete(&self, _: &intentkey::claim::Completion) -> Result<bool, StoreError> {
        Err(self.error())
    }
    fn replace(&self, _: &intentkey::claim::Replacement) -> Result<bool, StoreError> {
        Err(self.error())
    }
    fn release(&self, _: &intentkey::claim::Release) -> Result<bool, StoreError> {
        Err(self.error())
    }
    fn list(
        &self,
        _: Option<Status>,
        _: usize,
    ) -> Result<Vec<intentkey::claim::Record>, StoreError> {
        Err(self.error())
    }
    fn purge(&self, _: i64) -> Result<u64, StoreError> {
        Err(self.error())
    }
}

#[test]
fn a_store_failure_surfaces_with_its_code_and_message() {
    for (retryable, code, message) in [
        (
            true,
            ErrorCode::StoreUnavailable,
            "the database is restarting",
        ),
        (
            false,
            ErrorCode::StoreFailed,
            "the records table is missing",
        ),
    ] {
        let mut guard = WasmGuard::new(
            guard_engine(),
            Arc::new(Failing { retryable }),
            Arc::new(Destination::unknown()),
        )
        .unwrap();
        let results = [
            guard.claim(&attempt("k", "fp"), 0).map(|_| ()),
            guard
                .finish("k", "t", EffectResult::Failed, 0, &Rules::default())
                .map(|_| ()),
            guard
                .finish("k", "t", EffectResult::Refused(None), 0, &Rules::default())
                .map(|_| ()),
            guard.recover("k", 0, &recovery_rules(false)).map(|_| ()),
            guard.due(0, 60, 10).map(|_| ()),
            guard.purge(0).map(|_| ()),
        ];
        // Failed writes nothing, so it cannot fail; every other call reaches the store.
        assert!(results[1].is_ok());
        for (i, result) in results.into_iter().enumerate().filter(|(i, _)| *i != 1) {
            match result {
                Err(HostError::Core(e)) => {
                    assert_eq!(e.code(), code, "call {i}");
                    assert_eq!(e.message(), message, "call {i}");
                }
                other => panic!("call {i}: expected {code}, got {other:?}"),
            }
        }
        assert_eq!(guard.reinstantiations(), 0, "a store failure is not a trap");
    }
}

#[test]
fn a_guard_trap_keeps_the_store_and_gateway() {
    let store = Arc::new(MemoryStore::default());
    let mut guard = WasmGuard::new(
        guard_engine(),
        store.clone(),
        Arc::new(Destination {
            answer: Lookup::Found(Response::json(201, "{}")),
            read_your_writes: false,
        }),
    )
    .unwrap();
    let keyer = guard.keyer(None, &[0x5c; 32]).unwrap();
    let key = guard.derive(&keyer, &intent("{}")).unwrap();
    let (_, token) = guard.claim(&attempt(&key, "fp"), 0).unwrap();
    guard.interrupt_next_call();
    match guard.claim(&attempt("other", "fp"), 1) {
        Err(HostError::Trap(_)) => {}
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_eq!(guard.reinstantiations(), 1);
    // The fresh instance sees the same store, gateway and keyer.
    assert_eq!(guard.derive(&keyer, &intent("{}")).unwrap(), key);
    assert_eq!(
        guard.claim(&attempt(&key, "fp"), 2).unwrap().0,
        ClaimOutcome::InFlight
    );
    assert!(matches!(
        guard.recover(&key, 60, &recovery_rules(false)).unwrap().0,
        Recovered::Applied(RecoveryAction::RecordDone(_))
    ));
    assert_eq!(
        guard
            .finish(&key, &token, EffectResult::Failed, 61, &Rules::default())
            .unwrap(),
        Finished::LeftInFlight
    );
    assert_eq!(store.get(&key).unwrap().unwrap().status, Status::Done);
}

#[test]
fn dropping_keyers_releases_their_guest_resources_and_secrets() {
    let policy =
        r#"{"version":1,"fields":{"amount":{"class":"key","normalizer":"decimal","scale":2}}}"#;
    let mut keys = WasmKeys::new(pure_engine()).unwrap();
    let churn = |keys: &mut WasmKeys<'_>, n: usize| {
        for i in 0..n {
            let keyer = keys.keyer(Some(policy), &[i as u8; 32]).unwrap();
            keys.derive(&keyer, &intent(r#"{"amount":1}"#)).unwrap();
            if i % 2 == 0 {
                drop(keyer); // the guest part goes at the next call
            } else {
                keys.drop_keyer(keyer);
            }
        }
    };
    churn(&mut keys, 200);
    let settled = keys.guest_memory_bytes();
    assert!(settled > 0);
    churn(&mut keys, 3_000);
    assert_eq!(keys.held_secrets(), 0, "every secret was removed");
    assert_eq!(
        keys.guest_memory_bytes(),
        settled,
        "3000 keyers made and dropped grew the guest's memory"
    );
    // The same keyers kept alive do grow it: the check above can fail.
    let kept: Vec<WasmKeyer> = (0..3_000)
        .map(|i| keys.keyer(Some(policy), &[i as u8; 32]).unwrap())
        .collect();
    assert_eq!(keys.held_secrets(), kept.len());
    assert!(keys.guest_memory_bytes() > settled);
    drop(kept);
    keys.new_uuid_key().unwrap();
    assert_eq!(keys.held_secrets(), 0);
    assert_eq!(keys.reinstantiations(), 0);
}

#[test]
fn debug_output_never_shows_a_secret() {
    let secret = [0xa7_u8; 32];
    let forbidden = ["a7a7", "A7A7", "167, 167", "167,167", "[167"];
    let check = |what: &str, text: String| {
        for f in forbidden {
            assert!(!text.contains(f), "{what} shows secret bytes: {text}");
        }
    };
    let mut keys = WasmKeys::new(pure_engine()).unwrap();
    let keyer = keys.keyer(None, &secret).unwrap();
    let mut guard = memory_guard(Destination::unknown());
    let guard_keyer = guard.keyer(None, &secret).unwrap();
    let refused = keys.keyer(None, &secret[..31]).unwrap_err();
    for (what, text) in [
        (
            "WasmEngine",
            format!("{:?} {:#?}", pure_engine(), guard_engine()),
        ),
        ("WasmKeys", format!("{keys:?} {keys:#?}")),
        ("WasmGuard", format!("{guard:?} {guard:#?}")),
        ("WasmKeyer", format!("{keyer:?} {keyer:#?} {guard_keyer:?}")),
        ("HostError", format!("{refused:?} {refused:#?} {refused}")),
        ("World", format!("{:?}", guard_engine().world())),
    ] {
        check(what, text);
    }
    assert!(format!("{keyer:?}").contains("WasmKeyer"));
}

#[test]
fn the_types_cross_threads() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<WasmEngine>();
    sync::<WasmEngine>();
    send::<WasmKeys<'static>>();
    send::<WasmGuard<'static>>();
    send::<WasmKeyer>();
    sync::<WasmKeyer>();
    send::<HostError>();
    sync::<HostError>();
}

#[test]
fn a_precompiled_component_loads_with_its_world() {
    let bytes = std::fs::read(dist("INTENTKEY_PURE_COMPONENT", "intentkey-pure.wasm")).unwrap();
    let path = std::env::temp_dir().join(format!("ik-wasm-pure-{}.cwasm", std::process::id()));
    std::fs::write(&path, WasmEngine::precompile(&bytes).unwrap()).unwrap();
    let engine = WasmEngine::from_precompiled_file(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(engine.world(), World::Pure);
    let mut keys = WasmKeys::new(&engine).unwrap();
    let keyer = keys.keyer(None, &[0x5c; 32]).unwrap();
    let mut reference = WasmKeys::new(pure_engine()).unwrap();
    let reference_keyer = reference.keyer(None, &[0x5c; 32]).unwrap();
    assert_eq!(
        keys.derive(&keyer, &intent("{}")).unwrap(),
        reference.derive(&reference_keyer, &intent("{}")).unwrap()
    );
}

#[test]
fn a_keyring_keyer_keys_each_intent_with_the_secret_of_its_epoch() {
    use intentkey::{KeyLength, Keyer, Keyring, Payload, Policy, Secret};
    const ROTATION: i64 = 1_800_000_000;
    let (old, new) = ([0x11u8; 32], [0x22u8; 32]);
    let native = Keyer::new(
        &Keyring::new(vec![
            ("2026-11".into(), 0, Secret::new(old).unwrap()),
            ("2026-12".into(), ROTATION, Secret::new(new).unwrap()),
        ])
        .unwrap(),
        Policy::default(),
    );
    let mut keys = WasmKeys::new(pure_engine()).unwrap();
    let ring: [(&str, i64, &[u8]); 2] = [("2026-11", 0, &old), ("2026-12", ROTATION, &new)];
    let keyer = keys.keyer_with_keyring(None, &ring).unwrap();
    assert_eq!(keys.held_secrets(), 2);
    let payload = r#"{"creditor_key":"a@b.c","amount":"10.00","currency":"BRL"}"#;
    let parsed = Payload::from_json(payload).unwrap();
    for epoch in [ROTATION - 1, ROTATION] {
        let wasm = WasmIntent {
            intent_epoch: epoch,
            ..intent(payload)
        };
        let core = intentkey::Intent {
            tenant_id: "t1",
            action_type: "pix.send",
            payload: &parsed,
            intent_epoch: epoch,
        };
        assert_eq!(
            keys.derive(&keyer, &wasm).unwrap(),
            native.derive(&core).unwrap().into_string()
        );
        assert_eq!(
            keys.intent_key_at(&keyer, "t1", "i-1", epoch, Some(40))
                .unwrap(),
            native
                .intent_key("t1", "i-1", epoch, KeyLength::OPEN_FINANCE_BRASIL)
                .unwrap()
                .into_string()
        );
        assert_eq!(
            keys.fingerprint_at(&keyer, "t1", "pix.send", payload, epoch)
                .unwrap(),
            native
                .fingerprint("t1", "pix.send", &parsed, epoch)
                .unwrap()
                .to_string()
        );
    }
    // Calls without an epoch cannot pick a secret.
    let refused = keys.intent_key(&keyer, "t1", "i-1", None).unwrap_err();
    assert!(
        matches!(&refused, HostError::Core(e) if e.code() == ErrorCode::InvalidKeyring),
        "{refused:?}"
    );
    // Rebuilt from the host's copies after a trap.
    keys.interrupt_next_call();
    assert!(keys.new_uuid_key().is_err());
    let wasm = WasmIntent {
        intent_epoch: ROTATION - 1,
        ..intent(payload)
    };
    assert_eq!(
        keys.derive(&keyer, &wasm).unwrap(),
        native
            .deriver_at(0)
            .unwrap()
            .derive(&intentkey::Intent {
                tenant_id: "t1",
                action_type: "pix.send",
                payload: &parsed,
                intent_epoch: ROTATION - 1
            })
            .unwrap()
            .into_string()
    );
    // The previous secret dropped: an older intent is refused.
    let newer = keys.keyer_with_keyring(None, &ring[1..]).unwrap();
    let retired = keys.derive(&newer, &wasm).unwrap_err();
    assert!(
        matches!(&retired, HostError::Core(e) if e.code() == ErrorCode::SecretRetired),
        "{retired:?}"
    );
    assert!(!format!("{keyer:?}").contains("17, 17"), "{keyer:?}");
    keys.drop_keyer(keyer);
    keys.drop_keyer(newer);
    assert_eq!(keys.held_secrets(), 0, "every copy wiped");
}
