//! Claim, replay and recovery: the one fenced flow, and every decision in it.
//!
//! The store is the source of truth. The core never touches it: it decides
//! the order of store operations ([`flow`]) and what each answer means
//! ([`decide`]), and hosts perform the I/O it asks for. Nothing here reads a
//! clock or makes randomness: `now` and owner tokens come from the host.
//!
//! - [`record`]: the stored record, its owner token and its response.
//! - [`decide`]: what a lost claim gets, the outcome classes, what a look-up
//!   means, what may be purged.
//! - [`flow`]: the sans-I/O flows (claim, finish, recover, purge) and the
//!   driver for synchronous stores.
//! - [`schema`]: the one versioned SQL file every runtime applies.
//! - [`sql`]: every statement against the records, per SQL dialect, with
//!   its parameter order and row decoding.
//! - [`redis`]: the Redis store's record layout and Lua scripts, for every runtime.
//! - [`dynamo`]: the DynamoDB store's table, items and requests, for every runtime.
//!
//! The HTTP answer to each outcome, per profile, is [`crate::http`]'s.
//!
//! | situation | store state | [`ClaimOutcome`] | HTTP (`ietf`) |
//! |---|---|---|---|
//! | first time | absent | `Owned`: run the effect | — |
//! | repeat after completion | `done` | `Done`: replay the stored response | stored |
//! | repeat while the original runs | `in_flight` | `InFlight` | 409 |
//! | same key, other payload | fingerprint differs | `PayloadConflict` | 422 |
//! | key missing where required | — | — | 400 |
//!
//! An owned attempt finishes by its outcome class ([`OutcomeClass`]):
//! *terminal* answers are stored and replayed; *released* ("nothing
//! happened": refused before any side effect, or a status in
//! [`Rules::release_statuses`], 429 and 503 by default) deletes the record
//! under the owner's token so a retry runs; *ambiguous* (a throw, a crash, a
//! timeout) leaves it `in_flight` for recovery. A write whose token no
//! longer matches is refused: [`Finished::Superseded`].
//!
//! ```
//! use intentkey::claim::{decide_existing, Attempt, ClaimOutcome, Record, Response};
//!
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp-a".into(), tenant_id: "tenant-1".into(), action_type: "pix.send".into(), prior: None };
//! let mut record = Record::in_flight(&attempt, "0123456789abcdef0123456789abcdef", 1_700_000_000);
//! assert_eq!(decide_existing(&record, "fp-a"), ClaimOutcome::InFlight);
//! assert_eq!(decide_existing(&record, "fp-b"), ClaimOutcome::PayloadConflict);
//!
//! record.complete(Response::json(201, r#"{"id":"pay_1"}"#), 1_700_000_005, 86_400);
//! assert!(matches!(decide_existing(&record, "fp-a"), ClaimOutcome::Done(r) if r.status == 201));
//! ```

pub mod ddl;
pub mod decide;
pub mod delivery;
pub mod dynamo;
pub mod flow;
pub mod migrate;
pub mod reconcile;
pub mod record;
pub mod redis;
pub mod release;
pub mod run;
pub mod schema;
pub mod sql;
pub mod wait;

pub use decide::{
    classify, decide_existing, decide_recovery, purgeable, recovered, recovery_due,
    recovery_due_at, take_over, ClaimOutcome, EffectResult, Lookup, OutcomeClass, RecoveryAction,
    Rules, DEFAULT_RELEASE_STATUSES,
};
pub use flow::{
    drive, perform, ClaimFlow, ClaimStore, Completion, DriveError, DueFlow, FinishFlow, Finished,
    Flow, FlowError, MemoryClaims, Op, OpResult, PurgeFlow, RecoverFlow, Recovered, RecoveryRules,
    Release, Replacement, Step, StoreFailure, CLAIM_TRIES,
};
pub use reconcile::{ReconcileFlow, Reconciled, Verdict};
pub use record::{
    done_expiry, owner_token, owner_token_from_slice, Attempt, PriorKey, Record, Response, Status,
    DEFAULT_STALE_AFTER_SECONDS, DEFAULT_TTL_SECONDS, FINISH_RETRY_DELAYS_MS,
    LOOKUP_BACKOFF_SECONDS, OWNER_TOKEN_BYTES, STORE_DEADLINE_MS,
};
pub use release::{
    ReleaseFlow, RELEASE_GIVE_UP_MS, RELEASE_RETRY_DELAYS_MS, RELEASE_RETRY_LAST_MS,
};
pub use run::{drive_run, RunFlow, RunKind, RunOutcome, RunSpec};
pub use wait::{
    check_wait_max_ms, Waiter, WatchRequest, WAIT_MAX_MS_LIMIT, WATCH_FIRST_MS, WATCH_LONGEST_MS,
};
