//! The `keys` export: key derivation through a keyer resource.

use crate::bindings::exports::intentkey::core::keys::{self, GuestKeyer};
use crate::bindings::intentkey::core::types::{
    Attempt as WitAttempt, Error as WitError, Intent as WitIntent, KeyringEntry as WitKeyringEntry,
    Run as WitRun,
};
use crate::bindings::intentkey::core::{random, secrets};
use crate::Component;
use intentkey::{Intent, KeyLength, Keyring, Payload, Policy, RequestAnswerer, Secret};

/// A policy keyed with a keyring (one secret or several), held by the
/// guest for the resource's life.
pub(crate) struct Keyer {
    keyer: intentkey::Keyer,
}

fn policy_from(policy_json: Option<String>) -> Result<Policy, WitError> {
    match policy_json {
        Some(json) => Policy::from_json(&json).map_err(WitError::from),
        None => Ok(Policy::default()),
    }
}

/// A keyring from entries whose bytes come from the host's `secrets` import.
pub(crate) fn keyring_from(entries: Vec<WitKeyringEntry>) -> Result<Keyring, WitError> {
    let mut secrets_in = Vec::with_capacity(entries.len());
    for entry in entries {
        let secret = Secret::new(secrets::get_secret(&entry.secret_id)?).map_err(WitError::from)?;
        secrets_in.push((entry.id, entry.active_from, secret));
    }
    Keyring::new(secrets_in).map_err(WitError::from)
}

fn key_length(key_hex_length: Option<u32>) -> Result<KeyLength, WitError> {
    match key_hex_length {
        Some(n) => KeyLength::new(n as usize).map_err(WitError::from),
        None => Ok(KeyLength::FULL),
    }
}

fn with_payload<T>(
    payload_json: &str,
    f: impl FnOnce(&Payload) -> intentkey::Result<T>,
) -> Result<T, WitError> {
    Payload::from_json(payload_json)
        .and_then(|p| f(&p))
        .map_err(WitError::from)
}

impl Keyer {
    fn key(&self, intent: &WitIntent) -> Result<String, WitError> {
        // Only what the key reads is kept of the payload (the same key or error).
        Payload::from_json_for_key(&intent.payload_json, self.keyer.policy())
            .and_then(|payload| {
                self.keyer.derive(&Intent {
                    tenant_id: &intent.tenant_id,
                    action_type: &intent.action_type,
                    payload: &payload,
                    intent_epoch: intent.intent_epoch,
                })
            })
            .map(intentkey::Key::into_string)
            .map_err(WitError::from)
    }
}

impl GuestKeyer for Keyer {
    fn create(policy_json: Option<String>, secret_id: String) -> Result<keys::Keyer, WitError> {
        let policy = policy_from(policy_json)?;
        let secret = Secret::new(secrets::get_secret(&secret_id)?).map_err(WitError::from)?;
        Ok(keys::Keyer::new(Keyer {
            keyer: intentkey::Keyer::new(&Keyring::single(secret), policy),
        }))
    }

    fn create_keyring(
        policy_json: Option<String>,
        keyring: Vec<WitKeyringEntry>,
    ) -> Result<keys::Keyer, WitError> {
        let policy = policy_from(policy_json)?;
        Ok(keys::Keyer::new(Keyer {
            keyer: intentkey::Keyer::new(&keyring_from(keyring)?, policy),
        }))
    }

    fn derive(&self, intent: WitIntent) -> Result<String, WitError> {
        self.key(&intent)
    }

    fn derive_many(&self, intents: Vec<WitIntent>) -> Vec<Result<String, WitError>> {
        intents.iter().map(|intent| self.key(intent)).collect()
    }

    fn material(&self, intent: WitIntent) -> Result<String, WitError> {
        with_payload(&intent.payload_json, |payload| {
            self.keyer.material(&Intent {
                tenant_id: &intent.tenant_id,
                action_type: &intent.action_type,
                payload,
                intent_epoch: intent.intent_epoch,
            })
        })
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    }

    fn intent_key(
        &self,
        tenant_id: String,
        intent_id: String,
        key_hex_length: Option<u32>,
    ) -> Result<String, WitError> {
        let length = key_length(key_hex_length)?;
        self.keyer
            .sole_deriver()
            .and_then(|d| d.intent_key(&tenant_id, &intent_id, length))
            .map(intentkey::Key::into_string)
            .map_err(WitError::from)
    }

    fn intent_key_at(
        &self,
        tenant_id: String,
        intent_id: String,
        intent_epoch: i64,
        key_hex_length: Option<u32>,
    ) -> Result<String, WitError> {
        let length = key_length(key_hex_length)?;
        self.keyer
            .intent_key(&tenant_id, &intent_id, intent_epoch, length)
            .map(intentkey::Key::into_string)
            .map_err(WitError::from)
    }

