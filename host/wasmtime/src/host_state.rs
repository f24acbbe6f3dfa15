//! [`HostState`]: what a wasmtime store holds for one instance (the
//! keyers' secrets, the world's imports, the memory meter), and the imports
//! of each world.

use std::sync::Arc;

use intentkey_store::{Gateway, Store as ClaimStore};
use wasmtime::ResourceLimiter;

use crate::keyer::Keyring;

/// Counts the guest's linear memory, so a host can watch it.
#[derive(Default)]
pub(crate) struct MemoryMeter {
    pub(crate) bytes: usize,
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
    pub(crate) ring: Arc<Keyring>,
    pub(crate) imports: I,
    pub(crate) meter: MemoryMeter,
}
