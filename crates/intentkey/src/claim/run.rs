//! Run an effect once: the composite flow every host drives.
//!
//! [`RunFlow`] composes the claim flows one level up, so no host sequences
//! claims itself:
//!
//! 1. claim the attempt's key ([`ClaimFlow`]);
//! 2. a done record is replayed, another payload is a conflict;
//! 3. an owned claim asks the host to run the effect ([`Op::Effect`]), then
//!    finishes the record by the result's outcome class ([`FinishFlow`]);
//! 4. a record in flight, once stale, is recovered with the destination's
//!    look-up ([`RecoverFlow`]): found is replayed, a trusted absent re-runs
//!    the effect under the recovery's token, unknown never re-runs;
//! 5. a record that changed under the attempt (released, purged, superseded
//!    while a step ran) is claimed again, at most [`CLAIM_TRIES`] times in
//!    all; then the flow fails with the one retryable error
//!    [`FlowError::Vanished`] (`record-vanished`), the same in every host.
//!
//! Three kinds share the flow ([`RunKind`]): a plain effect (`guard.run`),
//! a journaled step (its destination is the journal itself: the flow
//! answers its own look-up with "absent", trusted, and a step superseded
//! by a recoverer is claimed again to read what the recoverer recorded),
//! and a journaled tool call (an effect on the world, recovered only with
//! the host's look-up).
//!
//! The host supplies 16 random bytes per run ([`RunFlow::new`]); the owner
//! token of each claim and recovery is derived from them, so the core stays
//! free of randomness and every claim writes a token of its own.
//!
//! ```
//! use intentkey::claim::{
//!     Attempt, EffectResult, MemoryClaims, Response, RunFlow, RunKind, RunOutcome, RunSpec,
//!     drive_run,
//! };
//!
//! let mut store = MemoryClaims::default();
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
//! let spec = RunSpec::new(attempt, RunKind::Effect, 100);
//! let mut effects = 0;
//! for seed in [[1u8; 16], [2u8; 16]] {
//!     let outcome = drive_run(&mut RunFlow::new(spec.clone(), seed), &mut store, &mut |_| unreachable!(), &mut |key| {
//!         effects += 1;
//!         (EffectResult::Answered(Response::json(201, format!(r#"{{"key":"{key}"}}"#))), 101)
//!     })?;
//!     assert!(matches!(outcome, RunOutcome::Ran { .. } | RunOutcome::Replayed { .. }));
//! }
//! assert_eq!(effects, 1);
//! # Ok::<(), intentkey::claim::DriveError<std::convert::Infallible>>(())
//! ```

use sha2::{Digest, Sha256};

use super::decide::{ClaimOutcome, EffectResult, Lookup, RecoveryAction, Rules};
use super::flow::{
    misuse, ClaimFlow, ClaimStore, DriveError, FinishFlow, Finished, Flow, FlowError, Op, OpResult,
    RecoverFlow, Recovered, RecoveryRules, Step, CLAIM_TRIES,
};
use super::record::{owner_token, Attempt, Response, Status, OWNER_TOKEN_BYTES};
use super::wait::Waiter;

/// What is run once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// An effect on the world (`guard.run`, a queue delivery): recovered
    /// only when the host has the destination's look-up.
    Effect,
    /// A journaled step (an LLM completion): its output lives only in the
    /// journal, so its look-up is "absent", trusted, answered by the core;
    /// a step superseded by a recoverer is claimed again.
    Step,
    /// A journaled tool call: an effect on the world, as [`RunKind::Effect`].
    ToolCall,
}

impl RunKind {
    /// `effect`, `step` or `tool-call`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Effect => "effect",
            RunKind::Step => "step",
            RunKind::ToolCall => "tool-call",
        }
    }
}

/// What a run needs: the attempt, how outcomes are finished, and whether a
/// record in flight is recovered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    /// The claim attempt (key, fingerprint, tenant, action).
    pub attempt: Attempt,
    /// What is run.
    pub kind: RunKind,
    /// How the effect's result is finished.
    pub rules: Rules,
    /// How a record in flight is recovered once stale; `None`: it is
    /// answered as in flight (409, `step-in-flight`) and never recovered
    /// here. A step is always recovered (its look-up is the core's).
    pub recovery: Option<RecoveryRules>,
    /// The time of the claim.
    pub now: i64,
    /// How long a run that finds its record in flight (and not yet due a
    /// recovery) waits for the first attempt's answer, in milliseconds,
    /// before it answers in flight (0: no wait). See [`super::wait`].
    pub wait_max_ms: u32,
}

