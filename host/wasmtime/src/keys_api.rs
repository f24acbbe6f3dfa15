//! The `keys` export, offered alike by [`crate::WasmKeys`] and
//! [`crate::WasmGuard`] (every world exports `keys`).

/// The key-derivation methods, written once for both instance types; each
/// forwards to the shared instance code in `self.inner`.
macro_rules! keys_api {
    () => {
        /// Creates a keyer: validates `policy_json` (`None`: the built-in
        /// payments policy) and hands the guest `secret` through the
        /// `secrets` import. The host keeps a copy of the secret until the
        /// keyer is dropped (then wiped), so the keyer can be rebuilt after
        /// a trap.
        ///
        /// # Errors
        /// The core's `invalid-policy` or `secret-too-short`, or a trap.
        pub fn keyer(
            &mut self,
            policy_json: Option<&str>,
            secret: &[u8],
        ) -> Result<$crate::WasmKeyer, $crate::HostError> {
            self.inner.keyer(policy_json, secret)
        }

        /// Creates a keyer keyed by a keyring of `(id, active_from, secret)`
        /// entries: each intent is keyed with the secret active at its own
        /// epoch ([`intentkey::Keyring`]). With more than one secret, the
        /// calls without an epoch (`intent_key`, `fingerprint`) are refused
        /// with `invalid-keyring`: use [`Self::intent_key_at`] and
        /// [`Self::fingerprint_at`]. The host keeps copies of the secrets
        /// until the keyer is dropped (then wiped).
        ///
        /// # Errors
        /// The core's `invalid-keyring`, `invalid-policy` or
        /// `secret-too-short`, or a trap.
        pub fn keyer_with_keyring(
            &mut self,
            policy_json: Option<&str>,
            keyring: &[(&str, i64, &[u8])],
        ) -> Result<$crate::WasmKeyer, $crate::HostError> {
            self.inner.keyer_with_keyring(policy_json, keyring)
        }

        /// The `intent-hmac`-mode key under the secret active at
        /// `intent_epoch`; `key_hex_length` defaults to 64.
        ///
        /// # Errors
        /// The core's typed error (`secret-retired` among them), or a trap.
        pub fn intent_key_at(
            &mut self,
            keyer: &$crate::WasmKeyer,
            tenant_id: &str,
            intent_id: &str,
            intent_epoch: i64,
            key_hex_length: Option<u32>,
        ) -> Result<String, $crate::HostError> {
            self.inner
                .intent_key_at(keyer, tenant_id, intent_id, intent_epoch, key_hex_length)
        }

        /// The fingerprint (64 hex) under the secret active at `intent_epoch`.
        ///
        /// # Errors
        /// The core's typed error (`secret-retired` among them), or a trap.
        pub fn fingerprint_at(
            &mut self,
            keyer: &$crate::WasmKeyer,
            tenant_id: &str,
            action_type: &str,
            payload_json: &str,
            intent_epoch: i64,
        ) -> Result<String, $crate::HostError> {
            self.inner
                .fingerprint_at(keyer, tenant_id, action_type, payload_json, intent_epoch)
        }

        /// Drops a keyer now: its guest resource (with the guest's copy of
        /// the secret) and the host's copy, wiped. Dropping a keyer does the
        /// same, the guest part at this instance's next call.
        pub fn drop_keyer(&mut self, keyer: $crate::WasmKeyer) {
            self.inner.drop_keyer(keyer);
        }

        /// The `fields`-mode key.
        ///
        /// # Errors
        /// The core's typed error, [`HostError::Misuse`](crate::HostError::Misuse)
        /// for a keyer of another instance, or a trap.
        pub fn derive(
            &mut self,
            keyer: &$crate::WasmKeyer,
            intent: &$crate::WasmIntent,
        ) -> Result<String, $crate::HostError> {
            self.inner.derive(keyer, intent)
        }

        /// Keys for many intents in one call, in order.
        ///
        /// # Errors
        /// A trap (per-intent refusals are in the inner results).
        pub fn derive_many(
            &mut self,
            keyer: &$crate::WasmKeyer,
            intents: &[$crate::WasmIntent],
        ) -> Result<Vec<Result<String, $crate::HostError>>, $crate::HostError> {
            self.inner.derive_many(keyer, intents)
        }

        /// The canonical `fields` material (UTF-8 JSON text).
        ///
        /// # Errors
        /// The core's typed error, or a trap.
        pub fn material(
            &mut self,
            keyer: &$crate::WasmKeyer,
            intent: &$crate::WasmIntent,
        ) -> Result<String, $crate::HostError> {
            self.inner.material(keyer, intent)
        }

        /// The `intent-hmac`-mode key; `key_hex_length` defaults to 64.
        ///
        /// # Errors
        /// The core's typed error, or a trap.
        pub fn intent_key(
            &mut self,
            keyer: &$crate::WasmKeyer,
            tenant_id: &str,
            intent_id: &str,
            key_hex_length: Option<u32>,
        ) -> Result<String, $crate::HostError> {
            self.inner
                .intent_key(keyer, tenant_id, intent_id, key_hex_length)
        }

        /// The fingerprint's material and the fingerprint (64 hex).
        ///
        /// # Errors
        /// The core's typed error, or a trap.
        pub fn fingerprint(
            &mut self,
            keyer: &$crate::WasmKeyer,
            tenant_id: &str,
            action_type: &str,
            payload_json: &str,
        ) -> Result<(String, String), $crate::HostError> {
            self.inner
                .fingerprint(keyer, tenant_id, action_type, payload_json)
        }

        /// Compares the payload's fingerprint with a stored one, in constant
        /// time.
        ///
        /// # Errors
        /// The core's typed error, or a trap.
        pub fn fingerprint_matches(
            &mut self,
            keyer: &$crate::WasmKeyer,
            tenant_id: &str,
            action_type: &str,
            payload_json: &str,
            stored: &str,
        ) -> Result<bool, $crate::HostError> {
            self.inner
                .fingerprint_matches(keyer, tenant_id, action_type, payload_json, stored)
        }

        /// A `uuid`-mode key from the host's randomness.
        ///
        /// # Errors
        /// `invalid-random` when the OS gives no randomness, or a trap.
        pub fn new_uuid_key(&mut self) -> Result<String, $crate::HostError> {
            self.inner.new_uuid_key()
        }

        /// A `uuid`-mode key from given bytes.
        ///
        /// # Errors
        /// `invalid-random` unless there are 16 bytes, or a trap.
        pub fn uuid_key(&mut self, random: &[u8]) -> Result<String, $crate::HostError> {
            self.inner.uuid_key(random)
        }

        /// The JSON-lines contract: one answer line per request line.
        ///
        /// # Errors
        /// A trap.
        pub fn answer_lines(&mut self, lines: &[String]) -> Result<Vec<String>, $crate::HostError> {
            self.inner.answer_lines(lines)
        }

        /// The JSON-lines contract under a policy given as JSON.
        ///
        /// # Errors
        /// `invalid-policy` (the whole batch is refused), or a trap.
        pub fn answer_lines_with_policy(
            &mut self,
            policy_json: &str,
            lines: &[String],
        ) -> Result<Vec<String>, $crate::HostError> {
            self.inner.answer_lines_with_policy(policy_json, lines)
        }

        /// Makes the next call trap at once, as a deadline that has passed
        /// would: for testing trap recovery. The call after it runs on a
        /// fresh instance.
        pub fn interrupt_next_call(&mut self) {
            self.inner.interrupt_next_call();
        }

        /// How many times the instance has been replaced after a trap.
        pub fn reinstantiations(&self) -> u64 {
            self.inner.reinstantiations()
        }

        /// How many secrets the host holds for this instance: one per live
        /// keyer (one per secret of a keyring keyer).
        pub fn held_secrets(&self) -> usize {
            self.inner.held_secrets()
        }

        /// The guest's linear memory, in bytes (it grows, never shrinks).
        pub fn guest_memory_bytes(&self) -> usize {
            self.inner.guest_memory_bytes()
        }
    };
}

pub(crate) use keys_api;
