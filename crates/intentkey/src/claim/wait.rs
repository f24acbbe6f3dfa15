//! The bounded wait for the first attempt's answer, decided once for every
//! host.
//!
//! A retry that finds its key in flight may wait for the first attempt
//! instead of answering 409 at once (an option, off by default:
//! [`crate::http::Options::wait_max_ms`], [`super::RunSpec::wait_max_ms`]).
//! The flows compare the fingerprint first (another payload is a conflict
//! at once, with no wait), then ask the host to [`Op::Watch`] the record:
//! "return when the store says this key changed, or after `ms`". After each
//! watch the flow claims again: a done record is replayed, a record
//! released or purged meanwhile is claimed by the waiter, and a record
//! still in flight is watched again until the budget is spent; then the
//! answer is the profile's 409 with `Retry-After`.
//!
//! The watch intervals come from [`Waiter`]: 50 ms, doubling up to 1 s,
//! each shortened by up to a quarter from the owner token's random bytes
//! (jitter without randomness of the core's own), and never past the
//! budget. A host whose store notifies (PostgreSQL `LISTEN/NOTIFY`, Redis
//! pub/sub, an in-process writer) returns early on the notification, so
//! the intervals are its periodic re-check for a notification it lost; a
//! host without notifications sleeps each interval (polling with jitter and
//! back-off).
//!
//! ```
//! use intentkey::claim::{Op, Waiter, WatchRequest};
//!
//! let mut waiter = Waiter::new(300, [7u8; 16]).expect("a budget");
//! let mut asked = Vec::new();
//! while let Some(Op::Watch(WatchRequest { ms, .. })) = waiter.next("k1") {
//!     asked.push(ms);
//!     waiter.woke(ms); // nobody notified: the whole interval passed
//! }
//! assert_eq!(asked.iter().sum::<u32>(), 300, "{asked:?}");
//! assert!(asked[0] <= 50 && asked[1] <= 100, "{asked:?}");
//! assert_eq!(waiter.waited_ms(), 300);
//! assert!(Waiter::new(0, [7u8; 16]).is_none(), "0: no waiting");
//! ```

use super::flow::Op;
use super::record::OWNER_TOKEN_BYTES;

/// The first watch interval, in milliseconds.
pub const WATCH_FIRST_MS: u32 = 50;

/// The longest watch interval, in milliseconds: the periodic re-check of a
/// host whose notifications may be lost.
pub const WATCH_LONGEST_MS: u32 = 1_000;

/// The longest wait an option may ask for, in milliseconds (a request
/// that waits longer holds its client past any sensible timeout).
pub const WAIT_MAX_MS_LIMIT: u32 = 60_000;

/// What a host watches: return when the store says the record of `key`
/// changed (completed, released, deleted, taken over) or after `ms`, then
/// resume with [`super::OpResult::Watched`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchRequest {
    /// The record's key.
    pub key: String,
    /// The longest pause, in milliseconds.
    pub ms: u32,
}

/// A wait's budget and intervals. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    remaining_ms: u32,
    waited_ms: u32,
    rounds: u32,
    jitter: [u8; OWNER_TOKEN_BYTES],
}

impl Waiter {
    /// A wait of at most `max_ms` milliseconds, its jitter drawn from `seed`
    /// (the owner token's random bytes); `None` when `max_ms` is 0 (waiting
    /// is off).
    pub fn new(max_ms: u32, seed: [u8; OWNER_TOKEN_BYTES]) -> Option<Waiter> {
        (max_ms > 0).then_some(Waiter {
            remaining_ms: max_ms.min(WAIT_MAX_MS_LIMIT),
            waited_ms: 0,
            rounds: 0,
            jitter: seed,
        })
    }

    /// The next watch of `key`, or `None` when the budget is spent.
    pub fn next(&mut self, key: &str) -> Option<Op> {
        if self.remaining_ms == 0 {
            return None;
        }
        let base = WATCH_FIRST_MS
            .saturating_mul(1 << self.rounds.min(10))
            .min(WATCH_LONGEST_MS);
        let byte = self.jitter[self.rounds as usize % OWNER_TOKEN_BYTES];
        // Up to a quarter shorter: waiters that came together spread out.
        let ms = (base - base / 4 * u32::from(byte) / 255).max(1);
        self.rounds += 1;
        Some(Op::Watch(WatchRequest {
            key: key.to_owned(),
            ms: ms.min(self.remaining_ms),
        }))
    }

