//! Claim, replay and recovery decisions: pure functions over a stored record.
//!
//! The store is the source of truth. A host inserts the record with
//! `insert … on conflict do nothing` (never check-then-insert); if the insert
//! lost, it reads the existing record and asks [`decide_existing`] what the
//! attempt gets. These functions do no I/O and read no clock: the host passes
//! `now` in, so async hosts (Node with `pg`) drive their own I/O and still
//! share every rule.
//!
//! | situation | store state | [`ClaimOutcome`] | HTTP |
//! |---|---|---|---|
//! | first time | absent | `Owned`: run the effect | — |
//! | repeat after completion | `done` | `Done`: replay the stored response | stored |
//! | repeat while the original runs | `in_flight` | `InFlight` | 409 |
//! | same key, other payload | fingerprint differs | `PayloadConflict` | 422 |
//! | key missing where required | — | — | 400 |
//!
//! ```
//! use intentkey::claim::{decide_existing, ClaimOutcome, Record, Response};
//!
//! let mut record = Record::in_flight("k1", "fp-a", "tenant-1", "pix.send", 1_700_000_000);
//! assert_eq!(decide_existing(&record, "fp-a"), ClaimOutcome::InFlight);
//! assert_eq!(decide_existing(&record, "fp-b"), ClaimOutcome::PayloadConflict);
//!
//! record.complete(Response::json(201, r#"{"id":"pay_1"}"#), 1_700_000_005, 86_400);
//! assert!(matches!(decide_existing(&record, "fp-a"), ClaimOutcome::Done(r) if r.status == 201));
//! ```

use std::fmt;

use subtle::ConstantTimeEq;

/// How long a `done` record is kept by default: 24 hours, the shortest replay
/// horizon a caller should assume (Stripe keeps keys at least that long).
pub const DEFAULT_TTL_SECONDS: i64 = 86_400;

/// The waits between destination look-ups while the answer is `unknown`:
/// 1, 2 and 4 minutes. After the last, the record needs reconciliation.
pub const LOOKUP_BACKOFF_SECONDS: [i64; 3] = [60, 120, 240];

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
        match s {
            "in_flight" => Some(Status::InFlight),
            "done" => Some(Status::Done),
            "needs_reconciliation" => Some(Status::NeedsReconciliation),
            _ => None,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored response: what the effect answered, success or error, replayed verbatim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// HTTP-style status code.
    pub status: u16,
    /// Media type of `body`.
    pub content_type: String,
    /// The body, as text.
    pub body: String,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type: "application/json".into(),
            body: body.into(),
        }
    }
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
    /// The stored response, once done.
    pub response: Option<Response>,
    /// When the record was claimed (seconds).
    pub created_at: i64,
    /// When a `done` record may be purged; `None` while not done.
    pub expires_at: Option<i64>,
    /// Destination look-ups made during recovery.
    pub lookups: u32,
    /// When the next recovery look-up is due, if one is scheduled.
    pub next_lookup_at: Option<i64>,
}

impl Record {
    /// A fresh `in_flight` record, as a claim inserts it.
    pub fn in_flight(
        key: &str,
        fingerprint: &str,
        tenant_id: &str,
        action_type: &str,
        now: i64,
    ) -> Self {
        Record {
            key: key.to_owned(),
            fingerprint: fingerprint.to_owned(),
            tenant_id: tenant_id.to_owned(),
            action_type: action_type.to_owned(),
            status: Status::InFlight,
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

/// What an attempt gets from its claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This attempt owns the effect: run it, then complete the record.
    Owned,
    /// The original attempt is still running (or awaits reconciliation): 409.
    InFlight,
    /// Already done: replay this stored response.
    Done(Response),
    /// The same key came with another payload: 422.
    PayloadConflict,
}

impl ClaimOutcome {
    /// `owned`, `in-flight`, `done` or `payload-conflict`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ClaimOutcome::Owned => "owned",
            ClaimOutcome::InFlight => "in-flight",
            ClaimOutcome::Done(_) => "done",
            ClaimOutcome::PayloadConflict => "payload-conflict",
        }
    }
}

/// The outcome of a claim whose insert lost to `existing`.
///
/// The fingerprint is compared first (in constant time): a different payload
/// under the same key is a conflict whatever the record's state.
pub fn decide_existing(existing: &Record, fingerprint: &str) -> ClaimOutcome {
    let same: bool = existing
        .fingerprint
        .as_bytes()
        .ct_eq(fingerprint.as_bytes())
        .into();
    if !same {
        return ClaimOutcome::PayloadConflict;
    }
    match (existing.status, &existing.response) {
        (Status::Done, Some(response)) => ClaimOutcome::Done(response.clone()),
        _ => ClaimOutcome::InFlight,
    }
}

