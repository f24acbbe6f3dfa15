//! The field normalizers, with the oracle's (Python's) semantics.
//!
//! | normalizer | accepts | result |
//! |---|---|---|
//! | `text` | string | NFC, strip Python whitespace, full Unicode case folding |
//! | `pix-key` | string | strip; a document key (digits `.` `-` `/`) keeps its digits, anything else is case folded |
//! | `decimal` | number or string | exact value quantized to the scale, half away from zero |
//! | `currency` | string | strip, three ASCII letters, uppercase |
//! | `exact` | string | unchanged |
//! | `integer` | integer or `-?[0-9]+` string | canonical integer text |

use icu_casemap::CaseMapper;
use serde_json::Value;
use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
use writeable::Writeable;

use crate::canonical::is_integer_literal;
use crate::decimal::{quantize_float_literal, quantize_half_up, DecimalError, MAX_DIGITS};
use crate::error::{Error, ErrorCode, Result};
use crate::sink::Sink;

/// How a `key` field is normalized before it enters the key material.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalizer {
    /// NFC, strip Python whitespace, full Unicode case folding.
    Text,
    /// A Brazilian PIX key: document keys keep their digits, others are case folded.
    PixKey,
    /// A decimal amount quantized to `scale` places with half-up rounding.
    Decimal {
        /// Digits after the decimal point (0..=18).
        scale: u32,
    },
    /// An ISO 4217 code: strip, three ASCII letters, uppercase.
    Currency,
    /// A string kept byte for byte.
    Exact,
    /// An integer in canonical decimal text.
    Integer,
}

impl Normalizer {
    /// The normalizer's name in policy JSON.
    pub fn name(self) -> &'static str {
        match self {
            Normalizer::Text => "text",
            Normalizer::PixKey => "pix-key",
            Normalizer::Decimal { .. } => "decimal",
            Normalizer::Currency => "currency",
            Normalizer::Exact => "exact",
            Normalizer::Integer => "integer",
        }
    }

    /// Normalizes one payload value; `field` names it in errors.
    ///
    /// # Errors
    /// `invalid-field-type`, `invalid-decimal`, `decimal-out-of-range`,
    /// `invalid-integer`, `invalid-currency` or `invalid-pix-key`, naming `field`.
    ///
    /// ```
    /// use intentkey::Normalizer;
    /// use serde_json::json;
    /// assert_eq!(Normalizer::Text.apply("remittance", &json!("  STRASSE Straße ")).unwrap(), "strasse strasse");
    /// assert_eq!(Normalizer::Decimal { scale: 2 }.apply("amount", &json!("1.005")).unwrap(), "1.01");
    /// assert_eq!(Normalizer::PixKey.apply("creditor_key", &json!("123.456.789-09")).unwrap(), "12345678909");
    /// ```
    pub fn apply(self, field: &str, value: &Value) -> Result<String> {
        let mut out = String::new();
        self.apply_into(field, value, &mut out)?;
        Ok(out)
    }

    /// As [`Normalizer::apply`], appending the result to `out` (which is left
    /// unchanged on error).
    ///
    /// # Errors
    /// As [`Normalizer::apply`].
    pub fn apply_into(self, field: &str, value: &Value, out: &mut String) -> Result<()> {
        self.write(field, value, out)
    }

    /// As [`Normalizer::apply_into`], to any [`Sink`] (the deriver writes
    /// straight into the material).
    pub(crate) fn write(self, field: &str, value: &Value, out: &mut impl Sink) -> Result<()> {
        match self {
            Normalizer::Text => text_into(expect_str(field, value, self)?, out),
            Normalizer::PixKey => pix_key(field, expect_str(field, value, self)?, out)?,
            Normalizer::Decimal { scale } => decimal(field, value, scale, out)?,
            Normalizer::Currency => currency(field, expect_str(field, value, self)?, out)?,
            Normalizer::Exact => out.push_str(expect_str(field, value, self)?),
            Normalizer::Integer => integer(field, value, out)?,
        }
        Ok(())
    }
}

