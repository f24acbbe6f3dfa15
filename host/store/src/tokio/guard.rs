//! The async twin of [`crate::guard::Guard`]: run an effect at most once per
//! intent over an [`AsyncStore`], by driving the core's run flow
//! (`intentkey::claim::RunFlow`) with [`drive_run`]. Same answers
//! ([`RunAnswer`]), same rules, same recovery.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use intentkey::claim::{
    Attempt, DueFlow, EffectResult, PurgeFlow, Response, Rules, RunFlow, RunKind, RunSpec,
    DEFAULT_STALE_AFTER_SECONDS,
};

use super::{drive, drive_run, AsyncGateway, AsyncStore, Reexecute};
use crate::guard::{new_seed, Recovery, RunAnswer};
use crate::StoreError;

/// What an effect given to [`drive_run`] returns.
type EffectFuture<'a> = Pin<Box<dyn Future<Output = (EffectResult, i64)> + Send + 'a>>;

/// Fixes a closure's signature to the one [`drive_run`] takes.
fn effect_fn<'a, F>(f: F) -> F
where
    F: FnMut(String) -> EffectFuture<'a> + Send + 'a,
{
    f
}

/// Runs effects at most once per key, against one async store.
pub struct AsyncGuard<'s> {
    store: &'s dyn AsyncStore,
    rules: Rules,
    stale_after: i64,
}

impl std::fmt::Debug for AsyncGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncGuard")
            .field("rules", &self.rules)
            .field("stale_after", &self.stale_after)
            .finish_non_exhaustive()
    }
}

impl<'s> AsyncGuard<'s> {
    /// A guard with the documented default rules (those of
    /// [`crate::guard::Guard::new`]).
    pub fn new(store: &'s dyn AsyncStore) -> Self {
        AsyncGuard {
            store,
            rules: Rules::default(),
            stale_after: DEFAULT_STALE_AFTER_SECONDS,
        }
    }

    /// Keeps done records for `ttl_seconds`.
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

    /// Claims, runs `effect` with the key if this attempt owns it, and
    /// finishes by its outcome class; otherwise answers from the store
    /// (replay, 409, 422). As [`crate::guard::Guard::run`], awaited.
    ///
    /// # Errors
    /// A store failure.
    pub async fn run<F, Fut>(
        &self,
        attempt: &Attempt,
        now: i64,
        effect: F,
    ) -> Result<RunAnswer, StoreError>
    where
        F: FnOnce(String) -> Fut + Send,
        Fut: Future<Output = Response> + Send,
    {
        let (answer, _) = self
            .run_with(attempt, now, |key| {
                let answer = effect(key);
                async move { EffectResult::Answered(answer.await) }
            })
            .await?;
        Ok(answer)
    }

    /// As [`AsyncGuard::run`], with an effect that reports its outcome
    /// class itself (`Refused` releases the claim, `Failed` leaves it
    /// `in_flight`); also returns the effect's result when it ran. As
    /// [`crate::guard::Guard::run_with`], awaited.
    ///
    /// # Errors
    /// A store failure.
    pub async fn run_with<F, Fut>(
        &self,
        attempt: &Attempt,
        now: i64,
        effect: F,
    ) -> Result<(RunAnswer, Option<EffectResult>), StoreError>
    where
        F: FnOnce(String) -> Fut + Send,
        Fut: Future<Output = EffectResult> + Send,
    {
        let spec = RunSpec {
            attempt: attempt.clone(),
            kind: RunKind::Effect,
            rules: self.rules.clone(),
            recovery: None,
            now,
            wait_max_ms: 0,
        };
        let mut flow = RunFlow::new(spec, new_seed()?);
        let ran: Mutex<Option<EffectResult>> = Mutex::new(None);
        let slot = &ran;
        // An effect runs at most once per run: after it, the run ends.
        let mut effect = Some(effect);
        let mut run = effect_fn(move |key| {
            let pending = effect.take().map(|f| f(key));
            Box::pin(async move {
                let result = match pending {
                    Some(pending) => pending.await,
                    None => EffectResult::Failed,
                };
                if let Ok(mut slot) = slot.lock() {
                    *slot = Some(result.clone());
                }
                (result, now)
            })
        });
        let outcome = drive_run(&mut flow, self.store, None, &mut run).await?;
        drop(run);
        let ran = ran.into_inner().unwrap_or_default();
        Ok((RunAnswer::of(&outcome, ran.as_ref(), now), ran))
    }

    /// Recovers one `in_flight` record (the core's recovery as a run flow),
    /// asking `gateway`; when the decision is an applied re-execute and
    /// `reexecute` is given, runs it with the same key and finishes with
    /// the new token. As [`crate::guard::Guard::recover`], awaited.
    ///
    /// # Errors
    /// A store failure.
    pub async fn recover(
        &self,
        key: &str,
        gateway: &dyn AsyncGateway,
        now: i64,
        reexecute: Option<&Reexecute>,
    ) -> Result<Recovery, StoreError> {
        let spec = RunSpec::recovery_of(
            key,
            self.rules.clone(),
            self.stale_after,
            gateway.read_your_writes(),
            now,
        );
        let mut flow = RunFlow::recover(spec, new_seed()?, reexecute.is_some());
        let mut run = effect_fn(move |key| {
            let pending = reexecute.map(|f| f(key));
            Box::pin(async move {
                let result = match pending {
                    Some(pending) => pending.await,
                    None => EffectResult::Failed,
                };
                (result, now)
            })
        });
        let outcome = drive_run(&mut flow, self.store, Some(gateway), &mut run).await?;
        let (outcome, finished) = outcome.into_recovered();
        Ok(Recovery {
            outcome,
            owner_token: flow.owner_token(),
            finished,
        })
    }

    /// Recovers every `in_flight` record due at `now` (at most `limit`
    /// read), oldest first; see [`AsyncGuard::recover`].
    ///
    /// # Errors
    /// A store failure (the records before it were recovered).
    pub async fn recover_due(
        &self,
        gateway: &dyn AsyncGateway,
        now: i64,
        limit: u32,
        reexecute: Option<&Reexecute>,
    ) -> Result<Vec<(String, Recovery)>, StoreError> {
        let keys = drive(DueFlow::new(now, self.stale_after, limit), self.store, None).await?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let recovery = self.recover(&key, gateway, now, reexecute).await?;
            out.push((key, recovery));
        }
        Ok(out)
    }

    /// Deletes `done` records past their expiry; never `in_flight` ones.
    ///
    /// # Errors
    /// A store failure.
    pub async fn purge(&self, now: i64) -> Result<u64, StoreError> {
        drive(PurgeFlow::new(now), self.store, None).await
    }
}