/// An HTTP answer for a claim that does not run the effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpAnswer {
    /// Status code.
    pub status: u16,
    /// Media type (`application/problem+json` for problems, RFC 9457).
    pub content_type: String,
    /// Body.
    pub body: String,
    /// Whether this is a replay of a stored response.
    pub replayed: bool,
}

fn problem(status: u16, kind: &str, title: &str, detail: &str) -> HttpAnswer {
    let mut body = serde_json::Map::new();
    body.insert(
        "type".into(),
        format!("urn:intentkey:problem:{kind}").into(),
    );
    body.insert("title".into(), title.into());
    body.insert("status".into(), status.into());
    body.insert("detail".into(), detail.into());
    HttpAnswer {
        status,
        content_type: "application/problem+json".into(),
        body: serde_json::Value::Object(body).to_string(),
        replayed: false,
    }
}

/// The HTTP answer for a claim outcome, or `None` when the attempt owns the
/// effect and must run it.
///
/// ```
/// use intentkey::claim::{http_answer, ClaimOutcome};
/// let answer = http_answer(&ClaimOutcome::InFlight).unwrap();
/// assert_eq!(answer.status, 409);
/// assert_eq!(answer.content_type, "application/problem+json");
/// assert!(http_answer(&ClaimOutcome::Owned).is_none());
/// ```
pub fn http_answer(outcome: &ClaimOutcome) -> Option<HttpAnswer> {
    match outcome {
        ClaimOutcome::Owned => None,
        ClaimOutcome::Done(response) => Some(HttpAnswer {
            status: response.status,
            content_type: response.content_type.clone(),
            body: response.body.clone(),
            replayed: true,
        }),
        ClaimOutcome::InFlight => Some(problem(
            409,
            "request-in-flight",
            "A request with this idempotency key is in progress",
            "The original request has not completed. Retry later with the same key; do not change it.",
        )),
        ClaimOutcome::PayloadConflict => Some(problem(
            422,
            "idempotency-key-reused",
            "This idempotency key was used with a different payload",
            "The key belongs to an earlier request whose payload differs. Send that payload again, or make a new intent with a new key.",
        )),
    }
}

/// The 400 answer when a required idempotency key is missing.
pub fn missing_key_answer(header: &str) -> HttpAnswer {
    problem(
        400,
        "idempotency-key-missing",
        "An idempotency key is required",
        &format!("Send the intent's key in the `{header}` header, the same on every retry."),
    )
}

/// What the destination says when asked, with the same key, whether the
/// effect happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The effect happened; this is its outcome.
    Found(Response),
    /// The destination has no record of the key.
    Absent,
    /// The destination could not say (timeout, 5xx, lagging replica).
    Unknown,
}

/// What recovery does with an `in_flight` record after a look-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryAction {
    /// Record the found outcome: the record becomes `done` with this response.
    RecordDone(Response),
    /// The destination is read-your-writes and says absent: the effect did not
    /// happen, so the owner may run it again, with the same key.
    ReExecute,
    /// Ask again later; the record stays `in_flight`.
    CheckLater {
        /// Look-ups made so far, this one included.
        lookups: u32,
        /// When to ask next.
        next_lookup_at: i64,
    },
    /// Give up asking: the record moves to `needs_reconciliation`.
    Reconcile {
        /// Look-ups made, this one included.
        lookups: u32,
    },
}