fn expect_str<'v>(field: &str, value: &'v Value, normalizer: Normalizer) -> Result<&'v str> {
    value.as_str().ok_or_else(|| {
        Error::field(
            ErrorCode::InvalidFieldType,
            field,
            format!(
                "field `{field}` must be a JSON string for the {} normalizer, not {}",
                normalizer.name(),
                type_name(value)
            ),
        )
    })
}

pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Python's `str.isspace()`: Unicode White_Space plus U+001C..U+001F.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()` with no arguments.
#[inline]
pub fn python_strip(s: &str) -> &str {
    let bytes = s.as_bytes();
    // Fast path: both ends are ASCII and not whitespace (the common case).
    let plain = |b: u8| b.is_ascii() && b > b' ';
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) if plain(first) && plain(last) => s,
        _ => strip_spaces(s),
    }
}

/// [`python_strip`] of text that starts or ends with a space (or is empty):
/// its ASCII spaces ([`is_python_space`]) are taken off byte by byte, and
/// only text that then starts or ends with a non-ASCII character is trimmed
/// character by character.
#[inline(never)]
fn strip_spaces(s: &str) -> &str {
    let is_space = |&b: &u8| b.is_ascii() && is_python_space(char::from(b));
    let bytes = s.as_bytes();
    let start = bytes
        .iter()
        .position(|b| !is_space(b))
        .unwrap_or(bytes.len());
    let end = bytes[start..]
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |last| start + last + 1);
    // Both cuts are next to ASCII bytes, so they fall on character boundaries.
    let rest = s.get(start..end).unwrap_or(s);
    match (rest.as_bytes().first(), rest.as_bytes().last()) {
        (Some(first), Some(last)) if !first.is_ascii() || !last.is_ascii() => {
            rest.trim_matches(is_python_space)
        }
        _ => rest,
    }
}

/// Full Unicode case folding, as Python's `str.casefold()`.
///
/// ```
/// assert_eq!(intentkey::normalize::casefold("Straße ΣΑΣ ﬁ"), "strasse σασ fi");
/// ```
pub fn casefold(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    casefold_into(s, &mut out);
    out
}

/// Appends the case folding of `s` to `out`. Folding is context-free, so
/// ASCII runs are lowered directly, the characters [`quick_prefix_len`]
/// covers (Latin-1 letters, typographic dashes and quotes) are folded by
/// [`fold_quick`], and only the rest goes through ICU4X's full folding tables.
fn casefold_into(s: &str, out: &mut impl Sink) {
    let mapper = CaseMapper::new();
    let mut rest = s;
    while !rest.is_empty() {
        let ascii_len = ascii_prefix_len(rest.as_bytes());
        let (ascii, tail) = rest.split_at(ascii_len);
        let start = out.len();
        out.push_str(ascii);
        out.ascii_lowercase_from(start);
        let other_len = tail
            .bytes()
            .position(|b| b.is_ascii())
            .unwrap_or(tail.len());
        let (mut other, tail) = tail.split_at(other_len);
        while !other.is_empty() {
            let (quick, slow) = other.split_at(quick_prefix_len(other));
            quick.chars().for_each(|c| fold_quick(c, out));
            let slow_len = slow
                .char_indices()
                .find(|&(i, _)| quick_prefix_len(&slow[i..]) > 0)
                .map_or(slow.len(), |(i, _)| i);
            let (slow, next) = slow.split_at(slow_len);
            if !slow.is_empty() {
                // Writing to a `String` cannot fail.
                let _ = mapper.fold(slow).write_to(out);
            }
            other = next;
        }
        rest = tail;
    }
}

