//! The `memory` export: the core's flows over the core's memory store
//! (`MemoryClaims`), held inside the instance. A claim, a replay or a finish
//! is one call with no store import.

use std::cell::RefCell;

use crate::bindings::exports::intentkey::core::flows::{FlowBorrow, Op, OpResult, Step};
use crate::bindings::exports::intentkey::core::guard::{Claimed, Recovery};
use crate::bindings::exports::intentkey::core::keys::{GuestKeyer, KeyerBorrow};
use crate::bindings::exports::intentkey::core::memory::{
    self as wit, GuestMemoryStore, IntentClaimed, Packed,
};
use crate::bindings::intentkey::core::gateway;
use crate::bindings::intentkey::core::types as t;
use crate::flows::seed_in;
use crate::keys::Keyer;
use crate::Component;
use intentkey::claim::{self as core, ClaimStore, DriveError, MemoryClaims};

/// Records in a map, owned by the host through a resource handle.
pub(crate) struct MemoryStore(RefCell<MemoryClaims>);

pub(crate) fn token(seed: &[u8]) -> Result<String, t::Error> {
    Ok(core::owner_token(seed_in(seed)?))
}

pub(crate) fn flow_error(e: core::FlowError) -> t::Error {
    t::Error::from(intentkey::Error::from(e))
}

/// A flow's store operation, back from the WIT (a host's `advance`).
fn op_in(op: Op) -> core::Op {
    match op {
        Op::Insert(r) => core::Op::Insert(core::Record::from(r)),
        Op::Get(key) => core::Op::Get(key),
        Op::Complete(c) => core::Op::Complete(core::Completion::from(c)),
        Op::Replace(r) => core::Op::Replace(core::Replacement::from(r)),
        Op::Release(r) => core::Op::Release(core::Release::from(r)),
        Op::List(l) => core::Op::List {
            status: core::Status::from(l.status),
            limit: l.limit,
        },
        Op::Purge(now) => core::Op::Purge { now },
        Op::Ask(key) => core::Op::Ask(key),
        Op::Effect(key) => core::Op::Effect(key),
        Op::Wait(ms) => core::Op::Wait(ms),
        Op::Watch(w) => core::Op::Watch(core::WatchRequest {
            key: w.key,
            ms: w.ms,
        }),
    }
}

impl MemoryStore {
    fn drive<F: core::Flow>(&self, flow: F) -> Result<F::Output, t::Error> {
        let mut records = self.0.borrow_mut();
        core::drive(flow, &mut *records, &mut |key| {
            core::Lookup::from(gateway::ask(key))
        })
        .map_err(|e| match e {
            DriveError::Store(never) => match never {},
            DriveError::Flow(e) => flow_error(e),
        })
    }

    fn claim_attempt(
        &self,
        attempt: &core::Attempt,
        now: i64,
        seed: &[u8],
    ) -> Result<Claimed, t::Error> {
        let owner_token = token(seed)?;
        let outcome = self.drive(core::ClaimFlow::new(attempt, &owner_token, now))?;
        Ok(Claimed {
            outcome: t::ClaimOutcome::from(outcome),
            owner_token,
        })
    }

    fn with<T>(
        &self,
        op: impl FnOnce(&mut MemoryClaims) -> Result<T, std::convert::Infallible>,
    ) -> T {
        match op(&mut self.0.borrow_mut()) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }
}

impl GuestMemoryStore for MemoryStore {
    fn new() -> Self {
        MemoryStore(RefCell::new(MemoryClaims::default()))
    }

    fn claim(&self, attempt: t::Attempt, now: i64, seed: Vec<u8>) -> Result<Claimed, t::Error> {
        self.claim_attempt(&core::Attempt::from(attempt), now, &seed)
    }

