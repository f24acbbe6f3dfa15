//! [`WasmGuard`]: the component's guard on world `intentkey`, driving a
//! real store and asking a real destination.

use std::fmt;
use std::sync::Arc;

use intentkey::claim::{
    Attempt, ClaimOutcome, EffectResult, Finished, Recovered, RecoveryRules, Rules,
};
use intentkey_store::{Gateway, Store};

use crate::bindings::pure::intentkey::core::types as wit;
use crate::engine::WasmEngine;
use crate::host_state::GuardImports;
use crate::instance::Instance;
use crate::keys_api::keys_api;
use crate::HostError;

/// An instance of the component with a store and a destination (world
/// `intentkey`, `dist/intentkey.wasm`): the core's one claim flow, compiled
/// into the component, drives the store through the `store` import and asks
/// the destination through the `gateway` import. It derives keys too (every
/// world exports `keys`).
///
/// The store's seven operations map one to one onto [`Store`]'s; a
/// [`intentkey_store::StoreError`] crosses as `store-error` (`unavailable`
/// when retryable, else `failed`) and comes back as
/// [`HostError::Core`] with code `store-unavailable` or `store-failed` and
/// the store's message.
///
/// A trap replaces the instance as with [`crate::WasmKeys`]; the store and
/// gateway are kept.
pub struct WasmGuard<'e> {
    inner: Instance<'e, GuardImports>,
}

impl fmt::Debug for WasmGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmGuard")
            .field("held_secrets", &self.held_secrets())
            .field("reinstantiations", &self.reinstantiations())
            .finish_non_exhaustive()
    }
}

impl<'e> WasmGuard<'e> {
    /// Instantiates a world-`intentkey` component over `store` (memory,
    /// SQLite, PostgreSQL: any [`Store`]) and `gateway` (the destination
    /// recovery asks, with the same key).
    ///
    /// # Errors
    /// [`HostError::Load`] when the engine holds the world-`pure` component
    /// (it has no guard) or instantiation fails.
    pub fn new(
        engine: &'e WasmEngine,
        store: Arc<dyn Store>,
        gateway: Arc<dyn Gateway + Send + Sync>,
    ) -> Result<Self, HostError> {
        Ok(WasmGuard {
            inner: Instance::new(engine, GuardImports { store, gateway })?,
        })
    }

    keys_api!();

    /// Claims `attempt` at `now` (insert, never check-then-insert; on a lost
    /// insert the core reads and decides). Returns the outcome and the owner
    /// token this claim wrote: finish an owned claim with it.
    ///
    /// # Errors
    /// [`HostError::Core`] with `store-unavailable` / `store-failed` (nothing
    /// is owned: do not run the effect) or `record-vanished`, or a trap.
    pub fn claim(
        &mut self,
        attempt: &Attempt,
        now: i64,
    ) -> Result<(ClaimOutcome, String), HostError> {
        self.inner.reap();
        let attempt = wit::Attempt::from(attempt.clone());
        let result = self
            .inner
            .exports
            .guard
            .call_claim(&mut self.inner.store, &attempt, now);
        let claimed = self.inner.answer(result)?;
        Ok((claimed.outcome.into(), claimed.owner_token))
    }

    /// Finishes an owned claim by the effect's outcome class under `rules`,
    /// fenced on `owner_token`: stores a terminal answer, releases (deletes)
    /// on "nothing happened", leaves an ambiguous one in flight;
    /// [`Finished::Superseded`] when the record is no longer this owner's.
    ///
    /// # Errors
    /// A store failure (the record stays in flight; recovery settles it),
    /// or a trap.
    pub fn finish(
        &mut self,
        key: &str,
        owner_token: &str,
        result: EffectResult,
        now: i64,
        rules: &Rules,
    ) -> Result<Finished, HostError> {
        self.inner.reap();
        let effect = wit::EffectResult::from(result);
        let rules = wit::Rules::from(rules.clone());
        let result = self.inner.exports.guard.call_finish(
            &mut self.inner.store,
            key,
            owner_token,
            &effect,
            now,
            &rules,
        );
        self.inner.answer(result).map(Finished::from)
    }

    /// Recovers one in-flight record: leaves it alone unless it is due, asks
    /// the gateway with the same key, writes the core's decision fenced on
    /// the token it read. Returns what it did and the new owner token, which
    /// owns the record after an applied re-execute (run the effect again
    /// with the same key, then [`WasmGuard::finish`] with that token).
    ///
    /// `absent` is trusted only when both `rules.read_your_writes` and the
    /// gateway's [`Gateway::read_your_writes`] say so; otherwise it counts
    /// as unknown, which never re-executes.
    ///
    /// # Errors
    /// A store failure, or a trap.
    pub fn recover(
        &mut self,
        key: &str,
        now: i64,
        rules: &RecoveryRules,
    ) -> Result<(Recovered, String), HostError> {
        self.inner.reap();
        let mut rules = wit::RecoveryRules::from(rules.clone());
        rules.read_your_writes =
            rules.read_your_writes && self.inner.imports().gateway.read_your_writes();
        let result = self
            .inner
            .exports
            .guard
            .call_recover(&mut self.inner.store, key, now, rules);
        let recovery = self.inner.answer(result)?;
        Ok((recovery.outcome.into(), recovery.owner_token))
    }

    /// The keys of in-flight records due a recovery look-up at `now`, oldest
    /// first (at most `limit` records read).
    ///
    /// # Errors
    /// A store failure, or a trap.
    pub fn due(
        &mut self,
        now: i64,
        stale_after: i64,
        limit: u32,
    ) -> Result<Vec<String>, HostError> {
        self.inner.reap();
        let result =
            self.inner
                .exports
                .guard
                .call_due(&mut self.inner.store, now, stale_after, limit);
        self.inner.answer(result)
    }

    /// Deletes done records expired at `now`; never in-flight ones. Returns
    /// how many.
    ///
    /// # Errors
    /// A store failure, or a trap.
    pub fn purge(&mut self, now: i64) -> Result<u64, HostError> {
        self.inner.reap();
        let result = self
            .inner
            .exports
            .guard
            .call_purge(&mut self.inner.store, now);
        self.inner.answer(result)
    }
}
