//! The one claim flow: the order of store operations, written once.
//!
//! Each flow ([`ClaimFlow`], [`FinishFlow`], [`RecoverFlow`], [`PurgeFlow`])
//! is a sans-I/O state machine. It never touches a store: [`Flow::start`]
//! returns the first [`Op`] to perform, the host performs it (synchronously
//! or asynchronously, on any store) and hands the [`OpResult`] back to
//! [`Flow::resume`], until the flow is [`Step::Done`]. Synchronous hosts let
//! [`drive`] do that loop over a [`ClaimStore`]; async hosts (Node with `pg`,
//! tokio services) write the same three-line loop around their own I/O. No
//! host sequences claims itself.
//!
//! Every write after the claim is fenced: it compares and sets the owner
//! token written by the claim, so a superseded owner's late completion is
//! refused ([`Finished::Superseded`]) and exactly one of many concurrent
//! recoverers takes a record over.
//!
//! ```
//! use intentkey::claim::{
//!     drive, Attempt, ClaimFlow, ClaimOutcome, EffectResult, FinishFlow, Finished, MemoryClaims,
//!     Response, Rules,
//! };
//!
//! let mut store = MemoryClaims::default();
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
//! let no_destination = &mut |_: &str| unreachable!();
//!
//! let claimed = drive(ClaimFlow::new(&attempt, "owner-a", 100), &mut store, no_destination)?;
//! assert_eq!(claimed, ClaimOutcome::Owned);
//! let result = EffectResult::Answered(Response::json(201, r#"{"id":"pay_1"}"#));
//! let finished = drive(FinishFlow::new("k1", "owner-a", result, 101, &Rules::default()), &mut store, no_destination)?;
//! assert_eq!(finished, Finished::Stored);
//!
//! // A retry: the insert loses, the core reads the record and replays it.
//! let again = drive(ClaimFlow::new(&attempt, "owner-b", 102), &mut store, no_destination)?;
//! assert!(matches!(again, ClaimOutcome::Done(r) if r.status == 201));
//! # Ok::<(), intentkey::claim::DriveError<std::convert::Infallible>>(())
//! ```

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;

use super::decide::{
    classify, decide_existing, decide_recovery, purgeable, recovered, recovery_due_at, take_over,
    ClaimOutcome, EffectResult, Lookup, OutcomeClass, RecoveryAction, Rules,
};
use super::record::{done_expiry, Attempt, PriorKey, Record, Response, Status};
use super::wait::WatchRequest;

/// How many times a claim inserts again when the record it lost to vanished
/// (was purged) before it could be read.
pub const CLAIM_TRIES: u32 = 3;

/// A fenced completion: `UPDATE … SET status = 'done', response_* = …,
/// expires_at = …, next_lookup_at = NULL WHERE key = … AND status =
/// 'in_flight' AND owner_token = …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The record's key.
    pub key: String,
    /// The owner token the record must still carry.
    pub owner_token: String,
    /// The response to store.
    pub response: Response,
    /// When the done record may be purged.
    pub expires_at: i64,
    /// Whether the commit may return before the disk has it (opt-in fast
    /// completion; recovery covers its loss).
    pub fast: bool,
}

/// A fenced recovery write: every mutable column (status, owner token,
/// response, created_at, expires_at, lookups, next_lookup_at) from `record`,
/// `WHERE key = … AND status IN ('in_flight', 'needs_reconciliation') AND
/// owner_token = … AND lookups = …` (a record awaiting reconciliation is
/// written only by a human's decision, [`super::ReconcileFlow`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    /// The owner token the stored record must carry.
    pub expected_token: String,
    /// The look-ups the stored record must have made: a concurrent recoverer
    /// that wrote first has changed it.
    pub expected_lookups: u32,
    /// The record to write.
    pub record: Record,
}

/// A fenced release: `DELETE … WHERE key = … AND status = 'in_flight' AND
/// owner_token = …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// The record's key.
    pub key: String,
    /// The owner token the record must still carry.
    pub owner_token: String,
}

/// One operation the core asks the host to perform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `INSERT … ON CONFLICT (key) DO NOTHING` → [`OpResult::Inserted`].
    Insert(Record),
    /// Read one record by key → [`OpResult::Got`].
    Get(String),
    /// A fenced completion → [`OpResult::Written`].
    Complete(Completion),
    /// A fenced recovery write → [`OpResult::Written`].
    Replace(Replacement),
    /// A fenced release → [`OpResult::Written`].
    Release(Release),
    /// Records with this status, oldest first, at most `limit` → [`OpResult::Listed`].
    List {
        /// The status.
        status: Status,
        /// At most this many.
        limit: u32,
    },
    /// `DELETE … WHERE status = 'done' AND expires_at <= now` → [`OpResult::Purged`].
    Purge {
        /// The time the expiries are compared with.
        now: i64,
    },
    /// Ask the destination, with the same key, whether the effect happened →
    /// [`OpResult::Answered`].
    Ask(String),
    /// Wait this many milliseconds, then resume with [`OpResult::Waited`]:
    /// the pause before a store operation that failed is tried again
    /// (only [`crate::http::ServeFlow`] asks for it, after
    /// [`OpResult::Failed`]).
    Wait(u32),
    /// Wait for the record of the key to change (a notification from the
    /// store) or for the pause to end, whichever comes first, then resume
    /// with [`OpResult::Watched`]: a retry that found its key in flight
    /// waits for the first attempt ([`super::wait`]).
    Watch(WatchRequest),
    /// Run the effect with this key (the attempt owns it now) →
    /// [`OpResult::Effected`]. Only a [`super::RunFlow`] asks for it.
    Effect(String),
}

