//! The `redis` export: the core's claim and finish flows over Redis, held
//! inside the instance between the host's round trips. Each step names the
//! core's command for the flow's operation (`claim::redis::Layout::command`), and
//! the host's reply is read back by the core (`claim::redis::op_result`);
//! the answers are packed as `memory-store`'s packed calls are.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use serde_json::json;

use crate::bindings::exports::intentkey::core::keys::{GuestKeyer, KeyerBorrow};
use crate::bindings::exports::intentkey::core::memory::Packed;
use crate::bindings::exports::intentkey::core::redis::{self as wit, GuestRedisFlows, Reply};
use crate::bindings::intentkey::core::types as t;
use crate::keys::Keyer;
use crate::memory::{flow_error, token};
use crate::packed::{self, claimed};
use crate::Component;
use intentkey::claim::redis as layout;
use intentkey::claim::{self as core, Flow};

/// A flow waiting for the reply to its command.
enum Pending {
    Claim {
        flow: core::ClaimFlow,
        key: String,
        owner_token: String,
    },
    Finish(core::FinishFlow),
}

/// The flows in progress over one layout, by id.
pub(crate) struct RedisFlows {
    /// The layout, or the error that refused it (every start answers it).
    layout: Result<layout::Layout, t::Error>,
    pending: RefCell<HashMap<u32, (Pending, core::Op)>>,
    next: Cell<u32>,
}

fn misuse(what: String) -> t::Error {
    t::Error::from(intentkey::Error::field(
        intentkey::ErrorCode::FlowMisuse,
        "id",
        what,
    ))
}

impl RedisFlows {
    /// The command for `op`, with the flow `pending` kept under `id` until
    /// its reply comes back, and `then`: the end the flow reaches if that
    /// reply is the integer 1 (its own answer to that reply, worked out
    /// now on a copy), so that the host need not resume it for one.
    fn wait(&self, id: u32, pending: Pending, op: core::Op) -> Result<Packed, t::Error> {
        let layout = self.layout.as_ref().map_err(Clone::clone)?;
        let command = layout.command(&op).ok_or_else(|| {
            misuse(format!(
                "a claim or finish over Redis asked for {}",
                op.as_str()
            ))
        })?;
        let then = layout::op_result(&op, layout::Reply::Integer(1))
            .ok()
            .and_then(|one| match &pending {
                Pending::Claim {
                    flow,
                    key,
                    owner_token,
                } => match flow.clone().resume(one) {
                    Ok(core::Step::Done(outcome)) => {
                        claim_end(key, t::ClaimOutcome::from(outcome), owner_token)
                    }
                    _ => None,
                },
                Pending::Finish(flow) => match flow.clone().resume(one) {
                    Ok(core::Step::Done(finished)) => Some(finish_end(finished)),
                    _ => None,
                },
            });
        self.pending.borrow_mut().insert(id, (pending, op));
        Ok(packed::packed(json!(["send", id, then]), command.to_resp()))
    }

    fn claim_step(
        &self,
        id: u32,
        flow: core::ClaimFlow,
        key: String,
        owner_token: String,
        step: core::Step<core::ClaimOutcome>,
    ) -> Result<Packed, t::Error> {
        match step {
            core::Step::Io(op) => self.wait(
                id,
                Pending::Claim {
                    flow,
                    key,
                    owner_token,
                },
                op,
            ),
            core::Step::Done(outcome) => Ok(claimed(
                Some("claimed"),
                &key,
                t::ClaimOutcome::from(outcome),
                &owner_token,
            )),
        }
    }

    fn finish_step(
        &self,
        id: u32,
        flow: core::FinishFlow,
        step: core::Step<core::Finished>,
    ) -> Result<Packed, t::Error> {
        match step {
            core::Step::Io(op) => self.wait(id, Pending::Finish(flow), op),
            core::Step::Done(finished) => Ok(packed::packed(finish_end(finished), Vec::new())),
        }
    }

