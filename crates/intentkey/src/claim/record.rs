//! The stored record: one intent's claim, its owner and its answer.

use std::fmt;

/// How long a `done` record is kept by default: 24 hours, the shortest replay
/// horizon a caller should assume (Stripe keeps keys at least that long).
pub const DEFAULT_TTL_SECONDS: i64 = 86_400;

/// How long a claim may run before recovery may ask the destination about it,
/// by default: 5 minutes. A younger `in_flight` record is "not due": its owner
/// may still be running.
pub const DEFAULT_STALE_AFTER_SECONDS: i64 = 300;

/// The waits between destination look-ups while the answer is `unknown`:
/// 1, 2 and 4 minutes. After the last, the record needs reconciliation.
pub const LOOKUP_BACKOFF_SECONDS: [i64; 3] = [60, 120, 240];

/// How long an owner waits before each new try of a finish the store could
/// not take (`store-unavailable`), in milliseconds: about 3 s in all, the
/// time a database restart takes. Past them the record stays in flight for
/// recovery. A try after one whose acknowledgement was lost writes nothing
/// (it is fenced on the owner token) and reports `superseded`. Every HTTP
/// host retries its completions on this one schedule.
pub const FINISH_RETRY_DELAYS_MS: [u32; 5] = [100, 200, 400, 800, 1600];

/// The default deadline of one store call, in milliseconds: a call that has
/// not answered by then is a failure that trying again may cure (the
/// profile's 503 before the claim decided, a retried completion after the
/// handler ran), never a hang. Hosts apply it to every store call; an
/// option changes it.
pub const STORE_DEADLINE_MS: u32 = 2_000;

/// The number of random bytes in an owner token (printed as 32 hex).
pub const OWNER_TOKEN_BYTES: usize = 16;

/// A record's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Claimed; the effect may be running. Never released by TTL.
    InFlight,
    /// Completed; the stored response is replayed on every repeat.
    Done,
    /// The destination could not say whether the effect happened; a person
    /// must decide. Still blocks re-execution.
    NeedsReconciliation,
}

impl Status {
    /// Every status, in the order above.
    pub const ALL: [Status; 3] = [Status::InFlight, Status::Done, Status::NeedsReconciliation];

    /// The stored form: `in_flight`, `done` or `needs_reconciliation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InFlight => "in_flight",
            Status::Done => "done",
            Status::NeedsReconciliation => "needs_reconciliation",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|status| status.as_str() == s)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored response: what the effect answered, success or error, replayed verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Response {
    /// HTTP-style status code.
    pub status: u16,
    /// Media type of `body`.
    pub content_type: String,
    /// Replayable headers (`Location`, …), in order, as (name, value).
    pub headers: Vec<(String, String)>,
    /// The body, as bytes: replayed byte for byte, text or binary.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a media type and a body of any bytes.
    ///
    /// ```
    /// use intentkey::claim::Response;
    /// let pdf = Response::new(200, "application/pdf", b"%PDF-1.7\n\x00\xff".to_vec());
    /// assert_eq!((pdf.body.len(), pdf.body_text()), (11, None));
    /// ```
    pub fn new(status: u16, content_type: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A JSON response with no extra headers.
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Response::new(status, "application/json", body.into().into_bytes())
    }

    /// The body as text, when it is UTF-8.
    pub fn body_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }

    /// The same response with one more replayable header.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// One attempt at an intent: what a claim needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The intent's idempotency key (the store's primary key).
    pub key: String,
    /// The payload fingerprint stored beside the key.
    pub fingerprint: String,
    /// The tenant.
    pub tenant_id: String,
    /// The action type.
    pub action_type: String,
    /// The same request keyed under the previous secret, during a rotation
    /// window ([`crate::Keyring::prior_at`]): the claim reads that record
    /// first and answers from it when it exists, so a retry that straddles
    /// a rotation never runs the effect twice. `None` outside a window and
    /// for `fields`/`intent-hmac` keys (they keep their intent's secret).
    pub prior: Option<PriorKey>,
}

/// An attempt's key and fingerprint under the previous secret of a keyring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorKey {
    /// The storage key under the previous secret.
    pub key: String,
    /// The fingerprint under the previous secret.
    pub fingerprint: String,
}

/// One intent's record in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The idempotency key (primary key, globally unique).
    pub key: String,
    /// The payload fingerprint stored beside the key.
    pub fingerprint: String,
    /// The tenant.
    pub tenant_id: String,
    /// The action type.
    pub action_type: String,
    /// The state.
    pub status: Status,
    /// The owner's token: every write after the claim compares and sets it.
    pub owner_token: String,
    /// The stored response, once done.
    pub response: Option<Response>,
    /// When the record was claimed, or taken over for re-execution (seconds).
    pub created_at: i64,
    /// When a `done` record may be purged; `None` while not done.
    pub expires_at: Option<i64>,
    /// Destination look-ups made during recovery.
    pub lookups: u32,
    /// When the next recovery look-up is due, if one is scheduled.
    pub next_lookup_at: Option<i64>,
}

impl Record {
    /// A fresh `in_flight` record owned by `owner_token`, as a claim inserts it.
    pub fn in_flight(attempt: &Attempt, owner_token: &str, now: i64) -> Self {
        Record {
            key: attempt.key.clone(),
            fingerprint: attempt.fingerprint.clone(),
            tenant_id: attempt.tenant_id.clone(),
            action_type: attempt.action_type.clone(),
            status: Status::InFlight,
            owner_token: owner_token.to_owned(),
            response: None,
            created_at: now,
            expires_at: None,
            lookups: 0,
            next_lookup_at: None,
        }
    }

    /// Completes the record: `done`, with the response and an expiry `ttl_seconds`
    /// from now (only `done` records carry a TTL).
    pub fn complete(&mut self, response: Response, now: i64, ttl_seconds: i64) {
        self.status = Status::Done;
        self.response = Some(response);
        self.expires_at = Some(done_expiry(now, ttl_seconds));
        self.next_lookup_at = None;
    }
}

/// The expiry of a record completed at `now`: `now + ttl` (at least one second).
pub fn done_expiry(now: i64, ttl_seconds: i64) -> i64 {
    now.saturating_add(ttl_seconds.max(1))
}

/// An owner token from [`OWNER_TOKEN_BYTES`] random bytes the host supplies:
/// 32 lowercase hex. The core has no randomness of its own.
///
/// ```
/// assert_eq!(intentkey::claim::owner_token([0xab; 16]), "ab".repeat(16));
/// ```
pub fn owner_token(random: [u8; OWNER_TOKEN_BYTES]) -> String {
    crate::key::to_hex(&random)
}

/// [`owner_token`] from a slice, which must hold exactly 16 bytes.
///
/// # Errors
/// `invalid-random` when `random` is not 16 bytes long.
pub fn owner_token_from_slice(random: &[u8]) -> crate::Result<String> {
    let bytes: [u8; OWNER_TOKEN_BYTES] = random.try_into().map_err(|_| {
        crate::Error::field(
            crate::ErrorCode::InvalidRandom,
            "random",
            format!(
                "an owner token needs exactly {OWNER_TOKEN_BYTES} random bytes; the host gave {}",
                random.len()
            ),
        )
    })?;
    Ok(owner_token(bytes))
}

/// Keeps the `limit` oldest of `records` (by `created_at`, then key: the
/// order of the SQL stores' `ORDER BY created_at, key`), in that order: how
/// the stores that list in parts (Redis buckets, DynamoDB partitions) merge.
pub(crate) fn oldest_first(mut records: Vec<Record>, limit: u32) -> Vec<Record> {
    records.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
    records.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    records
}
