//! The key header: finding it, parsing it per profile, and what a bad one is.

use std::fmt;

use super::profile::{Options, Profile};

/// A client's idempotency key, read from its header and validated: 1 to the
/// profile's maximum of printable ASCII characters (an `ietf` sf-string
/// unquoted and unescaped, or an `ietf` bare token as sent).
///
/// It is never a storage key by itself: see [`storage_key`](fn@super::storage_key).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientKey(String);

impl ClientKey {
    /// The key as sent (for a quoted `ietf` key, the string inside the
    /// quotes, unescaped).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a request has no usable key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyErrorReason {
    /// The header is absent, empty, or holds an empty string (`""`).
    Missing,
    /// The header is there but not a key: several values, a control
    /// character, a byte beyond ASCII, or not the profile's syntax.
    Invalid,
    /// The key is longer than the profile allows.
    TooLong,
}

impl KeyErrorReason {
    /// Every reason, in the order above.
    pub const ALL: [KeyErrorReason; 3] = [
        KeyErrorReason::Missing,
        KeyErrorReason::Invalid,
        KeyErrorReason::TooLong,
    ];

    /// The stable kebab-case reason: `idempotency-key-missing`,
    /// `idempotency-key-invalid` or `idempotency-key-too-long`.
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyErrorReason::Missing => "idempotency-key-missing",
            KeyErrorReason::Invalid => "idempotency-key-invalid",
            KeyErrorReason::TooLong => "idempotency-key-too-long",
        }
    }

    /// Looks a reason up by [`KeyErrorReason::as_str`].
    pub fn parse(reason: &str) -> Option<KeyErrorReason> {
        KeyErrorReason::ALL
            .into_iter()
            .find(|r| r.as_str() == reason)
    }
}

impl fmt::Display for KeyErrorReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request whose key header is missing or bad: answered with 400 in the
/// profile's shape ([`Options::key_error_reply`]), and nothing is stored.
///
/// The message names the header and says what to send. It never contains
/// the value that was sent (which may hold control characters, or be 10,000
/// characters long): only its length or the position of the bad byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError {
    reason: KeyErrorReason,
    profile: Profile,
    message: String,
}

impl KeyError {
    fn new(reason: KeyErrorReason, profile: Profile, message: String) -> Self {
        KeyError {
            reason,
            profile,
            message,
        }
    }

    /// Why the key is unusable.
    pub fn reason(&self) -> KeyErrorReason {
        self.reason
    }

    /// The stable kebab-case code ([`KeyErrorReason::as_str`]).
    pub fn code(&self) -> &'static str {
        self.reason.as_str()
    }

    /// The profile whose rules the header broke.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The header at fault, as the profile spells it.
    pub fn header(&self) -> &'static str {
        self.profile.header_name()
    }

    /// What was wrong and what to send instead.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for KeyError {}

