//! The intentkey core as one WebAssembly component.
//!
//! A thin adapter: it converts WIT types to the core's and back, and calls the
//! host's `secrets` and `random` imports. Every rule lives in `intentkey`.
//! Build it with `cargo xtask build-component`.

// Generated glue: the canonical ABI needs `unsafe`, and only this glue has it.
#[allow(unsafe_code, missing_docs)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "intentkey",
    });
}

use bindings::exports::intentkey::core::keys::{self, GuestKeyer};
use bindings::intentkey::core::types::{
    Error as WitError, ErrorCode as WitCode, Intent as WitIntent,
};
use bindings::intentkey::core::{random, secrets};
use intentkey::{
    Deriver, Error, ErrorCode, Intent, KeyLength, Payload, Policy, RequestAnswerer, Secret,
};

struct Component;

/// A policy keyed with one secret, held by the guest for the resource's life.
struct Keyer {
    deriver: Deriver,
}

fn code(code: ErrorCode) -> WitCode {
    match code {
        ErrorCode::SecretTooShort => WitCode::SecretTooShort,
        ErrorCode::InvalidSecret => WitCode::InvalidSecret,
        ErrorCode::InvalidTenantId => WitCode::InvalidTenantId,
        ErrorCode::InvalidActionType => WitCode::InvalidActionType,
        ErrorCode::UnknownActionType => WitCode::UnknownActionType,
        ErrorCode::InvalidEpoch => WitCode::InvalidEpoch,
        ErrorCode::InvalidPayload => WitCode::InvalidPayload,
        ErrorCode::UnclassifiedFields => WitCode::UnclassifiedFields,
        ErrorCode::InvalidFieldType => WitCode::InvalidFieldType,
        ErrorCode::InvalidDecimal => WitCode::InvalidDecimal,
        ErrorCode::DecimalOutOfRange => WitCode::DecimalOutOfRange,
        ErrorCode::InvalidInteger => WitCode::InvalidInteger,
        ErrorCode::InvalidCurrency => WitCode::InvalidCurrency,
        ErrorCode::InvalidPixKey => WitCode::InvalidPixKey,
        ErrorCode::InvalidIntentId => WitCode::InvalidIntentId,
        ErrorCode::InvalidPolicy => WitCode::InvalidPolicy,
        ErrorCode::InvalidJson => WitCode::InvalidJson,
        ErrorCode::InvalidKeyLength => WitCode::InvalidKeyLength,
        ErrorCode::InvalidRandom => WitCode::InvalidRandom,
        // A code added to the core without a WIT counterpart reports as JSON trouble
        // until the WIT grows it; the message still names the real problem.
        _ => WitCode::InvalidJson,
    }
}

fn wit_error(e: Error) -> WitError {
    WitError {
        code: code(e.code()),
        field: e.field_name().map(str::to_owned),
        message: e.message().to_owned(),
    }
}

fn with_payload<T>(
    payload_json: &str,
    f: impl FnOnce(&Payload) -> intentkey::Result<T>,
) -> Result<T, WitError> {
    Payload::from_json(payload_json)
        .and_then(|p| f(&p))
        .map_err(wit_error)
}

impl Keyer {
    fn key(&self, intent: &WitIntent) -> Result<String, WitError> {
        with_payload(&intent.payload_json, |payload| {
            self.deriver
                .derive(&Intent {
                    tenant_id: &intent.tenant_id,
                    action_type: &intent.action_type,
                    payload,
                    intent_epoch: intent.intent_epoch,
                })
                .map(intentkey::Key::into_string)
        })
    }
}

impl GuestKeyer for Keyer {
    fn create(policy_json: Option<String>, secret_id: String) -> Result<keys::Keyer, WitError> {
        let policy = match policy_json {
            Some(json) => Policy::from_json(&json).map_err(wit_error)?,
            None => Policy::default(),
        };
        let secret = Secret::new(secrets::get_secret(&secret_id)?).map_err(wit_error)?;
        Ok(keys::Keyer::new(Keyer {
            deriver: Deriver::new(&secret, policy),
        }))
    }

    fn derive(&self, intent: WitIntent) -> Result<String, WitError> {
        self.key(&intent)
    }

    fn derive_many(&self, intents: Vec<WitIntent>) -> Vec<Result<String, WitError>> {
        intents.iter().map(|intent| self.key(intent)).collect()
    }

    fn material(&self, intent: WitIntent) -> Result<String, WitError> {
        with_payload(&intent.payload_json, |payload| {
            self.deriver.material(&Intent {
                tenant_id: &intent.tenant_id,
                action_type: &intent.action_type,
                payload,
                intent_epoch: intent.intent_epoch,
            })
        })
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    }