impl Op {
    /// `insert`, `get`, `complete`, `replace`, `release`, `list`, `purge`,
    /// `ask`, `effect`, `wait` or `watch`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Op::Insert(_) => "insert",
            Op::Get(_) => "get",
            Op::Complete(_) => "complete",
            Op::Replace(_) => "replace",
            Op::Release(_) => "release",
            Op::List { .. } => "list",
            Op::Purge { .. } => "purge",
            Op::Ask(_) => "ask",
            Op::Effect(_) => "effect",
            Op::Wait(_) => "wait",
            Op::Watch(_) => "watch",
        }
    }
}

/// What the host's operation gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// The insert took the key (`true`) or lost to an existing record.
    Inserted(bool),
    /// An answer to [`Op::Insert`] from a store that reads the record an
    /// insert loses to in the same statement (PostgreSQL: one round trip
    /// for a repeat instead of two). The claim decides on it without a
    /// [`Op::Get`]; a store that lost but could not see the winner (it
    /// committed after the statement began) answers `Inserted(false)`.
    Existing(Record),
    /// The record read, if any.
    Got(Option<Record>),
    /// Whether a fenced write changed a record.
    Written(bool),
    /// The records listed.
    Listed(Vec<Record>),
    /// How many records a purge deleted.
    Purged(u64),
    /// The destination's answer.
    Answered(Lookup),
    /// What the effect reported, and the time it ended (the done record's
    /// expiry counts from it).
    Effected(EffectResult, i64),
    /// The store operation failed. Only a flow that decides what a store
    /// failure means ([`crate::http::ServeFlow`]: 503, or finishing tried
    /// again) takes it; the others answer [`FlowError::Misuse`], so a host
    /// that drives them reports the store's error itself.
    Failed(StoreFailure),
    /// The pause of [`Op::Wait`] is over.
    Waited,
    /// The watch of [`Op::Watch`] returned: how long it lasted, and the
    /// time (seconds) it returned at.
    Watched {
        /// Milliseconds the host waited (less than asked when the store
        /// notified a change).
        elapsed_ms: u32,
        /// The time now, in seconds.
        now: i64,
    },
}

/// A store operation that failed, as the host reports it to a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreFailure {
    /// The store could not be reached (a connection refused or lost, a
    /// timeout): trying again may succeed. Otherwise the store answered with
    /// an error (a constraint, a record it cannot decode).
    pub unavailable: bool,
    /// What the store said (never a secret: stores hold keys and
    /// fingerprints, not secrets).
    pub message: String,
}

impl OpResult {
    /// The result's name, as the WIT spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            OpResult::Inserted(_) => "inserted",
            OpResult::Existing(_) => "existing",
            OpResult::Got(_) => "got",
            OpResult::Written(_) => "written",
            OpResult::Listed(_) => "listed",
            OpResult::Purged(_) => "purged",
            OpResult::Answered(_) => "answered",
            OpResult::Effected(..) => "effected",
            OpResult::Failed(_) => "failed",
            OpResult::Waited => "waited",
            OpResult::Watched { .. } => "watched",
        }
    }
}

/// The next thing a flow needs: an operation, or its answer.
// A step is made once and consumed at once; boxing the operation would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// Perform this and resume with its result.
    Io(Op),
    /// The flow is over.
    Done(T),
}

/// A flow went wrong without any store failing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowError {
    /// The record changed under the attempt [`CLAIM_TRIES`] times in a row:
    /// the record a claim lost to vanished (was purged) before it could be
    /// read, or a run's record was released, purged or taken over by a
    /// recoverer each time it claimed. Retryable: try again.
    Vanished {
        /// The key.
        key: String,
    },
    /// The host resumed the flow with the wrong kind of result, or after it
    /// was done: a bug in the host.
    Misuse {
        /// What the flow waited for.
        expected: &'static str,
        /// What it got.
        got: &'static str,
    },
}

impl FlowError {
    /// The stable error code: `record-vanished` or `flow-misuse`.
    pub fn code(&self) -> crate::ErrorCode {
        match self {
            FlowError::Vanished { .. } => crate::ErrorCode::RecordVanished,
            FlowError::Misuse { .. } => crate::ErrorCode::FlowMisuse,
        }
    }
}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowError::Vanished { key } => write!(
                f,
                "the record of key {key} changed under this attempt {CLAIM_TRIES} times in a row (purged, released or taken over by a recoverer between two of its steps); nothing was lost: try again"
            ),
            FlowError::Misuse { expected, got } => write!(
                f,
                "the host resumed a claim flow with a {got:?} result where it asked for {expected:?}: a bug in the host"
            ),
        }
    }
}

impl std::error::Error for FlowError {}

impl From<FlowError> for crate::Error {
    fn from(e: FlowError) -> Self {
        crate::Error::new(e.code(), e.to_string())
    }
}

/// A sans-I/O flow: the host performs each [`Op`] and resumes with its result.
pub trait Flow {
    /// What the flow answers when done.
    type Output;

    /// The first step.
    fn start(&mut self) -> Step<Self::Output>;

    /// The next step, given the result of the last operation.
    ///
    /// # Errors
    /// [`FlowError::Misuse`] when `result` is not what the last step asked
    /// for; [`FlowError::Vanished`] in a claim's rare purge race.
    fn resume(&mut self, result: OpResult) -> Result<Step<Self::Output>, FlowError>;
}

pub(super) fn misuse<T>(expected: &'static str, got: &OpResult) -> Result<T, FlowError> {
    Err(FlowError::Misuse {
        expected,
        got: got.as_str(),
    })
}

