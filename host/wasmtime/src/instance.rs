//! One instance of the component, either world: the host's imports, the
//! keyers' secrets, trap recovery and the keys export every world has.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use intentkey_store::{Gateway, Store as ClaimStore};
use wasmtime::component::{InstancePre, ResourceAny};
use wasmtime::{ResourceLimiter, Store};
use zeroize::Zeroizing;

use crate::bindings::{full, pure};
use crate::convert::{self, error_in};
use crate::engine::{Linked, WasmEngine};
use crate::HostError;

use pure::exports::intentkey::core::http::Guest as HttpGuest;
use pure::exports::intentkey::core::keys::{Guest as KeysGuest, Intent as WitIntent};
use pure::intentkey::core::types as wit;

/// Epoch ticks a call may run: no deadline unless a host asks for one.
const NO_DEADLINE: u64 = 1 << 62;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps stay consistent under a panic (each change is one insert or
    // remove), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The secrets the host holds for one instance's keyers, and the guest
/// resources of dropped keyers waiting to be dropped in the guest. Shared
/// by the instance and its keyers, so a keyer's drop wipes its secret at
/// once, wherever it happens.
pub(crate) struct Keyring {
    secrets: Mutex<HashMap<String, Zeroizing<Vec<u8>>>>,
    dropped: Mutex<Vec<(u64, ResourceAny)>>,
    next: AtomicU64,
}

impl Keyring {
    fn new() -> Arc<Self> {
        Arc::new(Keyring {
            secrets: Mutex::new(HashMap::new()),
            dropped: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        })
    }

    fn secret(&self, id: &str) -> Option<Vec<u8>> {
        lock(&self.secrets).get(id).map(|s| s.to_vec())
    }

    fn held(&self) -> usize {
        lock(&self.secrets).len()
    }

    /// Wipes every secret and forgets every resource (the instance is gone).
    fn clear(&self) {
        lock(&self.secrets).clear();
        lock(&self.dropped).clear();
    }
}

/// A policy keyed with one secret, living in the component instance that
/// made it ([`crate::WasmKeys::keyer`] or [`crate::WasmGuard::keyer`]).
///
/// Dropping it wipes the secret the host holds for it at once and drops its
/// guest resource (with the guest's copy of the secret) at the instance's
/// next call; [`crate::WasmKeys::drop_keyer`] does both at once. After a trap
/// it is rebuilt in the fresh instance on first use. Its `Debug` shows an
/// id, never the secret.
pub struct WasmKeyer {
    ring: Arc<Keyring>,
    secret_id: String,
    /// A keyring keyer's secrets: (keyring id, activation, `secrets` import
    /// id); empty for a one-secret keyer (`secret_id`).
    keyring: Vec<(String, i64, String)>,
    policy_json: Option<String>,
    /// The guest resource and the instance generation it lives in.
    resource: Mutex<Option<(u64, ResourceAny)>>,
}

impl fmt::Debug for WasmKeyer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmKeyer")
            .field("id", &self.secret_id)
            .field(
                "keyring",
                &self
                    .keyring
                    .iter()
                    .map(|(id, from, _)| (id, from))
                    .collect::<Vec<_>>(),
            )
            .field(
                "policy",
                &if self.policy_json.is_some() {
                    "custom"
                } else {
                    "built-in"
                },
            )
            .finish_non_exhaustive()
    }
}

impl Drop for WasmKeyer {
    fn drop(&mut self) {
        // Zeroizing wipes the bytes as the entry is dropped.
        let mut secrets = lock(&self.ring.secrets);
        drop(secrets.remove(&self.secret_id));
        for (_, _, secret_id) in &self.keyring {
            drop(secrets.remove(secret_id));
        }
        drop(secrets);
        let resource = self
            .resource
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(resource) = resource {
            lock(&self.ring.dropped).push(resource);
        }
    }
}

/// Counts the guest's linear memory, so a host can watch it.
#[derive(Default)]
struct MemoryMeter {
    bytes: usize,
}

impl ResourceLimiter for MemoryMeter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.bytes = self.bytes.saturating_add(desired.saturating_sub(current));
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

/// The world `pure` imports nothing beyond secrets and randomness.
#[derive(Clone)]
pub(crate) struct NoImports;

/// The world `intentkey` imports a store and the destination.
#[derive(Clone)]
pub(crate) struct GuardImports {
    pub(crate) store: Arc<dyn ClaimStore>,
    pub(crate) gateway: Arc<dyn Gateway + Send + Sync>,
}

/// What the host supplies to the guest.
pub(crate) struct HostState<I> {
    ring: Arc<Keyring>,
    imports: I,
    meter: MemoryMeter,
}

