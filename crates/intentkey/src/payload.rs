//! The intent's payload: a JSON object whose number literals are kept as written.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::error::{Error, ErrorCode, Result};
use crate::policy::{FieldClass, Policy};
use crate::reader::{Name, SkipVisitor, Skipped, NUMBER_TOKEN};

/// The deepest nesting a payload may have (objects and arrays).
pub const MAX_DEPTH: usize = 100;

/// A parsed payload: a JSON object, number literals preserved exactly
/// (`1.0050`, `123456789012345678901234567890`), members sorted by name.
/// A repeated member name keeps its last value, as Python's `json` does.
///
/// ```
/// use intentkey::Payload;
/// let payload = Payload::from_json(r#"{"amount": 10.50, "currency": "BRL"}"#).unwrap();
/// assert_eq!(payload.len(), 2);
/// assert_eq!(Payload::from_json("[1]").unwrap_err().code().as_str(), "invalid-payload");
/// for text in ["5", "-5", "1.5", "1e400", "123456789012345678901234567890"] {
///     assert_eq!(Payload::from_json(text).unwrap_err().message(), "`payload` must be a JSON object of fields, not a number");
/// }
/// assert_eq!(Payload::from_json("null").unwrap_err().code().as_str(), "invalid-payload");
/// let repeated = Payload::from_json(r#"{"b":1,"a":2,"b":3}"#).unwrap();
/// assert_eq!(repeated.members().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(), ["a=2", "b=3"]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload(Vec<(String, Value)>);

impl Payload {
    /// Parses payload JSON text.
    ///
    /// # Errors
    /// `invalid-payload` when the text is not JSON, not an object, or nested
    /// deeper than [`MAX_DEPTH`].
    pub fn from_json(text: &str) -> Result<Self> {
        let top: TopLevel = serde_json::from_str(text).map_err(not_json)?;
        match top {
            TopLevel::Object(members) => Payload::from_members(members),
            TopLevel::Other(value) => Payload::from_value(value),
        }
    }

    /// Reads payload JSON text for a `fields` key under `policy`: the key
    /// fields with their values, and the names of unclassified fields; the
    /// values of fingerprint and ignored fields are read (checked as
    /// [`Payload::from_json`] checks them) and dropped. Its key, or its
    /// error, is the same as from [`Payload::from_json`]; it is not for
    /// fingerprints.
    ///
    /// ```
    /// use intentkey::{Deriver, Intent, Payload, Policy, Secret};
    /// let text = r#"{"amount": "10.50", "currency": "BRL", "trace_id": "00-4bf92f35", "creditor_key": "a@b.c"}"#;
    /// let policy = Policy::default();
    /// let read = Payload::from_json_for_key(text, &policy).unwrap();
    /// assert_eq!(read.get("trace_id"), None);
    /// let deriver = Deriver::new(&Secret::new([7; 32]).unwrap(), policy);
    /// let key = |payload: &Payload| {
    ///     deriver.derive(&Intent { tenant_id: "t1", action_type: "pix.send", payload, intent_epoch: 0 }).unwrap()
    /// };
    /// assert_eq!(key(&read), key(&Payload::from_json(text).unwrap()));
    /// ```
    ///
    /// # Errors
    /// As [`Payload::from_json`].
    pub fn from_json_for_key(text: &str, policy: &Policy) -> Result<Self> {
        let mut reader = serde_json::Deserializer::from_str(text);
        let read = KeyMembers(policy)
            .deserialize(&mut reader)
            .and_then(|payload| reader.end().map(|()| payload));
        read.map_err(not_json)?
    }

    /// Sorts members by name (code point order) and keeps the last of any
    /// repeated name, as Python's `json` does.
    fn from_members(mut members: Vec<(String, Value)>) -> Result<Self> {
        // A stable sort keeps repeated names in input order; the last one wins.
        members.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept = 0;
        for i in 0..members.len() {
            if kept > 0 && members[kept - 1].0 == members[i].0 {
                members.swap(kept - 1, i);
            } else {
                members.swap(kept, i);
                kept += 1;
            }
        }
        members.truncate(kept);
        if members.iter().any(|(_, v)| depth(v) >= MAX_DEPTH) {
            return Err(too_deep());
        }
        Ok(Payload(members))
    }

    /// Wraps an already parsed JSON value.
    ///
    /// # Errors
    /// `invalid-payload` when it is not an object or is nested too deeply.
    pub fn from_value(value: Value) -> Result<Self> {
        match value {
            Value::Object(map) => {
                if map.values().any(|v| depth(v) >= MAX_DEPTH) {
                    return Err(too_deep());
                }
                // The map iterates in code point order: the members stay sorted.
                Ok(Payload(map.into_iter().collect()))
            }
            other => Err(not_an_object(crate::normalize::type_name(&other))),
        }
    }