/// Claims a key: insert an `in_flight` record owned by a fresh token unless
/// the key exists; otherwise read the stored record and decide. Never
/// check-then-insert.
///
/// During a rotation window the attempt carries its [`PriorKey`]: the flow
/// first reads the record under the previous secret's key and, when there
/// is one, decides from it (replay, 409 or 422) and inserts nothing. Only a
/// request that was never seen under the previous secret claims the new key.
/// The read is of a key that is no longer claimed by any server whose clock
/// is past the activation, so it is not a check-then-insert of the key the
/// claim inserts.
///
/// ```
/// use intentkey::claim::{drive, Attempt, ClaimFlow, ClaimOutcome, MemoryClaims, PriorKey};
///
/// let mut store = MemoryClaims::default();
/// let old = Attempt { key: "old".into(), fingerprint: "fp-old".into(), tenant_id: "t".into(), action_type: "a".into(), prior: None };
/// let no_destination = &mut |_: &str| unreachable!();
/// // Claimed under the previous secret before the rotation, still running.
/// assert_eq!(drive(ClaimFlow::new(&old, "owner-a", 1), &mut store, no_destination)?, ClaimOutcome::Owned);
/// // The retry after the rotation finds it under its prior key: 409, no new claim.
/// let retry = Attempt { key: "new".into(), fingerprint: "fp-new".into(), prior: Some(PriorKey { key: "old".into(), fingerprint: "fp-old".into() }), ..old };
/// assert_eq!(drive(ClaimFlow::new(&retry, "owner-b", 2), &mut store, no_destination)?, ClaimOutcome::InFlight);
/// # Ok::<(), intentkey::claim::DriveError<std::convert::Infallible>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClaimFlow {
    record: Record,
    fingerprint: String,
    prior: Option<PriorKey>,
    tries: u32,
    waiting: ClaimWait,
    /// Whether the record the claim decided on (when it lost) was the
    /// prior key's, and its status.
    seen: Option<(bool, Status)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClaimWait {
    Prior,
    Insert,
    Get,
    Over,
}

impl ClaimFlow {
    /// A claim of `attempt` by `owner_token` (from [`super::owner_token`]) at `now`.
    pub fn new(attempt: &Attempt, owner_token: &str, now: i64) -> Self {
        ClaimFlow {
            record: Record::in_flight(attempt, owner_token, now),
            fingerprint: attempt.fingerprint.clone(),
            prior: attempt.prior.clone(),
            tries: 0,
            waiting: ClaimWait::Insert,
            seen: None,
        }
    }

    /// The key of the record the claim lost to, when that record was
    /// `in_flight` (its first attempt still runs, so a waiter watches this
    /// key; under a rotation it may be the prior key). `None` when the
    /// claim owns the key, or the record was done or awaits reconciliation.
    pub fn in_flight_key(&self) -> Option<&str> {
        match self.seen {
            Some((true, Status::InFlight)) => self.prior.as_ref().map(|p| p.key.as_str()),
            Some((false, Status::InFlight)) => Some(&self.record.key),
            _ => None,
        }
    }

    fn decide(&mut self, existing: &Record, prior: bool) -> ClaimOutcome {
        self.waiting = ClaimWait::Over;
        self.seen = Some((prior, existing.status));
        let fingerprint = match (&self.prior, prior) {
            (Some(p), true) => &p.fingerprint,
            _ => &self.fingerprint,
        };
        decide_existing(existing, fingerprint)
    }

    fn insert(&mut self) -> Result<Step<ClaimOutcome>, FlowError> {
        if self.tries >= CLAIM_TRIES {
            self.waiting = ClaimWait::Over;
            return Err(FlowError::Vanished {
                key: self.record.key.clone(),
            });
        }
        self.tries += 1;
        self.waiting = ClaimWait::Insert;
        Ok(Step::Io(Op::Insert(self.record.clone())))
    }
}

impl Flow for ClaimFlow {
    type Output = ClaimOutcome;

    fn start(&mut self) -> Step<ClaimOutcome> {
        if let Some(prior) = &self.prior {
            self.tries = 0;
            self.waiting = ClaimWait::Prior;
            return Step::Io(Op::Get(prior.key.clone()));
        }
        self.tries = 1;
        self.waiting = ClaimWait::Insert;
        Step::Io(Op::Insert(self.record.clone()))
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<ClaimOutcome>, FlowError> {
        match (self.waiting, result) {
            (ClaimWait::Prior, OpResult::Got(Some(existing))) => {
                Ok(Step::Done(self.decide(&existing, true)))
            }
            (ClaimWait::Prior, OpResult::Got(None)) => self.insert(),
            (ClaimWait::Prior, other) => misuse("got", &other),
            (ClaimWait::Insert, OpResult::Inserted(true)) => {
                self.waiting = ClaimWait::Over;
                Ok(Step::Done(ClaimOutcome::Owned))
            }
            (ClaimWait::Insert, OpResult::Existing(existing)) => {
                Ok(Step::Done(self.decide(&existing, false)))
            }
            (ClaimWait::Insert, OpResult::Inserted(false)) => {
                self.waiting = ClaimWait::Get;
                Ok(Step::Io(Op::Get(self.record.key.clone())))
            }
            (ClaimWait::Get, OpResult::Got(Some(existing))) => {
                Ok(Step::Done(self.decide(&existing, false)))
            }
            (ClaimWait::Get, OpResult::Got(None)) => self.insert(),
            (ClaimWait::Insert, other) => misuse("inserted", &other),
            (ClaimWait::Get, other) => misuse("got", &other),
            (ClaimWait::Over, other) => misuse("nothing (the flow is done)", &other),
        }
    }
}

/// What finishing an owned attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// A terminal answer was stored: it is replayed on every repeat.
    Stored,
    /// Nothing happened: the record was deleted under the owner's token, so a
    /// retry runs the effect.
    Released,
    /// The effect's outcome is ambiguous: the record stays `in_flight` and
    /// recovery settles it.
    LeftInFlight,
    /// The record is no longer this owner's: recovery recorded the
    /// destination's outcome, took it over for re-execution, or moved it to
    /// reconciliation. Nothing was written; the caller's answer was not stored.
    Superseded,
}