/// The length of the ASCII run at the start of `bytes`, eight bytes at a time.
fn ascii_prefix_len(bytes: &[u8]) -> usize {
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut len = 0;
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let high = u64::from_le_bytes(w) & HIGHS;
        if high != 0 {
            // The first byte with its high bit set, in little-endian order.
            return len + (high.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    len + words
        .remainder()
        .iter()
        .position(|b| !b.is_ascii())
        .unwrap_or(words.remainder().len())
}

/// The length in bytes of the run at the start of `s` of characters that are
/// NFC-stable with combining class 0 and whose folding [`fold_quick`] writes:
/// U+0080..=U+00FF (two bytes, led by 0xC2 or 0xC3) and the dashes, quotes,
/// bullets and marks of General Punctuation U+2010..=U+2027 and
/// U+2030..=U+205E (three bytes, led by 0xE2). Tests check every one of them
/// against ICU4X and the NFC tables.
fn quick_prefix_len(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    loop {
        match b.get(i..) {
            Some([0xC2 | 0xC3, _, ..]) => i += 2,
            Some([0xE2, 0x80, 0x90..=0xA7 | 0xB0..=0xBF, ..] | [0xE2, 0x81, 0x80..=0x9E, ..]) => {
                i += 3
            }
            _ => return i,
        }
    }
}

/// Full case folding of one character [`quick_prefix_len`] covers, as
/// Unicode's CaseFolding.txt (statuses C and F) and Python's
/// `str.casefold()` have it: the capitals À..Þ (but ×) fold to their small
/// letters, µ to Greek μ, ß to "ss"; every other one is its own folding.
fn fold_quick(c: char, out: &mut impl Sink) {
    match c {
        '\u{c0}'..='\u{d6}' | '\u{d8}'..='\u{de}' => {
            out.push(char::from_u32(u32::from(c) + 0x20).unwrap_or(c));
        }
        '\u{b5}' => out.push('\u{3bc}'),
        '\u{df}' => out.push_str("ss"),
        _ => out.push(c),
    }
}

/// The `text` normalizer: NFC, strip, casefold (in that order, as the oracle).
///
/// ```
/// assert_eq!(intentkey::normalize::text("\u{3000}ΣΑΣ\u{1c}"), "σασ");
/// ```
pub fn text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    text_into(raw, &mut out);
    out
}

fn text_into(raw: &str, out: &mut impl Sink) {
    // Most text is ASCII with a few Latin-1 letters, dashes and quotes. For
    // such text, stripping before NFC is stripping after it: those characters
    // are NFC-stable starters that compose with nothing, and NFC maps
    // whitespace only to whitespace (U+2000 and U+2001 to U+2002 and U+2003).
    // When none of its non-ASCII characters folds, folding it is lowering its
    // ASCII letters.
    let stripped = python_strip(raw);
    match quick_text_folds(stripped) {
        Some(false) => {
            let start = out.len();
            out.push_str(stripped);
            out.ascii_lowercase_from(start);
            return;
        }
        Some(true) => return casefold_into(stripped, out),
        None => {}
    }
    if is_nfc_fast(raw) {
        casefold_into(stripped, out);
    } else {
        let composed: String = raw.nfc().collect();
        casefold_into(python_strip(&composed), out);
    }
}

/// Whether every character of `s` is ASCII or one [`quick_prefix_len`]
/// covers (`None` when not), and if so whether any of those non-ASCII
/// characters folds to something else (À..Þ but ×, µ, ß; see [`fold_quick`]).
fn quick_text_folds(s: &str) -> Option<bool> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut folds = false;
    loop {
        i += ascii_prefix_len(&b[i..]);
        match &b[i..] {
            [] => return Some(folds),
            [0xC2, x, ..] => {
                folds |= *x == 0xB5;
                i += 2;
            }
            [0xC3, x, ..] => {
                folds |= *x <= 0x9F && *x != 0x97;
                i += 2;
            }
            [0xE2, 0x80, 0x90..=0xA7 | 0xB0..=0xBF, ..] | [0xE2, 0x81, 0x80..=0x9E, ..] => i += 3,
            _ => return None,
        }
    }
}

