//! The JSON-lines batch contract (`intentkey derive --jsonl`).
//!
//! Each input line is one JSON object in the oracle's input format:
//! `id`, `secret_hex`, `tenant_id`, `action_type`, `payload`, `intent_epoch`
//! (unknown extra members are ignored). Each answer is one line:
//! `{"id":…,"key":"<hex>"}` or `{"id":…,"error":{"code":"…","message":"…"}}`.
//! Lines are split on `\n` only; U+2028 and U+001C are data.

use std::fmt;

use serde_json::{Map, Value};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::canonical::is_integer_literal;
use crate::deriver::{Deriver, Intent};
use crate::error::{Error, ErrorCode, Result};
use crate::key::Key;
use crate::payload::Payload;
use crate::policy::Policy;
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
            Ok(key) => format!(r#"{{"id":{id},"key":"{key}"}}"#),
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
    pub fn answer(&mut self, line: &str) -> Answer {
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                return Answer {
                    id: Value::Null,
                    outcome: Err(Error::new(
                        ErrorCode::InvalidJson,
                        format!("the line is not valid JSON ({e}); send one JSON object per line"),
                    )),
                }
            }
        };
        let Value::Object(mut members) = value else {
            return Answer {
                id: Value::Null,
                outcome: Err(Error::new(
                    ErrorCode::InvalidJson,
                    "the line is JSON but not an object; send one JSON object per line",
                )),
            };
        };
        let id = members.remove("id").unwrap_or(Value::Null);
        let outcome = self.derive(members);
        Answer { id, outcome }
    }

    fn derive(&mut self, mut members: Map<String, Value>) -> Result<Key> {
        let payload_value = members.remove("payload");
        // Taken out of the line's members, so this copy is wiped after use.
        let secret_hex = match members.remove("secret_hex") {
            Some(Value::String(s)) => Zeroizing::new(s),
            _ => {
                return Err(Error::field(
                    ErrorCode::InvalidSecret,
                    "secret_hex",
                    "`secret_hex` is missing or not a string; give the secret as hex",
                ))
            }
        };
        let tenant_id = string_member(&members, "tenant_id", ErrorCode::InvalidTenantId)?;
        let action_type = string_member(&members, "action_type", ErrorCode::InvalidActionType)?;
        let intent_epoch = epoch(members.get("intent_epoch"))?;
        let payload = match payload_value {
            Some(v) => Payload::from_value(v)?,
            None => {
                return Err(Error::field(
                    ErrorCode::InvalidPayload,
                    "payload",
                    "`payload` is missing; send the request body as a JSON object",
                ))
            }
        };
        let deriver = self.deriver_for(secret_hex)?;
        deriver.derive(&Intent {
            tenant_id: &tenant_id,
            action_type: &action_type,
            payload: &payload,
            intent_epoch,
        })
    }

    fn deriver_for(&mut self, secret_hex: Zeroizing<String>) -> Result<&Deriver> {
        // Compared in constant time: the cached secret may be another tenant's.
        let hit = matches!(
            &self.cached,
            Some(cached) if bool::from(cached.secret_hex.as_bytes().ct_eq(secret_hex.as_bytes()))
        );
        if !hit {
            let secret = Secret::from_hex(&secret_hex)?;
            // The entry replaced here wipes its hex and its keyed HMAC.
            self.cached = Some(Cached {
                secret_hex,
                deriver: Deriver::new(&secret, self.policy.clone()),
            });
        }
        match &self.cached {
            Some(cached) => Ok(&cached.deriver),
            None => Err(Error::new(ErrorCode::InvalidSecret, "no secret")),
        }
    }
}

fn string_member(members: &Map<String, Value>, name: &str, code: ErrorCode) -> Result<String> {
    match members.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(Error::field(code, name, format!("`{name}` is empty"))),
        _ => Err(Error::field(
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