impl Finished {
    /// `stored`, `released`, `left-in-flight` or `superseded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Finished::Stored => "stored",
            Finished::Released => "released",
            Finished::LeftInFlight => "left-in-flight",
            Finished::Superseded => "superseded",
        }
    }
}

/// Finishes an owned attempt by the outcome class of its result: stores a
/// terminal answer, releases on "nothing happened", leaves an ambiguous one
/// `in_flight`. Every write is fenced on the owner token.
#[derive(Clone, Debug)]
pub struct FinishFlow {
    op: Option<Op>,
    class: OutcomeClass,
    waiting: bool,
}

impl FinishFlow {
    /// Finishes `key`, owned by `owner_token`, with the effect's `result` at `now`.
    pub fn new(
        key: &str,
        owner_token: &str,
        result: EffectResult,
        now: i64,
        rules: &Rules,
    ) -> Self {
        let class = classify(&result, rules);
        let op = match (class, result) {
            (OutcomeClass::Terminal, EffectResult::Answered(response)) => {
                Some(Op::Complete(Completion {
                    key: key.to_owned(),
                    owner_token: owner_token.to_owned(),
                    response,
                    expires_at: done_expiry(now, rules.ttl_seconds),
                    fast: rules.fast_completion,
                }))
            }
            (OutcomeClass::Released, _) => Some(Op::Release(Release {
                key: key.to_owned(),
                owner_token: owner_token.to_owned(),
            })),
            _ => None,
        };
        FinishFlow {
            op,
            class,
            waiting: false,
        }
    }

    /// The outcome class the result fell in.
    pub fn class(&self) -> OutcomeClass {
        self.class
    }
}

impl Flow for FinishFlow {
    type Output = Finished;

    fn start(&mut self) -> Step<Finished> {
        match self.op.take() {
            Some(op) => {
                self.waiting = true;
                Step::Io(op)
            }
            None => Step::Done(Finished::LeftInFlight),
        }
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<Finished>, FlowError> {
        match (self.waiting, result) {
            (true, OpResult::Written(written)) => {
                self.waiting = false;
                Ok(Step::Done(match (written, self.class) {
                    (false, _) => Finished::Superseded,
                    (true, OutcomeClass::Released) => Finished::Released,
                    (true, _) => Finished::Stored,
                }))
            }
            (true, other) => misuse("written", &other),
            (false, other) => misuse("nothing (the flow is done)", &other),
        }
    }
}

/// What a recovery did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// No record under the key.
    Missing,
    /// The record is not `in_flight` (done, or awaiting reconciliation).
    NotInFlight(Status),
    /// The record is `in_flight` but not due: its owner may still be running.
    /// Nothing was asked or written.
    NotDue {
        /// When it becomes due.
        due_at: i64,
    },
    /// The destination was asked and the decision written. For
    /// [`RecoveryAction::ReExecute`] the record now belongs to the flow's new
    /// owner token: run the effect again with the same key, then finish it
    /// with that token.
    Applied(RecoveryAction),
    /// The decision was not written: another recoverer (or the owner)
    /// changed the record first. Nothing to do.
    Lost(RecoveryAction),
}

impl Recovered {
    /// `missing`, `not-in-flight`, `not-due`, `applied` or `lost`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Recovered::Missing => "missing",
            Recovered::NotInFlight(_) => "not-in-flight",
            Recovered::NotDue { .. } => "not-due",
            Recovered::Applied(_) => "applied",
            Recovered::Lost(_) => "lost",
        }
    }
}

/// How a recovery asks and decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryRules {
    /// Records claimed less than this long ago are not due (their owner may
    /// still be running): [`super::DEFAULT_STALE_AFTER_SECONDS`] by default.
    pub stale_after: i64,
    /// Whether the destination documents read-your-writes, so that `absent`
    /// can be trusted (otherwise it counts as unknown).
    pub read_your_writes: bool,
    /// How long a record recovered as done is kept.
    pub ttl_seconds: i64,
}

impl Default for RecoveryRules {
    fn default() -> Self {
        RecoveryRules {
            stale_after: super::DEFAULT_STALE_AFTER_SECONDS,
            read_your_writes: false,
            ttl_seconds: super::DEFAULT_TTL_SECONDS,
        }
    }
}

/// Recovers one `in_flight` record: read it; if it is due, ask the
/// destination with the same key; write the core's decision fenced on the
/// owner token and look-up count it read. A re-execution takes the record
/// over with `new_token`, so exactly one of many concurrent recoverers wins.
#[derive(Clone, Debug)]
pub struct RecoverFlow {
    key: String,
    new_token: String,
    now: i64,
    rules: RecoveryRules,
    record: Option<Record>,
    action: Option<RecoveryAction>,
    waiting: RecoverWait,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecoverWait {
    Get,
    Ask,
    Write,
    Over,
}

impl RecoverFlow {
    /// Recovers `key` at `now`; `new_token` (from [`super::owner_token`])
    /// becomes the owner if the decision is to re-execute.
    pub fn new(key: &str, new_token: &str, now: i64, rules: &RecoveryRules) -> Self {
        RecoverFlow {
            key: key.to_owned(),
            new_token: new_token.to_owned(),
            now,
            rules: rules.clone(),
            record: None,
            action: None,
            waiting: RecoverWait::Get,
        }
    }

