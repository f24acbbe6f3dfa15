//! The high-level API: run an effect at most once per intent.
//!
//! [`Guard::run`] claims the key, hands it to the effect (so the same key
//! travels to the destination), stores the response (success or error) and
//! replays it on every repeat. Every decision is the core's
//! (`intentkey::claim`); this module does the store I/O.
//!
//! ```
//! use intentkey::claim::Response;
//! use intentkey_store::guard::{Attempt, Guard};
//! use intentkey_store::open;
//!
//! let store = open("memory:")?;
//! let guard = Guard::new(store.as_ref());
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into() };
//! let mut effects = 0;
//! for _ in 0..3 {
//!     let answer = guard.run(&attempt, 1_700_000_000, |key| {
//!         effects += 1;
//!         Response::json(201, format!(r#"{{"paid_with_key":"{key}"}}"#))
//!     })?;
//!     assert_eq!(answer.status, 201);
//! }
//! assert_eq!(effects, 1);
//! # Ok::<(), intentkey_store::StoreError>(())
//! ```

use intentkey::claim::{
    apply_recovery, decide_recovery, http_answer, recovery_due, ClaimOutcome, HttpAnswer, Lookup,
    Record, RecoveryAction, Response, Status, DEFAULT_TTL_SECONDS,
};

use crate::{claim, Store, StoreError};

/// One attempt at an intent: its key and payload fingerprint.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The intent's idempotency key.
    pub key: String,
    /// The payload fingerprint.
    pub fingerprint: String,
    /// The tenant.
    pub tenant_id: String,
    /// The action type.
    pub action_type: String,
}

/// What a run answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAnswer {
    /// What the claim decided.
    pub outcome: ClaimOutcome,
    /// HTTP status.
    pub status: u16,
    /// Media type.
    pub content_type: String,
    /// Body.
    pub body: String,
    /// Whether the body is a replay of a stored response.
    pub replayed: bool,
}

impl RunAnswer {
    fn from_http(outcome: ClaimOutcome, answer: HttpAnswer) -> Self {
        RunAnswer {
            outcome,
            status: answer.status,
            content_type: answer.content_type,
            body: answer.body,
            replayed: answer.replayed,
        }
    }
}

/// Runs effects at most once per key, against one store.
pub struct Guard<'s> {
    store: &'s dyn Store,
    ttl_seconds: i64,
}

impl<'s> Guard<'s> {
    /// A guard keeping done records for the default 24 hours.
    pub fn new(store: &'s dyn Store) -> Self {
        Guard {
            store,
            ttl_seconds: DEFAULT_TTL_SECONDS,
        }
    }

    /// Keeps done records for `ttl_seconds`: set it to the worst redelivery
    /// horizon of the callers.
    #[must_use]
    pub fn with_ttl(mut self, ttl_seconds: i64) -> Self {
        self.ttl_seconds = ttl_seconds;
        self
    }

    /// Claims, runs `effect` with the key if this attempt owns it, stores and
    /// returns its response; otherwise answers from the store (replay, 409, 422).
    ///
    /// # Errors
    /// A store failure. If the claim fails nothing ran. If storing the
    /// response fails, the record stays `in_flight` (never released), and
    /// recovery settles it by asking the destination.
    pub fn run(
        &self,
        attempt: &Attempt,
        now: i64,
        effect: impl FnOnce(&str) -> Response,
    ) -> Result<RunAnswer, StoreError> {
        let record = Record::in_flight(
            &attempt.key,
            &attempt.fingerprint,
            &attempt.tenant_id,
            &attempt.action_type,
            now,
        );
        let outcome = claim(self.store, &record)?;
        if let Some(answer) = http_answer(&outcome) {
            return Ok(RunAnswer::from_http(outcome, answer));
        }
        let response = effect(&attempt.key);
        self.complete(record, response.clone(), now)?;
        Ok(RunAnswer {
            outcome,
            status: response.status,
            content_type: response.content_type,
            body: response.body,
            replayed: false,
        })
    }

    /// Completes an owned record with the effect's response.
    ///
    /// # Errors
    /// A store failure.
    pub fn complete(
        &self,
        mut record: Record,
        response: Response,
        now: i64,
    ) -> Result<bool, StoreError> {
        record.complete(response, now, self.ttl_seconds);
        self.store.replace_in_flight(&record)
    }

    /// Recovers `in_flight` records that are due (see
    /// [`intentkey::claim::recovery_due`]): asks the destination through
    /// `gateway` with the same key and applies the core's decision. A
    /// read-your-writes `absent` re-runs the effect through `reexecute` (same
    /// key); `unknown` never does.
    ///
    /// # Errors
    /// A store failure.
    pub fn recover_due(
        &self,
        gateway: &dyn Gateway,
        now: i64,
        stale_after: i64,
        mut reexecute: Option<&mut dyn FnMut(&Record) -> Response>,
    ) -> Result<Vec<(String, RecoveryAction)>, StoreError> {
        let mut done = Vec::new();
        for record in self.store.list(Some(Status::InFlight), 10_000)? {
            if !recovery_due(&record, now, stale_after) {
                continue;
            }
            let again: Option<&mut dyn FnMut(&Record) -> Response> = match reexecute.as_mut() {
                Some(run) => Some(&mut **run),
                None => None,
            };
            let action = self.recover_one(gateway, record.clone(), now, again)?;
            done.push((record.key, action));
        }
        Ok(done)
    }

    /// Asks the destination about one `in_flight` record and applies the answer.
    /// Without `reexecute`, a `ReExecute` decision is returned and the record
    /// left `in_flight` for its owner to run again (with the same key).
    ///
    /// # Errors
    /// A store failure.
    pub fn recover_one(
        &self,
        gateway: &dyn Gateway,
        mut record: Record,
        now: i64,
        reexecute: Option<&mut dyn FnMut(&Record) -> Response>,
    ) -> Result<RecoveryAction, StoreError> {
        let lookup = gateway.lookup(&record.key);
        let action = decide_recovery(&record, &lookup, gateway.read_your_writes(), now);
        if apply_recovery(&mut record, &action, now, self.ttl_seconds) {
            self.store.replace_in_flight(&record)?;
        } else if let Some(run) = reexecute {
            // The core's re-execute: run the effect again, same key, then complete.
            let response = run(&record);
            record.complete(response, now, self.ttl_seconds);
            self.store.replace_in_flight(&record)?;
        }
        Ok(action)
    }
}

/// The destination, as recovery sees it.
pub trait Gateway {
    /// Asks whether the effect with this key happened.
    fn lookup(&self, key: &str) -> Lookup;
    /// Whether an `absent` answer can be trusted (the destination documents
    /// read-your-writes); otherwise `absent` counts as unknown.
    fn read_your_writes(&self) -> bool;
}