impl RunSpec {
    /// A run of `attempt` at `now` with the default rules; a step is
    /// recovered with the default recovery rules, an effect or tool call is
    /// not (give [`RunSpec::recovery`] a look-up's rules to recover it).
    pub fn new(attempt: Attempt, kind: RunKind, now: i64) -> Self {
        let recovery = (kind == RunKind::Step).then(RecoveryRules::default);
        RunSpec {
            attempt,
            kind,
            rules: Rules::default(),
            recovery,
            now,
            wait_max_ms: 0,
        }
    }
}

impl RunSpec {
    /// The spec of a recovery-only run of `key` ([`RunFlow::recover`]):
    /// records claimed less than `stale_after` seconds ago are left alone,
    /// `absent` is trusted only with `read_your_writes`, and a record
    /// recovered as done is kept for `rules.ttl_seconds`.
    pub fn recovery_of(
        key: &str,
        rules: Rules,
        stale_after: i64,
        read_your_writes: bool,
        now: i64,
    ) -> Self {
        let recovery = RecoveryRules {
            stale_after,
            read_your_writes,
            ttl_seconds: rules.ttl_seconds,
        };
        RunSpec {
            attempt: Attempt {
                key: key.to_owned(),
                fingerprint: String::new(),
                tenant_id: String::new(),
                action_type: String::new(),
                prior: None,
            },
            kind: RunKind::Effect,
            rules,
            recovery: Some(recovery),
            now,
            wait_max_ms: 0,
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// This attempt ran the effect and finished the record (`recovered`:
    /// it took a stale record over through recovery to do so). The answer
    /// is the effect's own.
    Ran {
        /// What finishing did.
        finished: Finished,
        /// Whether the run re-executed a stale record it recovered.
        recovered: bool,
    },
    /// A stored answer: the record was done, or recovery recorded the
    /// destination's answer (`recovered`).
    Replayed {
        /// The stored response.
        response: Response,
        /// Whether recovery recorded it during this run.
        recovered: bool,
    },
    /// The key came with another payload: 422, `step-input-changed`.
    Conflict,
    /// Another attempt holds the record and it could not be settled now:
    /// 409, `step-in-flight`. `recovery` says what recovery found, when it
    /// ran (not due yet, a look-up that could not tell, …).
    InFlight {
        /// The recovery this run tried, if any.
        recovery: Option<Recovered>,
    },
    /// A recovery-only run ([`RunFlow::recover`]) that ran no effect and
    /// replayed nothing: what the recovery did (missing, not in flight, not
    /// due, lost, asked again later, reconciled; or an applied re-execute
    /// the caller runs itself, under [`RunFlow::owner_token`]).
    Recovery(Recovered),
}

impl RunOutcome {
    /// `ran`, `replayed`, `conflict`, `in-flight` or `recovery`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RunOutcome::Ran { .. } => "ran",
            RunOutcome::Replayed { .. } => "replayed",
            RunOutcome::Conflict => "conflict",
            RunOutcome::InFlight { .. } => "in-flight",
            RunOutcome::Recovery(_) => "recovery",
        }
    }

    /// A recovery-only run ([`RunFlow::recover`]) as what the recovery did
    /// and, when it re-ran the effect, what finishing did.
    pub fn into_recovered(self) -> (Recovered, Option<Finished>) {
        match self {
            RunOutcome::Ran { finished, .. } => (
                Recovered::Applied(RecoveryAction::ReExecute),
                Some(finished),
            ),
            RunOutcome::Replayed { response, .. } => (
                Recovered::Applied(RecoveryAction::RecordDone(response)),
                None,
            ),
            RunOutcome::Recovery(recovered) => (recovered, None),
            RunOutcome::InFlight { recovery } => (recovery.unwrap_or(Recovered::Missing), None),
            RunOutcome::Conflict => (Recovered::Missing, None),
        }
    }

    /// The claim outcome an HTTP profile answers for a run that did not run
    /// the effect (`None` for [`RunOutcome::Ran`]).
    pub fn claim_outcome(&self) -> Option<ClaimOutcome> {
        match self {
            RunOutcome::Ran { .. } => None,
            RunOutcome::Replayed { response, .. } => Some(ClaimOutcome::Done(response.clone())),
            RunOutcome::Conflict => Some(ClaimOutcome::PayloadConflict),
            RunOutcome::InFlight { .. } | RunOutcome::Recovery(_) => Some(ClaimOutcome::InFlight),
        }
    }
}

