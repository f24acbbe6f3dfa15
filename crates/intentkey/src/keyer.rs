//! Keys and fingerprints under a keyring: each intent is keyed with the
//! secret active at its own epoch.

use crate::deriver::{Deriver, Fingerprint, Intent};
use crate::error::{Error, ErrorCode, Result};
use crate::key::{Key, KeyLength};
use crate::keyring::Keyring;
use crate::payload::Payload;
use crate::policy::Policy;

/// A [`Deriver`] per secret of a [`Keyring`], under one policy. Every call
/// takes the intent's epoch and uses the secret active at it, so every
/// attempt of one intent gets the same key and fingerprint before, during
/// and after a rotation.
///
/// ```
/// use intentkey::{Intent, Keyer, Keyring, KeyLength, Payload, Policy, Secret};
///
/// let old = Secret::new([1u8; 32])?;
/// let keyring = Keyring::new(vec![
///     ("a".into(), 0, old.clone()),
///     ("b".into(), 2_000, Secret::new([2u8; 32])?),
/// ])?;
/// let keyer = Keyer::new(&keyring, Policy::default());
/// let payload = Payload::from_json(r#"{"creditor_key":"a@b.c","amount":"1","currency":"BRL"}"#)?;
/// let intent = Intent { tenant_id: "t1", action_type: "pix.send", payload: &payload, intent_epoch: 1_999 };
/// // Recorded before the rotation: the old secret's key, whenever it is retried.
/// let before = intentkey::Deriver::new(&old, Policy::default()).derive(&intent)?;
/// assert_eq!(keyer.derive(&intent)?, before);
/// assert_eq!(keyer.secret_id_at(1_999)?, "a");
/// assert_eq!(keyer.intent_key("t1", "i-1", 2_000, KeyLength::FULL)?.as_str().len(), 64);
/// # Ok::<(), intentkey::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Keyer {
    keyring: Keyring,
    derivers: Vec<Deriver>,
}

impl Keyer {
    /// Keys one HMAC per secret of `keyring`, under `policy`.
    pub fn new(keyring: &Keyring, policy: Policy) -> Self {
        let derivers = keyring
            .entries()
            .iter()
            .map(|e| Deriver::new(e.secret(), policy.clone()))
            .collect();
        Keyer {
            keyring: keyring.clone(),
            derivers,
        }
    }

    /// The keyring.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// The policy in use.
    pub fn policy(&self) -> &Policy {
        self.derivers[0].policy()
    }

    /// The deriver of the secret active at `intent_epoch`.
    ///
    /// # Errors
    /// `secret-retired` when no secret is active at `intent_epoch`.
    pub fn deriver_at(&self, intent_epoch: i64) -> Result<&Deriver> {
        Ok(&self.derivers[self.keyring.index_at(intent_epoch)?])
    }

    /// The deriver of the keyring's only secret, for calls that carry no
    /// intent epoch.
    ///
    /// # Errors
    /// `invalid-keyring` when the keyring holds more than one secret: which
    /// one keys the intent depends on its epoch, so pass it.
    pub fn sole_deriver(&self) -> Result<&Deriver> {
        match self.derivers.as_slice() {
            [only] => Ok(only),
            many => Err(Error::field(
                ErrorCode::InvalidKeyring,
                "intent_epoch",
                format!(
                    "this keyer holds {} secrets, and which one keys an intent depends on its epoch: pass the intent's epoch (the `-at` form of the call)",
                    many.len()
                ),
            )),
        }
    }

    /// The id of the secret active at `intent_epoch`.
    ///
    /// # Errors
    /// As [`Keyer::deriver_at`].
    pub fn secret_id_at(&self, intent_epoch: i64) -> Result<&str> {
        Ok(self.keyring.at(intent_epoch)?.id())
    }