impl<I> pure::intentkey::core::types::Host for HostState<I> {}

impl<I> pure::intentkey::core::secrets::Host for HostState<I> {
    fn get_secret(&mut self, secret_id: String) -> Result<Vec<u8>, wit::Error> {
        self.ring.secret(&secret_id).ok_or_else(|| wit::Error {
            code: wit::ErrorCode::InvalidSecret,
            field: Some("secret-id".into()),
            message: "the host has no secret under this id; register it before creating a keyer"
                .into(),
        })
    }
}

impl<I> pure::intentkey::core::random::Host for HostState<I> {
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

/// The store import: the seven operations, one to one.
impl full::intentkey::core::store::Host for HostState<GuardImports> {
    fn insert(&mut self, record: wit::Record) -> Result<bool, wit::StoreError> {
        let store = &self.imports.store;
        store
            .insert(&convert::record_in(record))
            .map_err(|e| convert::store_error_out(&e))
    }

    fn get(&mut self, key: String) -> Result<Option<wit::Record>, wit::StoreError> {
        let store = &self.imports.store;
        store
            .get(&key)
            .map(|r| r.map(convert::record_out))
            .map_err(|e| convert::store_error_out(&e))
    }

    fn complete(&mut self, completion: wit::Completion) -> Result<bool, wit::StoreError> {
        let store = &self.imports.store;
        store
            .complete(&convert::completion_in(completion))
            .map_err(|e| convert::store_error_out(&e))
    }

    fn replace(&mut self, replacement: wit::Replacement) -> Result<bool, wit::StoreError> {
        let store = &self.imports.store;
        store
            .replace(&convert::replacement_in(replacement))
            .map_err(|e| convert::store_error_out(&e))
    }

    fn release(&mut self, request: wit::ReleaseRequest) -> Result<bool, wit::StoreError> {
        let store = &self.imports.store;
        store
            .release(&convert::release_in(request))
            .map_err(|e| convert::store_error_out(&e))
    }

    fn list(
        &mut self,
        status: wit::Status,
        limit: u32,
    ) -> Result<Vec<wit::Record>, wit::StoreError> {
        let store = &self.imports.store;
        store
            .list(Some(convert::status_in(status)), limit as usize)
            .map(|records| records.into_iter().map(convert::record_out).collect())
            .map_err(|e| convert::store_error_out(&e))
    }

    fn purge(&mut self, now: i64) -> Result<u64, wit::StoreError> {
        let store = &self.imports.store;
        store.purge(now).map_err(|e| convert::store_error_out(&e))
    }
}

/// The gateway import: the destination asked with the same key.
impl full::intentkey::core::gateway::Host for HostState<GuardImports> {
    fn ask(&mut self, key: String) -> wit::Lookup {
        convert::lookup_out(self.imports.gateway.lookup(&key))
    }
}

/// A world's imports: how its instances link and what they export beyond keys.
pub(crate) trait Imports: Clone + Sized + Send + Sync + 'static {
    /// The exports beyond `keys`.
    type Exports;

    /// The linked component, or why this world cannot run it.
    fn pre(engine: &WasmEngine) -> Result<&InstancePre<HostState<Self>>, HostError>;

    /// Loads the exports beyond `keys` from a fresh instance.
    fn load(
        engine: &WasmEngine,
        store: &mut Store<HostState<Self>>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<Self::Exports>;
}

impl Imports for NoImports {
    type Exports = ();

    fn pre(engine: &WasmEngine) -> Result<&InstancePre<HostState<Self>>, HostError> {
        match &engine.linked {
            Linked::Pure(pre) => Ok(pre),
            Linked::Intentkey { .. } => Err(HostError::Load(
                "this component is world intentkey: it imports a store and a gateway, so it \
                 runs as a WasmGuard (WasmGuard::new with a store and a gateway); for keys \
                 alone load dist/intentkey-pure.wasm (world pure)"
                    .into(),
            )),
        }
    }

    fn load(
        _engine: &WasmEngine,
        _store: &mut Store<HostState<Self>>,
        _instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<()> {
        Ok(())
    }
}

impl Imports for GuardImports {
    type Exports = full::exports::intentkey::core::guard::Guest;

    fn pre(engine: &WasmEngine) -> Result<&InstancePre<HostState<Self>>, HostError> {
        match &engine.linked {
            Linked::Intentkey { pre, .. } => Ok(pre),
            Linked::Pure(_) => Err(HostError::Load(
                "this component is world pure: it has no guard export; load \
                 dist/intentkey.wasm (world intentkey) for a WasmGuard"
                    .into(),
            )),
        }
    }

