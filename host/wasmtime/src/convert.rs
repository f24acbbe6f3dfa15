//! Conversions between the WIT types and the core's. No rule lives here.

use intentkey::claim as core;
use intentkey::{Error, ErrorCode};
use intentkey_store::StoreError;

use crate::bindings::pure::intentkey::core::types as wit;

/// The WIT error code as the core's. Exhaustive both ways: a code added to
/// either enum does not compile until it is mapped here.
pub(crate) fn code_in(code: wit::ErrorCode) -> ErrorCode {
    match code {
        wit::ErrorCode::SecretTooShort => ErrorCode::SecretTooShort,
        wit::ErrorCode::InvalidSecret => ErrorCode::InvalidSecret,
        wit::ErrorCode::InvalidTenantId => ErrorCode::InvalidTenantId,
        wit::ErrorCode::InvalidActionType => ErrorCode::InvalidActionType,
        wit::ErrorCode::UnknownActionType => ErrorCode::UnknownActionType,
        wit::ErrorCode::InvalidEpoch => ErrorCode::InvalidEpoch,
        wit::ErrorCode::InvalidPayload => ErrorCode::InvalidPayload,
        wit::ErrorCode::UnclassifiedFields => ErrorCode::UnclassifiedFields,
        wit::ErrorCode::InvalidFieldType => ErrorCode::InvalidFieldType,
        wit::ErrorCode::InvalidDecimal => ErrorCode::InvalidDecimal,
        wit::ErrorCode::DecimalOutOfRange => ErrorCode::DecimalOutOfRange,
        wit::ErrorCode::InvalidInteger => ErrorCode::InvalidInteger,
        wit::ErrorCode::InvalidCurrency => ErrorCode::InvalidCurrency,
        wit::ErrorCode::InvalidPixKey => ErrorCode::InvalidPixKey,
        wit::ErrorCode::InvalidIntentId => ErrorCode::InvalidIntentId,
        wit::ErrorCode::InvalidPolicy => ErrorCode::InvalidPolicy,
        wit::ErrorCode::InvalidJson => ErrorCode::InvalidJson,
        wit::ErrorCode::InvalidKeyLength => ErrorCode::InvalidKeyLength,
        wit::ErrorCode::InvalidRandom => ErrorCode::InvalidRandom,
        wit::ErrorCode::StoreUnavailable => ErrorCode::StoreUnavailable,
        wit::ErrorCode::StoreFailed => ErrorCode::StoreFailed,
        wit::ErrorCode::RecordVanished => ErrorCode::RecordVanished,
        wit::ErrorCode::FlowMisuse => ErrorCode::FlowMisuse,
        wit::ErrorCode::IoFailed => ErrorCode::IoFailed,
        wit::ErrorCode::InvalidArgument => ErrorCode::InvalidArgument,
        wit::ErrorCode::ComponentFailed => ErrorCode::ComponentFailed,
        wit::ErrorCode::InvalidKeyring => ErrorCode::InvalidKeyring,
        wit::ErrorCode::SecretRetired => ErrorCode::SecretRetired,
        wit::ErrorCode::InvalidStepName => ErrorCode::InvalidStepName,
        wit::ErrorCode::InvalidStepOutput => ErrorCode::InvalidStepOutput,
        wit::ErrorCode::StepOutputTooLarge => ErrorCode::StepOutputTooLarge,
        wit::ErrorCode::StepInFlight => ErrorCode::StepInFlight,
        wit::ErrorCode::StepInputChanged => ErrorCode::StepInputChanged,
    }
}

