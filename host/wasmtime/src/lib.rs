//! The intentkey component on wasmtime.
//!
//! [`WasmEngine`] compiles the component once (or loads a precompiled copy);
//! [`WasmKeys`] holds one instance and reuses it for every call. A trap
//! poisons an instance, so after one the next call gets a fresh instance; the
//! trapping call returns [`HostError::Trap`], never a hang or a crash.
//!
//! The component's `guard` export drives a store the host plugs in with
//! [`WasmKeys::set_store`] (any `intentkey_store::Store`: memory, SQLite,
//! PostgreSQL) and asks the destination through [`WasmKeys::set_gateway`].
//!
//! ```
//! use intentkey_wasmtime::{WasmEngine, WasmIntent, WasmKeys};
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap();
//!
//! // Built by `cargo xtask build-component`.
//! let engine = WasmEngine::from_file("dist/intentkey.wasm")?;
//! let mut keys = WasmKeys::new(&engine)?;
//! let keyer = keys.keyer(None, &[0x5c; 32])?;
//! let key = keys.derive(&keyer, &WasmIntent {
//!     tenant_id: "t1".into(),
//!     action_type: "pix.send".into(),
//!     payload_json: r#"{"amount":"10.50","currency":"BRL"}"#.into(),
//!     intent_epoch: 1_700_000_000,
//! })?;
//! assert_eq!(key.len(), 64);
//! # Ok::<(), intentkey_wasmtime::HostError>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use intentkey::{Error, ErrorCode};
use wasmtime::component::{Component, Linker, ResourceAny};
use wasmtime::{Config, Engine, Store};

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "intentkey",
    });
}

use generated::exports::intentkey::core::keys::Intent as GenIntent;
use generated::intentkey::core::types::{Error as GenError, ErrorCode as GenCode};
use generated::Intentkey;

/// A failure calling the component.
#[derive(Debug)]
pub enum HostError {
    /// The core refused the input: the same typed error the native core gives.
    Intentkey(Error),
    /// The component trapped or could not run; the instance has been replaced.
    Trap(String),
    /// The component could not be loaded or compiled.
    Load(String),
    /// The host's store failed while the component's guard drove it.
    Store(String),
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Intentkey(e) => write!(f, "{e}"),
            HostError::Trap(m) => write!(f, "the intentkey component trapped: {m}"),
            HostError::Load(m) => write!(f, "cannot load the intentkey component: {m}"),
            HostError::Store(m) => write!(f, "the store failed: {m}"),
        }
    }
}

impl std::error::Error for HostError {}

impl From<Error> for HostError {
    fn from(e: Error) -> Self {
        HostError::Intentkey(e)
    }
}

fn from_gen(e: GenError) -> HostError {
    let code = ErrorCode::parse(gen_code_str(e.code)).unwrap_or(ErrorCode::InvalidJson);
    HostError::Intentkey(match e.field {
        Some(field) => Error::field(code, field, e.message),
        None => Error::new(code, e.message),
    })
}

fn gen_code_str(code: GenCode) -> &'static str {
    match code {
        GenCode::SecretTooShort => "secret-too-short",
        GenCode::InvalidSecret => "invalid-secret",
        GenCode::InvalidTenantId => "invalid-tenant-id",
        GenCode::InvalidActionType => "invalid-action-type",
        GenCode::UnknownActionType => "unknown-action-type",
        GenCode::InvalidEpoch => "invalid-epoch",
        GenCode::InvalidPayload => "invalid-payload",
        GenCode::UnclassifiedFields => "unclassified-fields",
        GenCode::InvalidFieldType => "invalid-field-type",
        GenCode::InvalidDecimal => "invalid-decimal",
        GenCode::DecimalOutOfRange => "decimal-out-of-range",
        GenCode::InvalidInteger => "invalid-integer",
        GenCode::InvalidCurrency => "invalid-currency",
        GenCode::InvalidPixKey => "invalid-pix-key",
        GenCode::InvalidIntentId => "invalid-intent-id",
        GenCode::InvalidPolicy => "invalid-policy",
        GenCode::InvalidJson => "invalid-json",
        GenCode::InvalidKeyLength => "invalid-key-length",
        GenCode::InvalidRandom => "invalid-random",
    }
}

