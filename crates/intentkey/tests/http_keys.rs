//! The key header of each profile, and the tenant-scoped storage key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::http::{
    storage_key, storage_key_material, ClientKey, KeyError, KeyErrorReason, Options, Profile,
    CLIENT_KEY_LABEL,
};
use intentkey::{Deriver, KeyLength, Policy, Secret, FINGERPRINT_LABEL, INTENT_HMAC_LABEL};

fn parse(options: &Options, value: &str) -> Result<ClientKey, KeyError> {
    options.client_key([(options.profile.header_name(), value)])
}

fn reason(options: &Options, value: &str) -> KeyErrorReason {
    match parse(options, value) {
        Ok(key) => panic!("{value:?} was accepted as {key:?}"),
        Err(e) => e.reason(),
    }
}

/// `ietf` with strict key syntax: only RFC 8941 sf-strings.
fn strict_ietf() -> Options {
    Options {
        strict_key_syntax: true,
        ..Options::new(Profile::Ietf)
    }
}

/// What each profile makes of the same header values: `Ok(key)` or the reason.
#[test]
fn each_profile_reads_its_own_syntax() {
    let ietf = strict_ietf();
    let bare = Options::new(Profile::Ietf);
    let stripe = Options::new(Profile::Stripe);
    let ofb = Options::new(Profile::Ofb);
    use KeyErrorReason::{Invalid, Missing};
    type Want = Result<&'static str, KeyErrorReason>;
    let cases: &[(&str, Want, Want, Want, Want)] = &[
        // value, ietf strict, ietf (default: bare or quoted), stripe, ofb
        (
            r#""abc""#,
            Ok("abc"),
            Ok("abc"),
            Ok(r#""abc""#),
            Ok(r#""abc""#),
        ),
        ("abc", Err(Invalid), Ok("abc"), Ok("abc"), Ok("abc")),
        (
            "8e03978e-40d5-43e8-bc93-6894a57f9324",
            Err(Invalid),
            Ok("8e03978e-40d5-43e8-bc93-6894a57f9324"),
            Ok("8e03978e-40d5-43e8-bc93-6894a57f9324"),
            Ok("8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ),
        (
            r#""a\"b\\c""#,
            Ok(r#"a"b\c"#),
            Ok(r#"a"b\c"#),
            Ok(r#""a\"b\\c""#),
            Ok(r#""a\"b\\c""#),
        ),
        (
            "  \"x y\"\t",
            Ok("x y"),
            Ok("x y"),
            Ok("\"x y\""),
            Ok("\"x y\""),
        ),
        ("a b", Err(Invalid), Err(Invalid), Ok("a b"), Ok("a b")),
        ("", Err(Missing), Err(Missing), Err(Missing), Err(Missing)),
        (
            "   ",
            Err(Missing),
            Err(Missing),
            Err(Missing),
            Err(Missing),
        ),
        (
            r#""""#,
            Err(Missing),
            Err(Missing),
            Ok(r#""""#),
            Ok(r#""""#),
        ),
        (
            r#""a""b""#,
            Err(Invalid),
            Err(Invalid),
            Ok(r#""a""b""#),
            Ok(r#""a""b""#),
        ),
        (
            r#""a", "b""#,
            Err(Invalid),
            Err(Invalid),
            Ok(r#""a", "b""#),
            Ok(r#""a", "b""#),
        ),
        (
            r#""a\x""#,
            Err(Invalid),
            Err(Invalid),
            Ok(r#""a\x""#),
            Ok(r#""a\x""#),
        ),
        (
            r#""open"#,
            Err(Invalid),
            Err(Invalid),
            Ok(r#""open"#),
            Ok(r#""open"#),
        ),
    ];
    for (value, want_ietf, want_bare, want_stripe, want_ofb) in cases {
        for (options, want) in [
            (&ietf, want_ietf),
            (&bare, want_bare),
            (&stripe, want_stripe),
            (&ofb, want_ofb),
        ] {
            let got = parse(options, value);
            let got = got
                .as_ref()
                .map(ClientKey::as_str)
                .map_err(KeyError::reason);
            assert_eq!(got, *want, "{} {value:?}", options.profile);
        }
    }
}

#[test]
fn control_characters_and_non_ascii_are_refused_in_every_profile() {
    for options in [
        strict_ietf(),
        Options::new(Profile::Ietf),
        Options::new(Profile::Stripe),
        Options::new(Profile::Ofb),
    ] {
        let quote = |s: &str| {
            if options.profile == Profile::Ietf {
                format!("\"{s}\"")
            } else {
                s.to_owned()
            }
        };
        for bad in [
            "a\u{0}b", "a\u{1}b", "a\nb", "a\rb", "a\u{7f}b", "ação", "ключ", "😀",
        ] {
            let error = parse(&options, &quote(bad)).unwrap_err();
            assert_eq!(error.reason(), KeyErrorReason::Invalid, "{bad:?}");
        }
        // A tab inside is a control character; around the value it is whitespace.
        assert_eq!(reason(&options, &quote("a\tb")), KeyErrorReason::Invalid);
        // Raw bytes beyond ASCII (obs-text) are refused too.
        let error = options
            .client_key([(options.profile.header_name().as_bytes(), &b"abc\xff"[..])])
            .unwrap_err();
        assert_eq!(error.reason(), KeyErrorReason::Invalid);
        assert!(
            error.message().contains("beyond ASCII"),
            "{}",
            error.message()
        );
    }
}

#[test]
fn messages_name_the_header_and_never_repeat_the_value() {
    let secret_looking = "sk_live_do_not_echo\u{1b}[31m";
    for options in [
        strict_ietf(),
        Options::new(Profile::Stripe),
        Options::new(Profile::Ofb),
    ] {
        for value in [
            secret_looking.to_owned(),
            format!("\"{secret_looking}\""),
            "do_not_echo".repeat(1_000),
            format!("\"{}\"", "do_not_echo".repeat(1_000)),
        ] {
            let error = parse(&options, &value).unwrap_err();
            let message = error.message();
            assert!(!message.contains("do_not_echo"), "{message}");
            assert!(!message.contains('\u{1b}'), "{message}");
            assert!(
                message.contains(&format!("`{}`", options.profile.header_name())),
                "{message}"
            );
            assert!(message.contains("send"), "{message}");
            assert_eq!(error.header(), options.profile.header_name());
            assert_eq!(error.to_string(), format!("{}: {message}", error.code()));
        }
    }
}

#[test]
fn lengths_up_to_the_profile_maximum() {
    for (options, max) in [
        (strict_ietf(), 255),
        (Options::new(Profile::Ietf), 255),
        (Options::new(Profile::Stripe), 255),
        (Options::new(Profile::Ofb), 40),
    ] {
        let quote = |s: String| {
            if options.profile == Profile::Ietf {
                format!("\"{s}\"")
            } else {
                s
            }
        };
        assert_eq!(options.profile.max_key_len(), max);
        assert_eq!(
            parse(&options, &quote("k".repeat(max)))
                .unwrap()
                .as_str()
                .len(),
            max
        );
        assert_eq!(
            parse(&options, &quote("k".to_owned())).unwrap().as_str(),
            "k"
        );
        for long in [max + 1, 10_000] {
            let error = parse(&options, &quote("k".repeat(long))).unwrap_err();
            assert_eq!(error.reason(), KeyErrorReason::TooLong, "{long}");
            assert_eq!(error.code(), "idempotency-key-too-long");
            assert!(
                error.message().contains(&format!("{long} characters")),
                "{}",
                error.message()
            );
            assert!(
                error.message().contains(&format!("at most {max}")),
                "{}",
                error.message()
            );
        }
    }
    // strict ietf: a long unquoted value is simply not a quoted string.
    assert_eq!(
        reason(&strict_ietf(), &"k".repeat(10_000)),
        KeyErrorReason::Invalid
    );
}

#[test]
fn header_names_match_case_insensitively_and_other_headers_are_ignored() {
    let ietf = strict_ietf();
    for name in [
        "Idempotency-Key",
        "idempotency-key",
        "IDEMPOTENCY-KEY",
        "iDeMpOtEnCy-KeY",
    ] {
        assert_eq!(
            ietf.client_key([("Accept", "*/*"), (name, "\"k\"")])
                .unwrap()
                .as_str(),
            "k"
        );
    }
    let ofb = Options::new(Profile::Ofb);
    assert_eq!(
        ofb.client_key([("X-Idempotency-Key", "k")])
            .unwrap()
            .as_str(),
        "k"
    );
    // Each profile reads only its own header.
    let error = ofb.client_key([("Idempotency-Key", "k")]).unwrap_err();
    assert_eq!(error.reason(), KeyErrorReason::Missing);
    assert_eq!(error.header(), "x-idempotency-key");
    assert_eq!(
        Options::new(Profile::Stripe)
            .client_key([("x-idempotency-key", "k")])
            .unwrap_err()
            .reason(),
        KeyErrorReason::Missing
    );
    assert_eq!(
        ietf.client_key(Vec::<(String, String)>::new())
            .unwrap_err()
            .code(),
        "idempotency-key-missing"
    );
}

#[test]
fn a_header_sent_more_than_once_is_invalid_even_if_the_values_agree() {
    for options in [
        strict_ietf(),
        Options::new(Profile::Stripe),
        Options::new(Profile::Ofb),
    ] {
        let name = options.profile.header_name();
        let value = if options.profile == Profile::Ietf {
            "\"k\""
        } else {
            "k"
        };
        for headers in [
            vec![(name.to_owned(), value), (name.to_ascii_uppercase(), value)],
            vec![
                (name.to_owned(), value),
                (name.to_owned(), ""),
                (name.to_owned(), value),
            ],
        ] {
            let error = options.client_key(headers.clone()).unwrap_err();
            assert_eq!(error.reason(), KeyErrorReason::Invalid);
            assert!(
                error
                    .message()
                    .contains(&format!("sent {} times", headers.len())),
                "{}",
                error.message()
            );
        }
        // Values only, as an adapter that already picked the header passes them.
        assert_eq!(
            options
                .client_key_from_values([value, value])
                .unwrap_err()
                .reason(),
            KeyErrorReason::Invalid
        );
    }
}

#[test]
fn profiles_and_reasons_have_stable_names() {
    let names: Vec<_> = Profile::ALL.iter().map(|p| p.as_str()).collect();
    assert_eq!(names, ["ietf", "stripe", "ofb"]);
    for profile in Profile::ALL {
        assert_eq!(Profile::parse(profile.as_str()), Some(profile));
        assert_eq!(profile.to_string(), profile.as_str());
    }
    let reasons: Vec<_> = KeyErrorReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "idempotency-key-missing",
            "idempotency-key-invalid",
            "idempotency-key-too-long"
        ]
    );
}

fn secret() -> Secret {
    Secret::new([7u8; 32]).unwrap()
}

fn key(value: &str) -> ClientKey {
    Options::new(Profile::Stripe)
        .client_key_from_values([value])
        .unwrap()
}

#[test]
fn storage_keys_are_stable_hmacs_of_the_labelled_material() {
    let material = storage_key_material("tenant-a", &key("order-42")).unwrap();
    assert_eq!(
        String::from_utf8(material).unwrap(),
        r#"["intentkey/client-key/v1","tenant-a","order-42"]"#
    );
    // HMAC-SHA256 of that material under 32 bytes of 0x07, computed independently
    // (Python: hmac.new(bytes([7])*32, material, hashlib.sha256).hexdigest()).
    assert_eq!(
        storage_key(&secret(), "tenant-a", &key("order-42"))
            .unwrap()
            .as_str(),
        "2926d7e537d7e92ff890f860f35fc6aab2321d419e663efc146d5794fa1bd36a"
    );
}

#[test]
fn two_tenants_sending_one_key_get_different_storage_keys() {
    let secret = secret();
    let k = key("abc");
    let a = storage_key(&secret, "tenant-a", &k).unwrap();
    let b = storage_key(&secret, "tenant-b", &k).unwrap();
    assert_ne!(a, b);
    assert_eq!(a, storage_key(&secret, "tenant-a", &k).unwrap());
    for key in [&a, &b] {
        assert_eq!(key.as_str().len(), 64);
        assert!(key
            .as_str()
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert!(!key.as_str().contains("abc"));
    }
    // Neither the tenant nor the key can slide into the other.
    assert_ne!(
        storage_key(&secret, "t", &key("ab,c")).unwrap(),
        storage_key(&secret, "t\",\"ab", &key("c")).unwrap()
    );
    // Another secret, another key.
    let other = Secret::new([8u8; 32]).unwrap();
    assert_ne!(a, storage_key(&other, "tenant-a", &k).unwrap());
}

#[test]
fn a_quoted_and_a_bare_spelling_of_one_key_share_the_storage_key() {
    let secret = secret();
    let quoted = parse(&strict_ietf(), r#""abc""#).unwrap();
    let bare = parse(&Options::new(Profile::Ietf), "abc").unwrap();
    assert_eq!(
        storage_key(&secret, "t", &quoted).unwrap(),
        storage_key(&secret, "t", &bare).unwrap()
    );
}

#[test]
fn storage_keys_are_domain_separated_from_intent_keys() {
    let secret = secret();
    let deriver = Deriver::new(&secret, Policy::default());
    assert_ne!(
        storage_key(&secret, "t1", &key("intent-1")).unwrap(),
        deriver
            .intent_key("t1", "intent-1", KeyLength::FULL)
            .unwrap()
    );
    let labels = [CLIENT_KEY_LABEL, INTENT_HMAC_LABEL, FINGERPRINT_LABEL];
    assert_eq!(
        labels
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3
    );
}

#[test]
fn an_empty_tenant_is_refused() {
    let error = storage_key(&secret(), "", &key("k")).unwrap_err();
    assert_eq!(error.code().as_str(), "invalid-tenant-id");
}