/// Where a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// Claim first.
    Claim,
    /// Recover the record only; run the effect after an applied re-execute
    /// when `true`.
    Recover(bool),
}

#[derive(Clone, Debug)]
enum Stage {
    Claim(ClaimFlow),
    Effect {
        token: String,
        recovered: bool,
    },
    Finish {
        flow: FinishFlow,
        recovered: bool,
    },
    Recover(RecoverFlow),
    /// Watching the record in flight ([`Op::Watch`]); then claiming again.
    Watch,
    Over,
}

/// Runs an effect at most once per key: claim, replay or answer, effect,
/// finish, recovery of a stale record, bounded claim-again. See the
/// [module docs](self).
#[derive(Clone, Debug)]
pub struct RunFlow {
    spec: RunSpec,
    entry: Entry,
    seed: [u8; OWNER_TOKEN_BYTES],
    tokens: u32,
    claims: u32,
    waiter: Option<Waiter>,
    /// The key of the record in flight the last claim lost to.
    watched_key: Option<String>,
    stage: Stage,
}

impl RunFlow {
    /// A run of `spec`; `seed` is 16 random bytes from the host, from which
    /// every owner token of this run is derived.
    pub fn new(spec: RunSpec, seed: [u8; OWNER_TOKEN_BYTES]) -> Self {
        RunFlow {
            spec,
            entry: Entry::Claim,
            seed,
            tokens: 0,
            claims: 0,
            waiter: None,
            watched_key: None,
            stage: Stage::Over,
        }
    }

    /// Recovers the record of `spec.attempt.key` only (no claim): once
    /// stale, the destination is asked (`spec.recovery`, the default
    /// recovery rules when `None`) and the decision written; after an
    /// applied re-execute the flow runs the effect under the recovery's
    /// token and finishes it when `run_effect`, and otherwise ends with
    /// [`RunOutcome::Recovery`] so the caller runs it under
    /// [`RunFlow::owner_token`]. Only the key of the attempt is used.
    pub fn recover(mut spec: RunSpec, seed: [u8; OWNER_TOKEN_BYTES], run_effect: bool) -> Self {
        if spec.recovery.is_none() {
            spec.recovery = Some(RecoveryRules::default());
        }
        let mut flow = RunFlow::new(spec, seed);
        flow.entry = Entry::Recover(run_effect);
        flow
    }

    /// How long the run waited for another attempt's answer, in
    /// milliseconds ([`RunSpec::wait_max_ms`]).
    pub fn waited_ms(&self) -> u32 {
        self.waiter.as_ref().map_or(0, Waiter::waited_ms)
    }

    /// The next watch of the record in flight, while the wait lasts; the
    /// in-flight answer once it is spent (or when the run does not wait).
    fn watch_or(&mut self, outcome: RunOutcome) -> Result<Step<RunOutcome>, FlowError> {
        if self.entry == Entry::Claim && self.watched_key.is_some() {
            if self.waiter.is_none() {
                self.waiter = Waiter::new(self.spec.wait_max_ms, self.seed);
            }
            let key = self.watched_key.take().unwrap_or_default();
            if let Some(op) = self.waiter.as_mut().and_then(|w| w.next(&key)) {
                self.stage = Stage::Watch;
                return Ok(Step::Io(op));
            }
        }
        self.done(outcome)
    }

    /// The attempt's key.
    pub fn key(&self) -> &str {
        &self.spec.attempt.key
    }

    /// The owner token the effect runs under, while the flow waits for it
    /// ([`Op::Effect`]); the last one otherwise.
    pub fn owner_token(&self) -> String {
        match &self.stage {
            Stage::Effect { token, .. } => token.clone(),
            _ => self.token(self.tokens.saturating_sub(1)),
        }
    }

    fn token(&self, n: u32) -> String {
        let digest = Sha256::new()
            .chain_update(b"intentkey/owner-token/v1")
            .chain_update(self.seed)
            .chain_update(n.to_be_bytes())
            .finalize();
        let mut bytes = [0u8; OWNER_TOKEN_BYTES];
        bytes.copy_from_slice(&digest[..OWNER_TOKEN_BYTES]);
        owner_token(bytes)
    }

    fn next_token(&mut self) -> String {
        let token = self.token(self.tokens);
        self.tokens += 1;
        token
    }