    fn after_get(&mut self, record: Option<Record>) -> Step<Recovered> {
        let Some(record) = record else {
            self.waiting = RecoverWait::Over;
            return Step::Done(Recovered::Missing);
        };
        if record.status != Status::InFlight {
            self.waiting = RecoverWait::Over;
            return Step::Done(Recovered::NotInFlight(record.status));
        }
        let due_at = recovery_due_at(&record, self.rules.stale_after);
        if due_at > self.now {
            self.waiting = RecoverWait::Over;
            return Step::Done(Recovered::NotDue { due_at });
        }
        self.record = Some(record);
        self.waiting = RecoverWait::Ask;
        Step::Io(Op::Ask(self.key.clone()))
    }

    fn after_ask(&mut self, lookup: &Lookup) -> Result<Step<Recovered>, FlowError> {
        let Some(record) = self.record.as_ref() else {
            return misuse("got", &OpResult::Answered(lookup.clone()));
        };
        let action = decide_recovery(record, lookup, self.rules.read_your_writes, self.now);
        let next = match &action {
            RecoveryAction::ReExecute => take_over(record, &self.new_token, self.now),
            other => recovered(record, other, self.now, self.rules.ttl_seconds),
        };
        let op = Op::Replace(Replacement {
            expected_token: record.owner_token.clone(),
            expected_lookups: record.lookups,
            record: next,
        });
        self.action = Some(action);
        self.waiting = RecoverWait::Write;
        Ok(Step::Io(op))
    }
}

impl Flow for RecoverFlow {
    type Output = Recovered;

    fn start(&mut self) -> Step<Recovered> {
        self.waiting = RecoverWait::Get;
        Step::Io(Op::Get(self.key.clone()))
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<Recovered>, FlowError> {
        match (self.waiting, result) {
            (RecoverWait::Get, OpResult::Got(record)) => Ok(self.after_get(record)),
            (RecoverWait::Ask, OpResult::Answered(lookup)) => self.after_ask(&lookup),
            (RecoverWait::Write, OpResult::Written(written)) => {
                self.waiting = RecoverWait::Over;
                let Some(action) = self.action.take() else {
                    return misuse("nothing (the flow is done)", &OpResult::Written(written));
                };
                Ok(Step::Done(if written {
                    Recovered::Applied(action)
                } else {
                    Recovered::Lost(action)
                }))
            }
            (RecoverWait::Get, other) => misuse("got", &other),
            (RecoverWait::Ask, other) => misuse("answered", &other),
            (RecoverWait::Write, other) => misuse("written", &other),
            (RecoverWait::Over, other) => misuse("nothing (the flow is done)", &other),
        }
    }
}

/// Lists the `in_flight` records due a recovery look-up at `now` (at most
/// `limit` are read): the keys to run a [`RecoverFlow`] on, oldest first.
#[derive(Clone, Debug)]
pub struct DueFlow {
    now: i64,
    stale_after: i64,
    limit: u32,
    waiting: bool,
}

impl DueFlow {
    /// The records due at `now` among the first `limit` in flight.
    pub fn new(now: i64, stale_after: i64, limit: u32) -> Self {
        DueFlow {
            now,
            stale_after,
            limit,
            waiting: false,
        }
    }
}

impl Flow for DueFlow {
    type Output = Vec<String>;

    fn start(&mut self) -> Step<Vec<String>> {
        self.waiting = true;
        Step::Io(Op::List {
            status: Status::InFlight,
            limit: self.limit,
        })
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<Vec<String>>, FlowError> {
        match (self.waiting, result) {
            (true, OpResult::Listed(records)) => {
                self.waiting = false;
                Ok(Step::Done(
                    records
                        .into_iter()
                        .filter(|r| {
                            r.status == Status::InFlight
                                && recovery_due_at(r, self.stale_after) <= self.now
                        })
                        .map(|r| r.key)
                        .collect(),
                ))
            }
            (true, other) => misuse("listed", &other),
            (false, other) => misuse("nothing (the flow is done)", &other),
        }
    }
}

/// Deletes `done` records past their expiry (never `in_flight` or
/// `needs_reconciliation` ones); answers how many.
#[derive(Clone, Debug)]
pub struct PurgeFlow {
    now: i64,
    waiting: bool,
}

impl PurgeFlow {
    /// A purge at `now`.
    pub fn new(now: i64) -> Self {
        PurgeFlow {
            now,
            waiting: false,
        }
    }
}

impl Flow for PurgeFlow {
    type Output = u64;