impl Options {
    /// Finds the profile's key header among a request's header lines and
    /// parses it.
    ///
    /// Pass every header line as received, one `(name, value)` per line
    /// (Node: `rawHeaders`, not the combined `headers` object), so that a
    /// header sent twice is seen twice. Names match case-insensitively.
    ///
    /// ```
    /// use intentkey::http::{KeyErrorReason, Options, Profile};
    ///
    /// let ietf = Options::new(Profile::Ietf);
    /// let key = ietf.client_key([("content-type", "application/json"), ("idempotency-key", r#""8e03978e-40d5""#)]).unwrap();
    /// assert_eq!(key.as_str(), "8e03978e-40d5");
    ///
    /// // A bare key is the same key as its quoted form, unless the syntax is strict.
    /// assert_eq!(ietf.client_key([("Idempotency-Key", "8e03978e-40d5")]).unwrap(), key);
    /// let strict = Options { strict_key_syntax: true, ..Options::new(Profile::Ietf) };
    /// assert_eq!(strict.client_key([("Idempotency-Key", "abc")]).unwrap_err().reason(), KeyErrorReason::Invalid);
    /// // Several values are never a key.
    /// let twice = ietf.client_key([("Idempotency-Key", r#""a""#), ("IDEMPOTENCY-KEY", r#""b""#)]).unwrap_err();
    /// assert_eq!(twice.code(), "idempotency-key-invalid");
    /// assert_eq!(twice.message(), "the `Idempotency-Key` header was sent 2 times; send it once, with one key");
    ///
    /// let ofb = Options::new(Profile::Ofb);
    /// let missing = ofb.client_key([("Idempotency-Key", "abc")]).unwrap_err();
    /// assert_eq!(missing.reason(), KeyErrorReason::Missing);
    /// assert_eq!(ofb.client_key([("X-Idempotency-Key", "a".repeat(41))]).unwrap_err().code(), "idempotency-key-too-long");
    /// ```
    ///
    /// # Errors
    /// A [`KeyError`]: `idempotency-key-missing` when the header is absent
    /// or empty, `idempotency-key-invalid` or `idempotency-key-too-long`.
    pub fn client_key<N, V>(
        &self,
        headers: impl IntoIterator<Item = (N, V)>,
    ) -> Result<ClientKey, KeyError>
    where
        N: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let name = self.profile.header_name().as_bytes();
        self.client_key_from_values(
            headers
                .into_iter()
                .filter(|(n, _)| n.as_ref().eq_ignore_ascii_case(name))
                .map(|(_, v)| v),
        )
    }

    /// Parses the values of the profile's key header, one per header line
    /// (none when the request has no such header).
    ///
    /// ```
    /// use intentkey::http::{Options, Profile};
    /// let stripe = Options::new(Profile::Stripe);
    /// assert_eq!(stripe.client_key_from_values(["  order-42 "]).unwrap().as_str(), "order-42");
    /// assert_eq!(stripe.client_key_from_values(Vec::<&str>::new()).unwrap_err().code(), "idempotency-key-missing");
    /// ```
    ///
    /// # Errors
    /// As [`Options::client_key`].
    pub fn client_key_from_values<V: AsRef<[u8]>>(
        &self,
        values: impl IntoIterator<Item = V>,
    ) -> Result<ClientKey, KeyError> {
        let mut values = values.into_iter();
        let Some(first) = values.next() else {
            return Err(self.missing());
        };
        let others = values.count();
        if others > 0 {
            return Err(self.error(
                KeyErrorReason::Invalid,
                format!(
                    "the `{}` header was sent {} times; send it once, with one key",
                    self.profile.header_name(),
                    others + 1
                ),
            ));
        }
        self.parse_value(first.as_ref())
    }

    fn parse_value(&self, raw: &[u8]) -> Result<ClientKey, KeyError> {
        let value = trim_ows(raw);
        if value.is_empty() {
            return Err(self.missing());
        }
        if let Some((at, byte)) = value
            .iter()
            .enumerate()
            .find(|(_, b)| !(0x20..=0x7e).contains(*b))
        {
            let what = if byte.is_ascii() {
                "a control character"
            } else {
                "a byte beyond ASCII"
            };
            return Err(self.error(
                KeyErrorReason::Invalid,
                format!(
                    "the `{}` header holds {what} (at byte {}); {}",
                    self.profile.header_name(),
                    at + 1,
                    self.what_to_send()
                ),
            ));
        }
        let key = match self.profile {
            Profile::Ietf if value.first() == Some(&b'"') => self.sf_string(value)?,
            Profile::Ietf if self.strict_key_syntax => {
                return Err(self.error(
                    KeyErrorReason::Invalid,
                    format!(
                        "the `{}` header is not a quoted string; {}",
                        self.profile.header_name(),
                        self.what_to_send()
                    ),
                ))
            }
            Profile::Ietf => self.bare_token(value)?,
            Profile::Stripe | Profile::Ofb => value.to_vec(),
        };
        if key.is_empty() {
            return Err(self.missing());
        }
        let max = self.profile.max_key_len();
        if key.len() > max {
            return Err(self.error(
                KeyErrorReason::TooLong,
                format!(
                    "the `{}` header holds a key of {} characters; send at most {max}",
                    self.profile.header_name(),
                    key.len()
                ),
            ));
        }
        // Every byte was checked to be printable ASCII.
        String::from_utf8(key)
            .map(ClientKey)
            .map_err(|_| self.error(KeyErrorReason::Invalid, self.what_to_send()))
    }

    /// An RFC 8941 sf-string: `"`, then printable ASCII with `\"` and `\\`
    /// escapes, then `"`, and nothing after it. Returns the unescaped content.
    fn sf_string(&self, value: &[u8]) -> Result<Vec<u8>, KeyError> {
        let header = self.profile.header_name();
        let mut out = Vec::with_capacity(value.len());
        let mut bytes = value.iter().enumerate().skip(1);
        while let Some((_, &b)) = bytes.next() {
            match b {
                b'\\' => match bytes.next() {
                    Some((_, &escaped @ (b'"' | b'\\'))) => out.push(escaped),
                    _ => {
                        return Err(self.error(
                            KeyErrorReason::Invalid,
                            format!(
                                "the `{header}` header holds a backslash that escapes neither `\"` nor `\\`; {}",
                                self.what_to_send()
                            ),
                        ))
                    }
                },
                b'"' => {
                    let rest = bytes.next().map(|(at, _)| &value[at..]);
                    return match rest {
                        None => Ok(out),
                        Some(rest) => Err(self.error(
                            KeyErrorReason::Invalid,
                            match rest.first() {
                                Some(b',') | Some(b' ') | Some(b'\t') => format!(
                                    "the `{header}` header holds several values; send one key, once"
                                ),
                                Some(b';') => format!(
                                    "the `{header}` header has parameters after the key; send only the quoted key"
                                ),
                                _ => format!(
                                    "the `{header}` header has characters after the closing quote; {}",
                                    self.what_to_send()
                                ),
                            },
                        )),
                    };
                }
                _ => out.push(b),
            }
        }
        Err(self.error(
            KeyErrorReason::Invalid,
            format!(
                "the `{header}` header has no closing quote; {}",
                self.what_to_send()
            ),
        ))
    }

    /// An unquoted `ietf` key (refused with `strict_key_syntax`): visible
    /// ASCII (control characters and bytes beyond ASCII were refused
    /// already) with no space, `"` or `,` (a comma separates several values).
    /// Its length is checked by the caller, as a quoted key's.
    fn bare_token(&self, value: &[u8]) -> Result<Vec<u8>, KeyError> {
        if value.iter().any(|b| matches!(b, b' ' | b'"' | b',')) {
            return Err(self.error(
                KeyErrorReason::Invalid,
                format!(
                    "the `{}` header holds a space, a `\"` or a `,` outside quotes; {}",
                    self.profile.header_name(),
                    self.what_to_send()
                ),
            ));
        }
        Ok(value.to_vec())
    }

    fn missing(&self) -> KeyError {
        self.error(
            KeyErrorReason::Missing,
            format!(
                "the `{}` header is missing or empty; {}",
                self.profile.header_name(),
                self.what_to_send()
            ),
        )
    }

    fn error(&self, reason: KeyErrorReason, message: String) -> KeyError {
        KeyError::new(reason, self.profile, message)
    }

    /// What a client should send, with an example.
    fn what_to_send(&self) -> String {
        let header = self.profile.header_name();
        let max = self.profile.max_key_len();
        match self.profile {
            Profile::Ietf if self.strict_key_syntax => format!(
                "send one key of 1 to {max} printable ASCII characters as a quoted string, \
                 the same on every retry, e.g. {header}: \"8e03978e-40d5-43e8-bc93-6894a57f9324\""
            ),
            Profile::Ietf => format!(
                "send one key of 1 to {max} printable ASCII characters, bare (no space, `\"` or `,`) \
                 or as a quoted string, the same on every retry, e.g. {header}: 8e03978e-40d5-43e8-bc93-6894a57f9324"
            ),
            Profile::Stripe | Profile::Ofb => format!(
                "send one key of 1 to {max} printable ASCII characters, the same on every retry, \
                 e.g. {header}: 8e03978e-40d5-43e8-bc93-6894a57f9324"
            ),
        }
    }
}

