//! What an operator sees: every decision named once, and the names of the
//! spans, attributes and metrics every host reports them under.
//!
//! Hosts have no vocabulary of their own: the Node adapters
//! (`@opentelemetry/api`), the axum layer (`tracing` and OpenTelemetry
//! metrics) and the Python middleware (`opentelemetry-api`) ask the core for
//! the decisions of a request or a run ([`served`], [`ran`], [`recovered`],
//! [`released`]) and report them under [`names`]. A span never carries the
//! client's key, the secret or the payload: only [`key_digest`], a short
//! digest of the storage key (itself an HMAC of the tenant and the client
//! key), enough to follow one key across spans and logs.
//!
//! ```
//! use intentkey::claim::{Finished, Response};
//! use intentkey::http::{ServePath, Served};
//! use intentkey::telemetry::{self, Decision};
//!
//! let replay = Served {
//!     path: ServePath::Replay,
//!     reply: None,
//!     finished: None,
//!     finish_retries: 0,
//!     claim_failure: None,
//!     finish_failures: Vec::new(),
//!     waited_ms: 120,
//!     unreleased: None,
//! };
//! let decisions = telemetry::served(&replay);
//! assert_eq!(decisions.primary, Decision::Replayed);
//! assert_eq!(decisions.all, [Decision::Waited, Decision::Replayed]);
//! assert_eq!(Decision::InFlight.as_str(), "in-flight");
//! let digest = telemetry::key_digest("5f0c…storage key");
//! assert_eq!(digest.len(), 12);
//! ```

use sha2::{Digest, Sha256};

use crate::claim::{Finished, Lookup, Recovered, RecoveryAction, RunOutcome};
use crate::http::{ServePath, Served};

/// One decision of the library, as operators count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The attempt claimed the key: its handler or effect ran.
    Owned,
    /// A stored answer was replayed.
    Replayed,
    /// The first attempt still runs (or awaits reconciliation): 409.
    InFlight,
    /// The attempt waited for the first attempt's answer.
    Waited,
    /// The key came with another payload: 422 (400 for `stripe`).
    Conflict,
    /// A claim was released: nothing happened, a retry runs again.
    Released,
    /// An owner's write found the record no longer its own.
    Superseded,
    /// Recovery asked the destination: the effect happened; recorded done.
    RecoveredFound,
    /// Recovery asked the destination: the effect did not happen; re-run.
    RecoveredAbsent,
    /// Recovery asked the destination, which could not tell: asked again
    /// later, or moved to `needs_reconciliation`.
    RecoveredUnknown,
    /// A human's reconciliation decision was recorded.
    Reconciled,
    /// Expired done records were purged.
    Purged,
    /// The store failed before anything was claimed: 503 (or the profile's
    /// 500), nothing ran.
    Unavailable,
    /// Refused before any claim (a bad key or body): nothing stored.
    Refused,
    /// No key, and keys are optional: ran unguarded.
    Unguarded,
}

impl Decision {
    /// Every decision.
    pub const ALL: [Decision; 15] = [
        Decision::Owned,
        Decision::Replayed,
        Decision::InFlight,
        Decision::Waited,
        Decision::Conflict,
        Decision::Released,
        Decision::Superseded,
        Decision::RecoveredFound,
        Decision::RecoveredAbsent,
        Decision::RecoveredUnknown,
        Decision::Reconciled,
        Decision::Purged,
        Decision::Unavailable,
        Decision::Refused,
        Decision::Unguarded,
    ];

    /// `owned`, `replayed`, `in-flight`, `waited`, `conflict`, `released`,
    /// `superseded`, `recovered-found`, `recovered-absent`,
    /// `recovered-unknown`, `reconciled`, `purged`, `unavailable`,
    /// `refused` or `unguarded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Owned => "owned",
            Decision::Replayed => "replayed",
            Decision::InFlight => "in-flight",
            Decision::Waited => "waited",
            Decision::Conflict => "conflict",
            Decision::Released => "released",
            Decision::Superseded => "superseded",
            Decision::RecoveredFound => "recovered-found",
            Decision::RecoveredAbsent => "recovered-absent",
            Decision::RecoveredUnknown => "recovered-unknown",
            Decision::Reconciled => "reconciled",
            Decision::Purged => "purged",
            Decision::Unavailable => "unavailable",
            Decision::Refused => "refused",
            Decision::Unguarded => "unguarded",
        }
    }
}

