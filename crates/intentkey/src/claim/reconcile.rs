//! A human's decision on a record that awaits reconciliation.
//!
//! Recovery moves a record to `needs_reconciliation` when the destination
//! could not tell, on every look-up, whether the effect happened; from then
//! on every retry is answered 409 and nothing runs. An operator finds out
//! (the destination's dashboard, a bank statement) and records the answer
//! through [`ReconcileFlow`] (`intentkey reconcile`):
//!
//! - **found**: the effect happened; the record becomes `done` with the
//!   response given, and retries replay it;
//! - **absent**: it did not; the record is released (fenced: first taken
//!   over under a new owner token, then deleted under it), so the client's
//!   next retry runs the effect.
//!
//! Every write is fenced like any other: on the record's owner token and
//! look-up count as the flow read them, so a concurrent decision (another
//! operator, a late owner) makes this one [`Reconciled::Lost`], never a
//! second write.
//!
//! ```
//! use intentkey::claim::{drive, MemoryClaims, ReconcileFlow, Reconciled, Response, Status, Verdict};
//! # use intentkey::claim::{Attempt, ClaimFlow, ClaimStore, Replacement};
//! let mut store = MemoryClaims::default();
//! # let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t".into(), action_type: "pay".into(), prior: None };
//! # drive(ClaimFlow::new(&attempt, "owner", 1), &mut store, &mut |_| unreachable!()).unwrap();
//! # let mut record = store.get("k1").unwrap().unwrap();
//! # record.status = Status::NeedsReconciliation;
//! # record.lookups = 4;
//! # store.replace(&Replacement { expected_token: "owner".into(), expected_lookups: 0, record }).unwrap();
//! // k1 awaits reconciliation; the bank says the payment went through.
//! let found = Verdict::Found(Response::json(201, r#"{"id":"pay_1"}"#));
//! let done = drive(ReconcileFlow::new("k1", found, "operator-token", 100, 86_400), &mut store, &mut |_| unreachable!())?;
//! assert_eq!(done, Reconciled::Recorded);
//! assert_eq!(store.get("k1").unwrap().unwrap().status, Status::Done);
//! // A second decision finds nothing to reconcile.
//! let again = drive(ReconcileFlow::new("k1", Verdict::Absent, "t2", 101, 86_400), &mut store, &mut |_| unreachable!())?;
//! assert_eq!(again, Reconciled::NotNeeded(Status::Done));
//! # Ok::<(), intentkey::claim::DriveError<std::convert::Infallible>>(())
//! ```

use super::decide::{recovered, RecoveryAction};
use super::flow::{misuse, Flow, FlowError, Op, OpResult, Release, Replacement, Step};
use super::record::{Response, Status};

/// What the operator found at the destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The effect happened: this is its response.
    Found(Response),
    /// The effect did not happen.
    Absent,
}

/// What recording the decision did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// No record under the key.
    Missing,
    /// The record does not await reconciliation (its status).
    NotNeeded(Status),
    /// Found: the record is done with the response given.
    Recorded,
    /// Absent: the record was released; a retry runs the effect.
    Released,
    /// Someone else changed the record first: nothing was written.
    Lost,
}

impl Reconciled {
    /// `missing`, `not-needed`, `recorded`, `released` or `lost`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Reconciled::Missing => "missing",
            Reconciled::NotNeeded(_) => "not-needed",
            Reconciled::Recorded => "recorded",
            Reconciled::Released => "released",
            Reconciled::Lost => "lost",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Read,
    Record,
    Reopen,
    Release,
    Over,
}

/// Records an operator's [`Verdict`] on a record awaiting reconciliation.
/// See the [module docs](self).
#[derive(Clone, Debug)]
pub struct ReconcileFlow {
    key: String,
    verdict: Verdict,
    token: String,
    now: i64,
    ttl_seconds: i64,
    stage: Stage,
}

impl ReconcileFlow {
    /// The decision `verdict` on `key` at `now`; `token` (a fresh owner
    /// token) owns the record between its take-over and its release
    /// (absent); a found response is kept for `ttl_seconds`.
    pub fn new(key: &str, verdict: Verdict, token: &str, now: i64, ttl_seconds: i64) -> Self {
        ReconcileFlow {
            key: key.to_owned(),
            verdict,
            token: token.to_owned(),
            now,
            ttl_seconds,
            stage: Stage::Read,
        }
    }

    fn done(&mut self, r: Reconciled) -> Result<Step<Reconciled>, FlowError> {
        self.stage = Stage::Over;
        Ok(Step::Done(r))
    }
}

impl Flow for ReconcileFlow {
    type Output = Reconciled;

