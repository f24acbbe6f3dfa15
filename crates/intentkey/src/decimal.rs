//! Exact decimal quantization with half-up rounding, as Python's
//! `Decimal(text).quantize(Decimal(10) ** -scale, rounding=ROUND_HALF_UP)` under
//! the default 28-digit context.
//!
//! Python's `Decimal` holds any exponent exactly; a fixed 96-bit decimal type
//! cannot (it rounds `0.00499999999999999999999999999999` twice and gets it
//! wrong), so this module works on the digit string itself.

use crate::sink::Sink;

/// Python's default decimal context precision: a quantized result may not need more.
pub(crate) const MAX_DIGITS: usize = 28;

/// Why a decimal text could not be quantized.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DecimalError {
    /// Not decimal text (or NaN, Infinity, `_`, non-ASCII digits).
    Syntax,
    /// The result needs more than [`MAX_DIGITS`] significant digits.
    OutOfRange,
}

/// A parsed decimal: `(-1)^negative × digits × 10^exponent`.
struct Parsed<'a> {
    negative: bool,
    /// ASCII digits with leading zeros removed (may be empty for zero).
    int_digits: &'a [u8],
    frac_digits: &'a [u8],
    exponent: i64,
}

/// Exponents beyond this magnitude are clamped; any such value is either out of
/// range or rounds to zero, so clamping changes no answer.
const EXPONENT_CLAMP: i64 = 1 << 40;

fn parse(text: &str) -> Result<Parsed<'_>, DecimalError> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if let Some(&sign) = bytes.first() {
        if sign == b'+' || sign == b'-' {
            negative = sign == b'-';
            i = 1;
        }
    }
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &bytes[int_start..i];
    let mut frac_digits: &[u8] = &[];
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &bytes[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(DecimalError::Syntax);
    }
    let mut exponent: i64 = 0;
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        i += 1;
        let mut exp_negative = false;
        if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
            exp_negative = bytes[i] == b'-';
            i += 1;
        }
        let exp_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            exponent = (exponent * 10 + i64::from(bytes[i] - b'0')).min(EXPONENT_CLAMP);
            i += 1;
        }
        if i == exp_start {
            return Err(DecimalError::Syntax);
        }
        if exp_negative {
            exponent = -exponent;
        }
    }
    if i != bytes.len() {
        return Err(DecimalError::Syntax);
    }
    let first_nonzero = int_digits
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(int_digits.len());
    Ok(Parsed {
        negative,
        int_digits: &int_digits[first_nonzero..],
        frac_digits,
        exponent,
    })
}

/// Whether a JSON number literal survives Python's `str(float(literal))` with
/// its value unchanged, so it can be quantized as written.
///
/// Any decimal with at most 15 significant digits (DBL_DIG) in the normal
/// double range reads back from the double's 15-digit rounding as itself; the
/// shortest round-trip repr has no more digits, reads back to the same double,
/// and so has the same value.
#[cfg(test)]
fn survives_double(literal: &str) -> bool {
    parse(literal).is_ok_and(|parsed| parsed_survives_double(&parsed))
}

fn parsed_survives_double(parsed: &Parsed<'_>) -> bool {
    // At most 15 digits written and no exponent: at most 15 significant
    // digits, the leading one between 10^-15 and 10^14.
    if parsed.exponent == 0 && parsed.int_digits.len() + parsed.frac_digits.len() <= 15 {
        return true;
    }
    let coefficient = Coefficient(parsed.int_digits, parsed.frac_digits);
    let len = coefficient.len();
    let Some(first) = (0..len).find(|&i| coefficient.at(i) != b'0') else {
        return true; // zero (the sign survives too: -0.0 prints as "-0.0")
    };
    let last = (0..len)
        .rev()
        .find(|&i| coefficient.at(i) != b'0')
        .unwrap_or(first);
    let significant = last - first + 1;
    // Decimal exponent of the leading digit.
    let leading_exponent = parsed.exponent + parsed.int_digits.len() as i64 - 1 - first as i64;
    significant <= 15 && (-290..=290).contains(&leading_exponent)
}

/// Quantizes ASCII decimal text (`[+-]digits[.digits][e[+-]digits]`, already
/// stripped of surrounding whitespace) to `scale` places, rounding half away
/// from zero, and appends it to `out`. Negative zero comes out as plain zero.
pub(crate) fn quantize_half_up(
    text: &str,
    scale: u32,
    out: &mut impl Sink,
) -> Result<(), DecimalError> {
    quantize_parsed(&parse(text)?, scale, out)
}

/// Quantizes a JSON float literal the way Python does: as the shortest
/// round-trip repr of the double it denotes.
pub(crate) fn quantize_float_literal(
    literal: &str,
    scale: u32,
    out: &mut impl Sink,
) -> Result<(), DecimalError> {
    let parsed = parse(literal)?;
    if parsed_survives_double(&parsed) {
        return quantize_parsed(&parsed, scale, out);
    }
    match literal.parse::<f64>() {
        // ryu prints the shortest round-trip digits, as Python's repr does.
        Ok(v) if v.is_finite() => quantize_half_up(ryu::Buffer::new().format_finite(v), scale, out),
        _ => Err(DecimalError::Syntax),
    }
}

