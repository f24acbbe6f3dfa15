//! The `flows` export: the core's sans-I/O flows (claims, runs, requests)
//! as one resource.

use std::cell::RefCell;

use crate::bindings::exports::intentkey::core::flows::{
    self as wit, GuestFlow, ListRequest, Op, OpResult, Output, Step, WatchRequest,
};
use crate::bindings::exports::intentkey::core::http::{self as wit_http, EndpointBorrow, Request};
use crate::bindings::intentkey::core::types as t;
use crate::http::{incoming, key_values, Endpoint};
use crate::Component;
use intentkey::claim::{self as core, Flow as _};

/// Any of the core's flows, with its output converted for the WIT.
pub(crate) enum AnyFlow {
    Claim(core::ClaimFlow),
    Finish(core::FinishFlow),
    Recover(core::RecoverFlow),
    Due(core::DueFlow),
    Purge(core::PurgeFlow),
    Run(Box<core::RunFlow>),
    Serve(Box<intentkey::http::ServeFlow>),
    Release(core::ReleaseFlow),
}

fn step<T>(step: core::Step<T>, out: impl FnOnce(T) -> Output) -> Step {
    match step {
        core::Step::Io(op) => Step::Io(op_out(op)),
        core::Step::Done(value) => Step::Done(out(value)),
    }
}

impl AnyFlow {
    pub(crate) fn start(&mut self) -> Step {
        match self {
            AnyFlow::Claim(f) => step(f.start(), |o| Output::Claimed(t::ClaimOutcome::from(o))),
            AnyFlow::Finish(f) => step(f.start(), |o| Output::Finished(t::Finished::from(o))),
            AnyFlow::Recover(f) => step(f.start(), |o| Output::Recovered(t::Recovered::from(o))),
            AnyFlow::Due(f) => step(f.start(), Output::Due),
            AnyFlow::Purge(f) => step(f.start(), Output::Purged),
            AnyFlow::Run(f) => step(f.start(), |o| Output::Ran(t::RunOutcome::from(o))),
            AnyFlow::Serve(f) => step(f.start(), |o| Output::Served(wit_http::Served::from(o))),
            AnyFlow::Release(f) => step(f.start(), |o| Output::Finished(t::Finished::from(o))),
        }
    }

    /// Whether this flow takes a store failure as a result (a serve flow)
    /// rather than failing with it.
    #[cfg(feature = "guard")]
    pub(crate) fn takes_failures(&self) -> bool {
        matches!(self, AnyFlow::Serve(_) | AnyFlow::Release(_))
    }

    /// Resumes with a WIT result: a handler's outcome goes to a serve flow,
    /// anything else to the core's `resume`.
    pub(crate) fn resume_wit(&mut self, result: OpResult) -> Result<Step, t::Error> {
        let OpResult::Handled(outcome) = result else {
            return self.resume(op_result_in(result));
        };
        match self {
            AnyFlow::Serve(f) => Ok(step(
                f.handled(outcome.handled.into(), outcome.now)
                    .map_err(|e| t::Error::from(intentkey::Error::from(e)))?,
                |o| Output::Served(wit_http::Served::from(o)),
            )),
            _ => Err(t::Error::from(intentkey::Error::from(
                core::FlowError::Misuse {
                    expected: "a store or effect result",
                    got: "handled",
                },
            ))),
        }
    }

    pub(crate) fn resume(&mut self, result: core::OpResult) -> Result<Step, t::Error> {
        let err = |e: core::FlowError| t::Error::from(intentkey::Error::from(e));
        Ok(match self {
            AnyFlow::Claim(f) => step(f.resume(result).map_err(err)?, |o| {
                Output::Claimed(t::ClaimOutcome::from(o))
            }),
            AnyFlow::Finish(f) => step(f.resume(result).map_err(err)?, |o| {
                Output::Finished(t::Finished::from(o))
            }),
            AnyFlow::Recover(f) => step(f.resume(result).map_err(err)?, |o| {
                Output::Recovered(t::Recovered::from(o))
            }),
            AnyFlow::Due(f) => step(f.resume(result).map_err(err)?, Output::Due),
            AnyFlow::Purge(f) => step(f.resume(result).map_err(err)?, Output::Purged),
            AnyFlow::Run(f) => step(f.resume(result).map_err(err)?, |o| {
                Output::Ran(t::RunOutcome::from(o))
            }),
            AnyFlow::Serve(f) => step(f.resume(result).map_err(err)?, |o| {
                Output::Served(wit_http::Served::from(o))
            }),
            AnyFlow::Release(f) => step(f.resume(result).map_err(err)?, |o| {
                Output::Finished(t::Finished::from(o))
            }),
        })
    }
}

