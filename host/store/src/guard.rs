//! The high-level API: run an effect at most once per intent.
//!
//! [`Guard::run`] claims the key, hands it to the effect (so the same key
//! travels to the destination), finishes the record by the effect's outcome
//! class and replays a stored answer on every repeat. The order of store
//! operations and every decision are the core's flows
//! (`intentkey::claim::flow`); this module supplies owner tokens, the clock's
//! `now` it is given, and the store.
//!
//! ```
//! use intentkey::claim::Response;
//! use intentkey_store::guard::{Attempt, Guard};
//! use intentkey_store::open;
//!
//! let store = open("memory:")?;
//! let guard = Guard::new(store.as_ref());
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
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
    drive_run, owner_token, ClaimFlow, ClaimOutcome, DueFlow, EffectResult, FinishFlow, Finished,
    Lookup, PurgeFlow, Recovered, RecoveryRules, Response, Rules, RunFlow, RunKind, RunOutcome,
    RunSpec, OWNER_TOKEN_BYTES,
};
use intentkey::claim::{ReconcileFlow, Reconciled, Verdict};

pub use intentkey::claim::Attempt;
use intentkey::http::{Options, REPLAYED_HEADER};

use crate::{run_flow, Driven, Store, StoreError};

/// What a run answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAnswer {
    /// What the claim decided.
    pub outcome: ClaimOutcome,
    /// What finishing did, when this attempt owned the effect.
    pub finished: Option<Finished>,
    /// HTTP status.
    pub status: u16,
    /// Media type.
    pub content_type: String,
    /// Replayed or stored headers.
    pub headers: Vec<(String, String)>,
    /// Body, as bytes.
    pub body: Vec<u8>,
    /// Whether the body is a replay of a stored response.
    pub replayed: bool,
}

impl RunAnswer {
    /// The body as text, or `""` when it is not UTF-8.
    pub fn body_text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap_or_default()
    }

    /// The answer to a run: the `ietf` profile's ([`Options::run_reply`]),
    /// with a replay's stored headers as stored.
    pub(crate) fn of(outcome: &RunOutcome, ran: Option<&EffectResult>, now: i64) -> Self {
        let reply = Options::default().run_reply(outcome, ran, now);
        let replayed = reply.is_replay();
        let content_type = reply.content_type().unwrap_or_default().to_owned();
        let (claim, finished) = match outcome {
            RunOutcome::Ran { finished, .. } => (ClaimOutcome::Owned, Some(*finished)),
            other => (
                other.claim_outcome().unwrap_or(ClaimOutcome::InFlight),
                None,
            ),
        };
        let headers = match &claim {
            ClaimOutcome::Done(stored) => stored.headers.clone(),
            _ => reply
                .headers
                .into_iter()
                .filter(|(n, _)| {
                    !n.eq_ignore_ascii_case("content-type")
                        && !n.eq_ignore_ascii_case(REPLAYED_HEADER)
                })
                .collect(),
        };
        RunAnswer {
            outcome: claim,
            finished,
            status: reply.status,
            content_type,
            headers,
            body: reply.body,
            replayed,
        }
    }
}

/// A claim this process owns: finish it with [`Guard::finish`] and this token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    /// What the claim decided.
    pub outcome: ClaimOutcome,
    /// The owner token this claim wrote (meaningful when owned).
    pub owner_token: String,
}

/// What a recovery did, and the token that now owns a taken-over record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// What the core's recovery flow did.
    pub outcome: Recovered,
    /// The new owner token (meaningful after an applied re-execute).
    pub owner_token: String,
    /// What finishing the re-execution did, when the guard ran it.
    pub finished: Option<Finished>,
}

/// The destination, as recovery sees it.
pub trait Gateway {
    /// Asks whether the effect with this key happened.
    fn lookup(&self, key: &str) -> Lookup;
    /// Whether an `absent` answer can be trusted (the destination documents
    /// read-your-writes); otherwise `absent` counts as unknown.
    fn read_your_writes(&self) -> bool;
}

/// A run's seed (its owner tokens are derived from it) from the operating
/// system's randomness.
///
/// # Errors
/// When the system has no randomness to give (`store-failed`).
pub fn new_seed() -> Result<[u8; OWNER_TOKEN_BYTES], StoreError> {
    let mut bytes = [0u8; OWNER_TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::fatal(format!("no randomness for an owner token: {e}")))?;
    Ok(bytes)
}