/// What the host supplies to the guest: secrets by id, randomness, and
/// (for the guard) a store and the destination.
struct HostState {
    secrets: HashMap<String, Vec<u8>>,
    store: Option<Box<dyn intentkey_store::Store>>,
    gateway: Option<Box<dyn intentkey_store::guard::Gateway + Send>>,
}

mod convert {
    //! Record conversions between the WIT types and the core's.
    use super::generated::intentkey::core::types as wit;
    use intentkey::claim as core;

    pub fn status_in(s: wit::Status) -> core::Status {
        match s {
            wit::Status::InFlight => core::Status::InFlight,
            wit::Status::Done => core::Status::Done,
            wit::Status::NeedsReconciliation => core::Status::NeedsReconciliation,
        }
    }

    pub fn status_out(s: core::Status) -> wit::Status {
        match s {
            core::Status::InFlight => wit::Status::InFlight,
            core::Status::Done => wit::Status::Done,
            core::Status::NeedsReconciliation => wit::Status::NeedsReconciliation,
        }
    }

    pub fn response_in(r: wit::Response) -> core::Response {
        core::Response {
            status: r.status,
            content_type: r.content_type,
            body: r.body,
        }
    }

    pub fn response_out(r: core::Response) -> wit::Response {
        wit::Response {
            status: r.status,
            content_type: r.content_type,
            body: r.body,
        }
    }

    pub fn record_in(r: wit::Record) -> core::Record {
        core::Record {
            key: r.key,
            fingerprint: r.fingerprint,
            tenant_id: r.tenant_id,
            action_type: r.action_type,
            status: status_in(r.status),
            response: r.response.map(response_in),
            created_at: r.created_at,
            expires_at: r.expires_at,
            lookups: r.lookups,
            next_lookup_at: r.next_lookup_at,
        }
    }

    pub fn record_out(r: core::Record) -> wit::Record {
        wit::Record {
            key: r.key,
            fingerprint: r.fingerprint,
            tenant_id: r.tenant_id,
            action_type: r.action_type,
            status: status_out(r.status),
            response: r.response.map(response_out),
            created_at: r.created_at,
            expires_at: r.expires_at,
            lookups: r.lookups,
            next_lookup_at: r.next_lookup_at,
        }
    }

    pub fn lookup_out(l: core::Lookup) -> wit::Lookup {
        match l {
            core::Lookup::Found(r) => wit::Lookup::Found(response_out(r)),
            core::Lookup::Absent => wit::Lookup::Absent,
            core::Lookup::Unknown => wit::Lookup::Unknown,
        }
    }
}

impl generated::intentkey::core::store::Host for HostState {
    fn insert_if_absent(
        &mut self,
        record: generated::intentkey::core::types::Record,
    ) -> Result<bool, String> {
        let store = self
            .store
            .as_ref()
            .ok_or("no store: the host did not set one (WasmKeys::set_store)")?;
        store
            .insert_if_absent(&convert::record_in(record))
            .map_err(|e| e.to_string())
    }

    fn get(
        &mut self,
        key: String,
    ) -> Result<Option<generated::intentkey::core::types::Record>, String> {
        let store = self
            .store
            .as_ref()
            .ok_or("no store: the host did not set one (WasmKeys::set_store)")?;
        store
            .get(&key)
            .map(|r| r.map(convert::record_out))
            .map_err(|e| e.to_string())
    }

    fn replace_in_flight(
        &mut self,
        record: generated::intentkey::core::types::Record,
    ) -> Result<bool, String> {
        let store = self
            .store
            .as_ref()
            .ok_or("no store: the host did not set one (WasmKeys::set_store)")?;
        store
            .replace_in_flight(&convert::record_in(record))
            .map_err(|e| e.to_string())
    }
}

impl generated::intentkey::core::gateway::Host for HostState {
    fn ask(&mut self, key: String) -> generated::intentkey::core::types::Lookup {
        // With no destination configured nothing can be known: unknown never re-executes.
        let lookup = self
            .gateway
            .as_ref()
            .map_or(intentkey::claim::Lookup::Unknown, |g| g.lookup(&key));
        convert::lookup_out(lookup)
    }

    fn read_your_writes(&mut self) -> bool {
        self.gateway.as_ref().is_some_and(|g| g.read_your_writes())
    }
}

impl generated::intentkey::core::types::Host for HostState {}