    /// Claims (again), unless the bound is spent.
    fn claim(&mut self) -> Result<Step<RunOutcome>, FlowError> {
        if self.claims >= CLAIM_TRIES {
            self.stage = Stage::Over;
            return Err(FlowError::Vanished {
                key: self.spec.attempt.key.clone(),
            });
        }
        self.claims += 1;
        let token = self.next_token();
        let mut flow = ClaimFlow::new(&self.spec.attempt, &token, self.spec.now);
        match flow.start() {
            Step::Io(op) => {
                self.stage = Stage::Claim(flow);
                Ok(Step::Io(op))
            }
            Step::Done(outcome) => self.claimed(outcome, token),
        }
    }

    fn done(&mut self, outcome: RunOutcome) -> Result<Step<RunOutcome>, FlowError> {
        self.stage = Stage::Over;
        Ok(Step::Done(outcome))
    }

    fn claimed(
        &mut self,
        outcome: ClaimOutcome,
        token: String,
    ) -> Result<Step<RunOutcome>, FlowError> {
        match outcome {
            ClaimOutcome::Owned => {
                self.stage = Stage::Effect {
                    token,
                    recovered: false,
                };
                Ok(Step::Io(Op::Effect(self.spec.attempt.key.clone())))
            }
            ClaimOutcome::Done(response) => self.done(RunOutcome::Replayed {
                response,
                recovered: false,
            }),
            ClaimOutcome::PayloadConflict => self.done(RunOutcome::Conflict),
            ClaimOutcome::InFlight => self.begin_recovery(),
        }
    }

    /// Recovers the record in flight, when this run recovers at all.
    fn begin_recovery(&mut self) -> Result<Step<RunOutcome>, FlowError> {
        let Some(mut rules) = self.spec.recovery.clone() else {
            return self.watch_or(RunOutcome::InFlight { recovery: None });
        };
        if self.spec.kind == RunKind::Step {
            rules.read_your_writes = true;
        }
        let token = self.next_token();
        let mut flow = RecoverFlow::new(&self.spec.attempt.key, &token, self.spec.now, &rules);
        let step = flow.start();
        self.stage = Stage::Recover(flow);
        self.recover_step(step)
    }

    /// A step of the recovery: a step's look-up is answered here.
    fn recover_step(&mut self, step: Step<Recovered>) -> Result<Step<RunOutcome>, FlowError> {
        match step {
            Step::Io(Op::Ask(_)) if self.spec.kind == RunKind::Step => {
                let Stage::Recover(flow) = &mut self.stage else {
                    return misuse("answered", &OpResult::Answered(Lookup::Absent));
                };
                let next = flow.resume(OpResult::Answered(Lookup::Absent))?;
                self.recover_step(next)
            }
            Step::Io(op) => Ok(Step::Io(op)),
            Step::Done(recovered) => self.recovered(recovered),
        }
    }

    /// Runs the effect again under the recovery's token.
    fn reexecute(&mut self) -> Result<Step<RunOutcome>, FlowError> {
        let token = self.token(self.tokens.saturating_sub(1));
        self.stage = Stage::Effect {
            token,
            recovered: true,
        };
        Ok(Step::Io(Op::Effect(self.spec.attempt.key.clone())))
    }

    fn recovered(&mut self, recovered: Recovered) -> Result<Step<RunOutcome>, FlowError> {
        let recover_only = match self.entry {
            Entry::Recover(run_effect) => Some(run_effect),
            Entry::Claim => None,
        };
        match (recovered, recover_only) {
            (Recovered::Applied(RecoveryAction::ReExecute), None | Some(true)) => self.reexecute(),
            (Recovered::Applied(RecoveryAction::RecordDone(response)), _) => {
                self.done(RunOutcome::Replayed {
                    response,
                    recovered: true,
                })
            }
            (other, Some(_)) => self.done(RunOutcome::Recovery(other)),
            // Settled or gone since the claim read it: claim again.
            (Recovered::Missing | Recovered::NotInFlight(Status::Done), None) => self.claim(),
            // Not stale yet: its owner may still answer; wait for it while
            // the wait lasts.
            (other @ Recovered::NotDue { .. }, None) => self.watch_or(RunOutcome::InFlight {
                recovery: Some(other),
            }),
            (other, None) => self.done(RunOutcome::InFlight {
                recovery: Some(other),
            }),
        }
    }