/// The core's error code as the WIT's (the test that both maps agree).
#[cfg(test)]
fn code_out(code: ErrorCode) -> wit::ErrorCode {
    match code {
        ErrorCode::SecretTooShort => wit::ErrorCode::SecretTooShort,
        ErrorCode::InvalidSecret => wit::ErrorCode::InvalidSecret,
        ErrorCode::InvalidTenantId => wit::ErrorCode::InvalidTenantId,
        ErrorCode::InvalidActionType => wit::ErrorCode::InvalidActionType,
        ErrorCode::UnknownActionType => wit::ErrorCode::UnknownActionType,
        ErrorCode::InvalidEpoch => wit::ErrorCode::InvalidEpoch,
        ErrorCode::InvalidPayload => wit::ErrorCode::InvalidPayload,
        ErrorCode::UnclassifiedFields => wit::ErrorCode::UnclassifiedFields,
        ErrorCode::InvalidFieldType => wit::ErrorCode::InvalidFieldType,
        ErrorCode::InvalidDecimal => wit::ErrorCode::InvalidDecimal,
        ErrorCode::DecimalOutOfRange => wit::ErrorCode::DecimalOutOfRange,
        ErrorCode::InvalidInteger => wit::ErrorCode::InvalidInteger,
        ErrorCode::InvalidCurrency => wit::ErrorCode::InvalidCurrency,
        ErrorCode::InvalidPixKey => wit::ErrorCode::InvalidPixKey,
        ErrorCode::InvalidIntentId => wit::ErrorCode::InvalidIntentId,
        ErrorCode::InvalidPolicy => wit::ErrorCode::InvalidPolicy,
        ErrorCode::InvalidJson => wit::ErrorCode::InvalidJson,
        ErrorCode::InvalidKeyLength => wit::ErrorCode::InvalidKeyLength,
        ErrorCode::InvalidRandom => wit::ErrorCode::InvalidRandom,
        ErrorCode::StoreUnavailable => wit::ErrorCode::StoreUnavailable,
        ErrorCode::StoreFailed => wit::ErrorCode::StoreFailed,
        ErrorCode::RecordVanished => wit::ErrorCode::RecordVanished,
        ErrorCode::FlowMisuse => wit::ErrorCode::FlowMisuse,
        ErrorCode::IoFailed => wit::ErrorCode::IoFailed,
        ErrorCode::InvalidArgument => wit::ErrorCode::InvalidArgument,
        ErrorCode::ComponentFailed => wit::ErrorCode::ComponentFailed,
        ErrorCode::InvalidKeyring => wit::ErrorCode::InvalidKeyring,
        ErrorCode::SecretRetired => wit::ErrorCode::SecretRetired,
        ErrorCode::InvalidStepName => wit::ErrorCode::InvalidStepName,
        ErrorCode::InvalidStepOutput => wit::ErrorCode::InvalidStepOutput,
        ErrorCode::StepOutputTooLarge => wit::ErrorCode::StepOutputTooLarge,
        ErrorCode::StepInFlight => wit::ErrorCode::StepInFlight,
        ErrorCode::StepInputChanged => wit::ErrorCode::StepInputChanged,
    }
}

/// The component's error as the core's, code, field and message unchanged.
pub(crate) fn error_in(e: wit::Error) -> Error {
    let code = code_in(e.code);
    match e.field {
        Some(field) => Error::field(code, field, e.message),
        None => Error::new(code, e.message),
    }
}

/// A store's failure as the WIT `store-error`: `unavailable` when retrying
/// may help, `failed` otherwise; the store's message unchanged.
pub(crate) fn store_error_out(e: &StoreError) -> wit::StoreError {
    if e.is_retryable() {
        wit::StoreError::Unavailable(e.message().to_owned())
    } else {
        wit::StoreError::Failed(e.message().to_owned())
    }
}

pub(crate) fn status_in(s: wit::Status) -> core::Status {
    match s {
        wit::Status::InFlight => core::Status::InFlight,
        wit::Status::Done => core::Status::Done,
        wit::Status::NeedsReconciliation => core::Status::NeedsReconciliation,
    }
}

pub(crate) fn status_out(s: core::Status) -> wit::Status {
    match s {
        core::Status::InFlight => wit::Status::InFlight,
        core::Status::Done => wit::Status::Done,
        core::Status::NeedsReconciliation => wit::Status::NeedsReconciliation,
    }
}

pub(crate) fn response_in(r: wit::Response) -> core::Response {
    core::Response {
        status: r.status,
        content_type: r.content_type,
        headers: r.headers,
        body: r.body,
    }
}

pub(crate) fn response_out(r: core::Response) -> wit::Response {
    wit::Response {
        status: r.status,
        content_type: r.content_type,
        headers: r.headers,
        body: r.body,
    }
}

