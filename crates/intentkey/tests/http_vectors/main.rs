//! The HTTP conformance vectors (`tests/vectors/http/http_test.json`) on
//! the native core, and their generator.
//!
//! - `native_core_passes_the_http_vectors`: every case through
//!   `Endpoint` + `MemoryClaims` + `drive`, compared with the file, plus
//!   invariants that do not come from the file or the core: the status each
//!   documented rule gives, `Idempotent-Replayed` on replays only,
//!   `Retry-After` on 409 only, the shape of each profile's answer, no
//!   stack trace or secret in any body, replays equal to an independent
//!   replay of what the handler answered, and the handler running at most
//!   once per key unless released.
//! - `the_committed_file_is_what_the_generator_writes`: regenerates the file
//!   from `spec.rs` in memory and compares. With
//!   `INTENTKEY_WRITE_HTTP_VECTORS=1` it writes the file instead.
//! - `the_runner_can_fail`: altered vectors and a misbehaving subject fail.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod native;
mod spec;

use std::collections::{BTreeMap, BTreeSet};

use intentkey::http::{
    request_fingerprint, request_fingerprint_material, storage_key, storage_key_material, Options,
    Profile, Request, PROBLEM_TYPE_BASE,
};
use intentkey::{Policy, Secret};
use intentkey_vectors::http::{
    self as v, http_vector_file, run_http, run_step, step_problems, to_hex, HttpSubject,
    HttpVectors,
};
use serde_json::Value;

use native::Native;

const GENERATOR_VERSION: &str = "1";

const HEADER: [&str; 4] = [
    "HTTP conformance vectors: every runtime runs each case through the same adapter pipeline (tests/vectors/README.md, section HTTP vectors) on a fresh memory store.",
    "Written in crates/intentkey/tests/http_vectors/spec.rs: requests, handlers, and for every step the path, whether the handler runs, the status and the exact headers, from the documented rules.",
    "The generator (the native core) fills in only the bodies of the core's own answers and the hex values (fingerprints, materials, storage keys), and refuses to write when the core disagrees with the spec.",
    "Regenerate: INTENTKEY_WRITE_HTTP_VECTORS=1 cargo test -p intentkey --test http_vectors. Check: cargo test -p intentkey --test http_vectors.",
];

// --- generator -------------------------------------------------------------------