/// A fresh owner token from the operating system's randomness.
///
/// # Errors
/// When the system has no randomness to give (`store-failed`).
pub fn new_owner_token() -> Result<String, StoreError> {
    new_seed().map(owner_token)
}

/// Runs effects at most once per key, against one store.
pub struct Guard<'s> {
    store: &'s dyn Store,
    rules: Rules,
    stale_after: i64,
}

impl<'s> Guard<'s> {
    /// A guard with the documented default rules: done records kept 24 hours,
    /// 429 and 503 release the claim, durable completions, recovery after 5
    /// minutes in flight.
    pub fn new(store: &'s dyn Store) -> Self {
        Guard {
            store,
            rules: Rules::default(),
            stale_after: intentkey::claim::DEFAULT_STALE_AFTER_SECONDS,
        }
    }

    /// Keeps done records for `ttl_seconds`: set it to the worst redelivery
    /// horizon of the callers.
    #[must_use]
    pub fn with_ttl(mut self, ttl_seconds: i64) -> Self {
        self.rules.ttl_seconds = ttl_seconds;
        self
    }

    /// Uses these outcome rules (TTL, release statuses, fast completion).
    #[must_use]
    pub fn with_rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    /// Recovery leaves records claimed less than `seconds` ago alone.
    #[must_use]
    pub fn with_stale_after(mut self, seconds: i64) -> Self {
        self.stale_after = seconds;
        self
    }

    /// The rules in force.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Claims `attempt` at `now` with a fresh owner token.
    ///
    /// # Errors
    /// A store failure: nothing is owned, do not run the effect.
    pub fn claim(&self, attempt: &Attempt, now: i64) -> Result<Claimed, StoreError> {
        let owner_token = new_owner_token()?;
        let outcome = run_flow(self.store, ClaimFlow::new(attempt, &owner_token, now), None)?;
        Ok(Claimed {
            outcome,
            owner_token,
        })
    }

    /// Finishes an owned claim by the effect's outcome class, fenced on the
    /// owner token.
    ///
    /// # Errors
    /// A store failure: the record stays `in_flight` (never released), and
    /// recovery settles it by asking the destination.
    pub fn finish(
        &self,
        key: &str,
        owner_token: &str,
        result: EffectResult,
        now: i64,
    ) -> Result<Finished, StoreError> {
        run_flow(
            self.store,
            FinishFlow::new(key, owner_token, result, now, &self.rules),
            None,
        )
    }

    /// Claims, runs `effect` with the key if this attempt owns it, and
    /// finishes by its outcome class; otherwise answers from the store
    /// (replay, 409, 422). The effect's answer is terminal unless its status
    /// is a release status.
    ///
    /// # Errors
    /// A store failure (see [`Guard::claim`] and [`Guard::finish`]).
    pub fn run(
        &self,
        attempt: &Attempt,
        now: i64,
        effect: impl FnOnce(&str) -> Response,
    ) -> Result<RunAnswer, StoreError> {
        self.run_with(attempt, now, |key| EffectResult::Answered(effect(key)))
            .map(|(answer, _)| answer)
    }

    /// As [`Guard::run`], with an effect that reports its outcome class
    /// itself: `Refused` (nothing happened) releases the claim, `Failed`
    /// leaves it `in_flight`. Also returns the effect's result when it ran.
    /// The sequence (claim, replay or answer, effect, finish) is the core's
    /// run flow; the answers are the `ietf` profile's
    /// ([`Options::run_reply`]).
    ///
    /// # Errors
    /// A store failure.
    pub fn run_with(
        &self,
        attempt: &Attempt,
        now: i64,
        effect: impl FnOnce(&str) -> EffectResult,
    ) -> Result<(RunAnswer, Option<EffectResult>), StoreError> {
        let spec = RunSpec {
            attempt: attempt.clone(),
            kind: RunKind::Effect,
            rules: self.rules.clone(),
            recovery: None,
            now,
            wait_max_ms: 0,
        };
        let mut flow = RunFlow::new(spec, new_seed()?);
        // An effect runs at most once per run: after it, the run ends.
        let mut effect = Some(effect);
        let (outcome, ran) = self.drive(&mut flow, now, None, &mut |key| {
            effect.take().map_or(EffectResult::Failed, |f| f(key))
        })?;
        Ok((RunAnswer::of(&outcome, ran.as_ref(), now), ran))
    }