pub(crate) fn record_in(r: wit::Record) -> core::Record {
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

pub(crate) fn record_out(r: core::Record) -> wit::Record {
    wit::Record {
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

pub(crate) fn completion_in(c: wit::Completion) -> core::Completion {
    core::Completion {
        key: c.key,
        owner_token: c.owner_token,
        response: response_in(c.response),
        expires_at: c.expires_at,
        fast: c.fast,
    }
}

pub(crate) fn replacement_in(r: wit::Replacement) -> core::Replacement {
    core::Replacement {
        expected_token: r.expected_token,
        expected_lookups: r.expected_lookups,
        record: record_in(r.record),
    }
}

pub(crate) fn release_in(r: wit::ReleaseRequest) -> core::Release {
    core::Release {
        key: r.key,
        owner_token: r.owner_token,
    }
}

pub(crate) fn lookup_out(l: core::Lookup) -> wit::Lookup {
    match l {
        core::Lookup::Found(r) => wit::Lookup::Found(response_out(r)),
        core::Lookup::Absent => wit::Lookup::Absent,
        core::Lookup::Unknown => wit::Lookup::Unknown,
    }
}

pub(crate) fn attempt_out(a: &core::Attempt) -> wit::Attempt {
    wit::Attempt {
        key: a.key.clone(),
        fingerprint: a.fingerprint.clone(),
        tenant_id: a.tenant_id.clone(),
        action_type: a.action_type.clone(),
        prior: a.prior.as_ref().map(|p| wit::PriorKey {
            key: p.key.clone(),
            fingerprint: p.fingerprint.clone(),
        }),
    }
}

pub(crate) fn attempt_in(a: wit::Attempt) -> core::Attempt {
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

pub(crate) fn outcome_in(o: wit::ClaimOutcome) -> core::ClaimOutcome {
    match o {
        wit::ClaimOutcome::Owned => core::ClaimOutcome::Owned,
        wit::ClaimOutcome::InFlight => core::ClaimOutcome::InFlight,
        wit::ClaimOutcome::Done(r) => core::ClaimOutcome::Done(response_in(r)),
        wit::ClaimOutcome::PayloadConflict => core::ClaimOutcome::PayloadConflict,
    }
}

pub(crate) fn outcome_out(o: core::ClaimOutcome) -> wit::ClaimOutcome {
    match o {
        core::ClaimOutcome::Owned => wit::ClaimOutcome::Owned,
        core::ClaimOutcome::InFlight => wit::ClaimOutcome::InFlight,
        core::ClaimOutcome::Done(r) => wit::ClaimOutcome::Done(response_out(r)),
        core::ClaimOutcome::PayloadConflict => wit::ClaimOutcome::PayloadConflict,
    }
}

pub(crate) fn effect_out(e: core::EffectResult) -> wit::EffectResult {
    match e {
        core::EffectResult::Answered(r) => wit::EffectResult::Answered(response_out(r)),
        core::EffectResult::Refused(r) => wit::EffectResult::Refused(r.map(response_out)),
        core::EffectResult::Failed => wit::EffectResult::Failed,
    }
}

pub(crate) fn rules_out(r: &core::Rules) -> wit::Rules {
    wit::Rules {
        ttl_seconds: r.ttl_seconds,
        release_statuses: r.release_statuses.clone(),
        fast_completion: r.fast_completion,
    }
}

pub(crate) fn finished_in(f: wit::Finished) -> core::Finished {
    match f {
        wit::Finished::Stored => core::Finished::Stored,
        wit::Finished::Released => core::Finished::Released,
        wit::Finished::LeftInFlight => core::Finished::LeftInFlight,
        wit::Finished::Superseded => core::Finished::Superseded,
    }
}

pub(crate) fn recovery_rules_out(r: &core::RecoveryRules) -> wit::RecoveryRules {
    wit::RecoveryRules {
        stale_after: r.stale_after,
        read_your_writes: r.read_your_writes,
        ttl_seconds: r.ttl_seconds,
    }
}

pub(crate) fn action_in(a: wit::RecoveryAction) -> core::RecoveryAction {
    match a {
        wit::RecoveryAction::RecordDone(r) => core::RecoveryAction::RecordDone(response_in(r)),
        wit::RecoveryAction::ReExecute => core::RecoveryAction::ReExecute,
        wit::RecoveryAction::CheckLater(s) => core::RecoveryAction::CheckLater {
            lookups: s.lookups,
            next_lookup_at: s.next_lookup_at,
        },
        wit::RecoveryAction::Reconcile(lookups) => core::RecoveryAction::Reconcile { lookups },
    }
}

pub(crate) fn recovered_in(r: wit::Recovered) -> core::Recovered {
    match r {
        wit::Recovered::Missing => core::Recovered::Missing,
        wit::Recovered::NotInFlight(s) => core::Recovered::NotInFlight(status_in(s)),
        wit::Recovered::NotDue(due_at) => core::Recovered::NotDue { due_at },
        wit::Recovered::Applied(a) => core::Recovered::Applied(action_in(a)),
        wit::Recovered::Lost(a) => core::Recovered::Lost(action_in(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_both_ways() {
        for code in ErrorCode::ALL {
            assert_eq!(code_in(code_out(code)), code);
        }
    }
}