    fn intent_key(
        &self,
        tenant_id: String,
        intent_id: String,
        key_hex_length: Option<u32>,
    ) -> Result<String, WitError> {
        let length = match key_hex_length {
            Some(n) => KeyLength::new(n as usize).map_err(wit_error)?,
            None => KeyLength::FULL,
        };
        self.deriver
            .intent_key(&tenant_id, &intent_id, length)
            .map(intentkey::Key::into_string)
            .map_err(wit_error)
    }

    fn fingerprint(
        &self,
        tenant_id: String,
        action_type: String,
        payload_json: String,
    ) -> Result<String, WitError> {
        with_payload(&payload_json, |payload| {
            self.deriver.fingerprint(&tenant_id, &action_type, payload)
        })
        .map(|fp| fp.as_str().to_owned())
    }

    fn fingerprint_material(
        &self,
        tenant_id: String,
        action_type: String,
        payload_json: String,
    ) -> Result<String, WitError> {
        with_payload(&payload_json, |payload| {
            self.deriver
                .fingerprint_material(&tenant_id, &action_type, payload)
        })
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    }

    fn fingerprint_matches(
        &self,
        tenant_id: String,
        action_type: String,
        payload_json: String,
        stored: String,
    ) -> Result<bool, WitError> {
        with_payload(&payload_json, |payload| {
            self.deriver.fingerprint(&tenant_id, &action_type, payload)
        })
        .map(|fp| fp.matches(&stored))
    }
}

fn uuid_from(bytes: &[u8]) -> Result<String, WitError> {
    intentkey::uuid_key_from_slice(bytes)
        .map(intentkey::Key::into_string)
        .map_err(wit_error)
}

fn answer_all(policy: Policy, lines: &[String]) -> Vec<String> {
    let mut answerer = RequestAnswerer::new(policy);
    lines
        .iter()
        .map(|line| answerer.answer_line(line))
        .collect()
}

impl keys::Guest for Component {
    type Keyer = Keyer;

    fn new_uuid_key() -> Result<String, WitError> {
        uuid_from(&random::random_bytes(16))
    }

    fn uuid_key(random_bytes: Vec<u8>) -> Result<String, WitError> {
        uuid_from(&random_bytes)
    }

    fn unreadable_line_answer() -> String {
        intentkey::request::unreadable_line_answer()
    }

    fn answer_lines(lines: Vec<String>) -> Vec<String> {
        answer_all(Policy::default(), &lines)
    }

    fn answer_lines_with_policy(
        policy_json: String,
        lines: Vec<String>,
    ) -> Result<Vec<String>, WitError> {
        let policy = Policy::from_json(&policy_json).map_err(wit_error)?;
        Ok(answer_all(policy, &lines))
    }
}

#[allow(unsafe_code)]
mod export {
    use super::Component;
    crate::bindings::export!(Component with_types_in crate::bindings);
}

mod claims {
    //! Type conversions for the pure claim decisions; every rule is in
    //! `intentkey::claim`.

