//! Property tests: normalization is stable, noise never changes the key,
//! identity always does, and no input panics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::normalize::text;
use intentkey::{Deriver, Intent, Normalizer, Payload, Policy, RequestAnswerer, Secret};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use unicode_normalization::is_nfc;

fn deriver() -> Deriver {
    Deriver::new(&Secret::new([0x5a; 32]).unwrap(), Policy::default())
}

fn key_of(deriver: &Deriver, payload_json: &str, epoch: i64) -> Result<String, intentkey::Error> {
    let payload = Payload::from_json(payload_json)?;
    deriver
        .derive(&Intent {
            tenant_id: "t",
            action_type: "pix.send",
            payload: &payload,
            intent_epoch: epoch,
        })
        .map(|k| k.into_string())
}

/// Any JSON value, including deep nesting, big and odd numbers, and any Unicode.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC*".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A valid default-policy payload: key fields in forms the normalizers accept.
fn key_fields() -> impl Strategy<Value = (String, String, String, String)> {
    (
        "[0-9]{11}|[a-z]{1,10}@[a-z]{1,8}\\.com",
        (0u64..10_000_000, 0u64..100).prop_map(|(units, cents)| format!("{units}.{cents:02}")),
        "[A-Z]{3}",
        any::<String>(),
    )
}