/// The decisions of one request or run: the one its span carries, and
/// every one the decision counter counts, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decisions {
    /// What the span's `intentkey.decision` says.
    pub primary: Decision,
    /// What the counter counts (the primary one among them).
    pub all: Vec<Decision>,
}

fn decisions(waited_ms: u32, path: Decision, finished: Option<Finished>) -> Decisions {
    let mut all = Vec::with_capacity(3);
    if waited_ms > 0 {
        all.push(Decision::Waited);
    }
    all.push(path);
    let mut primary = path;
    match finished {
        Some(Finished::Released) if path != Decision::Released => {
            all.push(Decision::Released);
            primary = Decision::Released;
        }
        Some(Finished::Superseded) => {
            all.push(Decision::Superseded);
            primary = Decision::Superseded;
        }
        _ => {}
    }
    Decisions { primary, all }
}

/// The decisions of a served request.
pub fn served(served: &Served) -> Decisions {
    let path = match served.path {
        ServePath::Refused => Decision::Refused,
        ServePath::Unguarded => Decision::Unguarded,
        ServePath::Replay => Decision::Replayed,
        ServePath::InFlight => Decision::InFlight,
        ServePath::PayloadConflict => Decision::Conflict,
        ServePath::Unavailable => Decision::Unavailable,
        ServePath::Handler | ServePath::Failed => Decision::Owned,
        ServePath::Released => Decision::Released,
    };
    decisions(served.waited_ms, path, served.finished)
}

/// The decisions of a run (`guard.run`, a journal step or tool call, a
/// queue delivery) that waited `waited_ms`.
pub fn ran(outcome: &RunOutcome, waited_ms: u32) -> Decisions {
    let (path, finished) = match outcome {
        RunOutcome::Ran { finished, .. } => (Decision::Owned, Some(*finished)),
        RunOutcome::Replayed { .. } => (Decision::Replayed, None),
        RunOutcome::Conflict => (Decision::Conflict, None),
        RunOutcome::InFlight { .. } => (Decision::InFlight, None),
        RunOutcome::Recovery(r) => (recovered(r).unwrap_or(Decision::InFlight), None),
    };
    decisions(waited_ms, path, finished)
}

/// What a recovery decided, when it asked the destination and wrote.
pub fn recovered(recovered: &Recovered) -> Option<Decision> {
    match recovered {
        Recovered::Applied(action) => Some(match action {
            RecoveryAction::RecordDone(_) => Decision::RecoveredFound,
            RecoveryAction::ReExecute => Decision::RecoveredAbsent,
            RecoveryAction::CheckLater { .. } | RecoveryAction::Reconcile { .. } => {
                Decision::RecoveredUnknown
            }
        }),
        Recovered::Lost(_) => Some(Decision::Superseded),
        Recovered::Missing | Recovered::NotInFlight(_) | Recovered::NotDue { .. } => None,
    }
}

/// What a destination's look-up answered, as a recovery decision.
pub fn looked_up(lookup: &Lookup) -> Decision {
    match lookup {
        Lookup::Found(_) => Decision::RecoveredFound,
        Lookup::Absent => Decision::RecoveredAbsent,
        Lookup::Unknown => Decision::RecoveredUnknown,
    }
}

/// What releasing a claim whose handler never ran did
/// ([`crate::claim::ReleaseFlow`]): released, or superseded (nothing of
/// the owner's was there, or the store never came back).
pub fn released(finished: Finished) -> Decision {
    match finished {
        Finished::Released => Decision::Released,
        _ => Decision::Superseded,
    }
}

/// A short digest of a storage key for spans and logs: the first 12 hex
/// digits of `SHA-256("intentkey/telemetry-key/v1" ‖ key)`. Never the
/// client's key (a storage key is already an HMAC of it).
pub fn key_digest(key: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"intentkey/telemetry-key/v1")
        .chain_update(key.as_bytes())
        .finalize();
    crate::key::to_hex(&digest[..6])
}

