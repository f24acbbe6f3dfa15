//! Conversions between the WIT types and the core's. No rule lives here.

use crate::bindings::intentkey::core::types as t;
use intentkey::claim as core;
use intentkey::{Error, ErrorCode};

pub(crate) fn code(code: ErrorCode) -> t::ErrorCode {
    match code {
        ErrorCode::SecretTooShort => t::ErrorCode::SecretTooShort,
        ErrorCode::InvalidSecret => t::ErrorCode::InvalidSecret,
        ErrorCode::InvalidTenantId => t::ErrorCode::InvalidTenantId,
        ErrorCode::InvalidActionType => t::ErrorCode::InvalidActionType,
        ErrorCode::UnknownActionType => t::ErrorCode::UnknownActionType,
        ErrorCode::InvalidEpoch => t::ErrorCode::InvalidEpoch,
        ErrorCode::InvalidPayload => t::ErrorCode::InvalidPayload,
        ErrorCode::UnclassifiedFields => t::ErrorCode::UnclassifiedFields,
        ErrorCode::InvalidFieldType => t::ErrorCode::InvalidFieldType,
        ErrorCode::InvalidDecimal => t::ErrorCode::InvalidDecimal,
        ErrorCode::DecimalOutOfRange => t::ErrorCode::DecimalOutOfRange,
        ErrorCode::InvalidInteger => t::ErrorCode::InvalidInteger,
        ErrorCode::InvalidCurrency => t::ErrorCode::InvalidCurrency,
        ErrorCode::InvalidPixKey => t::ErrorCode::InvalidPixKey,
        ErrorCode::InvalidIntentId => t::ErrorCode::InvalidIntentId,
        ErrorCode::InvalidPolicy => t::ErrorCode::InvalidPolicy,
        ErrorCode::InvalidJson => t::ErrorCode::InvalidJson,
        ErrorCode::InvalidKeyLength => t::ErrorCode::InvalidKeyLength,
        ErrorCode::InvalidRandom => t::ErrorCode::InvalidRandom,
        ErrorCode::StoreUnavailable => t::ErrorCode::StoreUnavailable,
        ErrorCode::StoreFailed => t::ErrorCode::StoreFailed,
        ErrorCode::RecordVanished => t::ErrorCode::RecordVanished,
        ErrorCode::FlowMisuse => t::ErrorCode::FlowMisuse,
        ErrorCode::IoFailed => t::ErrorCode::IoFailed,
        ErrorCode::InvalidArgument => t::ErrorCode::InvalidArgument,
        ErrorCode::ComponentFailed => t::ErrorCode::ComponentFailed,
        ErrorCode::InvalidKeyring => t::ErrorCode::InvalidKeyring,
        ErrorCode::SecretRetired => t::ErrorCode::SecretRetired,
        ErrorCode::InvalidStepName => t::ErrorCode::InvalidStepName,
        ErrorCode::InvalidStepOutput => t::ErrorCode::InvalidStepOutput,
        ErrorCode::StepOutputTooLarge => t::ErrorCode::StepOutputTooLarge,
        ErrorCode::StepInFlight => t::ErrorCode::StepInFlight,
        ErrorCode::StepInputChanged => t::ErrorCode::StepInputChanged,
    }
}

pub(crate) fn wit_error(e: Error) -> t::Error {
    t::Error {
        code: code(e.code()),
        field: e.field_name().map(str::to_owned),
        message: e.message().to_owned(),
    }
}

/// A store's failure as an error with a code.
#[cfg(feature = "guard")]
pub(crate) fn store_error(e: t::StoreError) -> t::Error {
    match e {
        t::StoreError::Unavailable(message) => t::Error {
            code: t::ErrorCode::StoreUnavailable,
            field: None,
            message,
        },
        t::StoreError::Failed(message) => t::Error {
            code: t::ErrorCode::StoreFailed,
            field: None,
            message,
        },
    }
}

pub(crate) fn status_in(s: t::Status) -> core::Status {
    match s {
        t::Status::InFlight => core::Status::InFlight,
        t::Status::Done => core::Status::Done,
        t::Status::NeedsReconciliation => core::Status::NeedsReconciliation,
    }
}

pub(crate) fn status_out(s: core::Status) -> t::Status {
    match s {
        core::Status::InFlight => t::Status::InFlight,
        core::Status::Done => t::Status::Done,
        core::Status::NeedsReconciliation => t::Status::NeedsReconciliation,
    }
}