const IGNORED: [&str; 5] = [
    "request_id",
    "attempt",
    "trace_id",
    "created_at",
    "user_agent",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Normalizing a normalized text again changes nothing, whenever the first
    /// result is NFC. (The oracle's NFC-strip-casefold order makes the rare
    /// non-NFC fold, e.g. "ß\u{301}" → "ss\u{301}", change on a second pass;
    /// intentkey keeps the oracle's bytes, see `casefold_output_may_be_non_nfc`.)
    #[test]
    fn text_is_idempotent(s in any::<String>()) {
        let once = text(&s);
        if is_nfc(&once) {
            prop_assert_eq!(text(&once), once);
        }
    }

    #[test]
    fn other_normalizers_are_idempotent(s in any::<String>(), n in any::<i64>(), f in any::<f64>()) {
        for normalizer in [Normalizer::PixKey, Normalizer::Currency, Normalizer::Exact, Normalizer::Integer, Normalizer::Decimal { scale: 2 }, Normalizer::Decimal { scale: 0 }] {
            for value in [json!(s.clone()), json!(n), json!(f)] {
                if let Ok(once) = normalizer.apply("f", &value) {
                    let twice = normalizer.apply("f", &json!(once.clone()));
                    prop_assert_eq!(twice.as_ref().ok(), Some(&once), "{:?} on {}", normalizer, value);
                }
            }
        }
    }

    /// Ignored fields, their values and the order of payload members never change the key.
    #[test]
    fn noise_and_order_never_change_the_key(
        (pix, amount, currency, remittance) in key_fields(),
        noise in prop::collection::vec((0usize..5, any_json()), 0..5),
        order in Just(()).prop_perturb(|_, mut rng| { let mut v: Vec<usize> = (0..9).collect(); for i in (1..v.len()).rev() { v.swap(i, rng.random_range(0..=i)); } v }),
        epoch in any::<i64>(),
    ) {
        let d = deriver();
        let base = json!({"creditor_key": pix, "amount": amount, "currency": currency, "remittance": remittance}).to_string();
        let want = key_of(&d, &base, epoch).unwrap();
        // Re-serialize the same members plus noise, in a shuffled order.
        let mut members: Vec<(String, Value)> = vec![
            ("creditor_key".into(), json!(pix)), ("amount".into(), json!(amount)),
            ("currency".into(), json!(currency)), ("remittance".into(), json!(remittance)),
        ];
        for (i, v) in noise { members.push((IGNORED[i].into(), v)); }
        let mut shuffled: Vec<&(String, Value)> = order.iter().filter_map(|&i| members.get(i)).collect();
        shuffled.extend(members.iter().skip(9));
        let text = format!("{{{}}}", shuffled.iter().map(|(k, v)| format!("{}:{}", json!(k), v)).collect::<Vec<_>>().join(","));
        prop_assert_eq!(key_of(&d, &text, epoch).unwrap(), want);
    }

    /// Changing any key field's meaning changes the key.
    #[test]
    fn every_key_field_changes_the_key((pix, amount, currency, remittance) in key_fields(), which in 0usize..4, epoch in any::<i64>()) {
        let d = deriver();
        let mut payload = json!({"creditor_key": pix, "amount": amount, "currency": currency, "remittance": remittance});
        let want = key_of(&d, &payload.to_string(), epoch).unwrap();
        let (field, changed) = match which {
            0 => ("creditor_key", json!(format!("{pix}9"))),
            1 => ("amount", json!(format!("{amount}1"))), // 10.50 -> 10.501 rounds to 10.50: add a cent instead
            2 => ("currency", json!(if currency == "BRL" { "USD" } else { "BRL" })),
            _ => ("remittance", json!(format!("{}x", text(&remittance)))),
        };
        let changed = if field == "amount" {
            let cents: i128 = amount.replace('.', "").parse().unwrap();
            json!(format!("{}.{:02}", (cents + 1) / 100, (cents + 1) % 100))
        } else { changed };
        payload[field] = changed;
        prop_assert_ne!(key_of(&d, &payload.to_string(), epoch).unwrap(), want, "changing {} kept the key", field);
    }

    /// The bucket is part of the key: epochs a bucket apart give different keys.
    #[test]
    fn epoch_bucket_changes_the_key(epoch in -1_000_000_000_000i64..1_000_000_000_000) {
        let d = deriver();
        let a = key_of(&d, r#"{"amount":"1"}"#, epoch).unwrap();
        prop_assert_ne!(key_of(&d, r#"{"amount":"1"}"#, epoch + 900).unwrap(), a.clone());
        let start = epoch.div_euclid(900) * 900;
        prop_assert_eq!(key_of(&d, r#"{"amount":"1"}"#, start).unwrap(), key_of(&d, r#"{"amount":"1"}"#, start + 899).unwrap());
    }

    /// No JSON shape or Unicode panics any entry point.
    #[test]
    fn no_json_value_panics(value in any_json(), epoch in any::<i64>()) {
        let d = deriver();
        let payload_text = value.to_string();
        let _ = key_of(&d, &payload_text, epoch);
        if let Ok(payload) = Payload::from_value(value.clone()) {
            let _ = d.fingerprint("t", "a", &payload);
        }
        for normalizer in [Normalizer::Text, Normalizer::PixKey, Normalizer::Currency, Normalizer::Exact, Normalizer::Integer, Normalizer::Decimal { scale: 18 }] {
            let _ = normalizer.apply("f", &value);
        }
        let _ = Policy::from_value(&value);
        let mut answerer = RequestAnswerer::new(Policy::default());
        let line = json!({"secret_hex": "00".repeat(32), "tenant_id": "t", "action_type": "a", "payload": value, "intent_epoch": epoch}).to_string();
        let answer = answerer.answer(&line);
        let line_out = answer.to_line();
        prop_assert!(line_out.starts_with(r#"{"id":"#), "{}", line_out);
    }

    /// No text panics: raw lines, payload text, policy text, decimal strings.
    #[test]
    fn no_text_panics(s in any::<String>(), digits in "[-+]?[0-9]{0,40}(\\.[0-9]{0,40})?([eE][-+]?[0-9]{0,25})?") {
        let mut answerer = RequestAnswerer::new(Policy::default());
        let _ = answerer.answer_line(&s);
        let _ = Payload::from_json(&s);
        let _ = Policy::from_json(&s);
        let _ = Secret::from_hex(&s);
        for text in [&s, &digits] {
            let _ = Normalizer::Decimal { scale: 2 }.apply("amount", &json!(text));
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                let _ = Normalizer::Decimal { scale: 2 }.apply("amount", &v);
            }
        }
    }
}

#[test]
fn casefold_output_may_be_non_nfc() {
    // The oracle's order (NFC, strip, casefold) leaves "ss" + U+0301 un-composed;
    // a second pass composes it. intentkey keeps the oracle's bytes.
    let once = text("ß\u{301}");
    assert_eq!(once, "ss\u{301}");
    assert_eq!(text(&once), "s\u{15b}");
}

#[test]
fn deep_nesting_is_refused_not_crashed() {
    let deep = format!("{{\"trace_id\":{}1{}}}", "[".repeat(150), "]".repeat(150));
    assert_eq!(
        Payload::from_json(&deep).unwrap_err().code().as_str(),
        "invalid-payload"
    );
    let deeper = format!(
        "{{\"trace_id\":{}1{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert_eq!(
        Payload::from_json(&deeper).unwrap_err().code().as_str(),
        "invalid-payload"
    );
}

#[test]
fn huge_inputs_do_not_panic() {
    let d = deriver();
    let big = format!(
        r#"{{"remittance":"{}","amount":"{}"}}"#,
        "Ä".repeat(1 << 20),
        "9".repeat(100_000)
    );
    assert_eq!(
        key_of(&d, &big, 0).unwrap_err().code().as_str(),
        "decimal-out-of-range"
    );
    let tiny = format!(r#"{{"amount":"0.{}1"}}"#, "0".repeat(100_000));
    assert!(key_of(&d, &tiny, 0).is_ok());
}

#[test]
fn secrets_never_appear_in_keys_errors_or_debug() {
    let hex = "5ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2";
    let secret = Secret::from_hex(hex).unwrap();
    let deriver = Deriver::new(&secret, Policy::default());
    for shown in [format!("{secret:?}"), format!("{deriver:?}")] {
        assert!(!shown.contains(hex) && !shown.contains("5ec2e7"), "{shown}");
        assert!(!shown.contains("[94, 194"), "no raw bytes: {shown}");
    }
    // Errors about a bad or short secret name the problem, not the bytes.
    for bad in [
        format!("{hex}zz"),
        hex[..40].to_owned(),
        format!("{}x", &hex[..63]),
    ] {
        let e = Secret::from_hex(&bad).unwrap_err();
        assert!(
            !e.message().contains("5ec2e7") && !e.to_string().contains("5ec2e7"),
            "{e}"
        );
    }
    // Keys are HMAC output; derivation errors never carry the secret either.
    let payload = Payload::from_json(r#"{"amount":"x"}"#).unwrap();
    let e = deriver
        .derive(&Intent {
            tenant_id: "t",
            action_type: "a",
            payload: &payload,
            intent_epoch: 0,
        })
        .unwrap_err();
    assert!(!format!("{e:?}").contains("5ec2e7"));
    let mut answerer = RequestAnswerer::new(Policy::default());
    let line = format!(
        r#"{{"secret_hex":"{}","tenant_id":"t","action_type":"a","payload":{{"amount":"x"}},"intent_epoch":0}}"#,
        &hex[..40]
    );
    assert!(!answerer.answer_line(&line).contains("5ec2e7"));
}
