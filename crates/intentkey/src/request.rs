//! The JSON-lines batch contract (`intentkey derive --jsonl`).
//!
//! Each input line is one JSON object in the oracle's input format:
//! `id`, `secret_hex`, `tenant_id`, `action_type`, `payload`, `intent_epoch`
//! (unknown extra members are ignored). Each answer is one line:
//! `{"id":…,"key":"<hex>"}` or `{"id":…,"error":{"code":"…","message":"…"}}`.
//! Lines are split on `\n` only; U+2028 and U+001C are data.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::canonical::is_integer_literal;
use crate::deriver::{Deriver, Intent};
use crate::error::{Error, ErrorCode, Result};
use crate::key::Key;
use crate::payload::{KeyMembers, Payload};
use crate::policy::Policy;
use crate::reader::{Name, SkipVisitor, Skipped, StringOrOther, NUMBER_TOKEN};
use crate::secret::Secret;

/// Answers request lines under one policy, reusing the keyed HMAC while
/// consecutive lines share a secret.
///
/// It caches one secret (as the line's hex, and as a keyed [`Deriver`]):
/// `Debug` shows only how many secrets are cached, and the cached hex is
/// wiped when it is replaced or the answerer is dropped.
///
/// ```
/// use intentkey::{Policy, RequestAnswerer};
/// let mut answerer = RequestAnswerer::new(Policy::default());
/// let line = format!(
///     r#"{{"id":7,"secret_hex":"{}","tenant_id":"t1","action_type":"pix.send","payload":{{"amount":1}},"intent_epoch":0}}"#,
///     "00".repeat(32)
/// );
/// let answer = answerer.answer_line(&line);
/// assert!(answer.starts_with(r#"{"id":7,"key":""#));
/// assert_eq!(
///     answerer.answer_line("not json"),
///     r#"{"id":null,"error":{"code":"invalid-json","message":"the line is not valid JSON (expected ident at line 1 column 2); send one JSON object per line"}}"#
/// );
/// ```
pub struct RequestAnswerer {
    policy: Policy,
    cached: Option<Cached>,
}

/// The secret of the last line that reached derivation, and its keyed HMAC.
struct Cached {
    /// The line's `secret_hex`, as sent (wiped on drop).
    secret_hex: Zeroizing<String>,
    deriver: Deriver,
}

impl fmt::Debug for RequestAnswerer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestAnswerer")
            .field("policy", &self.policy)
            .field("cached_secrets", &usize::from(self.cached.is_some()))
            .finish()
    }
}

impl fmt::Debug for Cached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Cached(secret redacted)")
    }
}

/// One parsed request line: its `id` to echo and its outcome.
#[derive(Debug)]
pub struct Answer {
    /// The line's `id` member (`null` when absent or unreadable).
    pub id: Value,
    /// The key, or why there is none.
    pub outcome: Result<Key>,
}