    fn load(
        engine: &WasmEngine,
        store: &mut Store<HostState<Self>>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<Self::Exports> {
        match &engine.linked {
            Linked::Intentkey { guard, .. } => guard.load(store, instance),
            Linked::Pure(_) => Err(wasmtime::format_err!("world pure has no guard export")),
        }
    }
}

/// A fresh instance: its store, its keys and http exports and its other exports.
type Fresh<I> = (
    Store<HostState<I>>,
    KeysGuest,
    HttpGuest,
    <I as Imports>::Exports,
);

/// One live instance of the component and what it needs to be replaced.
pub(crate) struct Instance<'e, I: Imports> {
    engine: &'e WasmEngine,
    imports: I,
    ring: Arc<Keyring>,
    pub(crate) store: Store<HostState<I>>,
    keys: KeysGuest,
    pub(crate) http: HttpGuest,
    pub(crate) exports: I::Exports,
    /// Bumped at each re-instantiation, so stale keyer handles are rebuilt.
    generation: u64,
}

impl<I: Imports> Drop for Instance<'_, I> {
    fn drop(&mut self) {
        // The guest's copies die with the store; wipe the host's too, even
        // while keyers of this instance still live.
        self.ring.clear();
    }
}

impl<'e, I: Imports> Instance<'e, I> {
    pub(crate) fn new(engine: &'e WasmEngine, imports: I) -> Result<Self, HostError> {
        let ring = Keyring::new();
        let (store, keys, http, exports) = Self::instantiate(engine, &ring, &imports)?;
        Ok(Instance {
            engine,
            imports,
            ring,
            store,
            keys,
            http,
            exports,
            generation: 0,
        })
    }

    fn instantiate(
        engine: &WasmEngine,
        ring: &Arc<Keyring>,
        imports: &I,
    ) -> Result<Fresh<I>, HostError> {
        let pre = I::pre(engine)?;
        let mut store = Store::new(
            &engine.engine,
            HostState {
                ring: Arc::clone(ring),
                imports: imports.clone(),
                meter: MemoryMeter::default(),
            },
        );
        store.limiter(|s| &mut s.meter);
        store.set_epoch_deadline(NO_DEADLINE);
        let load = |e: wasmtime::Error| HostError::Load(format!("{e:#}"));
        let instance = pre.instantiate(&mut store).map_err(load)?;
        let keys = engine.keys.load(&mut store, &instance).map_err(load)?;
        let http = engine.http.load(&mut store, &instance).map_err(load)?;
        let exports = I::load(engine, &mut store, &instance).map_err(load)?;
        Ok((store, keys, http, exports))
    }

    /// Replaces a poisoned instance; the secrets and imports are kept.
    fn replace(&mut self) -> Result<(), HostError> {
        // Resources of the old instance die with it.
        lock(&self.ring.dropped).clear();
        let (store, keys, http, exports) =
            Self::instantiate(self.engine, &self.ring, &self.imports)?;
        self.store = store;
        self.keys = keys;
        self.http = http;
        self.exports = exports;
        self.generation += 1;
        Ok(())
    }

    /// Turns a wasmtime error (a trap) into [`HostError::Trap`] and replaces
    /// the poisoned instance.
    pub(crate) fn trapped(&mut self, e: &wasmtime::Error) -> HostError {
        match self.replace() {
            Ok(()) => HostError::Trap(format!("{e:#}")),
            Err(load) => HostError::Trap(format!("{e:#}; and re-instantiating failed: {load}")),
        }
    }

