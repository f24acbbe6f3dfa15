//! Secret rotation: a keyring of secrets with ids and activation epochs.
//!
//! A key is only as stable as the secret it is made with. Rotating the secret
//! naively (every server switches to the new one, at once) would give every
//! intent retried across the switch a new key: a duplicate window. The
//! keyring closes it in two ways:
//!
//! - **`fields` and `intent-hmac` keys** use the secret active at the
//!   intent's own epoch ([`Keyring::at`]), recorded with the intent. Every
//!   attempt of one intent picks the same secret, whenever it runs, so no
//!   attempt sees a new key.
//! - **Client-key storage keys** (HTTP) have no intent epoch: they use the
//!   secret active at `now`, and during the rotation window (at least the
//!   TTL of done records) the claim first reads the record under the
//!   previous secret's key ([`Keyring::prior_at`], [`crate::claim::PriorKey`]).
//!   A retry of a request first seen before the rotation finds its record
//!   there: replay, 409 or 422, and the effect does not run again.
//!
//! After the window the previous secret can be dropped: by then the records
//! it keyed have expired. An intent whose epoch precedes every secret left
//! gets `secret-retired`, never a key under another secret.
//!
//! Secrets with an activation in the future can be distributed ahead of
//! time: each server switches when its clock passes the activation, with no
//! coordinated deploy. Clocks matter only at that instant and only for
//! client keys: a retry that reaches a server whose clock is already past the
//! activation finds a record claimed before it, but two *concurrent* first
//! requests with one client key, handled by servers whose clocks disagree
//! about the activation, could claim under both secrets. Keep server clocks
//! synchronized (NTP) well within the time a client waits before retrying.
//!
//! ```
//! use intentkey::{Keyring, Secret};
//!
//! let keyring = Keyring::new(vec![
//!     ("2026-a".into(), 0, Secret::new([1u8; 32])?),
//!     ("2026-b".into(), 1_800_000_000, Secret::new([2u8; 32])?),
//! ])?;
//! // An intent recorded before the activation keeps the old secret forever.
//! assert_eq!(keyring.at(1_799_999_999)?.id(), "2026-a");
//! assert_eq!(keyring.at(1_800_000_000)?.id(), "2026-b");
//! // Client keys: during the window after the activation, look up the old key too.
//! assert_eq!(keyring.prior_at(1_800_000_100).map(|e| e.id()), Some("2026-a"));
//! assert!(keyring.prior_at(1_800_000_000 + keyring.window_seconds()).is_none());
//! // Once the window is over the old secret can go; old intents are refused, not re-keyed.
//! let newer = keyring.retire("2026-a")?;
//! assert_eq!(newer.at(1_799_999_999).unwrap_err().code().as_str(), "secret-retired");
//! # Ok::<(), intentkey::Error>(())
//! ```

use std::fmt;

use serde_json::Value;

use crate::claim::DEFAULT_TTL_SECONDS;
use crate::error::{Error, ErrorCode, Result};
use crate::secret::Secret;

/// The longest secret id, in bytes.
pub const MAX_SECRET_ID_LEN: usize = 64;

/// The id of the one secret of [`Keyring::single`].
pub const SINGLE_SECRET_ID: &str = "default";

/// One secret of a keyring: its id, the epoch from which it is active, and
/// the secret. `Debug` shows the id and the activation, never the bytes.
#[derive(Clone)]
pub struct KeyringEntry {
    id: String,
    active_from: i64,
    secret: Secret,
}

impl KeyringEntry {
    /// The secret's id (not secret: it may be logged).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The first epoch (seconds since the Unix epoch) at which it is active.
    pub fn active_from(&self) -> i64 {
        self.active_from
    }

    /// The secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

impl fmt::Debug for KeyringEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyringEntry")
            .field("id", &self.id)
            .field("active_from", &self.active_from)
            .field("secret", &self.secret)
            .finish()
    }
}

/// Secrets with ids and activation epochs, oldest first, and the rotation
/// window of client keys.
#[derive(Clone, Debug)]
pub struct Keyring {
    entries: Vec<KeyringEntry>,
    window_seconds: i64,
}