    /// The `fields`-mode key under the secret active at the intent's epoch.
    ///
    /// # Errors
    /// As [`Deriver::derive`], and `secret-retired`.
    pub fn derive(&self, intent: &Intent<'_>) -> Result<Key> {
        self.deriver_at(intent.intent_epoch)?.derive(intent)
    }

    /// The canonical `fields` material (the same under every secret).
    ///
    /// # Errors
    /// As [`Deriver::material`].
    pub fn material(&self, intent: &Intent<'_>) -> Result<Vec<u8>> {
        self.derivers[0].material(intent)
    }

    /// The `intent-hmac`-mode key under the secret active at `intent_epoch`.
    ///
    /// # Errors
    /// As [`Deriver::intent_key`], and `secret-retired`.
    pub fn intent_key(
        &self,
        tenant_id: &str,
        intent_id: &str,
        intent_epoch: i64,
        length: KeyLength,
    ) -> Result<Key> {
        self.deriver_at(intent_epoch)?
            .intent_key(tenant_id, intent_id, length)
    }

    /// The claim attempt of an intent: its key and payload fingerprint, both
    /// under the secret active at the intent's own epoch, so every attempt
    /// of one intent claims the same record across a rotation.
    ///
    /// With `intent_id` the key is the `intent-hmac` key of the recorded
    /// intent (`length` hex, the policy's length by default); without it,
    /// the `fields` key of the intent's material. The fingerprint is the
    /// payload fingerprint either way (another payload under the same key
    /// is a conflict).
    ///
    /// ```
    /// use intentkey::{Intent, Keyer, Keyring, Payload, Policy, Secret};
    ///
    /// let keyring = Keyring::new(vec![
    ///     ("k1".into(), 0, Secret::new([1u8; 32])?),
    ///     ("k2".into(), 1_700_000_000, Secret::new([2u8; 32])?),
    /// ])?;
    /// let keyer = Keyer::new(&keyring, Policy::default());
    /// let payload = Payload::from_json(r#"{"creditor_key":"a@b.com","amount":"10.00","currency":"BRL","remittance":""}"#)?;
    /// let before = Intent { tenant_id: "t", action_type: "pix.send", payload: &payload, intent_epoch: 1_600_000_000 };
    /// let attempt = keyer.intent_attempt(&before, None, None)?;
    /// // The intent recorded before the rotation keeps the first secret.
    /// assert_eq!(attempt.key, keyer.deriver_at(1_600_000_000)?.derive(&before)?.as_str());
    /// # Ok::<(), intentkey::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Keyer::derive`], [`Keyer::intent_key`] and [`Keyer::fingerprint`].
    pub fn intent_attempt(
        &self,
        intent: &Intent<'_>,
        intent_id: Option<&str>,
        length: Option<KeyLength>,
    ) -> Result<crate::claim::Attempt> {
        let key = match intent_id {
            Some(id) => self.intent_key(
                intent.tenant_id,
                id,
                intent.intent_epoch,
                length.unwrap_or_else(|| self.policy().key_length()),
            )?,
            None => self.derive(intent)?,
        };
        let fingerprint = self.fingerprint(
            intent.tenant_id,
            intent.action_type,
            intent.payload,
            intent.intent_epoch,
        )?;
        Ok(crate::claim::Attempt {
            key: key.into_string(),
            fingerprint: fingerprint.as_str().to_owned(),
            tenant_id: intent.tenant_id.to_owned(),
            action_type: intent.action_type.to_owned(),
            prior: None,
        })
    }

    /// The payload fingerprint under the secret active at `intent_epoch`.
    ///
    /// # Errors
    /// As [`Deriver::fingerprint`], and `secret-retired`.
    pub fn fingerprint(
        &self,
        tenant_id: &str,
        action_type: &str,
        payload: &Payload,
        intent_epoch: i64,
    ) -> Result<Fingerprint> {
        self.deriver_at(intent_epoch)?
            .fingerprint(tenant_id, action_type, payload)
    }
}