impl Answer {
    /// The answer as one JSON line (without the trailing newline).
    pub fn to_line(&self) -> String {
        let id = serde_json::to_string(&self.id).unwrap_or_else(|_| "null".to_owned());
        match &self.outcome {
            Ok(key) => {
                let mut line = String::with_capacity(id.len() + key.as_str().len() + 16);
                line.push_str(r#"{"id":"#);
                line.push_str(&id);
                line.push_str(r#","key":""#);
                line.push_str(key.as_str());
                line.push_str(r#""}"#);
                line
            }
            Err(e) => {
                let mut error = Map::new();
                error.insert("code".into(), Value::String(e.code().as_str().into()));
                error.insert("message".into(), Value::String(e.message().into()));
                let error = serde_json::to_string(&error).unwrap_or_default();
                format!(r#"{{"id":{id},"error":{error}}}"#)
            }
        }
    }
}

impl RequestAnswerer {
    /// Answers lines under `policy`.
    pub fn new(policy: Policy) -> Self {
        RequestAnswerer {
            policy,
            cached: None,
        }
    }

    /// Answers one line as a JSON line.
    pub fn answer_line(&mut self, line: &str) -> String {
        self.answer(line).to_line()
    }

    /// Answers one line.
    ///
    /// The line is read in one pass: its own members as they come, and of
    /// the payload only what the key reads: key fields with their values and
    /// unclassified fields by name (fingerprint and ignored members are read,
    /// checked for depth and dropped).
    pub fn answer(&mut self, line: &str) -> Answer {
        let mut reader = serde_json::Deserializer::from_str(line);
        let read = LineSeed(&self.policy)
            .deserialize(&mut reader)
            .and_then(|members| reader.end().map(|()| members));
        match read {
            Ok(Some(mut members)) => {
                let id = members.id.take().unwrap_or(Value::Null);
                let outcome = self.derive(members);
                Answer { id, outcome }
            }
            Ok(None) => Answer {
                id: Value::Null,
                outcome: Err(Error::new(
                    ErrorCode::InvalidJson,
                    "the line is JSON but not an object; send one JSON object per line",
                )),
            },
            Err(e) => Answer {
                id: Value::Null,
                outcome: Err(Error::new(
                    ErrorCode::InvalidJson,
                    format!("the line is not valid JSON ({e}); send one JSON object per line"),
                )),
            },
        }
    }

    fn derive(&mut self, members: LineMembers<'_>) -> Result<Key> {
        let Some(secret_hex) = members.secret_hex else {
            return Err(Error::field(
                ErrorCode::InvalidSecret,
                "secret_hex",
                "`secret_hex` is missing or not a string; give the secret as hex",
            ));
        };
        // An escaped secret was copied out of the line: that copy is wiped.
        let secret_hex = match secret_hex {
            Cow::Borrowed(text) => SecretText::Line(text),
            Cow::Owned(text) => SecretText::Copy(Zeroizing::new(text)),
        };
        let tenant_id = string_member(members.tenant_id, "tenant_id", ErrorCode::InvalidTenantId)?;
        let action_type = string_member(
            members.action_type,
            "action_type",
            ErrorCode::InvalidActionType,
        )?;
        let intent_epoch = epoch(members.intent_epoch.as_ref())?;
        let payload = match members.payload {
            Some(payload) => payload?,
            None => {
                return Err(Error::field(
                    ErrorCode::InvalidPayload,
                    "payload",
                    "`payload` is missing; send the request body as a JSON object",
                ))
            }
        };
        let deriver = self.deriver_for(secret_hex.as_str())?;
        deriver.derive(&Intent {
            tenant_id: &tenant_id,
            action_type: &action_type,
            payload: &payload,
            intent_epoch,
        })
    }

    fn deriver_for(&mut self, secret_hex: &str) -> Result<&Deriver> {
        // Compared in constant time: the cached secret may be another tenant's.
        let hit = matches!(
            &self.cached,
            Some(cached) if bool::from(cached.secret_hex.as_bytes().ct_eq(secret_hex.as_bytes()))
        );
        if !hit {
            let secret = Secret::from_hex(secret_hex)?;
            // The entry replaced here wipes its hex and its keyed HMAC.
            self.cached = Some(Cached {
                secret_hex: Zeroizing::new(secret_hex.to_owned()),
                deriver: Deriver::new(&secret, self.policy.clone()),
            });
        }
        match &self.cached {
            Some(cached) => Ok(&cached.deriver),
            None => Err(Error::new(ErrorCode::InvalidSecret, "no secret")),
        }
    }
}

/// A line's `secret_hex`: borrowed from the line, or copied (when it had
/// escapes) into a buffer that is wiped on drop.
enum SecretText<'a> {
    Line(&'a str),
    Copy(Zeroizing<String>),
}

impl SecretText<'_> {
    fn as_str(&self) -> &str {
        match self {
            SecretText::Line(text) => text,
            SecretText::Copy(text) => text,
        }
    }
}

/// The members of a request line that answering reads; every other member
/// is read and dropped. A repeated name keeps its last value, as Python's
/// `json` does.
#[derive(Default)]
struct LineMembers<'de> {
    id: Option<Value>,
    /// `None`: missing, or not a string.
    secret_hex: Option<Cow<'de, str>>,
    tenant_id: Option<Cow<'de, str>>,
    action_type: Option<Cow<'de, str>>,
    intent_epoch: Option<Value>,
    /// `None`: missing; the inner error: the payload is not an object of
    /// fields.
    payload: Option<Result<Payload>>,
}

/// Reads a line under a policy: `None` when it is JSON but not an object.
struct LineSeed<'p>(&'p Policy);

impl<'de> DeserializeSeed<'de> for LineSeed<'_> {
    type Value = Option<LineMembers<'de>>;

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = Option<LineMembers<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut members = LineMembers::default();
        let mut first = true;
        while let Some(Name(name)) = map.next_key()? {
            if first && name == NUMBER_TOKEN {
                // serde_json's arbitrary-precision number, not an object.
                map.next_value::<IgnoredAny>()?;
                return Ok(None);
            }
            first = false;
            match name.as_ref() {
                "id" => members.id = Some(map.next_value()?),
                "secret_hex" => members.secret_hex = map.next_value::<StringOrOther<'de>>()?.0,
                "tenant_id" => members.tenant_id = map.next_value::<StringOrOther<'de>>()?.0,
                "action_type" => members.action_type = map.next_value::<StringOrOther<'de>>()?.0,
                "intent_epoch" => members.intent_epoch = Some(map.next_value()?),
                "payload" => members.payload = Some(map.next_value_seed(KeyMembers(self.0))?),
                _ => {
                    map.next_value::<Skipped>()?;
                }
            }
        }
        Ok(Some(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        SkipVisitor.visit_seq(seq)?;
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
}

fn string_member<'a>(
    value: Option<Cow<'a, str>>,
    name: &str,
    code: ErrorCode,
) -> Result<Cow<'a, str>> {
    match value {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(Error::field(code, name, format!("`{name}` is empty"))),
        None => Err(Error::field(
            code,
            name,
            format!("`{name}` is missing or not a string; send a non-empty string"),
        )),
    }
}

/// The answer line for an input line that is not UTF-8 (it never reaches
/// [`RequestAnswerer`]): every host answers such a line with this text.
///
/// ```
/// assert!(intentkey::request::unreadable_line_answer().starts_with(r#"{"id":null,"error":{"code":"invalid-json""#));
/// ```
pub fn unreadable_line_answer() -> String {
    Answer {
        id: Value::Null,
        outcome: Err(Error::new(
            ErrorCode::InvalidJson,
            "the line is not UTF-8; send UTF-8 JSON",
        )),
    }
    .to_line()
}

/// Reads an intent epoch from JSON: an integer literal within the signed
/// 64-bit range.
///
/// ```
/// use serde_json::json;
/// assert_eq!(intentkey::request::epoch(Some(&json!(-901))).unwrap(), -901);
/// assert!(intentkey::request::epoch(Some(&json!(1.5))).is_err());
/// ```
///
/// # Errors
/// `invalid-epoch` for anything else (floats, strings, out of range, missing).
pub fn epoch(value: Option<&Value>) -> Result<i64> {
    let parsed = match value {
        Some(Value::Number(n)) if is_integer_literal(n.as_str()) => n.as_str().parse::<i64>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        Error::field(
            ErrorCode::InvalidEpoch,
            "intent_epoch",
            "`intent_epoch` must be an integer count of seconds (from the intent record) within the signed 64-bit range",
        )
    })
}
