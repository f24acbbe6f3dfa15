//! The HTTP vectors as written: requests, handlers, and what each step must
//! give by the documented rules (crates/intentkey/src/http/mod.rs): the
//! path, whether the handler runs, the status and the exact headers. The
//! generator fills in only the bodies of the core's own answers and the
//! hex values, and refuses to write a file whose core disagrees with any
//! of this.

use intentkey_vectors::http::{EndpointConfig, Handler, Request, Response, StoreFails};

/// 2023-11-14T22:13:20Z.
pub const T0: i64 = 1_700_000_000;

/// The secret every endpoint of the file is keyed with.
pub fn secret() -> Vec<u8> {
    (0x40u8..0x60).collect()
}

pub const ORDER: &str = r#"{"sku":"A1","qty":2}"#;
pub const ORDER_B: &str = r#"{"sku":"B2","qty":1}"#;

// --- the documented rules, per profile -------------------------------------

/// The Content-Type of every answer the profile writes itself.
pub fn error_type(profile: &str) -> &'static str {
    match profile {
        "ietf" => "application/problem+json",
        _ => "application/json",
    }
}

/// Same key, other payload: 422 (`ietf`, `ofb`) or 400 (`stripe`).
pub fn conflict_status(profile: &str) -> u16 {
    match profile {
        "stripe" => 400,
        _ => 422,
    }
}

/// The status of a refusal before the claim.
pub fn refusal_status(refusal: &str) -> u16 {
    match refusal {
        "too-large" => 413,
        _ => 400,
    }
}

/// The key header as the profile spells it.
pub fn header_name(profile: &str) -> &'static str {
    match profile {
        "ofb" => "x-idempotency-key",
        _ => "Idempotency-Key",
    }
}

// --- what a step must give ---------------------------------------------------

/// The expectation of a step, as written: body `None` is the core's own
/// answer, filled in by the generator.
#[derive(Clone, Debug)]
pub struct Want {
    pub kind: &'static str,
    pub refusal: Option<&'static str>,
    pub ran: bool,
    pub status: Option<u16>,
    pub headers: Option<Vec<(String, String)>>,
    pub body: Option<Vec<u8>>,
    /// What finishing did: `None` follows from the path and the handler
    /// (`handler`: stored, or released for a release status; `failed`:
    /// left in flight; `released`: released; nothing otherwise).
    pub finished: Option<Option<&'static str>>,
    /// How many times finishing was tried again.
    pub finish_retries: u32,
}

