//! `RequestAnswerer` reads a line in one pass and keeps only what the key
//! reads. Its answers must be the answers of the line read whole into a
//! `serde_json::Value` and handed to the public API member by member: the same
//! key, or the same error code and message, for any line, including repeated
//! names, escaped names, deep nesting and values of every type.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::request::epoch;
use intentkey::{Deriver, Error, ErrorCode, Intent, Payload, Policy, RequestAnswerer, Secret};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// The answer of `line` through the whole-value route.
fn whole_value_answer(policy: &Policy, line: &str) -> String {
    let (id, outcome) = match serde_json::from_str::<Value>(line) {
        Err(e) => (
            Value::Null,
            Err(Error::new(
                ErrorCode::InvalidJson,
                format!("the line is not valid JSON ({e}); send one JSON object per line"),
            )),
        ),
        Ok(Value::Object(mut members)) => {
            let id = members.remove("id").unwrap_or(Value::Null);
            (id, whole_value_key(policy, members))
        }
        Ok(_) => (
            Value::Null,
            Err(Error::new(
                ErrorCode::InvalidJson,
                "the line is JSON but not an object; send one JSON object per line",
            )),
        ),
    };
    intentkey::Answer { id, outcome }.to_line()
}

fn whole_value_key(
    policy: &Policy,
    members: Map<String, Value>,
) -> intentkey::Result<intentkey::Key> {
    let string = |name: &str, code: ErrorCode| match members.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(Error::field(code, name, format!("`{name}` is empty"))),
        _ => Err(Error::field(
            code,
            name,
            format!("`{name}` is missing or not a string; send a non-empty string"),
        )),
    };
    let Some(Value::String(secret_hex)) = members.get("secret_hex") else {
        return Err(Error::field(
            ErrorCode::InvalidSecret,
            "secret_hex",
            "`secret_hex` is missing or not a string; give the secret as hex",
        ));
    };
    let tenant_id = string("tenant_id", ErrorCode::InvalidTenantId)?;
    let action_type = string("action_type", ErrorCode::InvalidActionType)?;
    let intent_epoch = epoch(members.get("intent_epoch"))?;
    let payload = match members.get("payload") {
        Some(v) => Payload::from_value(v.clone())?,
        None => {
            return Err(Error::field(
                ErrorCode::InvalidPayload,
                "payload",
                "`payload` is missing; send the request body as a JSON object",
            ))
        }
    };
    Deriver::new(&Secret::from_hex(secret_hex)?, policy.clone()).derive(&Intent {
        tenant_id: &tenant_id,
        action_type: &action_type,
        payload: &payload,
        intent_epoch,
    })
}

/// Any JSON value, as text.
fn any_json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("1e400".to_owned()),
        Just("-0.0".to_owned()),
        Just("123456789012345678901234567890.5".to_owned()),
        "\\PC{0,12}".prop_map(|s| json!(s).to_string()),
        Just(r#""caf\u00e9 \ud83d\ude00""#.to_owned()),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((member_name(), inner), 0..4).prop_map(|m| {
                let members: Vec<String> = m.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

/// Nesting around a scalar: some under the payload's depth limit, some at or
/// over it, some past the parser's recursion limit.
fn nested_text() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just(97usize),
            Just(98),
            Just(99),
            Just(100),
            Just(126),
            Just(127),
            Just(128),
            Just(200)
        ],
        any::<bool>(),
    )
        .prop_map(|(depth, arrays)| {
            if arrays {
                format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
            } else {
                format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
            }
        })
}

