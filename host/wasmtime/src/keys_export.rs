//! The `keys` export called on an [`Instance`]: keyers and their guest
//! resources, keys, fingerprints and answer lines.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use wasmtime::component::ResourceAny;
use zeroize::Zeroizing;

use crate::bindings::pure;
use crate::instance::{Imports, Instance};
use crate::keyer::{lock, WasmKeyer};
use crate::HostError;

use pure::exports::intentkey::core::keys::Intent as WitIntent;
use pure::intentkey::core::types as wit;

impl<I: Imports> Instance<'_, I> {
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
            if generation == self.generation() {
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
        *lock(&keyer.resource) = Some((self.generation(), resource));
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
                .map(|a| a.map_err(|e| HostError::Core(e.into())))
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
