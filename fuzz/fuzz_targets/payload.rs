//! Payload parsing and every normalizer: any JSON is refused with a typed
//! error or derives a key; deriving is deterministic, the material is JSON,
//! and a normalizer applied to its own output (when it is a string) agrees
//! with itself where it is documented to be idempotent.
#![no_main]

use std::sync::OnceLock;

use intentkey::{Deriver, Intent, Normalizer, Payload, Policy, Secret};
use libfuzzer_sys::fuzz_target;

const POLICY: &str = r#"{"version":1,"fields":{
  "t":{"class":"key","normalizer":"text"},
  "p":{"class":"key","normalizer":"pix-key"},
  "d":{"class":"key","normalizer":"decimal","scale":2,"rounding":"half-up"},
  "z":{"class":"key","normalizer":"decimal","scale":0,"rounding":"half-up"},
  "c":{"class":"key","normalizer":"currency"},
  "e":{"class":"key","normalizer":"exact"},
  "i":{"class":"key","normalizer":"integer"},
  "f":{"class":"fingerprint"},
  "x":{"class":"ignored"}}}"#;

const NORMALIZERS: [Normalizer; 7] = [
    Normalizer::Text,
    Normalizer::PixKey,
    Normalizer::Decimal { scale: 2 },
    Normalizer::Decimal { scale: 18 },
    Normalizer::Currency,
    Normalizer::Exact,
    Normalizer::Integer,
];

fn deriver() -> &'static (Secret, Policy) {
    static D: OnceLock<(Secret, Policy)> = OnceLock::new();
    D.get_or_init(|| (Secret::new([9u8; 32]).expect("secret"), Policy::from_json(POLICY).expect("policy")))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Every normalizer on the value as it is.
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        for n in NORMALIZERS {
            if let Ok(out) = n.apply("f", &value) {
                assert_eq!(n.apply("f", &value).ok().as_deref(), Some(out.as_str()), "{} is deterministic", n.name());
            }
        }
    }
    let (secret, policy) = deriver();
    let deriver = Deriver::new(secret, policy.clone());
    let Ok(payload) = Payload::from_json(text) else { return };
    let intent = Intent { tenant_id: "t", action_type: "a", payload: &payload, intent_epoch: 1_700_000_000 };
    match deriver.material(&intent) {
        Ok(material) => {
            let parsed: serde_json::Value = serde_json::from_slice(&material).expect("the material is JSON");
            assert!(parsed.is_array());
            let key = deriver.derive(&intent).expect("a payload with material has a key");
            assert_eq!(key.as_str().len(), 64);
            assert_eq!(deriver.derive(&intent).expect("again").as_str(), key.as_str());
        }
        Err(e) => {
            assert!(deriver.derive(&intent).is_err(), "material and derive agree");
            assert!(e.message().len() < 8192, "{} bytes of error", e.message().len());
        }
    }
});
