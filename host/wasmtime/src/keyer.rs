//! [`WasmKeyer`], the host's handle on a guest keyer resource, and the
//! [`Keyring`] of secrets the host holds for an instance's keyers.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use wasmtime::component::ResourceAny;
use zeroize::Zeroizing;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps stay consistent under a panic (each change is one insert or
    // remove), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The secrets the host holds for one instance's keyers, and the guest
/// resources of dropped keyers waiting to be dropped in the guest. Shared
/// by the instance and its keyers, so a keyer's drop wipes its secret at
/// once, wherever it happens.
pub(crate) struct Keyring {
    pub(crate) secrets: Mutex<HashMap<String, Zeroizing<Vec<u8>>>>,
    pub(crate) dropped: Mutex<Vec<(u64, ResourceAny)>>,
    pub(crate) next: AtomicU64,
}

impl Keyring {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Keyring {
            secrets: Mutex::new(HashMap::new()),
            dropped: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        })
    }

    pub(crate) fn secret(&self, id: &str) -> Option<Vec<u8>> {
        lock(&self.secrets).get(id).map(|s| s.to_vec())
    }

    pub(crate) fn held(&self) -> usize {
        lock(&self.secrets).len()
    }

    /// Wipes every secret and forgets every resource (the instance is gone).
    pub(crate) fn clear(&self) {
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
    pub(crate) ring: Arc<Keyring>,
    pub(crate) secret_id: String,
    /// A keyring keyer's secrets: (keyring id, activation, `secrets` import
    /// id); empty for a one-secret keyer (`secret_id`).
    pub(crate) keyring: Vec<(String, i64, String)>,
    pub(crate) policy_json: Option<String>,
    /// The guest resource and the instance generation it lives in.
    pub(crate) resource: Mutex<Option<(u64, ResourceAny)>>,
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