    /// An export's answer: the core's typed error, or a trap.
    pub(crate) fn answer<T>(
        &mut self,
        result: wasmtime::Result<Result<T, wit::Error>>,
    ) -> Result<T, HostError> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(HostError::Core(error_in(e))),
            Err(e) => Err(self.trapped(&e)),
        }
    }

    /// Drops the guest resources of keyers dropped since the last call.
    pub(crate) fn reap(&mut self) {
        let dropped = std::mem::take(&mut *lock(&self.ring.dropped));
        for (generation, resource) in dropped {
            if generation != self.generation {
                continue;
            }
            if resource.resource_drop(&mut self.store).is_err() {
                // The guest trapped in a destructor: start afresh (the
                // remaining resources die with the old instance). If even
                // that fails, the next call reports it.
                let _ = self.replace();
            }
        }
    }

    pub(crate) fn keyer(
        &mut self,
        policy_json: Option<&str>,
        secret: &[u8],
    ) -> Result<WasmKeyer, HostError> {
        self.reap();
        let n = self.ring.next.fetch_add(1, Ordering::Relaxed);
        let secret_id = format!("keyer-{n}");
        lock(&self.ring.secrets).insert(secret_id.clone(), Zeroizing::new(secret.to_vec()));
        let keyer = WasmKeyer {
            ring: Arc::clone(&self.ring),
            secret_id,
            keyring: Vec::new(),
            policy_json: policy_json.map(str::to_owned),
            resource: Mutex::new(None),
        };
        // On failure the keyer drops here, and its secret with it.
        self.resource(&keyer)?;
        Ok(keyer)
    }

    pub(crate) fn keyer_with_keyring(
        &mut self,
        policy_json: Option<&str>,
        keyring: &[(&str, i64, &[u8])],
    ) -> Result<WasmKeyer, HostError> {
        self.reap();
        let n = self.ring.next.fetch_add(1, Ordering::Relaxed);
        let mut entries = Vec::with_capacity(keyring.len());
        for (i, (id, active_from, secret)) in keyring.iter().enumerate() {
            let secret_id = format!("keyer-{n}-{i}");
            lock(&self.ring.secrets).insert(secret_id.clone(), Zeroizing::new(secret.to_vec()));
            entries.push(((*id).to_owned(), *active_from, secret_id));
        }
        let keyer = WasmKeyer {
            ring: Arc::clone(&self.ring),
            secret_id: format!("keyer-{n}"),
            keyring: entries,
            policy_json: policy_json.map(str::to_owned),
            resource: Mutex::new(None),
        };
        // On failure the keyer drops here, and its secrets with it.
        self.resource(&keyer)?;
        Ok(keyer)
    }

    /// Holds `secret` for a guest resource other than a keyer (an HTTP
    /// endpoint) until the instance is dropped, so the resource can be
    /// rebuilt after a trap; returns its id for the `secrets` import.
    pub(crate) fn hold_secret(&mut self, secret: &[u8]) -> String {
        let n = self.ring.next.fetch_add(1, Ordering::Relaxed);
        let secret_id = format!("endpoint-{n}");
        lock(&self.ring.secrets).insert(secret_id.clone(), Zeroizing::new(secret.to_vec()));
        secret_id
    }

    /// The instance generation, bumped at each re-instantiation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn drop_keyer(&mut self, keyer: WasmKeyer) {
        drop(keyer);
        self.reap();
    }

    fn resource(&mut self, keyer: &WasmKeyer) -> Result<ResourceAny, HostError> {
        if !Arc::ptr_eq(&keyer.ring, &self.ring) {
            return Err(HostError::Misuse(
                "this keyer was made by another instance; use it with the instance that made it"
                    .into(),
            ));
        }
        self.reap();
        if let Some((generation, resource)) = *lock(&keyer.resource) {
            if generation == self.generation {
                return Ok(resource);
            }
        }
        let created = if keyer.keyring.is_empty() {
            self.keys.keyer().call_create(
                &mut self.store,
                keyer.policy_json.as_deref(),
                &keyer.secret_id,
            )
        } else {
            let entries: Vec<wit::KeyringEntry> = keyer
                .keyring
                .iter()
                .map(|(id, active_from, secret_id)| wit::KeyringEntry {
                    id: id.clone(),
                    active_from: *active_from,
                    secret_id: secret_id.clone(),
                })
                .collect();
            self.keys.keyer().call_create_keyring(
                &mut self.store,
                keyer.policy_json.as_deref(),
                &entries,
            )
        };
        let resource = self.answer(created)?;
        *lock(&keyer.resource) = Some((self.generation, resource));
        Ok(resource)
    }

    pub(crate) fn derive(
        &mut self,
        keyer: &WasmKeyer,
        intent: &crate::WasmIntent,
    ) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self
            .keys
            .keyer()
            .call_derive(&mut self.store, resource, &intent.to_wit());
        self.answer(result)
    }

    pub(crate) fn derive_many(
        &mut self,
        keyer: &WasmKeyer,
        intents: &[crate::WasmIntent],
    ) -> Result<Vec<Result<String, HostError>>, HostError> {
        let resource = self.resource(keyer)?;
        let intents: Vec<WitIntent> = intents.iter().map(crate::WasmIntent::to_wit).collect();
        let result = self
            .keys
            .keyer()
            .call_derive_many(&mut self.store, resource, &intents);
        match result {
            Ok(answers) => Ok(answers
                .into_iter()
                .map(|a| a.map_err(|e| HostError::Core(error_in(e))))
                .collect()),
            Err(e) => Err(self.trapped(&e)),
        }
    }

    pub(crate) fn material(
        &mut self,
        keyer: &WasmKeyer,
        intent: &crate::WasmIntent,
    ) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self
            .keys
            .keyer()
            .call_material(&mut self.store, resource, &intent.to_wit());
        self.answer(result)
    }

    pub(crate) fn intent_key(
        &mut self,
        keyer: &WasmKeyer,
        tenant_id: &str,
        intent_id: &str,
        key_hex_length: Option<u32>,
    ) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self.keys.keyer().call_intent_key(
            &mut self.store,
            resource,
            tenant_id,
            intent_id,
            key_hex_length,
        );
        self.answer(result)
    }

    pub(crate) fn intent_key_at(
        &mut self,
        keyer: &WasmKeyer,
        tenant_id: &str,
        intent_id: &str,
        intent_epoch: i64,
        key_hex_length: Option<u32>,
    ) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self.keys.keyer().call_intent_key_at(
            &mut self.store,
            resource,
            tenant_id,
            intent_id,
            intent_epoch,
            key_hex_length,
        );
        self.answer(result)
    }

    pub(crate) fn fingerprint_at(
        &mut self,
        keyer: &WasmKeyer,
        tenant_id: &str,
        action_type: &str,
        payload_json: &str,
        intent_epoch: i64,
    ) -> Result<String, HostError> {
        let resource = self.resource(keyer)?;
        let result = self.keys.keyer().call_fingerprint_at(
            &mut self.store,
            resource,
            tenant_id,
            action_type,
            payload_json,
            intent_epoch,
        );
        self.answer(result)
    }

    pub(crate) fn fingerprint(
        &mut self,
        keyer: &WasmKeyer,
        tenant_id: &str,
        action_type: &str,
        payload_json: &str,
    ) -> Result<(String, String), HostError> {
        let resource = self.resource(keyer)?;
        let material = self.keys.keyer().call_fingerprint_material(
            &mut self.store,
            resource,
            tenant_id,
            action_type,
            payload_json,
        );
        let material = self.answer(material)?;
        let fingerprint = self.keys.keyer().call_fingerprint(
            &mut self.store,
            resource,
            tenant_id,
            action_type,
            payload_json,
        );
        Ok((material, self.answer(fingerprint)?))
    }

    pub(crate) fn fingerprint_matches(
        &mut self,
        keyer: &WasmKeyer,
        tenant_id: &str,
        action_type: &str,
        payload_json: &str,
        stored: &str,
    ) -> Result<bool, HostError> {
        let resource = self.resource(keyer)?;
        let result = self.keys.keyer().call_fingerprint_matches(
            &mut self.store,
            resource,
            tenant_id,
            action_type,
            payload_json,
            stored,
        );
        self.answer(result)
    }

    pub(crate) fn new_uuid_key(&mut self) -> Result<String, HostError> {
        self.reap();
        let result = self.keys.call_new_uuid_key(&mut self.store);
        self.answer(result)
    }

    pub(crate) fn uuid_key(&mut self, random: &[u8]) -> Result<String, HostError> {
        self.reap();
        let result = self.keys.call_uuid_key(&mut self.store, random);
        self.answer(result)
    }

    pub(crate) fn answer_lines(&mut self, lines: &[String]) -> Result<Vec<String>, HostError> {
        self.reap();
        let result = self.keys.call_answer_lines(&mut self.store, lines);
        result.map_err(|e| self.trapped(&e))
    }

    pub(crate) fn answer_lines_with_policy(
        &mut self,
        policy_json: &str,
        lines: &[String],
    ) -> Result<Vec<String>, HostError> {
        self.reap();
        let result = self
            .keys
            .call_answer_lines_with_policy(&mut self.store, policy_json, lines);
        self.answer(result)
    }

    pub(crate) fn interrupt_next_call(&mut self) {
        // Pending drops run first, so the interruption hits the next call.
        self.reap();
        self.store.set_epoch_deadline(0);
        self.engine.engine.increment_epoch();
    }

    pub(crate) fn imports(&self) -> &I {
        &self.imports
    }

    pub(crate) fn reinstantiations(&self) -> u64 {
        self.generation
    }

    pub(crate) fn held_secrets(&self) -> usize {
        self.ring.held()
    }

    pub(crate) fn guest_memory_bytes(&self) -> usize {
        self.store.data().meter.bytes
    }
}

impl crate::WasmIntent {
    fn to_wit(&self) -> WitIntent {
        WitIntent {
            tenant_id: self.tenant_id.clone(),
            action_type: self.action_type.clone(),
            payload_json: self.payload_json.clone(),
            intent_epoch: self.intent_epoch,
        }
    }
}
