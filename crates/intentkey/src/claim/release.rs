//! Releasing a claim whose handler never ran, once the store answers again.
//!
//! When a claim's insert fails (the connection dropped, the store call's
//! deadline passed), its outcome is unknown: the insert may have been
//! committed and only its answer lost. The owner knows what the store does
//! not: its handler never ran. [`crate::http::ServeFlow`] answers 503 at
//! once and hands that claim back ([`crate::http::Served::unreleased`]);
//! the host drives a [`ReleaseFlow`] for it in the background. The flow
//! sends the fenced release (it deletes the record only while it is in
//! flight under this owner's token, so it can never delete another
//! attempt's claim) and, while the store cannot be reached, tries again
//! after each pause of [`RELEASE_RETRY_DELAYS_MS`], then every
//! [`RELEASE_RETRY_LAST_MS`], for at most [`RELEASE_GIVE_UP_MS`] (the
//! default staleness: by then recovery may settle the record). Keys whose
//! effect never started are then not left in flight.
//!
//! ```
//! use intentkey::claim::{
//!     perform, Finished, Flow, MemoryClaims, Op, OpResult, Release, ReleaseFlow, Step, StoreFailure,
//! };
//!
//! let mut flow = ReleaseFlow::new(Release { key: "k1".into(), owner_token: "t1".into() });
//! let Step::Io(release @ Op::Release(_)) = flow.start() else { unreachable!() };
//! // The store is still down: the flow pauses, then tries again.
//! let down = StoreFailure { unavailable: true, message: "timed out".into() };
//! assert_eq!(flow.resume(OpResult::Failed(down))?, Step::Io(Op::Wait(100)));
//! assert_eq!(flow.resume(OpResult::Waited)?, Step::Io(release.clone()));
//! // It answers: the claim was never committed (or is gone), nothing to do.
//! let written = perform(&mut MemoryClaims::default(), &release, &mut |_| unreachable!()).unwrap();
//! assert_eq!(flow.resume(written)?, Step::Done(Finished::Superseded));
//! # Ok::<(), intentkey::claim::FlowError>(())
//! ```

use super::flow::{misuse, Finished, Flow, FlowError, Op, OpResult, Release, Step};

/// The pauses before the first new tries of a release the store could not
/// take, in milliseconds.
pub const RELEASE_RETRY_DELAYS_MS: [u32; 6] = [100, 200, 400, 800, 1_600, 3_200];

/// The pause between the later tries, in milliseconds.
pub const RELEASE_RETRY_LAST_MS: u32 = 5_000;

/// How long a release is tried in all, in milliseconds (the default
/// staleness, 300 s: past it recovery may settle the record).
pub const RELEASE_GIVE_UP_MS: u64 = 300_000;

/// Releases one claim whose handler never ran, trying again while the store
/// cannot be reached. Its answer: [`Finished::Released`] (deleted),
/// [`Finished::Superseded`] (nothing of this owner's was there: the insert
/// was never committed, or the record is another's now) or
/// [`Finished::LeftInFlight`] (the store answered with an error, or never
/// came back within [`RELEASE_GIVE_UP_MS`]: recovery settles the record).
#[derive(Clone, Debug)]
pub struct ReleaseFlow {
    release: Release,
    tries: u32,
    paused_ms: u64,
    waiting: bool,
}

impl ReleaseFlow {
    /// The release of `release.key`, fenced on `release.owner_token`.
    pub fn new(release: Release) -> Self {
        ReleaseFlow {
            release,
            tries: 0,
            paused_ms: 0,
            waiting: false,
        }
    }

    /// How many times the release was sent.
    pub fn tries(&self) -> u32 {
        self.tries
    }

    fn send(&mut self) -> Step<Finished> {
        self.tries += 1;
        self.waiting = false;
        Step::Io(Op::Release(self.release.clone()))
    }
}

impl Flow for ReleaseFlow {
    type Output = Finished;

    fn start(&mut self) -> Step<Finished> {
        self.tries = 0;
        self.paused_ms = 0;
        self.send()
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<Finished>, FlowError> {
        match (self.waiting, result) {
            (false, OpResult::Written(true)) => Ok(Step::Done(Finished::Released)),
            (false, OpResult::Written(false)) => Ok(Step::Done(Finished::Superseded)),
            (false, OpResult::Failed(failure)) => {
                let pause = RELEASE_RETRY_DELAYS_MS
                    .get(self.tries as usize - 1)
                    .copied()
                    .unwrap_or(RELEASE_RETRY_LAST_MS);
                if !failure.unavailable || self.paused_ms + u64::from(pause) > RELEASE_GIVE_UP_MS {
                    return Ok(Step::Done(Finished::LeftInFlight));
                }
                self.paused_ms += u64::from(pause);
                self.waiting = true;
                Ok(Step::Io(Op::Wait(pause)))
            }
            (true, OpResult::Waited) => Ok(self.send()),
            (true, other) => misuse("waited", &other),
            (false, other) => misuse("written", &other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::StoreFailure;

    fn down() -> OpResult {
        OpResult::Failed(StoreFailure {
            unavailable: true,
            message: "timed out".into(),
        })
    }

    #[test]
    fn it_tries_on_the_schedule_then_every_five_seconds_then_gives_up() {
        let mut flow = ReleaseFlow::new(Release {
            key: "k".into(),
            owner_token: "t".into(),
        });
        let mut step = flow.start();
        let mut pauses = Vec::new();
        loop {
            step = match step {
                Step::Io(Op::Release(_)) => flow.resume(down()).unwrap(),
                Step::Io(Op::Wait(ms)) => {
                    pauses.push(ms);
                    flow.resume(OpResult::Waited).unwrap()
                }
                Step::Done(finished) => {
                    assert_eq!(finished, Finished::LeftInFlight);
                    break;
                }
                other => panic!("{other:?}"),
            };
        }
        assert_eq!(&pauses[..6], &RELEASE_RETRY_DELAYS_MS);
        assert!(pauses[6..].iter().all(|&p| p == RELEASE_RETRY_LAST_MS));
        let total: u64 = pauses.iter().map(|&p| u64::from(p)).sum();
        assert!(
            total <= RELEASE_GIVE_UP_MS && total > RELEASE_GIVE_UP_MS - 5_000,
            "{total}"
        );
        assert_eq!(flow.tries() as usize, pauses.len() + 1);
    }

    #[test]
    fn a_store_error_or_an_answer_ends_it() {
        let release = Release {
            key: "k".into(),
            owner_token: "t".into(),
        };
        let mut flow = ReleaseFlow::new(release.clone());
        flow.start();
        let refused = OpResult::Failed(StoreFailure {
            unavailable: false,
            message: "no such table".into(),
        });
        assert_eq!(
            flow.resume(refused).unwrap(),
            Step::Done(Finished::LeftInFlight)
        );
        let mut flow = ReleaseFlow::new(release);
        flow.start();
        assert_eq!(
            flow.resume(OpResult::Written(true)).unwrap(),
            Step::Done(Finished::Released)
        );
        assert!(
            flow.resume(OpResult::Waited).is_err(),
            "misuse after the end is refused"
        );
    }
}