/// Advances `flow` over a store: every store operation it asks for is done
/// by `perform` (its own error, or the store's failure, which goes to a
/// flow that takes failures and is the error of any other), until it needs
/// what only the host has (`effect`, `ask`, `wait`, `watch`) or is done.
#[cfg(feature = "guard")]
pub(crate) fn advance(
    flow: wit::FlowBorrow<'_>,
    done: Option<OpResult>,
    mut perform: impl FnMut(Op) -> Result<Result<core::OpResult, t::StoreError>, t::Error>,
) -> Result<Step, t::Error> {
    let resource = flow.get::<FlowResource>();
    let mut any = resource.0.borrow_mut();
    let mut step = match done {
        None => any.start(),
        Some(result) => any.resume_wit(result)?,
    };
    loop {
        step = match step {
            Step::Io(op @ (Op::Ask(_) | Op::Effect(_) | Op::Wait(_) | Op::Watch(_))) => {
                return Ok(Step::Io(op))
            }
            Step::Done(out) => return Ok(Step::Done(out)),
            Step::Io(op) => match perform(op)? {
                Ok(result) => any.resume(result)?,
                Err(e) if any.takes_failures() => any.resume(core::OpResult::Failed(e.into()))?,
                Err(e) => return Err(crate::convert::store_error(e)),
            },
        };
    }
}

/// The core's finish flow of WIT arguments.
pub(crate) fn finish_flow(
    key: &str,
    owner_token: &str,
    effect: t::EffectResult,
    now: i64,
    rules: t::Rules,
) -> core::FinishFlow {
    core::FinishFlow::new(
        key,
        owner_token,
        core::EffectResult::from(effect),
        now,
        &core::Rules::from(rules),
    )
}

pub(crate) fn op_out(op: core::Op) -> Op {
    match op {
        core::Op::Insert(r) => Op::Insert(t::Record::from(r)),
        core::Op::Get(key) => Op::Get(key),
        core::Op::Complete(c) => Op::Complete(t::Completion::from(c)),
        core::Op::Replace(r) => Op::Replace(t::Replacement::from(r)),
        core::Op::Release(r) => Op::Release(t::ReleaseRequest::from(r)),
        core::Op::List { status, limit } => Op::List(ListRequest {
            status: t::Status::from(status),
            limit,
        }),
        core::Op::Purge { now } => Op::Purge(now),
        core::Op::Ask(key) => Op::Ask(key),
        core::Op::Effect(key) => Op::Effect(key),
        core::Op::Wait(ms) => Op::Wait(ms),
        core::Op::Watch(w) => Op::Watch(WatchRequest {
            key: w.key,
            ms: w.ms,
        }),
    }
}

pub(crate) fn op_result_in(result: OpResult) -> core::OpResult {
    match result {
        OpResult::Inserted(b) => core::OpResult::Inserted(b),
        OpResult::Existing(r) => core::OpResult::Existing(r.into()),
        OpResult::Got(r) => core::OpResult::Got(r.map(core::Record::from)),
        OpResult::Written(b) => core::OpResult::Written(b),
        OpResult::Listed(rs) => {
            core::OpResult::Listed(rs.into_iter().map(core::Record::from).collect())
        }
        OpResult::Purged(n) => core::OpResult::Purged(n),
        OpResult::Answered(l) => core::OpResult::Answered(core::Lookup::from(l)),
        OpResult::Effected(e) => {
            core::OpResult::Effected(core::EffectResult::from(e.result), e.now)
        }
        OpResult::Failed(e) => core::OpResult::Failed(e.into()),
        OpResult::Waited => core::OpResult::Waited,
        OpResult::Watched(w) => core::OpResult::Watched {
            elapsed_ms: w.elapsed_ms,
            now: w.now,
        },
        // `resume_wit` hands a handler's outcome to the serve flow; as a
        // store result it is nothing any flow waits for.
        OpResult::Handled(_) => core::OpResult::Failed(core::StoreFailure {
            unavailable: false,
            message: "a handler's outcome where a store result was due".to_owned(),
        }),
    }
}

