//! Answers stay small whatever the input holds: an error about 100,000
//! unclassified fields (or one field with a 1 MB name) names the first
//! fields, sorted and cut short, then a count.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::{Deriver, ErrorCode, Intent, Payload, Policy, Secret};

fn derive_error(json: &str) -> intentkey::Error {
    let secret = Secret::new([5u8; 32]).unwrap();
    let deriver = Deriver::new(&secret, Policy::default());
    let payload = Payload::from_json(json).unwrap();
    let intent = Intent {
        tenant_id: "t",
        action_type: "pix.send",
        payload: &payload,
        intent_epoch: 1_700_000_000,
    };
    deriver.derive(&intent).unwrap_err()
}

#[test]
fn a_hundred_thousand_unclassified_fields_give_a_short_answer() {
    let members: Vec<String> = (0..100_000).map(|i| format!("\"z{i:06}\":1")).collect();
    let e = derive_error(&format!("{{\"amount\":1,{}}}", members.join(",")));
    assert_eq!(e.code(), ErrorCode::UnclassifiedFields);
    let message = e.message();
    assert!(message.len() < 1024, "{} bytes: {message}", message.len());
    // The first names in code point order, then how many more.
    assert!(message.contains(r#"["z000000", "z000001","#), "{message}");
    assert!(
        message.contains("… and 99980 more (100000 in all)"),
        "{message}"
    );
    assert!(
        !message.contains("z000020"),
        "only the first 20 are named: {message}"
    );
    let field = e.field_name().unwrap();
    assert!(
        field.starts_with("z000000,z000001,") && field.ends_with(",…"),
        "{field}"
    );
    assert!(field.len() < 512);
}

#[test]
fn a_field_with_a_one_megabyte_name_is_named_in_64_characters() {
    let name = "n".repeat(1 << 20);
    let e = derive_error(&format!("{{\"{name}\":1}}"));
    assert_eq!(e.code(), ErrorCode::UnclassifiedFields);
    assert!(e.message().len() < 512, "{} bytes", e.message().len());
    assert!(e.message().contains(&format!("\"{}…\"", "n".repeat(64))));
}

#[test]
fn a_few_unclassified_fields_are_all_named() {
    // `amount` is classified by the default (payments) policy.
    let e = derive_error(r#"{"b":1,"a":2,"amount":3}"#);
    assert_eq!(e.field_name(), Some("a,b"));
    assert!(
        e.message()
            .starts_with(r#"unclassified fields: ["a", "b"];"#),
        "{}",
        e.message()
    );
}
