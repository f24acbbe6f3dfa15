//! The host's side of the WIT imports: `secrets` and `random` (every
//! world), `store` and `gateway` (world `intentkey`).

use crate::bindings::{full, pure};
use crate::convert;
use crate::host_state::{GuardImports, HostState};

use pure::intentkey::core::types as wit;

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
            .insert(&record.into())
            .map_err(|e| convert::store_error_out(&e))
    }

    fn get(&mut self, key: String) -> Result<Option<wit::Record>, wit::StoreError> {
        let store = &self.imports.store;
        store
            .get(&key)
            .map(|r| r.map(Into::into))
            .map_err(|e| convert::store_error_out(&e))
    }

    fn complete(&mut self, completion: wit::Completion) -> Result<bool, wit::StoreError> {
        let store = &self.imports.store;
        store
            .complete(&completion.into())
            .map_err(|e| convert::store_error_out(&e))
    }

    fn replace(&mut self, replacement: wit::Replacement) -> Result<bool, wit::StoreError> {
        let store = &self.imports.store;
        store
            .replace(&replacement.into())
            .map_err(|e| convert::store_error_out(&e))
    }

    fn release(&mut self, request: wit::ReleaseRequest) -> Result<bool, wit::StoreError> {
        let store = &self.imports.store;
        store
            .release(&request.into())
            .map_err(|e| convert::store_error_out(&e))
    }

    fn list(
        &mut self,
        status: wit::Status,
        limit: u32,
    ) -> Result<Vec<wit::Record>, wit::StoreError> {
        let store = &self.imports.store;
        store
            .list(Some(status.into()), limit as usize)
            .map(|records| records.into_iter().map(Into::into).collect())
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
        self.imports.gateway.lookup(&key).into()
    }
}