fn quantize_parsed(
    parsed: &Parsed<'_>,
    scale: u32,
    out: &mut impl Sink,
) -> Result<(), DecimalError> {
    // The common case: no exponent, a nonzero integer part and no more
    // places than the scale. The result is the text as written, padded
    // with zeros (the same as `quantize_general`, which a proptest checks).
    let places = scale as usize;
    if parsed.exponent == 0
        && !parsed.int_digits.is_empty()
        && parsed.frac_digits.len() <= places
        && parsed.int_digits.len() + places <= MAX_DIGITS
    {
        if parsed.negative {
            out.push('-');
        }
        // The digits are ASCII (the parser took only `0`..=`9`).
        out.push_ascii(parsed.int_digits);
        if places > 0 {
            out.push('.');
            out.push_ascii(parsed.frac_digits);
            for _ in parsed.frac_digits.len()..places {
                out.push('0');
            }
        }
        return Ok(());
    }
    quantize_general(parsed, scale, out)
}

fn quantize_general(
    parsed: &Parsed<'_>,
    scale: u32,
    out: &mut impl Sink,
) -> Result<(), DecimalError> {
    let coefficient = Coefficient(parsed.int_digits, parsed.frac_digits);
    let len = coefficient.len();
    // value = coefficient × 10^(exponent − frac_len); the target exponent is −scale,
    // so `shift` digits are appended (shift ≥ 0) or dropped (shift < 0).
    let shift = parsed.exponent - parsed.frac_digits.len() as i64 + i64::from(scale);
    let kept = if shift >= 0 {
        len
    } else {
        len.saturating_sub(shift.unsigned_abs() as usize)
    };
    // The first dropped digit decides the rounding; beyond the digits it is 0.
    let round_up = shift < 0
        && kept < len
        && coefficient.at(kept) >= b'5'
        && shift.unsigned_abs() as usize <= len;

    // The result's significant digits: the kept digits without leading zeros,
    // plus one if rounding carries, plus the appended zeros.
    let first = (0..kept)
        .find(|&i| coefficient.at(i) != b'0')
        .unwrap_or(kept);
    let mut digits = [0u8; MAX_DIGITS + 1];
    let mut n = 0;
    for i in first..kept {
        if n == digits.len() {
            return Err(DecimalError::OutOfRange);
        }
        digits[n] = coefficient.at(i);
        n += 1;
    }
    if round_up {
        n = increment(&mut digits, n).ok_or(DecimalError::OutOfRange)?;
    }
    let appended = if shift > 0 && n > 0 { shift as u64 } else { 0 };
    if n as u64 + appended > MAX_DIGITS as u64 {
        return Err(DecimalError::OutOfRange);
    }
    let zeros = std::iter::repeat_n(b'0', appended as usize);
    let all = digits[..n].iter().copied().chain(zeros);
    format_fixed(
        parsed.negative,
        all,
        n + appended as usize,
        scale as usize,
        out,
    );
    Ok(())
}

/// The coefficient's digits: integer part (leading zeros removed), then fraction.
struct Coefficient<'a>(&'a [u8], &'a [u8]);

impl Coefficient<'_> {
    fn len(&self) -> usize {
        self.0.len() + self.1.len()
    }

    fn at(&self, i: usize) -> u8 {
        if i < self.0.len() {
            self.0[i]
        } else {
            self.1[i - self.0.len()]
        }
    }
}

/// Adds one to the first `n` ASCII digits; returns the new length, or `None`
/// when the carry needs more room than the buffer has.
fn increment(digits: &mut [u8], n: usize) -> Option<usize> {
    for d in digits[..n].iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return Some(n);
        }
    }
    // All nines (or empty): the result is 1 followed by n zeros.
    if n == digits.len() {
        return None;
    }
    digits.copy_within(0..n, 1);
    digits[0] = b'1';
    Some(n + 1)
}