impl Want {
    /// The same, with what finishing did given outright.
    pub fn finishing(mut self, finished: Option<&'static str>, retries: u32) -> Self {
        self.finished = Some(finished);
        self.finish_retries = retries;
        self
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

/// The handler ran guarded; the reply is its response as is.
pub fn handler() -> Want {
    Want {
        kind: "handler",
        refusal: None,
        ran: true,
        status: None,
        headers: None,
        body: None,
        finished: None,
        finish_retries: 0,
    }
}

/// The handler chain raised an error with a client status: the claim is
/// released and the runner answers the bare status.
pub fn released() -> Want {
    Want {
        kind: "released",
        ..handler()
    }
}

/// The store failed before the claim: the core's answer (503 with
/// `Retry-After` when unreachable, else 500), nothing run.
pub fn unavailable(profile: &str, reachable: bool) -> Want {
    if reachable {
        return core_answer(
            "unavailable",
            false,
            500,
            pairs(&[("Content-Type", error_type(profile))]),
        );
    }
    core_answer(
        "unavailable",
        false,
        503,
        pairs(&[("Content-Type", error_type(profile)), ("Retry-After", "1")]),
    )
}

/// No key, keys optional: the handler ran unguarded; its response as is.
pub fn unguarded() -> Want {
    Want {
        kind: "unguarded",
        ..handler()
    }
}

/// The stored response replayed: written out in full.
pub fn replay(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Want {
    Want {
        kind: "replay",
        refusal: None,
        ran: false,
        status: Some(status),
        headers: Some(pairs(headers)),
        body: Some(body.to_vec()),
        finished: None,
        finish_retries: 0,
    }
}

fn core_answer(kind: &'static str, ran: bool, status: u16, headers: Vec<(String, String)>) -> Want {
    Want {
        kind,
        refusal: None,
        ran,
        status: Some(status),
        headers: Some(headers),
        body: None,
        finished: None,
        finish_retries: 0,
    }
}

/// The handler threw: 500, the record stays in flight.
pub fn failed(profile: &str) -> Want {
    core_answer(
        "failed",
        true,
        500,
        pairs(&[("Content-Type", error_type(profile))]),
    )
}

/// The first request has not finished: 409 with `Retry-After`.
pub fn in_flight(profile: &str, retry_after: u32) -> Want {
    let retry = retry_after.to_string();
    core_answer(
        "in-flight",
        false,
        409,
        pairs(&[
            ("Content-Type", error_type(profile)),
            ("Retry-After", &retry),
        ]),
    )
}

/// Same key, other request.
pub fn conflict(profile: &str) -> Want {
    core_answer(
        "payload-conflict",
        false,
        conflict_status(profile),
        pairs(&[("Content-Type", error_type(profile))]),
    )
}

/// Refused before any claim.
pub fn refused(profile: &str, refusal: &'static str) -> Want {
    Want {
        refusal: Some(refusal),
        ..core_answer(
            "refused",
            false,
            refusal_status(refusal),
            pairs(&[("Content-Type", error_type(profile))]),
        )
    }
}

// --- requests and handlers -----------------------------------------------------

/// A request builder: `POST /orders` for a tenant, no headers, no body.
#[derive(Clone, Debug)]
pub struct Req(Request);

pub fn req(tenant: &str) -> Req {
    Req(Request {
        tenant: tenant.to_owned(),
        method: "POST".into(),
        route: "/orders".into(),
        headers: Vec::new(),
        body: Vec::new(),
    })
}

impl Req {
    pub fn method(mut self, method: &str) -> Self {
        method.clone_into(&mut self.0.method);
        self
    }

    pub fn route(mut self, route: &str) -> Self {
        route.clone_into(&mut self.0.route);
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.0.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A body with its Content-Type header.
    pub fn body(self, content_type: &str, body: &[u8]) -> Self {
        let mut r = self.header("Content-Type", content_type);
        r.0.body = body.to_vec();
        r
    }

    /// A body with no Content-Type header.
    pub fn raw(mut self, body: &[u8]) -> Self {
        self.0.body = body.to_vec();
        self
    }

    pub fn json(self, text: &str) -> Self {
        self.body("application/json", text.as_bytes())
    }

    pub fn build(self) -> Request {
        self.0
    }
}

pub fn respond(status: u16, content_type: &str, headers: &[(&str, &str)], body: &[u8]) -> Handler {
    Handler::Responds(Response {
        status,
        content_type: content_type.to_owned(),
        headers: pairs(headers),
        body: body.to_vec(),
    })
}

/// What a handler that must not run would answer (so a runner that runs
/// it is caught by the reply as well as by `ran`).
pub fn must_not_run() -> Handler {
    respond(
        200,
        "application/json",
        &[("X-Handler", "ran")],
        br#"{"unexpected":"this handler must not run"}"#,
    )
}

/// The usual first answer: 201 with a Location and two headers no replay restores.
pub fn created(id: &str) -> Handler {
    let location = format!("/orders/{id}");
    let request_id = format!("req-{id}");
    respond(
        201,
        "application/json",
        &[
            ("Location", &location),
            ("Set-Cookie", "session=abc; HttpOnly"),
            ("X-Request-Id", &request_id),
        ],
        format!(r#"{{"id":"{id}","status":"created"}}"#).as_bytes(),
    )
}

/// The replay of [`created`] under the default allow-list.
pub fn created_replay(id: &str) -> Want {
    let location = format!("/orders/{id}");
    replay(
        201,
        &[
            ("Content-Type", "application/json"),
            ("Location", &location),
            ("Idempotent-Replayed", "true"),
        ],
        format!(r#"{{"id":"{id}","status":"created"}}"#).as_bytes(),
    )
}

/// A plain 200 answer with a body naming the run.
pub fn ok(tag: &str) -> Handler {
    respond(
        200,
        "application/json",
        &[],
        format!(r#"{{"run":"{tag}"}}"#).as_bytes(),
    )
}

pub fn ok_replay(tag: &str) -> Want {
    replay(
        200,
        &[
            ("Content-Type", "application/json"),
            ("Idempotent-Replayed", "true"),
        ],
        format!(r#"{{"run":"{tag}"}}"#).as_bytes(),
    )
}

// --- cases -------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct StepSpec {
    pub now: i64,
    pub request: Request,
    pub handler: Handler,
    pub store_fails: StoreFails,
    pub want: Want,
}

#[derive(Clone, Debug)]
pub struct CaseSpec {
    pub name: &'static str,
    pub comment: &'static str,
    pub endpoint: EndpointConfig,
    pub release_statuses: Vec<u16>,
    pub steps: Vec<StepSpec>,
}

impl CaseSpec {
    fn new(name: &'static str, comment: &'static str, endpoint: EndpointConfig) -> Self {
        CaseSpec {
            name,
            comment,
            endpoint,
            release_statuses: vec![429, 503],
            steps: Vec::new(),
        }
    }

    fn step(self, now: i64, request: Req, handler: Handler, want: Want) -> Self {
        self.failing(now, request, handler, StoreFails::default(), want)
    }

    /// A step whose store fails as `store_fails` says.
    fn failing(
        mut self,
        now: i64,
        request: Req,
        handler: Handler,
        store_fails: StoreFails,
        want: Want,
    ) -> Self {
        self.steps.push(StepSpec {
            now,
            request: request.build(),
            handler,
            store_fails,
            want,
        });
        self
    }

    pub fn profile(&self) -> &str {
        &self.endpoint.profile
    }
}

fn ietf() -> EndpointConfig {
    EndpointConfig::defaults("ietf")
}

fn stripe() -> EndpointConfig {
    EndpointConfig::defaults("stripe")
}

fn ofb() -> EndpointConfig {
    EndpointConfig::defaults("ofb")
}

/// `"…"`: an sf-string of `key` (no escapes needed).
fn q(key: &str) -> String {
    format!("\"{key}\"")
}

/// A binary body: a PDF header, NUL and 0xFF bytes.
pub fn pdf() -> Vec<u8> {
    let mut body = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    body.extend_from_slice(b"\x00\x01\x02\xff\xfe\xfd binary \x00\xff\x00\n");
    body.extend_from_slice(b"%%EOF\n");
    body
}

pub fn cases() -> Vec<CaseSpec> {
    let mut cases = Vec::new();
    let idem = "Idempotency-Key";
    let ofb_header = "x-idempotency-key";

    // --- each profile: first request, then replays -------------------------------
    cases.push(
        CaseSpec::new(
            "ietf-first-request-then-replay",
            "ietf: the first request runs and its answer goes out as is; every repeat replays status, Content-Type, Location and body with Idempotent-Replayed: true, never Set-Cookie or X-Request-Id. Header names and the method match case-insensitively.",
            ietf(),
        )
        .step(T0, req("shop-1").header(idem, &q("order-1")).json(ORDER), created("ord_1"), handler())
        .step(T0 + 5, req("shop-1").header(idem, &q("order-1")).json(ORDER), created("ord_2"), created_replay("ord_1"))
        .step(T0 + 6, req("shop-1").header("idempotency-key", &q("order-1")).json(ORDER), created("ord_3"), created_replay("ord_1"))
        .step(T0 + 7, req("shop-1").method("post").header("IDEMPOTENCY-KEY", &q("order-1")).json(ORDER), created("ord_4"), created_replay("ord_1")),
    );
    cases.push(
        CaseSpec::new(
            "stripe-first-request-then-replay",
            "stripe: a bare key; spaces and tabs around it are not part of it.",
            stripe(),
        )
        .step(
            T0,
            req("acct_1")
                .route("/v1/charges")
                .header(idem, "order-1")
                .json(ORDER),
            created("ch_1"),
            handler(),
        )
        .step(
            T0 + 1,
            req("acct_1")
                .route("/v1/charges")
                .header(idem, "  order-1\t")
                .json(ORDER),
            created("ch_2"),
            created_replay("ch_1"),
        )
        .step(
            T0 + 2,
            req("acct_1")
                .route("/v1/charges")
                .header("IDEMPOTENCY-KEY", "order-1")
                .json(ORDER),
            created("ch_3"),
            created_replay("ch_1"),
        ),
    );
    cases.push(
        CaseSpec::new(
            "ofb-first-request-then-replay",
            "ofb: the key is in x-idempotency-key, matched case-insensitively.",
            ofb(),
        )
        .step(
            T0,
            req("itp-1")
                .route("/pix/payments")
                .header(ofb_header, "pix-0001")
                .json(ORDER),
            created("pix_1"),
            handler(),
        )
        .step(
            T0 + 30,
            req("itp-1")
                .route("/pix/payments")
                .header("X-Idempotency-Key", "pix-0001")
                .json(ORDER),
            created("pix_2"),
            created_replay("pix_1"),
        ),
    );
    let pdf_body = pdf();
    let pdf_length = pdf_body.len().to_string();
    let pdf_handler = respond(
        201,
        "application/pdf",
        &[
            ("Location", "/reports/r1"),
            ("Content-Disposition", "attachment; filename=\"r1.pdf\""),
            ("ETag", "\"r1-v1\""),
            ("Content-Length", &pdf_length),
            ("Set-Cookie", "s=1"),
            ("Cache-Control", "no-store"),
        ],
        &pdf_body,
    );
    cases.push(
        CaseSpec::new(
            "binary-body-replayed-byte-for-byte",
            "A PDF-like body with NUL and 0xFF bytes is replayed byte for byte. replay_headers extends the allow-list (matched case-insensitively: etag restores ETag); Content-Length is never replayed even when listed; Set-Cookie and Cache-Control are not listed.",
            EndpointConfig {
                replay_headers: ["Location", "Content-Type", "Content-Disposition", "etag", "Content-Length"]
                    .map(String::from)
                    .to_vec(),
                ..ietf()
            },
        )
        .step(T0, req("shop-1").route("/reports").header(idem, &q("report-1")).json(r#"{"month":"2023-10"}"#), pdf_handler, handler())
        .step(
            T0 + 1,
            req("shop-1").route("/reports").header(idem, &q("report-1")).json(r#"{"month":"2023-10"}"#),
            must_not_run(),
            replay(
                201,
                &[
                    ("Content-Type", "application/pdf"),
                    ("Location", "/reports/r1"),
                    ("Content-Disposition", "attachment; filename=\"r1.pdf\""),
                    ("ETag", "\"r1-v1\""),
                    ("Idempotent-Replayed", "true"),
                ],
                &pdf_body,
            ),
        ),
    );

    // --- a throw leaves the record in flight: 500, then 409 ---------------------------
    for (profile, retry, name) in [
        ("ietf", 1, "ambiguous-throw-then-409-ietf"),
        ("stripe", 7, "ambiguous-throw-then-409-stripe"),
        ("ofb", 30, "ambiguous-throw-then-409-ofb"),
    ] {
        let h = header_name(profile);
        let key = if profile == "ietf" {
            q("pay-1")
        } else {
            "pay-1".to_owned()
        };
        cases.push(
            CaseSpec::new(
                name,
                "A handler that throws is ambiguous: 500 (no stack trace), the record stays in flight, so the retry gets 409 with the endpoint's Retry-After; another payload under the key still gets the conflict answer.",
                EndpointConfig {
                    retry_after_seconds: retry,
                    ..EndpointConfig::defaults(profile)
                },
            )
            .step(T0, req("t-1").header(h, &key).json(ORDER), Handler::Throws, failed(profile))
            .step(T0 + 1, req("t-1").header(h, &key).json(ORDER), must_not_run(), in_flight(profile, retry))
            .step(T0 + 2, req("t-1").header(h, &key).json(ORDER_B), must_not_run(), conflict(profile))
            .step(T0 + 600, req("t-1").header(h, &key).json(ORDER), must_not_run(), in_flight(profile, retry)),
        );
    }

    // --- same key, other payload ------------------------------------------------------------
    for (profile, name) in [
        ("ietf", "payload-mismatch-ietf"),
        ("stripe", "payload-mismatch-stripe"),
        ("ofb", "payload-mismatch-ofb"),
    ] {
        let h = header_name(profile);
        let key = if profile == "ietf" {
            q("order-9")
        } else {
            "order-9".to_owned()
        };
        cases.push(
            CaseSpec::new(
                name,
                "The same key with another body: 422 (ietf, ofb) or 400 (stripe); the stored answer is untouched and the original request still replays.",
                EndpointConfig::defaults(profile),
            )
            .step(T0, req("t-1").header(h, &key).json(ORDER), created("ord_9"), handler())
            .step(T0 + 1, req("t-1").header(h, &key).json(ORDER_B), must_not_run(), conflict(profile))
            .step(T0 + 2, req("t-1").header(h, &key).json(ORDER), must_not_run(), created_replay("ord_9")),
        );
    }

    // --- bad keys ----------------------------------------------------------------------------
    let long = |n: usize| "k".repeat(n);
    let ietf_bad: Vec<(&str, Vec<String>, &'static str)> = vec![
        ("no key header", vec![], "key-missing"),
        ("an empty header", vec![String::new()], "key-missing"),
        ("only spaces", vec!["   ".into()], "key-missing"),
        ("an empty sf-string", vec![q("")], "key-missing"),
        ("sent twice", vec![q("k1"), q("k1")], "key-invalid"),
        ("a control character", vec![q("ab\u{1}c")], "key-invalid"),
        ("a tab inside", vec![q("ab\tc")], "key-invalid"),
        ("non-ASCII", vec![q("clé")], "key-invalid"),
        ("10,000 characters", vec![q(&long(10_000))], "key-too-long"),
        ("256 characters", vec![q(&long(256))], "key-too-long"),
        (
            "a bare token with a space",
            vec!["order 1".into()],
            "key-invalid",
        ),
        (
            "a bare token with a comma",
            vec!["a,b".into()],
            "key-invalid",
        ),
        (
            "a bare token with a quote",
            vec!["a\"b".into()],
            "key-invalid",
        ),
        (
            "a bare token of 256 characters",
            vec![long(256)],
            "key-too-long",
        ),
        (
            "an escape other than \\\" and \\\\",
            vec![r#""a\nb""#.into()],
            "key-invalid",
        ),
        ("no closing quote", vec![r#""abc"#.into()], "key-invalid"),
        (
            "two values in one line",
            vec![r#""a", "b""#.into()],
            "key-invalid",
        ),
        ("parameters", vec![r#""a";p=1"#.into()], "key-invalid"),
        (
            "characters after the closing quote",
            vec![r#""a"x"#.into()],
            "key-invalid",
        ),
    ];
    let mut ietf_keys = CaseSpec::new(
        "bad-keys-ietf",
        "ietf keys: every bad key is 400 problem+json and runs nothing; 255 characters pass; sf-string escapes \\\" and \\\\ unescape to one key, quoted spaces are part of it.",
        ietf(),
    );
    for (i, (_, values, refusal)) in ietf_bad.iter().enumerate() {
        let mut r = req("t-1");
        for value in values {
            r = r.header(idem, value);
        }
        ietf_keys = ietf_keys.step(
            T0 + i as i64,
            r.json(ORDER),
            must_not_run(),
            refused("ietf", refusal),
        );
    }
    let escaped = r#""a\"b\\c""#;
    ietf_keys = ietf_keys
        .step(
            T0 + 100,
            req("t-1").header(idem, &q(&long(255))).json(ORDER),
            ok("255"),
            handler(),
        )
        .step(
            T0 + 101,
            req("t-1").header(idem, escaped).json(ORDER),
            ok("escaped"),
            handler(),
        )
        .step(
            T0 + 102,
            req("t-1").header(idem, escaped).json(ORDER),
            must_not_run(),
            ok_replay("escaped"),
        )
        .step(
            T0 + 103,
            req("t-1").header(idem, &q(" spaced key ")).json(ORDER),
            ok("spaced"),
            handler(),
        )
        .step(
            T0 + 104,
            req("t-1").header(idem, &q("spaced key")).json(ORDER),
            ok("unspaced"),
            handler(),
        );
    cases.push(ietf_keys);

    cases.push(
        CaseSpec::new(
            "bare-key-ietf",
            "ietf by default: a bare key (visible ASCII, no space, quote or comma) is accepted, its repeat is replayed and its quoted form is the same key; a bare key with a space, a quote or a comma, or longer than 255, is refused.",
            ietf(),
        )
        .step(T0, req("t-1").header(idem, "8e03978e-40d5-43e8-bc93-6894a57f9324").json(ORDER), ok("bare"), handler())
        .step(T0 + 1, req("t-1").header(idem, "8e03978e-40d5-43e8-bc93-6894a57f9324").json(ORDER), must_not_run(), ok_replay("bare"))
        .step(T0 + 2, req("t-1").header(idem, &q("8e03978e-40d5-43e8-bc93-6894a57f9324")).json(ORDER), must_not_run(), ok_replay("bare"))
        .step(T0 + 3, req("t-1").header(idem, "  order/7;v=1+x=  ").json(ORDER), ok("symbols"), handler())
        .step(T0 + 4, req("t-1").header(idem, "order/7;v=1+x=").json(ORDER), must_not_run(), ok_replay("symbols"))
        .step(T0 + 5, req("t-1").header(idem, &q("quoted-first")).json(ORDER), ok("quoted"), handler())
        .step(T0 + 6, req("t-1").header(idem, "quoted-first").json(ORDER), must_not_run(), ok_replay("quoted"))
        .step(T0 + 7, req("t-1").header(idem, "a b").json(ORDER), must_not_run(), refused("ietf", "key-invalid"))
        .step(T0 + 8, req("t-1").header(idem, "a,b").json(ORDER), must_not_run(), refused("ietf", "key-invalid"))
        .step(T0 + 9, req("t-1").header(idem, "a\"b").json(ORDER), must_not_run(), refused("ietf", "key-invalid"))
        .step(T0 + 10, req("t-1").header(idem, &long(255)).json(ORDER), ok("255"), handler())
        .step(T0 + 11, req("t-1").header(idem, &long(256)).json(ORDER), must_not_run(), refused("ietf", "key-too-long"))
        .step(T0 + 12, req("t-1").header(idem, &long(10_000)).json(ORDER), must_not_run(), refused("ietf", "key-too-long"))
        .step(T0 + 13, req("t-1").json(ORDER), must_not_run(), refused("ietf", "key-missing")),
    );

    cases.push(
        CaseSpec::new(
            "strict-key-syntax-ietf",
            "ietf with strict_key_syntax: only an RFC 8941 sf-string is a key; a bare key is refused with 400 and runs nothing, even after its quoted form was stored; the quoted key is accepted and replayed.",
            EndpointConfig {
                strict_key_syntax: true,
                ..ietf()
            },
        )
        .step(T0, req("t-1").header(idem, "order-1").json(ORDER), must_not_run(), refused("ietf", "key-invalid"))
        .step(T0 + 1, req("t-1").header(idem, &q("order-1")).json(ORDER), ok("quoted"), handler())
        .step(T0 + 2, req("t-1").header(idem, &q("order-1")).json(ORDER), must_not_run(), ok_replay("quoted"))
        .step(T0 + 3, req("t-1").header(idem, "order-1").json(ORDER), must_not_run(), refused("ietf", "key-invalid"))
        .step(T0 + 4, req("t-1").header(idem, "f81d4fae-7dec-11d0-a765-00a0c91e6bf6").json(ORDER), must_not_run(), refused("ietf", "key-invalid"))
        .step(T0 + 5, req("t-1").header(idem, &q("a b")).json(ORDER), ok("spaced"), handler()),
    );

    let stripe_bad: Vec<(Vec<String>, &'static str)> = vec![
        (vec![], "key-missing"),
        (vec![String::new()], "key-missing"),
        (vec!["k1".into(), "k2".into()], "key-invalid"),
        (vec!["ab\u{1}c".into()], "key-invalid"),
        (vec!["clé".into()], "key-invalid"),
        (vec![long(10_000)], "key-too-long"),
        (vec![long(256)], "key-too-long"),
    ];
    let mut stripe_keys = CaseSpec::new(
        "bad-keys-stripe",
        "stripe keys: bad keys are 400 invalid_request_error; 255 characters pass; quotes are part of a bare key, so \"abc\" and abc are two keys.",
        stripe(),
    );
    for (i, (values, refusal)) in stripe_bad.iter().enumerate() {
        let mut r = req("acct_1");
        for value in values {
            r = r.header(idem, value);
        }
        stripe_keys = stripe_keys.step(
            T0 + i as i64,
            r.json(ORDER),
            must_not_run(),
            refused("stripe", refusal),
        );
    }
    stripe_keys = stripe_keys
        .step(
            T0 + 100,
            req("acct_1").header(idem, &long(255)).json(ORDER),
            ok("255"),
            handler(),
        )
        .step(
            T0 + 101,
            req("acct_1").header(idem, "\"abc\"").json(ORDER),
            ok("quoted"),
            handler(),
        )
        .step(
            T0 + 102,
            req("acct_1").header(idem, "abc").json(ORDER),
            ok("bare"),
            handler(),
        )
        .step(
            T0 + 103,
            req("acct_1").header(idem, "\"abc\"").json(ORDER),
            must_not_run(),
            ok_replay("quoted"),
        );
    cases.push(stripe_keys);

    let ofb_bad: Vec<(Vec<String>, &'static str)> = vec![
        (vec![], "key-missing"),
        (vec![String::new()], "key-missing"),
        (vec!["k1".into(), "k1".into()], "key-invalid"),
        (vec!["ab\u{1}c".into()], "key-invalid"),
        (vec!["chave-ç".into()], "key-invalid"),
        (vec![long(10_000)], "key-too-long"),
        (vec![long(41)], "key-too-long"),
    ];
    let mut ofb_keys = CaseSpec::new(
        "bad-keys-ofb",
        "ofb keys: PARAMETRO_NAO_INFORMADO when missing, PARAMETRO_INVALIDO otherwise; 40 characters pass, 41 do not; an Idempotency-Key header is not the ofb key.",
        ofb(),
    );
    for (i, (values, refusal)) in ofb_bad.iter().enumerate() {
        let mut r = req("itp-1");
        for value in values {
            r = r.header(ofb_header, value);
        }
        ofb_keys = ofb_keys.step(
            T0 + i as i64,
            r.json(ORDER),
            must_not_run(),
            refused("ofb", refusal),
        );
    }
    ofb_keys = ofb_keys
        .step(
            T0 + 50,
            req("itp-1").header(idem, "pix-1").json(ORDER),
            must_not_run(),
            refused("ofb", "key-missing"),
        )
        .step(
            T0 + 100,
            req("itp-1").header(ofb_header, &long(40)).json(ORDER),
            ok("40"),
            handler(),
        )
        .step(
            T0 + 101,
            req("itp-1").header(ofb_header, &long(40)).json(ORDER),
            must_not_run(),
            ok_replay("40"),
        );
    cases.push(ofb_keys);

    // --- keys optional ----------------------------------------------------------------------------
    cases.push(
        CaseSpec::new(
            "key-optional-runs-unguarded",
            "key_required false: a request without a key (or with an empty one) runs its handler unguarded every time and nothing is stored; a bad key is still refused; a good key is guarded.",
            EndpointConfig {
                key_required: false,
                ..ietf()
            },
        )
        .step(T0, req("t-1").json(ORDER), ok("unguarded-1"), unguarded())
        .step(T0 + 1, req("t-1").json(ORDER), ok("unguarded-2"), unguarded())
        .step(T0 + 2, req("t-1").header(idem, "").json(ORDER), ok("unguarded-3"), unguarded())
        .step(T0 + 3, req("t-1").header(idem, "order,1").json(ORDER), must_not_run(), refused("ietf", "key-invalid"))
        .step(T0 + 4, req("t-1").header(idem, &q("order-1")).json(ORDER), ok("guarded"), handler())
        .step(T0 + 5, req("t-1").header(idem, &q("order-1")).json(ORDER), must_not_run(), ok_replay("guarded")),
    );

    // --- body too large ------------------------------------------------------------------------
    cases.push(
        CaseSpec::new(
            "body-too-large-ietf",
            "max_body_bytes 16: 17 bytes are 413 and store nothing, 16 pass; the key is checked before the body.",
            EndpointConfig {
                max_body_bytes: 16,
                ..ietf()
            },
        )
        .step(T0, req("t-1").header(idem, &q("big-1")).body("text/plain", &[b'x'; 17]), must_not_run(), refused("ietf", "too-large"))
        .step(T0 + 1, req("t-1").header(idem, &q("big-1")).body("text/plain", &[b'x'; 16]), ok("16"), handler())
        .step(T0 + 2, req("t-1").body("text/plain", &[b'x'; 17]), must_not_run(), refused("ietf", "key-missing"))
        .step(T0 + 3, req("t-1").header(idem, &q("big-2")).body("application/json", b"{oops, not json!!"), must_not_run(), refused("ietf", "too-large")),
    );
    for (profile, name) in [
        ("stripe", "body-too-large-stripe"),
        ("ofb", "body-too-large-ofb"),
    ] {
        cases.push(
            CaseSpec::new(
                name,
                "max_body_bytes 8: 9 bytes are 413 in the profile's shape.",
                EndpointConfig {
                    max_body_bytes: 8,
                    ..EndpointConfig::defaults(profile)
                },
            )
            .step(
                T0,
                req("t-1")
                    .header(header_name(profile), "big-1")
                    .body("text/plain", b"123456789"),
                must_not_run(),
                refused(profile, "too-large"),
            )
            .step(
                T0 + 1,
                req("t-1")
                    .header(header_name(profile), "big-1")
                    .body("text/plain", b"12345678"),
                ok("8"),
                handler(),
            ),
        );
    }

    // --- bodies that do not parse ----------------------------------------------------------------
    cases.push(
        CaseSpec::new(
            "invalid-json-ietf",
            "A JSON media type whose body does not parse (or is not UTF-8, or holds a number beyond the double range) is 400 and stores nothing; the same text as text/plain is bytes; an empty body is no body.",
            ietf(),
        )
        .step(T0, req("t-1").header(idem, &q("j-1")).json("{oops"), must_not_run(), refused("ietf", "body-invalid"))
        .step(T0 + 1, req("t-1").header(idem, &q("j-1")).json(ORDER), ok("j-1"), handler())
        .step(T0 + 2, req("t-1").header(idem, &q("j-2")).body("application/merge-patch+json", b"[1,2"), must_not_run(), refused("ietf", "body-invalid"))
        .step(T0 + 3, req("t-1").header(idem, &q("j-3")).body("text/plain", b"{oops"), ok("j-3"), handler())
        .step(T0 + 4, req("t-1").header(idem, &q("j-4")).body("application/json", b""), ok("j-4"), handler())
        .step(T0 + 5, req("t-1").header(idem, &q("j-5")).json(r#"{"amount":1e400}"#), must_not_run(), refused("ietf", "body-invalid"))
        .step(T0 + 6, req("t-1").header(idem, &q("j-6")).body("application/json", b"{\"a\":\"\xff\"}"), must_not_run(), refused("ietf", "body-invalid")),
    );
    for (profile, name) in [
        ("stripe", "invalid-json-stripe"),
        ("ofb", "invalid-json-ofb"),
    ] {
        cases.push(
            CaseSpec::new(
                name,
                "A body that does not parse as JSON: 400 in the profile's shape.",
                EndpointConfig::defaults(profile),
            )
            .step(
                T0,
                req("t-1").header(header_name(profile), "j-1").json("{oops"),
                must_not_run(),
                refused(profile, "body-invalid"),
            )
            .step(
                T0 + 1,
                req("t-1").header(header_name(profile), "j-1").json(ORDER),
                ok("j-1"),
                handler(),
            ),
        );
    }

    // --- tenants ------------------------------------------------------------------------------------
    cases.push(
        CaseSpec::new(
            "two-tenants-share-a-client-key",
            "Two tenants send the same client key: two storage keys, two first requests, two replays; neither sees the other's record.",
            stripe(),
        )
        .step(T0, req("tenant-a").header(idem, "order-1").json(ORDER), created("a_1"), handler())
        .step(T0 + 1, req("tenant-b").header(idem, "order-1").json(ORDER_B), created("b_1"), handler())
        .step(T0 + 2, req("tenant-a").header(idem, "order-1").json(ORDER), must_not_run(), created_replay("a_1"))
        .step(T0 + 3, req("tenant-b").header(idem, "order-1").json(ORDER_B), must_not_run(), created_replay("b_1"))
        .step(T0 + 4, req("tenant-b").header(idem, "order-1").json(ORDER), must_not_run(), conflict("stripe")),
    );

    // --- outcome classes ----------------------------------------------------------------------------
    let declined = br#"{"error":{"type":"card_error","code":"card_declined"}}"#;
    let crashed = br#"{"error":"ledger said no"}"#;
    cases.push(
        CaseSpec::new(
            "terminal-error-answers-are-replayed",
            "An answered error is terminal: a 402 and an answered (not thrown) 500 are stored and replayed like a 201.",
            stripe(),
        )
        .step(T0, req("acct_1").header(idem, "pay-1").json(ORDER), respond(402, "application/json", &[], declined), handler())
        .step(T0 + 1, req("acct_1").header(idem, "pay-1").json(ORDER), must_not_run(), replay(402, &[("Content-Type", "application/json"), ("Idempotent-Replayed", "true")], declined))
        .step(T0 + 2, req("acct_1").header(idem, "pay-2").json(ORDER), respond(500, "application/json", &[("X-Trace", "t-1")], crashed), handler())
        .step(T0 + 3, req("acct_1").header(idem, "pay-2").json(ORDER), must_not_run(), replay(500, &[("Content-Type", "application/json"), ("Idempotent-Replayed", "true")], crashed)),
    );
    let busy = br#"{"error":"busy"}"#;
    cases.push(
        CaseSpec::new(
            "released-503-runs-again",
            "503 releases the claim (default release statuses): the caller gets the 503 as is, the next attempt runs the handler again and its 201 is then replayed.",
            ietf(),
        )
        .step(T0, req("t-1").header(idem, &q("r-1")).json(ORDER), respond(503, "application/json", &[("Retry-After", "5")], busy), handler())
        .step(T0 + 5, req("t-1").header(idem, &q("r-1")).json(ORDER), created("r_1"), handler())
        .step(T0 + 6, req("t-1").header(idem, &q("r-1")).json(ORDER), must_not_run(), created_replay("r_1")),
    );
    cases.push(
        CaseSpec::new(
            "released-429-runs-again",
            "429 releases the claim: the next attempt runs the handler again.",
            ofb(),
        )
        .step(
            T0,
            req("itp-1").header(ofb_header, "r-1").json(ORDER),
            respond(429, "application/json", &[("Retry-After", "2")], busy),
            handler(),
        )
        .step(
            T0 + 2,
            req("itp-1").header(ofb_header, "r-1").json(ORDER),
            respond(429, "application/json", &[("Retry-After", "2")], busy),
            handler(),
        )
        .step(
            T0 + 4,
            req("itp-1").header(ofb_header, "r-1").json(ORDER),
            created("r_1"),
            handler(),
        )
        .step(
            T0 + 6,
            req("itp-1").header(ofb_header, "r-1").json(ORDER),
            must_not_run(),
            created_replay("r_1"),
        ),
    );
    let mut custom = CaseSpec::new(
        "custom-release-statuses",
        "release_statuses [429]: a 503 is terminal and replayed; 429 still releases.",
        ietf(),
    )
    .step(
        T0,
        req("t-1").header(idem, &q("c-1")).json(ORDER),
        respond(503, "application/json", &[("Retry-After", "5")], busy),
        handler(),
    )
    .step(
        T0 + 1,
        req("t-1").header(idem, &q("c-1")).json(ORDER),
        must_not_run(),
        replay(
            503,
            &[
                ("Content-Type", "application/json"),
                ("Idempotent-Replayed", "true"),
            ],
            busy,
        ),
    )
    .step(
        T0 + 2,
        req("t-1").header(idem, &q("c-2")).json(ORDER),
        respond(429, "application/json", &[], busy),
        handler(),
    )
    .step(
        T0 + 3,
        req("t-1").header(idem, &q("c-2")).json(ORDER),
        ok("c-2"),
        handler(),
    );
    custom.release_statuses = vec![429];
    cases.push(custom);

    // --- fingerprint canonicalization ---------------------------------------------------------------------
    let k = |key: &str| q(key);
    cases.push(
        CaseSpec::new(
            "json-canonical-forms-replay",
            "JSON bodies compare in RFC 8785 form: member order, whitespace, 1.0 against 1 and 1e0, \\u00e9 against é, a charset parameter all replay; another array order or another number is a conflict.",
            ietf(),
        )
        .step(T0, req("t-1").header(idem, &k("c1")).json(r#"{"sku":"A1","qty":1.0,"note":"caf\u00e9","tags":["x","y"]}"#), ok("c1"), handler())
        .step(T0 + 1, req("t-1").header(idem, &k("c1")).json("{ \"tags\" : [ \"x\", \"y\" ],\n  \"note\": \"café\", \"qty\": 1, \"sku\": \"A1\" }"), must_not_run(), ok_replay("c1"))
        .step(T0 + 2, req("t-1").header(idem, &k("c1")).json(r#"{"qty":1e0,"sku":"A1","note":"caf\u00E9","tags":["x","y"]}"#), must_not_run(), ok_replay("c1"))
        .step(T0 + 3, req("t-1").header(idem, &k("c1")).body("application/json; charset=utf-8", br#"{"note":"caf\u00e9","qty":10E-1,"sku":"\u0041\u0031","tags":["x","y"]}"#), must_not_run(), ok_replay("c1"))
        .step(T0 + 4, req("t-1").header(idem, &k("c1")).json(r#"{"sku":"A1","qty":1,"note":"café","tags":["y","x"]}"#), must_not_run(), conflict("ietf"))
        .step(T0 + 5, req("t-1").header(idem, &k("c1")).json(r#"{"sku":"A1","qty":1.5,"note":"café","tags":["x","y"]}"#), must_not_run(), conflict("ietf")),
    );
    let form = "application/x-www-form-urlencoded";
    cases.push(
        CaseSpec::new(
            "form-pairs-in-any-order-replay",
            "Form bodies compare as decoded pairs sorted by name then value: another order, percent-encoded names and values, a charset parameter replay; another value or an extra empty pair is a conflict; + and %20 are one space.",
            stripe(),
        )
        .step(T0, req("acct_1").header(idem, "f-1").body(form, b"b=2&a=1&a=0"), ok("f-1"), handler())
        .step(T0 + 1, req("acct_1").header(idem, "f-1").body(form, b"a=0&b=2&a=1"), must_not_run(), ok_replay("f-1"))
        .step(T0 + 2, req("acct_1").header(idem, "f-1").body(form, b"a=1&a=0&b=2"), must_not_run(), ok_replay("f-1"))
        .step(T0 + 3, req("acct_1").header(idem, "f-1").body(form, b"%61=0&a=1&b=%32"), must_not_run(), ok_replay("f-1"))
        .step(T0 + 4, req("acct_1").header(idem, "f-1").body("application/x-www-form-urlencoded; charset=UTF-8", b"b=2&a=0&a=1"), must_not_run(), ok_replay("f-1"))
        .step(T0 + 5, req("acct_1").header(idem, "f-1").body(form, b"a=0&a=1&b=3"), must_not_run(), conflict("stripe"))
        .step(T0 + 6, req("acct_1").header(idem, "f-1").body(form, b"a=0&a=1&b=2&c="), must_not_run(), conflict("stripe"))
        .step(T0 + 7, req("acct_1").header(idem, "f-2").body(form, b"note=a+b"), ok("f-2"), handler())
        .step(T0 + 8, req("acct_1").header(idem, "f-2").body(form, b"note=a%20b"), must_not_run(), ok_replay("f-2")),
    );
    let binary = vec![0u8, 1, 2, 0xff, 0xfe, b'x'];
    let binary_other = {
        let mut b = binary.clone();
        b[3] = 0xfd;
        b
    };
    cases.push(
        CaseSpec::new(
            "other-media-types-compare-raw-bytes",
            "Any other media type (or none) compares the raw bytes: one space more is a conflict; the same bytes replay; JSON sent without a JSON media type is bytes too.",
            ietf(),
        )
        .step(T0, req("t-1").header(idem, &k("r1")).body("text/plain", b"hello  world"), ok("r1"), handler())
        .step(T0 + 1, req("t-1").header(idem, &k("r1")).body("text/plain", b"hello world"), must_not_run(), conflict("ietf"))
        .step(T0 + 2, req("t-1").header(idem, &k("r1")).body("text/plain", b"hello  world"), must_not_run(), ok_replay("r1"))
        .step(T0 + 3, req("t-1").header(idem, &k("r2")).body("application/octet-stream", &binary), ok("r2"), handler())
        .step(T0 + 4, req("t-1").header(idem, &k("r2")).body("application/octet-stream", &binary), must_not_run(), ok_replay("r2"))
        .step(T0 + 5, req("t-1").header(idem, &k("r2")).body("application/octet-stream", &binary_other), must_not_run(), conflict("ietf"))
        .step(T0 + 6, req("t-1").header(idem, &k("r3")).raw(br#"{"a":1}"#), ok("r3"), handler())
        .step(T0 + 7, req("t-1").header(idem, &k("r3")).raw(br#"{ "a": 1 }"#), must_not_run(), conflict("ietf"))
        .step(T0 + 8, req("t-1").header(idem, &k("r3")).body("text/json", br#"{"a":1}"#), must_not_run(), ok_replay("r3")),
    );
    cases.push(
        CaseSpec::new(
            "policy-ignored-field-leaves-the-fingerprint",
            "A route policy's ignored field (trace_id) does not change the fingerprint: another or no trace_id replays. Fields the policy does not name still count (coupon), and the same key on another route is a conflict.",
            EndpointConfig {
                policies: vec![("POST /orders".into(), order_policy())],
                ..ietf()
            },
        )
        .step(T0, req("t-1").header(idem, &k("p1")).json(r#"{"sku":"A1","qty":2,"trace_id":"t-1"}"#), ok("p1"), handler())
        .step(T0 + 1, req("t-1").header(idem, &k("p1")).json(r#"{"sku":"A1","qty":2,"trace_id":"t-2"}"#), must_not_run(), ok_replay("p1"))
        .step(T0 + 2, req("t-1").header(idem, &k("p1")).json(r#"{"qty":2,"sku":"A1"}"#), must_not_run(), ok_replay("p1"))
        .step(T0 + 3, req("t-1").method("post").header(idem, &k("p1")).json(r#"{"trace_id":{"nested":true},"qty":2,"sku":"A1"}"#), must_not_run(), ok_replay("p1"))
        .step(T0 + 4, req("t-1").header(idem, &k("p1")).json(r#"{"sku":"A1","qty":3,"trace_id":"t-1"}"#), must_not_run(), conflict("ietf"))
        .step(T0 + 5, req("t-1").header(idem, &k("p1")).json(r#"{"sku":"A1","qty":2,"coupon":"X"}"#), must_not_run(), conflict("ietf"))
        .step(T0 + 6, req("t-1").route("/carts").header(idem, &k("p1")).json(r#"{"sku":"A1","qty":2,"trace_id":"t-1"}"#), must_not_run(), conflict("ietf"))
        .step(T0 + 7, req("t-1").route("/carts").header(idem, &k("p2")).json(r#"{"sku":"A1","qty":2,"trace_id":"t-1"}"#), ok("p2"), handler())
        .step(T0 + 8, req("t-1").route("/carts").header(idem, &k("p2")).json(r#"{"sku":"A1","qty":2,"trace_id":"t-2"}"#), must_not_run(), conflict("ietf")),
    );
    cases.push(
        CaseSpec::new(
            "method-case-does-not-matter",
            "The method is compared uppercased: post and Post replay a POST; PUT is another request.",
            stripe(),
        )
        .step(T0, req("acct_1").header(idem, "m-1").json(ORDER), ok("m-1"), handler())
        .step(T0 + 1, req("acct_1").method("post").header(idem, "m-1").json(ORDER), must_not_run(), ok_replay("m-1"))
        .step(T0 + 2, req("acct_1").method("Post").header(idem, "m-1").json(ORDER), must_not_run(), ok_replay("m-1"))
        .step(T0 + 3, req("acct_1").method("PUT").header(idem, "m-1").json(ORDER), must_not_run(), conflict("stripe")),
    );
    // --- the serve flow's capture and finish steps, and store failures ---------------
    let down = |claim, finish| StoreFails {
        claim,
        finish,
        unavailable: true,
    };
    let erring = |claim, finish| StoreFails {
        claim,
        finish,
        unavailable: false,
    };
    cases.push(
        CaseSpec::new(
            "a-failed-completion-is-tried-again-then-stored",
            "The store cannot be reached for the first two completions: the core asks the runner to wait (100 ms, then 200 ms) and tries again; the third is stored. The handler's answer goes out as it was (Set-Cookie and X-Request-Id included); the replay restores only the allow-listed headers.",
            stripe(),
        )
        .failing(T0, req("acct_1").route("/v1/charges").header(idem, "fin-1").json(ORDER), created("ch_f1"), down(0, 2), handler().finishing(Some("stored"), 2))
        .step(T0 + 1, req("acct_1").route("/v1/charges").header(idem, "fin-1").json(ORDER), must_not_run(), created_replay("ch_f1")),
    );
    cases.push(
        CaseSpec::new(
            "a-completion-the-store-refuses-is-left-in-flight",
            "The store answers the completion with an error (not a failure to reach it): it is not tried again, the handler's answer still goes out, and the record stays in flight (409) for recovery; it is never released.",
            ietf(),
        )
        .failing(T0, req("shop-1").header(idem, "fin-2").json(ORDER), created("ord_f2"), erring(0, 1), handler().finishing(None, 0))
        .step(T0 + 1, req("shop-1").header(idem, "fin-2").json(ORDER), must_not_run(), in_flight("ietf", 1)),
    );
    cases.push(
        CaseSpec::new(
            "a-claim-the-store-fails-runs-nothing",
            "The store cannot be reached for the claim: 503 with Retry-After, nothing run, nothing stored; a store that answers the claim with an error (a record it cannot decode): the profile's 500, nothing run. The retry runs once and is replayed.",
            ofb(),
        )
        .failing(T0, req("itp-1").route("/pix/payments").header(ofb_header, "pix-f3").json(ORDER), must_not_run(), down(1, 0), unavailable("ofb", false))
        .failing(T0 + 1, req("itp-1").route("/pix/payments").header(ofb_header, "pix-f3").json(ORDER), must_not_run(), erring(1, 0), unavailable("ofb", true))
        .step(T0 + 2, req("itp-1").route("/pix/payments").header(ofb_header, "pix-f3").json(ORDER), created("pix_f3"), handler())
        .step(T0 + 3, req("itp-1").route("/pix/payments").header(ofb_header, "pix-f3").json(ORDER), must_not_run(), created_replay("pix_f3")),
    );
    cases.push(
        CaseSpec::new(
            "a-raised-client-error-releases-the-claim",
            "The handler chain raises an error with a 4xx status (a body parser's 400) instead of answering: the claim is released and the error answered unstored, so the retry runs (never 409); a raised 5xx is the core's 500 and the record stays in flight.",
            ietf(),
        )
        .step(T0, req("shop-1").header(idem, "raise-1").json(ORDER), Handler::Raises(400), released())
        .step(T0 + 1, req("shop-1").header(idem, "raise-1").json(ORDER), created("ord_r1"), handler())
        .step(T0 + 2, req("shop-1").header(idem, "raise-1").json(ORDER), must_not_run(), created_replay("ord_r1"))
        .step(T0 + 3, req("shop-1").header(idem, "raise-2").json(ORDER), Handler::Raises(502), failed("ietf"))
        .step(T0 + 4, req("shop-1").header(idem, "raise-2").json(ORDER), must_not_run(), in_flight("ietf", 1)),
    );
    cases
}

/// The `POST /orders` policy: sku and qty are compared, trace_id is ignored.
pub fn order_policy() -> String {
    r#"{"fields":{"qty":{"class":"fingerprint"},"sku":{"class":"fingerprint"},"trace_id":{"class":"ignored"}},"version":1}"#
        .to_owned()
}

// --- fingerprints ----------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct FingerprintSpec {
    pub comment: &'static str,
    pub tenant: &'static str,
    pub method: &'static str,
    pub route: &'static str,
    pub content_type: Option<&'static str>,
    pub body: Vec<u8>,
    pub policy: bool,
    /// Must equal (`Some(true)`) or differ from (`Some(false)`) entry `.0`'s fingerprint.
    pub relation: Option<(usize, bool)>,
}

fn fp(comment: &'static str, content_type: Option<&'static str>, body: &[u8]) -> FingerprintSpec {
    FingerprintSpec {
        comment,
        tenant: "shop-1",
        method: "POST",
        route: "/orders",
        content_type,
        body: body.to_vec(),
        policy: false,
        relation: None,
    }
}

impl FingerprintSpec {
    fn same_as(mut self, i: usize) -> Self {
        self.relation = Some((i, true));
        self
    }

    fn differs_from(mut self, i: usize) -> Self {
        self.relation = Some((i, false));
        self
    }
}

pub fn fingerprints() -> Vec<FingerprintSpec> {
    let json = Some("application/json");
    let form = Some("application/x-www-form-urlencoded");
    vec![
        /* 0 */ fp("JSON: members sorted, no whitespace", json, ORDER.as_bytes()),
        /* 1 */ fp("JSON: another member order, whitespace and 2.0", json, b"{ \"qty\" : 2.0,\n \"sku\" : \"A1\" }").same_as(0),
        /* 2 */ FingerprintSpec { method: "post", ..fp("the method is uppercased", json, ORDER.as_bytes()) }.same_as(0),
        /* 3 */ fp("a charset parameter does not change the kind", Some("Application/JSON; charset=utf-8"), ORDER.as_bytes()).same_as(0),
        /* 4 */ fp("+json media types are JSON", Some("application/vnd.api+json"), ORDER.as_bytes()).same_as(0),
        /* 5 */ fp("a \\u escape is the character it escapes", json, br#"{"note":"caf\u00e9 \ud83d\ude00"}"#),
        /* 6 */ fp("the same text unescaped", json, "{\"note\":\"café 😀\"}".as_bytes()).same_as(5),
        /* 7 */ fp("numbers print as ECMAScript prints their double", json, br#"{"n":[1e2,-0,0.1,1.0,100000000000000000000,1e21,5e-7,123456789012345678901234567890,-1.5E+3]}"#),
        /* 8 */ fp("members sort by UTF-16 code units, nested objects too", json, "{\"\u{ff61}\":1,\"😀\":2,\"a\":{\"c\":1,\"b\":2},\"é\":3}".as_bytes()),
        /* 9 */ fp("strings keep only the escapes JSON requires", json, br#"{"s":"line\nbreak \"q\" \\ \u0001 \u007f </script> \/"}"#),
        /* 10 */ fp("a JSON array is canonical JSON too", json, b"[3, 1, 2, {\"b\":1,\"a\":null}]"),
        /* 11 */ fp("form pairs decoded and sorted by name then value", form, b"b=2&a=x+y&a=%C3%A9&c"),
        /* 12 */ fp("the same pairs in another order and encoding", form, b"c=&a=%C3%A9&a=x%20y&b=%32").same_as(11),
        /* 13 */ fp("a form that is not UTF-8 once decoded is its bytes", form, b"name=%E9"),
        /* 14 */ fp("text/plain: the bytes as sent", Some("text/plain"), b"hello  world\r\n"),
        /* 15 */ fp("binary bytes (the material is not UTF-8)", Some("application/octet-stream"), b"\x00\x01\xff\xfe%PDF\x00"),
        /* 16 */ fp("no Content-Type: bytes", None, ORDER.as_bytes()).differs_from(0),
        /* 17 */ fp("an empty body is no body, whatever its media type", json, b""),
        /* 18 */ FingerprintSpec { policy: true, ..fp("a policy drops its ignored fields (trace_id)", json, br#"{"sku":"A1","qty":2,"trace_id":"x-1"}"#) }.same_as(0),
        /* 19 */ fp("without the policy trace_id counts", json, br#"{"sku":"A1","qty":2,"trace_id":"x-1"}"#).differs_from(18),
        /* 20 */ FingerprintSpec { policy: true, ..fp("a policy drops only top-level members", json, br#"{"sku":"A1","qty":2,"meta":{"trace_id":"x-1"}}"#) }.differs_from(0),
        /* 21 */ FingerprintSpec { tenant: "loja-são-paulo", method: "put", route: "/orders/:id", ..fp("a Unicode tenant and a route template", json, ORDER.as_bytes()) }.differs_from(0),
        /* 22 */ FingerprintSpec { tenant: "shop-2", ..fp("another tenant, the same request", json, ORDER.as_bytes()) }.differs_from(0),
    ]
}

// --- storage keys ------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct StorageKeySpec {
    pub comment: &'static str,
    pub tenant: &'static str,
    pub profile: &'static str,
    pub header_value: String,
    pub client_key: String,
    /// Must equal (`Some(true)`) or differ from (`Some(false)`) entry `.0`'s storage key.
    pub relation: Option<(usize, bool)>,
}

fn sk(
    comment: &'static str,
    tenant: &'static str,
    profile: &'static str,
    header_value: &str,
    client_key: &str,
    relation: Option<(usize, bool)>,
) -> StorageKeySpec {
    StorageKeySpec {
        comment,
        tenant,
        profile,
        header_value: header_value.to_owned(),
        client_key: client_key.to_owned(),
        relation,
    }
}

pub fn storage_keys() -> Vec<StorageKeySpec> {
    let k255 = "k".repeat(255);
    let k40 = "k".repeat(40);
    vec![
        /* 0 */
        sk(
            "a bare key",
            "tenant-a",
            "stripe",
            "order-1",
            "order-1",
            None,
        ),
        /* 1 */
        sk(
            "another tenant, the same key: another storage key",
            "tenant-b",
            "stripe",
            "order-1",
            "order-1",
            Some((0, false)),
        ),
        /* 2 */
        sk(
            "the profile does not enter the storage key: the quoted ietf form is the same key",
            "tenant-a",
            "ietf",
            "\"order-1\"",
            "order-1",
            Some((0, true)),
        ),
        /* 3 */
        sk(
            "nor does the header: ofb's key",
            "tenant-a",
            "ofb",
            "order-1",
            "order-1",
            Some((0, true)),
        ),
        /* 4 */
        sk(
            "spaces and tabs around a key are not part of it",
            "tenant-a",
            "stripe",
            " \torder-1  ",
            "order-1",
            Some((0, true)),
        ),
        /* 5 */
        sk(
            "sf-string escapes unescape",
            "tenant-a",
            "ietf",
            r#""a\"b\\c""#,
            r#"a"b\c"#,
            None,
        ),
        /* 6 */
        sk(
            "spaces inside quotes are part of the key",
            "tenant-a",
            "ietf",
            "\" spaced key \"",
            " spaced key ",
            None,
        ),
        /* 7 */
        sk(
            "the longest stripe key",
            "tenant-a",
            "stripe",
            &k255,
            &k255,
            None,
        ),
        /* 8 */ sk("the longest ofb key", "tenant-a", "ofb", &k40, &k40, None),
        /* 9 */
        sk(
            "a Unicode tenant",
            "loja-são-paulo",
            "stripe",
            "pedido-1",
            "pedido-1",
            None,
        ),
        /* 10 */
        sk(
            "quotes are part of a stripe key",
            "tenant-a",
            "stripe",
            "\"order-1\"",
            "\"order-1\"",
            Some((0, false)),
        ),
        /* 11 */
        sk(
            "a bare ietf key is the same key as its quoted form",
            "tenant-a",
            "ietf",
            "order-1",
            "order-1",
            Some((0, true)),
        ),
    ]
}

// --- the endpoint's fixed answers ----------------------------------------------------------

#[derive(Clone, Debug)]
pub struct AnswerSpec {
    pub comment: String,
    pub endpoint: EndpointConfig,
    pub call: &'static str,
    pub now: i64,
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

pub fn endpoint_answers() -> Vec<AnswerSpec> {
    let mut out = Vec::new();
    for (profile, retry, max) in [("ietf", 1, 1_048_576), ("stripe", 7, 16), ("ofb", 30, 40)] {
        let endpoint = EndpointConfig {
            retry_after_seconds: retry,
            max_body_bytes: max,
            ..EndpointConfig::defaults(profile)
        };
        let ct = ("Content-Type".to_owned(), error_type(profile).to_owned());
        out.push(AnswerSpec {
            comment: format!("{profile}: 413 for a body over {max} bytes"),
            endpoint: endpoint.clone(),
            call: "too-large",
            now: T0,
            status: 413,
            headers: vec![ct.clone()],
        });
        out.push(AnswerSpec {
            comment: format!(
                "{profile}: 503 with Retry-After {retry} when the store is unreachable"
            ),
            endpoint: endpoint.clone(),
            call: "unavailable",
            now: T0 + 3600,
            status: 503,
            headers: vec![ct.clone(), ("Retry-After".to_owned(), retry.to_string())],
        });
        out.push(AnswerSpec {
            comment: format!("{profile}: 500 when the handler failed, no stack trace"),
            endpoint,
            call: "failed",
            now: T0 + 86_400,
            status: 500,
            headers: vec![ct],
        });
    }
    out
}
