//! The three key modes and the fingerprint, keyed by one secret under one policy.

use subtle::ConstantTimeEq;

use crate::canonical::{needs_escape, write_escaped, write_str, write_value};
use crate::error::{Error, ErrorCode, Result};
use crate::key::{digest_hex, Key, KeyLength};
use crate::payload::Payload;
use crate::policy::{FieldClass, Policy};
use crate::secret::{KeyedMac, Secret};
use crate::sink::Bytes;

/// Domain label of `intent-hmac` material.
pub const INTENT_HMAC_LABEL: &str = "intentkey/intent-hmac/v1";
/// Domain label of fingerprint material.
pub const FINGERPRINT_LABEL: &str = "intentkey/fingerprint/v1";

/// One intent, as the `fields` mode sees it.
#[derive(Clone, Copy, Debug)]
pub struct Intent<'a> {
    /// The tenant (non-empty).
    pub tenant_id: &'a str,
    /// The action type (non-empty; one of the policy's if it closes the set).
    pub action_type: &'a str,
    /// The request body.
    pub payload: &'a Payload,
    /// When the intent was recorded, in seconds since the Unix epoch. It comes
    /// from the intent record, never from a clock read at attempt time.
    pub intent_epoch: i64,
}

/// A payload digest stored beside the key and compared on every repeat.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// The fingerprint of an HMAC digest.
    pub(crate) fn from_digest(digest: &[u8; 32]) -> Self {
        Fingerprint(digest_hex(digest, 64))
    }

    /// The fingerprint as 64 lowercase hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares with a stored fingerprint in constant time (for equal lengths).
    ///
    /// ```
    /// use intentkey::{Deriver, Payload, Policy, Secret};
    /// let d = Deriver::new(&Secret::new([7u8; 32]).unwrap(), Policy::default());
    /// let p = Payload::from_json(r#"{"amount":"10"}"#).unwrap();
    /// let fp = d.fingerprint("t1", "pix.send", &p).unwrap();
    /// assert!(fp.matches(fp.as_str()));
    /// assert!(!fp.matches(&"0".repeat(64)));
    /// ```
    pub fn matches(&self, stored: &str) -> bool {
        self.0.as_bytes().ct_eq(stored.as_bytes()).into()
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Derives keys and fingerprints with one secret under one policy.
///
/// The HMAC is keyed once, when the `Deriver` is made; each key then costs
/// only the normalization and one pass over the material.
///
/// The keyed HMAC state makes keys as well as the secret does, so it is
/// treated like the secret: `Debug` redacts it, and dropping a `Deriver`
/// overwrites it with an unkeyed state. That overwrite is best effort: `hmac`
/// 0.12 offers no `Zeroize`, and the short-lived copies it makes while
/// keying and hashing are not wiped.
///
/// ```
/// use intentkey::{Deriver, Intent, Payload, Policy, Secret};
///
/// let secret = Secret::from_hex(&"00".repeat(32)).unwrap();
/// let deriver = Deriver::new(&secret, Policy::default());
/// let payload = Payload::from_json(
///     r#"{"creditor_key": "123.456.789-09", "amount": 10.5, "currency": "brl", "request_id": "r-1"}"#,
/// ).unwrap();
/// let intent = Intent { tenant_id: "t1", action_type: "pix.send", payload: &payload, intent_epoch: 1_700_000_000 };
///
/// let material = deriver.material(&intent).unwrap();
/// assert_eq!(
///     String::from_utf8(material).unwrap(),
///     r#"["t1","pix.send",{"amount":"10.50","creditor_key":"12345678909","currency":"BRL"},1888888]"#
/// );
/// let key = deriver.derive(&intent).unwrap();
/// assert_eq!(key.as_str().len(), 64);
/// ```
#[derive(Clone)]
pub struct Deriver {
    mac: KeyedMac,
    policy: Policy,
}

impl std::fmt::Debug for Deriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deriver")
            .field("secret", &"redacted")
            .field("policy", &self.policy)
            .finish()
    }
}

impl Deriver {
    /// Keys the HMAC with `secret` and takes the policy.
    pub fn new(secret: &Secret, policy: Policy) -> Self {
        Deriver {
            mac: secret.keyed().clone(),
            policy,
        }
    }

