//! The HMAC secret: at least 32 bytes, never printed, wiped on drop.

use std::fmt;

use zeroize::Zeroizing;

use crate::error::{Error, ErrorCode, Result};

/// The minimum secret length in bytes (256 bits, the HMAC-SHA256 block-size half).
pub const MIN_SECRET_LEN: usize = 32;

/// A server secret for HMAC-SHA256 keys and fingerprints.
///
/// It is what stops anyone holding the key table from enumerating plausible
/// payloads. Its `Debug` output is redacted, no error ever carries its bytes,
/// and its bytes are overwritten with zeros when it is dropped (so is every
/// copy the constructors make on the way, even when they refuse the input).
///
/// ```
/// use intentkey::Secret;
/// let secret = Secret::from_hex(&"ab".repeat(32)).unwrap();
/// assert_eq!(format!("{secret:?}"), "Secret(32 bytes, redacted)");
/// assert_eq!(Secret::new(vec![0; 31]).unwrap_err().code().as_str(), "secret-too-short");
/// ```
#[derive(Clone)]
pub struct Secret(Zeroizing<Vec<u8>>);

impl Secret {
    /// Wraps secret bytes, refusing fewer than [`MIN_SECRET_LEN`].
    ///
    /// # Errors
    /// `secret-too-short` when `bytes` has fewer than 32 bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self> {
        // Wrapped at once, so a refused (too short) secret is wiped as well.
        Secret::from_wiped(Zeroizing::new(bytes.into()))
    }

    /// Decodes a hex secret (either case, no separators).
    ///
    /// # Errors
    /// `invalid-secret` when `hex` is not an even number of hex digits;
    /// `secret-too-short` when it decodes to fewer than 32 bytes.
    pub fn from_hex(hex: &str) -> Result<Self> {
        let bad = || {
            Error::field(
                ErrorCode::InvalidSecret,
                "secret",
                "the secret is not hex: give an even number of 0-9/a-f digits with no spaces",
            )
        };
        if !hex.len().is_multiple_of(2) {
            return Err(bad());
        }
        // Wiped on drop, even when a later digit is refused; the capacity is
        // exact, so the vector never reallocates (which would leave a copy).
        let mut bytes = Zeroizing::new(Vec::with_capacity(hex.len() / 2));
        for pair in hex.as_bytes().chunks_exact(2) {
            let hi = crate::key::hex_digit(pair[0]).ok_or_else(bad)?;
            let lo = crate::key::hex_digit(pair[1]).ok_or_else(bad)?;
            bytes.push(hi << 4 | lo);
        }
        Secret::from_wiped(bytes)
    }

    fn from_wiped(bytes: Zeroizing<Vec<u8>>) -> Result<Self> {
        if bytes.len() < MIN_SECRET_LEN {
            return Err(Error::field(
                ErrorCode::SecretTooShort,
                "secret",
                format!(
                    "the secret has {} bytes; use at least {MIN_SECRET_LEN} random bytes (64 hex characters)",
                    bytes.len()
                ),
            ));
        }
        Ok(Secret(bytes))
    }

    /// The secret bytes, for keying a MAC.
    pub(crate) fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes, redacted)", self.0.len())
    }
}
