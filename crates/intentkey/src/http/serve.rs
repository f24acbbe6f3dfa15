//! Serve one request: the composite HTTP flow every adapter drives.
//!
//! [`ServeFlow`] owns the order of everything that happens to a guarded
//! request, sans-I/O, so an adapter (Express, Fastify, fetch/Hono, axum,
//! a Python framework) only reads the request, performs the flow's store
//! operations, runs the handler when told, and writes the reply:
//!
//! 1. **admit** ([`Endpoint::admit`]): parse the key, check the body,
//!    derive the storage key and the fingerprint, or refuse (400, 413) or
//!    let the request run unguarded;
//! 2. **claim** ([`ClaimFlow`]): a done record is replayed, a record in
//!    flight is 409, another payload is the profile's conflict; a store that
//!    cannot be reached is 503, and one that answers with an error (a record
//!    it cannot decode) is the profile's 500: the handler never runs. When
//!    the failure was the insert's (it may have been committed, its answer
//!    lost), the flow first releases the claim, fenced on its own token and
//!    best effort, so a retry is not answered 409 until recovery;
//! 3. **handle**: the owner's handler runs ([`Op::Effect`]); the host hands
//!    back what it did ([`Handled`]) with [`ServeFlow::handled`];
//! 4. **capture** ([`Options::capture`]): what is stored of the answer
//!    (status, allow-listed headers, body bytes up to the cap); an error the
//!    handler chain raised with a 4xx status releases the claim
//!    ([`classify_error_status`]), any other failure leaves it in flight;
//! 5. **finish** ([`FinishFlow`]) by the outcome class; a store that cannot
//!    be reached is tried again after each pause of [`FINISH_RETRY_DELAYS_MS`]
//!    ([`Op::Wait`]: five pauses, six tries in all), and if the last try
//!    fails too the record is left in flight for recovery (never released by
//!    time);
//! 6. **answer** ([`Served`]): what goes to the client, and what the record
//!    became.
//!
//! A store operation that fails is reported to the flow with
//! [`OpResult::Failed`]; the flow decides what it means.
//!
//! ```
//! use intentkey::claim::{MemoryClaims, Flow, Op, OpResult, Step, perform, Rules, Finished};
//! use intentkey::http::{Endpoint, Handled, Incoming, Options, Profile, ServeFlow, ServePath};
//! use intentkey::Secret;
//!
//! let endpoint = Endpoint::new(Secret::new([9u8; 32])?, Options::new(Profile::Ietf));
//! let request = Incoming {
//!     tenant_id: "acct_1", method: "POST", route: "/orders",
//!     key_values: &["k-1"], content_type: Some("application/json"), body: b"{}",
//! };
//! let mut store = MemoryClaims::default();
//! let mut handler_runs = 0;
//! for seed in [[1u8; 16], [2u8; 16]] {
//!     let mut flow = ServeFlow::new(&endpoint, &request, Rules::default(), seed, 100)?;
//!     let mut step = flow.start();
//!     let served = loop {
//!         step = match step {
//!             Step::Done(served) => break served,
//!             Step::Io(Op::Effect(_)) => {
//!                 handler_runs += 1;
//!                 let headers = vec![("Content-Type".into(), "application/json".into()), ("Set-Cookie".into(), "s=1".into())];
//!                 flow.handled(Handled::Answered { status: 201, headers, body: br#"{"id":1}"#.to_vec() }, 101)?
//!             }
//!             Step::Io(op) => flow.resume(perform(&mut store, &op, &mut |_| unreachable!()).unwrap())?,
//!         };
//!     };
//!     if handler_runs == 1 && seed == [1u8; 16] {
//!         // The owner: its own answer goes out as it was; the record is stored.
//!         assert_eq!((served.path, served.reply, served.finished), (ServePath::Handler, None, Some(Finished::Stored)));
//!     } else {
//!         // The retry: the stored answer, without the header a replay does not restore.
//!         let reply = served.reply.unwrap();
//!         assert_eq!((served.path, reply.status, reply.header("set-cookie")), (ServePath::Replay, 201, None));
//!     }
//! }
//! assert_eq!(handler_runs, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::claim::{
    owner_token, Attempt, ClaimFlow, ClaimOutcome, EffectResult, FinishFlow, Finished, Flow,
    FlowError, Op, OpResult, OutcomeClass, Release, Rules, Step, StoreFailure, Waiter,
    FINISH_RETRY_DELAYS_MS, OWNER_TOKEN_BYTES,
};
use crate::error::Result;

