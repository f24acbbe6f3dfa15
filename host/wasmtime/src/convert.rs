//! Conversions between the WIT types and the core's. No rule lives here.
//! The shared ones, `From` both ways, are written once in
//! `intentkey-wit-convert`; the store's error is the host's alone.

use intentkey_store::StoreError;

use crate::bindings::pure::intentkey::core::types as wit;

intentkey_wit_convert::convert_types!(crate::bindings::pure::intentkey::core::types);
intentkey_wit_convert::convert_http!(crate::bindings::pure::exports::intentkey::core::http);
// World `intentkey` has its own copy of the exported `http` types (the
// serve flow's handled and served).
intentkey_wit_convert::convert_http!(crate::bindings::full::exports::intentkey::core::http);

/// A store's failure as the WIT `store-error`: `unavailable` when retrying
/// may help, `failed` otherwise; the store's message unchanged.
pub(crate) fn store_error_out(e: &StoreError) -> wit::StoreError {
    if e.is_retryable() {
        wit::StoreError::Unavailable(e.message().to_owned())
    } else {
        wit::StoreError::Failed(e.message().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::pure::exports::intentkey::core::http as wit_http;
    use intentkey::claim as core;
    use intentkey::http::{Options, Profile};
    use intentkey::{Error, ErrorCode};

    #[test]
    fn every_code_maps_both_ways() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from(wit::ErrorCode::from(code)), code);
        }
    }

    #[test]
    fn errors_keep_code_field_and_message() {
        for e in [
            Error::field(ErrorCode::InvalidPolicy, "fields", "bad"),
            Error::new(ErrorCode::StoreFailed, "disk"),
        ] {
            let back = Error::from(wit::Error::from(e.clone()));
            assert_eq!(
                (back.code(), back.field_name(), back.message()),
                (e.code(), e.field_name(), e.message())
            );
        }
    }

    #[test]
    fn records_and_variants_round_trip() {
        let response = core::Response::json(201, r#"{"id":"pay_1"}"#);
        let record = core::Record {
            key: "k".into(),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
            status: core::Status::NeedsReconciliation,
            owner_token: "o".into(),
            response: Some(response.clone()),
            created_at: 1,
            expires_at: Some(2),
            lookups: 3,
            next_lookup_at: Some(4),
        };
        assert_eq!(
            core::Record::from(wit::Record::from(record.clone())),
            record
        );
        for recovered in [
            core::Recovered::NotDue { due_at: 9 },
            core::Recovered::Applied(core::RecoveryAction::CheckLater {
                lookups: 2,
                next_lookup_at: 7,
            }),
            core::Recovered::Lost(core::RecoveryAction::Reconcile { lookups: 5 }),
            core::Recovered::NotInFlight(core::Status::Done),
        ] {
            let back = core::Recovered::from(wit::Recovered::from(recovered.clone()));
            assert_eq!(back, recovered);
        }
        let refused = core::EffectResult::Refused(Some(response));
        let back = core::EffectResult::from(wit::EffectResult::from(refused.clone()));
        assert_eq!(back, refused);
        let options = Options::new(Profile::Ofb);
        assert_eq!(
            Options::from(wit_http::Options::from(options.clone())),
            options
        );
    }
}