    /// The policy in use.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The canonical `fields` material: the UTF-8 bytes of
    /// `[tenant_id, action_type, {normalized key fields}, bucket]` in canonical JSON.
    ///
    /// # Errors
    /// `invalid-tenant-id`, `invalid-action-type`, `unknown-action-type`,
    /// `unclassified-fields` (listing every such field, sorted), or a
    /// normalizer's error naming the field.
    pub fn material(&self, intent: &Intent<'_>) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(256);
        self.write_head(&mut out, intent.tenant_id, intent.action_type)?;
        out.push(b'{');
        self.write_body(&mut out, intent.payload, false)?;
        out.extend_from_slice(b"},");
        out.extend_from_slice(
            itoa::Buffer::new()
                .format(self.policy.bucket(intent.intent_epoch))
                .as_bytes(),
        );
        out.push(b']');
        Ok(out)
    }

    /// The `fields`-mode key: HMAC-SHA256 over [`Deriver::material`], as long as
    /// the policy's key length.
    ///
    /// # Errors
    /// As [`Deriver::material`].
    pub fn derive(&self, intent: &Intent<'_>) -> Result<Key> {
        let material = self.material(intent)?;
        Ok(Key::from_digest(
            &self.mac_of(&material),
            self.policy.key_length(),
        ))
    }

    /// The `intent-hmac`-mode key: HMAC-SHA256 over the canonical JSON of
    /// `["intentkey/intent-hmac/v1", tenant_id, intent_id]`.
    ///
    /// ```
    /// use intentkey::{Deriver, KeyLength, Policy, Secret};
    /// let d = Deriver::new(&Secret::new([1u8; 32]).unwrap(), Policy::default());
    /// let key = d.intent_key("t1", "8f0c1c1e-intent", KeyLength::OPEN_FINANCE_BRASIL).unwrap();
    /// assert_eq!(key.as_str().len(), 40);
    /// ```
    ///
    /// # Errors
    /// `invalid-tenant-id` or `invalid-intent-id` when either is empty.
    pub fn intent_key(&self, tenant_id: &str, intent_id: &str, length: KeyLength) -> Result<Key> {
        let material = intent_material(tenant_id, intent_id)?;
        Ok(Key::from_digest(&self.mac_of(&material), length))
    }

    /// The fingerprint material: canonical JSON of
    /// `["intentkey/fingerprint/v1", tenant_id, action_type, body]`, where the
    /// body holds every key field normalized and every fingerprint field as JSON.
    ///
    /// # Errors
    /// As [`Deriver::material`], plus `invalid-json` for a fingerprint field
    /// holding a number beyond the double range.
    pub fn fingerprint_material(
        &self,
        tenant_id: &str,
        action_type: &str,
        payload: &Payload,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(256);
        out.push(b'[');
        write_str(&mut out, FINGERPRINT_LABEL);
        out.push(b',');
        self.write_head_inner(&mut out, tenant_id, action_type)?;
        out.push(b'{');
        self.write_body(&mut out, payload, true)?;
        out.extend_from_slice(b"}]");
        Ok(out)
    }

    /// The payload fingerprint (always 64 hex).
    ///
    /// # Errors
    /// As [`Deriver::fingerprint_material`].
    pub fn fingerprint(
        &self,
        tenant_id: &str,
        action_type: &str,
        payload: &Payload,
    ) -> Result<Fingerprint> {
        let material = self.fingerprint_material(tenant_id, action_type, payload)?;
        Ok(Fingerprint::from_digest(&self.mac_of(&material)))
    }

    pub(crate) fn mac_of(&self, material: &[u8]) -> [u8; 32] {
        self.mac.mac(material)
    }

    fn write_head(&self, out: &mut Vec<u8>, tenant_id: &str, action_type: &str) -> Result<()> {
        out.push(b'[');
        self.write_head_inner(out, tenant_id, action_type)
    }

    pub(crate) fn write_head_inner(
        &self,
        out: &mut Vec<u8>,
        tenant_id: &str,
        action_type: &str,
    ) -> Result<()> {
        check_tenant(tenant_id)?;
        self.policy.check_action_type(action_type)?;
        write_str(out, tenant_id);
        out.push(b',');
        write_str(out, action_type);
        out.push(b',');
        Ok(())
    }