impl generated::intentkey::core::secrets::Host for HostState {
    fn get_secret(&mut self, secret_id: String) -> Result<Vec<u8>, GenError> {
        self.secrets
            .get(&secret_id)
            .cloned()
            .ok_or_else(|| GenError {
                code: GenCode::InvalidSecret,
                field: Some("secret-id".into()),
                message:
                    "the host has no secret under this id; register it before creating a keyer"
                        .into(),
            })
    }
}

impl generated::intentkey::core::random::Host for HostState {
    fn random_bytes(&mut self, len: u32) -> Vec<u8> {
        let mut bytes = vec![0u8; len as usize];
        // With no OS randomness the bytes stay short and the guest refuses
        // them with invalid-random, rather than minting a predictable key.
        if getrandom::fill(&mut bytes).is_err() {
            bytes.clear();
        }
        bytes
    }
}

/// The compiled component, shared by every [`WasmKeys`].
pub struct WasmEngine {
    engine: Engine,
    component: Component,
    linker: Linker<HostState>,
}

impl WasmEngine {
    fn engine() -> Result<Engine, HostError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        // Lets a host bound a call's time: an interrupted call traps, and the
        // next call runs on a fresh instance.
        config.epoch_interruption(true);
        Engine::new(&config).map_err(|e| HostError::Load(format!("{e:#}")))
    }

    fn with_component(engine: Engine, component: Component) -> Result<Self, HostError> {
        let mut linker = Linker::new(&engine);
        Intentkey::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(
            &mut linker,
            |s| s,
        )
        .map_err(|e| HostError::Load(format!("{e:#}")))?;
        Ok(WasmEngine {
            engine,
            component,
            linker,
        })
    }

    /// Compiles the component at `path` (`intentkey.wasm`).
    ///
    /// # Errors
    /// [`HostError::Load`] when the file is missing or is not the component.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, HostError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| {
            HostError::Load(format!(
                "{}: {e} (build it with `cargo xtask build-component`)",
                path.display()
            ))
        })?;
        Self::from_bytes(&bytes)
    }

    /// Compiles the component from its bytes.
    ///
    /// # Errors
    /// [`HostError::Load`] when the bytes are not the component.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, HostError> {
        let engine = Self::engine()?;
        let component =
            Component::new(&engine, bytes).map_err(|e| HostError::Load(format!("{e:#}")))?;
        Self::with_component(engine, component)
    }

    /// Ahead-of-time compiles the component for this host's engine settings;
    /// load the result with [`WasmEngine::from_precompiled_file`].
    ///
    /// # Errors
    /// [`HostError::Load`] when the bytes are not a component.
    pub fn precompile(component_bytes: &[u8]) -> Result<Vec<u8>, HostError> {
        Self::engine()?
            .precompile_component(component_bytes)
            .map_err(|e| HostError::Load(format!("{e:#}")))
    }

    /// Loads a component precompiled by [`WasmEngine::precompile`] (skips the
    /// 100+ ms compile).
    ///
    /// The file must come from [`WasmEngine::precompile`] of this build: it is
    /// native code, so only load files you wrote yourself. wasmtime refuses
    /// files from another version or configuration.
    ///
    /// # Errors
    /// [`HostError::Load`] when the file is missing or incompatible.
    pub fn from_precompiled_file(path: impl AsRef<Path>) -> Result<Self, HostError> {
        let engine = Self::engine()?;
        // SAFETY: `deserialize_file` trusts the file to be wasmtime's own output;
        // callers load only files they precompiled (documented above), and
        // wasmtime checks the version and configuration before using it.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize_file(&engine, path.as_ref()) }
            .map_err(|e| HostError::Load(format!("{}: {e:#}", path.as_ref().display())))?;
        Self::with_component(engine, component)
    }

    /// The component's import names, e.g. `intentkey:core/secrets@0.1.0`.
    pub fn import_names(&self) -> Vec<String> {
        self.component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect()
    }
}

/// One intent for the `fields` mode, as the component takes it.
#[derive(Clone, Debug)]
pub struct WasmIntent {
    /// The tenant.
    pub tenant_id: String,
    /// The action type.
    pub action_type: String,
    /// The payload as JSON object text.
    pub payload_json: String,
    /// The recorded intent time in seconds.
    pub intent_epoch: i64,
}

