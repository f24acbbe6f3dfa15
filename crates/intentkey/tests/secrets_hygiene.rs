//! Secrets hygiene: every public type that holds a secret (or an HMAC keyed
//! with one) prints redacted `Debug`, in both `{:?}` and `{:#?}`, and no error
//! or answer made from bad input ever carries the secret.
//!
//! (`properties.rs` has the first, smaller version of this check; this file
//! covers every such type and every path a secret takes through the core.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::{
    Deriver, Error, Intent, KeyLength, Payload, Policy, RequestAnswerer, Secret, MIN_SECRET_LEN,
};

/// Recognizable secrets: 0x5c repeated (ASCII `\`, so a byte string leak
/// shows as backslashes) and a pattern that is not ASCII.
fn secrets() -> Vec<Vec<u8>> {
    vec![vec![0x5c; MIN_SECRET_LEN], [0x5e, 0xc2, 0xe7].repeat(16)]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every rendering of `secret` that a leak could take.
fn renderings(secret: &[u8]) -> Vec<String> {
    let lower = hex(secret);
    let upper = lower.to_uppercase();
    let four: Vec<String> = secret[..4].iter().map(u8::to_string).collect();
    vec![
        // Hex, whole and as any 8-digit window (a truncated or sliced copy).
        lower.clone(),
        upper.clone(),
        lower[..8].to_owned(),
        lower[2..10].to_owned(),
        upper[..8].to_owned(),
        format!("0x{:02x}, 0x{:02x}", secret[0], secret[1]),
        // The bytes' own Debug renderings, flat and pretty.
        format!("{secret:?}"),
        four.join(", "),
        four.join(",\n"),
        format!("{},\n    {},", secret[0], secret[1]),
        // The bytes read as text (lossy), and that text's Debug.
        String::from_utf8_lossy(secret).into_owned(),
        format!("{:?}", String::from_utf8_lossy(&secret[..8]))
            .trim_matches('"')
            .to_owned(),
    ]
}

fn assert_hidden(what: &str, shown: &str, secret: &[u8]) {
    for leak in renderings(secret) {
        assert!(
            !shown.contains(&leak),
            "{what} shows the secret (as {leak:?}):\n{shown}"
        );
    }
}

fn assert_debug_hidden<T: std::fmt::Debug>(what: &str, value: &T, secret: &[u8]) {
    assert_hidden(what, &format!("{value:?}"), secret);
    assert_hidden(what, &format!("{value:#?}"), secret);
}

fn assert_error_hidden(what: &str, error: &Error, secret: &[u8]) {
    assert_debug_hidden(what, error, secret);
    assert_hidden(what, &error.to_string(), secret);
    assert_hidden(what, error.message(), secret);
    if let Some(field) = error.field_name() {
        assert_hidden(what, field, secret);
    }
}

fn line(secret_hex: &str, payload: &str) -> String {
    format!(
        r#"{{"id":1,"secret_hex":"{secret_hex}","tenant_id":"t1","action_type":"pix.send","payload":{payload},"intent_epoch":1700000000}}"#
    )
}

#[test]
fn the_renderings_catch_a_plain_leak() {
    // The checks above would see a derived Debug of the bytes or of their hex.
    for secret in secrets() {
        for leak in [
            format!("{secret:?}"),
            format!("{secret:#?}"),
            format!("{:?}", hex(&secret)),
            format!("{:?}", String::from_utf8_lossy(&secret)),
        ] {
            assert!(
                renderings(&secret)
                    .iter()
                    .any(|r| leak.contains(r.as_str())),
                "{leak}"
            );
        }
    }
}

#[test]
fn secret_debug_is_redacted() {
    for bytes in secrets() {
        let from_bytes = Secret::new(bytes.clone()).unwrap();
        let from_hex = Secret::from_hex(&hex(&bytes)).unwrap();
        let from_upper = Secret::from_hex(&hex(&bytes).to_uppercase()).unwrap();
        for secret in [&from_bytes, &from_hex, &from_upper, &from_bytes.clone()] {
            assert_debug_hidden("Secret", secret, &bytes);
            assert_eq!(
                format!("{secret:?}"),
                "Secret(32 bytes, redacted)".replace("32", &bytes.len().to_string())
            );
        }
    }
}

#[test]
fn deriver_debug_is_redacted() {
    for bytes in secrets() {
        let secret = Secret::new(bytes.clone()).unwrap();
        let closed = Policy::from_json(
            r#"{"version":1,"actionTypes":["pix.send"],"keyHexLength":40,"fields":{"amount":{"class":"key","normalizer":"decimal","scale":2,"rounding":"half-up"}}}"#,
        )
        .unwrap();
        for deriver in [
            Deriver::new(&secret, Policy::default()),
            Deriver::new(&secret, closed),
        ] {
            assert_debug_hidden("Deriver", &deriver, &bytes);
            assert_debug_hidden("a cloned Deriver", &deriver.clone(), &bytes);
            assert!(format!("{deriver:?}").contains("redacted"));
            // Its outputs are HMACs, never the secret.
            let payload = Payload::from_json(r#"{"amount":"1.00"}"#).unwrap();
            let intent = Intent {
                tenant_id: "t1",
                action_type: "pix.send",
                payload: &payload,
                intent_epoch: 0,
            };
            assert_hidden("a key", deriver.derive(&intent).unwrap().as_str(), &bytes);
            let material = String::from_utf8(deriver.material(&intent).unwrap()).unwrap();
            assert_hidden("a material", &material, &bytes);
            let fp = deriver.fingerprint("t1", "pix.send", &payload).unwrap();
            assert_debug_hidden("a fingerprint", &fp, &bytes);
            let key = deriver
                .intent_key("t1", "intent-1", KeyLength::FULL)
                .unwrap();
            assert_debug_hidden("an intent key", &key, &bytes);
        }
    }
}

#[test]
fn request_answerer_debug_is_redacted_and_counts_cached_secrets() {
    for bytes in secrets() {
        let mut answerer = RequestAnswerer::new(Policy::default());
        assert!(
            format!("{answerer:?}").contains("cached_secrets: 0"),
            "{answerer:?}"
        );
        let answer = answerer.answer(&line(&hex(&bytes), r#"{"amount":"10.50"}"#));
        assert!(answer.outcome.is_ok(), "{answer:?}");
        assert_debug_hidden("Answer", &answer, &bytes);
        assert_hidden("an answer line", &answer.to_line(), &bytes);
        assert_debug_hidden("RequestAnswerer", &answerer, &bytes);
        assert!(
            format!("{answerer:?}").contains("cached_secrets: 1"),
            "{answerer:?}"
        );
        // The same secret in upper case, then a bad line: the cache still holds one.
        answerer.answer_line(&line(&hex(&bytes).to_uppercase(), r#"{"amount":"1"}"#));
        answerer.answer_line("not json");
        assert_debug_hidden("RequestAnswerer after more lines", &answerer, &bytes);
        assert!(
            format!("{answerer:#?}").contains("cached_secrets: 1"),
            "{answerer:#?}"
        );
    }
}

#[test]
fn errors_from_a_bad_secret_never_carry_it() {
    for bytes in secrets() {
        let good = hex(&bytes);
        let mut bad_hex = vec![
            format!("{good}zz"),
            format!("{good}5"),
            format!("{}x", &good[..good.len() - 1]),
            format!("zz{good}"),
            format!(" {good}"),
            format!("{good} "),
            format!("0x{good}"),
            good[..40].to_owned(),
            good.to_uppercase()[..62].to_owned(),
            good[..good.len() - 1].to_owned(),
        ];
        // Non-ASCII in the middle (a multi-byte char splits a hex pair).
        bad_hex.push(format!("{}é{}", &good[..20], &good[20..]));
        for bad in &bad_hex {
            let e = Secret::from_hex(bad).unwrap_err();
            assert_error_hidden(&format!("Secret::from_hex({bad:?})"), &e, &bytes);
        }
        for short in [&bytes[..MIN_SECRET_LEN - 1], &bytes[..8], &[][..]] {
            let e = Secret::new(short.to_vec()).unwrap_err();
            assert_eq!(e.code().as_str(), "secret-too-short");
            assert_error_hidden("Secret::new(short)", &e, &bytes);
        }
    }
}

#[test]
fn answers_to_bad_lines_never_carry_the_secret() {
    for bytes in secrets() {
        let good = hex(&bytes);
        let mut answerer = RequestAnswerer::new(Policy::default());
        let lines = vec![
            // Bad secrets.
            line(&format!("{good}zz"), r#"{"amount":"1"}"#),
            line(&good[..40], r#"{"amount":"1"}"#),
            line(&good[..good.len() - 1], r#"{"amount":"1"}"#),
            format!(
                r#"{{"id":1,"secret_hex":["{good}"],"tenant_id":"t1","action_type":"a","payload":{{}},"intent_epoch":0}}"#
            ),
            format!(
                r#"{{"id":1,"secret":"{good}","tenant_id":"t1","action_type":"a","payload":{{}},"intent_epoch":0}}"#
            ),
            // A good secret with every other member wrong.
            line(&good, r#"{"amount":"x"}"#),
            line(&good, r#"{"amount":"1","mystery":"y"}"#),
            line(&good, r#"[1]"#),
            line(&good, r#"{"currency":"EURO"}"#),
            line(&good, r#"{"creditor_key":"..."}"#),
            format!(
                r#"{{"id":1,"secret_hex":"{good}","tenant_id":"","action_type":"a","payload":{{}},"intent_epoch":0}}"#
            ),
            format!(
                r#"{{"id":1,"secret_hex":"{good}","tenant_id":"t","action_type":7,"payload":{{}},"intent_epoch":0}}"#
            ),
            format!(
                r#"{{"id":1,"secret_hex":"{good}","tenant_id":"t","action_type":"a","payload":{{}},"intent_epoch":1.5}}"#
            ),
            format!(
                r#"{{"id":1,"secret_hex":"{good}","tenant_id":"t","action_type":"a","intent_epoch":0}}"#
            ),
            // Broken JSON around the secret: the parser's message quotes no input.
            format!(r#"{{"id":1,"secret_hex":"{good}"#),
            format!(r#"{{"id":1,"secret_hex":"{good}",,}}"#),
            format!(r#"{{"id":1,"secret_hex":{good}}}"#),
            format!(r#"["{good}"]"#),
            format!(r#""{good}""#),
        ];
        for l in &lines {
            let answer = answerer.answer(l);
            let e = answer
                .outcome
                .as_ref()
                .err()
                .unwrap_or_else(|| panic!("{l} was answered with a key"));
            assert_error_hidden(&format!("the answer to {l}"), e, &bytes);
            assert_hidden(
                &format!("the answer line to {l}"),
                &answer.to_line(),
                &bytes,
            );
            assert_debug_hidden(&format!("the answerer after {l}"), &answerer, &bytes);
        }
    }
}

#[test]
fn policy_errors_never_carry_a_secret_given_as_a_policy() {
    // A secret pasted where a policy belongs is not echoed back.
    for bytes in secrets() {
        let good = hex(&bytes);
        for doc in [
            good.clone(),
            format!(r#""{good}""#),
            format!(r#"{{"version":1,"fields":{{"amount":{{"class":"{good}"}}}}}}"#),
            format!(r#"{{"version":1,"name":1,"keyHexLength":"{good}"}}"#),
            format!(r#"{{"version":"{good}"}}"#),
        ] {
            if let Err(e) = Policy::from_json(&doc) {
                // Field names are policy paths; the message must not quote values.
                assert_hidden(&format!("the policy error for {doc}"), e.message(), &bytes);
            }
        }
    }
}