use super::classify_error_status;
use super::endpoint::{Admission, Endpoint, Incoming};
use super::profile::Options;
use super::reply::{Refusal, Reply};

/// What an owner's handler did, as the adapter saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handled {
    /// It answered: the status, every header as it set them (in order, a
    /// header set twice given twice), and the body bytes.
    Answered {
        /// The status.
        status: u16,
        /// The headers, in order.
        headers: Vec<(String, String)>,
        /// The body.
        body: Vec<u8>,
    },
    /// Instead of answering, the handler chain raised an error that carries
    /// this HTTP status (Node: `status` or `statusCode`; a body parser's
    /// 400, `http-errors`): settled by [`classify_error_status`].
    Raised(u16),
    /// It threw without a status, crashed, timed out or never answered: its
    /// outcome is unknown.
    Failed,
}

/// The path a request took through [`ServeFlow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServePath {
    /// Refused before any claim (a bad or missing key, a bad or too large
    /// body): nothing stored.
    Refused,
    /// No key, and keys are optional: the handler runs unguarded.
    Unguarded,
    /// A done record: its answer replayed.
    Replay,
    /// The first request with the key still runs: 409.
    InFlight,
    /// The key came with another request: the profile's conflict.
    PayloadConflict,
    /// The store could not be reached, or answered with an error, before
    /// anything was claimed: the handler did not run.
    Unavailable,
    /// The handler ran and answered; its answer goes out as it gave it.
    Handler,
    /// The handler chain raised an error with a client status: the claim is
    /// released and the framework answers the error.
    Released,
    /// The handler failed: 500, the record stays in flight.
    Failed,
}

impl ServePath {
    /// `refused`, `unguarded`, `replay`, `in-flight`, `payload-conflict`,
    /// `unavailable`, `handler`, `released` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServePath::Refused => "refused",
            ServePath::Unguarded => "unguarded",
            ServePath::Replay => "replay",
            ServePath::InFlight => "in-flight",
            ServePath::PayloadConflict => "payload-conflict",
            ServePath::Unavailable => "unavailable",
            ServePath::Handler => "handler",
            ServePath::Released => "released",
            ServePath::Failed => "failed",
        }
    }
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The path it took.
    pub path: ServePath,
    /// The core's answer to send; `None` for [`ServePath::Handler`] (the
    /// handler's own answer goes out as it gave it, headers outside the
    /// replay allow-list included), [`ServePath::Released`] (the framework
    /// answers the error) and [`ServePath::Unguarded`] (run the handler).
    pub reply: Option<Reply>,
    /// What finishing the record did, for a request that owned it; `None`
    /// when it owned nothing, or when finishing failed on every try (the
    /// record stays in flight and recovery settles it).
    pub finished: Option<Finished>,
    /// How many times finishing was tried again after the store failed.
    pub finish_retries: u32,
    /// The store failure that ended the claim ([`ServePath::Unavailable`]),
    /// for the host to report (`onError`, `tracing`): the client's answer
    /// never carries it.
    pub claim_failure: Option<StoreFailure>,
    /// Every store failure while finishing, in order, for the host to report.
    pub finish_failures: Vec<StoreFailure>,
    /// How long the request waited for the first attempt with its key
    /// ([`Options::wait_max_ms`]), in milliseconds; 0 when it did not wait.
    pub waited_ms: u32,
    /// A claim whose insert failed (a dropped connection, a missed
    /// deadline): it may have been committed with its answer lost, and its
    /// handler never ran. The host releases it in the background with a
    /// [`crate::claim::ReleaseFlow`] (fenced on this owner's token, tried
    /// again until the store answers), so a retry is not answered 409 until
    /// recovery.
    pub unreleased: Option<Release>,
}