    fn start(&mut self) -> Step<u64> {
        self.waiting = true;
        Step::Io(Op::Purge { now: self.now })
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<u64>, FlowError> {
        match (self.waiting, result) {
            (true, OpResult::Purged(n)) => {
                self.waiting = false;
                Ok(Step::Done(n))
            }
            (true, other) => misuse("purged", &other),
            (false, other) => misuse("nothing (the flow is done)", &other),
        }
    }
}

/// The operations a synchronous store offers. Each is one atomic statement;
/// the fenced ones compare the owner token (see [`Completion`],
/// [`Replacement`], [`Release`]). The core decides their order through
/// [`drive`]; a store never sequences claims itself.
pub trait ClaimStore {
    /// The store's error.
    type Error;
    /// `insert … on conflict do nothing`: `true` when this call inserted.
    ///
    /// # Errors
    /// The store's.
    fn insert(&mut self, record: &Record) -> Result<bool, Self::Error>;
    /// The claim's insert: [`OpResult::Inserted`], or [`OpResult::Existing`]
    /// with the record it lost to when the store reads it in the same
    /// statement (a repeat then costs one round trip, not two). By default
    /// [`ClaimStore::insert`], and the claim flow reads the record after.
    ///
    /// # Errors
    /// The store's.
    fn claim(&mut self, record: &Record) -> Result<OpResult, Self::Error> {
        Ok(OpResult::Inserted(self.insert(record)?))
    }
    /// Reads one record.
    ///
    /// # Errors
    /// The store's.
    fn get(&mut self, key: &str) -> Result<Option<Record>, Self::Error>;
    /// A fenced completion: `true` when it wrote.
    ///
    /// # Errors
    /// The store's.
    fn complete(&mut self, completion: &Completion) -> Result<bool, Self::Error>;
    /// A fenced recovery write: `true` when it wrote.
    ///
    /// # Errors
    /// The store's.
    fn replace(&mut self, replacement: &Replacement) -> Result<bool, Self::Error>;
    /// A fenced release (delete): `true` when it deleted.
    ///
    /// # Errors
    /// The store's.
    fn release(&mut self, release: &Release) -> Result<bool, Self::Error>;
    /// Records with `status`, oldest first (by `created_at`, then key), at most `limit`.
    ///
    /// # Errors
    /// The store's.
    fn list(&mut self, status: Status, limit: u32) -> Result<Vec<Record>, Self::Error>;
    /// Deletes `done` records whose expiry is at or before `now`; how many.
    ///
    /// # Errors
    /// The store's.
    fn purge(&mut self, now: i64) -> Result<u64, Self::Error>;
}

/// A failure while driving a flow over a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveError<E> {
    /// The store failed. A claim that fails owns nothing; a finish that fails
    /// leaves the record `in_flight` (never released), for recovery.
    Store(E),
    /// The flow itself failed.
    Flow(FlowError),
}

impl<E: fmt::Display> fmt::Display for DriveError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriveError::Store(e) => e.fmt(f),
            DriveError::Flow(e) => e.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for DriveError<E> {}

/// Performs one operation on a synchronous store; `ask` answers [`Op::Ask`].
///
/// # Errors
/// The store's.
pub fn perform<S: ClaimStore + ?Sized>(
    store: &mut S,
    op: &Op,
    ask: &mut dyn FnMut(&str) -> Lookup,
) -> Result<OpResult, S::Error> {
    Ok(match op {
        Op::Insert(record) => store.claim(record)?,
        Op::Get(key) => OpResult::Got(store.get(key)?),
        Op::Complete(c) => OpResult::Written(store.complete(c)?),
        Op::Replace(r) => OpResult::Written(store.replace(r)?),
        Op::Release(r) => OpResult::Written(store.release(r)?),
        Op::List { status, limit } => OpResult::Listed(store.list(*status, *limit)?),
        Op::Purge { now } => OpResult::Purged(store.purge(*now)?),
        Op::Ask(key) => OpResult::Answered(ask(key)),
        // Only a run flow asks for its effect, and `drive_run` answers it
        // before this; anywhere else the effect's outcome is unknown, which
        // leaves the record in flight and never runs anything twice.
        Op::Effect(_) => OpResult::Effected(EffectResult::Failed, 0),
        // A pause asked for after a failure: a synchronous driver never
        // reports failures to a flow (it returns the store's error), so there
        // is nothing to wait for.
        Op::Wait(_) => OpResult::Waited,
        // A watch with no clock and no notifications here: the whole pause
        // counts as spent and the time as unchanged (flows never move their
        // clock back), so the flow claims again and its budget runs out. A
        // synchronous host that enables waiting answers the watch itself.
        Op::Watch(w) => OpResult::Watched {
            elapsed_ms: w.ms,
            now: i64::MIN,
        },
    })
}

/// Runs `flow` to its end over a synchronous store: the loop every sync host
/// uses (async hosts write the same loop around their own I/O). `ask` is the
/// destination look-up, used by [`RecoverFlow`] only.
///
/// # Errors
/// The store's errors, or the flow's.
pub fn drive<F: Flow, S: ClaimStore + ?Sized>(
    mut flow: F,
    store: &mut S,
    ask: &mut dyn FnMut(&str) -> Lookup,
) -> Result<F::Output, DriveError<S::Error>> {
    let mut step = flow.start();
    loop {
        match step {
            Step::Done(out) => return Ok(out),
            Step::Io(op) => {
                let result = perform(store, &op, ask).map_err(DriveError::Store)?;
                step = flow.resume(result).map_err(DriveError::Flow)?;
            }
        }
    }
}

/// A store in a map, with every fenced condition of the SQL stores: the
/// reference the other stores are tested against, and a store for tests and
/// single-process tools. It keeps the map's key uniqueness as the constraint.
#[derive(Clone, Debug, Default)]
pub struct MemoryClaims {
    records: BTreeMap<String, Record>,
}

impl MemoryClaims {
    /// Every record, by key.
    pub fn records(&self) -> &BTreeMap<String, Record> {
        &self.records
    }

