//! Request bodies in canonical form, by media type.
//!
//! | media type | kind | canonical form |
//! |---|---|---|
//! | `application/json`, `*/*+json` | [`BodyKind::Json`] | RFC 8785 (JCS) of the whole value |
//! | `application/x-www-form-urlencoded` | [`BodyKind::Form`] | the decoded `[name, value]` pairs, sorted by name then value, as canonical JSON |
//! | anything else, none, or an empty body | [`BodyKind::Bytes`] | the bytes as sent |
//!
//! JSON that does not parse is an `invalid-json` error, never fingerprinted
//! as bytes. A form whose percent-decoded bytes are not UTF-8 (a legacy
//! Latin-1 form, say) is fingerprinted as its bytes: decoding it would map
//! different bodies to one fingerprint.

use std::borrow::Cow;

use serde_json::Value;

use crate::canonical::write_str;
use crate::error::{Error, ErrorCode, Result};
use crate::policy::{FieldClass, Policy};

/// How a body is canonicalized, from its media type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyKind {
    /// JSON: RFC 8785 canonical form.
    Json,
    /// `application/x-www-form-urlencoded`: sorted, decoded pairs.
    Form,
    /// Any other media type: the raw bytes.
    Bytes,
}

impl BodyKind {
    /// `json`, `form` or `bytes` (as written in the fingerprint material).
    pub const fn as_str(self) -> &'static str {
        match self {
            BodyKind::Json => "json",
            BodyKind::Form => "form",
            BodyKind::Bytes => "bytes",
        }
    }

    /// The kind of a `Content-Type` value: its media type, compared
    /// case-insensitively, without parameters (`; charset=…`).
    ///
    /// ```
    /// use intentkey::http::BodyKind;
    /// assert_eq!(BodyKind::of(Some("Application/JSON; charset=utf-8")), BodyKind::Json);
    /// assert_eq!(BodyKind::of(Some("application/merge-patch+json")), BodyKind::Json);
    /// assert_eq!(BodyKind::of(Some("application/x-www-form-urlencoded")), BodyKind::Form);
    /// assert_eq!(BodyKind::of(Some("text/plain")), BodyKind::Bytes);
    /// assert_eq!(BodyKind::of(None), BodyKind::Bytes);
    /// ```
    pub fn of(content_type: Option<&str>) -> BodyKind {
        let Some(content_type) = content_type else {
            return BodyKind::Bytes;
        };
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim_matches([' ', '\t'])
            .to_ascii_lowercase();
        let Some((kind, subtype)) = essence.split_once('/') else {
            return BodyKind::Bytes;
        };
        if kind.is_empty() {
            return BodyKind::Bytes;
        }
        match (kind, subtype) {
            ("application", "json") => BodyKind::Json,
            (_, subtype) if subtype.len() > 5 && subtype.ends_with("+json") => BodyKind::Json,
            ("application", "x-www-form-urlencoded") => BodyKind::Form,
            _ => BodyKind::Bytes,
        }
    }
}

impl std::fmt::Display for BodyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A body's canonical form, by its media type. `policy`, if given, drops
/// the fields it classifies as ignored from a top-level JSON object (and
/// the form pairs so named); it refuses nothing, so fields it does not name
/// stay.
///
/// An empty body is zero bytes whatever its media type: clients send
/// `Content-Type: application/json` on bodiless requests.
///
/// ```
/// use intentkey::http::{canonical_body, BodyKind};
/// use intentkey::Policy;
///
/// let (kind, form) = canonical_body(Some("application/x-www-form-urlencoded"), b"b=2&a=x+y&a=%C3%A9", None)?;
/// assert_eq!(kind, BodyKind::Form);
/// assert_eq!(std::str::from_utf8(&form).unwrap(), r#"[["a","x y"],["a","é"],["b","2"]]"#);
///
/// let policy = Policy::default(); // request_id, trace_id, … are ignored
/// let (_, json) = canonical_body(Some("application/json"), br#"{"sku":"A1","qty":2.0,"request_id":"r-1"}"#, Some(&policy))?;
/// assert_eq!(&*json, br#"{"qty":2,"sku":"A1"}"#);
///
/// let err = canonical_body(Some("application/json"), b"{oops", None).unwrap_err();
/// assert_eq!(err.code().as_str(), "invalid-json");
/// # Ok::<(), intentkey::Error>(())
/// ```
///
/// # Errors
/// `invalid-json` when a JSON body does not parse (or is not UTF-8, or
/// nests deeper than 128 levels), or holds a number beyond the double range.
pub fn canonical_body<'a>(
    content_type: Option<&str>,
    body: &'a [u8],
    policy: Option<&Policy>,
) -> Result<(BodyKind, Cow<'a, [u8]>)> {
    if body.is_empty() {
        return Ok((BodyKind::Bytes, Cow::Borrowed(body)));
    }
    match BodyKind::of(content_type) {
        BodyKind::Json => Ok((BodyKind::Json, Cow::Owned(json(body, policy)?))),
        BodyKind::Form => Ok(match form(body, policy) {
            Some(pairs) => (BodyKind::Form, Cow::Owned(pairs)),
            None => (BodyKind::Bytes, Cow::Borrowed(body)),
        }),
        BodyKind::Bytes => Ok((BodyKind::Bytes, Cow::Borrowed(body))),
    }
}

