//! The `guard` export: the core's flows driven against the host's imported
//! `store` and `gateway` (world `intentkey`, for synchronous hosts).

use crate::bindings::exports::intentkey::core::flows::{FlowBorrow, Op, OpResult, Step};
use crate::bindings::exports::intentkey::core::guard::{self as wit, Claimed, Recovery};
use crate::bindings::intentkey::core::types as t;
use crate::bindings::intentkey::core::{gateway, random, store};
use crate::convert::store_error;
use crate::Component;
use intentkey::claim::{self as core, ClaimStore, DriveError};

/// The host's store, as the core's `ClaimStore`.
struct Imported;

impl ClaimStore for Imported {
    type Error = t::StoreError;
    fn insert(&mut self, record: &core::Record) -> Result<bool, t::StoreError> {
        store::insert(&t::Record::from(record.clone()))
    }
    fn get(&mut self, key: &str) -> Result<Option<core::Record>, t::StoreError> {
        store::get(key).map(|r| r.map(core::Record::from))
    }
    fn complete(&mut self, c: &core::Completion) -> Result<bool, t::StoreError> {
        store::complete(&t::Completion::from(c.clone()))
    }
    fn replace(&mut self, r: &core::Replacement) -> Result<bool, t::StoreError> {
        store::replace(&t::Replacement::from(r.clone()))
    }
    fn release(&mut self, r: &core::Release) -> Result<bool, t::StoreError> {
        store::release(&t::ReleaseRequest::from(r.clone()))
    }
    fn list(
        &mut self,
        status: core::Status,
        limit: u32,
    ) -> Result<Vec<core::Record>, t::StoreError> {
        store::list(t::Status::from(status), limit)
            .map(|rs| rs.into_iter().map(core::Record::from).collect())
    }
    fn purge(&mut self, now: i64) -> Result<u64, t::StoreError> {
        store::purge(now)
    }
}

fn drive<F: core::Flow>(flow: F) -> Result<F::Output, t::Error> {
    core::drive(flow, &mut Imported, &mut |key| {
        core::Lookup::from(gateway::ask(key))
    })
    .map_err(|e| match e {
        DriveError::Store(e) => store_error(e),
        DriveError::Flow(e) => t::Error::from(intentkey::Error::from(e)),
    })
}

/// A fresh owner token from the host's randomness.
fn new_token() -> Result<String, t::Error> {
    core::owner_token_from_slice(&random::random_bytes(core::OWNER_TOKEN_BYTES as u32))
        .map_err(t::Error::from)
}

/// Performs one store operation of a flow on the imported store.
fn perform(op: Op) -> Result<Result<core::OpResult, t::StoreError>, t::Error> {
    let result = match op {
        Op::Insert(r) => store::insert(&r).map(core::OpResult::Inserted),
        Op::Get(key) => store::get(&key).map(|r| core::OpResult::Got(r.map(core::Record::from))),
        Op::Complete(c) => store::complete(&c).map(core::OpResult::Written),
        Op::Replace(r) => store::replace(&r).map(core::OpResult::Written),
        Op::Release(r) => store::release(&r).map(core::OpResult::Written),
        Op::List(l) => store::list(l.status, l.limit)
            .map(|rs| core::OpResult::Listed(rs.into_iter().map(core::Record::from).collect())),
        Op::Purge(now) => store::purge(now).map(core::OpResult::Purged),
        // The host's own: `advance` hands these back before performing.
        Op::Ask(_) | Op::Effect(_) | Op::Wait(_) | Op::Watch(_) => {
            return Err(t::Error::from(intentkey::Error::new(
                intentkey::ErrorCode::FlowMisuse,
                "the guard was asked to perform the host's own operation (a bug)",
            )))
        }
    };
    Ok(result)
}

impl wit::Guest for Component {
    fn advance(flow: FlowBorrow<'_>, done: Option<OpResult>) -> Result<Step, t::Error> {
        crate::flows::advance(flow, done, perform)
    }

    fn claim(attempt: t::Attempt, now: i64) -> Result<Claimed, t::Error> {
        let owner_token = new_token()?;
        let outcome = drive(core::ClaimFlow::new(
            &core::Attempt::from(attempt),
            &owner_token,
            now,
        ))?;
        Ok(Claimed {
            outcome: t::ClaimOutcome::from(outcome),
            owner_token,
        })
    }

    fn finish(
        key: String,
        owner_token: String,
        result: t::EffectResult,
        now: i64,
        rules: t::Rules,
    ) -> Result<t::Finished, t::Error> {
        drive(crate::flows::finish_flow(
            &key,
            &owner_token,
            result,
            now,
            rules,
        ))
        .map(t::Finished::from)
    }

    fn recover(key: String, now: i64, rules: t::RecoveryRules) -> Result<Recovery, t::Error> {
        let owner_token = new_token()?;
        let flow =
            core::RecoverFlow::new(&key, &owner_token, now, &core::RecoveryRules::from(rules));
        Ok(Recovery {
            outcome: t::Recovered::from(drive(flow)?),
            owner_token,
        })
    }

    fn due(now: i64, stale_after: i64, limit: u32) -> Result<Vec<String>, t::Error> {
        drive(core::DueFlow::new(now, stale_after, limit))
    }

    fn purge(now: i64) -> Result<u64, t::Error> {
        drive(core::PurgeFlow::new(now))
    }
}