/// Decides what a look-up means for `record`. `Unknown` never re-executes;
/// `Absent` counts as unknown unless the destination is `read_your_writes`.
///
/// ```
/// use intentkey::claim::{decide_recovery, Lookup, Record, RecoveryAction};
/// let mut record = Record::in_flight("k", "fp", "t", "a", 0);
/// let mut now = 1_000;
/// let mut waits = Vec::new();
/// loop {
///     match decide_recovery(&record, &Lookup::Unknown, false, now) {
///         RecoveryAction::CheckLater { lookups, next_lookup_at } => {
///             waits.push(next_lookup_at - now);
///             record.lookups = lookups;
///             now = next_lookup_at;
///         }
///         RecoveryAction::Reconcile { lookups } => { assert_eq!(lookups, 4); break; }
///         other => panic!("{other:?}"),
///     }
/// }
/// assert_eq!(waits, [60, 120, 240]);
/// ```
pub fn decide_recovery(
    record: &Record,
    lookup: &Lookup,
    read_your_writes: bool,
    now: i64,
) -> RecoveryAction {
    let lookups = record.lookups.saturating_add(1);
    match lookup {
        Lookup::Found(response) => RecoveryAction::RecordDone(response.clone()),
        Lookup::Absent if read_your_writes => RecoveryAction::ReExecute,
        Lookup::Absent | Lookup::Unknown => {
            match LOOKUP_BACKOFF_SECONDS.get(record.lookups as usize) {
                Some(wait) => RecoveryAction::CheckLater {
                    lookups,
                    next_lookup_at: now.saturating_add(*wait),
                },
                None => RecoveryAction::Reconcile { lookups },
            }
        }
    }
}

/// Whether an `in_flight` record is due a recovery look-up at `now`: its
/// scheduled look-up has come, or (none scheduled yet) it has been in flight
/// for `stale_after` seconds. Being due never releases it: it only means the
/// destination is asked.
pub fn recovery_due(record: &Record, now: i64, stale_after: i64) -> bool {
    record.status == Status::InFlight
        && match record.next_lookup_at {
            Some(at) => at <= now,
            None => record.created_at.saturating_add(stale_after) <= now,
        }
}

