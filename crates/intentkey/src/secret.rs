//! The HMAC secret: at least 32 bytes, never printed, kept only as the HMAC it keys.

use std::fmt;
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::error::{Error, ErrorCode, Result};

/// The minimum secret length in bytes (256 bits, the HMAC-SHA256 block-size half).
pub const MIN_SECRET_LEN: usize = 32;

/// A server secret for HMAC-SHA256 keys and fingerprints.
///
/// It is what stops anyone holding the key table from enumerating plausible
/// payloads. Its `Debug` output is redacted and no error ever carries its
/// bytes. It keeps only HMAC-SHA256 keyed with them (keyed once, not for
/// each MAC): the bytes, and every copy the constructors make on the way
/// (even when they refuse the input), are overwritten with zeros once that
/// is done, and the keyed state is overwritten when the secret is dropped.
///
/// ```
/// use intentkey::Secret;
/// let secret = Secret::from_hex(&"ab".repeat(32)).unwrap();
/// assert_eq!(format!("{secret:?}"), "Secret(32 bytes, redacted)");
/// assert_eq!(Secret::new(vec![0; 31]).unwrap_err().code().as_str(), "secret-too-short");
/// ```
#[derive(Clone)]
pub struct Secret {
    len: usize,
    // Only the keyed HMAC state is kept: the bytes are wiped once it is made.
    mac: KeyedMac,
}

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
        Ok(Secret {
            len: bytes.len(),
            mac: KeyedMac::new(&bytes),
        })
    }

    /// HMAC-SHA256 keyed with the secret, keyed once when the secret is made.
    pub(crate) fn keyed(&self) -> &KeyedMac {
        &self.mac
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes, redacted)", self.len)
    }
}

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 keyed with a secret. Its state (the hashed inner and outer
/// pads) keys a MAC as the secret does, so it is never printed and is
/// overwritten with the unkeyed state when dropped. Cloning it saves the two
/// hash blocks of keying for each MAC.
#[derive(Clone)]
pub(crate) struct KeyedMac(HmacSha256);

impl KeyedMac {
    fn new(key: &[u8]) -> Self {
        // HMAC accepts keys of any length, so new_from_slice cannot fail; the
        // fallback keeps the core free of panics all the same.
        KeyedMac(<HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unkeyed()))
    }

    /// HMAC-SHA256 of `material`.
    pub(crate) fn mac(&self, material: &[u8]) -> [u8; 32] {
        let mut mac = self.0.clone();
        mac.update(material);
        mac.finalize().into_bytes().into()
    }
}

impl Drop for KeyedMac {
    fn drop(&mut self) {
        // Overwrite the keyed state with the unkeyed one; `black_box` keeps
        // the compiler from dropping the write as dead (no unsafe needed).
        static BLANK: OnceLock<HmacSha256> = OnceLock::new();
        self.0.clone_from(BLANK.get_or_init(unkeyed));
        std::hint::black_box(&self.0);
    }
}

fn unkeyed() -> HmacSha256 {
    <HmacSha256 as hmac::digest::KeyInit>::new(&Default::default())
}