    fn fenced(&mut self, key: &str, token: &str) -> Option<&mut Record> {
        self.records
            .get_mut(key)
            .filter(|r| r.status == Status::InFlight && r.owner_token == token)
    }
}

impl ClaimStore for MemoryClaims {
    type Error = Infallible;

    fn insert(&mut self, record: &Record) -> Result<bool, Infallible> {
        if self.records.contains_key(&record.key) {
            return Ok(false);
        }
        self.records.insert(record.key.clone(), record.clone());
        Ok(true)
    }

    fn get(&mut self, key: &str) -> Result<Option<Record>, Infallible> {
        Ok(self.records.get(key).cloned())
    }

    fn complete(&mut self, c: &Completion) -> Result<bool, Infallible> {
        Ok(match self.fenced(&c.key, &c.owner_token) {
            Some(stored) => {
                stored.status = Status::Done;
                stored.response = Some(c.response.clone());
                stored.expires_at = Some(c.expires_at);
                stored.next_lookup_at = None;
                true
            }
            None => false,
        })
    }

    fn replace(&mut self, r: &Replacement) -> Result<bool, Infallible> {
        let stored = self.records.get_mut(&r.record.key).filter(|s| {
            matches!(s.status, Status::InFlight | Status::NeedsReconciliation)
                && s.owner_token == r.expected_token
        });
        Ok(match stored {
            Some(stored) if stored.lookups == r.expected_lookups => {
                stored.status = r.record.status;
                stored.owner_token.clone_from(&r.record.owner_token);
                stored.response.clone_from(&r.record.response);
                stored.created_at = r.record.created_at;
                stored.expires_at = r.record.expires_at;
                stored.lookups = r.record.lookups;
                stored.next_lookup_at = r.record.next_lookup_at;
                true
            }
            _ => false,
        })
    }

    fn release(&mut self, r: &Release) -> Result<bool, Infallible> {
        if self.fenced(&r.key, &r.owner_token).is_none() {
            return Ok(false);
        }
        self.records.remove(&r.key);
        Ok(true)
    }

    fn list(&mut self, status: Status, limit: u32) -> Result<Vec<Record>, Infallible> {
        let mut out: Vec<Record> = self
            .records
            .values()
            .filter(|r| r.status == status)
            .cloned()
            .collect();
        out.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
        out.truncate(limit as usize);
        Ok(out)
    }

