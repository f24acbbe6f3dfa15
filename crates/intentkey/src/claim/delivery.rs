//! What a queue delivery does when it finds its intent in flight: the one
//! answer every queue adapter gives (BullMQ, pg-boss, Celery), read from the
//! core's recovery of the record. A delivery never fails for a record that
//! may still finish: it is retried at the instant named here.
//!
//! ```
//! use intentkey::claim::delivery::{in_flight_delivery, Delivery, Wait};
//! use intentkey::claim::Recovered;
//!
//! let running = Recovered::NotDue { due_at: 1_700_000_300 };
//! assert_eq!(
//!     in_flight_delivery(Some(&running), 1_700_000_000),
//!     Delivery::Retry { at: 1_700_000_300, wait: Wait::Running },
//! );
//! ```

use super::{Recovered, RecoveryAction, Status};

/// How long a delivery waits when the record is changing hands (recovered
/// or released meanwhile) or no recovery could run: it looks again then.
pub const CHANGING_HANDS_SECONDS: i64 = 1;

/// Why a delivery waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Another delivery may still be running it (not due for recovery yet).
    Running,
    /// The destination could not tell whether it ran; asked again later.
    Unknown,
    /// Recovered or released meanwhile, or no recovery ran: look again shortly.
    ChangingHands,
}

impl Wait {
    /// `running`, `unknown` or `changing-hands`.
    pub fn as_str(self) -> &'static str {
        match self {
            Wait::Running => "running",
            Wait::Unknown => "unknown",
            Wait::ChangingHands => "changing-hands",
        }
    }

    /// The reason, as adapters report it: "its intent is {reason}".
    pub fn reason(self) -> &'static str {
        match self {
            Wait::Running => "in flight (another delivery may still be running it)",
            Wait::Unknown => "in flight and the destination could not tell whether it ran",
            Wait::ChangingHands => "changing hands (recovered or released meanwhile)",
        }
    }
}

/// What the delivery does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Retry the delivery at `at` (whole seconds, never before now).
    Retry {
        /// When.
        at: i64,
        /// Why.
        wait: Wait,
    },
    /// The destination could not tell, look-up after look-up: the record is
    /// `needs_reconciliation`. A permanent failure: settle it by hand.
    NeedsReconciliation,
}

/// The delivery of a run found in flight, from the recovery that ran (none:
/// no recovery could run, for instance no look-up was given) at `now`.
pub fn in_flight_delivery(recovery: Option<&Recovered>, now: i64) -> Delivery {
    let retry = |at: i64, wait| Delivery::Retry {
        at: at.max(now),
        wait,
    };
    match recovery {
        Some(Recovered::NotDue { due_at }) => retry(*due_at, Wait::Running),
        Some(Recovered::Applied(RecoveryAction::CheckLater { next_lookup_at, .. })) => {
            retry(*next_lookup_at, Wait::Unknown)
        }
        Some(Recovered::NotInFlight(Status::NeedsReconciliation))
        | Some(Recovered::Applied(RecoveryAction::Reconcile { .. })) => {
            Delivery::NeedsReconciliation
        }
        // Done meanwhile (the next delivery replays it), lost to another
        // recoverer, gone, or no recovery: look again shortly.
        _ => retry(
            now.saturating_add(CHANGING_HANDS_SECONDS),
            Wait::ChangingHands,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    #[test]
    fn every_recovery_has_one_answer() {
        let check_later = RecoveryAction::CheckLater {
            lookups: 2,
            next_lookup_at: NOW + 60,
        };
        let cases = [
            (
                Some(Recovered::NotDue { due_at: NOW + 300 }),
                Delivery::Retry {
                    at: NOW + 300,
                    wait: Wait::Running,
                },
            ),
            (
                Some(Recovered::NotDue { due_at: NOW - 5 }),
                Delivery::Retry {
                    at: NOW,
                    wait: Wait::Running,
                },
            ),
            (
                Some(Recovered::Applied(check_later.clone())),
                Delivery::Retry {
                    at: NOW + 60,
                    wait: Wait::Unknown,
                },
            ),
            (
                Some(Recovered::Applied(RecoveryAction::Reconcile { lookups: 9 })),
                Delivery::NeedsReconciliation,
            ),
            (
                Some(Recovered::NotInFlight(Status::NeedsReconciliation)),
                Delivery::NeedsReconciliation,
            ),
            (
                Some(Recovered::NotInFlight(Status::Done)),
                Delivery::Retry {
                    at: NOW + 1,
                    wait: Wait::ChangingHands,
                },
            ),
            (
                Some(Recovered::Lost(check_later)),
                Delivery::Retry {
                    at: NOW + 1,
                    wait: Wait::ChangingHands,
                },
            ),
            (
                Some(Recovered::Missing),
                Delivery::Retry {
                    at: NOW + 1,
                    wait: Wait::ChangingHands,
                },
            ),
            (
                None,
                Delivery::Retry {
                    at: NOW + 1,
                    wait: Wait::ChangingHands,
                },
            ),
        ];
        for (recovery, expected) in cases {
            assert_eq!(
                in_flight_delivery(recovery.as_ref(), NOW),
                expected,
                "{recovery:?}"
            );
        }
        assert_eq!(
            in_flight_delivery(None, i64::MAX),
            Delivery::Retry {
                at: i64::MAX,
                wait: Wait::ChangingHands
            }
        );
    }
}
