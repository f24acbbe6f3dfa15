//! Policies: the field classification table.
//!
//! A policy says, for every payload field, whether it is part of the intent's
//! identity (`key`, with a normalizer), compared on repeat but not identity
//! (`fingerprint`), or noise that changes per attempt (`ignored`). A field the
//! policy does not name is an error, never silently dropped.
//!
//! Policy JSON:
//!
//! ```json
//! {
//!   "version": 1,
//!   "name": "payments",
//!   "bucketSeconds": 900,
//!   "actionTypes": ["pix.send"],
//!   "keyHexLength": 40,
//!   "fields": {
//!     "amount":     {"class": "key", "normalizer": "decimal", "scale": 2, "rounding": "half-up"},
//!     "remittance": {"class": "key", "normalizer": "text"},
//!     "note":       {"class": "fingerprint"},
//!     "request_id": {"class": "ignored"}
//!   }
//! }
//! ```
//!
//! Only `version` (1) and `fields` are required. `bucketSeconds` defaults to
//! 900, `keyHexLength` to 64, and without `actionTypes` any non-empty action
//! type is accepted.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::error::{Error, ErrorCode, Result};
use crate::key::KeyLength;
use crate::normalize::Normalizer;
use crate::payload::Payload;

/// The default bucket width in seconds (15 minutes), as in the article.
pub const DEFAULT_BUCKET_SECONDS: i64 = 900;
/// The largest bucket a policy may set: one year.
pub const MAX_BUCKET_SECONDS: i64 = 31_536_000;
/// The largest decimal scale a policy may set.
pub const MAX_SCALE: u32 = 18;

/// How one payload field takes part in the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldClass {
    /// Identity: normalized and hashed into the key.
    Key(Normalizer),
    /// Not identity, but compared on repeat through the fingerprint.
    Fingerprint,
    /// Changes per attempt or is display only; never affects key or fingerprint.
    Ignored,
}

/// A validated field classification table.
///
/// ```
/// use intentkey::{FieldClass, Normalizer, Policy};
/// let policy = Policy::default();
/// assert_eq!(policy.field("amount"), Some(FieldClass::Key(Normalizer::Decimal { scale: 2 })));
/// assert_eq!(policy.field("trace_id"), Some(FieldClass::Ignored));
/// assert_eq!(policy.bucket_seconds(), 900);
///
/// let custom = Policy::from_json(r#"{"version":1,"fields":{"sku":{"class":"key","normalizer":"exact"}}}"#).unwrap();
/// assert_eq!(custom.field("sku"), Some(FieldClass::Key(Normalizer::Exact)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    name: Option<String>,
    bucket_seconds: i64,
    action_types: Option<BTreeSet<String>>,
    key_length: KeyLength,
    /// Sorted by name (code point order), unique.
    fields: Vec<(String, FieldClass)>,
    /// Each field's name as canonical JSON followed by `:`, for the material.
    encoded_names: Vec<Vec<u8>>,
}

impl Default for Policy {
    /// The article's payments table: `creditor_key` → pix-key, `amount` →
    /// decimal(2, half-up), `currency` → ISO 4217, `remittance` → text;
    /// `request_id`, `attempt`, `trace_id`, `created_at`, `user_agent` ignored.
    fn default() -> Self {
        let mut fields = BTreeMap::new();
        fields.insert("creditor_key".into(), FieldClass::Key(Normalizer::PixKey));
        fields.insert(
            "amount".into(),
            FieldClass::Key(Normalizer::Decimal { scale: 2 }),
        );
        fields.insert("currency".into(), FieldClass::Key(Normalizer::Currency));
        fields.insert("remittance".into(), FieldClass::Key(Normalizer::Text));
        for ignored in [
            "request_id",
            "attempt",
            "trace_id",
            "created_at",
            "user_agent",
        ] {
            fields.insert(ignored.into(), FieldClass::Ignored);
        }
        let fields: Vec<_> = fields.into_iter().collect();
        Policy {
            encoded_names: Policy::encode_names(&fields),
            name: Some("payments".into()),
            bucket_seconds: DEFAULT_BUCKET_SECONDS,
            action_types: None,
            key_length: KeyLength::FULL,
            fields,
        }
    }
}

