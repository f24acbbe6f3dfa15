//! The request fingerprint: RFC 8785 (JCS) for JSON, checked against the
//! RFC's own examples; form pairs; raw bytes; a route's policy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::http::{
    canonical_body, canonical_json, request_fingerprint, request_fingerprint_material, BodyKind,
    Request, CLIENT_KEY_LABEL, REQUEST_FINGERPRINT_LABEL,
};
use intentkey::{Deriver, Payload, Policy, Secret, FINGERPRINT_LABEL, INTENT_HMAC_LABEL};

fn jcs(text: &str) -> String {
    String::from_utf8(canonical_json(text.as_bytes()).unwrap()).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 8785 section 3.2.2: the example object, and (section 3.2.4) its
/// canonical form as UTF-8 bytes.
#[test]
fn rfc8785_example_of_section_3_2_2() {
    let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
    let canonical = canonical_json(input.as_bytes()).unwrap();
    assert_eq!(
        String::from_utf8(canonical.clone()).unwrap(),
        r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
    );
    assert_eq!(
        hex(&canonical),
        concat!(
            "7b226c69746572616c73223a5b6e756c6c2c747275652c66616c73655d2c",
            "226e756d62657273223a5b3333333333333333332e333333333333332c31",
            "652b33302c342e352c302e3030322c31652d32375d2c22737472696e6722",
            "3a22e282ac245c75303030665c6e4127425c225c5c5c5c5c222f227d"
        )
    );
}

/// RFC 8785 section 3.2.3: members sort by UTF-16 code units, so the emoji
/// (a surrogate pair, 0xD83D…) sorts before U+FB33.
#[test]
fn rfc8785_sorting_of_section_3_2_3() {
    let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
    assert_eq!(
        jcs(input),
        "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
         \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
         \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
    );
}

/// RFC 8785 appendix B: IEEE-754 doubles (as hex) and their canonical form.
/// Each double goes in as the shortest literal that reads back to it.
#[test]
fn rfc8785_number_samples_of_appendix_b() {
    let samples = [
        ("0000000000000000", "0"),
        ("8000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("ffefffffffffffff", "-1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992"),
        ("c340000000000000", "-9007199254740992"),
        ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("44b52d02c7e14af7", "1.0000000000000001e+23"),
        ("444b1ae4d6e2ef4e", "999999999999999700000"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"),
        ("41b3de4355555554", "333333333.33333325"),
        ("41b3de4355555555", "333333333.3333333"),
        ("41b3de4355555556", "333333333.3333334"),
        ("41b3de4355555557", "333333333.33333343"),
        ("becbf647612f3696", "-0.0000033333333333333333"),
        ("43143ff3c1cb0959", "1424953923781206.2"),
    ];
    for (bits, want) in samples {
        let value = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
        // Rust's Debug form is a round-trip literal (e.g. "1.7976931348623157e308").
        let literal = format!("{value:?}");
        assert_eq!(jcs(&literal), want, "{bits} written as {literal}");
        // The expected text reads back to the same double (-0 as 0).
        assert_eq!(want.parse::<f64>().unwrap(), value, "{bits}");
    }
    // NaN and the infinities (7fffffffffffffff, 7ff0000000000000) have no JSON
    // literal; a literal that overflows to infinity is refused.
    for overflow in ["1e400", "-1e400", "[1, 2e308]"] {
        let error = canonical_json(overflow.as_bytes()).unwrap_err();
        assert_eq!(error.code().as_str(), "invalid-json", "{overflow}");
    }
}

/// The workspace parses JSON numbers with arbitrary precision: each literal
/// must still canonicalize as the double it denotes.
#[test]
fn numbers_are_doubles_whatever_the_literal() {
    for (literal, want) in [
        ("1.0", "1"),
        ("1.50", "1.5"),
        ("1e2", "100"),
        ("1E+2", "100"),
        ("100e-2", "1"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("0e10", "0"),
        ("0.1", "0.1"),
        ("-0.1", "-0.1"),
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("1e-7", "1e-7"),
        ("0.000001", "0.000001"),
        ("9007199254740993", "9007199254740992"),
        ("12345678901234567890", "12345678901234567000"),
        ("123456789012345678901234567890", "1.2345678901234568e+29"),
        ("-9223372036854775809", "-9223372036854776000"),
        ("18446744073709551616", "18446744073709552000"),
        ("0.30000000000000004", "0.30000000000000004"),
        ("5e-325", "0"),
    ] {
        assert_eq!(jcs(literal), want, "{literal}");
        assert_eq!(
            jcs(&format!("[{literal}]")),
            format!("[{want}]"),
            "{literal}"
        );
    }
}

#[test]
fn strings_keep_only_the_escapes_json_requires() {
    assert_eq!(
        jcs(r#""\/\u00e9\u2028\u007f\u001f\b\f\n\r\t\"\\\ud83d\ude00""#),
        "\"/\u{e9}\u{2028}\u{7f}\\u001f\\b\\f\\n\\r\\t\\\"\\\\\u{1f600}\""
    );
}

#[test]
fn structure_whitespace_and_member_order_do_not_matter_but_array_order_does() {
    assert_eq!(
        jcs(" { \"b\" : [ 3 , 1 ] ,\n\"a\":{\"d\":null,\"c\":true} } "),
        r#"{"a":{"c":true,"d":null},"b":[3,1]}"#
    );
    assert_ne!(jcs("[1,3]"), jcs("[3,1]"));
    // A repeated member keeps its last value, as JSON.parse does.
    assert_eq!(jcs(r#"{"a":1,"a":2}"#), r#"{"a":2}"#);
}

#[test]
fn invalid_json_under_a_json_media_type_is_an_error_not_bytes() {
    for body in [
        &b"{oops"[..],
        b"{\"a\":1} trailing",
        b"NaN",
        b"[Infinity]",
        b"\"\\ud800\"",
        b"{\"a\":\"\xff\"}",
        b"\xef\xbb\xbf{}",
        b"'single'",
    ] {
        for content_type in [
            "application/json",
            "application/problem+json; charset=utf-8",
        ] {
            let error = canonical_body(Some(content_type), body, None).unwrap_err();
            assert_eq!(error.code().as_str(), "invalid-json", "{body:?}");
            assert_eq!(error.field_name(), Some("body"));
            assert!(
                error.message().contains("not valid JSON"),
                "{}",
                error.message()
            );
        }
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let error = canonical_body(Some("application/json"), deep.as_bytes(), None).unwrap_err();
    assert_eq!(error.code().as_str(), "invalid-json");
}

fn form(body: &str) -> (BodyKind, String) {
    let (kind, bytes) = canonical_body(
        Some("application/x-www-form-urlencoded"),
        body.as_bytes(),
        None,
    )
    .unwrap();
    (kind, String::from_utf8(bytes.into_owned()).unwrap())
}

#[test]
fn forms_are_their_decoded_pairs_sorted_by_name_then_value() {
    let (kind, canonical) = form("b=2&a=z&a=%C3%A9&c=x+y%2B1&a=");
    assert_eq!(kind, BodyKind::Form);
    assert_eq!(
        canonical,
        r#"[["a",""],["a","z"],["a","é"],["b","2"],["c","x y+1"]]"#
    );
    // Same pairs, another order and encoding: the same canonical form.
    assert_eq!(form("c=x%20y%2b1&a=%c3%a9&a=&b=2&&a=z").1, canonical);
    // A value with `&` or `=` encoded stays one value.
    assert_eq!(form("q=a%26b%3Dc").1, r#"[["q","a&b=c"]]"#);
    assert_eq!(form("flag").1, r#"[["flag",""]]"#);
    // Names and values that need JSON escapes are escaped.
    assert_eq!(form("n=%22%0A").1, r#"[["n","\"\n"]]"#);
}

#[test]
fn forms_that_do_not_decode_to_utf8_are_kept_as_bytes() {
    for body in [&b"name=%E9t%E9"[..], b"name=\xe9t\xe9"] {
        let (kind, bytes) =
            canonical_body(Some("application/x-www-form-urlencoded"), body, None).unwrap();
        assert_eq!((kind, &*bytes), (BodyKind::Bytes, body));
    }
    // Two different Latin-1 bodies keep different fingerprints.
    let secret = Secret::new([1u8; 32]).unwrap();
    let request = |body: &'static [u8]| Request {
        tenant_id: "t",
        method: "POST",
        route: "/r",
        content_type: Some("application/x-www-form-urlencoded"),
        body,
    };
    assert_ne!(
        request_fingerprint(&secret, &request(b"a=%E9"), None).unwrap(),
        request_fingerprint(&secret, &request(b"a=%E8"), None).unwrap()
    );
}

#[test]
fn other_media_types_are_their_raw_bytes() {
    let binary: &[u8] = b"%PDF-1.7\n\x00\xff\xfe binary \r\n";
    for content_type in [
        Some("application/pdf"),
        Some("application/octet-stream"),
        Some("text/plain; charset=utf-8"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let (kind, bytes) = canonical_body(content_type, binary, None).unwrap();
        assert_eq!(
            (kind, &*bytes),
            (BodyKind::Bytes, binary),
            "{content_type:?}"
        );
    }
    // JSON text under another media type is not canonicalized.
    let (_, a) = canonical_body(Some("text/plain"), br#"{"a":1}"#, None).unwrap();
    let (_, b) = canonical_body(Some("text/plain"), br#"{ "a": 1 }"#, None).unwrap();
    assert_ne!(a, b);
    // An empty body is zero bytes, even under a JSON media type.
    let (kind, bytes) = canonical_body(Some("application/json"), b"", None).unwrap();
    assert_eq!((kind, bytes.len()), (BodyKind::Bytes, 0));
}

fn request<'a>(content_type: &'a str, body: &'a [u8]) -> Request<'a> {
    Request {
        tenant_id: "t1",
        method: "POST",
        route: "/orders",
        content_type: Some(content_type),
        body,
    }
}

#[test]
fn material_is_the_labelled_head_then_the_canonical_body() {
    let material = |r: &Request<'_>| request_fingerprint_material(r, None).unwrap();
    assert_eq!(
        material(&request("application/json", br#"{"sku":"A1","qty":2.0}"#)),
        br#"["intentkey/request-fingerprint/v1","t1","POST","/orders","json"]{"qty":2,"sku":"A1"}"#
    );
    assert_eq!(
        material(&request("application/x-www-form-urlencoded", b"b=1&a=2")),
        br#"["intentkey/request-fingerprint/v1","t1","POST","/orders","form"][["a","2"],["b","1"]]"#
    );
    let mut bytes =
        br#"["intentkey/request-fingerprint/v1","t1","POST","/orders","bytes"]"#.to_vec();
    bytes.extend_from_slice(b"\x00\xff");
    assert_eq!(material(&request("image/png", b"\x00\xff")), bytes);
    // The HMAC of the first material under 32 bytes of 0x07, computed
    // independently with Python's hmac module.
    let secret = Secret::new([7u8; 32]).unwrap();
    assert_eq!(
        request_fingerprint(
            &secret,
            &request("application/json", br#"{"sku":"A1","qty":2}"#),
            None
        )
        .unwrap()
        .as_str(),
        "cadad0b2476b423d726a14ebbb048a01df49ecdf1f7dc64e2925e7b3af043da9"
    );
}

#[test]
fn every_part_of_the_request_counts_and_the_method_is_uppercased() {
    let secret = Secret::new([3u8; 32]).unwrap();
    let fp = |r: Request<'_>| request_fingerprint(&secret, &r, None).unwrap();
    let base = request("application/json", br#"{"a":1}"#);
    assert_eq!(
        fp(base),
        fp(Request {
            method: "post",
            ..base
        })
    );
    assert_eq!(
        fp(base),
        fp(Request {
            body: b" {\"a\" : 1.0 }",
            ..base
        })
    );
    assert_eq!(
        fp(base),
        fp(Request {
            content_type: Some("application/json; charset=UTF-8"),
            ..base
        })
    );
    for other in [
        Request {
            tenant_id: "t2",
            ..base
        },
        Request {
            method: "PUT",
            ..base
        },
        Request {
            route: "/orders/:id",
            ..base
        },
        Request {
            body: br#"{"a":2}"#,
            ..base
        },
        // The same bytes as raw bytes are another kind.
        Request {
            content_type: Some("text/plain"),
            ..base
        },
        Request {
            content_type: None,
            ..base
        },
    ] {
        assert_ne!(fp(base), fp(other), "{other:?}");
    }
    let fingerprint = fp(base);
    assert_eq!(fingerprint.as_str().len(), 64);
    assert!(fingerprint
        .as_str()
        .bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
    assert_eq!(fingerprint.to_string(), fingerprint.clone().into_string());
}

#[test]
fn a_policy_drops_only_its_ignored_top_level_fields() {
    let secret = Secret::new([3u8; 32]).unwrap();
    let policy = Policy::from_json(
        r#"{"version":1,"fields":{"request_id":{"class":"ignored"},"trace_id":{"class":"ignored"},"sku":{"class":"key","normalizer":"exact"}}}"#,
    )
    .unwrap();
    let fp = |body: &'static [u8], policy: Option<&Policy>| {
        request_fingerprint(&secret, &request("application/json", body), policy).unwrap()
    };
    let plain = fp(br#"{"sku":"A1","qty":2}"#, Some(&policy));
    // Ignored fields, added or changed, make no difference.
    assert_eq!(
        plain,
        fp(br#"{"sku":"A1","qty":2,"request_id":"r-1"}"#, Some(&policy))
    );
    assert_eq!(
        plain,
        fp(
            br#"{"trace_id":"x","sku":"A1","qty":2,"request_id":"r-2"}"#,
            Some(&policy)
        )
    );
    // Without the policy they count.
    assert_ne!(
        fp(br#"{"sku":"A1","request_id":"r-1"}"#, None),
        fp(br#"{"sku":"A1","request_id":"r-2"}"#, None)
    );
    // Fields the policy does not name are kept, not refused: `qty` counts.
    assert_ne!(plain, fp(br#"{"sku":"A1","qty":3}"#, Some(&policy)));
    // Only the top level: a nested request_id is data.
    assert_ne!(
        fp(br#"{"sku":"A1","meta":{"request_id":"a"}}"#, Some(&policy)),
        fp(br#"{"sku":"A1","meta":{"request_id":"b"}}"#, Some(&policy))
    );
    let material = request_fingerprint_material(
        &request(
            "application/json",
            br#"{"sku":"A1","request_id":"r-1","qty":2}"#,
        ),
        Some(&policy),
    )
    .unwrap();
    assert!(material.ends_with(br#""json"]{"qty":2,"sku":"A1"}"#));
    // Form pairs so named are dropped too.
    let form = request_fingerprint_material(
        &request(
            "application/x-www-form-urlencoded",
            b"sku=A1&request_id=r-9",
        ),
        Some(&policy),
    )
    .unwrap();
    assert!(form.ends_with(br#""form"][["sku","A1"]]"#));
}

#[test]
fn empty_tenant_method_or_route_is_refused() {
    let base = request("application/json", b"{}");
    for (request, code, field) in [
        (
            Request {
                tenant_id: "",
                ..base
            },
            "invalid-tenant-id",
            "tenant_id",
        ),
        (
            Request { method: "", ..base },
            "invalid-action-type",
            "method",
        ),
        (
            Request { route: "", ..base },
            "invalid-action-type",
            "route",
        ),
    ] {
        let error = request_fingerprint_material(&request, None).unwrap_err();
        assert_eq!(
            (error.code().as_str(), error.field_name()),
            (code, Some(field))
        );
    }
}

#[test]
fn the_request_fingerprint_is_domain_separated() {
    let labels = [
        REQUEST_FINGERPRINT_LABEL,
        FINGERPRINT_LABEL,
        CLIENT_KEY_LABEL,
        INTENT_HMAC_LABEL,
    ];
    let distinct: std::collections::BTreeSet<_> = labels.iter().collect();
    assert_eq!(distinct.len(), labels.len());
    // Not the intent fingerprint of the same tenant, action and body.
    let secret = Secret::new([9u8; 32]).unwrap();
    let body = br#"{"amount":"10.00"}"#;
    let deriver = Deriver::new(&secret, Policy::default());
    let intent = deriver
        .fingerprint(
            "t1",
            "POST",
            &Payload::from_json(std::str::from_utf8(body).unwrap()).unwrap(),
        )
        .unwrap();
    let request = request_fingerprint(&secret, &request("application/json", body), None).unwrap();
    assert_ne!(intent.as_str(), request.as_str());
}