/// The names every host reports under.
pub mod names {
    /// The span of one guarded request or run.
    pub const SPAN: &str = "intentkey.request";
    /// The decision ([`super::Decision::as_str`]).
    pub const DECISION: &str = "intentkey.decision";
    /// The HTTP profile (`ietf`, `stripe`, `ofb`), or the run's kind
    /// (`effect`, `step`, `tool-call`).
    pub const PROFILE: &str = "intentkey.profile";
    /// The store kind (`memory`, `sqlite`, `postgres`, `mysql`, `redis`,
    /// `dynamodb`, or the host's name for a store of its own).
    pub const STORE: &str = "intentkey.store";
    /// [`super::key_digest`] of the storage key.
    pub const KEY_DIGEST: &str = "intentkey.key_digest";
    /// Milliseconds waited for the first attempt.
    pub const WAIT_MS: &str = "intentkey.wait_ms";
    /// Milliseconds spent in store calls.
    pub const STORE_MS: &str = "intentkey.store_ms";
    /// The counter of decisions, by [`DECISION`] (and [`STORE`]).
    pub const DECISIONS: &str = "intentkey.decisions";
    /// The histogram of store call durations, in milliseconds.
    pub const STORE_DURATION: &str = "intentkey.store.duration";
    /// The histogram of waits, in milliseconds.
    pub const WAIT_DURATION: &str = "intentkey.wait.duration";
    /// The gauge of records by status (`in_flight`, `needs_reconciliation`),
    /// with a `intentkey.status` attribute.
    pub const RECORDS: &str = "intentkey.records";
    /// The status attribute of [`RECORDS`].
    pub const STATUS: &str = "intentkey.status";
    /// The store operation attribute of [`STORE_DURATION`] (`insert`,
    /// `get`, `complete`, … as [`crate::claim::Op::as_str`] names them).
    pub const OP: &str = "intentkey.op";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served_at(path: ServePath, finished: Option<Finished>, waited_ms: u32) -> Served {
        Served {
            path,
            reply: None,
            finished,
            finish_retries: 0,
            claim_failure: None,
            finish_failures: Vec::new(),
            waited_ms,
            unreleased: None,
        }
    }

    #[test]
    fn every_path_has_one_primary_decision() {
        let cases = [
            (
                ServePath::Handler,
                Some(Finished::Stored),
                0,
                Decision::Owned,
                vec![Decision::Owned],
            ),
            (
                ServePath::Handler,
                Some(Finished::Superseded),
                0,
                Decision::Superseded,
                vec![Decision::Owned, Decision::Superseded],
            ),
            (
                ServePath::Released,
                Some(Finished::Released),
                0,
                Decision::Released,
                vec![Decision::Released],
            ),
            (
                ServePath::Replay,
                None,
                40,
                Decision::Replayed,
                vec![Decision::Waited, Decision::Replayed],
            ),
            (
                ServePath::InFlight,
                None,
                5_000,
                Decision::InFlight,
                vec![Decision::Waited, Decision::InFlight],
            ),
            (
                ServePath::PayloadConflict,
                None,
                0,
                Decision::Conflict,
                vec![Decision::Conflict],
            ),
            (
                ServePath::Unavailable,
                None,
                0,
                Decision::Unavailable,
                vec![Decision::Unavailable],
            ),
            (
                ServePath::Refused,
                None,
                0,
                Decision::Refused,
                vec![Decision::Refused],
            ),
        ];
        for (path, finished, waited, primary, all) in cases {
            let d = served(&served_at(path, finished, waited));
            assert_eq!((d.primary, d.all), (primary, all), "{path:?}");
        }
    }

    #[test]
    fn names_are_distinct_and_digests_short_and_stable() {
        let mut seen = std::collections::HashSet::new();
        for d in Decision::ALL {
            assert!(seen.insert(d.as_str()), "{d:?}");
        }
        assert_eq!(key_digest("k"), key_digest("k"));
        assert_ne!(key_digest("k"), key_digest("l"));
        assert!(!key_digest("secret-client-key").contains("secret"));
    }
}