    /// A new flow's id, after forgetting the flows the host `settled` (each
    /// ended on its step's `then`).
    fn id(&self, settled: &[u32]) -> u32 {
        if !settled.is_empty() {
            let mut pending = self.pending.borrow_mut();
            for id in settled {
                pending.remove(id);
            }
        }
        let id = self.next.get();
        self.next.set(id.wrapping_add(1));
        id
    }
}

/// A claim's end as a step's `then`: only an end with no body (a stored
/// answer is never the end of a reply of 1).
fn claim_end(key: &str, outcome: t::ClaimOutcome, owner_token: &str) -> Option<serde_json::Value> {
    let (header, body) = packed::claimed_parts(Some("claimed"), key, outcome, owner_token);
    body.is_empty().then_some(header)
}

fn finish_end(finished: core::Finished) -> serde_json::Value {
    json!(["finished", finished.as_str()])
}

fn reply_in(reply: &Reply) -> Result<layout::Reply<'_>, t::Error> {
    Ok(match reply {
        Reply::Nil => layout::Reply::Nil,
        Reply::Integer(n) => layout::Reply::Integer(*n),
        Reply::Bulk(bytes) => layout::Reply::Bulk(std::str::from_utf8(bytes).map_err(|_| {
            t::Error::from(intentkey::Error::field(
                intentkey::ErrorCode::StoreFailed,
                "redis",
                "a record's value is not UTF-8: it was written by something other than intentkey",
            ))
        })?),
    })
}

impl GuestRedisFlows for RedisFlows {
    fn new(layout: wit::RedisLayout) -> Self {
        RedisFlows {
            layout: crate::decisions::redis_layout(&layout),
            pending: RefCell::new(HashMap::new()),
            next: Cell::new(0),
        }
    }

    fn claim_intent(
        &self,
        keyer: KeyerBorrow<'_>,
        request: Vec<u8>,
        header_len: u32,
        settled: Vec<u32>,
    ) -> Result<Packed, t::Error> {
        let r = packed::claim_request(&request, header_len)?;
        let attempt =
            keyer
                .get::<Keyer>()
                .intent_attempt(r.intent, r.intent_id, r.key_hex_length)?;
        let attempt = core::Attempt::from(attempt);
        let owner_token = token(&r.seed)?;
        let mut flow = core::ClaimFlow::new(&attempt, &owner_token, r.now);
        let step = flow.start();
        self.claim_step(self.id(&settled), flow, attempt.key, owner_token, step)
    }

    fn finish(
        &self,
        request: Vec<u8>,
        header_len: u32,
        settled: Vec<u32>,
    ) -> Result<Packed, t::Error> {
        let r = packed::finish_request(&request, header_len)?;
        let mut flow = crate::flows::finish_flow(&r.key, &r.owner_token, r.effect, r.now, r.rules);
        let step = flow.start();
        self.finish_step(self.id(&settled), flow, step)
    }

    fn resume(&self, id: u32, reply: Reply) -> Result<Packed, t::Error> {
        let (pending, op) = self
            .pending
            .borrow_mut()
            .remove(&id)
            .ok_or_else(|| misuse(format!("no flow {id} waits for a reply")))?;
        let result = layout::op_result(&op, reply_in(&reply)?).map_err(t::Error::from)?;
        match pending {
            Pending::Claim {
                mut flow,
                key,
                owner_token,
            } => {
                let step = flow.resume(result).map_err(flow_error)?;
                self.claim_step(id, flow, key, owner_token, step)
            }
            Pending::Finish(mut flow) => {
                let step = flow.resume(result).map_err(flow_error)?;
                self.finish_step(id, flow, step)
            }
        }
    }

    fn abandon(&self, id: u32) {
        self.pending.borrow_mut().remove(&id);
    }
}

impl wit::Guest for Component {
    type RedisFlows = RedisFlows;
}