/// Whether `s` is certainly NFC. ASCII characters, and those
/// [`quick_prefix_len`] covers, are NFC-stable with combining class 0, so
/// only the other non-ASCII runs need the quick check.
fn is_nfc_fast(s: &str) -> bool {
    let mut rest = s;
    loop {
        let start = ascii_prefix_len(rest.as_bytes());
        if start == rest.len() {
            return true;
        }
        let run = &rest[start..];
        let end = run.bytes().position(|b| b.is_ascii()).unwrap_or(run.len());
        // The characters quick_prefix_len covers are all NFC_Quick_Check=Yes
        // with combining class 0 (a test checks them): a run of them needs
        // no look-up.
        if quick_prefix_len(&run[..end]) != end
            && is_nfc_quick(run[..end].chars()) != IsNormalized::Yes
        {
            return false;
        }
        rest = &run[end..];
    }
}

fn pix_key(field: &str, raw: &str, out: &mut impl Sink) -> Result<()> {
    let key = python_strip(raw);
    if key.is_empty() {
        return Err(empty_pix_key(field));
    }
    let is_punct = |c: char| matches!(c, '.' | '-' | '/');
    // A document key (CPF/CNPJ): only digits and the typing marks `.` `-` `/`.
    if key
        .bytes()
        .all(|b| b.is_ascii_digit() || is_punct(char::from(b)))
    {
        let start = out.len();
        for digit in key.bytes().filter(u8::is_ascii_digit) {
            out.push(char::from(digit));
        }
        if out.len() == start {
            return Err(empty_pix_key(field));
        }
        return Ok(());
    }
    if !key.is_ascii() && key.chars().all(|c| is_punct(c) || is_decimal_digit(c)) {
        return Err(Error::field(
            ErrorCode::InvalidPixKey,
            field,
            format!("field `{field}` is a document key with non-ASCII digits; send the digits 0-9"),
        ));
    }
    casefold_into(key, out);
    Ok(())
}

fn empty_pix_key(field: &str) -> Error {
    Error::field(
        ErrorCode::InvalidPixKey,
        field,
        format!("field `{field}` normalizes to an empty PIX key; send the key itself"),
    )
}

/// Python's `\d` in a `str` pattern: Unicode general category Nd.
fn is_decimal_digit(c: char) -> bool {
    c.is_ascii_digit() || (!c.is_ascii() && c.general_category() == GeneralCategory::DecimalNumber)
}

fn currency(field: &str, raw: &str, out: &mut impl Sink) -> Result<()> {
    let code = python_strip(raw);
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
        for letter in code.bytes() {
            out.push(char::from(letter.to_ascii_uppercase()));
        }
        return Ok(());
    }
    Err(Error::field(
        ErrorCode::InvalidCurrency,
        field,
        format!(
            "field `{field}` is not an ISO 4217 currency code; send three letters such as \"BRL\""
        ),
    ))
}

fn decimal(field: &str, value: &Value, scale: u32, out: &mut impl Sink) -> Result<()> {
    let quantized = match value {
        Value::Number(n) => {
            let literal = n.as_str();
            if is_integer_literal(literal) {
                quantize_half_up(literal, scale, out)
            } else {
                // Python's json reads this as a double; the decimal is its repr.
                quantize_float_literal(literal, scale, out)
            }
        }
        Value::String(s) => {
            let stripped = python_strip(s);
            if stripped.is_ascii() {
                quantize_half_up(stripped, scale, out)
            } else {
                Err(DecimalError::Syntax)
            }
        }
        other => {
            return Err(Error::field(
                ErrorCode::InvalidFieldType,
                field,
                format!(
                    "field `{field}` must be a JSON number or a decimal string, not {}",
                    type_name(other)
                ),
            ))
        }
    };
    quantized.map_err(|e| match e {
        DecimalError::Syntax => Error::field(
            ErrorCode::InvalidDecimal,
            field,
            format!("field `{field}` is not a finite decimal number; write it with ASCII digits, e.g. \"10.50\""),
        ),
        DecimalError::OutOfRange => Error::field(
            ErrorCode::DecimalOutOfRange,
            field,
            format!("field `{field}` needs more than {MAX_DIGITS} significant digits at scale {scale}"),
        ),
    })
}

