//! RFC 8785 (JCS) output of a parsed JSON value, written in one pass.
//!
//! The rules, from the RFC: members sorted by their names' UTF-16 code
//! units; numbers as ECMAScript prints the double the literal parses to
//! (`ryu-js`, the crate made for that format); strings with only the escapes
//! JSON requires, which are exactly the key material's. The walk is the key
//! material's too ([`write_form`]). The output equals
//! `serde_json_canonicalizer::to_vec` of the same value (a property test
//! below holds the two together), without its per-member buffers, boxed
//! writers and re-parsed names.

use std::cmp::Ordering;

use serde_json::{Number, Value};

use crate::canonical::{write_form, Form};

/// A number of the value is beyond the double range (`1e400`), which
/// RFC 8785 (I-JSON) cannot represent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfRange;

/// Appends the canonical form of `value` to `out`.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), OutOfRange> {
    write_form(out, value, &Jcs)
}

/// RFC 8785's choices in the shared walk.
struct Jcs;

impl Form for Jcs {
    type Error = OutOfRange;

    // `as_f64` parses the literal (the workspace keeps numbers with
    // arbitrary precision) and is `None` for one that is not finite.
    fn number(&self, out: &mut Vec<u8>, n: &Number) -> Result<(), OutOfRange> {
        let double = n.as_f64().ok_or(OutOfRange)?;
        out.extend_from_slice(ryu_js::Buffer::new().format_finite(double).as_bytes());
        Ok(())
    }

    fn order(a: &str, b: &str) -> Ordering {
        utf16_order(a, b)
    }
}

/// The order of two names by their UTF-16 code units. Below U+E000 that is
/// the order of their UTF-8 bytes (code point order); a character at or
/// above it (UTF-8 lead byte 0xEE and up) can be where the two orders part,
/// as a surrogate pair sorts before U+E000..U+FFFF.
fn utf16_order(a: &str, b: &str) -> Ordering {
    let high = |s: &str| s.bytes().any(|byte| byte >= 0xEE);
    if high(a) || high(b) {
        a.encode_utf16().cmp(b.encode_utf16())
    } else {
        a.as_bytes().cmp(b.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn jcs(value: &Value) -> Result<Vec<u8>, OutOfRange> {
        let mut out = Vec::new();
        write_value(&mut out, value).map(|()| out)
    }

    #[test]
    fn orders_by_utf16_code_units() {
        // U+1F600 is a surrogate pair (0xD83D …): before U+E000 and U+FFFD in UTF-16,
        // after them in code point order.
        let value: Value =
            serde_json::from_str(r#"{"\ue000":1,"😀":2,"\ufffd":3,"a":4,"é":5}"#).unwrap();
        assert_eq!(
            String::from_utf8(jcs(&value).unwrap()).unwrap(),
            "{\"a\":4,\"é\":5,\"😀\":2,\"\u{e000}\":1,\"\u{fffd}\":3}"
        );
        assert_eq!(utf16_order("😀", "\u{e000}"), Ordering::Less);
        assert_eq!(utf16_order("b", "a"), Ordering::Greater);
    }

    #[test]
    fn numbers_as_ecmascript_prints_them() {
        let value: Value =
            serde_json::from_str("[1.0,1e2,-0,0.1,1e21,1e-7,9007199254740993,-1.5e-300]").unwrap();
        assert_eq!(
            String::from_utf8(jcs(&value).unwrap()).unwrap(),
            "[1,100,0,0.1,1e+21,1e-7,9007199254740992,-1.5e-300]"
        );
        let huge: Value = serde_json::from_str("{\"a\":[1e400]}").unwrap();
        assert_eq!(jcs(&huge), Err(OutOfRange));
    }

    fn json() -> impl Strategy<Value = Value> {
        let name = prop_oneof![
            "[a-c]{0,3}",
            "[\\u{0}-\\u{7f}]{0,4}",
            "[\\u{d7f0}-\\u{d7ff}\\u{e000}-\\u{e010}\\u{fff0}-\\u{fffd}\\u{10000}-\\u{10010}\\u{1f600}]{0,3}",
            any::<String>(),
        ];
        let number = prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number.prop_map(|text| serde_json::from_str(&text).unwrap_or(Value::Null)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((name.clone(), inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// The same bytes as `serde_json_canonicalizer`, or the same refusal.
        #[test]
        fn equals_serde_json_canonicalizer(value in json()) {
            let ours = jcs(&value).ok();
            let theirs = serde_json_canonicalizer::to_vec(&value).ok();
            prop_assert_eq!(ours, theirs);
        }
    }
}
