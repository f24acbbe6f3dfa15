//! Canonical JSON, byte-identical to Python's
//! `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.
//!
//! Strings escape `"` `\\` `\n` `\r` `\t` `\b` `\f` and every other C0 control as
//! `\u00XX` (lowercase hex); nothing else is escaped (U+007F and U+2028 pass
//! through). Object members are sorted by code point. Numbers print the way
//! Python prints the value its `json` module parsed: integer literals exactly,
//! other numbers as the shortest round-trip double in Python's `repr` style.

use std::cmp::Ordering;

use serde_json::{Number, Value};

use crate::error::{Error, ErrorCode, Result};

/// Bytes that a JSON string must escape: C0 controls, `"` and `\\`.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Whether any byte needs escaping, eight bytes at a time.
pub(crate) fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is zero iff the matching high bit of has_zero(x) is set.
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        // Bytes < 0x20: (x - 0x20 per byte) borrows into the high bit for those
        // bytes only when their own high bit is clear.
        let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
        if below_space
            | has_zero(x ^ (ONES * u64::from(b'"')))
            | has_zero(x ^ (ONES * u64::from(b'\\')))
            != 0
        {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| NEEDS_ESCAPE[usize::from(b)])
}

/// Appends `s` as a JSON string literal with Python's escaping.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    if needs_escape(bytes) {
        write_escaped(out, bytes);
    } else {
        out.extend_from_slice(bytes);
    }
    out.push(b'"');
}

/// Appends the inside of a JSON string literal, the UTF-8 `bytes` with
/// Python's escaping (only ASCII bytes are ever escaped).
pub(crate) fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends a JSON value canonically (sorted members, Python number style).
///
/// `field` names the payload member being written, for the error.
pub fn write_value(out: &mut Vec<u8>, value: &Value, field: &str) -> Result<()> {
    write_form(out, value, &Python { field })
}

/// What a canonical form of a parsed value decides; the walk
/// ([`write_form`]) and the strings' escapes are shared.
pub(crate) trait Form {
    /// Why a value has no form (a number out of range, say).
    type Error;
    /// Appends a number.
    fn number(&self, out: &mut Vec<u8>, n: &Number) -> std::result::Result<(), Self::Error>;
    /// The order of two member names.
    fn order(a: &str, b: &str) -> Ordering;
}

/// Python's `json.dumps(…, sort_keys=True)`: names by code point, numbers
/// as [`write_number`] prints them.
struct Python<'a> {
    field: &'a str,
}

impl Form for Python<'_> {
    type Error = Error;

    fn number(&self, out: &mut Vec<u8>, n: &Number) -> Result<()> {
        write_number(out, n, self.field)
    }

    fn order(a: &str, b: &str) -> Ordering {
        a.as_bytes().cmp(b.as_bytes())
    }
}