fn integer(field: &str, value: &Value, out: &mut impl Sink) -> Result<()> {
    let literal = match value {
        Value::Number(n) if is_integer_literal(n.as_str()) => n.as_str(),
        Value::String(s) => s.as_str(),
        Value::Number(_) => return Err(not_integer(field)),
        other => {
            return Err(Error::field(
                ErrorCode::InvalidFieldType,
                field,
                format!(
                    "field `{field}` must be a JSON integer or a string of digits, not {}",
                    type_name(other)
                ),
            ))
        }
    };
    let (negative, digits) = match literal.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, literal),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_integer(field));
    }
    let trimmed = digits.trim_start_matches('0');
    if trimmed.is_empty() {
        out.push('0');
    } else {
        if negative {
            out.push('-');
        }
        out.push_str(trimmed);
    }
    Ok(())
}

fn not_integer(field: &str) -> Error {
    Error::field(
        ErrorCode::InvalidInteger,
        field,
        format!("field `{field}` is not an integer; send digits with an optional leading '-'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_space_set() {
        let spaces: Vec<char> = (0..=0x10ffffu32)
            .filter_map(char::from_u32)
            .filter(|c| is_python_space(*c))
            .collect();
        let want: Vec<char> = "\t\n\u{b}\u{c}\r\u{1c}\u{1d}\u{1e}\u{1f} \u{85}\u{a0}\u{1680}\u{2000}\u{2001}\u{2002}\u{2003}\u{2004}\u{2005}\u{2006}\u{2007}\u{2008}\u{2009}\u{200a}\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}".chars().collect();
        assert_eq!(spaces, want);
    }

    /// Every character quick_prefix_len covers, and the ones either side of its ranges.
    fn quick_candidates() -> impl Iterator<Item = char> {
        (0x80..=0x100u32)
            .chain(0x2000..=0x2060)
            .filter_map(char::from_u32)
    }

    fn is_quick(c: char) -> bool {
        let s = c.to_string();
        quick_prefix_len(&s) == s.len()
    }

    #[test]
    fn quick_folding_is_icu4x_folding() {
        let mapper = CaseMapper::new();
        let quick: Vec<char> = quick_candidates().filter(|&c| is_quick(c)).collect();
        assert_eq!(quick.len(), 128 + 24 + 47);
        for c in quick {
            let mut fast = String::new();
            fold_quick(c, &mut fast);
            let mut icu = String::new();
            let _ = mapper.fold(c.encode_utf8(&mut [0; 4])).write_to(&mut icu);
            assert_eq!(fast, icu, "U+{:04X}", u32::from(c));
            assert_eq!(
                quick_text_folds(&c.to_string()),
                Some(fast != c.to_string()),
                "U+{:04X}",
                u32::from(c)
            );
        }
        for c in quick_candidates().filter(|&c| !is_quick(c)) {
            assert_eq!(
                quick_text_folds(&format!("a{c}b")),
                None,
                "U+{:04X}",
                u32::from(c)
            );
        }
    }

    #[test]
    fn quick_characters_are_nfc_stable() {
        for c in quick_candidates().filter(|&c| is_quick(c)) {
            assert_eq!(
                is_nfc_quick(std::iter::once(c)),
                IsNormalized::Yes,
                "U+{:04X}",
                u32::from(c)
            );
            assert_eq!(
                unicode_normalization::char::canonical_combining_class(c),
                0,
                "U+{:04X}",
                u32::from(c)
            );
        }
    }

    #[test]
    fn latin1_runs_mixed_with_other_text() {
        // Each string against the general path: NFC then ICU4X folding whole.
        let mapper = CaseMapper::new();
        for s in [
            "Aluguel de MARÇO",
            "ÀÉÎÕÜ×ÞßµÿÆØ",
            "Straße ΣΑΣ ﬁ Ǆ",
            "çΣç",
            "e\u{301}ç",
            "Ç\u{327}",
            "\u{a0}Ñ\u{85}",
            "ÅΩ",
            "ÿŸ",
            "Pagamento de Março — “Fatura” 2024/03…",
            "—\u{301}",
            "‘Ǆ’Σ•ß",
            "\u{2001}\u{2028}\u{205f}",
            "\u{2000}ÇÉ—\u{2001}",
            "\u{a0}Ça\u{301}\u{2000}",
            "ÉTÉ \u{301}",
            "\u{2000}\u{301}É",
        ] {
            let composed: String = s.nfc().collect();
            let stripped = python_strip(&composed);
            let mut want = String::new();
            let _ = mapper.fold(stripped).write_to(&mut want);
            assert_eq!(text(s), want, "{s:?}");
            assert_eq!(
                is_nfc_fast(s),
                is_nfc_quick(s.chars()) == IsNormalized::Yes,
                "{s:?}"
            );
        }
    }

    proptest::proptest! {
        /// Stripping is trimming every character `is_python_space` takes.
        #[test]
        fn strip_is_trimming_python_spaces(s in "[ \t-\r\u{8}\u{e}\u{1b}-\u{1f}!a\u{7f}\u{85}\u{a0}\u{2000}\u{3000}é]{0,12}") {
            proptest::prop_assert_eq!(python_strip(&s), s.trim_matches(is_python_space));
        }

        /// The ASCII run's length, eight bytes at a time, is the byte-wise one.
        #[test]
        fn ascii_prefix_is_bytewise(s in "[a-z\u{80}-\u{10ffff}]{0,40}") {
            let want = s.bytes().position(|b| !b.is_ascii()).unwrap_or(s.len());
            proptest::prop_assert_eq!(ascii_prefix_len(s.as_bytes()), want);
        }

        /// The text normalizer with its fast paths is NFC, strip and ICU4X
        /// folding of the whole string, on strings that mix ASCII, Latin-1,
        /// combining marks and other scripts.
        #[test]
        fn text_is_the_general_path(s in "[a-zA-Z \u{80}-\u{ff}\u{2000}-\u{2060}\u{300}-\u{36f}\u{391}-\u{3c9}\u{1e9e}\u{212b}\u{fb01}]{0,24}") {
            let mapper = CaseMapper::new();
            let composed: String = s.nfc().collect();
            let mut want = String::new();
            let _ = mapper.fold(python_strip(&composed)).write_to(&mut want);
            proptest::prop_assert_eq!(text(&s), want);
            proptest::prop_assert_eq!(is_nfc_fast(&s), is_nfc_quick(s.chars()) == IsNormalized::Yes);
        }
    }

    #[test]
    fn casefold_is_not_lowercase() {
        assert_eq!(casefold("ΣΑΣ"), "σασ");
        assert_eq!(casefold("ß"), "ss");
        assert_eq!(casefold("ﬁ"), "fi");
        assert_eq!(casefold("Ꭰ"), "Ꭰ");
        assert_eq!(casefold("ꭰ"), "Ꭰ");
    }

    #[test]
    fn integer_canonical() {
        let n = Normalizer::Integer;
        assert_eq!(n.apply("n", &json!("-007")).unwrap(), "-7");
        assert_eq!(n.apply("n", &json!("-0")).unwrap(), "0");
        assert_eq!(n.apply("n", &json!(42)).unwrap(), "42");
        assert_eq!(
            n.apply("n", &json!(1.5)).unwrap_err().code(),
            ErrorCode::InvalidInteger
        );
        assert_eq!(
            n.apply("n", &json!(null)).unwrap_err().code(),
            ErrorCode::InvalidFieldType
        );
    }
}