#[derive(Clone, Debug)]
enum Stage {
    /// Admitted; nothing started.
    Start,
    Claim(ClaimFlow),
    /// Waiting for the handler.
    Handle,
    Finish {
        flow: FinishFlow,
        result: EffectResult,
        ended: i64,
        path: ServePath,
    },
    /// Watching a record in flight ([`Op::Watch`]); then claiming again.
    Watch,
    /// Waiting out a pause before finishing again.
    Pause {
        result: EffectResult,
        ended: i64,
        path: ServePath,
    },
    Over,
}

/// One request through admit → claim → handle → capture → finish → answer.
/// See the [module docs](self).
#[derive(Clone, Debug)]
pub struct ServeFlow {
    options: std::sync::Arc<Options>,
    rules: Rules,
    admission: Option<Admission>,
    attempt: Option<Attempt>,
    token: String,
    now: i64,
    retries: u32,
    /// The claim's last operation was its insert.
    inserting: bool,
    claim_failure: Option<StoreFailure>,
    finish_failures: Vec<StoreFailure>,
    unreleased: Option<Release>,
    seed: [u8; OWNER_TOKEN_BYTES],
    waiter: Option<Waiter>,
    stage: Stage,
}

impl ServeFlow {
    /// Admits `request` at `now` on `endpoint`; the record, if claimed, is
    /// owned by the token made of `seed` (16 random bytes from the host)
    /// and finished by `rules`.
    ///
    /// # Errors
    /// [`Endpoint::admit`]'s: what the server, not the client, got wrong
    /// (an empty tenant or route, no secret active at `now`).
    pub fn new(
        endpoint: &Endpoint,
        request: &Incoming<'_>,
        rules: Rules,
        seed: [u8; OWNER_TOKEN_BYTES],
        now: i64,
    ) -> Result<Self> {
        let admission = endpoint.admit(request, now)?;
        Ok(ServeFlow {
            options: endpoint.shared_options(),
            rules,
            admission: Some(admission),
            attempt: None,
            token: owner_token(seed),
            now,
            retries: 0,
            inserting: false,
            claim_failure: None,
            finish_failures: Vec::new(),
            unreleased: None,
            seed,
            waiter: None,
            stage: Stage::Start,
        })
    }

    /// The attempt being served (storage key, fingerprint, tenant, action),
    /// once admitted as guarded.
    pub fn attempt(&self) -> Option<&Attempt> {
        self.attempt.as_ref()
    }

    /// The owner token of the claim.
    pub fn owner_token(&self) -> &str {
        &self.token
    }

    fn end(
        &mut self,
        path: ServePath,
        reply: Option<Reply>,
        finished: Option<Finished>,
    ) -> Step<Served> {
        self.stage = Stage::Over;
        Step::Done(Served {
            path,
            reply,
            finished,
            finish_retries: self.retries,
            claim_failure: self.claim_failure.take(),
            finish_failures: std::mem::take(&mut self.finish_failures),
            waited_ms: self.waiter.as_ref().map_or(0, Waiter::waited_ms),
            unreleased: self.unreleased.take(),
        })
    }

    /// The claim's outcome; `in_flight`: the key of the record in flight
    /// it lost to, which the request watches while its wait lasts.
    fn claimed(&mut self, outcome: ClaimOutcome, in_flight: Option<String>) -> Step<Served> {
        let path = match &outcome {
            ClaimOutcome::Owned => {
                self.stage = Stage::Handle;
                let key = self.attempt.as_ref().map(|a| a.key.clone());
                return Step::Io(Op::Effect(key.unwrap_or_default()));
            }
            ClaimOutcome::Done(_) => ServePath::Replay,
            ClaimOutcome::InFlight => {
                if let Some(watch) = in_flight.and_then(|key| self.watch(&key)) {
                    return watch;
                }
                ServePath::InFlight
            }
            ClaimOutcome::PayloadConflict => ServePath::PayloadConflict,
        };
        let reply = self.options.reply(&outcome, self.now);
        self.end(path, reply, None)
    }

    /// The next watch of the record in flight at `key`, while the wait
    /// ([`Options::wait_max_ms`]) lasts.
    fn watch(&mut self, key: &str) -> Option<Step<Served>> {
        if self.waiter.is_none() {
            self.waiter = Waiter::new(self.options.wait_max_ms, self.seed);
        }
        let op = self.waiter.as_mut()?.next(key)?;
        self.stage = Stage::Watch;
        Some(Step::Io(op))
    }