/// The RFC 8785 (JCS) canonical form of a JSON text: members sorted by
/// their UTF-16 code units, numbers as ECMAScript prints the double they
/// parse to (`1.0` → `1`, `1e2` → `100`, `-0` → `0`, integers beyond 2^53
/// rounded), strings with only the escapes JSON requires.
///
/// ```
/// use intentkey::http::canonical_json;
/// let canonical = canonical_json(br#"{"b": [1.0, 1e2, -0], "a": "\u00e9"}"#)?;
/// assert_eq!(String::from_utf8(canonical).unwrap(), r#"{"a":"é","b":[1,100,0]}"#);
/// assert_eq!(canonical_json(b"1e400").unwrap_err().code().as_str(), "invalid-json");
/// # Ok::<(), intentkey::Error>(())
/// ```
///
/// # Errors
/// As [`canonical_body`] for a JSON body.
pub fn canonical_json(text: &[u8]) -> Result<Vec<u8>> {
    json(text, None)
}

fn json(text: &[u8], policy: Option<&Policy>) -> Result<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(text).map_err(|e| {
        Error::field(
            ErrorCode::InvalidJson,
            "body",
            format!(
                "the request body is not valid JSON ({e}); send UTF-8 JSON, or another Content-Type"
            ),
        )
    })?;
    if let (Some(policy), Value::Object(members)) = (policy, &mut value) {
        members.retain(|name, _| policy.field(name) != Some(FieldClass::Ignored));
    }
    let mut out = Vec::with_capacity(text.len());
    super::jcs::write_value(&mut out, &value).map_err(|_| {
        Error::field(
            ErrorCode::InvalidJson,
            "body",
            "the request body holds a number beyond the double range, which RFC 8785 (I-JSON) cannot represent; send it as a string",
        )
    })?;
    Ok(out)
}

/// The sorted `[name, value]` pairs of a form as canonical JSON, or `None`
/// when its percent-decoded bytes are not UTF-8.
fn form(body: &[u8], policy: Option<&Policy>) -> Option<Vec<u8>> {
    // Decoding `+` and `%XX` never moves a multi-byte sequence across `&`
    // or `=`, so the whole body decodes to UTF-8 iff every name and value
    // does; `form_urlencoded` would replace bad bytes with U+FFFD instead.
    percent_encoding::percent_decode(body).decode_utf8().ok()?;
    let mut pairs: Vec<(Cow<'_, str>, Cow<'_, str>)> = form_urlencoded::parse(body)
        .filter(|(name, _)| {
            policy.is_none_or(|policy| policy.field(name) != Some(FieldClass::Ignored))
        })
        .collect();
    pairs.sort();
    let mut out = Vec::with_capacity(body.len() + 8 * pairs.len() + 2);
    out.push(b'[');
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        write_str(&mut out, name);
        out.push(b',');
        write_str(&mut out, value);
        out.push(b']');
    }
    out.push(b']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types() {
        for (content_type, kind) in [
            ("application/json", BodyKind::Json),
            (" application/json ;charset=UTF-8", BodyKind::Json),
            ("application/problem+json", BodyKind::Json),
            ("application/vnd.api+json", BodyKind::Json),
            ("text/json", BodyKind::Bytes),
            ("application/+json", BodyKind::Bytes),
            ("application/jsonx", BodyKind::Bytes),
            (
                "application/x-www-form-urlencoded; charset=utf-8",
                BodyKind::Form,
            ),
            ("multipart/form-data; boundary=x", BodyKind::Bytes),
            ("json", BodyKind::Bytes),
            ("", BodyKind::Bytes),
        ] {
            assert_eq!(BodyKind::of(Some(content_type)), kind, "{content_type:?}");
        }
    }

    #[test]
    fn forms_sort_by_name_then_value_and_keep_empty_values() {
        assert_eq!(
            form(b"z=1&a=2&a=1&&b&c=", None).unwrap(),
            br#"[["a","1"],["a","2"],["b",""],["c",""],["z","1"]]"#
        );
        // Names and values are compared as decoded text.
        assert_eq!(
            form(b"%61=1&a=0", None).unwrap(),
            form(b"a=0&a=1", None).unwrap()
        );
    }

    #[test]
    fn non_utf8_forms_are_not_decoded() {
        assert_eq!(form(b"name=%E9", None), None);
        assert_eq!(form(b"name=\xe9", None), None);
        let (kind, bytes) =
            canonical_body(Some("application/x-www-form-urlencoded"), b"a=%E9", None).unwrap();
        assert_eq!((kind, &*bytes), (BodyKind::Bytes, &b"a=%E9"[..]));
    }

    #[test]
    fn only_top_level_ignored_fields_are_dropped() {
        let policy = Policy::default();
        assert_eq!(
            json(
                br#"{"trace_id":1,"nested":{"trace_id":2},"amount":"1"}"#,
                Some(&policy)
            )
            .unwrap(),
            br#"{"amount":"1","nested":{"trace_id":2}}"#
        );
        assert_eq!(
            json(br#"[{"trace_id":1}]"#, Some(&policy)).unwrap(),
            br#"[{"trace_id":1}]"#
        );
    }
}