fn generate() -> Result<HttpVectors, Vec<String>> {
    let secret = spec::secret();
    let mut native = Native::default();
    let mut problems = Vec::new();
    let mut cases = Vec::new();
    for c in spec::cases() {
        let header_name = spec::header_name(c.profile()).to_owned();
        native.start_case(&secret, &c.endpoint).unwrap();
        let got = native.header_name().unwrap();
        if got != header_name {
            problems.push(format!(
                "{}: header name {got}, the rules say {header_name}",
                c.name
            ));
        }
        let mut case = v::Case {
            name: c.name.to_owned(),
            comment: c.comment.to_owned(),
            endpoint: c.endpoint.clone(),
            release_statuses: c.release_statuses.clone(),
            header_name: header_name.clone(),
            steps: Vec::new(),
        };
        for (i, s) in c.steps.iter().enumerate() {
            let label = format!("{}#{}", c.name, i + 1);
            let mut step = v::Step {
                now: s.now,
                request: s.request.clone(),
                handler: s.handler.clone(),
                store_fails: s.store_fails,
                expect: v::Expected {
                    kind: s.want.kind.to_owned(),
                    refusal: s.want.refusal.map(str::to_owned),
                    ran: s.want.ran,
                    reply: v::Reply {
                        status: 0,
                        headers: Vec::new(),
                        body: Vec::new(),
                    },
                    finished: s
                        .want
                        .finished
                        .unwrap_or_else(|| {
                            derived_finished(s.want.kind, &s.handler, &c.release_statuses)
                        })
                        .map(str::to_owned),
                    finish_retries: s.want.finish_retries,
                },
            };
            let trace = match run_step(&mut native, &header_name, &c.release_statuses, &step) {
                Ok(trace) => trace,
                Err(e) => {
                    problems.push(format!("{label}: {e}"));
                    continue;
                }
            };
            step.expect.reply = match (s.want.kind, &s.handler) {
                ("handler" | "unguarded", v::Handler::Responds(response)) => response.as_is(),
                ("released", handler @ v::Handler::Raises(_)) => handler.sent().expect("a status"),
                ("handler" | "unguarded" | "released", _) => {
                    problems.push(format!(
                        "{label}: the spec expects a response from a throwing handler"
                    ));
                    continue;
                }
                _ => v::Reply {
                    status: s.want.status.expect("a status"),
                    headers: s.want.headers.clone().expect("headers"),
                    body: s
                        .want
                        .body
                        .clone()
                        .unwrap_or_else(|| trace.reply.body.clone()),
                },
            };
            let disagreements = step_problems(&step, &trace);
            if !disagreements.is_empty() {
                problems.push(format!(
                    "{label}: the core disagrees with the spec:\n    {}",
                    disagreements.join("\n    ")
                ));
            }
            case.steps.push(step);
        }
        cases.push(case);
    }

    let secret_key = Secret::new(secret.clone()).unwrap();
    let policy = Policy::from_json(&spec::order_policy()).unwrap();
    let mut fingerprints: Vec<v::FingerprintVector> = Vec::new();
    for (i, f) in spec::fingerprints().into_iter().enumerate() {
        let request = Request {
            tenant_id: f.tenant,
            method: f.method,
            route: f.route,
            content_type: f.content_type,
            body: &f.body,
        };
        let policy = f.policy.then_some(&policy);
        let material = request_fingerprint_material(&request, policy).unwrap();
        let fingerprint = request_fingerprint(&secret_key, &request, policy)
            .unwrap()
            .into_string();
        if let Some((j, same)) = f.relation {
            let other: &v::FingerprintVector = &fingerprints[j];
            if (other.fingerprint == fingerprint) != same {
                problems.push(format!(
                    "fingerprints[{i}] ({}): the spec says it {} fingerprints[{j}]",
                    f.comment,
                    if same { "equals" } else { "differs from" }
                ));
            }
        }
        fingerprints.push(v::FingerprintVector {
            comment: f.comment.to_owned(),
            tenant: f.tenant.to_owned(),
            method: f.method.to_owned(),
            route: f.route.to_owned(),
            content_type: f.content_type.map(str::to_owned),
            body: f.body.clone(),
            policies: if f.policy {
                vec![("POST /orders".to_owned(), spec::order_policy())]
            } else {
                Vec::new()
            },
            action_type: format!("{} {}", f.method.to_ascii_uppercase(), f.route),
            material,
            fingerprint,
        });
    }

    let mut storage_keys: Vec<v::StorageKeyVector> = Vec::new();
    for (i, s) in spec::storage_keys().into_iter().enumerate() {
        let options = Options::new(Profile::parse(s.profile).unwrap());
        let client_key = match options.client_key_from_values([s.header_value.as_str()]) {
            Ok(key) => key,
            Err(e) => {
                problems.push(format!("storage_keys[{i}]: the key is refused: {e}"));
                continue;
            }
        };
        if client_key.as_str() != s.client_key {
            problems.push(format!(
                "storage_keys[{i}]: the header parses to {:?}, the spec says {:?}",
                client_key.as_str(),
                s.client_key
            ));
        }
        let material =
            String::from_utf8(storage_key_material(s.tenant, &client_key).unwrap()).unwrap();
        let key = storage_key(&secret_key, s.tenant, &client_key)
            .unwrap()
            .as_str()
            .to_owned();
        if let Some((j, same)) = s.relation {
            if (storage_keys[j].storage_key == key) != same {
                problems.push(format!(
                    "storage_keys[{i}] ({}): the spec says it {} storage_keys[{j}]",
                    s.comment,
                    if same { "equals" } else { "differs from" }
                ));
            }
        }
        storage_keys.push(v::StorageKeyVector {
            comment: s.comment.to_owned(),
            tenant: s.tenant.to_owned(),
            profile: s.profile.to_owned(),
            header_value: s.header_value,
            client_key: s.client_key,
            material,
            storage_key: key,
        });
    }

    let mut endpoint_answers = Vec::new();
    for (i, a) in spec::endpoint_answers().into_iter().enumerate() {
        native.start_case(&secret, &a.endpoint).unwrap();
        let reply = match a.call {
            "too-large" => native.too_large(a.now),
            "unavailable" => native.unavailable(a.now),
            _ => native.failed(a.now),
        }
        .unwrap();
        if (reply.status, &reply.headers) != (a.status, &a.headers) {
            problems.push(format!(
                "endpoint_answers[{i}] ({}): the core answers {} {:?}, the spec says {} {:?}",
                a.comment, reply.status, reply.headers, a.status, a.headers
            ));
        }
        endpoint_answers.push(v::AnswerVector {
            comment: a.comment,
            endpoint: a.endpoint,
            call: a.call.to_owned(),
            now: a.now,
            expect: v::Reply {
                status: a.status,
                headers: a.headers,
                body: reply.body,
            },
        });
    }

    if problems.is_empty() {
        Ok(HttpVectors {
            secret,
            cases,
            fingerprints,
            storage_keys,
            endpoint_answers,
        })
    } else {
        Err(problems)
    }
}