impl Policy {
    /// Parses and validates a policy document.
    ///
    /// # Errors
    /// `invalid-policy`, with [`Error::field_name`] giving the dotted path of the
    /// offending entry (`""` for the document itself, `fields.amount.scale`, …).
    pub fn from_json(text: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            bad(
                "",
                format!("the policy is not valid JSON ({e}); write a JSON object"),
            )
        })?;
        Policy::from_value(&value)
    }

    /// Validates a policy already parsed as JSON.
    ///
    /// # Errors
    /// As [`Policy::from_json`].
    pub fn from_value(value: &Value) -> Result<Self> {
        let root = value
            .as_object()
            .ok_or_else(|| bad("", "the policy must be a JSON object"))?;
        allow_members(
            root,
            "",
            &[
                "version",
                "name",
                "bucketSeconds",
                "actionTypes",
                "keyHexLength",
                "fields",
            ],
        )?;

        match root.get("version") {
            Some(v) if v.as_u64() == Some(1) && v.as_str().is_none() => {}
            Some(_) => return Err(bad("version", "`version` must be 1")),
            None => return Err(bad("version", "the policy needs `\"version\": 1`")),
        }
        let name = match root.get("name") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad("name", "`name` must be a string")),
        };
        let bucket_seconds = match root.get("bucketSeconds") {
            None => DEFAULT_BUCKET_SECONDS,
            Some(v) => int_in(v, "bucketSeconds", 1, MAX_BUCKET_SECONDS)?,
        };
        let key_length = match root.get("keyHexLength") {
            None => KeyLength::FULL,
            Some(v) => {
                let n = int_in(
                    v,
                    "keyHexLength",
                    KeyLength::MIN as i64,
                    KeyLength::MAX as i64,
                )?;
                KeyLength::new(n as usize)?
            }
        };
        let action_types = match root.get("actionTypes") {
            None => None,
            Some(v) => Some(action_types(v)?),
        };
        let fields_value = root.get("fields").ok_or_else(|| {
            bad(
                "fields",
                "the policy needs a `fields` object classifying every payload field",
            )
        })?;
        let fields_obj = fields_value.as_object().ok_or_else(|| {
            bad(
                "fields",
                "`fields` must be an object of field name → classification",
            )
        })?;
        let mut fields = BTreeMap::new();
        for (field, spec) in fields_obj {
            let path = format!("fields.{field}");
            if field.is_empty() {
                return Err(bad(&path, "field names must not be empty"));
            }
            fields.insert(field.clone(), field_class(spec, &path)?);
        }
        let fields: Vec<_> = fields.into_iter().collect();
        Ok(Policy {
            encoded_names: Policy::encode_names(&fields),
            name,
            bucket_seconds,
            action_types,
            key_length,
            fields,
        })
    }

    /// The policy's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The bucket width in seconds.
    pub fn bucket_seconds(&self) -> i64 {
        self.bucket_seconds
    }

    /// The key length this policy's destination takes.
    pub fn key_length(&self) -> KeyLength {
        self.key_length
    }

    /// The same policy with another key length (for a destination's profile).
    ///
    /// ```
    /// use intentkey::{KeyLength, Policy};
    /// let p = Policy::default().with_key_length(KeyLength::OPEN_FINANCE_BRASIL);
    /// assert_eq!(p.key_length().hex_chars(), 40);
    /// ```
    #[must_use]
    pub fn with_key_length(mut self, length: KeyLength) -> Self {
        self.key_length = length;
        self
    }

    /// How `field` is classified, or `None` if the policy does not name it.
    pub fn field(&self, field: &str) -> Option<FieldClass> {
        self.fields
            .binary_search_by(|(name, _)| name.as_str().cmp(field))
            .ok()
            .map(|i| self.fields[i].1)
    }

    /// Every classified field, sorted by name.
    pub fn fields(&self) -> impl Iterator<Item = (&str, FieldClass)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Pairs each payload member with its class (`None`: unclassified), in the
    /// payload's order. Both sides are sorted by name, so one merge walk does
    /// it, without allocating.
    /// The field at `index` (in name order) as canonical JSON plus `:`.
    pub(crate) fn encoded_name(&self, index: usize) -> &[u8] {
        &self.encoded_names[index]
    }

    fn encode_names(fields: &[(String, FieldClass)]) -> Vec<Vec<u8>> {
        fields
            .iter()
            .map(|(name, _)| {
                let mut encoded = Vec::with_capacity(name.len() + 3);
                crate::canonical::write_str(&mut encoded, name);
                encoded.push(b':');
                encoded
            })
            .collect()
    }

    pub(crate) fn classify<'s, 'p>(
        &'s self,
        payload: &'p Payload,
    ) -> impl Iterator<Item = (&'p str, &'p Value, Option<(usize, FieldClass)>)> + use<'s, 'p> {
        let fields = &self.fields;
        let mut at = 0;
        payload.as_slice().iter().map(move |(name, value)| {
            let mut order = Ordering::Greater;
            while let Some((field, _)) = fields.get(at) {
                order = name_order(field, name);
                if order != Ordering::Less {
                    break;
                }
                at += 1;
            }
            let class = match fields.get(at) {
                Some((_, class)) if order == Ordering::Equal => {
                    at += 1;
                    Some((at - 1, *class))
                }
                _ => None,
            };
            (name.as_str(), value, class)
        })
    }

    /// The closed set of action types, if the policy closes it.
    pub fn action_types(&self) -> Option<impl Iterator<Item = &str>> {
        self.action_types
            .as_ref()
            .map(|s| s.iter().map(String::as_str))
    }

    /// Checks that an action type is acceptable under this policy.
    ///
    /// # Errors
    /// `invalid-action-type` when empty; `unknown-action-type` when the policy
    /// closes its action types and this is not one of them.
    pub fn check_action_type(&self, action_type: &str) -> Result<()> {
        if action_type.is_empty() {
            return Err(Error::field(
                ErrorCode::InvalidActionType,
                "action_type",
                "`action_type` is empty; name the action, e.g. \"pix.send\"",
            ));
        }
        if let Some(known) = &self.action_types {
            if !known.contains(action_type) {
                let list: Vec<String> = known.iter().map(|a| format!("{a:?}")).collect();
                return Err(Error::field(
                    ErrorCode::UnknownActionType,
                    "action_type",
                    format!(
                        "this policy accepts only the action types {}; add the action to `actionTypes` or use another policy",
                        list.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The time bucket of an epoch: `floor(epoch / bucket_seconds)`, toward −∞.
    ///
    /// ```
    /// let p = intentkey::Policy::default();
    /// assert_eq!(p.bucket(899), 0);
    /// assert_eq!(p.bucket(900), 1);
    /// assert_eq!(p.bucket(-1), -1);
    /// ```
    pub fn bucket(&self, epoch: i64) -> i64 {
        epoch.div_euclid(self.bucket_seconds)
    }
}

fn bad(path: &str, message: impl Into<String>) -> Error {
    let message = message.into();
    let message = if path.is_empty() {
        format!("policy: {message}")
    } else {
        format!("policy `{path}`: {message}")
    };
    Error::field(ErrorCode::InvalidPolicy, path, message)
}

fn join(path: &str, member: &str) -> String {
    if path.is_empty() {
        member.to_owned()
    } else {
        format!("{path}.{member}")
    }
}

fn allow_members(obj: &Map<String, Value>, path: &str, allowed: &[&str]) -> Result<()> {
    for member in obj.keys() {
        if !allowed.contains(&member.as_str()) {
            return Err(bad(
                &join(path, member),
                format!(
                    "unknown member `{member}`; allowed here: {}",
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

fn int_in(value: &Value, path: &str, min: i64, max: i64) -> Result<i64> {
    match value.as_i64() {
        Some(n)
            if (min..=max).contains(&n)
                && crate::canonical::is_integer_literal(&value.to_string()) =>
        {
            Ok(n)
        }
        _ => Err(bad(
            path,
            format!("`{path}` must be an integer from {min} to {max}"),
        )),
    }
}

fn action_types(value: &Value) -> Result<BTreeSet<String>> {
    let path = "actionTypes";
    let items = value.as_array().ok_or_else(|| {
        bad(
            path,
            "`actionTypes` must be an array of action type strings",
        )
    })?;
    if items.is_empty() {
        return Err(bad(
            path,
            "`actionTypes` is empty; list at least one action type, or leave it out to accept any",
        ));
    }
    let mut set = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}.{i}");
        match item.as_str() {
            Some(s) if !s.is_empty() => {
                if !set.insert(s.to_owned()) {
                    return Err(bad(
                        &item_path,
                        format!("action type {s:?} is listed twice"),
                    ));
                }
            }
            _ => {
                return Err(bad(
                    &item_path,
                    "each action type must be a non-empty string",
                ))
            }
        }
    }
    Ok(set)
}

fn field_class(spec: &Value, path: &str) -> Result<FieldClass> {
    let obj = spec.as_object().ok_or_else(|| {
        bad(
            path,
            "a field classification must be an object such as {\"class\": \"ignored\"}",
        )
    })?;
    let class = obj.get("class").ok_or_else(|| {
        bad(
            &join(path, "class"),
            "missing `class`: one of key, fingerprint, ignored",
        )
    })?;
    match class.as_str() {
        Some("key") => {
            let normalizer = obj.get("normalizer").ok_or_else(|| {
                bad(
                    &join(path, "normalizer"),
                    "a key field needs a `normalizer`: text, pix-key, decimal, currency, exact or integer",
                )
            })?;
            let normalizer = match normalizer.as_str() {
                Some("text") => Normalizer::Text,
                Some("pix-key") => Normalizer::PixKey,
                Some("currency") => Normalizer::Currency,
                Some("exact") => Normalizer::Exact,
                Some("integer") => Normalizer::Integer,
                Some("decimal") => {
                    allow_members(obj, path, &["class", "normalizer", "scale", "rounding"])?;
                    let scale = match obj.get("scale") {
                        None => 2,
                        Some(v) => int_in(v, &join(path, "scale"), 0, i64::from(MAX_SCALE))? as u32,
                    };
                    match obj.get("rounding") {
                        None => {}
                        Some(v) if v.as_str() == Some("half-up") => {}
                        Some(_) => {
                            return Err(bad(
                                &join(path, "rounding"),
                                "`rounding` must be \"half-up\" (half away from zero), the only rounding supported",
                            ))
                        }
                    }
                    return Ok(FieldClass::Key(Normalizer::Decimal { scale }));
                }
                _ => return Err(bad(
                    &join(path, "normalizer"),
                    "unknown normalizer; use text, pix-key, decimal, currency, exact or integer",
                )),
            };
            allow_members(obj, path, &["class", "normalizer"])?;
            Ok(FieldClass::Key(normalizer))
        }
        Some("fingerprint") => {
            allow_members(obj, path, &["class"])?;
            Ok(FieldClass::Fingerprint)
        }
        Some("ignored") => {
            allow_members(obj, path, &["class"])?;
            Ok(FieldClass::Ignored)
        }
        _ => Err(bad(
            &join(path, "class"),
            "`class` must be key, fingerprint or ignored",
        )),
    }
}

/// Two field names in code point order (`str`'s `Ord`), by their first
/// bytes when they differ there, as most names in a policy do.
fn name_order(a: &str, b: &str) -> Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}