pub(crate) fn response_in(r: t::Response) -> core::Response {
    core::Response {
        status: r.status,
        content_type: r.content_type,
        headers: r.headers,
        body: r.body,
    }
}

pub(crate) fn response_out(r: core::Response) -> t::Response {
    t::Response {
        status: r.status,
        content_type: r.content_type,
        headers: r.headers,
        body: r.body,
    }
}

pub(crate) fn record_in(r: t::Record) -> core::Record {
    core::Record {
        key: r.key,
        fingerprint: r.fingerprint,
        tenant_id: r.tenant_id,
        action_type: r.action_type,
        status: status_in(r.status),
        owner_token: r.owner_token,
        response: r.response.map(response_in),
        created_at: r.created_at,
        expires_at: r.expires_at,
        lookups: r.lookups,
        next_lookup_at: r.next_lookup_at,
    }
}

pub(crate) fn record_out(r: core::Record) -> t::Record {
    t::Record {
        key: r.key,
        fingerprint: r.fingerprint,
        tenant_id: r.tenant_id,
        action_type: r.action_type,
        status: status_out(r.status),
        owner_token: r.owner_token,
        response: r.response.map(response_out),
        created_at: r.created_at,
        expires_at: r.expires_at,
        lookups: r.lookups,
        next_lookup_at: r.next_lookup_at,
    }
}

pub(crate) fn attempt_in(a: t::Attempt) -> core::Attempt {
    core::Attempt {
        key: a.key,
        fingerprint: a.fingerprint,
        tenant_id: a.tenant_id,
        action_type: a.action_type,
        prior: a.prior.map(|p| core::PriorKey {
            key: p.key,
            fingerprint: p.fingerprint,
        }),
    }
}

pub(crate) fn attempt_out(a: core::Attempt) -> t::Attempt {
    t::Attempt {
        key: a.key,
        fingerprint: a.fingerprint,
        tenant_id: a.tenant_id,
        action_type: a.action_type,
        prior: a.prior.map(|p| t::PriorKey {
            key: p.key,
            fingerprint: p.fingerprint,
        }),
    }
}

pub(crate) fn outcome_in(o: t::ClaimOutcome) -> core::ClaimOutcome {
    match o {
        t::ClaimOutcome::Owned => core::ClaimOutcome::Owned,
        t::ClaimOutcome::InFlight => core::ClaimOutcome::InFlight,
        t::ClaimOutcome::Done(r) => core::ClaimOutcome::Done(response_in(r)),
        t::ClaimOutcome::PayloadConflict => core::ClaimOutcome::PayloadConflict,
    }
}

pub(crate) fn outcome_out(o: core::ClaimOutcome) -> t::ClaimOutcome {
    match o {
        core::ClaimOutcome::Owned => t::ClaimOutcome::Owned,
        core::ClaimOutcome::InFlight => t::ClaimOutcome::InFlight,
        core::ClaimOutcome::Done(r) => t::ClaimOutcome::Done(response_out(r)),
        core::ClaimOutcome::PayloadConflict => t::ClaimOutcome::PayloadConflict,
    }
}

pub(crate) fn lookup_in(lookup: t::Lookup) -> core::Lookup {
    match lookup {
        t::Lookup::Found(r) => core::Lookup::Found(response_in(r)),
        t::Lookup::Absent => core::Lookup::Absent,
        t::Lookup::Unknown => core::Lookup::Unknown,
    }
}

pub(crate) fn effect_in(r: t::EffectResult) -> core::EffectResult {
    match r {
        t::EffectResult::Answered(r) => core::EffectResult::Answered(response_in(r)),
        t::EffectResult::Refused(r) => core::EffectResult::Refused(r.map(response_in)),
        t::EffectResult::Failed => core::EffectResult::Failed,
    }
}

pub(crate) fn class_out(c: core::OutcomeClass) -> t::OutcomeClass {
    match c {
        core::OutcomeClass::Terminal => t::OutcomeClass::Terminal,
        core::OutcomeClass::Released => t::OutcomeClass::Released,
        core::OutcomeClass::Ambiguous => t::OutcomeClass::Ambiguous,
    }
}

pub(crate) fn rules_in(r: t::Rules) -> core::Rules {
    core::Rules {
        ttl_seconds: r.ttl_seconds,
        release_statuses: r.release_statuses,
        fast_completion: r.fast_completion,
    }
}

pub(crate) fn rules_out(r: core::Rules) -> t::Rules {
    t::Rules {
        ttl_seconds: r.ttl_seconds,
        release_statuses: r.release_statuses,
        fast_completion: r.fast_completion,
    }
}