fn generated_text() -> String {
    match generate() {
        Ok(vectors) => vectors.to_json(GENERATOR_VERSION, &HEADER),
        Err(problems) => panic!(
            "the core disagrees with the documented rules in spec.rs; no file written:\n{}",
            problems.join("\n")
        ),
    }
}

#[test]
fn the_committed_file_is_what_the_generator_writes() {
    let text = generated_text();
    // The writer and the parser agree.
    let reparsed = HttpVectors::parse(&text).unwrap();
    assert_eq!(reparsed.to_json(GENERATOR_VERSION, &HEADER), text);
    let path = http_vector_file();
    if std::env::var_os("INTENTKEY_WRITE_HTTP_VECTORS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is not what the generator writes: regenerate with \
         INTENTKEY_WRITE_HTTP_VECTORS=1 cargo test -p intentkey --test http_vectors",
        path.display()
    );
}

// --- invariants that do not come from the file ------------------------------------------

/// Headers a replay never restores (hop-by-hop, Content-Length, the marker).
const NEVER_REPLAYED: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "idempotent-replayed",
];

/// The replay of a stored response, by the documented rule: status, body,
/// Content-Type, the allow-listed stored headers in order, then
/// `Idempotent-Replayed: true`.
fn expected_replay(stored: &v::Response, allow: &[String]) -> v::Reply {
    let allowed = |name: &str| {
        allow.iter().any(|h| h.eq_ignore_ascii_case(name))
            && !NEVER_REPLAYED.iter().any(|h| h.eq_ignore_ascii_case(name))
    };
    let mut headers = Vec::new();
    let mut has_type = false;
    if !stored.content_type.is_empty() && allowed("Content-Type") {
        headers.push(("Content-Type".to_owned(), stored.content_type.clone()));
        has_type = true;
    }
    for (n, value) in &stored.headers {
        let is_type = n.eq_ignore_ascii_case("content-type");
        if allowed(n) && !(is_type && has_type) {
            headers.push((n.clone(), value.clone()));
            has_type |= is_type;
        }
    }
    headers.push(("Idempotent-Replayed".to_owned(), "true".to_owned()));
    v::Reply {
        status: stored.status,
        headers,
        body: stored.body.clone(),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time (days to civil date, proleptic Gregorian).
fn rfc3339(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Why the core answered, in the terms of the documented tables.
fn reason<'a>(kind: &'a str, refusal: Option<&'a str>, fails: v::StoreFails) -> &'a str {
    match (kind, fails.unavailable) {
        // A store that answered the claim with an error: the core's 500.
        ("unavailable", false) => "failed",
        _ => refusal.unwrap_or(kind),
    }
}

/// The status each documented rule gives.
fn documented_status(profile: &str, why: &str) -> Option<u16> {
    Some(match why {
        "key-missing" | "key-invalid" | "key-too-long" | "body-invalid" => 400,
        "too-large" => 413,
        "in-flight" => 409,
        "payload-conflict" if profile == "stripe" => 400,
        "payload-conflict" => 422,
        "failed" => 500,
        "unavailable" => 503,
        _ => return None,
    })
}

/// The shape each profile's answer must have, for `why`.
fn answer_shape(profile: &str, why: &str, status: u16, now: i64, body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(doc) = serde_json::from_slice::<Value>(body) else {
        return vec![format!("the {profile} answer is not JSON")];
    };
    match profile {
        "ietf" => {
            let slug = match why {
                "key-missing" => "idempotency-key-missing",
                "key-invalid" => "idempotency-key-invalid",
                "key-too-long" => "idempotency-key-too-long",
                "body-invalid" => "request-body-invalid",
                "too-large" => "request-too-large",
                "in-flight" => "request-in-flight",
                "payload-conflict" => "idempotency-key-reused",
                "unavailable" => "store-unavailable",
                _ => "outcome-unknown",
            };
            let start = format!("{{\"type\":\"{PROBLEM_TYPE_BASE}{slug}\",\"title\":");
            if !body.starts_with(start.as_bytes()) {
                out.push(format!("the problem does not start with {start}"));
            }
            let members: Vec<&String> = doc
                .as_object()
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            if members != ["detail", "status", "title", "type"] {
                out.push(format!("the problem's members are {members:?}"));
            }
            if doc["status"].as_u64() != Some(u64::from(status)) {
                out.push(format!("the problem's status is {}", doc["status"]));
            }
        }
        "stripe" => {
            let kind = match why {
                "in-flight" | "payload-conflict" => "idempotency_error",
                "failed" | "unavailable" => "api_error",
                _ => "invalid_request_error",
            };
            if doc["error"]["type"] != kind {
                out.push(format!(
                    "error.type is {}, want {kind}",
                    doc["error"]["type"]
                ));
            }
            let code = (why == "in-flight").then_some("idempotency_key_in_use");
            if doc["error"]["code"].as_str() != code {
                out.push(format!("error.code is {}", doc["error"]["code"]));
            }
            if doc["error"]["message"].as_str().is_none_or(str::is_empty) {
                out.push("error.message is missing".into());
            }
        }
        _ => {
            let code = match why {
                "key-missing" => "PARAMETRO_NAO_INFORMADO",
                "key-invalid" | "key-too-long" | "body-invalid" => "PARAMETRO_INVALIDO",
                "too-large" => "TAMANHO_EXCEDIDO",
                "in-flight" | "payload-conflict" => "ERRO_IDEMPOTENCIA",
                "unavailable" => "SERVICO_INDISPONIVEL",
                _ => "ERRO_INTERNO",
            };
            if doc["errors"][0]["code"] != code {
                out.push(format!(
                    "errors[0].code is {}, want {code}",
                    doc["errors"][0]["code"]
                ));
            }
            if doc["errors"].as_array().map(Vec::len) != Some(1) {
                out.push("errors has not exactly one entry".into());
            }
            let date = rfc3339(now);
            if doc["meta"]["requestDateTime"] != date.as_str() {
                out.push(format!(
                    "meta.requestDateTime is {}, want {date}",
                    doc["meta"]["requestDateTime"]
                ));
            }
        }
    }
    out
}

/// What no body may hold: a stack trace, a panic, a source path, the secret.
fn leaks(body: &[u8], secret_hex: &str) -> Option<String> {
    let text = String::from_utf8_lossy(body).to_ascii_lowercase();
    [
        "panicked",
        "backtrace",
        "stack",
        ".rs:",
        "src/",
        "\n    at ",
        "traceback",
        "rust_",
        secret_hex,
    ]
    .into_iter()
    .find(|needle| text.contains(needle))
    .map(|needle| format!("the body holds {needle:?}"))
}

/// The per-case state the invariants follow: what each storage key holds.
#[derive(Default)]
struct Invariants {
    secret_hex: String,
    stored: BTreeMap<String, v::Response>,
    in_flight: BTreeSet<String>,
    runs: BTreeMap<String, usize>,
    replays: usize,
    core_answers: usize,
}

impl Invariants {
    fn inspect(&mut self, case: &v::Case, i: usize, trace: &v::Trace) -> Vec<String> {
        if i == 0 {
            self.stored.clear();
            self.in_flight.clear();
            self.runs.clear();
        }
        let step = &case.steps[i];
        let profile = case.endpoint.profile.as_str();
        let reply = &trace.reply;
        let mut out = Vec::new();
        let replayed: Vec<&str> = reply
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("idempotent-replayed"))
            .map(|(_, v)| v.as_str())
            .collect();
        let retry_after: Vec<&str> = reply
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("retry-after"))
            .map(|(_, v)| v.as_str())
            .collect();
        if let Some(leak) = leaks(&reply.body, &self.secret_hex) {
            out.push(leak);
        }
        let key = trace.attempt.as_ref().map(|a| a.key.clone());
        match trace.kind {
            "replay" => {
                self.replays += 1;
                if replayed != ["true"]
                    || reply.headers.last().map(|(n, _)| n.as_str()) != Some("Idempotent-Replayed")
                {
                    out.push("a replay must end with exactly one Idempotent-Replayed: true".into());
                }
                match key.as_ref().and_then(|k| self.stored.get(k)) {
                    Some(stored) => {
                        let want = expected_replay(stored, &case.endpoint.replay_headers);
                        if let Some(diff) = v::reply_diff(&want, reply) {
                            out.push(format!(
                                "the replay is not the stored answer replayed: {diff}"
                            ));
                        }
                    }
                    None => out.push("a replay of a key no handler answered".into()),
                }
            }
            "handler" | "unguarded" | "failed" | "released" => {
                if !replayed.is_empty() {
                    out.push("a first answer carries Idempotent-Replayed".into());
                }
                if let Some(key) = &key {
                    if self.stored.contains_key(key) || self.in_flight.contains(key) {
                        out.push(
                            "the handler ran again for a key that is stored or in flight".into(),
                        );
                    }
                    *self.runs.entry(key.clone()).or_default() += 1;
                    match trace.finished.as_deref() {
                        Some("stored") => {
                            if let v::Handler::Responds(r) = &step.handler {
                                self.stored.insert(key.clone(), r.clone());
                            }
                        }
                        // Left in flight: the handler failed, or the store
                        // failed every try to finish it.
                        Some("left-in-flight") | None => {
                            self.in_flight.insert(key.clone());
                        }
                        Some("released") => {}
                        other => out.push(format!("finished {other:?}")),
                    }
                } else if trace.kind != "unguarded" {
                    out.push("a guarded handler ran without an attempt".into());
                }
                if trace.kind == "unguarded" {
                    let sent_key = step.request.headers.iter().any(|(n, value)| {
                        n.eq_ignore_ascii_case(&case.header_name)
                            && !value.trim_matches([' ', '\t']).is_empty()
                    });
                    if sent_key || case.endpoint.key_required {
                        out.push("unguarded although a key was sent or keys are required".into());
                    }
                }
            }
            kind => {
                self.core_answers += 1;
                if !replayed.is_empty() {
                    out.push("a refusal carries Idempotent-Replayed".into());
                }
                if trace.ran {
                    out.push("the handler ran for a refusal".into());
                }
                let why = reason(kind, step.expect.refusal.as_deref(), step.store_fails);
                match key.as_ref() {
                    Some(k) if kind == "in-flight" && !self.in_flight.contains(k) => {
                        out.push("409 for a key that is not in flight".into());
                    }
                    Some(k)
                        if kind == "payload-conflict"
                            && !self.stored.contains_key(k)
                            && !self.in_flight.contains(k) =>
                    {
                        out.push("a conflict on a key with no record".into());
                    }
                    None if kind != "refused" => {
                        out.push("a claim answer without an attempt".into())
                    }
                    _ => {}
                }
                if let Some(refused) = &step.expect.refusal {
                    for (n, value) in &step.request.headers {
                        if n.eq_ignore_ascii_case(&case.header_name)
                            && value.len() >= 6
                            && refused.starts_with("key-")
                            && String::from_utf8_lossy(&reply.body).contains(value.as_str())
                        {
                            out.push("a key refusal repeats the key sent".into());
                        }
                    }
                }
                out.extend(answer_shape(
                    profile,
                    why,
                    reply.status,
                    step.now,
                    &reply.body,
                ));
            }
        }
        // Statuses by the documented rules.
        let want_status = match trace.kind {
            "handler" | "unguarded" | "released" => match &step.handler {
                v::Handler::Responds(r) => Some(r.status),
                v::Handler::Raises(status) => Some(*status),
                v::Handler::Throws => None,
            },
            "replay" => key
                .as_ref()
                .and_then(|k| self.stored.get(k))
                .map(|r| r.status),
            kind => documented_status(
                profile,
                reason(kind, step.expect.refusal.as_deref(), step.store_fails),
            ),
        };
        if want_status != Some(reply.status) {
            out.push(format!(
                "status {} where the rules give {want_status:?}",
                reply.status
            ));
        }
        // Retry-After: the endpoint's, on a 409 only (the handler's own are its business).
        if trace.kind == "in-flight" {
            let want = case.endpoint.retry_after_seconds.to_string();
            if retry_after != [want.as_str()] {
                out.push(format!(
                    "a 409 must carry Retry-After: {want}, it has {retry_after:?}"
                ));
            }
        } else if trace.kind == "unavailable" && step.store_fails.unavailable {
            let want = case.endpoint.retry_after_seconds.to_string();
            if retry_after != [want.as_str()] {
                out.push(format!(
                    "a 503 must carry Retry-After: {want}, it has {retry_after:?}"
                ));
            }
        } else if !matches!(trace.kind, "handler" | "unguarded") && !retry_after.is_empty() {
            out.push("Retry-After on an answer that is not a 409 or 503".into());
        }
        // Content-Type of the core's own answers.
        if matches!(
            trace.kind,
            "failed" | "in-flight" | "payload-conflict" | "refused" | "unavailable"
        ) {
            let want = spec::error_type(profile);
            if reply.headers.first() != Some(&("Content-Type".to_owned(), want.to_owned())) {
                out.push(format!(
                    "the answer's first header is not Content-Type: {want}"
                ));
            }
        }
        out
    }
}

#[test]
fn native_core_passes_the_http_vectors() {
    let vectors = HttpVectors::load().unwrap_or_else(|e| panic!("{e}"));
    let mut invariants = Invariants {
        secret_hex: to_hex(&vectors.secret),
        ..Invariants::default()
    };
    let mut native = Native::default();
    let report = run_http(&mut native, &vectors, &mut |case, i, trace| {
        invariants.inspect(case, i, trace)
    });
    report.assert_passed("native");
    // What the file covers, counted independently of its expectations.
    let expected_runs: usize = vectors
        .cases
        .iter()
        .flat_map(|c| &c.steps)
        .filter(|s| s.expect.ran)
        .count();
    assert_eq!(report.handler_runs, expected_runs);
    eprintln!(
        "native: invariants held on {} replays and {} answers of the core's own",
        invariants.replays, invariants.core_answers
    );
    assert!(invariants.replays > 20 && invariants.core_answers > 40);
    let mut kinds: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for case in &vectors.cases {
        for step in &case.steps {
            let why = step.expect.refusal.as_deref().unwrap_or(&step.expect.kind);
            *kinds
                .entry((case.endpoint.profile.as_str(), why))
                .or_default() += 1;
        }
    }
    for profile in ["ietf", "stripe", "ofb"] {
        for why in [
            "handler",
            "failed",
            "replay",
            "in-flight",
            "payload-conflict",
            "key-missing",
            "key-invalid",
            "key-too-long",
            "body-invalid",
            "too-large",
        ] {
            assert!(
                kinds.contains_key(&(profile, why)),
                "no {profile} step covers {why}"
            );
        }
    }
    assert!(kinds.contains_key(&("ietf", "unguarded")));

    // The materials, which only the native core exposes.
    for (i, f) in vectors.fingerprints.iter().enumerate() {
        let policy = f
            .policies
            .first()
            .map(|(_, json)| Policy::from_json(json).unwrap());
        let request = Request {
            tenant_id: &f.tenant,
            method: &f.method,
            route: &f.route,
            content_type: f.content_type.as_deref(),
            body: &f.body,
        };
        let material = request_fingerprint_material(&request, policy.as_ref()).unwrap();
        assert_eq!(material, f.material, "fingerprints[{i}] material");
    }
    for (i, s) in vectors.storage_keys.iter().enumerate() {
        let options = Options::new(Profile::parse(&s.profile).unwrap());
        let key = options
            .client_key_from_values([s.header_value.as_str()])
            .unwrap();
        assert_eq!(key.as_str(), s.client_key, "storage_keys[{i}] client key");
        let material = storage_key_material(&s.tenant, &key).unwrap();
        assert_eq!(
            String::from_utf8(material).unwrap(),
            s.material,
            "storage_keys[{i}] material"
        );
    }
}

// --- the runner can fail -----------------------------------------------------------------

/// A subject that runs the handler where it must not: it forgets every
/// record before each request, so every claim is owned.
struct Forgetful(Native);

impl HttpSubject for Forgetful {
    fn start_case(&mut self, secret: &[u8], endpoint: &v::EndpointConfig) -> Result<(), String> {
        self.0.start_case(secret, endpoint)
    }
    fn header_name(&mut self) -> Result<String, String> {
        self.0.header_name()
    }
    fn admit(&mut self, request: &v::Incoming, now: i64) -> Result<v::Admission, String> {
        self.0.admit(request, now)
    }
    fn too_large(&mut self, now: i64) -> Result<v::Reply, String> {
        self.0.too_large(now)
    }
    fn unavailable(&mut self, now: i64) -> Result<v::Reply, String> {
        self.0.unavailable(now)
    }
    fn failed(&mut self, now: i64) -> Result<v::Reply, String> {
        self.0.failed(now)
    }
    fn serve(
        &mut self,
        request: &v::Incoming,
        now: i64,
        handler: &v::Handler,
        fails: v::StoreFails,
        release: &[u16],
    ) -> Result<v::Served, String> {
        self.0.forget();
        self.0.serve(request, now, handler, fails, release)
    }
}

fn case<'a>(vectors: &'a mut HttpVectors, name: &str) -> &'a mut v::Case {
    vectors
        .cases
        .iter_mut()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