impl Keyring {
    /// A keyring of one secret, active at every epoch: what a server with a
    /// single secret uses.
    pub fn single(secret: Secret) -> Self {
        Keyring {
            entries: vec![KeyringEntry {
                id: SINGLE_SECRET_ID.to_owned(),
                active_from: i64::MIN,
                secret,
            }],
            window_seconds: DEFAULT_TTL_SECONDS,
        }
    }

    /// A keyring of `(id, active_from, secret)` entries in any order, with
    /// the default window ([`DEFAULT_TTL_SECONDS`], the TTL of done records).
    ///
    /// # Errors
    /// `invalid-keyring` (field `keyring`) when it is empty, when an id is
    /// empty, longer than [`MAX_SECRET_ID_LEN`] or not printable ASCII, or
    /// when two entries share an id or an activation epoch.
    pub fn new(entries: Vec<(String, i64, Secret)>) -> Result<Self> {
        if entries.is_empty() {
            return Err(invalid(
                "the keyring is empty: give at least one secret with an id and an activation epoch",
            ));
        }
        let mut entries: Vec<KeyringEntry> = entries
            .into_iter()
            .map(|(id, active_from, secret)| KeyringEntry {
                id,
                active_from,
                secret,
            })
            .collect();
        for entry in &entries {
            check_id(&entry.id)?;
        }
        entries.sort_by_key(|e| e.active_from);
        for pair in entries.windows(2) {
            if pair[0].active_from == pair[1].active_from {
                return Err(invalid(format!(
                    "secrets `{}` and `{}` are both active from {}: give each secret its own activation epoch",
                    pair[0].id, pair[1].id, pair[0].active_from
                )));
            }
        }
        let mut ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        ids.sort_unstable();
        if let Some(pair) = ids.windows(2).find(|p| p[0] == p[1]) {
            return Err(invalid(format!(
                "the secret id `{}` appears twice: give each secret its own id",
                pair[0]
            )));
        }
        Ok(Keyring {
            entries,
            window_seconds: DEFAULT_TTL_SECONDS,
        })
    }

    /// The same keyring with another rotation window: how long after a
    /// secret's activation client keys are also looked up under the
    /// previous secret. Make it at least the TTL of done records.
    ///
    /// # Errors
    /// `invalid-keyring` when `seconds` is negative.
    pub fn with_window(mut self, seconds: i64) -> Result<Self> {
        if seconds < 0 {
            return Err(invalid(
                "the rotation window is negative: give the seconds (at least the TTL of done records) during which the previous secret is still looked up",
            ));
        }
        self.window_seconds = seconds;
        Ok(self)
    }