impl WasmIntent {
    fn to_gen(&self) -> GenIntent {
        GenIntent {
            tenant_id: self.tenant_id.clone(),
            action_type: self.action_type.clone(),
            payload_json: self.payload_json.clone(),
            intent_epoch: self.intent_epoch,
        }
    }
}

/// A policy keyed with one secret, living in the component.
///
/// Valid while its [`WasmKeys`] lives; after a trap it is rebuilt on first use.
pub struct WasmKeyer {
    policy_json: Option<String>,
    secret_id: String,
    resource: std::cell::Cell<Option<(u64, ResourceAny)>>,
}

/// Epoch ticks a call may run: no deadline unless a host asks for one.
const NO_DEADLINE: u64 = 1 << 62;

/// An instance of the component, reused for every call.
pub struct WasmKeys<'e> {
    engine: &'e WasmEngine,
    store: Store<HostState>,
    bindings: Intentkey,
    /// Bumped at each re-instantiation, so stale keyer handles are rebuilt.
    generation: u64,
    next_secret: u64,
}

impl<'e> WasmKeys<'e> {
    /// Instantiates the component.
    ///
    /// # Errors
    /// [`HostError::Load`] when instantiation fails.
    pub fn new(engine: &'e WasmEngine) -> Result<Self, HostError> {
        let (store, bindings) = Self::instantiate(engine, HashMap::new())?;
        Ok(WasmKeys {
            engine,
            store,
            bindings,
            generation: 0,
            next_secret: 0,
        })
    }

    fn instantiate(
        engine: &WasmEngine,
        secrets: HashMap<String, Vec<u8>>,
    ) -> Result<(Store<HostState>, Intentkey), HostError> {
        let mut store = Store::new(
            &engine.engine,
            HostState {
                secrets,
                store: None,
                gateway: None,
            },
        );
        store.set_epoch_deadline(NO_DEADLINE);
        let bindings = Intentkey::instantiate(&mut store, &engine.component, &engine.linker)
            .map_err(|e| HostError::Load(format!("{e:#}")))?;
        Ok((store, bindings))
    }

    /// Turns a wasmtime error (a trap) into [`HostError::Trap`] and replaces
    /// the poisoned instance.
    fn trapped(&mut self, e: &wasmtime::Error) -> HostError {
        let secrets = std::mem::take(&mut self.store.data_mut().secrets);
        let kept_store = self.store.data_mut().store.take();
        let kept_gateway = self.store.data_mut().gateway.take();
        match Self::instantiate(self.engine, secrets) {
            Ok((mut store, bindings)) => {
                store.data_mut().store = kept_store;
                store.data_mut().gateway = kept_gateway;
                self.store = store;
                self.bindings = bindings;
                self.generation += 1;
                HostError::Trap(format!("{e:#}"))
            }
            Err(load) => HostError::Trap(format!("{e:#}; and re-instantiating failed: {load}")),
        }
    }

    /// Creates a keyer: validates `policy_json` (`None`: the built-in
    /// payments policy) and hands the guest `secret` through the `secrets`
    /// import.
    ///
    /// # Errors
    /// The core's `invalid-policy` or `secret-too-short`, or a trap.
    pub fn keyer(
        &mut self,
        policy_json: Option<&str>,
        secret: &[u8],
    ) -> Result<WasmKeyer, HostError> {
        self.next_secret += 1;
        let secret_id = format!("secret-{}", self.next_secret);
        self.store
            .data_mut()
            .secrets
            .insert(secret_id.clone(), secret.to_vec());
        let keyer = WasmKeyer {
            policy_json: policy_json.map(str::to_owned),
            secret_id,
            resource: std::cell::Cell::new(None),
        };
        match self.resource(&keyer) {
            Ok(_) => Ok(keyer),
            Err(e) => {
                self.store.data_mut().secrets.remove(&keyer.secret_id);
                Err(e)
            }
        }
    }

    fn resource(&mut self, keyer: &WasmKeyer) -> Result<ResourceAny, HostError> {
        if let Some((generation, resource)) = keyer.resource.get() {
            if generation == self.generation {
                return Ok(resource);
            }
        }
        let keys = self.bindings.intentkey_core_keys().keyer();
        let created = keys.call_create(
            &mut self.store,
            keyer.policy_json.as_deref(),
            &keyer.secret_id,
        );
        let resource = match created {
            Ok(Ok(resource)) => resource,
            Ok(Err(e)) => return Err(from_gen(e)),
            Err(e) => return Err(self.trapped(&e)),
        };
        keyer.resource.set(Some((self.generation, resource)));
        Ok(resource)
    }

