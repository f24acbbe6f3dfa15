//! Recovery as a task: records whose owner vanished (a crash, a lost
//! completion) are settled by asking the destination, with the core's
//! rules. `unknown` never re-executes; exactly one recoverer wins the fenced
//! write of a decision; after the 1, 2 and 4 minute look-ups a record that
//! is still unknown moves to `needs_reconciliation`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ::tokio::task::JoinHandle;
use intentkey::claim::{
    DueFlow, EffectResult, Finished, Recovered, Rules, RunFlow, RunSpec,
    DEFAULT_STALE_AFTER_SECONDS,
};

use crate::guard::new_seed;
use crate::StoreError;

use super::{drive, drive_run, AsyncGateway, AsyncStore};

/// What recovery does with one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The record's key.
    pub key: String,
    /// What the recovery flow did.
    pub outcome: Recovered,
    /// What finishing a re-execution did, when this recoverer ran one.
    pub finished: Option<Finished>,
}

/// Re-runs an effect that the destination says never happened (only after
/// an applied `ReExecute`, with the same key): what it answered.
pub type Reexecute =
    dyn Fn(String) -> Pin<Box<dyn Future<Output = EffectResult> + Send>> + Send + Sync;

/// Recovery over one store: its rules and, optionally, how to re-run an
/// effect the destination says never happened.
#[derive(Clone)]
pub struct Recoverer {
    store: Arc<dyn AsyncStore>,
    gateway: Arc<dyn AsyncGateway>,
    rules: Rules,
    stale_after: i64,
    reexecute: Option<Arc<Reexecute>>,
}

impl std::fmt::Debug for Recoverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recoverer")
            .field("rules", &self.rules)
            .field("stale_after", &self.stale_after)
            .finish_non_exhaustive()
    }
}

impl Recoverer {
    /// Recovery of `store`'s records through `gateway`, with the default
    /// rules and staleness. Without [`Recoverer::reexecute`], a record the
    /// destination says never happened is taken over and left in flight
    /// for the caller to settle.
    pub fn new(store: Arc<dyn AsyncStore>, gateway: Arc<dyn AsyncGateway>) -> Self {
        Recoverer {
            store,
            gateway,
            rules: Rules::default(),
            stale_after: DEFAULT_STALE_AFTER_SECONDS,
            reexecute: None,
        }
    }

    /// The claim rules (the TTL of records recovered as done).
    pub fn rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    /// Records claimed less than this long ago are not due.
    pub fn stale_after(mut self, seconds: i64) -> Self {
        self.stale_after = seconds;
        self
    }

    /// How to re-run an effect after an applied `ReExecute`.
    pub fn reexecute(mut self, f: Arc<Reexecute>) -> Self {
        self.reexecute = Some(f);
        self
    }

    /// Recovers one record at `now`.
    ///
    /// # Errors
    /// A store failure.
    pub async fn recover(&self, key: &str, now: i64) -> Result<RecoveryReport, StoreError> {
        let spec = RunSpec::recovery_of(
            key,
            self.rules.clone(),
            self.stale_after,
            self.gateway.read_your_writes(),
            now,
        );
        let mut flow = RunFlow::recover(spec, new_seed()?, self.reexecute.is_some());
        let reexecute = self.reexecute.clone();
        let mut effect =
            move |key: String| -> Pin<Box<dyn Future<Output = (EffectResult, i64)> + Send>> {
                let reexecute = reexecute.clone();
                Box::pin(async move {
                    match reexecute {
                        Some(run) => (run(key).await, now),
                        None => (EffectResult::Failed, now),
                    }
                })
            };
        let ran = drive_run(&mut flow, &*self.store, Some(&*self.gateway), &mut effect).await?;
        let (outcome, finished) = ran.into_recovered();
        // The core's decision, as an event users bridge to OpenTelemetry
        // (the names are `intentkey::telemetry::names`'; never the key).
        if let Some(decision) = intentkey::telemetry::recovered(&outcome) {
            tracing::info!(
                "intentkey.decision" = decision.as_str(),
                "intentkey.store" = self.store.kind(),
                "intentkey.key_digest" = intentkey::telemetry::key_digest(key).as_str(),
                "intentkey recovery"
            );
        }
        Ok(RecoveryReport {
            key: key.to_owned(),
            outcome,
            finished,
        })
    }

    /// Recovers every in-flight record due at `now` (at most `limit` read),
    /// oldest first.
    ///
    /// # Errors
    /// A store failure (the records before it were recovered).
    pub async fn recover_due(
        &self,
        now: i64,
        limit: u32,
    ) -> Result<Vec<RecoveryReport>, StoreError> {
        let keys = drive(
            DueFlow::new(now, self.stale_after, limit),
            &*self.store,
            None,
        )
        .await?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            out.push(self.recover(&key, now).await?);
        }
        Ok(out)
    }

    /// Runs [`Recoverer::recover_due`] every `every`, with the system clock,
    /// until the returned task is aborted. `report` sees each round's
    /// result (store errors included: the next round tries again).
    pub fn spawn(
        self,
        every: Duration,
        report: impl Fn(Result<Vec<RecoveryReport>, StoreError>) + Send + Sync + 'static,
    ) -> JoinHandle<()> {
        ::tokio::spawn(async move {
            let mut ticks = ::tokio::time::interval(every);
            loop {
                ticks.tick().await;
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                report(self.recover_due(now, 100).await);
            }
        })
    }
}