    /// Claims the admitted attempt (again, after a watch).
    fn claim(&mut self) -> Step<Served> {
        let Some(attempt) = &self.attempt else {
            let reply = self.options.refuse(Refusal::Failed, self.now);
            return self.end(ServePath::Failed, Some(reply), None);
        };
        let mut flow = ClaimFlow::new(attempt, &self.token, self.now);
        match flow.start() {
            Step::Io(op) => self.claim_io(flow, op),
            Step::Done(outcome) => {
                let key = flow.in_flight_key().map(str::to_owned);
                self.claimed(outcome, key)
            }
        }
    }

    /// The handler's outcome (the answer to [`Op::Effect`]) at `now`, the
    /// time it ended: captured, classified and finished.
    ///
    /// # Errors
    /// [`FlowError::Misuse`] when the flow was not waiting for the handler.
    pub fn handled(&mut self, handled: Handled, now: i64) -> Result<Step<Served>, FlowError> {
        if !matches!(self.stage, Stage::Handle) {
            return Err(FlowError::Misuse {
                expected: self.expected(),
                got: "handled",
            });
        }
        let (result, path) = match handled {
            Handled::Answered {
                status,
                headers,
                body,
            } => (
                EffectResult::Answered(self.options.capture(status, &headers, &body)),
                ServePath::Handler,
            ),
            Handled::Raised(status) => match classify_error_status(status) {
                OutcomeClass::Released => (EffectResult::Refused(None), ServePath::Released),
                _ => (EffectResult::Failed, ServePath::Failed),
            },
            Handled::Failed => (EffectResult::Failed, ServePath::Failed),
        };
        Ok(self.finish(result, now, path))
    }

    fn finish(&mut self, result: EffectResult, ended: i64, path: ServePath) -> Step<Served> {
        let key = self.attempt.as_ref().map(|a| a.key.as_str()).unwrap_or("");
        let mut flow = FinishFlow::new(key, &self.token, result.clone(), ended, &self.rules);
        match flow.start() {
            Step::Io(op) => {
                self.stage = Stage::Finish {
                    flow,
                    result,
                    ended,
                    path,
                };
                Step::Io(op)
            }
            Step::Done(finished) => self.finished(path, Some(finished)),
        }
    }

    fn finished(&mut self, path: ServePath, finished: Option<Finished>) -> Step<Served> {
        let reply = match path {
            ServePath::Failed => Some(self.options.refuse(Refusal::Failed, self.now)),
            _ => None,
        };
        self.end(path, reply, finished)
    }

    fn expected(&self) -> &'static str {
        match &self.stage {
            Stage::Start => "nothing (start the flow)",
            Stage::Claim(_) => "the claim's store result",
            Stage::Handle => "handled (the handler's outcome)",
            Stage::Finish { .. } => "written",
            Stage::Pause { .. } => "waited",
            Stage::Watch => "watched",
            Stage::Over => "nothing (the flow is done)",
        }
    }

    fn misuse<T>(&self, got: &OpResult) -> Result<T, FlowError> {
        Err(FlowError::Misuse {
            expected: self.expected(),
            got: got.as_str(),
        })
    }

    /// A store failure before the claim decided: nothing was claimed, the
    /// handler does not run.
    fn claim_failed(&mut self, failure: StoreFailure) -> Step<Served> {
        let reply = if failure.unavailable {
            self.options.refuse(Refusal::Unavailable, self.now)
        } else {
            // The store answered with an error (a record it cannot decode):
            // nobody can tell whether the effect happened, so it never runs.
            self.options.refuse(Refusal::Failed, self.now)
        };
        self.claim_failure = Some(failure);
        if self.inserting {
            // The insert may have been committed and its answer lost; its
            // handler never ran. The host releases it in the background,
            // fenced on this owner's token, so a retry is not answered 409
            // until recovery; the 503 goes out now.
            self.unreleased = self.attempt.as_ref().map(|attempt| Release {
                key: attempt.key.clone(),
                owner_token: self.token.clone(),
            });
        }
        self.end(ServePath::Unavailable, Some(reply), None)
    }

    /// A claim step handed to the host, noting whether it is the insert.
    fn claim_io(&mut self, flow: ClaimFlow, op: Op) -> Step<Served> {
        self.inserting = matches!(op, Op::Insert(_));
        self.stage = Stage::Claim(flow);
        Step::Io(op)
    }
}

