//! The profiles (which header, which limits, which error shapes) and their options.

/// An idempotency convention: the header a client sends its key in, the
/// key's syntax and limits, and the shape of the answers.
///
/// | | header | key | answers |
/// |---|---|---|---|
/// | [`Profile::Ietf`] (default) | `Idempotency-Key` | RFC 8941 sf-string (`"…"`) or a bare token, 1 to 255 characters; the sf-string only with [`Options::strict_key_syntax`] | `application/problem+json` (RFC 9457) |
/// | [`Profile::Stripe`] | `Idempotency-Key` | bare, 1 to 255 characters | `{"error":{"type":…,"message":…}}` |
/// | [`Profile::Ofb`] | `x-idempotency-key` | bare, 1 to 40 characters | `{"errors":[{"code":…,"title":…,"detail":…}],"meta":{…}}` |
///
/// Every profile takes printable ASCII only (0x20 to 0x7E, no control
/// characters, nothing beyond ASCII).
///
/// ```
/// use intentkey::http::Profile;
/// assert_eq!(Profile::parse("ofb"), Some(Profile::Ofb));
/// assert_eq!(Profile::Ofb.header_name(), "x-idempotency-key");
/// assert_eq!(Profile::Ofb.max_key_len(), 40);
/// assert_eq!(Profile::default(), Profile::Ietf);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// The IETF draft `Idempotency-Key` header (draft-ietf-httpapi-idempotency-key-header).
    #[default]
    Ietf,
    /// Stripe's convention, followed by many payment APIs.
    Stripe,
    /// Open Finance Brasil.
    Ofb,
}

impl Profile {
    /// Every profile, in the order above.
    pub const ALL: [Profile; 3] = [Profile::Ietf, Profile::Stripe, Profile::Ofb];

    /// `ietf`, `stripe` or `ofb`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Profile::Ietf => "ietf",
            Profile::Stripe => "stripe",
            Profile::Ofb => "ofb",
        }
    }

    /// Looks a profile up by [`Profile::as_str`].
    pub fn parse(name: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The request header that carries the key, as the profile spells it
    /// (header names match case-insensitively).
    pub const fn header_name(self) -> &'static str {
        match self {
            Profile::Ietf | Profile::Stripe => "Idempotency-Key",
            Profile::Ofb => "x-idempotency-key",
        }
    }

    /// The longest key accepted, in characters (ASCII, so also bytes): 255
    /// for `ietf` (the draft sets none; this is Stripe's) and `stripe`, 40
    /// for `ofb`.
    pub const fn max_key_len(self) -> usize {
        match self {
            Profile::Ietf | Profile::Stripe => 255,
            Profile::Ofb => 40,
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `Retry-After` of a 409 (a request with this key is in flight), in
/// seconds, by default.
pub const DEFAULT_RETRY_AFTER_SECONDS: u32 = 1;

/// The default [`Options::max_stored_bytes`]: 1 MiB.
pub const DEFAULT_MAX_STORED_BYTES: u64 = 1 << 20;

/// The default [`Options::max_body_bytes`]: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;

/// The stored response headers a replay restores by default.
pub const DEFAULT_REPLAY_HEADERS: [&str; 2] = ["Location", "Content-Type"];

/// A profile and how it is configured: everything the HTTP rules need that
/// is a choice of the server, not of the request.
///
/// ```
/// use intentkey::http::{Options, Profile};
/// let mut options = Options::new(Profile::Ietf);
/// assert!(!options.strict_key_syntax);
/// assert_eq!(options.retry_after_seconds, 1);
/// assert_eq!(options.replay_headers, ["Location", "Content-Type"]);
/// options.replay_headers.push("ETag".into());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The convention followed.
    pub profile: Profile,
    /// `ietf` only: accept only the RFC 8941 sf-string the draft asks for
    /// (`Idempotency-Key: "abc"`), and refuse a bare token
    /// (`Idempotency-Key: abc`) with `idempotency-key-invalid`.
    ///
    /// Off by default: most clients send a bare key, so `ietf` takes both.
    /// A value that starts with `"` is always read as an sf-string; any other
    /// value is a bare token: 1 to 255 visible ASCII characters (0x21 to
    /// 0x7E) with no `"` and no `,` (a comma separates several values), and
    /// it is the same key as its quoted form (`abc` and `"abc"` are one key).
    /// Ignored by the other profiles, whose keys are always bare.
    pub strict_key_syntax: bool,
    /// The `Retry-After` of a 409, in seconds ([`DEFAULT_RETRY_AFTER_SECONDS`]).
    pub retry_after_seconds: u32,
    /// The stored response headers a replay restores, matched
    /// case-insensitively ([`DEFAULT_REPLAY_HEADERS`] plus whatever the
    /// server adds). Hop-by-hop headers, `Content-Length` and
    /// `Idempotent-Replayed` are never replayed, even if listed.
    pub replay_headers: Vec<String>,
    /// Whether a request without a key is refused (400, the default) or
    /// runs its handler unguarded ([`Admission::Unguarded`](super::Admission::Unguarded)).
    pub key_required: bool,
    /// The largest body fingerprinted, in bytes ([`DEFAULT_MAX_BODY_BYTES`]);
    /// a larger one is answered 413 and runs nothing.
    pub max_body_bytes: u64,
    /// The largest answer body kept for replays, in bytes
    /// ([`DEFAULT_MAX_STORED_BYTES`]). A larger answer is sent once and not
    /// kept: the record stores [`Options::capture`]'s "answer not kept"
    /// instead, and the request is never run again for that key.
    pub max_stored_bytes: u64,
    /// How long a retry that finds its key in flight waits for the first
    /// attempt's answer, in milliseconds, before the 409 (0, the default:
    /// no wait). The fingerprint is compared first, so another payload is
    /// answered at once; see [`crate::claim::wait`]. At most
    /// [`crate::claim::WAIT_MAX_MS_LIMIT`].
    pub wait_max_ms: u32,
}

impl Options {
    /// The profile with the documented defaults.
    pub fn new(profile: Profile) -> Self {
        Options {
            profile,
            strict_key_syntax: false,
            retry_after_seconds: DEFAULT_RETRY_AFTER_SECONDS,
            replay_headers: DEFAULT_REPLAY_HEADERS.map(String::from).to_vec(),
            key_required: true,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_stored_bytes: DEFAULT_MAX_STORED_BYTES,
            wait_max_ms: 0,
        }
    }
}

impl Options {
    /// These options, checked: what no endpoint can use is an error.
    ///
    /// # Errors
    /// `invalid-argument` on field `wait-max-ms` for a wait longer than
    /// [`crate::claim::WAIT_MAX_MS_LIMIT`].
    pub fn checked(self) -> crate::Result<Self> {
        crate::claim::check_wait_max_ms("wait-max-ms", self.wait_max_ms)?;
        Ok(self)
    }
}

impl Default for Options {
    /// [`Options::new`] of [`Profile::Ietf`].
    fn default() -> Self {
        Options::new(Profile::default())
    }
}
