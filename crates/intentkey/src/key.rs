//! Keys: lowercase hex, full (64) or truncated to a destination's length.

use std::fmt;

use crate::error::{Error, ErrorCode, Result};

/// How many hex characters of the HMAC a key keeps: 32..=64.
///
/// ```
/// use intentkey::KeyLength;
/// assert_eq!(KeyLength::OPEN_FINANCE_BRASIL.hex_chars(), 40);
/// assert_eq!(KeyLength::new(31).unwrap_err().code().as_str(), "invalid-key-length");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyLength(usize);

impl KeyLength {
    /// The shortest key allowed: 32 hex = 128 bits.
    pub const MIN: usize = 32;
    /// The full HMAC-SHA256: 64 hex = 256 bits.
    pub const MAX: usize = 64;
    /// The full 64 hex characters.
    pub const FULL: KeyLength = KeyLength(64);
    /// Open Finance Brasil's profile: 40 hex = 160 bits.
    pub const OPEN_FINANCE_BRASIL: KeyLength = KeyLength(40);

    /// A key length in hex characters.
    ///
    /// # Errors
    /// `invalid-key-length` outside 32..=64.
    pub fn new(hex_chars: usize) -> Result<Self> {
        if (Self::MIN..=Self::MAX).contains(&hex_chars) {
            Ok(KeyLength(hex_chars))
        } else {
            Err(Error::field(
                ErrorCode::InvalidKeyLength,
                "keyHexLength",
                format!(
                    "a key of {hex_chars} hex characters is not allowed; use {} to {} (32 = 128 bits)",
                    Self::MIN,
                    Self::MAX
                ),
            ))
        }
    }

    /// The length in hex characters.
    pub fn hex_chars(self) -> usize {
        self.0
    }
}

/// An idempotency key: lowercase hex, 32 to 64 characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(String);

impl Key {
    pub(crate) fn from_digest(digest: &[u8; 32], length: KeyLength) -> Key {
        Key(digest_hex(digest, length.hex_chars()))
    }

    /// The key as lowercase hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Takes the key's string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The first `chars` (at most 64) lowercase hex characters of a digest,
/// written on the stack from a table of byte pairs and copied once.
pub(crate) fn digest_hex(digest: &[u8; 32], chars: usize) -> String {
    let chars = chars.min(64);
    let mut hex = [0u8; 64];
    for (pair, &b) in hex.chunks_exact_mut(2).zip(&digest[..chars.div_ceil(2)]) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
    // Every byte is an ASCII hex digit, so this never falls back.
    String::from(std::str::from_utf8(&hex[..chars]).unwrap_or_default())
}

/// The two hex digits of every byte.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut pairs = [[0u8; 2]; 256];
    let mut b = 0;
    while b < 256 {
        pairs[b] = [HEX[b >> 4], HEX[b & 0xf]];
        b += 1;
    }
    pairs
};

const HEX: &[u8; 16] = b"0123456789abcdef";

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    let mut hex = vec![0u8; bytes.len() * 2];
    for (pair, &b) in hex.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
    // Every byte is an ASCII hex digit, so this never falls back.
    String::from_utf8(hex).unwrap_or_default()
}

/// The value of one hex digit (either case), or `None`.
pub(crate) fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The bytes of hex text (either case), or `None` when it is not hex.
pub(crate) fn from_hex(hex: &str) -> Option<Vec<u8>> {
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Some(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?))
        .collect()
}

/// A `uuid`-mode key: a UUID v4 as 32 lowercase hex, from 16 random bytes the
/// caller supplies (the core picks no randomness of its own).
///
/// ```
/// let key = intentkey::uuid_key([0u8; 16]);
/// assert_eq!(key.as_str(), "00000000000040008000000000000000");
/// ```
pub fn uuid_key(random: [u8; 16]) -> Key {
    let uuid = uuid::Builder::from_random_bytes(random).into_uuid();
    Key(uuid.simple().to_string())
}

/// [`uuid_key`] from a byte slice, as hosts hand randomness across a boundary.
///
/// # Errors
/// `invalid-random` unless `random` has exactly 16 bytes.
///
/// ```
/// assert!(intentkey::uuid_key_from_slice(&[7; 16]).is_ok());
/// assert_eq!(intentkey::uuid_key_from_slice(&[7; 15]).unwrap_err().code().as_str(), "invalid-random");
/// ```
pub fn uuid_key_from_slice(random: &[u8]) -> Result<Key> {
    let bytes: [u8; 16] = random.try_into().map_err(|_| {
        Error::field(
            ErrorCode::InvalidRandom,
            "random",
            format!(
                "a uuid key takes exactly 16 random bytes, not {}",
                random.len()
            ),
        )
    })?;
    Ok(uuid_key(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_each_byte_as_two_lowercase_digits() {
        let digests: [[u8; 32]; 3] = [
            std::array::from_fn(|i| i as u8 * 8 + 7),
            [0xff; 32],
            std::array::from_fn(|i| (i as u8).wrapping_mul(151) ^ 0xa5),
        ];
        for digest in &digests {
            let full: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(to_hex(digest), full);
            for chars in 0..=64 {
                assert_eq!(
                    digest_hex(digest, chars),
                    full[..chars],
                    "{chars} characters"
                );
            }
        }
        let every_byte: Vec<u8> = (0..=255).collect();
        let want: String = every_byte.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(to_hex(&every_byte), want);
    }
}
