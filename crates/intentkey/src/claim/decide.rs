//! The decisions: pure functions over a stored record and what happened.

use subtle::ConstantTimeEq;

use super::record::{Record, Response, Status, DEFAULT_TTL_SECONDS, LOOKUP_BACKOFF_SECONDS};

/// What an attempt gets from its claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This attempt owns the effect: run it, then finish the record.
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

/// What the effect reported back to the guard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EffectResult {
    /// The effect answered (success or error): this is its response.
    Answered(Response),
    /// The effect declares that nothing happened: it refused before any side
    /// effect. The answer (if any) goes to the caller but is not stored.
    Refused(Option<Response>),
    /// The effect failed without an answer: a throw, a crash, a timeout. It
    /// may or may not have happened.
    Failed,
}

/// The three outcome classes of an owned attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeClass {
    /// The effect answered: the response is stored and replayed.
    Terminal,
    /// Nothing happened: the record is deleted under the owner's token, and a
    /// retry runs the effect.
    Released,
    /// Nobody knows whether it happened: the record stays `in_flight` and
    /// recovery asks the destination.
    Ambiguous,
}

impl OutcomeClass {
    /// `terminal`, `released` or `ambiguous`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeClass::Terminal => "terminal",
            OutcomeClass::Released => "released",
            OutcomeClass::Ambiguous => "ambiguous",
        }
    }
}

/// The statuses that release a claim by default: 429 Too Many Requests and
/// 503 Service Unavailable, answered before any side effect. A handler whose
/// 503 can follow a side effect must take 503 out of [`Rules::release_statuses`].
pub const DEFAULT_RELEASE_STATUSES: [u16; 2] = [429, 503];

/// How a guard treats outcomes: the documented defaults are
/// [`DEFAULT_TTL_SECONDS`] and [`DEFAULT_RELEASE_STATUSES`], with durable
/// completions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// How long `done` records are kept: the worst redelivery horizon of the callers.
    pub ttl_seconds: i64,
    /// Answered statuses that mean "nothing happened, retry": released, not stored.
    pub release_statuses: Vec<u16>,
    /// Completion commits that do not wait for the disk. A completion lost in
    /// a crash leaves the record `in_flight`, and recovery settles it by asking
    /// the destination; safe only where the destination answers look-ups.
    pub fast_completion: bool,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            ttl_seconds: DEFAULT_TTL_SECONDS,
            release_statuses: DEFAULT_RELEASE_STATUSES.to_vec(),
            fast_completion: false,
        }
    }
}

/// The class of an effect's result under `rules`.
///
/// ```
/// use intentkey::claim::{classify, EffectResult, OutcomeClass, Response, Rules};
/// let rules = Rules::default();
/// assert_eq!(classify(&EffectResult::Answered(Response::json(201, "{}")), &rules), OutcomeClass::Terminal);
/// assert_eq!(classify(&EffectResult::Answered(Response::json(500, "{}")), &rules), OutcomeClass::Terminal);
/// assert_eq!(classify(&EffectResult::Answered(Response::json(429, "{}")), &rules), OutcomeClass::Released);
/// assert_eq!(classify(&EffectResult::Refused(None), &rules), OutcomeClass::Released);
/// assert_eq!(classify(&EffectResult::Failed, &rules), OutcomeClass::Ambiguous);
/// ```
pub fn classify(result: &EffectResult, rules: &Rules) -> OutcomeClass {
    match result {
        EffectResult::Answered(r) if rules.release_statuses.contains(&r.status) => {
            OutcomeClass::Released
        }
        EffectResult::Answered(_) => OutcomeClass::Terminal,
        EffectResult::Refused(_) => OutcomeClass::Released,
        EffectResult::Failed => OutcomeClass::Ambiguous,
    }
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
    /// happen, so the recoverer takes the record over (a new owner token) and
    /// runs it again, with the same key.
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

impl RecoveryAction {
    /// `record-done`, `re-execute`, `check-later` or `reconcile`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RecoveryAction::RecordDone(_) => "record-done",
            RecoveryAction::ReExecute => "re-execute",
            RecoveryAction::CheckLater { .. } => "check-later",
            RecoveryAction::Reconcile { .. } => "reconcile",
        }
    }
}

