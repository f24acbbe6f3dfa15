//! What each profile answers when the handler does not run: exact status,
//! headers and body bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use intentkey::claim::{ClaimOutcome, Response};
use intentkey::http::{KeyErrorReason, Options, Profile, Reply, PROBLEM_TYPE_BASE};

/// 2023-11-14T22:13:20Z.
const NOW: i64 = 1_700_000_000;

fn headers(reply: &Reply) -> Vec<(&str, &str)> {
    reply
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

fn body(reply: &Reply) -> &str {
    std::str::from_utf8(&reply.body).unwrap()
}

fn refusal(profile: Profile, outcome: ClaimOutcome) -> Reply {
    Options::new(profile).reply(&outcome, NOW).unwrap()
}

fn key_error(profile: Profile, values: &[&str]) -> Reply {
    let options = Options::new(profile);
    let error = options
        .client_key(values.iter().map(|v| (profile.header_name(), *v)))
        .unwrap_err();
    options.key_error_reply(&error, NOW)
}

#[test]
fn ietf_answers_are_problem_details() {
    let busy = refusal(Profile::Ietf, ClaimOutcome::InFlight);
    assert_eq!(busy.status, 409);
    assert_eq!(
        headers(&busy),
        [
            ("Content-Type", "application/problem+json"),
            ("Retry-After", "1")
        ]
    );
    assert_eq!(
        body(&busy),
        r#"{"type":"https://intentkey.dev/problems/request-in-flight","title":"A request is outstanding for this Idempotency-Key","status":409,"detail":"The first request with this key has not finished. Retry after the Retry-After delay with the same key and the same request."}"#
    );

    let reused = refusal(Profile::Ietf, ClaimOutcome::PayloadConflict);
    assert_eq!(reused.status, 422);
    assert_eq!(
        headers(&reused),
        [("Content-Type", "application/problem+json")]
    );
    assert_eq!(
        body(&reused),
        r#"{"type":"https://intentkey.dev/problems/idempotency-key-reused","title":"Idempotency-Key is already used","status":422,"detail":"This key was first used with a different request. Send that request again unchanged, or use a new key for a new request."}"#
    );

    let missing = key_error(Profile::Ietf, &[]);
    assert_eq!(missing.status, 400);
    assert_eq!(
        headers(&missing),
        [("Content-Type", "application/problem+json")]
    );
    assert_eq!(
        body(&missing),
        r#"{"type":"https://intentkey.dev/problems/idempotency-key-missing","title":"Idempotency-Key is missing","status":400,"detail":"the `Idempotency-Key` header is missing or empty; send one key of 1 to 255 printable ASCII characters, bare (no space, `\"` or `,`) or as a quoted string, the same on every retry, e.g. Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324"}"#
    );

    let long = key_error(Profile::Ietf, &[&format!("\"{}\"", "k".repeat(256))]);
    assert_eq!(
        body(&long),
        r#"{"type":"https://intentkey.dev/problems/idempotency-key-too-long","title":"Idempotency-Key is too long","status":400,"detail":"the `Idempotency-Key` header holds a key of 256 characters; send at most 255"}"#
    );

    let twice = key_error(Profile::Ietf, &["\"a\"", "\"a\""]);
    assert_eq!(
        body(&twice),
        r#"{"type":"https://intentkey.dev/problems/idempotency-key-invalid","title":"Idempotency-Key is invalid","status":400,"detail":"the `Idempotency-Key` header was sent 2 times; send it once, with one key"}"#
    );
}

#[test]
fn every_problem_type_is_under_the_documented_base() {
    let mut replies = vec![
        refusal(Profile::Ietf, ClaimOutcome::InFlight),
        refusal(Profile::Ietf, ClaimOutcome::PayloadConflict),
    ];
    for values in [&[][..], &["x\u{1}"], &[&"k".repeat(300)]] {
        replies.push(key_error(Profile::Ietf, values));
    }
    for reply in replies {
        let problem: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let kind = problem["type"].as_str().unwrap();
        let slug = kind.strip_prefix(PROBLEM_TYPE_BASE).unwrap();
        assert!(
            slug.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "{slug}"
        );
        assert_eq!(problem["status"], reply.status);
        assert!(problem["title"].is_string() && problem["detail"].is_string());
        assert_eq!(problem.as_object().unwrap().len(), 4);
    }
}

#[test]
fn stripe_answers_are_error_objects() {
    let busy = refusal(Profile::Stripe, ClaimOutcome::InFlight);
    assert_eq!(busy.status, 409);
    assert_eq!(
        headers(&busy),
        [("Content-Type", "application/json"), ("Retry-After", "1")]
    );
    assert_eq!(
        body(&busy),
        r#"{"error":{"type":"idempotency_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request using this idempotency key. Retry after the Retry-After delay with the same key."}}"#
    );

    // Stripe answers a payload mismatch with 400, not 422.
    let reused = refusal(Profile::Stripe, ClaimOutcome::PayloadConflict);
    assert_eq!(reused.status, 400);
    assert_eq!(headers(&reused), [("Content-Type", "application/json")]);
    assert_eq!(
        body(&reused),
        r#"{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with. Send the original request again, or use a new key for a different request."}}"#
    );

    let long = key_error(Profile::Stripe, &[&"k".repeat(10_000)]);
    assert_eq!(long.status, 400);
    assert_eq!(headers(&long), [("Content-Type", "application/json")]);
    assert_eq!(
        body(&long),
        r#"{"error":{"type":"invalid_request_error","message":"the `Idempotency-Key` header holds a key of 10000 characters; send at most 255"}}"#
    );

    let missing = key_error(Profile::Stripe, &[""]);
    assert_eq!(
        body(&missing),
        r#"{"error":{"type":"invalid_request_error","message":"the `Idempotency-Key` header is missing or empty; send one key of 1 to 255 printable ASCII characters, the same on every retry, e.g. Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324"}}"#
    );
}

#[test]
fn ofb_answers_are_the_ofb_error_body() {
    let reused = refusal(Profile::Ofb, ClaimOutcome::PayloadConflict);
    assert_eq!(reused.status, 422);
    assert_eq!(headers(&reused), [("Content-Type", "application/json")]);
    assert_eq!(
        body(&reused),
        r#"{"errors":[{"code":"ERRO_IDEMPOTENCIA","title":"Erro de idempotência.","detail":"O conteúdo da requisição diverge do conteúdo associado a esta chave de idempotência (x-idempotency-key)."}],"meta":{"requestDateTime":"2023-11-14T22:13:20Z"}}"#
    );

    let busy = refusal(Profile::Ofb, ClaimOutcome::InFlight);
    assert_eq!(busy.status, 409);
    assert_eq!(
        headers(&busy),
        [("Content-Type", "application/json"), ("Retry-After", "1")]
    );
    assert_eq!(
        body(&busy),
        r#"{"errors":[{"code":"ERRO_IDEMPOTENCIA","title":"Requisição em processamento.","detail":"Uma requisição com esta chave de idempotência (x-idempotency-key) ainda está em processamento: tente novamente após o tempo indicado em Retry-After, com a mesma chave."}],"meta":{"requestDateTime":"2023-11-14T22:13:20Z"}}"#
    );

    let missing = key_error(Profile::Ofb, &[]);
    assert_eq!(
        (missing.status, headers(&missing)),
        (400, vec![("Content-Type", "application/json")])
    );
    assert_eq!(
        body(&missing),
        r#"{"errors":[{"code":"PARAMETRO_NAO_INFORMADO","title":"Parâmetro não informado.","detail":"O cabeçalho x-idempotency-key é obrigatório: envie a chave de idempotência da requisição, a mesma em toda nova tentativa."}],"meta":{"requestDateTime":"2023-11-14T22:13:20Z"}}"#
    );

    let invalid = key_error(Profile::Ofb, &["a\u{7f}"]);
    assert_eq!(
        body(&invalid),
        r#"{"errors":[{"code":"PARAMETRO_INVALIDO","title":"Parâmetro inválido.","detail":"O cabeçalho x-idempotency-key deve ser enviado uma única vez, com de 1 a 40 caracteres ASCII imprimíveis."}],"meta":{"requestDateTime":"2023-11-14T22:13:20Z"}}"#
    );

    let long = key_error(Profile::Ofb, &[&"k".repeat(41)]);
    assert_eq!(
        body(&long),
        r#"{"errors":[{"code":"PARAMETRO_INVALIDO","title":"Parâmetro inválido.","detail":"O cabeçalho x-idempotency-key tem mais de 40 caracteres: envie no máximo 40."}],"meta":{"requestDateTime":"2023-11-14T22:13:20Z"}}"#
    );

    // The date is the host's `now`.
    let later = Options::new(Profile::Ofb)
        .reply(&ClaimOutcome::InFlight, 951_782_400)
        .unwrap();
    assert!(body(&later).ends_with(r#""meta":{"requestDateTime":"2000-02-29T00:00:00Z"}}"#));
}

#[test]
fn statuses_per_profile_and_outcome() {
    for (profile, in_flight, conflict) in [
        (Profile::Ietf, 409, 422),
        (Profile::Stripe, 409, 400),
        (Profile::Ofb, 409, 422),
    ] {
        assert_eq!(refusal(profile, ClaimOutcome::InFlight).status, in_flight);
        assert_eq!(
            refusal(profile, ClaimOutcome::PayloadConflict).status,
            conflict
        );
        for values in [&[][..], &["a\u{0}"], &[&"k".repeat(10_000)]] {
            assert_eq!(
                key_error(profile, values).status,
                400,
                "{profile} {values:?}"
            );
        }
        assert!(Options::new(profile)
            .reply(&ClaimOutcome::Owned, NOW)
            .is_none());
    }
}

#[test]
fn only_a_409_carries_retry_after_and_its_value_is_configurable() {
    for profile in Profile::ALL {
        let mut options = Options::new(profile);
        options.retry_after_seconds = 30;
        let busy = options.reply(&ClaimOutcome::InFlight, NOW).unwrap();
        assert_eq!(busy.header("Retry-After"), Some("30"));
        assert!(!busy.is_replay());
        let reused = options.reply(&ClaimOutcome::PayloadConflict, NOW).unwrap();
        assert_eq!(reused.header("Retry-After"), None);
        assert!(!reused.is_replay());
        let replay = options
            .reply(&ClaimOutcome::Done(Response::json(200, "{}")), NOW)
            .unwrap();
        assert_eq!(replay.header("Retry-After"), None);
    }
}

#[test]
fn error_bodies_are_json_and_never_carry_the_key_sent() {
    let sent = "sk_live_leak\u{1b}";
    for profile in Profile::ALL {
        let options = Options::new(profile);
        let error = options
            .client_key([(profile.header_name(), sent)])
            .unwrap_err();
        assert_eq!(error.reason(), KeyErrorReason::Invalid);
        let reply = options.key_error_reply(&error, NOW);
        let text = body(&reply);
        assert!(!text.contains("sk_live_leak"), "{text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains("\\u001b"),
            "{text}"
        );
        serde_json::from_str::<serde_json::Value>(text).unwrap();
        for outcome in [ClaimOutcome::InFlight, ClaimOutcome::PayloadConflict] {
            serde_json::from_slice::<serde_json::Value>(
                &options.reply(&outcome, NOW).unwrap().body,
            )
            .unwrap();
        }
    }
}

fn stored() -> Response {
    Response {
        status: 201,
        content_type: "application/json".into(),
        headers: vec![
            ("Location".into(), "/orders/ord_1".into()),
            ("ETag".into(), "\"v1\"".into()),
            ("Set-Cookie".into(), "session=abc".into()),
            ("Content-Length".into(), "15".into()),
            ("Transfer-Encoding".into(), "chunked".into()),
            ("Idempotent-Replayed".into(), "false".into()),
            ("x-request-id".into(), "r-1".into()),
        ],
        body: r#"{"id":"ord_1"}"#.into(),
    }
}

#[test]
fn a_replay_restores_status_allow_listed_headers_and_body_in_every_profile() {
    for profile in Profile::ALL {
        let reply = refusal(profile, ClaimOutcome::Done(stored()));
        assert_eq!(reply.status, 201);
        assert_eq!(
            headers(&reply),
            [
                ("Content-Type", "application/json"),
                ("Location", "/orders/ord_1"),
                ("Idempotent-Replayed", "true"),
            ]
        );
        assert_eq!(reply.body, br#"{"id":"ord_1"}"#);
        assert!(reply.is_replay());
    }
}

#[test]
fn the_allow_list_grows_matches_case_insensitively_and_never_replays_hop_by_hop_headers() {
    let mut options = Options::new(Profile::Stripe);
    options.replay_headers.extend(
        [
            "etag",
            "X-REQUEST-ID",
            "content-length",
            "transfer-encoding",
            "idempotent-replayed",
        ]
        .map(String::from),
    );
    let reply = options.replay(&stored());
    assert_eq!(
        headers(&reply),
        [
            ("Content-Type", "application/json"),
            ("Location", "/orders/ord_1"),
            ("ETag", "\"v1\""),
            ("x-request-id", "r-1"),
            ("Idempotent-Replayed", "true"),
        ]
    );
    // Without Content-Type on the list, the stored media type is not restored.
    options.replay_headers = vec!["location".into()];
    assert_eq!(
        headers(&options.replay(&stored())),
        [
            ("Location", "/orders/ord_1"),
            ("Idempotent-Replayed", "true")
        ]
    );
}

#[test]
fn stored_errors_replay_like_successes() {
    let declined = Response::json(402, r#"{"error":"card_declined"}"#);
    for profile in Profile::ALL {
        let reply = refusal(profile, ClaimOutcome::Done(declined.clone()));
        assert_eq!(reply.status, 402);
        assert_eq!(reply.body, declined.body);
        assert_eq!(reply.header("idempotent-replayed"), Some("true"));
    }
}