#[test]
fn the_runner_can_fail() {
    let vectors = HttpVectors::load().unwrap_or_else(|e| panic!("{e}"));
    let run = |vectors: &HttpVectors| {
        run_http(&mut Native::default(), vectors, &mut |_, _, _| Vec::new())
    };
    assert!(run(&vectors).failures.is_empty());

    // One byte of one replayed body.
    let mut altered = vectors.clone();
    let step = case(&mut altered, "binary-body-replayed-byte-for-byte").steps[1]
        .expect
        .reply
        .body
        .get_mut(12)
        .unwrap();
    *step ^= 1;
    let report = run(&altered);
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert!(report.failures[0].starts_with("binary-body-replayed-byte-for-byte#2: body"));
    assert_eq!(report.steps_passed + 1, report.steps);

    // A header's case, a status, a fingerprint, a storage key, a fixed answer.
    let mut altered = vectors.clone();
    case(&mut altered, "ietf-first-request-then-replay").steps[1]
        .expect
        .reply
        .headers[2]
        .0 = "idempotent-replayed".into();
    case(&mut altered, "ambiguous-throw-then-409-ietf").steps[1]
        .expect
        .reply
        .status = 429;
    altered.fingerprints[0].fingerprint.replace_range(0..1, "x");
    altered.storage_keys[1].storage_key = altered.storage_keys[0].storage_key.clone();
    altered.endpoint_answers[1].expect.headers.pop();
    let report = run(&altered);
    assert_eq!(report.failures.len(), 5, "{:#?}", report.failures);
    assert_eq!(report.cases_passed + 2, report.cases);

    // A path and a handler run.
    let mut altered = vectors.clone();
    case(&mut altered, "ietf-first-request-then-replay").steps[1]
        .expect
        .kind = "handler".into();
    case(&mut altered, "ietf-first-request-then-replay").steps[1]
        .expect
        .ran = true;
    assert_eq!(run(&altered).failures.len(), 1);

    // A runtime that forgets what it stored runs handlers it must not.
    let report = run_http(
        &mut Forgetful(Native::default()),
        &vectors,
        &mut |_, _, _| Vec::new(),
    );
    assert!(report.failures.len() > 30, "{}", report.failures.len());
    assert!(report.handler_runs > run(&vectors).handler_runs);

    // The invariants catch, on their own, a wrong status, a replay that is
    // not the stored answer and a leaked trace.
    let mut invariants = Invariants::default();
    let report = run_http(&mut Native::default(), &vectors, &mut |case, i, trace| {
        let mut trace = trace.clone();
        match (case.name.as_str(), i) {
            ("ambiguous-throw-then-409-ietf", 1) => trace.reply.status = 410,
            ("ietf-first-request-then-replay", 1) => trace
                .reply
                .headers
                .insert(2, ("Set-Cookie".into(), "session=abc; HttpOnly".into())),
            ("payload-mismatch-stripe", 1) => trace
                .reply
                .body
                .extend_from_slice(b" panicked at src/lib.rs:1"),
            _ => {}
        }
        invariants.inspect(case, i, &trace)
    });
    let has = |needle: &str| report.failures.iter().any(|f| f.contains(needle));
    assert!(
        has("status 410 where the rules give Some(409)"),
        "{:#?}",
        report.failures
    );
    assert!(has("the replay is not the stored answer replayed"));
    assert!(has("the body holds \"panicked\""));
}

#[test]
fn rfc3339_dates() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
}

/// What finishing does, unless the spec says: it follows from the path, the
/// handler and the release statuses.
fn derived_finished(
    kind: &str,
    handler: &v::Handler,
    release_statuses: &[u16],
) -> Option<&'static str> {
    match (kind, handler) {
        ("handler", v::Handler::Responds(r)) if release_statuses.contains(&r.status) => {
            Some("released")
        }
        ("handler", _) => Some("stored"),
        ("failed", _) => Some("left-in-flight"),
        ("released", _) => Some("released"),
        _ => None,
    }
}
