//! Conversions between the WIT types and the core's. No rule lives here.
//! The shared ones, `From` both ways, are written once in
//! `intentkey-wit-convert`; a store's error as an error with a code is the
//! guest's alone.

intentkey_wit_convert::convert_types!(crate::bindings::intentkey::core::types);
intentkey_wit_convert::convert_http!(crate::bindings::exports::intentkey::core::http);

/// A store's failure as an error with a code.
#[cfg(feature = "guard")]
pub(crate) fn store_error(
    e: crate::bindings::intentkey::core::types::StoreError,
) -> crate::bindings::intentkey::core::types::Error {
    use crate::bindings::intentkey::core::types as t;
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