/// Appends `value` in `form`: no whitespace, members sorted by the form's
/// order (the map's own order when it already is: serde_json's map iterates
/// by code point), strings with [`write_str`]'s escapes.
pub(crate) fn write_form<F: Form>(
    out: &mut Vec<u8>,
    value: &Value,
    form: &F,
) -> std::result::Result<(), F::Error> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => form.number(out, n)?,
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_form(out, item, form)?;
            }
            out.push(b']');
        }
        Value::Object(members) => {
            out.push(b'{');
            if members
                .keys()
                .zip(members.keys().skip(1))
                .all(|(a, b)| F::order(a, b) == Ordering::Less)
            {
                write_members(out, members.iter(), form)?;
            } else {
                let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
                sorted.sort_by(|a, b| F::order(a.0, b.0));
                write_members(out, sorted.into_iter(), form)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_members<'a, F: Form>(
    out: &mut Vec<u8>,
    members: impl Iterator<Item = (&'a String, &'a Value)>,
    form: &F,
) -> std::result::Result<(), F::Error> {
    for (i, (name, value)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.push(b':');
        write_form(out, value, form)?;
    }
    Ok(())
}

/// Whether a JSON number literal is an integer literal (no `.`, `e` or `E`),
/// which Python's `json` reads as an exact `int`.
pub fn is_integer_literal(text: &str) -> bool {
    !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
}

fn write_number(out: &mut Vec<u8>, n: &Number, field: &str) -> Result<()> {
    let text = n.as_str();
    if is_integer_literal(text) {
        // JSON forbids leading zeros, so the literal is canonical except for "-0".
        if text == "-0" {
            out.push(b'0');
        } else {
            out.extend_from_slice(text.as_bytes());
        }
        return Ok(());
    }
    let value: f64 = text.parse().map_err(|_| not_finite(field))?;
    if !value.is_finite() {
        return Err(not_finite(field));
    }
    out.extend_from_slice(python_float_repr(value).as_bytes());
    Ok(())
}

fn not_finite(field: &str) -> Error {
    Error::field(
        ErrorCode::InvalidJson,
        field,
        format!("field `{field}` holds a number too large for a double; send it as a string"),
    )
}

/// The shortest round-trip digits of a finite double and its decimal point
/// position: `value = 0.d1d2d3… × 10^point`, sign separate.
pub fn shortest_digits(value: f64) -> (bool, String, i64) {
    // `{:e}` prints the shortest round-trip digits: "d.ddde-x".
    let formatted = format!("{:e}", value.abs());
    let (mantissa, exp) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i64 = exp.parse().unwrap_or(0);
    (value.is_sign_negative(), digits, exp + 1)
}

/// Python's `repr(float)` for a finite double.
pub fn python_float_repr(value: f64) -> String {
    let (negative, digits, point) = shortest_digits(value);
    let mut s = String::with_capacity(digits.len() + 8);
    if negative {
        s.push('-');
    }
    if value == 0.0 {
        s.push_str("0.0");
        return s;
    }
    if (-4 < point) && (point <= 16) {
        if point <= 0 {
            s.push_str("0.");
            for _ in 0..(-point) {
                s.push('0');
            }
            s.push_str(&digits);
        } else {
            let point = point as usize;
            if digits.len() <= point {
                s.push_str(&digits);
                for _ in digits.len()..point {
                    s.push('0');
                }
                s.push_str(".0");
            } else {
                s.push_str(&digits[..point]);
                s.push('.');
                s.push_str(&digits[point..]);
            }
        }
    } else {
        s.push_str(&digits[..1]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        let exp = point - 1;
        s.push('e');
        s.push(if exp < 0 { '-' } else { '+' });
        let mag = exp.unsigned_abs();
        if mag < 10 {
            s.push('0');
        }
        s.push_str(&mag.to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_python() {
        let mut out = Vec::new();
        write_str(
            &mut out,
            "a\"\\\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}\u{2028}é😀",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"\\\\\\n\\r\\t\\b\\f\\u0000\\u001f\u{7f}\u{2028}é😀\""
        );
    }

    #[test]
    fn escape_scan_matches_the_table() {
        for b in 0..=255u8 {
            for at in 0..20 {
                let mut bytes = vec![b'a'; 20];
                bytes[at] = b;
                assert_eq!(
                    needs_escape(&bytes),
                    NEEDS_ESCAPE[usize::from(b)],
                    "byte {b:#x} at {at}"
                );
            }
        }
        assert!(!needs_escape(
            "Pagamento de Março — Fatura 2024/03".as_bytes()
        ));
    }

    #[test]
    fn float_repr_matches_python() {
        for (v, want) in [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.1, "1.1"),
            (-2.5, "-2.5"),
            (0.30000000000000004, "0.30000000000000004"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (-0.0, "-0.0"),
            (100.0, "100.0"),
        ] {
            assert_eq!(python_float_repr(v), want, "{v}");
        }
    }
}