    fn fingerprint(
        &self,
        tenant_id: String,
        action_type: String,
        payload_json: String,
    ) -> Result<String, WitError> {
        with_payload(&payload_json, |payload| {
            self.keyer
                .sole_deriver()?
                .fingerprint(&tenant_id, &action_type, payload)
        })
        .map(|fp| fp.as_str().to_owned())
    }

    fn fingerprint_at(
        &self,
        tenant_id: String,
        action_type: String,
        payload_json: String,
        intent_epoch: i64,
    ) -> Result<String, WitError> {
        with_payload(&payload_json, |payload| {
            self.keyer
                .fingerprint(&tenant_id, &action_type, payload, intent_epoch)
        })
        .map(|fp| fp.as_str().to_owned())
    }

    fn fingerprint_material(
        &self,
        tenant_id: String,
        action_type: String,
        payload_json: String,
    ) -> Result<String, WitError> {
        with_payload(&payload_json, |payload| {
            self.keyer
                .sole_deriver()?
                .fingerprint_material(&tenant_id, &action_type, payload)
        })
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    }

    fn fingerprint_matches(
        &self,
        tenant_id: String,
        action_type: String,
        payload_json: String,
        stored: String,
    ) -> Result<bool, WitError> {
        with_payload(&payload_json, |payload| {
            self.keyer
                .sole_deriver()?
                .fingerprint(&tenant_id, &action_type, payload)
        })
        .map(|fp| fp.matches(&stored))
    }

    fn intent_attempt(
        &self,
        intent: WitIntent,
        intent_id: Option<String>,
        key_hex_length: Option<u32>,
    ) -> Result<WitAttempt, WitError> {
        let length = key_hex_length.map(|n| key_length(Some(n))).transpose()?;
        with_payload(&intent.payload_json, |payload| {
            self.keyer.intent_attempt(
                &Intent {
                    tenant_id: &intent.tenant_id,
                    action_type: &intent.action_type,
                    payload,
                    intent_epoch: intent.intent_epoch,
                },
                intent_id.as_deref(),
                length,
            )
        })
        .map(WitAttempt::from)
    }

    fn step_attempt(
        &self,
        run: WitRun,
        step: String,
        input_json: Option<String>,
    ) -> Result<WitAttempt, WitError> {
        let input = match input_json {
            Some(text) => Some(
                serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
                    WitError::from(intentkey::Error::field(
                        intentkey::ErrorCode::InvalidJson,
                        "input",
                        format!(
                            "the input of step `{}` is not JSON ({e}); pass JSON text or none",
                            step.escape_debug()
                        ),
                    ))
                })?,
            ),
            None => None,
        };
        self.keyer
            .step_attempt(&run_in(&run), &step, input.as_ref())
            .map(WitAttempt::from)
            .map_err(WitError::from)
    }

    fn tool_call_attempt(
        &self,
        run: WitRun,
        tool: String,
        arguments_json: String,
    ) -> Result<WitAttempt, WitError> {
        with_payload(&arguments_json, |arguments| {
            self.keyer
                .tool_call_attempt(&run_in(&run), &tool, arguments)
        })
        .map(WitAttempt::from)
    }
}

fn run_in(run: &WitRun) -> intentkey::journal::Run<'_> {
    intentkey::journal::Run {
        tenant_id: &run.tenant_id,
        intent_id: &run.intent_id,
        intent_epoch: run.intent_epoch,
    }
}

fn uuid_from(bytes: &[u8]) -> Result<String, WitError> {
    intentkey::uuid_key_from_slice(bytes)
        .map(intentkey::Key::into_string)
        .map_err(WitError::from)
}

fn answer_all(policy: Policy, lines: &[String]) -> Vec<String> {
    let mut answerer = RequestAnswerer::new(policy);
    lines
        .iter()
        .map(|line| answerer.answer_line(line))
        .collect()
}

impl keys::Guest for Component {
    type Keyer = Keyer;

    fn new_uuid_key() -> Result<String, WitError> {
        uuid_from(&random::random_bytes(16))
    }

    fn uuid_key(random_bytes: Vec<u8>) -> Result<String, WitError> {
        uuid_from(&random_bytes)
    }

    fn unreadable_line_answer() -> String {
        intentkey::request::unreadable_line_answer()
    }

    fn answer_lines(lines: Vec<String>) -> Vec<String> {
        answer_all(Policy::default(), &lines)
    }

    fn answer_lines_with_policy(
        policy_json: String,
        lines: Vec<String>,
    ) -> Result<Vec<String>, WitError> {
        let policy = Policy::from_json(&policy_json).map_err(WitError::from)?;
        Ok(answer_all(policy, &lines))
    }
}