/// A member name as JSON text: the policy's fields (some escaped), and others.
fn member_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#""amount""#.to_owned()),
        Just(r#""amo\u0075nt""#.to_owned()),
        Just(r#""creditor_key""#.to_owned()),
        Just(r#""currency""#.to_owned()),
        Just(r#""remittance""#.to_owned()),
        Just(r#""trace_id""#.to_owned()),
        Just(r#""tr\u0061ce_id""#.to_owned()),
        Just(r#""request_id""#.to_owned()),
        Just(r#""sku""#.to_owned()),
        Just(r#""note""#.to_owned()),
        "\\PC{0,6}".prop_map(|s| json!(s).to_string()),
    ]
}

/// A value for a payload member: well-formed key values, anything, or deep.
fn member_value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(r#""10.50""#.to_owned()),
        2 => Just("1234.5".to_owned()),
        2 => Just(r#"" brl ""#.to_owned()),
        2 => Just(r#""123.456.789-09""#.to_owned()),
        2 => Just(r#""Pagamento de Março — Fatura""#.to_owned()),
        4 => any_json_text(),
        1 => nested_text(),
    ]
}

fn payload_text() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::collection::vec((member_name(), member_value()), 0..8).prop_map(|m| {
            let members: Vec<String> = m.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!("{{{}}}", members.join(", "))
        }),
        1 => any_json_text(),
        1 => nested_text(),
    ]
}

/// A request line: each member present or not, well-formed or not, repeated
/// or not, in any order, with unknown members beside them.
fn line_text() -> impl Strategy<Value = String> {
    let secret = prop_oneof![
        Just(json!("00".repeat(32)).to_string()),
        Just(json!("5a".repeat(32)).to_string()),
        Just(format!(r#""\u0030{}""#, "0".repeat(63))),
        Just(r#""zz""#.to_owned()),
        any_json_text(),
    ];
    let text = prop_oneof![
        3 => Just(r#""t1""#.to_owned()),
        1 => Just(r#""t\u0031""#.to_owned()),
        1 => Just(r#""""#.to_owned()),
        1 => any_json_text(),
    ];
    let epoch = prop_oneof![
        3 => Just("1700000123".to_owned()),
        1 => Just("-901".to_owned()),
        1 => Just("1.5".to_owned()),
        1 => Just("99999999999999999999".to_owned()),
        1 => any_json_text(),
    ];
    let member = |name: &'static str, value: BoxedStrategy<String>| {
        prop::option::weighted(0.9, value).prop_map(move |v| v.map(|v| format!(r#""{name}":{v}"#)))
    };
    (
        member("id", any_json_text().boxed()),
        member("secret_hex", secret.boxed()),
        member("tenant_id", text.clone().boxed()),
        member("action_type", text.boxed()),
        member("intent_epoch", epoch.boxed()),
        member("payload", payload_text().boxed()),
        prop::option::of((member_name(), any_json_text())),
        any::<prop::sample::Index>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(id, secret, tenant, action, epoch, payload, extra, at, repeat, shuffle)| {
                let mut members: Vec<String> = [id, secret, tenant, action, epoch, payload]
                    .into_iter()
                    .flatten()
                    .collect();
                if repeat && !members.is_empty() {
                    // A repeated member, first with another value: the first copy
                    // must lose. (Each of these names is `"name":` plain.)
                    let i = at.index(members.len());
                    let name = members[i]
                        .split_once("\":")
                        .map(|(n, _)| n.to_owned())
                        .unwrap();
                    members.insert(0, format!("{name}\":[0]"));
                }
                if let Some((k, v)) = extra {
                    members.push(format!("{k}:{v}"));
                }
                if shuffle {
                    members.reverse();
                }
                format!("{{{}}}", members.join(","))
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn a_line_answers_as_its_whole_value_does(line in line_text()) {
        let policy = Policy::default();
        let mut answerer = RequestAnswerer::new(policy.clone());
        prop_assert_eq!(answerer.answer_line(&line), whole_value_answer(&policy, &line), "{}", line);
    }

    #[test]
    fn any_text_answers_as_its_whole_value_does(line in prop_oneof![any::<String>(), any_json_text(), nested_text()]) {
        let policy = Policy::default();
        let mut answerer = RequestAnswerer::new(policy.clone());
        prop_assert_eq!(answerer.answer_line(&line), whole_value_answer(&policy, &line));
    }
}

/// The key of payload text read by `Payload::from_json_for_key`, or its
/// error, as from `Payload::from_json` (and with it `derive`).
fn key_for_key_reader(policy: &Policy, text: &str) -> (String, String) {
    let deriver = Deriver::new(&Secret::new([9; 32]).unwrap(), policy.clone());
    let key = |read: intentkey::Result<Payload>| {
        let outcome = read.and_then(|payload| {
            deriver.derive(&Intent {
                tenant_id: "t1",
                action_type: "order.create",
                payload: &payload,
                intent_epoch: 0,
            })
        });
        match outcome {
            Ok(key) => key.as_str().to_owned(),
            Err(e) => format!("{} {:?} {}", e.code().as_str(), e.field_name(), e.message()),
        }
    };
    (
        key(Payload::from_json_for_key(text, policy)),
        key(Payload::from_json(text)),
    )
}

/// A policy with fingerprint and ignored fields beside its key fields.
fn custom_policy() -> Policy {
    Policy::from_json(
        r#"{"version":1,"fields":{
            "amount":{"class":"key","normalizer":"decimal"},
            "currency":{"class":"key","normalizer":"currency"},
            "creditor_key":{"class":"fingerprint"},
            "remittance":{"class":"ignored"}}}"#,
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn a_payload_read_for_the_key_keys_as_read_whole(
        text in prop_oneof![payload_text(), any_json_text(), nested_text(), any::<String>()],
    ) {
        for policy in [Policy::default(), custom_policy()] {
            let (for_key, whole) = key_for_key_reader(&policy, &text);
            prop_assert_eq!(for_key, whole, "{}", text);
        }
    }
}

/// The same under a policy with fingerprint fields and a closed action set.
#[test]
fn a_custom_policy_answers_as_its_whole_value_does() {
    let policy = Policy::from_json(
        r#"{"version":1,"actionTypes":["order.create"],"fields":{
            "sku":{"class":"key","normalizer":"exact"},
            "qty":{"class":"key","normalizer":"integer"},
            "note":{"class":"fingerprint"},
            "trace":{"class":"ignored"}}}"#,
    )
    .unwrap();
    let secret = "00".repeat(32);
    let deep = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    let lines = [
        format!(
            r#"{{"id":1,"secret_hex":"{secret}","tenant_id":"t","action_type":"order.create","payload":{{"sku":"A-1","qty":"007","note":{{"x":[1,2]}},"trace":"z"}},"intent_epoch":0}}"#
        ),
        format!(
            r#"{{"id":2,"secret_hex":"{secret}","tenant_id":"t","action_type":"order.other","payload":{{"sku":"A-1"}},"intent_epoch":0}}"#
        ),
        format!(
            r#"{{"id":3,"secret_hex":"{secret}","tenant_id":"t","action_type":"order.create","payload":{{"sku":"A-1","qty":1.5}},"intent_epoch":0}}"#
        ),
        format!(
            r#"{{"id":4,"secret_hex":"{secret}","tenant_id":"t","action_type":"order.create","payload":{{"sku":"A-1","colour":"red","size":9}},"intent_epoch":0}}"#
        ),
        format!(
            r#"{{"id":5,"secret_hex":"{secret}","tenant_id":"t","action_type":"order.create","payload":{{"sku":"A-1","note":{deep}}},"intent_epoch":0}}"#
        ),
        format!(
            r#"{{"id":6,"secret_hex":"{secret}","tenant_id":"t","action_type":"order.create","payload":{{"sku":"A-1","note":{deep},"note":1}},"intent_epoch":0}}"#
        ),
        format!(
            r#"{{"id":7,"secret_hex":"{secret}","tenant_id":"t","action_type":"order.create","payload":{{"sku":"A-1","sku":"B-2"}},"intent_epoch":0}}"#
        ),
    ];
    let mut answerer = RequestAnswerer::new(policy.clone());
    let answers: Vec<String> = lines.iter().map(|l| answerer.answer_line(l)).collect();
    for (line, answer) in lines.iter().zip(&answers) {
        assert_eq!(answer, &whole_value_answer(&policy, line), "{line}");
    }
    // The cases reach what they are about.
    assert!(answers[0].contains(r#""key":""#), "{}", answers[0]);
    assert!(answers[1].contains("unknown-action-type"), "{}", answers[1]);
    assert!(answers[2].contains("invalid-integer"), "{}", answers[2]);
    assert!(answers[3].contains("unclassified-fields"), "{}", answers[3]);
    assert!(answers[4].contains("invalid-payload"), "{}", answers[4]);
    assert!(answers[5].contains(r#""key":""#), "{}", answers[5]);
    assert_ne!(answers[6], answers[0].replace(r#""id":1"#, r#""id":7"#));
}