/// Formats `count` significant digits (no leading zeros; zero when empty)
/// with `scale` places.
fn format_fixed(
    negative: bool,
    digits: impl Iterator<Item = u8>,
    count: usize,
    scale: usize,
    out: &mut impl Sink,
) {
    if negative && count > 0 {
        out.push('-');
    }
    let padded = count.max(scale + 1);
    let int_len = padded - scale;
    let mut digits = std::iter::repeat_n(b'0', padded - count).chain(digits);
    for i in 0..padded {
        if i == int_len {
            out.push('.');
        }
        out.push(char::from(digits.next().unwrap_or(b'0')));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Result<String, DecimalError> {
        qs(s, 2)
    }

    fn qs(s: &str, scale: u32) -> Result<String, DecimalError> {
        let mut out = String::new();
        quantize_half_up(s, scale, &mut out).map(|()| out)
    }

    #[test]
    fn rounds_half_up_exactly() {
        assert_eq!(q("1.005").unwrap(), "1.01");
        assert_eq!(q("2.675").unwrap(), "2.68");
        assert_eq!(q("-1.005").unwrap(), "-1.01");
        assert_eq!(q("0.0049999999999999999999999999999").unwrap(), "0.00");
        assert_eq!(q("0.005").unwrap(), "0.01");
        assert_eq!(q("9.995").unwrap(), "10.00");
        assert_eq!(q("-9.995").unwrap(), "-10.00");
        assert_eq!(q("0.995").unwrap(), "1.00");
        assert_eq!(q("0.000").unwrap(), "0.00");
        assert_eq!(q("00012.3450").unwrap(), "12.35");
        assert_eq!(q("1234.5").unwrap(), "1234.50");
        assert_eq!(q("1e16").unwrap(), "10000000000000000.00");
        assert_eq!(q("5e-3").unwrap(), "0.01");
        assert_eq!(q("4e-3").unwrap(), "0.00");
        assert_eq!(q("5e-4").unwrap(), "0.00");
        assert_eq!(qs("9.5", 0).unwrap(), "10");
        assert_eq!(qs("0.5", 0).unwrap(), "1");
        assert_eq!(q("10").unwrap(), "10.00");
        assert_eq!(q(".5").unwrap(), "0.50");
        assert_eq!(q("5.").unwrap(), "5.00");
        assert_eq!(q("1E+2").unwrap(), "100.00");
        assert_eq!(q("1e-50").unwrap(), "0.00");
        assert_eq!(q("-0.001").unwrap(), "0.00");
        assert_eq!(q("0e99999999999999999999").unwrap(), "0.00");
        assert_eq!(qs("2.5", 0).unwrap(), "3");
        assert_eq!(qs("0.00005", 4).unwrap(), "0.0001");
    }

    proptest::proptest! {
        /// The fast path of `quantize_parsed` is the general one, and the
        /// shortcut of `parsed_survives_double` agrees with its count.
        #[test]
        fn fast_paths_are_the_general_ones(
            text in "[+-]?[0-9]{0,30}(\\.[0-9]{0,8})?([eE][+-]?[0-9]{1,3})?",
            scale in 0u32..6,
        ) {
            if let Ok(parsed) = parse(&text) {
                let (mut fast, mut general) = (String::new(), String::new());
                let a = quantize_parsed(&parsed, scale, &mut fast).map(|()| fast);
                let b = quantize_general(&parsed, scale, &mut general).map(|()| general);
                proptest::prop_assert_eq!(a, b);
                let coefficient = Coefficient(parsed.int_digits, parsed.frac_digits);
                let digits: Vec<u8> = (0..coefficient.len()).map(|i| coefficient.at(i)).collect();
                let significant = match (digits.iter().position(|&d| d != b'0'), digits.iter().rposition(|&d| d != b'0')) {
                    (Some(first), Some(last)) => {
                        let leading = parsed.exponent + parsed.int_digits.len() as i64 - 1 - first as i64;
                        last - first < 15 && (-290..=290).contains(&leading)
                    }
                    _ => true,
                };
                proptest::prop_assert_eq!(parsed_survives_double(&parsed), significant);
            }
        }
    }

    #[test]
    fn short_literals_survive_the_double() {
        for literal in [
            "1234.5",
            "1.005",
            "0.1",
            "-2.675",
            "1e16",
            "123456789012345",
            "0.000",
            "1.50000000000000000000",
        ] {
            assert!(survives_double(literal), "{literal}");
        }
        for literal in [
            "0.30000000000000004",
            "1234567890123456",
            "1e300",
            "1e-300",
            "5e-324",
            "1.7976931348623157e308",
        ] {
            assert!(!survives_double(literal), "{literal}");
        }
        // Where it says yes, the double's shortest repr has the same value.
        for literal in [
            "1234.5",
            "1.005",
            "0.1",
            "-2.675",
            "1e16",
            "123456789012345",
            "9.99999999999999e290",
        ] {
            let via_double = ryu::Buffer::new()
                .format_finite(literal.parse::<f64>().unwrap())
                .to_owned();
            assert_eq!(q(literal), q(&via_double), "{literal}");
        }
    }

    #[test]
    fn enforces_28_digits() {
        assert_eq!(
            q("99999999999999999999999999").unwrap(),
            "99999999999999999999999999.00"
        );
        assert_eq!(
            q("100000000000000000000000000"),
            Err(DecimalError::OutOfRange)
        );
        assert_eq!(
            q("99999999999999999999999999.995"),
            Err(DecimalError::OutOfRange)
        );
        assert_eq!(q("1e30"), Err(DecimalError::OutOfRange));
        assert_eq!(q("1e99999999999999999999"), Err(DecimalError::OutOfRange));
    }

    #[test]
    fn refuses_syntax() {
        for s in [
            "", "+", ".", "1e", "1e+", "1.2.3", "abc", "1_0", "NaN", "--1", "1 0",
        ] {
            assert_eq!(q(s), Err(DecimalError::Syntax), "{s:?}");
        }
    }
}