    fn answer<T>(&mut self, result: wasmtime::Result<Result<T, GenError>>) -> Result<T, HostError> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(from_gen(e)),
            Err(e) => Err(self.trapped(&e)),
        }
    }

    /// The `fields`-mode key.
    ///
    /// # Errors
    /// The core's typed error, or a trap.
    pub fn derive(&mut self, keyer: &WasmKeyer, intent: &WasmIntent) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self.bindings.intentkey_core_keys().keyer().call_derive(
            &mut self.store,
            resource,
            &intent.to_gen(),
        );
        self.answer(result)
    }

    /// Keys for many intents in one call, in order.
    ///
    /// # Errors
    /// A trap (per-intent refusals are in the inner results).
    pub fn derive_many(
        &mut self,
        keyer: &WasmKeyer,
        intents: &[WasmIntent],
    ) -> Result<Vec<Result<String, HostError>>, HostError> {
        let resource = self.resource(keyer)?;
        let intents: Vec<GenIntent> = intents.iter().map(WasmIntent::to_gen).collect();
        let result = self
            .bindings
            .intentkey_core_keys()
            .keyer()
            .call_derive_many(&mut self.store, resource, &intents);
        match result {
            Ok(answers) => Ok(answers.into_iter().map(|a| a.map_err(from_gen)).collect()),
            Err(e) => Err(self.trapped(&e)),
        }
    }

    /// The canonical `fields` material.
    ///
    /// # Errors
    /// The core's typed error, or a trap.
    pub fn material(
        &mut self,
        keyer: &WasmKeyer,
        intent: &WasmIntent,
    ) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self.bindings.intentkey_core_keys().keyer().call_material(
            &mut self.store,
            resource,
            &intent.to_gen(),
        );
        self.answer(result)
    }

    /// The `intent-hmac`-mode key.
    ///
    /// # Errors
    /// The core's typed error, or a trap.
    pub fn intent_key(
        &mut self,
        keyer: &WasmKeyer,
        tenant_id: &str,
        intent_id: &str,
        key_hex_length: Option<u32>,
    ) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self.bindings.intentkey_core_keys().keyer().call_intent_key(
            &mut self.store,
            resource,
            tenant_id,
            intent_id,
            key_hex_length,
        );
        self.answer(result)
    }

    /// The fingerprint's material and the fingerprint.
    ///
    /// # Errors
    /// The core's typed error, or a trap.
    pub fn fingerprint(
        &mut self,
        keyer: &WasmKeyer,
        tenant_id: &str,
        action_type: &str,
        payload_json: &str,
    ) -> Result<(String, String), HostError> {
        let resource = self.resource(keyer)?;
        let keys = self.bindings.intentkey_core_keys().keyer();
        let material = keys.call_fingerprint_material(
            &mut self.store,
            resource,
            tenant_id,
            action_type,
            payload_json,
        );
        let material = self.answer(material)?;
        let keys = self.bindings.intentkey_core_keys().keyer();
        let fingerprint = keys.call_fingerprint(
            &mut self.store,
            resource,
            tenant_id,
            action_type,
            payload_json,
        );
        Ok((material, self.answer(fingerprint)?))
    }

    /// A `uuid`-mode key from the host's randomness.
    ///
    /// # Errors
    /// `invalid-random` when the OS gives no randomness, or a trap.
    pub fn new_uuid_key(&mut self) -> Result<String, HostError> {
        let result = self
            .bindings
            .intentkey_core_keys()
            .call_new_uuid_key(&mut self.store);
        self.answer(result)
    }

    /// A `uuid`-mode key from given bytes.
    ///
    /// # Errors
    /// `invalid-random` unless there are 16 bytes, or a trap.
    pub fn uuid_key(&mut self, random: &[u8]) -> Result<String, HostError> {
        let result = self
            .bindings
            .intentkey_core_keys()
            .call_uuid_key(&mut self.store, random);
        self.answer(result)
    }

    /// Gives the guest a store for the `guard` export (the core drives it).
    pub fn set_store(&mut self, store: Box<dyn intentkey_store::Store>) {
        self.store.data_mut().store = Some(store);
    }

    /// Gives the guest the destination for `guard` recovery.
    pub fn set_gateway(&mut self, gateway: Box<dyn intentkey_store::guard::Gateway + Send>) {
        self.store.data_mut().gateway = Some(gateway);
    }

    fn guard_answer<T>(
        &mut self,
        result: wasmtime::Result<Result<T, String>>,
    ) -> Result<T, HostError> {
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(message)) => Err(HostError::Store(message)),
            Err(e) => Err(self.trapped(&e)),
        }
    }

    /// The component's `guard.claim`: the core claims `key` in the store set
    /// with [`WasmKeys::set_store`]. Returns the outcome's name (`owned`,
    /// `in-flight`, `done`, `payload-conflict`).
    ///
    /// # Errors
    /// [`HostError::Store`] with the store's message, or a trap.
    pub fn guard_claim(
        &mut self,
        key: &str,
        fingerprint: &str,
        tenant_id: &str,
        action_type: &str,
        now: i64,
    ) -> Result<&'static str, HostError> {
        use generated::exports::intentkey::core::claims::ClaimOutcome as O;
        let result = self.bindings.intentkey_core_guard().call_claim(
            &mut self.store,
            key,
            fingerprint,
            tenant_id,
            action_type,
            now,
        );
        Ok(match self.guard_answer(result)? {
            O::Owned => "owned",
            O::InFlight => "in-flight",
            O::Done(_) => "done",
            O::PayloadConflict => "payload-conflict",
        })
    }

    /// The component's `guard.complete`.
    ///
    /// # Errors
    /// [`HostError::Store`] with the store's message, or a trap.
    pub fn guard_complete(
        &mut self,
        key: &str,
        response: intentkey::claim::Response,
        now: i64,
        ttl_seconds: i64,
    ) -> Result<bool, HostError> {
        let response = convert::response_out(response);
        let result = self.bindings.intentkey_core_guard().call_complete(
            &mut self.store,
            key,
            &response,
            now,
            ttl_seconds,
        );
        self.guard_answer(result)
    }

    /// The component's `guard.recover`: the action's name (`record-done`,
    /// `re-execute`, `check-later`, `reconcile`), or `None` when there is no
    /// in-flight record.
    ///
    /// # Errors
    /// [`HostError::Store`] with the store's message, or a trap.
    pub fn guard_recover(
        &mut self,
        key: &str,
        now: i64,
        ttl_seconds: i64,
    ) -> Result<Option<&'static str>, HostError> {
        use generated::exports::intentkey::core::claims::RecoveryAction as A;
        let result = self.bindings.intentkey_core_guard().call_recover(
            &mut self.store,
            key,
            now,
            ttl_seconds,
        );
        Ok(self.guard_answer(result)?.map(|a| match a {
            A::RecordDone(_) => "record-done",
            A::ReExecute => "re-execute",
            A::CheckLater(_) => "check-later",
            A::Reconcile(_) => "reconcile",
        }))
    }

    /// Makes the next call trap at once, as a deadline that has passed would:
    /// for testing trap recovery. The call after it runs on a fresh instance.
    pub fn interrupt_next_call(&mut self) {
        self.store.set_epoch_deadline(0);
        self.engine.engine.increment_epoch();
    }

    /// How many times the instance has been replaced after a trap.
    pub fn reinstantiations(&self) -> u64 {
        self.generation
    }

    /// The JSON-lines contract: one answer line per request line.
    ///
    /// # Errors
    /// A trap.
    pub fn answer_lines(&mut self, lines: &[String]) -> Result<Vec<String>, HostError> {
        let result = self
            .bindings
            .intentkey_core_keys()
            .call_answer_lines(&mut self.store, lines);
        result.map_err(|e| self.trapped(&e))
    }

    /// As [`WasmKeys::answer_lines`], under a policy given as JSON.
    ///
    /// # Errors
    /// `invalid-policy`, or a trap.
    pub fn answer_lines_with_policy(
        &mut self,
        policy_json: &str,
        lines: &[String],
    ) -> Result<Vec<String>, HostError> {
        let result = self
            .bindings
            .intentkey_core_keys()
            .call_answer_lines_with_policy(&mut self.store, policy_json, lines);
        self.answer(result)
    }
}