    /// The host's watch returned after `elapsed_ms` (early on a
    /// notification, or the whole interval).
    pub fn woke(&mut self, elapsed_ms: u32) {
        self.remaining_ms = self.remaining_ms.saturating_sub(elapsed_ms.max(1));
        self.waited_ms = self.waited_ms.saturating_add(elapsed_ms);
    }

    /// How long the wait has lasted, in milliseconds.
    pub fn waited_ms(&self) -> u32 {
        self.waited_ms
    }

    /// How many watches were asked for.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }
}

/// Checks a wait option: at most [`WAIT_MAX_MS_LIMIT`].
///
/// # Errors
/// `invalid-argument` naming `field` when `max_ms` is larger.
pub fn check_wait_max_ms(field: &str, max_ms: u32) -> crate::Result<u32> {
    if max_ms > WAIT_MAX_MS_LIMIT {
        return Err(crate::Error::field(
            crate::ErrorCode::InvalidArgument,
            field,
            format!(
                "{field}: a wait of {max_ms} ms is longer than {WAIT_MAX_MS_LIMIT} ms, the most a \
                 client waits for the first attempt; give 0 (no wait, 409 at once) up to {WAIT_MAX_MS_LIMIT}"
            ),
        ));
    }
    Ok(max_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intervals(max_ms: u32, seed: [u8; 16], elapsed: impl Fn(u32) -> u32) -> Vec<u32> {
        let mut waiter = Waiter::new(max_ms, seed).unwrap();
        let mut out = Vec::new();
        while let Some(Op::Watch(w)) = waiter.next("k") {
            out.push(w.ms);
            waiter.woke(elapsed(w.ms));
        }
        out
    }

    #[test]
    fn intervals_double_up_to_the_longest_and_stop_at_the_budget() {
        let all = intervals(10_000, [0u8; 16], |ms| ms);
        assert_eq!(&all[..6], &[50, 100, 200, 400, 800, 1000]);
        assert!(
            all[6..all.len() - 1].iter().all(|&ms| ms == 1000),
            "{all:?}"
        );
        assert_eq!(all.iter().sum::<u32>(), 10_000);
    }

    #[test]
    fn jitter_shortens_by_at_most_a_quarter() {
        let all = intervals(10_000, [255u8; 16], |ms| ms);
        assert_eq!(&all[..3], &[38, 75, 150]);
        let other = intervals(10_000, [128u8; 16], |ms| ms);
        assert_ne!(all, other, "two seeds, two schedules");
    }

    #[test]
    fn an_early_wake_leaves_the_rest_of_the_budget() {
        let mut waiter = Waiter::new(500, [0u8; 16]).unwrap();
        let _ = waiter.next("k");
        waiter.woke(3);
        assert_eq!(waiter.waited_ms(), 3);
        let mut total = 3;
        while let Some(Op::Watch(w)) = waiter.next("k") {
            total += w.ms;
            waiter.woke(w.ms);
        }
        assert_eq!(total, 500);
    }

    #[test]
    fn a_watch_that_returns_at_once_still_spends_the_budget() {
        // A host that answers 0 ms every time cannot spin forever.
        let mut waiter = Waiter::new(100, [0u8; 16]).unwrap();
        let mut rounds = 0;
        while waiter.next("k").is_some() {
            waiter.woke(0);
            rounds += 1;
        }
        assert_eq!(rounds, 100);
    }

    #[test]
    fn the_option_is_bounded() {
        assert_eq!(check_wait_max_ms("wait.maxMs", 5_000).unwrap(), 5_000);
        let e = check_wait_max_ms("wait.maxMs", 60_001).unwrap_err();
        assert_eq!(e.code().as_str(), "invalid-argument");
        assert!(e.to_string().contains("wait.maxMs"), "{e}");
    }
}