    fn purge(&mut self, now: i64) -> Result<u64, Infallible> {
        let before = self.records.len();
        self.records.retain(|_, r| !purgeable(r, now));
        Ok((before - self.records.len()) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(key: &str, fp: &str) -> Attempt {
        Attempt {
            key: key.into(),
            fingerprint: fp.into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
            prior: None,
        }
    }

    fn never(_: &str) -> Lookup {
        Lookup::Unknown
    }

    fn claim(store: &mut MemoryClaims, a: &Attempt, token: &str, now: i64) -> ClaimOutcome {
        drive(ClaimFlow::new(a, token, now), store, &mut never).unwrap()
    }

    fn finish(store: &mut MemoryClaims, key: &str, token: &str, r: EffectResult) -> Finished {
        drive(
            FinishFlow::new(key, token, r, 10, &Rules::default()),
            store,
            &mut never,
        )
        .unwrap()
    }

    fn recover(store: &mut MemoryClaims, key: &str, token: &str, now: i64, l: Lookup) -> Recovered {
        let rules = RecoveryRules {
            stale_after: 60,
            read_your_writes: true,
            ttl_seconds: 100,
        };
        drive(
            RecoverFlow::new(key, token, now, &rules),
            store,
            &mut |_| l.clone(),
        )
        .unwrap()
    }

    #[test]
    fn the_outcome_classes() {
        let mut store = MemoryClaims::default();
        let a = attempt("k", "fp");
        assert_eq!(claim(&mut store, &a, "o1", 0), ClaimOutcome::Owned);
        let busy = EffectResult::Answered(Response::json(429, "{}"));
        assert_eq!(finish(&mut store, "k", "o1", busy), Finished::Released);
        assert!(store.records().is_empty(), "a released claim is deleted");
        assert_eq!(claim(&mut store, &a, "o2", 1), ClaimOutcome::Owned);
        assert_eq!(
            finish(&mut store, "k", "o2", EffectResult::Failed),
            Finished::LeftInFlight
        );
        assert_eq!(claim(&mut store, &a, "o3", 2), ClaimOutcome::InFlight);
        let ok = EffectResult::Answered(Response::json(201, "{}"));
        assert_eq!(finish(&mut store, "k", "o2", ok), Finished::Stored);
        assert!(matches!(claim(&mut store, &a, "o4", 3), ClaimOutcome::Done(r) if r.status == 201));
        assert_eq!(
            claim(&mut store, &attempt("k", "other"), "o5", 3),
            ClaimOutcome::PayloadConflict
        );
    }

    #[test]
    fn a_store_that_answers_the_existing_record_saves_the_read() {
        let mut store = MemoryClaims::default();
        let a = attempt("k", "fp");
        claim(&mut store, &a, "o1", 0);
        let stored = store.records()["k"].clone();
        // The same decisions as insert-then-get, with no Get asked.
        for (fingerprint, want) in [
            ("fp", ClaimOutcome::InFlight),
            ("other", ClaimOutcome::PayloadConflict),
        ] {
            let mut flow = ClaimFlow::new(&attempt("k", fingerprint), "o2", 1);
            assert!(matches!(flow.start(), Step::Io(Op::Insert(_))));
            let step = flow.resume(OpResult::Existing(stored.clone())).unwrap();
            assert_eq!(step, Step::Done(want));
        }
        let mut done = stored;
        done.complete(Response::json(201, "{}"), 2, 100);
        let mut flow = ClaimFlow::new(&a, "o3", 3);
        flow.start();
        assert!(matches!(
            flow.resume(OpResult::Existing(done.clone())),
            Ok(Step::Done(ClaimOutcome::Done(r))) if r.status == 201
        ));
        // Only as the answer to the insert.
        let mut flow = ClaimFlow::new(&a, "o4", 3);
        flow.start();
        assert_eq!(
            flow.resume(OpResult::Inserted(false)),
            Ok(Step::Io(Op::Get("k".into())))
        );
        assert!(flow.resume(OpResult::Existing(done)).is_err());
    }

    #[test]
    fn only_the_owner_finishes() {
        let mut store = MemoryClaims::default();
        claim(&mut store, &attempt("k", "fp"), "owner", 0);
        let ok = || EffectResult::Answered(Response::json(200, "{}"));
        assert_eq!(
            finish(&mut store, "k", "intruder", ok()),
            Finished::Superseded
        );
        assert_eq!(
            finish(&mut store, "k", "intruder", EffectResult::Refused(None)),
            Finished::Superseded
        );
        assert_eq!(finish(&mut store, "k", "owner", ok()), Finished::Stored);
        assert_eq!(finish(&mut store, "k", "owner", ok()), Finished::Superseded);
    }

    #[test]
    fn a_fresh_claim_is_not_due_and_one_recoverer_takes_it_over() {
        let mut store = MemoryClaims::default();
        claim(&mut store, &attempt("k", "fp"), "owner", 0);
        assert_eq!(
            recover(&mut store, "k", "r1", 59, Lookup::Absent),
            Recovered::NotDue { due_at: 60 }
        );
        // Two recoverers read the same record, then write in turn.
        let rules = RecoveryRules {
            stale_after: 60,
            read_your_writes: true,
            ttl_seconds: 100,
        };
        let mut first = RecoverFlow::new("k", "r1", 60, &rules);
        let mut second = RecoverFlow::new("k", "r2", 60, &rules);
        let mut steps = [first.start(), second.start()];
        for _ in 0..2 {
            for (flow, step) in [&mut first, &mut second].into_iter().zip(steps.iter_mut()) {
                let Step::Io(op) = step.clone() else { continue };
                let result = perform(&mut store, &op, &mut |_| Lookup::Absent).unwrap();
                *step = flow.resume(result).unwrap();
            }
        }
        let Step::Io(op) = steps[0].clone() else {
            panic!()
        };
        let result = perform(&mut store, &op, &mut never).unwrap();
        assert_eq!(
            first.resume(result).unwrap(),
            Step::Done(Recovered::Applied(RecoveryAction::ReExecute))
        );
        let Step::Io(op) = steps[1].clone() else {
            panic!()
        };
        let result = perform(&mut store, &op, &mut never).unwrap();
        assert_eq!(
            second.resume(result).unwrap(),
            Step::Done(Recovered::Lost(RecoveryAction::ReExecute))
        );
        assert_eq!(store.records()["k"].owner_token, "r1");
        // The superseded owner's late completion is refused; the new owner's stands.
        let ok = || EffectResult::Answered(Response::json(200, "{}"));
        assert_eq!(finish(&mut store, "k", "owner", ok()), Finished::Superseded);
        assert_eq!(finish(&mut store, "k", "r1", ok()), Finished::Stored);
    }

    #[test]
    fn unknown_never_re_executes() {
        let mut store = MemoryClaims::default();
        claim(&mut store, &attempt("k", "fp"), "owner", 0);
        let mut now = 60;
        let mut seen = Vec::new();
        loop {
            match recover(&mut store, "k", "r", now, Lookup::Unknown) {
                Recovered::Applied(RecoveryAction::CheckLater { next_lookup_at, .. }) => {
                    seen.push(next_lookup_at - now);
                    now = next_lookup_at;
                }
                Recovered::Applied(RecoveryAction::Reconcile { lookups }) => {
                    assert_eq!(lookups, 4);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, [60, 120, 240]);
        assert_eq!(store.records()["k"].owner_token, "owner");
        assert_eq!(
            recover(&mut store, "k", "r", now + 1000, Lookup::Absent),
            Recovered::NotInFlight(Status::NeedsReconciliation)
        );
    }

    #[test]
    fn a_vanishing_record_is_claimed_again_then_reported() {
        let mut flow = ClaimFlow::new(&attempt("k", "fp"), "o", 0);
        let mut step = flow.start();
        let mut inserts = 0;
        let err = loop {
            match step {
                Step::Io(Op::Insert(_)) => {
                    inserts += 1;
                    step = flow.resume(OpResult::Inserted(false)).unwrap();
                }
                Step::Io(Op::Get(_)) => match flow.resume(OpResult::Got(None)) {
                    Ok(next) => step = next,
                    Err(e) => break e,
                },
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(inserts, CLAIM_TRIES);
        assert_eq!(err.code().as_str(), "record-vanished");
    }

    #[test]
    fn a_wrong_result_is_a_misuse_not_a_panic() {
        let mut flow = ClaimFlow::new(&attempt("k", "fp"), "o", 0);
        let _ = flow.start();
        let err = flow.resume(OpResult::Purged(1)).unwrap_err();
        assert_eq!(err.code().as_str(), "flow-misuse");
        let mut done = PurgeFlow::new(0);
        let _ = done.start();
        assert_eq!(done.resume(OpResult::Purged(2)).unwrap(), Step::Done(2));
        assert!(done.resume(OpResult::Purged(2)).is_err());
    }
}