impl Flow for ServeFlow {
    type Output = Served;

    fn start(&mut self) -> Step<Served> {
        match self.admission.take() {
            Some(Admission::Refused(reply)) => self.end(ServePath::Refused, Some(reply), None),
            Some(Admission::Unguarded) => self.end(ServePath::Unguarded, None, None),
            Some(Admission::Guarded(attempt)) => {
                self.attempt = Some(attempt);
                self.claim()
            }
            // Started twice (a bug in the host): the first start already
            // ended or went on, and stays as it is; this answer is the 500.
            None => Step::Done(Served {
                path: ServePath::Failed,
                reply: Some(self.options.refuse(Refusal::Failed, self.now)),
                finished: None,
                finish_retries: self.retries,
                claim_failure: None,
                finish_failures: Vec::new(),
                waited_ms: 0,
                unreleased: None,
            }),
        }
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<Served>, FlowError> {
        match std::mem::replace(&mut self.stage, Stage::Over) {
            Stage::Claim(mut flow) => {
                if let OpResult::Failed(failure) = result {
                    return Ok(self.claim_failed(failure));
                }
                match flow.resume(result) {
                    Ok(Step::Io(op)) => Ok(self.claim_io(flow, op)),
                    Ok(Step::Done(outcome)) => {
                        let key = flow.in_flight_key().map(str::to_owned);
                        Ok(self.claimed(outcome, key))
                    }
                    // The record the claim lost to vanished every time it
                    // looked: nothing was claimed, and a retry may succeed.
                    Err(e @ FlowError::Vanished { .. }) => Ok(self.claim_failed(StoreFailure {
                        unavailable: true,
                        message: e.to_string(),
                    })),
                    Err(e) => {
                        self.stage = Stage::Claim(flow);
                        Err(e)
                    }
                }
            }
            Stage::Watch => match result {
                OpResult::Watched { elapsed_ms, now } => {
                    if let Some(waiter) = &mut self.waiter {
                        waiter.woke(elapsed_ms);
                    }
                    // Time never goes back: a host without a clock answers
                    // the lowest time.
                    self.now = self.now.max(now);
                    Ok(self.claim())
                }
                other => {
                    self.stage = Stage::Watch;
                    self.misuse(&other)
                }
            },
            Stage::Finish {
                mut flow,
                result: effect,
                ended,
                path,
            } => match result {
                OpResult::Failed(failure) => {
                    let next = FINISH_RETRY_DELAYS_MS.get(self.retries as usize).copied();
                    let unavailable = failure.unavailable;
                    self.finish_failures.push(failure);
                    match (unavailable, next) {
                        (true, Some(ms)) => {
                            self.stage = Stage::Pause {
                                result: effect,
                                ended,
                                path,
                            };
                            Ok(Step::Io(Op::Wait(ms)))
                        }
                        // Tried on the whole schedule, or the store answered
                        // with an error: the record stays in flight and
                        // recovery settles it. The answer still goes out.
                        _ => Ok(self.finished(path, None)),
                    }
                }
                other => match flow.resume(other) {
                    Ok(Step::Done(finished)) => Ok(self.finished(path, Some(finished))),
                    Ok(Step::Io(op)) => {
                        self.stage = Stage::Finish {
                            flow,
                            result: effect,
                            ended,
                            path,
                        };
                        Ok(Step::Io(op))
                    }
                    Err(e) => {
                        // Resumed with the wrong result: the stage stays.
                        self.stage = Stage::Finish {
                            flow,
                            result: effect,
                            ended,
                            path,
                        };
                        Err(e)
                    }
                },
            },
            Stage::Pause {
                result: effect,
                ended,
                path,
            } => match result {
                OpResult::Waited => {
                    self.retries += 1;
                    Ok(self.finish(effect, ended, path))
                }
                other => {
                    self.stage = Stage::Pause {
                        result: effect,
                        ended,
                        path,
                    };
                    self.misuse(&other)
                }
            },
            stage @ (Stage::Start | Stage::Handle | Stage::Over) => {
                self.stage = stage;
                self.misuse(&result)
            }
        }
    }
}
