//! The HTTP rules: the key header parser of each profile and the request
//! fingerprint (RFC 8785 JSON, form pairs, bytes). Any header values and
//! any body are admitted or refused with the profile's 400/413/422 shapes;
//! nothing panics; a refusal is never a 5xx; admitting is deterministic.
#![no_main]

use intentkey::http::{Admission, Endpoint, Incoming, KeyErrorReason, Options, Profile};
use intentkey::Secret;
use libfuzzer_sys::fuzz_target;

#[path = "split.rs"]
mod split;

const TYPES: [Option<&str>; 6] = [
    Some("application/json"),
    Some("application/x-www-form-urlencoded"),
    Some("text/plain; charset=utf-8"),
    Some("application/merge-patch+json"),
    Some("APPLICATION/JSON ; charset=UTF-8"),
    None,
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let profile = [Profile::Ietf, Profile::Stripe, Profile::Ofb][usize::from(data[0] % 3)];
    let content_type = TYPES[usize::from(data[1]) % TYPES.len()];
    let options = Options {
        strict_key_syntax: data[2] & 1 == 1,
        key_required: data[2] & 2 == 0,
        max_body_bytes: if data[2] & 4 == 0 { 1 << 20 } else { 64 },
        ..Options::new(profile)
    };
    let endpoint = Endpoint::new(Secret::new([3u8; 32]).expect("secret"), options);
    let (values, body) = split::values_and_body(&data[3..]);
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let request = Incoming {
        tenant_id: "tenant-1",
        method: "POST",
        route: "/orders",
        key_values: &refs,
        content_type,
        body,
    };
    let first = endpoint.admit(&request, 1_700_000_000).expect("only the server's mistakes are errors");
    let again = endpoint.admit(&request, 1_700_000_000).expect("again");
    assert_eq!(first, again, "admitting is deterministic");
    match first {
        Admission::Refused(reply) => {
            assert!(matches!(reply.status, 400 | 413 | 422), "a refusal is a client error: {}", reply.status);
            assert!(reply.body.len() < 4096, "{} bytes", reply.body.len());
        }
        Admission::Guarded(attempt) => {
            assert_eq!(attempt.key.len(), 64);
            assert_eq!(attempt.fingerprint.len(), 64);
            assert!(body.len() as u64 <= endpoint.options().max_body_bytes);
        }
        // Unguarded only when no key was sent: no header, or an empty value
        // (as the vectors say: `key-optional-runs-unguarded`), never a bad key.
        Admission::Unguarded => {
            let parsed = endpoint.options().client_key_from_values(&refs);
            assert!(
                matches!(&parsed, Err(e) if e.reason() == KeyErrorReason::Missing),
                "unguarded with a key that is not missing: {refs:?}"
            );
            assert!(!endpoint.options().key_required);
        }
    }
});