    /// The members, sorted by name.
    pub fn members(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// One member's value.
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.0
            .binary_search_by(|(name, _)| name.as_str().cmp(field))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the payload has no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The members as a slice sorted by name.
    pub fn as_slice(&self) -> &[(String, Value)] {
        &self.0
    }
}

fn not_json(e: serde_json::Error) -> Error {
    Error::field(
        ErrorCode::InvalidPayload,
        "payload",
        format!("`payload` is not valid JSON ({e}); send a JSON object"),
    )
}

fn not_an_object(type_name: &str) -> Error {
    Error::field(
        ErrorCode::InvalidPayload,
        "payload",
        format!("`payload` must be a JSON object of fields, not {type_name}"),
    )
}

fn too_deep() -> Error {
    Error::field(
        ErrorCode::InvalidPayload,
        "payload",
        format!("`payload` is nested deeper than {MAX_DEPTH} levels; flatten it"),
    )
}

/// The payload text's top level: an object read straight into a list of
/// members (no intermediate map), or any other value (refused later).
enum TopLevel {
    Object(Vec<(String, Value)>),
    Other(Value),
}

impl<'de> serde::Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = TopLevel;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<TopLevel, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(name) = map.next_key::<String>()? {
                    if members.is_empty() && name == NUMBER_TOKEN {
                        // serde_json's arbitrary-precision number, not an object.
                        let text: String = map.next_value()?;
                        let number = text.parse().map_err(serde::de::Error::custom)?;
                        return Ok(TopLevel::Other(Value::Number(number)));
                    }
                    members.push((name, map.next_value::<Value>()?));
                }
                Ok(TopLevel::Object(members))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::from(v)))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::from(v)))
            }
            fn visit_bool<E>(self, v: bool) -> std::result::Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::Bool(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::String(v.to_owned())))
            }
            fn visit_unit<E>(self) -> std::result::Result<TopLevel, E> {
                Ok(TopLevel::Other(Value::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<TopLevel, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Value>()? {
                    items.push(item);
                }
                Ok(TopLevel::Other(Value::Array(items)))
            }
        }
        // Anything not an object is refused by `Payload::from_value`, which
        // names its type.
        deserializer.deserialize_any(Visitor)
    }
}

/// Reads a payload from JSON text in one pass, keeping only the members a
/// `fields` key reads under the policy: key fields with their values, and
/// unclassified fields by name (their values are never read; the key refuses
/// them by name). Fingerprint and ignored fields are read, measured and
/// dropped. The payload it makes derives the same key, and fails with the
/// same error, as [`Payload::from_json`] of the same text; it is not for
/// fingerprints.
///
/// Syntax errors are the parser's (the whole text is read); the payload's
/// own errors (not an object, nested too deeply) are the inner `Result`.
pub(crate) struct KeyMembers<'p>(pub(crate) &'p Policy);

impl<'de> DeserializeSeed<'de> for KeyMembers<'_> {
    type Value = Result<Payload>;

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyMembers<'_> {
    type Value = Result<Payload>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut kept: Vec<(String, Value)> = Vec::with_capacity(8);
        // The names of dropped members whose value is nested too deeply. A
        // repeated name keeps its last value, so a later copy of the name
        // clears it. (A set: any number of such names costs linear time.)
        let mut too_deep_names: HashSet<Cow<'de, str>> = HashSet::new();
        let mut first = true;
        while let Some(Name(name)) = map.next_key()? {
            if first && name == NUMBER_TOKEN {
                // serde_json's arbitrary-precision number, not an object.
                map.next_value::<IgnoredAny>()?;
                return Ok(Err(not_an_object("a number")));
            }
            first = false;
            let class = self.0.field(&name);
            if let Some(FieldClass::Key(_)) = class {
                let value: Value = map.next_value()?;
                kept.push((name.into_owned(), value));
                continue;
            }
            let Skipped(depth) = map.next_value()?;
            if !too_deep_names.is_empty() {
                too_deep_names.remove(name.as_ref());
            }
            if class.is_none() {
                kept.push((name.clone().into_owned(), Value::Null));
            }
            if depth >= MAX_DEPTH {
                too_deep_names.insert(name);
            }
        }
        if !too_deep_names.is_empty() {
            return Ok(Err(too_deep()));
        }
        Ok(Payload::from_members(kept))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        SkipVisitor.visit_seq(seq)?;
        Ok(Err(not_an_object("an array")))
    }

    fn visit_str<E>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(Err(not_an_object("a string")))
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(Err(not_an_object("a boolean")))
    }

    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(Err(not_an_object("null")))
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(Err(not_an_object("a number")))
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(Err(not_an_object("a number")))
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(Err(not_an_object("a number")))
    }
}

/// Nesting depth of a value: scalars 1, containers 1 + their deepest item.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 1,
    }
}
