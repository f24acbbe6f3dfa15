//! Journaled steps and tool calls: the keys come from the run, never from the
//! model's text; outputs are recorded once, bounded, and replayed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use hmac::{Hmac, Mac};
use intentkey::claim::{
    drive, ClaimFlow, ClaimOutcome, EffectResult, FinishFlow, Finished, MemoryClaims, Rules,
};
use intentkey::journal::{step_answer, step_output, Run, DEFAULT_MAX_OUTPUT_BYTES};
use intentkey::{ErrorCode, KeyLength, Keyer, Keyring, Payload, Policy, Secret};
use serde_json::json;
use sha2::Sha256;

const SECRET: [u8; 32] = [0x4b; 32];
const T0: i64 = 1_700_000_000;

fn tool_policy() -> Policy {
    Policy::from_json(
        r#"{"version":1,"actionTypes":["pix.send","email.send"],"fields":{
            "amount":{"class":"key","normalizer":"decimal","scale":2},
            "currency":{"class":"key","normalizer":"currency"},
            "pix_key":{"class":"key","normalizer":"pix-key"},
            "memo":{"class":"fingerprint"},
            "remittance":{"class":"ignored"}}}"#,
    )
    .unwrap()
}

fn keyer(policy: Policy) -> Keyer {
    Keyer::new(&Keyring::single(Secret::new(SECRET).unwrap()), policy)
}

const RUN: Run<'static> = Run {
    tenant_id: "acme",
    intent_id: "run-42",
    intent_epoch: T0,
};