    fn start(&mut self) -> Step<Reconciled> {
        self.stage = Stage::Read;
        Step::Io(Op::Get(self.key.clone()))
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<Reconciled>, FlowError> {
        match (self.stage, result) {
            (Stage::Read, OpResult::Got(None)) => self.done(Reconciled::Missing),
            (Stage::Read, OpResult::Got(Some(record))) => {
                if record.status != Status::NeedsReconciliation {
                    return self.done(Reconciled::NotNeeded(record.status));
                }
                let next = match &self.verdict {
                    Verdict::Found(response) => {
                        self.stage = Stage::Record;
                        recovered(
                            &record,
                            &RecoveryAction::RecordDone(response.clone()),
                            self.now,
                            self.ttl_seconds,
                        )
                    }
                    Verdict::Absent => {
                        self.stage = Stage::Reopen;
                        let mut next = record.clone();
                        next.status = Status::InFlight;
                        next.owner_token.clone_from(&self.token);
                        next.next_lookup_at = None;
                        next
                    }
                };
                Ok(Step::Io(Op::Replace(Replacement {
                    expected_token: record.owner_token,
                    expected_lookups: record.lookups,
                    record: next,
                })))
            }
            (Stage::Record, OpResult::Written(true)) => self.done(Reconciled::Recorded),
            (Stage::Reopen, OpResult::Written(true)) => {
                self.stage = Stage::Release;
                Ok(Step::Io(Op::Release(Release {
                    key: self.key.clone(),
                    owner_token: self.token.clone(),
                })))
            }
            (Stage::Release, OpResult::Written(true)) => self.done(Reconciled::Released),
            (Stage::Record | Stage::Reopen | Stage::Release, OpResult::Written(false)) => {
                self.done(Reconciled::Lost)
            }
            (Stage::Read, other) => misuse("got", &other),
            (Stage::Record | Stage::Reopen | Stage::Release, other) => misuse("written", &other),
            (Stage::Over, other) => misuse("nothing (the flow is done)", &other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::{drive, Attempt, ClaimFlow, ClaimStore, MemoryClaims};

    fn claimed(store: &mut MemoryClaims, key: &str) {
        let attempt = Attempt {
            key: key.into(),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "pay".into(),
            prior: None,
        };
        drive(
            ClaimFlow::new(&attempt, "owner", 1),
            store,
            &mut |_| unreachable!(),
        )
        .unwrap();
    }

    fn awaiting(store: &mut MemoryClaims, key: &str) {
        claimed(store, key);
        let mut record = store.get(key).unwrap().unwrap();
        record.status = Status::NeedsReconciliation;
        record.lookups = 4;
        assert!(store
            .replace(&Replacement {
                expected_token: "owner".into(),
                expected_lookups: 0,
                record,
            })
            .unwrap());
    }

    #[test]
    fn absent_releases_the_record_so_a_retry_runs() {
        let mut store = MemoryClaims::default();
        awaiting(&mut store, "k");
        let flow = ReconcileFlow::new("k", Verdict::Absent, "op", 10, 60);
        let out = drive(flow, &mut store, &mut |_| unreachable!()).unwrap();
        assert_eq!(out, Reconciled::Released);
        assert!(store.get("k").unwrap().is_none());
        let missing = drive(
            ReconcileFlow::new("k", Verdict::Absent, "op", 10, 60),
            &mut store,
            &mut |_| unreachable!(),
        )
        .unwrap();
        assert_eq!(missing, Reconciled::Missing);
    }

    #[test]
    fn a_concurrent_decision_wins_and_this_one_is_lost() {
        let mut store = MemoryClaims::default();
        awaiting(&mut store, "k");
        let mut mine = ReconcileFlow::new("k", Verdict::Absent, "mine", 10, 60);
        let Step::Io(get) = mine.start() else {
            panic!()
        };
        let read = crate::claim::perform(&mut store, &get, &mut |_| unreachable!()).unwrap();
        // Another operator records "found" between the read and the write.
        let found = Verdict::Found(Response::json(200, "{}"));
        let theirs = drive(
            ReconcileFlow::new("k", found, "theirs", 11, 60),
            &mut store,
            &mut |_| unreachable!(),
        )
        .unwrap();
        assert_eq!(theirs, Reconciled::Recorded);
        let Step::Io(write) = mine.resume(read).unwrap() else {
            panic!()
        };
        let written = crate::claim::perform(&mut store, &write, &mut |_| unreachable!()).unwrap();
        assert_eq!(mine.resume(written).unwrap(), Step::Done(Reconciled::Lost));
        assert_eq!(store.get("k").unwrap().unwrap().status, Status::Done);
    }

    #[test]
    fn a_record_in_flight_is_not_reconciled() {
        let mut store = MemoryClaims::default();
        claimed(&mut store, "k");
        let out = drive(
            ReconcileFlow::new("k", Verdict::Absent, "op", 10, 60),
            &mut store,
            &mut |_| unreachable!(),
        )
        .unwrap();
        assert_eq!(out, Reconciled::NotNeeded(Status::InFlight));
    }
}
