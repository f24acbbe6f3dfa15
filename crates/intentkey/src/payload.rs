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
        let value: Value = serde_json::from_str(text).map_err(|e| {
            Error::field(
                ErrorCode::InvalidPayload,
                "payload",
                format!("`payload` is not valid JSON ({e}); send a JSON object"),
            )
        })?;
        Payload::from_value(value)
    }

    /// Wraps an already parsed JSON value.
    ///
    /// # Errors
    /// `invalid-payload` when it is not an object or is nested too deeply.
    pub fn from_value(value: Value) -> Result<Self> {
        match value {
            Value::Object(map) => {
                if map.values().any(|v| depth(v) >= MAX_DEPTH) {
                    return Err(Error::field(
                        ErrorCode::InvalidPayload,
                        "payload",
                        format!("`payload` is nested deeper than {MAX_DEPTH} levels; flatten it"),
                    ));
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

/// Nesting depth of a value: scalars 1, containers 1 + their deepest item.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 1,
    }
}