pub(crate) fn recovery_rules_in(r: t::RecoveryRules) -> core::RecoveryRules {
    core::RecoveryRules {
        stale_after: r.stale_after,
        read_your_writes: r.read_your_writes,
        ttl_seconds: r.ttl_seconds,
    }
}

pub(crate) fn finished_out(f: core::Finished) -> t::Finished {
    match f {
        core::Finished::Stored => t::Finished::Stored,
        core::Finished::Released => t::Finished::Released,
        core::Finished::LeftInFlight => t::Finished::LeftInFlight,
        core::Finished::Superseded => t::Finished::Superseded,
    }
}

pub(crate) fn action_out(action: core::RecoveryAction) -> t::RecoveryAction {
    match action {
        core::RecoveryAction::RecordDone(r) => t::RecoveryAction::RecordDone(response_out(r)),
        core::RecoveryAction::ReExecute => t::RecoveryAction::ReExecute,
        core::RecoveryAction::CheckLater {
            lookups,
            next_lookup_at,
        } => t::RecoveryAction::CheckLater(t::LookupSchedule {
            lookups,
            next_lookup_at,
        }),
        core::RecoveryAction::Reconcile { lookups } => t::RecoveryAction::Reconcile(lookups),
    }
}

pub(crate) fn recovered_out(r: core::Recovered) -> t::Recovered {
    match r {
        core::Recovered::Missing => t::Recovered::Missing,
        core::Recovered::NotInFlight(s) => t::Recovered::NotInFlight(status_out(s)),
        core::Recovered::NotDue { due_at } => t::Recovered::NotDue(due_at),
        core::Recovered::Applied(a) => t::Recovered::Applied(action_out(a)),
        core::Recovered::Lost(a) => t::Recovered::Lost(action_out(a)),
    }
}

pub(crate) fn completion_out(c: core::Completion) -> t::Completion {
    t::Completion {
        key: c.key,
        owner_token: c.owner_token,
        response: response_out(c.response),
        expires_at: c.expires_at,
        fast: c.fast,
    }
}

pub(crate) fn replacement_out(r: core::Replacement) -> t::Replacement {
    t::Replacement {
        expected_token: r.expected_token,
        expected_lookups: r.expected_lookups,
        record: record_out(r.record),
    }
}

pub(crate) fn release_out(r: core::Release) -> t::ReleaseRequest {
    t::ReleaseRequest {
        key: r.key,
        owner_token: r.owner_token,
    }
}

pub(crate) fn completion_in(c: t::Completion) -> core::Completion {
    core::Completion {
        key: c.key,
        owner_token: c.owner_token,
        response: response_in(c.response),
        expires_at: c.expires_at,
        fast: c.fast,
    }
}

pub(crate) fn replacement_in(r: t::Replacement) -> core::Replacement {
    core::Replacement {
        expected_token: r.expected_token,
        expected_lookups: r.expected_lookups,
        record: record_in(r.record),
    }
}

pub(crate) fn release_in(r: t::ReleaseRequest) -> core::Release {
    core::Release {
        key: r.key,
        owner_token: r.owner_token,
    }
}

pub(crate) fn run_spec_in(s: t::RunSpec) -> core::RunSpec {
    core::RunSpec {
        attempt: attempt_in(s.attempt),
        kind: match s.kind {
            t::RunKind::Effect => core::RunKind::Effect,
            t::RunKind::Step => core::RunKind::Step,
            t::RunKind::ToolCall => core::RunKind::ToolCall,
        },
        rules: rules_in(s.rules),
        recovery: s.recovery.map(recovery_rules_in),
        now: s.now,
    }
}

pub(crate) fn run_outcome_out(o: core::RunOutcome) -> t::RunOutcome {
    match o {
        core::RunOutcome::Ran {
            finished,
            recovered,
        } => t::RunOutcome::Ran(t::RunRan {
            finished: finished_out(finished),
            recovered,
        }),
        core::RunOutcome::Replayed {
            response,
            recovered,
        } => t::RunOutcome::Replayed(t::RunReplayed {
            response: response_out(response),
            recovered,
        }),
        core::RunOutcome::Conflict => t::RunOutcome::Conflict,
        core::RunOutcome::InFlight { recovery } => {
            t::RunOutcome::InFlight(recovery.map(recovered_out))
        }
        core::RunOutcome::Recovery(r) => t::RunOutcome::Recovery(recovered_out(r)),
    }
}