    /// Writes the body members (without braces). Key fields are normalized;
    /// fingerprint fields are written only when `with_fingerprint_fields`.
    pub(crate) fn write_body(
        &self,
        out: &mut Vec<u8>,
        payload: &Payload,
        with_fingerprint_fields: bool,
    ) -> Result<()> {
        // Classify every member first, so the unclassified-fields error wins
        // over any normalizer error, as in the oracle.
        let mut stack = [None; 32];
        let mut heap = Vec::new();
        let classes: &mut [Option<(usize, FieldClass)>] = if payload.len() <= stack.len() {
            &mut stack[..payload.len()]
        } else {
            heap.resize(payload.len(), None);
            &mut heap
        };
        let mut unclassified = false;
        for (slot, (_, _, class)) in classes.iter_mut().zip(self.policy.classify(payload)) {
            *slot = class;
            unclassified |= class.is_none();
        }
        if unclassified {
            let names: Vec<&str> = payload
                .members()
                .zip(classes.iter())
                .filter_map(|((name, _), class)| class.is_none().then_some(name))
                .collect();
            return Err(unclassified_error(&names));
        }
        let mut first = true;
        // Payload members iterate in code point order, so the body is sorted.
        for ((name, value), class) in payload.members().zip(classes.iter()) {
            let Some((index, class)) = *class else {
                continue;
            };
            let write = match class {
                FieldClass::Key(_) => true,
                FieldClass::Fingerprint => with_fingerprint_fields,
                FieldClass::Ignored => false,
            };
            if !write {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(self.policy.encoded_name(index));
            match class {
                FieldClass::Key(normalizer) => {
                    // Normalized in place; escaped afterwards in the rare
                    // case that the text needs it.
                    out.push(b'"');
                    let start = out.len();
                    normalizer.write(name, value, &mut Bytes(out))?;
                    if needs_escape(&out[start..]) {
                        let written = out.split_off(start);
                        write_escaped(out, &written);
                    }
                    out.push(b'"');
                }
                _ => write_value(out, value, name)?,
            }
        }
        Ok(())
    }
}

pub(crate) fn check_tenant(tenant_id: &str) -> Result<()> {
    if tenant_id.is_empty() {
        return Err(Error::field(
            ErrorCode::InvalidTenantId,
            "tenant_id",
            "`tenant_id` is empty; every key belongs to a tenant",
        ));
    }
    Ok(())
}

fn intent_material(tenant_id: &str, intent_id: &str) -> Result<Vec<u8>> {
    check_tenant(tenant_id)?;
    if intent_id.is_empty() {
        return Err(Error::field(
            ErrorCode::InvalidIntentId,
            "intent_id",
            "`intent_id` is empty; use the id of the recorded intent",
        ));
    }
    let mut out = Vec::with_capacity(64 + tenant_id.len() + intent_id.len());
    out.push(b'[');
    write_str(&mut out, INTENT_HMAC_LABEL);
    out.push(b',');
    write_str(&mut out, tenant_id);
    out.push(b',');
    write_str(&mut out, intent_id);
    out.push(b']');
    Ok(out)
}

/// How many unclassified field names an error lists, and how many
/// characters of each: the answer stays small whatever the payload holds.
const LISTED_FIELDS: usize = 20;
const LISTED_CHARS: usize = 64;

/// `fields` (in code point order) as the error names them: the first
/// [`LISTED_FIELDS`], each cut at [`LISTED_CHARS`] characters, then a count.
fn unclassified_error(fields: &[&str]) -> Error {
    let shown: Vec<String> = fields
        .iter()
        .take(LISTED_FIELDS)
        .map(|f| {
            if f.chars().count() > LISTED_CHARS {
                format!("{}…", f.chars().take(LISTED_CHARS).collect::<String>())
            } else {
                (*f).to_owned()
            }
        })
        .collect();
    let list: Vec<String> = shown.iter().map(|f| format!("{f:?}")).collect();
    let more = fields.len().saturating_sub(LISTED_FIELDS);
    let (field, listed) = if more == 0 {
        (shown.join(","), list.join(", "))
    } else {
        (
            format!("{},…", shown.join(",")),
            format!(
                "{}, … and {more} more ({} in all)",
                list.join(", "),
                fields.len()
            ),
        )
    };
    Error::field(
        ErrorCode::UnclassifiedFields,
        field,
        format!(
            "unclassified fields: [{listed}]; classify each as key, fingerprint or ignored in the policy"
        ),
    )
}
