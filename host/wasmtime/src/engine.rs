//! The compiled component and how it links.

use std::fmt;
use std::path::Path;

use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine};

use crate::bindings::{full, pure};
use crate::instance::{GuardImports, HostState, NoImports};
use crate::HostError;

/// Which WIT world a component was built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    /// `pure` (`dist/intentkey-pure.wasm`): keys, decisions, schema and
    /// flows; imports only secrets and randomness. Runs [`crate::WasmKeys`].
    Pure,
    /// `intentkey` (`dist/intentkey.wasm`): `pure` plus the guard, which
    /// imports a store and a gateway. Runs [`crate::WasmGuard`].
    Intentkey,
}

impl World {
    /// The world's name in the WIT: `pure` or `intentkey`.
    pub fn as_str(self) -> &'static str {
        match self {
            World::Pure => "pure",
            World::Intentkey => "intentkey",
        }
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The component linked against its world's imports, ready to instantiate.
pub(crate) enum Linked {
    Pure(InstancePre<HostState<NoImports>>),
    Intentkey {
        pre: InstancePre<HostState<GuardImports>>,
        guard: full::exports::intentkey::core::guard::GuestIndices,
    },
}

/// The compiled component, shared by every [`crate::WasmKeys`] or
/// [`crate::WasmGuard`] made from it: compile (or load) it once per process.
///
/// The world is read from the component's imports: one that imports
/// `intentkey:core/store` is world `intentkey`, any other world `pure`.
pub struct WasmEngine {
    pub(crate) engine: Engine,
    component: Component,
    pub(crate) keys: pure::exports::intentkey::core::keys::GuestIndices,
    pub(crate) http: pure::exports::intentkey::core::http::GuestIndices,
    pub(crate) linked: Linked,
}

impl fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmEngine")
            .field("world", &self.world())
            .finish_non_exhaustive()
    }
}

fn load_error(e: &wasmtime::Error) -> HostError {
    HostError::Load(format!("{e:#}"))
}

impl WasmEngine {
    fn engine() -> Result<Engine, HostError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        // Lets a host bound a call's time: an interrupted call traps, and the
        // next call runs on a fresh instance.
        config.epoch_interruption(true);
        Engine::new(&config).map_err(|e| load_error(&e))
    }

    fn with_component(engine: Engine, component: Component) -> Result<Self, HostError> {
        let imports_store = component
            .component_type()
            .imports(&engine)
            .any(|(name, _)| name.starts_with("intentkey:core/store"));
        let mismatch = |world: World, e: &wasmtime::Error| {
            HostError::Load(format!(
                "the component does not match world {world} of intentkey:core@0.5.0 that this \
                 host was built for: {e:#} (rebuild it with `cargo xtask build-component`)"
            ))
        };
        let (linked, keys, http) = if imports_store {
            let mut linker = Linker::new(&engine);
            full::Intentkey::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
                &mut linker,
                |s: &mut HostState<GuardImports>| s,
            )
            .map_err(|e| load_error(&e))?;
            let pre = linker
                .instantiate_pre(&component)
                .map_err(|e| mismatch(World::Intentkey, &e))?;
            let keys = pure::exports::intentkey::core::keys::GuestIndices::new(&pre)
                .map_err(|e| mismatch(World::Intentkey, &e))?;
            let http = pure::exports::intentkey::core::http::GuestIndices::new(&pre)
                .map_err(|e| mismatch(World::Intentkey, &e))?;
            let guard = full::exports::intentkey::core::guard::GuestIndices::new(&pre)
                .map_err(|e| mismatch(World::Intentkey, &e))?;
            (Linked::Intentkey { pre, guard }, keys, http)
        } else {
            let mut linker = Linker::new(&engine);
            pure::Pure::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
                &mut linker,
                |s: &mut HostState<NoImports>| s,
            )
            .map_err(|e| load_error(&e))?;
            let pre = linker
                .instantiate_pre(&component)
                .map_err(|e| mismatch(World::Pure, &e))?;
            let keys = pure::exports::intentkey::core::keys::GuestIndices::new(&pre)
                .map_err(|e| mismatch(World::Pure, &e))?;
            let http = pure::exports::intentkey::core::http::GuestIndices::new(&pre)
                .map_err(|e| mismatch(World::Pure, &e))?;
            (Linked::Pure(pre), keys, http)
        };
        Ok(WasmEngine {
            engine,
            component,
            keys,
            http,
            linked,
        })
    }

    /// Compiles the component at `path`: `dist/intentkey-pure.wasm` (world
    /// `pure`, for [`crate::WasmKeys`]) or `dist/intentkey.wasm` (world
    /// `intentkey`, for [`crate::WasmGuard`]).
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
        let component = Component::new(&engine, bytes).map_err(|e| load_error(&e))?;
        Self::with_component(engine, component)
    }

    /// Ahead-of-time compiles a component (either world) for this host's
    /// engine settings; load the result with
    /// [`WasmEngine::from_precompiled_file`].
    ///
    /// # Errors
    /// [`HostError::Load`] when the bytes are not a component.
    pub fn precompile(component_bytes: &[u8]) -> Result<Vec<u8>, HostError> {
        Self::engine()?
            .precompile_component(component_bytes)
            .map_err(|e| load_error(&e))
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

    /// The world the component was built for.
    pub fn world(&self) -> World {
        match self.linked {
            Linked::Pure(_) => World::Pure,
            Linked::Intentkey { .. } => World::Intentkey,
        }
    }

    /// The component's import names, e.g. `intentkey:core/secrets@0.5.0`.
    pub fn import_names(&self) -> Vec<String> {
        self.component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    /// The component's export names, e.g. `intentkey:core/keys@0.5.0`.
    pub fn export_names(&self) -> Vec<String> {
        self.component
            .component_type()
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect()
    }
}