/// Decides what a look-up means for `record`. `Unknown` never re-executes;
/// `Absent` counts as unknown unless the destination is `read_your_writes`.
///
/// ```
/// use intentkey::claim::{decide_recovery, Attempt, Lookup, Record, RecoveryAction};
/// let attempt = Attempt { key: "k".into(), fingerprint: "fp".into(), tenant_id: "t".into(), action_type: "a".into(), prior: None };
/// let mut record = Record::in_flight(&attempt, "token", 0);
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

/// When an `in_flight` record becomes due a recovery look-up: its scheduled
/// look-up, or (none scheduled yet) `stale_after` seconds after its claim.
pub fn recovery_due_at(record: &Record, stale_after: i64) -> i64 {
    record
        .next_lookup_at
        .unwrap_or_else(|| record.created_at.saturating_add(stale_after.max(0)))
}

/// Whether an `in_flight` record is due a recovery look-up at `now` (see
/// [`recovery_due_at`]). Being due never releases it: it only means the
/// destination is asked.
pub fn recovery_due(record: &Record, now: i64, stale_after: i64) -> bool {
    record.status == Status::InFlight && recovery_due_at(record, stale_after) <= now
}

/// The record after a recovery decision that writes (every action but
/// [`RecoveryAction::ReExecute`], which takes the record over instead; see
/// [`take_over`]).
pub fn recovered(record: &Record, action: &RecoveryAction, now: i64, ttl_seconds: i64) -> Record {
    let mut next = record.clone();
    match action {
        RecoveryAction::RecordDone(response) => next.complete(response.clone(), now, ttl_seconds),
        RecoveryAction::ReExecute => {}
        RecoveryAction::CheckLater {
            lookups,
            next_lookup_at,
        } => {
            next.lookups = *lookups;
            next.next_lookup_at = Some(*next_lookup_at);
        }
        RecoveryAction::Reconcile { lookups } => {
            next.lookups = *lookups;
            next.next_lookup_at = None;
            next.status = Status::NeedsReconciliation;
        }
    }
    next
}

/// The record taken over for re-execution by `new_token` at `now`: a fresh
/// claim under the same key, so the previous owner's late writes are refused.
pub fn take_over(record: &Record, new_token: &str, now: i64) -> Record {
    Record {
        owner_token: new_token.to_owned(),
        created_at: now,
        lookups: 0,
        next_lookup_at: None,
        ..record.clone()
    }
}

/// Whether a record may be purged at `now`: only `done` records past their expiry.
pub fn purgeable(record: &Record, now: i64) -> bool {
    record.status == Status::Done && record.expires_at.is_some_and(|at| at <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::Attempt;

    fn record() -> Record {
        let attempt = Attempt {
            key: "k".into(),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
            prior: None,
        };
        Record::in_flight(&attempt, "token", 0)
    }

    #[test]
    fn in_flight_is_never_purgeable_whatever_its_age() {
        let record = record();
        assert!(!purgeable(&record, i64::MAX));
        let mut done = record.clone();
        done.complete(Response::json(200, "{}"), 10, 5);
        assert!(!purgeable(&done, 14));
        assert!(purgeable(&done, 15));
    }

    #[test]
    fn reconciliation_still_blocks_re_execution() {
        let mut record = record();
        record.status = Status::NeedsReconciliation;
        assert_eq!(decide_existing(&record, "fp"), ClaimOutcome::InFlight);
        assert!(!recovery_due(&record, i64::MAX, 0));
    }

    #[test]
    fn absent_is_trusted_only_from_read_your_writes_destinations() {
        let record = record();
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
    fn a_fresh_claim_is_not_due() {
        let record = record();
        assert!(!recovery_due(&record, 299, 300));
        assert!(recovery_due(&record, 300, 300));
    }

    #[test]
    fn release_statuses_are_configurable() {
        let mut rules = Rules::default();
        let answered = EffectResult::Answered(Response::json(503, "{}"));
        assert_eq!(classify(&answered, &rules), OutcomeClass::Released);
        rules.release_statuses.clear();
        assert_eq!(classify(&answered, &rules), OutcomeClass::Terminal);
    }

    #[test]
    fn a_take_over_changes_the_owner_and_restarts_the_clock() {
        let mut record = record();
        record.lookups = 2;
        record.next_lookup_at = Some(50);
        let taken = take_over(&record, "new", 100);
        assert_eq!(
            (
                taken.owner_token.as_str(),
                taken.created_at,
                taken.lookups,
                taken.next_lookup_at
            ),
            ("new", 100, 0, None)
        );
        assert_eq!(taken.status, Status::InFlight);
    }
}
