//! The policy parser: any text is a policy or a typed error naming where it
//! went wrong; a policy that parses answers the same for the same payload.
#![no_main]

use intentkey::{Deriver, Intent, Payload, Policy, Secret};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Policy::from_json(text) {
        Ok(policy) => {
            let secret = Secret::new([7u8; 32]).expect("a 32-byte secret");
            let deriver = Deriver::new(&secret, policy);
            let payload = Payload::from_json(r#"{"amount":"10.50","currency":"brl","creditor_key":"a@b.c"}"#).expect("payload");
            let intent = Intent { tenant_id: "t", action_type: "a", payload: &payload, intent_epoch: 1_700_000_000 };
            let first = deriver.derive(&intent).map(|k| k.as_str().to_owned());
            let again = deriver.derive(&intent).map(|k| k.as_str().to_owned());
            assert_eq!(first.is_ok(), again.is_ok());
            if let (Ok(a), Ok(b)) = (first, again) {
                assert_eq!(a, b, "a policy derives the same key twice");
            }
        }
        Err(e) => {
            assert!(!e.code().as_str().is_empty());
            assert!(e.message().len() < 4096 + text.len(), "an error message grows with its input only");
        }
    }
});
