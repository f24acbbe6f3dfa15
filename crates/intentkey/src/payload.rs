//! The intent's payload: a JSON object whose number literals are kept as written.

use serde_json::Value;

use crate::error::{Error, ErrorCode, Result};

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
        let top: TopLevel = serde_json::from_str(text).map_err(|e| {
            Error::field(
                ErrorCode::InvalidPayload,
                "payload",
                format!("`payload` is not valid JSON ({e}); send a JSON object"),
            )
        })?;
        match top {
            TopLevel::Object(members) => Payload::from_members(members),
            TopLevel::Other(value) => Payload::from_value(value),
        }
    }

    /// Sorts members by name (code point order) and keeps the last of any
    /// repeated name, as Python's `json` does.
    fn from_members(mut members: Vec<(String, Value)>) -> Result<Self> {
        // A stable sort keeps repeated names in input order; the last one wins.
        members.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, Value)> = Vec::with_capacity(members.len());
        for member in members {
            match out.last_mut() {
                Some(last) if last.0 == member.0 => *last = member,
                _ => out.push(member),
            }
        }
        if out.iter().any(|(_, v)| depth(v) >= MAX_DEPTH) {
            return Err(too_deep());
        }
        Ok(Payload(out))
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
            other => Err(Error::field(
                ErrorCode::InvalidPayload,
                "payload",
                format!(
                    "`payload` must be a JSON object of fields, not {}",
                    crate::normalize::type_name(&other)
                ),
            )),
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

fn too_deep() -> Error {
    Error::field(
        ErrorCode::InvalidPayload,
        "payload",
        format!("`payload` is nested deeper than {MAX_DEPTH} levels; flatten it"),
    )
}

/// How serde_json (arbitrary_precision) hands a number to a visitor: as a
/// one-entry map under this key.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

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

/// Nesting depth of a value: scalars 1, containers 1 + their deepest item.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 1,
    }
}