    use crate::bindings::exports::intentkey::core::claims as wit;
    use intentkey::claim as core;

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
            body: r.body,
        }
    }

    pub(crate) fn response_out(r: core::Response) -> wit::Response {
        wit::Response {
            status: r.status,
            content_type: r.content_type,
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
            response: r.response.map(response_out),
            created_at: r.created_at,
            expires_at: r.expires_at,
            lookups: r.lookups,
            next_lookup_at: r.next_lookup_at,
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

    pub(crate) fn answer_out(a: core::HttpAnswer) -> wit::HttpAnswer {
        wit::HttpAnswer {
            status: a.status,
            content_type: a.content_type,
            body: a.body,
            replayed: a.replayed,
        }
    }

    pub(crate) fn lookup_in(lookup: wit::Lookup) -> core::Lookup {
        match lookup {
            wit::Lookup::Found(r) => core::Lookup::Found(response_in(r)),
            wit::Lookup::Absent => core::Lookup::Absent,
            wit::Lookup::Unknown => core::Lookup::Unknown,
        }
    }

    pub(crate) fn recovery_out(action: core::RecoveryAction) -> wit::RecoveryAction {
        match action {
            core::RecoveryAction::RecordDone(r) => wit::RecoveryAction::RecordDone(response_out(r)),
            core::RecoveryAction::ReExecute => wit::RecoveryAction::ReExecute,
            core::RecoveryAction::CheckLater {
                lookups,
                next_lookup_at,
            } => wit::RecoveryAction::CheckLater(wit::LookupSchedule {
                lookups,
                next_lookup_at,
            }),
            core::RecoveryAction::Reconcile { lookups } => wit::RecoveryAction::Reconcile(lookups),
        }
    }

    impl wit::Guest for crate::Component {
        fn new_record(
            key: String,
            fingerprint: String,
            tenant_id: String,
            action_type: String,
            now: i64,
        ) -> wit::Record {
            record_out(core::Record::in_flight(
                &key,
                &fingerprint,
                &tenant_id,
                &action_type,
                now,
            ))
        }

        fn decide_existing(existing: wit::Record, fingerprint: String) -> wit::ClaimOutcome {
            outcome_out(core::decide_existing(&record_in(existing), &fingerprint))
        }

        fn complete(
            existing: wit::Record,
            response: wit::Response,
            now: i64,
            ttl_seconds: i64,
        ) -> wit::Record {
            let mut record = record_in(existing);
            record.complete(response_in(response), now, ttl_seconds);
            record_out(record)
        }

        fn answer_for(outcome: wit::ClaimOutcome) -> Option<wit::HttpAnswer> {
            core::http_answer(&outcome_in(outcome)).map(answer_out)
        }

        fn missing_key_answer(header: String) -> wit::HttpAnswer {
            answer_out(core::missing_key_answer(&header))
        }

        fn decide_recovery(
            existing: wit::Record,
            lookup: wit::Lookup,
            read_your_writes: bool,
            now: i64,
        ) -> wit::RecoveryAction {
            recovery_out(core::decide_recovery(
                &record_in(existing),
                &lookup_in(lookup),
                read_your_writes,
                now,
            ))
        }

        fn recovery_due(existing: wit::Record, now: i64, stale_after: i64) -> bool {
            core::recovery_due(&record_in(existing), now, stale_after)
        }

        fn purgeable(existing: wit::Record, now: i64) -> bool {
            core::purgeable(&record_in(existing), now)
        }

        fn default_ttl_seconds() -> i64 {
            core::DEFAULT_TTL_SECONDS
        }
    }
}

mod guard {
    //! The core driving the host's imported `store` and `gateway`; the
    //! algorithms are `intentkey::claim::{claim_in, complete_in, recover_in}`.

    use crate::bindings::exports::intentkey::core::claims as wit_claims;
    use crate::bindings::exports::intentkey::core::guard as wit;
    use crate::bindings::intentkey::core::{gateway, store};
    use crate::claims::{lookup_in, outcome_out, record_in, record_out, recovery_out, response_in};
    use intentkey::claim::{self as core, ClaimStore, DriveError};

    /// The host's store, as the core's `ClaimStore`.
    struct Imported;

    impl ClaimStore for Imported {
        type Error = String;
        fn insert_if_absent(&mut self, record: &core::Record) -> Result<bool, String> {
            store::insert_if_absent(&record_out(record.clone()))
        }
        fn get(&mut self, key: &str) -> Result<Option<core::Record>, String> {
            store::get(key).map(|r| r.map(record_in))
        }
        fn replace_in_flight(&mut self, record: &core::Record) -> Result<bool, String> {
            store::replace_in_flight(&record_out(record.clone()))
        }
    }

    fn message(e: DriveError<String>) -> String {
        match e {
            DriveError::Store(m) => m,
            DriveError::Vanished => {
                "the record was purged three times during its claim; try again".into()
            }
        }
    }

    impl wit::Guest for crate::Component {
        fn claim(
            key: String,
            fingerprint: String,
            tenant_id: String,
            action_type: String,
            now: i64,
        ) -> Result<wit_claims::ClaimOutcome, String> {
            let record = core::Record::in_flight(&key, &fingerprint, &tenant_id, &action_type, now);
            core::claim_in(&mut Imported, &record)
                .map(outcome_out)
                .map_err(message)
        }

        fn complete(
            key: String,
            response: wit::Response,
            now: i64,
            ttl_seconds: i64,
        ) -> Result<bool, String> {
            core::complete_in(&mut Imported, &key, response_in(response), now, ttl_seconds)
                .map_err(message)
        }

        fn recover(
            key: String,
            now: i64,
            ttl_seconds: i64,
        ) -> Result<Option<wit_claims::RecoveryAction>, String> {
            let read_your_writes = gateway::read_your_writes();
            core::recover_in(
                &mut Imported,
                &key,
                |k| lookup_in(gateway::ask(k)),
                read_your_writes,
                now,
                ttl_seconds,
            )
            .map(|action| action.map(recovery_out))
            .map_err(message)
        }
    }
}