fn hmac_hex(material: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(&SECRET).unwrap();
    mac.update(material.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_step_key_is_the_hmac_of_the_documented_material() {
    let k = keyer(Policy::default());
    let a = k
        .step_attempt(&RUN, "plan", Some(&json!({"b": 1, "a": [true, null]})))
        .unwrap();
    assert_eq!(
        a.key,
        hmac_hex(r#"["intentkey/step/v1","acme","run-42","plan"]"#)
    );
    assert_eq!(
        a.fingerprint,
        hmac_hex(r#"["intentkey/step-input/v1","acme","run-42","plan",{"a":[true,null],"b":1}]"#)
    );
    assert_eq!(a.action_type, "step:plan");
    assert_eq!(a.tenant_id, "acme");
    assert!(a.prior.is_none());
}

#[test]
fn a_step_key_depends_on_the_run_and_the_name_only() {
    let k = keyer(Policy::default());
    let plan = k.step_attempt(&RUN, "plan", None).unwrap();
    let with_input = k
        .step_attempt(&RUN, "plan", Some(&json!("prompt")))
        .unwrap();
    assert_eq!(plan.key, with_input.key, "the input is not in the key");
    assert_ne!(
        plan.fingerprint, with_input.fingerprint,
        "the input is in the fingerprint"
    );
    let others = [
        k.step_attempt(&RUN, "plan-2", None).unwrap().key,
        k.step_attempt(
            &Run {
                intent_id: "run-43",
                ..RUN
            },
            "plan",
            None,
        )
        .unwrap()
        .key,
        k.step_attempt(
            &Run {
                tenant_id: "other",
                ..RUN
            },
            "plan",
            None,
        )
        .unwrap()
        .key,
        k.intent_key("acme", "run-42", T0, KeyLength::FULL)
            .unwrap()
            .into_string(),
    ];
    for other in &others {
        assert_ne!(&plan.key, other);
    }
}

#[test]
fn a_tool_call_key_is_the_hmac_of_the_documented_material() {
    let k = keyer(tool_policy());
    let args = Payload::from_json(
        r#"{"amount":"150","currency":"brl","pix_key":"Ana@Example.com","memo":"x","remittance":"Rent"}"#,
    )
    .unwrap();
    let a = k.tool_call_attempt(&RUN, "pix.send", &args).unwrap();
    assert_eq!(
        a.key,
        hmac_hex(
            r#"["intentkey/tool-call/v1","acme","pix.send","run-42",{"amount":"150.00","currency":"BRL","pix_key":"ana@example.com"}]"#
        )
    );
    assert_eq!(
        a.fingerprint,
        k.fingerprint("acme", "pix.send", &args, T0)
            .unwrap()
            .as_str()
    );
    assert_eq!(a.action_type, "pix.send");
}

#[test]
fn the_models_text_never_reaches_a_tool_call_key() {
    let k = keyer(tool_policy());
    let sample = |text: &str| {
        Payload::from_json(&format!(
            r#"{{"remittance":{text:?},"pix_key":"ana@example.com","currency":"BRL","amount":150.0}}"#
        ))
        .unwrap()
    };
    let first = k
        .tool_call_attempt(&RUN, "pix.send", &sample("Rent for March"))
        .unwrap();
    let resampled = k
        .tool_call_attempt(&RUN, "pix.send", &sample("march rent, thanks!"))
        .unwrap();
    assert_eq!(first, resampled, "same action, resampled text: one attempt");

    let other_run = k
        .tool_call_attempt(
            &Run {
                intent_id: "run-43",
                ..RUN
            },
            "pix.send",
            &sample("Rent for March"),
        )
        .unwrap();
    assert_ne!(first.key, other_run.key, "two runs never collide");
    let other_amount = Payload::from_json(
        r#"{"remittance":"Rent for March","pix_key":"ana@example.com","currency":"BRL","amount":"151"}"#,
    )
    .unwrap();
    assert_ne!(
        first.key,
        k.tool_call_attempt(&RUN, "pix.send", &other_amount)
            .unwrap()
            .key,
        "another action: another key"
    );
}

#[test]
fn a_tool_call_the_policy_does_not_allow_is_refused_naming_what() {
    let k = keyer(tool_policy());
    let invented = Payload::from_json(
        r#"{"amount":"1","currency":"BRL","pix_key":"a@b.c","tool_call_id":"call_9"}"#,
    )
    .unwrap();
    let e = k
        .tool_call_attempt(&RUN, "pix.send", &invented)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::UnclassifiedFields);
    assert!(e.message().contains("tool_call_id"), "{e}");

    let ok = Payload::from_json(r#"{"amount":"1","currency":"BRL","pix_key":"a@b.c"}"#).unwrap();
    let e = k.tool_call_attempt(&RUN, "wire.send", &ok).unwrap_err();
    assert_eq!(e.code(), ErrorCode::UnknownActionType);

    let bad =
        Payload::from_json(r#"{"amount":"lots","currency":"BRL","pix_key":"a@b.c"}"#).unwrap();
    let e = k.tool_call_attempt(&RUN, "pix.send", &bad).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidDecimal);
    assert_eq!(e.field_name(), Some("amount"));

    let e = k
        .tool_call_attempt(
            &Run {
                intent_id: "",
                ..RUN
            },
            "pix.send",
            &ok,
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidIntentId);
}

#[test]
fn step_names_and_outputs_are_checked() {
    let k = keyer(Policy::default());
    for bad in ["", "a\nb", &"x".repeat(201)] {
        let e = k.step_attempt(&RUN, bad, None).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidStepName, "{bad:?}");
        assert_eq!(e.field_name(), Some("step"));
    }
    assert!(k.step_attempt(&RUN, &"x".repeat(200), None).is_ok());
    let e = k
        .step_attempt(
            &Run {
                tenant_id: "",
                ..RUN
            },
            "plan",
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidTenantId);

    let ok = step_output("plan", r#"{"text":"hi"}"#, 64).unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(ok.content_type, "application/json");
    assert_eq!(ok.body, br#"{"text":"hi"}"#);

    let e = step_output("plan", "{not json", 64).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidStepOutput);
    assert!(e.message().contains("`plan`"), "{e}");

    let big = format!("\"{}\"", "a".repeat(DEFAULT_MAX_OUTPUT_BYTES));
    let e = step_output("draft", &big, DEFAULT_MAX_OUTPUT_BYTES).unwrap_err();
    assert_eq!(e.code(), ErrorCode::StepOutputTooLarge);
    assert!(
        e.message().contains("`draft`") && e.message().contains("1048578 bytes"),
        "{e}"
    );
    assert!(
        e.message().len() < 300,
        "the message does not quote the output"
    );
}

/// A step through the one claim flow: the first attempt owns it, records the
/// output; a concurrent attempt is told to wait; a retry replays; another
/// input is refused.
#[test]
fn a_step_is_recorded_once_and_replayed() {
    let k = keyer(Policy::default());
    let mut store = MemoryClaims::default();
    let no_destination = &mut |_: &str| unreachable!();
    let prompt = json!({"prompt": "pay the rent"});
    let plan = k.step_attempt(&RUN, "plan", Some(&prompt)).unwrap();

    let first = drive(
        ClaimFlow::new(&plan, "owner-a", T0),
        &mut store,
        no_destination,
    )
    .unwrap();
    assert_eq!(step_answer("plan", &first).unwrap(), None, "owned: run it");

    let concurrent = drive(
        ClaimFlow::new(&plan, "owner-b", T0),
        &mut store,
        no_destination,
    )
    .unwrap();
    let e = step_answer("plan", &concurrent).unwrap_err();
    assert_eq!(e.code(), ErrorCode::StepInFlight);

    let output = step_output("plan", r#"{"sample":1}"#, DEFAULT_MAX_OUTPUT_BYTES).unwrap();
    let finished = drive(
        FinishFlow::new(
            &plan.key,
            "owner-a",
            EffectResult::Answered(output),
            T0 + 1,
            &Rules::default(),
        ),
        &mut store,
        no_destination,
    )
    .unwrap();
    assert_eq!(finished, Finished::Stored);

    let retry = drive(
        ClaimFlow::new(&plan, "owner-c", T0 + 9),
        &mut store,
        no_destination,
    )
    .unwrap();
    assert_eq!(
        step_answer("plan", &retry).unwrap().as_deref(),
        Some(r#"{"sample":1}"#)
    );

    let changed = k
        .step_attempt(&RUN, "plan", Some(&json!({"prompt": "pay twice"})))
        .unwrap();
    let conflict = drive(
        ClaimFlow::new(&changed, "owner-d", T0 + 9),
        &mut store,
        no_destination,
    )
    .unwrap();
    assert!(matches!(conflict, ClaimOutcome::PayloadConflict));
    assert_eq!(
        step_answer("plan", &conflict).unwrap_err().code(),
        ErrorCode::StepInputChanged
    );
    assert_eq!(store.records().len(), 1);
}

#[test]
fn a_rotation_never_rekeys_a_run() {
    let old = Secret::new(SECRET).unwrap();
    let rotated = Keyer::new(
        &Keyring::new(vec![
            ("a".into(), 0, old),
            ("b".into(), T0 + 100, Secret::new([0x77; 32]).unwrap()),
        ])
        .unwrap(),
        tool_policy(),
    );
    let single = keyer(tool_policy());
    let args = Payload::from_json(r#"{"amount":"1","currency":"BRL","pix_key":"a@b.c"}"#).unwrap();
    assert_eq!(
        rotated.step_attempt(&RUN, "plan", None).unwrap(),
        single.step_attempt(&RUN, "plan", None).unwrap()
    );
    assert_eq!(
        rotated.tool_call_attempt(&RUN, "pix.send", &args).unwrap(),
        single.tool_call_attempt(&RUN, "pix.send", &args).unwrap()
    );
    let later = Run {
        intent_epoch: T0 + 100,
        ..RUN
    };
    assert_ne!(
        rotated.step_attempt(&later, "plan", None).unwrap().key,
        single.step_attempt(&later, "plan", None).unwrap().key,
        "a run recorded after the rotation is keyed with the new secret"
    );
}