    fn finished(
        &mut self,
        finished: Finished,
        recovered: bool,
    ) -> Result<Step<RunOutcome>, FlowError> {
        if finished == Finished::Superseded
            && self.spec.kind == RunKind::Step
            && self.entry == Entry::Claim
        {
            // A recoverer took the step over: read what it recorded.
            return self.claim();
        }
        self.done(RunOutcome::Ran {
            finished,
            recovered,
        })
    }
}

impl Flow for RunFlow {
    type Output = RunOutcome;

    fn start(&mut self) -> Step<RunOutcome> {
        self.claims = 0;
        self.tokens = 0;
        if let Entry::Recover(_) = self.entry {
            return match self.begin_recovery() {
                Ok(step) => step,
                Err(_) => Step::Done(RunOutcome::InFlight { recovery: None }),
            };
        }
        match self.claim() {
            Ok(step) => step,
            // CLAIM_TRIES is at least 1: the first claim always starts.
            Err(_) => Step::Done(RunOutcome::InFlight { recovery: None }),
        }
    }

    fn resume(&mut self, result: OpResult) -> Result<Step<RunOutcome>, FlowError> {
        match std::mem::replace(&mut self.stage, Stage::Over) {
            Stage::Claim(mut flow) => {
                let step = flow.resume(result)?;
                match step {
                    Step::Io(op) => {
                        self.stage = Stage::Claim(flow);
                        Ok(Step::Io(op))
                    }
                    Step::Done(outcome) => {
                        self.watched_key = flow.in_flight_key().map(str::to_owned);
                        let token = self.token(self.tokens.saturating_sub(1));
                        self.claimed(outcome, token)
                    }
                }
            }
            Stage::Effect { token, recovered } => match result {
                OpResult::Effected(effect, now) => {
                    let mut flow = FinishFlow::new(
                        &self.spec.attempt.key,
                        &token,
                        effect,
                        now,
                        &self.spec.rules,
                    );
                    match flow.start() {
                        Step::Io(op) => {
                            self.stage = Stage::Finish { flow, recovered };
                            Ok(Step::Io(op))
                        }
                        Step::Done(finished) => self.finished(finished, recovered),
                    }
                }
                other => misuse("effected", &other),
            },
            Stage::Finish {
                mut flow,
                recovered,
            } => match flow.resume(result)? {
                Step::Io(op) => {
                    self.stage = Stage::Finish { flow, recovered };
                    Ok(Step::Io(op))
                }
                Step::Done(finished) => self.finished(finished, recovered),
            },
            Stage::Recover(mut flow) => {
                let step = flow.resume(result)?;
                self.stage = Stage::Recover(flow);
                self.recover_step(step)
            }
            Stage::Watch => match result {
                OpResult::Watched { elapsed_ms, now } => {
                    if let Some(waiter) = &mut self.waiter {
                        waiter.woke(elapsed_ms);
                    }
                    self.spec.now = self.spec.now.max(now);
                    // A claim after a watch is not a record changing under
                    // the run: it does not count toward CLAIM_TRIES.
                    self.claims = self.claims.saturating_sub(1);
                    self.claim()
                }
                other => {
                    self.stage = Stage::Watch;
                    misuse("watched", &other)
                }
            },
            Stage::Over => misuse("nothing (the flow is done)", &result),
        }
    }
}

/// Runs a [`RunFlow`] to its end over a synchronous store: `ask` is the
/// destination's look-up, `effect` runs the effect with the key and
/// answers its result and the time it ended.
///
/// # Errors
/// The store's errors, or the flow's (`record-vanished` after
/// [`CLAIM_TRIES`] claims).
pub fn drive_run<S: ClaimStore + ?Sized>(
    flow: &mut RunFlow,
    store: &mut S,
    ask: &mut dyn FnMut(&str) -> Lookup,
    effect: &mut dyn FnMut(&str) -> (EffectResult, i64),
) -> Result<RunOutcome, DriveError<S::Error>> {
    let mut step = flow.start();
    loop {
        match step {
            Step::Done(out) => return Ok(out),
            Step::Io(Op::Effect(key)) => {
                let (result, now) = effect(&key);
                step = flow
                    .resume(OpResult::Effected(result, now))
                    .map_err(DriveError::Flow)?;
            }
            Step::Io(op) => {
                let result = super::flow::perform(store, &op, ask).map_err(DriveError::Store)?;
                step = flow.resume(result).map_err(DriveError::Flow)?;
            }
        }
    }
}
