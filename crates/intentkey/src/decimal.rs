//! Exact decimal quantization with half-up rounding, as Python's
//! `Decimal(text).quantize(Decimal(10) ** -scale, rounding=ROUND_HALF_UP)` under
//! the default 28-digit context.
//!
//! Python's `Decimal` holds any exponent exactly; a fixed 96-bit decimal type
//! cannot (it rounds `0.00499999999999999999999999999999` twice and gets it
//! wrong), so this module works on the digit string itself.

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

/// Quantizes ASCII decimal text (`[+-]digits[.digits][e[+-]digits]`, already
/// stripped of surrounding whitespace) to `scale` places, rounding half away
/// from zero. Negative zero comes out as plain zero.
pub(crate) fn quantize_half_up(text: &str, scale: u32) -> Result<String, DecimalError> {
    let parsed = parse(text)?;
    // value = coefficient × 10^(exponent − frac_len); target exponent is −scale.
    let frac_len = parsed.frac_digits.len() as i64;
    let exp = parsed.exponent - frac_len;
    let coefficient = parsed.int_digits.iter().chain(parsed.frac_digits.iter());
    let total_len = parsed.int_digits.len() + parsed.frac_digits.len();
    // How many digits to append (shift > 0) or drop (shift < 0).
    let shift = exp + i64::from(scale);

    let mut digits: Vec<u8> = Vec::with_capacity(MAX_DIGITS + 2);
    if shift >= 0 {
        // Significant length = digits after leading zeros + appended zeros.
        let mut leading = true;
        for &d in coefficient {
            if leading && d == b'0' {
                continue;
            }
            leading = false;
            digits.push(d);
            if digits.len() > MAX_DIGITS {
                return Err(DecimalError::OutOfRange);
            }
        }
        if !digits.is_empty() {
            if digits.len() as i64 + shift > MAX_DIGITS as i64 {
                return Err(DecimalError::OutOfRange);
            }
            digits.extend(std::iter::repeat_n(b'0', shift as usize));
        }
    } else {
        let drop = shift.unsigned_abs();
        let keep = (total_len as u64).saturating_sub(drop) as usize;
        let all: Vec<u8> = coefficient.copied().collect();
        let round_digit = if drop as usize <= total_len && drop > 0 {
            all[keep]
        } else {
            b'0'
        };
        let mut leading = true;
        for &d in &all[..keep] {
            if leading && d == b'0' {
                continue;
            }
            leading = false;
            digits.push(d);
            if digits.len() > MAX_DIGITS + 1 {
                return Err(DecimalError::OutOfRange);
            }
        }
        if round_digit >= b'5' {
            increment(&mut digits);
        }
        if digits.len() > MAX_DIGITS {
            return Err(DecimalError::OutOfRange);
        }
    }
    Ok(format_fixed(parsed.negative, &digits, scale as usize))
}

/// Adds one to a big-endian ASCII digit string (empty means zero).
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}

/// Formats a coefficient (no leading zeros, empty for zero) with `scale` places.
fn format_fixed(negative: bool, digits: &[u8], scale: usize) -> String {
    let mut out = String::with_capacity(digits.len() + scale + 3);
    if negative && !digits.is_empty() {
        out.push('-');
    }
    let padded = digits.len().max(scale + 1);
    let zeros = padded - digits.len();
    let int_len = padded - scale;
    for i in 0..padded {
        if i == int_len {
            out.push('.');
        }
        let d = if i < zeros { b'0' } else { digits[i - zeros] };
        out.push(char::from(d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Result<String, DecimalError> {
        quantize_half_up(s, 2)
    }

    #[test]
    fn rounds_half_up_exactly() {
        assert_eq!(q("1.005").unwrap(), "1.01");
        assert_eq!(q("2.675").unwrap(), "2.68");
        assert_eq!(q("-1.005").unwrap(), "-1.01");
        assert_eq!(q("0.0049999999999999999999999999999").unwrap(), "0.00");
        assert_eq!(q("0.005").unwrap(), "0.01");
        assert_eq!(q("9.995").unwrap(), "10.00");
        assert_eq!(q("10").unwrap(), "10.00");
        assert_eq!(q(".5").unwrap(), "0.50");
        assert_eq!(q("5.").unwrap(), "5.00");
        assert_eq!(q("1E+2").unwrap(), "100.00");
        assert_eq!(q("1e-50").unwrap(), "0.00");
        assert_eq!(q("-0.001").unwrap(), "0.00");
        assert_eq!(q("0e99999999999999999999").unwrap(), "0.00");
        assert_eq!(quantize_half_up("2.5", 0).unwrap(), "3");
        assert_eq!(quantize_half_up("0.00005", 4).unwrap(), "0.0001");
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