    fn claim_intent(
        &self,
        keyer: KeyerBorrow<'_>,
        intent: t::Intent,
        intent_id: Option<String>,
        key_hex_length: Option<u32>,
        now: i64,
        seed: Vec<u8>,
    ) -> Result<IntentClaimed, t::Error> {
        let attempt = keyer
            .get::<Keyer>()
            .intent_attempt(intent, intent_id, key_hex_length)?;
        let attempt = core::Attempt::from(attempt);
        let claimed = self.claim_attempt(&attempt, now, &seed)?;
        Ok(IntentClaimed {
            key: attempt.key,
            outcome: claimed.outcome,
            owner_token: claimed.owner_token,
        })
    }

    fn claim_intent_packed(
        &self,
        keyer: KeyerBorrow<'_>,
        request: Vec<u8>,
        header_len: u32,
    ) -> Result<Packed, t::Error> {
        let r = crate::packed::claim_request(&request, header_len)?;
        let claimed = self.claim_intent(
            keyer,
            r.intent,
            r.intent_id,
            r.key_hex_length,
            r.now,
            r.seed,
        )?;
        Ok(crate::packed::claimed(
            None,
            &claimed.key,
            claimed.outcome,
            &claimed.owner_token,
        ))
    }

    fn finish_packed(&self, request: Vec<u8>, header_len: u32) -> Result<t::Finished, t::Error> {
        let r = crate::packed::finish_request(&request, header_len)?;
        self.finish(r.key, r.owner_token, r.effect, r.now, r.rules)
    }

    fn finish(
        &self,
        key: String,
        owner_token: String,
        effect: t::EffectResult,
        now: i64,
        rules: t::Rules,
    ) -> Result<t::Finished, t::Error> {
        self.drive(crate::flows::finish_flow(
            &key,
            &owner_token,
            effect,
            now,
            rules,
        ))
        .map(t::Finished::from)
    }

    fn recover(
        &self,
        key: String,
        now: i64,
        rules: t::RecoveryRules,
        seed: Vec<u8>,
    ) -> Result<Recovery, t::Error> {
        let owner_token = token(&seed)?;
        let flow =
            core::RecoverFlow::new(&key, &owner_token, now, &core::RecoveryRules::from(rules));
        Ok(Recovery {
            outcome: t::Recovered::from(self.drive(flow)?),
            owner_token,
        })
    }

    fn due(&self, now: i64, stale_after: i64, limit: u32) -> Result<Vec<String>, t::Error> {
        self.drive(core::DueFlow::new(now, stale_after, limit))
    }

    fn purge(&self, now: i64) -> u64 {
        self.with(|m| m.purge(now))
    }

    fn advance(&self, flow: FlowBorrow<'_>, done: Option<OpResult>) -> Result<Step, t::Error> {
        crate::flows::advance(flow, done, |op| {
            let op = op_in(op);
            Ok(Ok(self.with(|m| {
                core::perform(m, &op, &mut |_| core::Lookup::Unknown)
            })))
        })
    }

    fn insert(&self, record: t::Record) -> bool {
        self.with(|m| m.insert(&core::Record::from(record)))
    }

    fn get(&self, key: String) -> Option<t::Record> {
        self.with(|m| m.get(&key)).map(t::Record::from)
    }

    fn complete(&self, completion: t::Completion) -> bool {
        self.with(|m| m.complete(&core::Completion::from(completion)))
    }

    fn replace(&self, replacement: t::Replacement) -> bool {
        self.with(|m| m.replace(&core::Replacement::from(replacement)))
    }

    fn release(&self, request: t::ReleaseRequest) -> bool {
        self.with(|m| m.release(&core::Release::from(request)))
    }

    fn list(&self, status: t::Status, limit: u32) -> Vec<t::Record> {
        self.with(|m| m.list(core::Status::from(status), limit))
            .into_iter()
            .map(t::Record::from)
            .collect()
    }

    fn records(&self) -> Vec<t::Record> {
        self.0
            .borrow()
            .records()
            .values()
            .cloned()
            .map(t::Record::from)
            .collect()
    }
}

impl wit::Guest for Component {
    type MemoryStore = MemoryStore;
}
