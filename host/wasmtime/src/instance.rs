//! [`Instance`]: one live instance of the component, either world, and
//! its trap recovery; [`Imports`]: how each world links.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use wasmtime::component::InstancePre;
use wasmtime::Store;
use zeroize::Zeroizing;

use crate::bindings::{full, pure};
use crate::engine::{Linked, WasmEngine};
use crate::host_state::{GuardImports, HostState, MemoryMeter, NoImports};
use crate::keyer::{lock, Keyring};
use crate::HostError;

use pure::exports::intentkey::core::http::Guest as HttpGuest;
use pure::exports::intentkey::core::keys::Guest as KeysGuest;
use pure::intentkey::core::types as wit;

/// Epoch ticks a call may run: no deadline unless a host asks for one.
const NO_DEADLINE: u64 = 1 << 62;

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

/// The exports of world `intentkey` beyond `keys` and `http`.
pub(crate) struct GuardExports {
    /// The claim flow over the imported store.
    pub(crate) guard: full::exports::intentkey::core::guard::Guest,
    /// The sans-I/O flows (a serve flow is made here, on an endpoint of
    /// the same instance).
    pub(crate) flows: full::exports::intentkey::core::flows::Guest,
}

impl Imports for GuardImports {
    type Exports = GuardExports;

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
            Linked::Intentkey { guard, flows, .. } => Ok(GuardExports {
                guard: guard.load(&mut *store, instance)?,
                flows: flows.load(store, instance)?,
            }),
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
    pub(crate) ring: Arc<Keyring>,
    pub(crate) store: Store<HostState<I>>,
    pub(crate) keys: KeysGuest,
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

    /// Starts afresh after the guest trapped outside a call's answer (in a
    /// destructor); if even that fails, the next call reports it.
    pub(crate) fn replace_after_trap(&mut self) {
        let _ = self.replace();
    }

    /// An export's answer: the core's typed error, or a trap.
    pub(crate) fn answer<T>(
        &mut self,
        result: wasmtime::Result<Result<T, wit::Error>>,
    ) -> Result<T, HostError> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(HostError::Core(e.into())),
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