    /// Reads a keyring document:
    /// `{"window_seconds": 86400, "secrets": [{"id": "2026-a", "active_from": 0, "secret_hex": "…"}, …]}`
    /// (`window_seconds` is optional).
    ///
    /// ```
    /// let doc = format!(
    ///     r#"{{"secrets":[{{"id":"a","active_from":0,"secret_hex":"{}"}}],"window_seconds":3600}}"#,
    ///     "ab".repeat(32)
    /// );
    /// let keyring = intentkey::Keyring::from_json(&doc)?;
    /// assert_eq!((keyring.len(), keyring.window_seconds()), (1, 3600));
    /// # Ok::<(), intentkey::Error>(())
    /// ```
    ///
    /// # Errors
    /// `invalid-keyring` naming what is wrong (never a secret's bytes), or
    /// the secret's own errors (`invalid-secret`, `secret-too-short`).
    pub fn from_json(text: &str) -> Result<Self> {
        let doc: Value = serde_json::from_str(text).map_err(|_| {
            invalid("the keyring is not JSON: give {\"secrets\": [{\"id\", \"active_from\", \"secret_hex\"}, …]}")
        })?;
        let Some(object) = doc.as_object() else {
            return Err(invalid(
                "the keyring is not a JSON object: give {\"secrets\": [...]}",
            ));
        };
        // The member's name is not quoted: a secret pasted in the wrong place
        // must not come back in an error.
        if object
            .keys()
            .any(|k| !matches!(k.as_str(), "secrets" | "window_seconds"))
        {
            return Err(invalid(
                "the keyring has a member other than `secrets` and `window_seconds`: only those two are read",
            ));
        }
        let Some(list) = object.get("secrets").and_then(Value::as_array) else {
            return Err(invalid(
                "the keyring has no `secrets` array: give [{\"id\", \"active_from\", \"secret_hex\"}, …]",
            ));
        };
        let mut entries = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let id = item
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("secret {i} of the keyring has no string `id`")))?;
            let active_from = item
                .get("active_from")
                .and_then(Value::as_i64)
                .ok_or_else(|| {
                    invalid(format!(
                        "secret {i} of the keyring has no integer `active_from` (seconds since the Unix epoch)"
                    ))
                })?;
            let hex = item
                .get("secret_hex")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    invalid(format!(
                        "secret {i} of the keyring has no string `secret_hex`"
                    ))
                })?;
            entries.push((id.to_owned(), active_from, Secret::from_hex(hex)?));
        }
        let keyring = Keyring::new(entries)?;
        match object.get("window_seconds") {
            None => Ok(keyring),
            Some(window) => keyring.with_window(window.as_i64().ok_or_else(|| {
                invalid("the keyring's `window_seconds` is not an integer count of seconds")
            })?),
        }
    }

    /// The entries, oldest activation first.
    pub fn entries(&self) -> &[KeyringEntry] {
        &self.entries
    }

    /// How many secrets it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Never true: a keyring holds at least one secret.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The rotation window of client keys, in seconds.
    pub fn window_seconds(&self) -> i64 {
        self.window_seconds
    }

    /// The index of the secret active at `epoch`: the latest activation not
    /// after it.
    ///
    /// # Errors
    /// `secret-retired` (field `intent_epoch`) when `epoch` precedes every
    /// activation: the secret that keyed the intent was dropped.
    pub fn index_at(&self, epoch: i64) -> Result<usize> {
        let after = self.entries.partition_point(|e| e.active_from <= epoch);
        after.checked_sub(1).ok_or_else(|| {
            let oldest = &self.entries[0];
            Error::field(
                ErrorCode::SecretRetired,
                "intent_epoch",
                format!(
                    "no secret of the keyring is active at {epoch}: the oldest, `{}`, is active from {}. The secret that keyed this intent was dropped; keep a secret for as long as its intents are retried, or record a new intent",
                    oldest.id, oldest.active_from
                ),
            )
        })
    }

    /// The secret active at `epoch` (the intent's own epoch for `fields` and
    /// `intent-hmac` keys; `now` for client keys).
    ///
    /// # Errors
    /// As [`Keyring::index_at`].
    pub fn at(&self, epoch: i64) -> Result<&KeyringEntry> {
        Ok(&self.entries[self.index_at(epoch)?])
    }

    /// The index of the previous secret while `now` is inside the rotation
    /// window of the secret active at `now`; `None` otherwise (and when no
    /// secret is active at `now`, or it is the oldest).
    pub fn prior_index_at(&self, now: i64) -> Option<usize> {
        let current = self.index_at(now).ok()?;
        let prior = current.checked_sub(1)?;
        let activated = self.entries[current].active_from;
        (now < activated.saturating_add(self.window_seconds)).then_some(prior)
    }

    /// The previous secret while `now` is inside the rotation window (see
    /// [`Keyring::prior_index_at`]).
    pub fn prior_at(&self, now: i64) -> Option<&KeyringEntry> {
        self.prior_index_at(now).map(|i| &self.entries[i])
    }

    /// The same keyring without the secret `id`: after the window, the
    /// previous secret can be dropped.
    ///
    /// # Errors
    /// `invalid-keyring` when no secret has that id or it is the last one.
    pub fn retire(&self, id: &str) -> Result<Self> {
        if !self.entries.iter().any(|e| e.id == id) {
            return Err(invalid(format!(
                "the keyring has no secret `{}` to retire",
                crate::error::clip(id)
            )));
        }
        if self.entries.len() == 1 {
            return Err(invalid(
                "the keyring would be empty: add the new secret before retiring the last one",
            ));
        }
        Ok(Keyring {
            entries: self
                .entries
                .iter()
                .filter(|e| e.id != id)
                .cloned()
                .collect(),
            window_seconds: self.window_seconds,
        })
    }
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_SECRET_ID_LEN || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(format!(
            "a secret id must be 1 to {MAX_SECRET_ID_LEN} printable ASCII characters with no spaces (for example `2026-12`); got `{}`",
            crate::error::clip(id)
        )));
    }
    Ok(())
}

fn invalid(message: impl Into<String>) -> Error {
    Error::field(ErrorCode::InvalidKeyring, "keyring", message)
}