    /// Drives a run flow: the core sequences, this performs each store
    /// operation, asks `gateway` and runs `effect` when the flow says so.
    /// Answers the run's outcome and the effect's last result.
    pub(crate) fn drive(
        &self,
        flow: &mut RunFlow,
        now: i64,
        gateway: Option<&dyn Gateway>,
        effect: &mut dyn FnMut(&str) -> EffectResult,
    ) -> Result<(RunOutcome, Option<EffectResult>), StoreError> {
        let mut ran = None;
        let mut ask = |key: &str| gateway.map_or(Lookup::Unknown, |g| g.lookup(key));
        let outcome = drive_run(flow, &mut Driven(self.store), &mut ask, &mut |key| {
            let result = effect(key);
            ran = Some(result.clone());
            (result, now)
        })?;
        Ok((outcome, ran))
    }

    /// Recovers one `in_flight` record (the core's recovery as a run flow):
    /// leaves it alone unless it is due, asks the destination with the same
    /// key, and writes the decision fenced on the token it read. When the
    /// decision is an applied re-execute and `reexecute` is given, runs it
    /// with the same key and finishes with the new token; `unknown` never
    /// re-executes.
    ///
    /// # Errors
    /// A store failure.
    pub fn recover(
        &self,
        key: &str,
        gateway: &dyn Gateway,
        now: i64,
        reexecute: Option<&mut dyn FnMut(&str) -> EffectResult>,
    ) -> Result<Recovery, StoreError> {
        let spec = RunSpec::recovery_of(
            key,
            self.rules.clone(),
            self.stale_after,
            gateway.read_your_writes(),
            now,
        );
        let mut again = reexecute;
        let mut flow = RunFlow::recover(spec, new_seed()?, again.is_some());
        let (outcome, _) = self.drive(
            &mut flow,
            now,
            Some(gateway),
            &mut |k| match again.as_mut() {
                Some(run) => run(k),
                None => EffectResult::Failed,
            },
        )?;
        let (outcome, finished) = outcome.into_recovered();
        Ok(Recovery {
            outcome,
            owner_token: flow.owner_token(),
            finished,
        })
    }

    /// The recovery rules of this guard for `gateway`.
    pub(crate) fn recovery_rules(&self, gateway: &dyn Gateway) -> RecoveryRules {
        RecoveryRules {
            stale_after: self.stale_after,
            read_your_writes: gateway.read_your_writes(),
            ttl_seconds: self.rules.ttl_seconds,
        }
    }

    /// Recovers every `in_flight` record due at `now` (at most `limit`
    /// read), oldest first; see [`Guard::recover`].
    ///
    /// # Errors
    /// A store failure.
    pub fn recover_due(
        &self,
        gateway: &dyn Gateway,
        now: i64,
        limit: u32,
        mut reexecute: Option<&mut dyn FnMut(&str) -> EffectResult>,
    ) -> Result<Vec<(String, Recovery)>, StoreError> {
        let keys = run_flow(self.store, DueFlow::new(now, self.stale_after, limit), None)?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let again: Option<&mut dyn FnMut(&str) -> EffectResult> = match reexecute.as_mut() {
                Some(run) => Some(&mut **run),
                None => None,
            };
            let recovery = self.recover(&key, gateway, now, again)?;
            out.push((key, recovery));
        }
        Ok(out)
    }

    /// Records an operator's decision on a record awaiting reconciliation
    /// (the core's [`ReconcileFlow`]): found makes it done with that
    /// response, absent releases it so a retry runs; every write fenced.
    ///
    /// # Errors
    /// A store failure.
    pub fn reconcile(
        &self,
        key: &str,
        verdict: Verdict,
        now: i64,
    ) -> Result<Reconciled, StoreError> {
        let token = owner_token(new_seed()?);
        let flow = ReconcileFlow::new(key, verdict, &token, now, self.rules.ttl_seconds);
        run_flow(self.store, flow, None)
    }

    /// Deletes `done` records past their expiry; never `in_flight` ones.
    ///
    /// # Errors
    /// A store failure.
    pub fn purge(&self, now: i64) -> Result<u64, StoreError> {
        run_flow(self.store, PurgeFlow::new(now), None)
    }
}