/// Whether a record may be purged at `now`: only `done` records past their expiry.
pub fn purgeable(record: &Record, now: i64) -> bool {
    record.status == Status::Done && record.expires_at.is_some_and(|at| at <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_is_never_purgeable_whatever_its_age() {
        let record = Record::in_flight("k", "fp", "t", "a", 0);
        assert!(!purgeable(&record, i64::MAX));
        let mut done = record.clone();
        done.complete(Response::json(200, "{}"), 10, 5);
        assert!(!purgeable(&done, 14));
        assert!(purgeable(&done, 15));
    }

    #[test]
    fn reconciliation_still_blocks_re_execution() {
        let mut record = Record::in_flight("k", "fp", "t", "a", 0);
        record.status = Status::NeedsReconciliation;
        assert_eq!(decide_existing(&record, "fp"), ClaimOutcome::InFlight);
        assert!(!recovery_due(&record, i64::MAX, 0));
    }

    #[test]
    fn absent_is_trusted_only_from_read_your_writes_destinations() {
        let record = Record::in_flight("k", "fp", "t", "a", 0);
        assert_eq!(
            decide_recovery(&record, &Lookup::Absent, true, 5),
            RecoveryAction::ReExecute
        );
        assert_eq!(
            decide_recovery(&record, &Lookup::Absent, false, 5),
            RecoveryAction::CheckLater {
                lookups: 1,
                next_lookup_at: 65
            }
        );
    }

    #[test]
    fn replays_errors_too() {
        let mut record = Record::in_flight("k", "fp", "t", "a", 0);
        record.complete(
            Response::json(402, r#"{"error":"insufficient_funds"}"#),
            1,
            60,
        );
        let answer = http_answer(&decide_existing(&record, "fp")).unwrap();
        assert_eq!((answer.status, answer.replayed), (402, true));
    }
}

/// The conditional operations a store offers. The core drives them through
/// [`claim_in`], [`complete_in`] and [`recover_in`]: hosts (and the
/// component's `store` import) supply the I/O, the core supplies the order
/// and every decision.
pub trait ClaimStore {
    /// The store's error.
    type Error;
    /// `insert … on conflict do nothing`: `true` when this call inserted.
    ///
    /// # Errors
    /// The store's.
    fn insert_if_absent(&mut self, record: &Record) -> Result<bool, Self::Error>;
    /// Reads one record.
    ///
    /// # Errors
    /// The store's.
    fn get(&mut self, key: &str) -> Result<Option<Record>, Self::Error>;
    /// Overwrites the record's mutable fields only if the stored one is still
    /// `in_flight`: `true` when it did.
    ///
    /// # Errors
    /// The store's.
    fn replace_in_flight(&mut self, record: &Record) -> Result<bool, Self::Error>;
}

/// A failure while driving a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveError<E> {
    /// The store failed.
    Store(E),
    /// The record vanished between the insert that lost and the read (it was
    /// purged three times in a row): try again.
    Vanished,
}

/// Claims `record.key` in `store`: inserts `record` (`in_flight`) unless the
/// key exists; otherwise decides from the stored record. Never
/// check-then-insert.
///
/// ```
/// use intentkey::claim::{claim_in, ClaimOutcome, ClaimStore, Record};
/// use std::collections::HashMap;
///
/// struct Map(HashMap<String, Record>);
/// impl ClaimStore for Map {
///     type Error = ();
///     fn insert_if_absent(&mut self, r: &Record) -> Result<bool, ()> {
///         if self.0.contains_key(&r.key) { return Ok(false); }
///         self.0.insert(r.key.clone(), r.clone());
///         Ok(true)
///     }
///     fn get(&mut self, key: &str) -> Result<Option<Record>, ()> { Ok(self.0.get(key).cloned()) }
///     fn replace_in_flight(&mut self, r: &Record) -> Result<bool, ()> { Ok(self.0.insert(r.key.clone(), r.clone()).is_some()) }
/// }
/// let mut store = Map(HashMap::new());
/// let record = Record::in_flight("k", "fp", "t", "a", 0);
/// assert_eq!(claim_in(&mut store, &record), Ok(ClaimOutcome::Owned));
/// assert_eq!(claim_in(&mut store, &record), Ok(ClaimOutcome::InFlight));
/// ```
///
/// # Errors
/// The store's errors; [`DriveError::Vanished`] in the rare purge race.
pub fn claim_in<S: ClaimStore>(
    store: &mut S,
    record: &Record,
) -> Result<ClaimOutcome, DriveError<S::Error>> {
    for _ in 0..3 {
        if store.insert_if_absent(record).map_err(DriveError::Store)? {
            return Ok(ClaimOutcome::Owned);
        }
        if let Some(existing) = store.get(&record.key).map_err(DriveError::Store)? {
            return Ok(decide_existing(&existing, &record.fingerprint));
        }
    }
    Err(DriveError::Vanished)
}

/// Completes the `in_flight` record `key` with `response`; `false` when there
/// is no such in-flight record (already done, recovered or reconciled).
///
/// # Errors
/// The store's errors.
pub fn complete_in<S: ClaimStore>(
    store: &mut S,
    key: &str,
    response: Response,
    now: i64,
    ttl_seconds: i64,
) -> Result<bool, DriveError<S::Error>> {
    match store.get(key).map_err(DriveError::Store)? {
        Some(mut record) if record.status == Status::InFlight => {
            record.complete(response, now, ttl_seconds);
            store.replace_in_flight(&record).map_err(DriveError::Store)
        }
        _ => Ok(false),
    }
}

/// Applies a recovery decision to the record; `false` when there is nothing
/// to write (a re-execute decision leaves the record to its owner, who runs
/// the effect again with the same key and then completes it).
pub fn apply_recovery(
    record: &mut Record,
    action: &RecoveryAction,
    now: i64,
    ttl_seconds: i64,
) -> bool {
    match action {
        RecoveryAction::RecordDone(response) => record.complete(response.clone(), now, ttl_seconds),
        RecoveryAction::ReExecute => return false,
        RecoveryAction::CheckLater {
            lookups,
            next_lookup_at,
        } => {
            record.lookups = *lookups;
            record.next_lookup_at = Some(*next_lookup_at);
        }
        RecoveryAction::Reconcile { lookups } => {
            record.lookups = *lookups;
            record.next_lookup_at = None;
            record.status = Status::NeedsReconciliation;
        }
    }
    true
}

/// Recovers the `in_flight` record `key`: asks `lookup` (the destination,
/// with the same key), decides, and writes the decision. `None` when there is
/// no in-flight record under `key`.
///
/// # Errors
/// The store's errors.
pub fn recover_in<S: ClaimStore>(
    store: &mut S,
    key: &str,
    lookup: impl FnOnce(&str) -> Lookup,
    read_your_writes: bool,
    now: i64,
    ttl_seconds: i64,
) -> Result<Option<RecoveryAction>, DriveError<S::Error>> {
    let Some(mut record) = store.get(key).map_err(DriveError::Store)? else {
        return Ok(None);
    };
    if record.status != Status::InFlight {
        return Ok(None);
    }
    let action = decide_recovery(&record, &lookup(key), read_your_writes, now);
    if apply_recovery(&mut record, &action, now, ttl_seconds) {
        store
            .replace_in_flight(&record)
            .map_err(DriveError::Store)?;
    }
    Ok(Some(action))
}