/// A run's seed: exactly the bytes of one owner token.
pub(crate) fn seed_in(seed: &[u8]) -> Result<[u8; core::OWNER_TOKEN_BYTES], t::Error> {
    seed.try_into().map_err(|_| {
        t::Error::from(intentkey::Error::field(
            intentkey::ErrorCode::InvalidRandom,
            "seed",
            format!(
                "a run needs exactly {} random bytes as its seed; the host gave {}",
                core::OWNER_TOKEN_BYTES,
                seed.len()
            ),
        ))
    })
}

/// One flow in progress, owned by the host through a resource handle.
pub(crate) struct FlowResource(pub(crate) RefCell<AnyFlow>);

impl FlowResource {
    fn handle(flow: AnyFlow) -> wit::Flow {
        wit::Flow::new(FlowResource(RefCell::new(flow)))
    }
}

impl GuestFlow for FlowResource {
    fn claim(attempt: t::Attempt, owner_token: String, now: i64) -> wit::Flow {
        Self::handle(AnyFlow::Claim(core::ClaimFlow::new(
            &core::Attempt::from(attempt),
            &owner_token,
            now,
        )))
    }

    fn finish(
        key: String,
        owner_token: String,
        result: t::EffectResult,
        now: i64,
        rules: t::Rules,
    ) -> wit::Flow {
        Self::handle(AnyFlow::Finish(finish_flow(
            &key,
            &owner_token,
            result,
            now,
            rules,
        )))
    }

    fn recover(key: String, new_token: String, now: i64, rules: t::RecoveryRules) -> wit::Flow {
        Self::handle(AnyFlow::Recover(core::RecoverFlow::new(
            &key,
            &new_token,
            now,
            &core::RecoveryRules::from(rules),
        )))
    }

    fn due(now: i64, stale_after: i64, limit: u32) -> wit::Flow {
        Self::handle(AnyFlow::Due(core::DueFlow::new(now, stale_after, limit)))
    }

    fn purge(now: i64) -> wit::Flow {
        Self::handle(AnyFlow::Purge(core::PurgeFlow::new(now)))
    }

    fn release_claim(request: t::ReleaseRequest) -> wit::Flow {
        Self::handle(AnyFlow::Release(core::ReleaseFlow::new(
            core::Release::from(request),
        )))
    }

    fn run(spec: t::RunSpec, seed: Vec<u8>) -> Result<wit::Flow, t::Error> {
        Ok(Self::handle(AnyFlow::Run(Box::new(core::RunFlow::new(
            core::RunSpec::from(spec),
            seed_in(&seed)?,
        )))))
    }

    fn recover_run(
        spec: t::RunSpec,
        seed: Vec<u8>,
        run_effect: bool,
    ) -> Result<wit::Flow, t::Error> {
        Ok(Self::handle(AnyFlow::Run(Box::new(
            core::RunFlow::recover(core::RunSpec::from(spec), seed_in(&seed)?, run_effect),
        ))))
    }

    fn serve(
        endpoint: EndpointBorrow<'_>,
        request: Request,
        rules: t::Rules,
        seed: Vec<u8>,
        now: i64,
    ) -> Result<wit::Flow, t::Error> {
        let endpoint = &endpoint.get::<Endpoint>().0;
        let key_values = key_values(&request);
        let flow = intentkey::http::ServeFlow::new(
            endpoint,
            &incoming(&request, &key_values),
            core::Rules::from(rules),
            seed_in(&seed)?,
            now,
        )
        .map_err(t::Error::from)?;
        Ok(Self::handle(AnyFlow::Serve(Box::new(flow))))
    }