/// Strips the optional whitespace (SP, HTAB) around a field value.
fn trim_ows(value: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !is_ows(b)).unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &value[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ietf(value: &str) -> Result<String, KeyError> {
        Options::new(Profile::Ietf)
            .client_key_from_values([value])
            .map(|k| k.0)
    }

    #[test]
    fn sf_strings_unescape_quote_and_backslash_only() {
        assert_eq!(ietf(r#""a\"b\\c""#).unwrap(), r#"a"b\c"#);
        assert_eq!(ietf(r#"" spaces inside ""#).unwrap(), " spaces inside ");
        for bad in [r#""a\nb""#, r#""abc"#, r#""a"b"#, r#""a\"#] {
            assert_eq!(
                ietf(bad).unwrap_err().reason(),
                KeyErrorReason::Invalid,
                "{bad}"
            );
        }
        assert!(ietf(r#""a", "b""#)
            .unwrap_err()
            .message()
            .contains("several values"));
        assert!(ietf(r#""a";p=1"#)
            .unwrap_err()
            .message()
            .contains("parameters"));
    }

    #[test]
    fn empty_strings_are_missing_and_length_counts_the_unescaped_key() {
        assert_eq!(ietf(r#""""#).unwrap_err().reason(), KeyErrorReason::Missing);
        assert_eq!(ietf(" \t ").unwrap_err().reason(), KeyErrorReason::Missing);
        let escaped = format!("\"{}\"", r"\\".repeat(255));
        assert_eq!(ietf(&escaped).unwrap().len(), 255);
        let long = format!("\"{}\"", "a".repeat(256));
        assert_eq!(ietf(&long).unwrap_err().reason(), KeyErrorReason::TooLong);
    }

    #[test]
    fn bare_tokens_by_default_quoted_only_when_strict() {
        let options = Options::new(Profile::Ietf);
        let key = |v: &str| options.client_key_from_values([v]);
        assert_eq!(key("8e03978e-40d5").unwrap().as_str(), "8e03978e-40d5");
        assert_eq!(key("a;b=c/d\\e").unwrap().as_str(), "a;b=c/d\\e");
        assert_eq!(key("\"quoted\"").unwrap().as_str(), "quoted");
        for bad in ["a b", "a,b", "a\"b"] {
            assert_eq!(
                key(bad).unwrap_err().reason(),
                KeyErrorReason::Invalid,
                "{bad}"
            );
        }
        assert_eq!(
            key(&"k".repeat(256)).unwrap_err().reason(),
            KeyErrorReason::TooLong
        );
        let strict = Options {
            strict_key_syntax: true,
            ..Options::new(Profile::Ietf)
        };
        let bare = strict.client_key_from_values(["8e03978e"]).unwrap_err();
        assert_eq!(bare.reason(), KeyErrorReason::Invalid);
        assert!(bare.message().contains("not a quoted string"));
        assert_eq!(
            strict.client_key_from_values(["\"q\""]).unwrap().as_str(),
            "q"
        );
    }

    #[test]
    fn trims_only_spaces_and_tabs() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b"\x0bx"), b"\x0bx");
    }

    #[test]
    fn reasons_parse_back() {
        for reason in KeyErrorReason::ALL {
            assert_eq!(KeyErrorReason::parse(reason.as_str()), Some(reason));
        }
    }
}
