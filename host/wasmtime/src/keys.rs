//! [`WasmKeys`]: the component's keys on world `pure`.

use std::fmt;

use crate::engine::WasmEngine;
use crate::host_state::NoImports;
use crate::instance::Instance;
use crate::keys_api::keys_api;
use crate::HostError;

/// An instance of the component for keys alone (world `pure`,
/// `dist/intentkey-pure.wasm`), reused for every call. It imports secrets
/// and randomness only: no store, no gateway.
///
/// A trap poisons an instance, so after one the next call gets a fresh
/// instance, with the keyers rebuilt from the secrets the host keeps; the
/// trapping call returns [`HostError::Trap`].
pub struct WasmKeys<'e> {
    inner: Instance<'e, NoImports>,
}

impl fmt::Debug for WasmKeys<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmKeys")
            .field("held_secrets", &self.held_secrets())
            .field("reinstantiations", &self.reinstantiations())
            .finish_non_exhaustive()
    }
}

impl<'e> WasmKeys<'e> {
    /// Instantiates a world-`pure` component.
    ///
    /// # Errors
    /// [`HostError::Load`] when the engine holds the world-`intentkey`
    /// component (it needs a store: use [`crate::WasmGuard`]) or
    /// instantiation fails.
    pub fn new(engine: &'e WasmEngine) -> Result<Self, HostError> {
        Ok(WasmKeys {
            inner: Instance::new(engine, NoImports)?,
        })
    }

    keys_api!();
}