    fn rerun(&self, spec: t::RunSpec, seed: Vec<u8>) -> Result<(), t::Error> {
        let flow = core::RunFlow::new(core::RunSpec::from(spec), seed_in(&seed)?);
        *self.0.borrow_mut() = AnyFlow::Run(Box::new(flow));
        Ok(())
    }

    fn owner_token(&self) -> String {
        match &*self.0.borrow() {
            AnyFlow::Run(f) => f.owner_token(),
            AnyFlow::Serve(f) => f.owner_token().to_owned(),
            _ => String::new(),
        }
    }

    fn start(&self) -> Step {
        self.0.borrow_mut().start()
    }

    fn resume(&self, result: OpResult) -> Result<Step, t::Error> {
        self.0.borrow_mut().resume_wit(result)
    }
}

fn decision_out(d: intentkey::telemetry::Decision) -> wit::Decision {
    use intentkey::telemetry::Decision as D;
    match d {
        D::Owned => wit::Decision::Owned,
        D::Replayed => wit::Decision::Replayed,
        D::InFlight => wit::Decision::InFlight,
        D::Waited => wit::Decision::Waited,
        D::Conflict => wit::Decision::Conflict,
        D::Released => wit::Decision::Released,
        D::Superseded => wit::Decision::Superseded,
        D::RecoveredFound => wit::Decision::RecoveredFound,
        D::RecoveredAbsent => wit::Decision::RecoveredAbsent,
        D::RecoveredUnknown => wit::Decision::RecoveredUnknown,
        D::Reconciled => wit::Decision::Reconciled,
        D::Purged => wit::Decision::Purged,
        D::Unavailable => wit::Decision::Unavailable,
        D::Refused => wit::Decision::Refused,
        D::Unguarded => wit::Decision::Unguarded,
    }
}

fn decisions_out(d: intentkey::telemetry::Decisions) -> wit::Decisions {
    wit::Decisions {
        primary: decision_out(d.primary),
        all: d.all.into_iter().map(decision_out).collect(),
    }
}

impl wit::Guest for Component {
    fn served_decisions(
        path: wit_http::ServePath,
        finished: Option<t::Finished>,
        waited_ms: u32,
    ) -> wit::Decisions {
        let served = intentkey::http::Served {
            path: path.into(),
            reply: None,
            finished: finished.map(Into::into),
            finish_retries: 0,
            claim_failure: None,
            finish_failures: Vec::new(),
            waited_ms,
            unreleased: None,
        };
        decisions_out(intentkey::telemetry::served(&served))
    }

    fn ran_decisions(outcome: t::RunOutcome, waited_ms: u32) -> wit::Decisions {
        decisions_out(intentkey::telemetry::ran(
            &core::RunOutcome::from(outcome),
            waited_ms,
        ))
    }

    fn recovered_decision(recovered: t::Recovered) -> Option<wit::Decision> {
        intentkey::telemetry::recovered(&core::Recovered::from(recovered)).map(decision_out)
    }

    fn release_decision(finished: t::Finished) -> wit::Decision {
        decision_out(intentkey::telemetry::released(finished.into()))
    }

    fn key_digest(key: String) -> String {
        intentkey::telemetry::key_digest(&key)
    }

    fn check_wait_max_ms(field: String, max_ms: u32) -> Result<u32, t::Error> {
        core::wait::check_wait_max_ms(&field, max_ms).map_err(t::Error::from)
    }

    fn telemetry_names() -> wit::TelemetryLabels {
        use intentkey::telemetry::names as n;
        wit::TelemetryLabels {
            span: n::SPAN.into(),
            decision: n::DECISION.into(),
            profile: n::PROFILE.into(),
            store: n::STORE.into(),
            key_digest: n::KEY_DIGEST.into(),
            wait_ms: n::WAIT_MS.into(),
            store_ms: n::STORE_MS.into(),
            decisions: n::DECISIONS.into(),
            store_duration: n::STORE_DURATION.into(),
            wait_duration: n::WAIT_DURATION.into(),
            records: n::RECORDS.into(),
            status: n::STATUS.into(),
        }
    }

    type Flow = FlowResource;
}
