//! The HTTP conformance vectors (`tests/vectors/http/http_test.json`), run
//! by every runtime through one adapter pipeline.
//!
//! A runtime implements [`HttpSubject`] (an endpoint, and claims over a
//! memory store); [`run_http`] walks every case, runs each step through
//! [`run_step`] (the pipeline, identical in every runner: see
//! `tests/vectors/README.md`), and compares what the runtime answered with
//! the vector: which path the request took, whether the handler ran, the
//! status, the exact header list and the exact body bytes. It also checks
//! the top-level `fingerprints`, `storage_keys` and `endpoint_answers`
//! lists through the endpoint.
//!
//! The Python (`py/tests/test_http_vectors.py`) and JavaScript
//! (`js/test/http-vector-runner.js`) runners implement the same pipeline.

use std::fmt::{self, Write as _};
use std::fs;
use std::path::PathBuf;

use serde_json::Value;

/// The `schema` member of the HTTP vector file.
pub const HTTP_SCHEMA: &str = "intentkey_http_vectors_v1";

/// The path kinds a step can take through the pipeline.
pub const KINDS: [&str; 9] = [
    "handler",
    "failed",
    "unguarded",
    "replay",
    "in-flight",
    "payload-conflict",
    "refused",
    "unavailable",
    "released",
];

/// What finishing a record can do (`expect.finished`).
pub const FINISHED: [&str; 4] = ["stored", "released", "left-in-flight", "superseded"];

/// Why a request is refused before any claim (`expect.refusal`).
pub const REFUSALS: [&str; 5] = [
    "key-missing",
    "key-invalid",
    "key-too-long",
    "body-invalid",
    "too-large",
];

/// The client key the `fingerprints` entries are admitted with.
pub const PROBE_KEY: &str = "fingerprint-probe";

/// The route the `storage_keys` entries are admitted on.
pub const STORAGE_KEY_ROUTE: &str = "/storage-key";

/// The documented default `max_body_bytes` (1 MiB), used by the probes.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;

/// The HTTP vector file.
pub fn http_vector_file() -> PathBuf {
    crate::vector_dir().join("http").join("http_test.json")
}

/// A response a handler gives, and the one a store keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status.
    pub status: u16,
    /// The media type of the body (may be empty).
    pub content_type: String,
    /// Other headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The reply an adapter sends for a response the handler gave: its
    /// status, `Content-Type` (when not empty), its headers as they are,
    /// its body.
    pub fn as_is(&self) -> Reply {
        let mut headers = Vec::with_capacity(self.headers.len() + 1);
        if !self.content_type.is_empty() {
            headers.push(("Content-Type".to_owned(), self.content_type.clone()));
        }
        headers.extend(self.headers.iter().cloned());
        Reply {
            status: self.status,
            headers,
            body: self.body.clone(),
        }
    }
}

/// An HTTP answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status.
    pub status: u16,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The first value of a header, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a claim needs (the endpoint's `guarded` admission).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The storage key.
    pub key: String,
    /// The request fingerprint.
    pub fingerprint: String,
    /// The tenant.
    pub tenant_id: String,
    /// `METHOD route`.
    pub action_type: String,
}

/// What the endpoint does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Claim this attempt.
    Guarded(Attempt),
    /// Run the handler unguarded.
    Unguarded,
    /// Answer this; run nothing.
    Refused(Reply),
}

/// An endpoint's options and route policies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    /// `ietf`, `stripe` or `ofb`.
    pub profile: String,
    /// `ietf` only: accept a key without quotes.
    pub strict_key_syntax: bool,
    /// The `Retry-After` of a 409 or 503.
    pub retry_after_seconds: u32,
    /// The stored headers a replay restores.
    pub replay_headers: Vec<String>,
    /// Whether a request without a key gets 400.
    pub key_required: bool,
    /// The largest body read.
    pub max_body_bytes: u64,
    /// `METHOD route` → policy document (JSON text), in file order.
    pub policies: Vec<(String, String)>,
}

impl EndpointConfig {
    /// A profile's documented defaults, no policies.
    pub fn defaults(profile: &str) -> Self {
        EndpointConfig {
            profile: profile.to_owned(),
            strict_key_syntax: false,
            retry_after_seconds: 1,
            replay_headers: vec!["Location".into(), "Content-Type".into()],
            key_required: true,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            policies: Vec::new(),
        }
    }
}

/// A request as an adapter reads it, handed to the endpoint's `admit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// The tenant.
    pub tenant_id: String,
    /// The method.
    pub method: String,
    /// The route.
    pub route: String,
    /// The values of the headers named as the endpoint's key header.
    pub key_values: Vec<String>,
    /// The `Content-Type` header.
    pub content_type: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// A request as a step sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The tenant the server assigns.
    pub tenant: String,
    /// The method.
    pub method: String,
    /// The route.
    pub route: String,
    /// Every header line, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// What an adapter hands the endpoint: the values of every header named
    /// `header_name` (case-insensitively), and the first `Content-Type`.
    pub fn incoming(&self, header_name: &str) -> Incoming {
        let key_values = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(header_name))
            .map(|(_, v)| v.clone())
            .collect();
        let content_type = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.clone());
        Incoming {
            tenant_id: self.tenant.clone(),
            method: self.method.clone(),
            route: self.route.clone(),
            key_values,
            content_type,
            body: self.body.clone(),
        }
    }
}

/// The handler's behaviour if it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handler {
    /// It answers this.
    Responds(Response),
    /// It throws (no status): its outcome is unknown.
    Throws,
    /// It raises an error carrying this HTTP status (a body parser's 400)
    /// instead of answering. The runner answers it with the bare status.
    Raises(u16),
}

impl Handler {
    /// The reply a runner sends when the handler ran and the core left the
    /// answer to it: the response as is, or the bare status of a raised
    /// error (empty headers and body).
    pub fn sent(&self) -> Option<Reply> {
        match self {
            Handler::Responds(r) => Some(r.as_is()),
            Handler::Raises(status) => Some(Reply {
                status: *status,
                headers: Vec::new(),
                body: Vec::new(),
            }),
            Handler::Throws => None,
        }
    }
}

/// Store failures a step injects: the runner's store fails the next
/// `claim` claim operations (insert, get) and the next `finish` finishing
/// writes (complete, release), as unreachable (`unavailable`) or as an
/// error the store answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreFails {
    /// Claim operations that fail.
    pub claim: u32,
    /// Finishing writes that fail.
    pub finish: u32,
    /// Unreachable (`store-unavailable`) rather than an error answered (`store-failed`).
    pub unavailable: bool,
}

impl StoreFails {
    /// Whether the step injects nothing.
    pub fn none(&self) -> bool {
        self.claim == 0 && self.finish == 0
    }
}

/// What a runtime's serve flow did with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The path (`refused`, `unguarded`, `replay`, `in-flight`,
    /// `payload-conflict`, `unavailable`, `handler`, `released`, `failed`).
    pub path: String,
    /// Whether the flow ran the handler.
    pub ran: bool,
    /// The core's answer, when it gave one.
    pub reply: Option<Reply>,
    /// What finishing did, when it did.
    pub finished: Option<String>,
    /// How many times finishing was tried again.
    pub finish_retries: u32,
}

/// What a step must give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The path taken: one of [`KINDS`].
    pub kind: String,
    /// For `refused`: why (one of [`REFUSALS`]).
    pub refusal: Option<String>,
    /// Whether the handler ran.
    pub ran: bool,
    /// The reply.
    pub reply: Reply,
    /// What finishing the record did (`stored`, `released`,
    /// `left-in-flight`, `superseded`), or none (nothing owned, or the store
    /// failed on every try).
    pub finished: Option<String>,
    /// How many times finishing was tried again after the store failed.
    pub finish_retries: u32,
}

/// One request of a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Seconds since the Unix epoch.
    pub now: i64,
    /// The request.
    pub request: Request,
    /// The handler, if it runs.
    pub handler: Handler,
    /// Store failures injected during this step.
    pub store_fails: StoreFails,
    /// What must happen.
    pub expect: Expected,
}

/// A sequence of requests against one endpoint and one fresh store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// Unique name.
    pub name: String,
    /// What it shows.
    pub comment: String,
    /// The endpoint.
    pub endpoint: EndpointConfig,
    /// The answered statuses that release the claim.
    pub release_statuses: Vec<u16>,
    /// The endpoint's key header name, as the profile spells it.
    pub header_name: String,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// A request and its fingerprint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FingerprintVector {
    /// What it shows.
    pub comment: String,
    /// The tenant.
    pub tenant: String,
    /// The method as sent.
    pub method: String,
    /// The route.
    pub route: String,
    /// The `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The body.
    pub body: Vec<u8>,
    /// Route policies of the probe endpoint.
    pub policies: Vec<(String, String)>,
    /// The attempt's action type.
    pub action_type: String,
    /// The fingerprint material (native runners only).
    pub material: Vec<u8>,
    /// The fingerprint, 64 hex.
    pub fingerprint: String,
}

/// A tenant, a key header and the storage key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageKeyVector {
    /// What it shows.
    pub comment: String,
    /// The tenant.
    pub tenant: String,
    /// The profile whose header syntax `header_value` follows.
    pub profile: String,
    /// The key header's value as sent.
    pub header_value: String,
    /// The client key it parses to.
    pub client_key: String,
    /// The storage-key material (native runners only).
    pub material: String,
    /// The storage key, 64 hex.
    pub storage_key: String,
}

/// One of the endpoint's fixed answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerVector {
    /// What it shows.
    pub comment: String,
    /// The endpoint.
    pub endpoint: EndpointConfig,
    /// `too-large`, `unavailable` or `failed`.
    pub call: String,
    /// Seconds since the Unix epoch.
    pub now: i64,
    /// The reply.
    pub expect: Reply,
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpVectors {
    /// The secret every endpoint is keyed with.
    pub secret: Vec<u8>,
    /// The cases.
    pub cases: Vec<Case>,
    /// The fingerprints.
    pub fingerprints: Vec<FingerprintVector>,
    /// The storage keys.
    pub storage_keys: Vec<StorageKeyVector>,
    /// The endpoint's fixed answers.
    pub endpoint_answers: Vec<AnswerVector>,
}

/// A runtime under test: an endpoint, and the claim flow over a memory store.
pub trait HttpSubject {
    /// A fresh endpoint keyed with `secret`, and a fresh empty store.
    ///
    /// # Errors
    /// The runtime's refusal, as text.
    fn start_case(&mut self, secret: &[u8], endpoint: &EndpointConfig) -> Result<(), String>;
    /// The endpoint's `header-name`.
    ///
    /// # Errors
    /// As above.
    fn header_name(&mut self) -> Result<String, String>;
    /// The endpoint's `admit`.
    ///
    /// # Errors
    /// As above.
    fn admit(&mut self, request: &Incoming, now: i64) -> Result<Admission, String>;
    /// The endpoint's `too-large`.
    ///
    /// # Errors
    /// As above.
    fn too_large(&mut self, now: i64) -> Result<Reply, String>;
    /// The endpoint's `unavailable`.
    ///
    /// # Errors
    /// As above.
    fn unavailable(&mut self, now: i64) -> Result<Reply, String>;
    /// The endpoint's `failed`.
    ///
    /// # Errors
    /// As above.
    fn failed(&mut self, now: i64) -> Result<Reply, String>;
    /// Serves `request` through the runtime's serve flow (the core's
    /// admit, claim, handler, capture, finish, answer) on the case's store,
    /// finishing by the default rules with `release_statuses`. When the flow
    /// asks for the handler, the runner gives it `handler`'s outcome; when
    /// it asks for a pause, the runner resumes at once. `fails`: store
    /// failures to inject into this request's operations.
    ///
    /// # Errors
    /// As above.
    fn serve(
        &mut self,
        request: &Incoming,
        now: i64,
        handler: &Handler,
        fails: StoreFails,
        release_statuses: &[u16],
    ) -> Result<Served, String>;
}

/// What one step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The path taken: one of [`KINDS`].
    pub kind: &'static str,
    /// Whether the handler ran.
    pub ran: bool,
    /// The reply sent.
    pub reply: Reply,
    /// The attempt, when guarded.
    pub attempt: Option<Attempt>,
    /// What finishing did, when the handler ran guarded.
    pub finished: Option<String>,
    /// How many times finishing was tried again.
    pub finish_retries: u32,
}

/// Runs one step through the runtime's serve flow.
///
/// # Errors
/// A runtime error, or a runtime that broke the flow's contract (no reply
/// where the core answers, a path that is not one of [`KINDS`]).
pub fn run_step(
    subject: &mut dyn HttpSubject,
    header_name: &str,
    release_statuses: &[u16],
    step: &Step,
) -> Result<Trace, String> {
    let incoming = step.request.incoming(header_name);
    // The attempt the flow claims, as the endpoint admits it (for the
    // runner's checks; the flow admits the request itself).
    let attempt = match subject.admit(&incoming, step.now)? {
        Admission::Guarded(attempt) => Some(attempt),
        Admission::Unguarded | Admission::Refused(_) => None,
    };
    let served = subject.serve(
        &incoming,
        step.now,
        &step.handler,
        step.store_fails,
        release_statuses,
    )?;
    let kind = KINDS
        .iter()
        .copied()
        .find(|k| *k == served.path)
        .ok_or_else(|| format!("the serve flow took an unknown path {:?}", served.path))?;
    let mut ran = served.ran;
    let reply = match (kind, served.reply) {
        ("unguarded", None) => {
            // The flow claimed nothing: the runner runs the handler itself.
            ran = true;
            step.handler
                .sent()
                .ok_or("the handler of an unguarded step throws: the vectors never do that")?
        }
        ("handler" | "released", None) => step
            .handler
            .sent()
            .ok_or_else(|| format!("path {kind} with a handler that throws"))?,
        ("handler" | "released" | "unguarded", Some(reply)) => {
            return Err(format!(
                "the core gave a {} reply on path {kind}, where the handler's or the framework's answer goes out",
                reply.status
            ))
        }
        (_, Some(reply)) => reply,
        (_, None) => return Err(format!("the core gave no reply on path {kind}")),
    };
    Ok(Trace {
        kind,
        ran,
        reply,
        attempt,
        finished: served.finished,
        finish_retries: served.finish_retries,
    })
}

/// Counts of a run, and every failure.
#[derive(Debug, Default)]
pub struct HttpReport {
    /// Cases run.
    pub cases: usize,
    /// Cases whose every step passed.
    pub cases_passed: usize,
    /// Steps run.
    pub steps: usize,
    /// Steps that passed.
    pub steps_passed: usize,
    /// Times a handler ran.
    pub handler_runs: usize,
    /// Fingerprint entries run.
    pub fingerprints: usize,
    /// Fingerprint entries that passed.
    pub fingerprints_passed: usize,
    /// Storage-key entries run.
    pub storage_keys: usize,
    /// Storage-key entries that passed.
    pub storage_keys_passed: usize,
    /// Endpoint-answer entries run.
    pub answers: usize,
    /// Endpoint-answer entries that passed.
    pub answers_passed: usize,
    /// One line per failure.
    pub failures: Vec<String>,
}

impl HttpReport {
    /// The one-line summary every runner prints.
    pub fn summary(&self, runtime: &str) -> String {
        format!(
            "{runtime}: http vectors: {}/{} cases, {}/{} steps ({} handler runs), {}/{} fingerprints, {}/{} storage keys, {}/{} endpoint answers passed",
            self.cases_passed,
            self.cases,
            self.steps_passed,
            self.steps,
            self.handler_runs,
            self.fingerprints_passed,
            self.fingerprints,
            self.storage_keys_passed,
            self.storage_keys,
            self.answers_passed,
            self.answers,
        )
    }

    /// Prints the summary; fails (panics) with every failure listed, or when
    /// nothing ran.
    pub fn assert_passed(&self, runtime: &str) {
        eprintln!("{}", self.summary(runtime));
        assert!(
            self.failures.is_empty(),
            "{runtime}: {} http vector failures:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
        assert!(
            self.cases > 0
                && self.steps > 0
                && self.fingerprints > 0
                && self.storage_keys > 0
                && self.answers > 0,
            "{runtime}: a list of the http vectors ran nothing"
        );
    }
}

/// Body bytes for a message: UTF-8 text when it is, else hex (shortened).
pub fn show_bytes(bytes: &[u8]) -> String {
    let shown = match std::str::from_utf8(bytes) {
        Ok(text) => format!("{text:?}"),
        Err(_) => format!("hex {}", to_hex(bytes)),
    };
    if shown.len() > 300 {
        let mut cut = 300;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}… ({} bytes)", &shown[..cut], bytes.len())
    } else {
        shown
    }
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The differences between an expected and an actual reply, if any.
pub fn reply_diff(want: &Reply, got: &Reply) -> Option<String> {
    let mut out = Vec::new();
    if want.status != got.status {
        out.push(format!("status: want {}, got {}", want.status, got.status));
    }
    if want.headers != got.headers {
        out.push(format!(
            "headers:\n      want {:?}\n      got  {:?}",
            want.headers, got.headers
        ));
    }
    if want.body != got.body {
        out.push(format!(
            "body:\n      want {}\n      got  {}",
            show_bytes(&want.body),
            show_bytes(&got.body)
        ));
    }
    (!out.is_empty()).then(|| out.join("\n    "))
}

/// Extra checks a runner adds per step (the native runner's invariants):
/// returns failures.
pub type Inspect<'a> = dyn FnMut(&Case, usize, &Trace) -> Vec<String> + 'a;

/// Runs every list of the file against `subject`.
pub fn run_http(
    subject: &mut dyn HttpSubject,
    vectors: &HttpVectors,
    inspect: &mut Inspect<'_>,
) -> HttpReport {
    let mut report = HttpReport::default();
    for case in &vectors.cases {
        report.cases += 1;
        let failures_before = report.failures.len();
        if let Err(e) = subject.start_case(&vectors.secret, &case.endpoint) {
            report
                .failures
                .push(format!("{}: the endpoint was refused: {e}", case.name));
            report.steps += case.steps.len();
            continue;
        }
        match subject.header_name() {
            Ok(name) if name == case.header_name => {}
            Ok(name) => report.failures.push(format!(
                "{}: header-name: want {:?}, got {name:?}",
                case.name, case.header_name
            )),
            Err(e) => report
                .failures
                .push(format!("{}: header-name failed: {e}", case.name)),
        }
        for (i, step) in case.steps.iter().enumerate() {
            report.steps += 1;
            let label = format!("{}#{}", case.name, i + 1);
            let trace = match run_step(subject, &case.header_name, &case.release_statuses, step) {
                Ok(trace) => trace,
                Err(e) => {
                    report.failures.push(format!("{label}: {e}"));
                    continue;
                }
            };
            if trace.ran {
                report.handler_runs += 1;
            }
            let mut problems = step_problems(step, &trace);
            problems.extend(inspect(case, i, &trace));
            if problems.is_empty() {
                report.steps_passed += 1;
            } else {
                report
                    .failures
                    .push(format!("{label}: {}", problems.join("\n    ")));
            }
        }
        if report.failures.len() == failures_before {
            report.cases_passed += 1;
        }
    }
    for (i, entry) in vectors.fingerprints.iter().enumerate() {
        report.fingerprints += 1;
        match check_fingerprint(subject, &vectors.secret, entry) {
            Ok(()) => report.fingerprints_passed += 1,
            Err(e) => report
                .failures
                .push(format!("fingerprints[{i}] ({}): {e}", entry.comment)),
        }
    }
    for (i, entry) in vectors.storage_keys.iter().enumerate() {
        report.storage_keys += 1;
        match check_storage_key(subject, &vectors.secret, entry) {
            Ok(()) => report.storage_keys_passed += 1,
            Err(e) => report
                .failures
                .push(format!("storage_keys[{i}] ({}): {e}", entry.comment)),
        }
    }
    for (i, entry) in vectors.endpoint_answers.iter().enumerate() {
        report.answers += 1;
        match check_answer(subject, &vectors.secret, entry) {
            Ok(()) => report.answers_passed += 1,
            Err(e) => report
                .failures
                .push(format!("endpoint_answers[{i}] ({}): {e}", entry.comment)),
        }
    }
    report
}

/// What differs between a step's expectation and its trace.
pub fn step_problems(step: &Step, trace: &Trace) -> Vec<String> {
    let mut problems = Vec::new();
    if trace.kind != step.expect.kind {
        problems.push(format!(
            "path: want {}, got {}",
            step.expect.kind, trace.kind
        ));
    }
    if trace.ran != step.expect.ran {
        problems.push(format!(
            "handler ran: want {}, got {}",
            step.expect.ran, trace.ran
        ));
    }
    if let Some(diff) = reply_diff(&step.expect.reply, &trace.reply) {
        problems.push(diff);
    }
    if trace.finished != step.expect.finished {
        problems.push(format!(
            "finish: want {:?}, got {:?}",
            step.expect.finished, trace.finished
        ));
    }
    if trace.finish_retries != step.expect.finish_retries {
        problems.push(format!(
            "finish retries: want {}, got {}",
            step.expect.finish_retries, trace.finish_retries
        ));
    }
    problems
}

/// The endpoint the `fingerprints` entries are admitted through.
pub fn probe_endpoint(policies: &[(String, String)]) -> EndpointConfig {
    EndpointConfig {
        policies: policies.to_vec(),
        ..EndpointConfig::defaults("stripe")
    }
}

fn guarded(admission: Admission) -> Result<Attempt, String> {
    match admission {
        Admission::Guarded(attempt) => Ok(attempt),
        Admission::Unguarded => Err("admitted unguarded, want guarded".into()),
        Admission::Refused(reply) => Err(format!(
            "refused with {} {}, want guarded",
            reply.status,
            show_bytes(&reply.body)
        )),
    }
}

fn check_fingerprint(
    subject: &mut dyn HttpSubject,
    secret: &[u8],
    entry: &FingerprintVector,
) -> Result<(), String> {
    subject.start_case(secret, &probe_endpoint(&entry.policies))?;
    let attempt = guarded(subject.admit(
        &Incoming {
            tenant_id: entry.tenant.clone(),
            method: entry.method.clone(),
            route: entry.route.clone(),
            key_values: vec![PROBE_KEY.to_owned()],
            content_type: entry.content_type.clone(),
            body: entry.body.clone(),
        },
        0,
    )?)?;
    if attempt.fingerprint != entry.fingerprint {
        return Err(format!(
            "fingerprint: want {}, got {}",
            entry.fingerprint, attempt.fingerprint
        ));
    }
    if attempt.action_type != entry.action_type || attempt.tenant_id != entry.tenant {
        return Err(format!(
            "attempt: want {} / {}, got {} / {}",
            entry.tenant, entry.action_type, attempt.tenant_id, attempt.action_type
        ));
    }
    Ok(())
}

fn check_storage_key(
    subject: &mut dyn HttpSubject,
    secret: &[u8],
    entry: &StorageKeyVector,
) -> Result<(), String> {
    subject.start_case(secret, &EndpointConfig::defaults(&entry.profile))?;
    let attempt = guarded(subject.admit(
        &Incoming {
            tenant_id: entry.tenant.clone(),
            method: "POST".into(),
            route: STORAGE_KEY_ROUTE.into(),
            key_values: vec![entry.header_value.clone()],
            content_type: None,
            body: Vec::new(),
        },
        0,
    )?)?;
    if attempt.key != entry.storage_key {
        return Err(format!(
            "storage key: want {}, got {}",
            entry.storage_key, attempt.key
        ));
    }
    Ok(())
}

fn check_answer(
    subject: &mut dyn HttpSubject,
    secret: &[u8],
    entry: &AnswerVector,
) -> Result<(), String> {
    subject.start_case(secret, &entry.endpoint)?;
    let got = match entry.call.as_str() {
        "too-large" => subject.too_large(entry.now)?,
        "unavailable" => subject.unavailable(entry.now)?,
        "failed" => subject.failed(entry.now)?,
        other => return Err(format!("unknown call {other:?}")),
    };
    match reply_diff(&entry.expect, &got) {
        None => Ok(()),
        Some(diff) => Err(diff),
    }
}

// --- parsing -----------------------------------------------------------

/// A malformed vector file.
#[derive(Debug)]
pub struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

type Parsed<T> = Result<T, ParseError>;

fn bad<T>(at: &str, what: impl fmt::Display) -> Parsed<T> {
    Err(ParseError(format!("{at}: {what}")))
}

fn obj<'a>(v: &'a Value, at: &str) -> Parsed<&'a serde_json::Map<String, Value>> {
    match v.as_object() {
        Some(m) => Ok(m),
        None => bad(at, "not an object"),
    }
}

fn member<'a>(v: &'a Value, name: &str, at: &str) -> Parsed<&'a Value> {
    match obj(v, at)?.get(name) {
        Some(m) => Ok(m),
        None => bad(at, format_args!("no member `{name}`")),
    }
}

fn string(v: &Value, name: &str, at: &str) -> Parsed<String> {
    match member(v, name, at)?.as_str() {
        Some(s) => Ok(s.to_owned()),
        None => bad(at, format_args!("`{name}` is not a string")),
    }
}

fn boolean(v: &Value, name: &str, at: &str) -> Parsed<bool> {
    match member(v, name, at)?.as_bool() {
        Some(b) => Ok(b),
        None => bad(at, format_args!("`{name}` is not a boolean")),
    }
}

fn integer<T: TryFrom<i64>>(v: &Value, name: &str, at: &str) -> Parsed<T> {
    match member(v, name, at)?.as_i64().map(T::try_from) {
        Some(Ok(n)) => Ok(n),
        _ => bad(at, format_args!("`{name}` is not an integer in range")),
    }
}

fn array<'a>(v: &'a Value, name: &str, at: &str) -> Parsed<&'a Vec<Value>> {
    match member(v, name, at)?.as_array() {
        Some(a) => Ok(a),
        None => bad(at, format_args!("`{name}` is not an array")),
    }
}

fn pairs(v: &Value, name: &str, at: &str) -> Parsed<Vec<(String, String)>> {
    array(v, name, at)?
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => Ok((n.clone(), v.clone())),
            _ => bad(
                at,
                format_args!("`{name}` holds {pair}, not a [name, value] pair"),
            ),
        })
        .collect()
}

/// Hex to bytes.
///
/// # Errors
/// When `hex` is not lowercase or uppercase hex of even length.
pub fn from_hex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err(format!("odd-length hex: {hex}"));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("not hex: {hex}"))
        })
        .collect()
}

/// `body` (UTF-8 text) or `body_hex`: exactly one.
fn bytes(v: &Value, text: &str, hex: &str, at: &str) -> Parsed<Vec<u8>> {
    let m = obj(v, at)?;
    match (m.get(text), m.get(hex)) {
        (Some(Value::String(s)), None) => Ok(s.as_bytes().to_vec()),
        (None, Some(Value::String(h))) => from_hex(h).map_err(|e| ParseError(format!("{at}: {e}"))),
        _ => bad(
            at,
            format_args!("needs exactly one of `{text}` and `{hex}`, a string"),
        ),
    }
}

fn response(v: &Value, at: &str) -> Parsed<Response> {
    Ok(Response {
        status: integer(v, "status", at)?,
        content_type: string(v, "content_type", at)?,
        headers: pairs(v, "headers", at)?,
        body: bytes(v, "body", "body_hex", at)?,
    })
}

fn reply(v: &Value, at: &str) -> Parsed<Reply> {
    Ok(Reply {
        status: integer(v, "status", at)?,
        headers: pairs(v, "headers", at)?,
        body: bytes(v, "body", "body_hex", at)?,
    })
}

fn policies(v: &Value, at: &str) -> Parsed<Vec<(String, String)>> {
    obj(member(v, "policies", at)?, at)?
        .iter()
        .map(|(action, policy)| match policy {
            Value::Object(_) => Ok((action.clone(), policy.to_string())),
            _ => bad(at, format_args!("the policy of {action} is not an object")),
        })
        .collect()
}

fn endpoint(v: &Value, at: &str) -> Parsed<EndpointConfig> {
    let profile = string(v, "profile", at)?;
    if !["ietf", "stripe", "ofb"].contains(&profile.as_str()) {
        return bad(at, format_args!("unknown profile {profile:?}"));
    }
    Ok(EndpointConfig {
        profile,
        strict_key_syntax: boolean(v, "strict_key_syntax", at)?,
        retry_after_seconds: integer(v, "retry_after_seconds", at)?,
        replay_headers: array(v, "replay_headers", at)?
            .iter()
            .map(|h| match h.as_str() {
                Some(h) => Ok(h.to_owned()),
                None => bad(at, "a replay header is not a string"),
            })
            .collect::<Parsed<_>>()?,
        key_required: boolean(v, "key_required", at)?,
        max_body_bytes: integer::<i64>(v, "max_body_bytes", at)?
            .try_into()
            .map_err(|_| ParseError(format!("{at}: negative max_body_bytes")))?,
        policies: policies(v, at)?,
    })
}

fn step(v: &Value, at: &str) -> Parsed<Step> {
    let request = member(v, "request", at)?;
    let at_request = format!("{at}.request");
    let handler = match member(v, "handler", at)? {
        Value::String(s) if s == "throws" => Handler::Throws,
        h @ Value::Object(o) if o.contains_key("raises") => {
            Handler::Raises(integer(h, "raises", at)?)
        }
        h @ Value::Object(_) => Handler::Responds(response(h, &format!("{at}.handler"))?),
        _ => {
            return bad(
                at,
                "`handler` is neither a response, {\"raises\": status} nor \"throws\"",
            )
        }
    };
    let store_fails = match obj(v, at)?.get("store_fails") {
        None => StoreFails::default(),
        Some(f) => {
            let at_fails = format!("{at}.store_fails");
            StoreFails {
                claim: integer(f, "claim", &at_fails)?,
                finish: integer(f, "finish", &at_fails)?,
                unavailable: boolean(f, "unavailable", &at_fails)?,
            }
        }
    };
    let expect = member(v, "expect", at)?;
    let at_expect = format!("{at}.expect");
    let kind = string(expect, "kind", &at_expect)?;
    if !KINDS.contains(&kind.as_str()) {
        return bad(&at_expect, format_args!("unknown kind {kind:?}"));
    }
    let refusal = match obj(expect, &at_expect)?.get("refusal") {
        None | Some(Value::Null) => None,
        Some(Value::String(r)) if REFUSALS.contains(&r.as_str()) => Some(r.clone()),
        Some(other) => return bad(&at_expect, format_args!("unknown refusal {other}")),
    };
    if (kind == "refused") != refusal.is_some() {
        return bad(
            &at_expect,
            "`refusal` is given exactly when the kind is refused",
        );
    }
    let finished = optional_string(expect, "finished", &at_expect)?;
    if let Some(f) = &finished {
        if !FINISHED.contains(&f.as_str()) {
            return bad(&at_expect, format_args!("unknown finished {f:?}"));
        }
    }
    Ok(Step {
        now: integer(v, "now", at)?,
        request: Request {
            tenant: string(request, "tenant", &at_request)?,
            method: string(request, "method", &at_request)?,
            route: string(request, "route", &at_request)?,
            headers: pairs(request, "headers", &at_request)?,
            body: bytes(request, "body", "body_hex", &at_request)?,
        },
        handler,
        store_fails,
        expect: Expected {
            kind,
            refusal,
            ran: boolean(expect, "ran", &at_expect)?,
            reply: reply(expect, &at_expect)?,
            finished,
            finish_retries: integer(expect, "finish_retries", &at_expect)?,
        },
    })
}

fn case(v: &Value, at: &str) -> Parsed<Case> {
    let name = string(v, "name", at)?;
    let at = format!("case {name}");
    Ok(Case {
        comment: string(v, "comment", &at)?,
        endpoint: endpoint(member(v, "endpoint", &at)?, &format!("{at}.endpoint"))?,
        release_statuses: array(v, "release_statuses", &at)?
            .iter()
            .map(|s| match s.as_u64().map(u16::try_from) {
                Some(Ok(s)) => Ok(s),
                _ => bad(&at, "a release status is not a u16"),
            })
            .collect::<Parsed<_>>()?,
        header_name: string(v, "header_name", &at)?,
        steps: array(v, "steps", &at)?
            .iter()
            .enumerate()
            .map(|(i, s)| step(s, &format!("{at}#{}", i + 1)))
            .collect::<Parsed<_>>()?,
        name,
    })
}

fn optional_string(v: &Value, name: &str, at: &str) -> Parsed<Option<String>> {
    match member(v, name, at)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => bad(at, format_args!("`{name}` is neither a string nor null")),
    }
}

fn fingerprint(v: &Value, at: &str) -> Parsed<FingerprintVector> {
    Ok(FingerprintVector {
        comment: string(v, "comment", at)?,
        tenant: string(v, "tenant", at)?,
        method: string(v, "method", at)?,
        route: string(v, "route", at)?,
        content_type: optional_string(v, "content_type", at)?,
        body: bytes(v, "body", "body_hex", at)?,
        policies: policies(v, at)?,
        action_type: string(v, "action_type", at)?,
        material: bytes(v, "material", "material_hex", at)?,
        fingerprint: string(v, "fingerprint", at)?,
    })
}

fn storage_key(v: &Value, at: &str) -> Parsed<StorageKeyVector> {
    Ok(StorageKeyVector {
        comment: string(v, "comment", at)?,
        tenant: string(v, "tenant", at)?,
        profile: string(v, "profile", at)?,
        header_value: string(v, "header_value", at)?,
        client_key: string(v, "client_key", at)?,
        material: string(v, "material", at)?,
        storage_key: string(v, "storage_key", at)?,
    })
}

fn answer(v: &Value, at: &str) -> Parsed<AnswerVector> {
    Ok(AnswerVector {
        comment: string(v, "comment", at)?,
        endpoint: endpoint(member(v, "endpoint", at)?, &format!("{at}.endpoint"))?,
        call: string(v, "call", at)?,
        now: integer(v, "now", at)?,
        expect: reply(member(v, "expect", at)?, &format!("{at}.expect"))?,
    })
}

fn count(doc: &Value, name: &str, found: usize) -> Parsed<()> {
    match doc.get(name).and_then(Value::as_u64) {
        Some(n) if n as usize == found => Ok(()),
        other => bad(
            "http_test.json",
            format_args!("`{name}` says {other:?}, the file holds {found}"),
        ),
    }
}

impl HttpVectors {
    /// Parses and lints the file's text: the schema, every member, unique
    /// case names, and the `numberOf…` counts.
    ///
    /// # Errors
    /// What is malformed, and where.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| ParseError(format!("http_test.json is not JSON: {e}")))?;
        if doc.get("schema").and_then(Value::as_str) != Some(HTTP_SCHEMA) {
            return bad(
                "http_test.json",
                format_args!("schema is not {HTTP_SCHEMA}"),
            );
        }
        let secret =
            from_hex(&string(&doc, "secret_hex", "http_test.json")?).map_err(ParseError)?;
        let cases = array(&doc, "cases", "http_test.json")?
            .iter()
            .enumerate()
            .map(|(i, c)| case(c, &format!("cases[{i}]")))
            .collect::<Parsed<Vec<_>>>()?;
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return bad(
                "http_test.json",
                format_args!("two cases are named {}", w[0]),
            );
        }
        let fingerprints = array(&doc, "fingerprints", "http_test.json")?
            .iter()
            .enumerate()
            .map(|(i, f)| fingerprint(f, &format!("fingerprints[{i}]")))
            .collect::<Parsed<Vec<_>>>()?;
        let storage_keys = array(&doc, "storage_keys", "http_test.json")?
            .iter()
            .enumerate()
            .map(|(i, s)| storage_key(s, &format!("storage_keys[{i}]")))
            .collect::<Parsed<Vec<_>>>()?;
        let endpoint_answers = array(&doc, "endpoint_answers", "http_test.json")?
            .iter()
            .enumerate()
            .map(|(i, a)| answer(a, &format!("endpoint_answers[{i}]")))
            .collect::<Parsed<Vec<_>>>()?;
        count(&doc, "numberOfCases", cases.len())?;
        count(
            &doc,
            "numberOfSteps",
            cases.iter().map(|c| c.steps.len()).sum(),
        )?;
        count(&doc, "numberOfFingerprints", fingerprints.len())?;
        count(&doc, "numberOfStorageKeys", storage_keys.len())?;
        count(&doc, "numberOfEndpointAnswers", endpoint_answers.len())?;
        Ok(HttpVectors {
            secret,
            cases,
            fingerprints,
            storage_keys,
            endpoint_answers,
        })
    }

    /// Reads and parses [`http_vector_file`].
    ///
    /// # Errors
    /// When the file cannot be read or is malformed.
    pub fn load() -> Result<Self, ParseError> {
        let path = http_vector_file();
        let text = fs::read_to_string(&path)
            .map_err(|e| ParseError(format!("{}: {e}", path.display())))?;
        HttpVectors::parse(&text)
    }
}

// --- writing -------------------------------------------------------------

/// A JSON value with ordered members, for writing the file.
enum J {
    Str(String),
    Num(i64),
    Bool(bool),
    Null,
    Arr(Vec<J>),
    Obj(Vec<(&'static str, J)>),
    /// An object with run-time member names (policies).
    Map(Vec<(String, J)>),
}

/// The widest line the writer prints a value inline on.
const WIDTH: usize = 110;

fn escape(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl J {
    fn inline(&self, out: &mut String) {
        match self {
            J::Str(s) => escape(out, s),
            J::Num(n) => {
                let _ = write!(out, "{n}");
            }
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Null => out.push_str("null"),
            J::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.inline(out);
                }
                out.push(']');
            }
            J::Obj(members) => {
                let members: Vec<(&str, &J)> = members.iter().map(|(k, v)| (*k, v)).collect();
                J::inline_members(out, &members);
            }
            J::Map(members) => {
                let members: Vec<(&str, &J)> =
                    members.iter().map(|(k, v)| (k.as_str(), v)).collect();
                J::inline_members(out, &members);
            }
        }
    }

    fn inline_members(out: &mut String, members: &[(&str, &J)]) {
        out.push('{');
        for (i, (k, v)) in members.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            escape(out, k);
            out.push_str(": ");
            v.inline(out);
        }
        out.push('}');
    }

    /// Writes the value at `indent`, the cursor already `prefix` columns in.
    fn write(&self, out: &mut String, indent: usize, prefix: usize) {
        let mut flat = String::new();
        self.inline(&mut flat);
        let scalar = !matches!(self, J::Arr(_) | J::Obj(_) | J::Map(_));
        let empty = matches!(self, J::Arr(a) if a.is_empty())
            || matches!(self, J::Obj(m) if m.is_empty())
            || matches!(self, J::Map(m) if m.is_empty());
        if scalar || empty || prefix + flat.chars().count() <= WIDTH {
            out.push_str(&flat);
            return;
        }
        let pad = " ".repeat(indent + 2);
        match self {
            J::Arr(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&pad);
                    item.write(out, indent + 2, indent + 2);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
            }
            J::Obj(members) => {
                let members: Vec<(&str, &J)> = members.iter().map(|(k, v)| (*k, v)).collect();
                J::write_members(out, &members, indent);
            }
            J::Map(members) => {
                let members: Vec<(&str, &J)> =
                    members.iter().map(|(k, v)| (k.as_str(), v)).collect();
                J::write_members(out, &members, indent);
            }
            _ => {}
        }
        out.push_str(&" ".repeat(indent));
        out.push(if matches!(self, J::Arr(_)) { ']' } else { '}' });
    }

    fn write_members(out: &mut String, members: &[(&str, &J)], indent: usize) {
        let pad = " ".repeat(indent + 2);
        out.push_str("{\n");
        for (i, (k, v)) in members.iter().enumerate() {
            out.push_str(&pad);
            let before = out.len();
            escape(out, k);
            out.push_str(": ");
            let key_width = out[before..].chars().count();
            v.write(out, indent + 2, indent + 2 + key_width);
            out.push_str(if i + 1 < members.len() { ",\n" } else { "\n" });
        }
    }
}

fn j_str(s: &str) -> J {
    J::Str(s.to_owned())
}

fn j_pairs(pairs: &[(String, String)]) -> J {
    J::Arr(
        pairs
            .iter()
            .map(|(n, v)| J::Arr(vec![j_str(n), j_str(v)]))
            .collect(),
    )
}

/// `body` when UTF-8, else `body_hex`.
fn j_bytes(members: &mut Vec<(&'static str, J)>, text: &'static str, hex: &'static str, b: &[u8]) {
    match std::str::from_utf8(b) {
        Ok(s) => members.push((text, j_str(s))),
        Err(_) => members.push((hex, J::Str(to_hex(b)))),
    }
}

fn j_policies(policies: &[(String, String)]) -> J {
    J::Map(
        policies
            .iter()
            .map(|(action, json)| {
                let value: Value = serde_json::from_str(json).unwrap_or(Value::Null);
                (action.clone(), j_value(&value))
            })
            .collect(),
    )
}

fn j_value(v: &Value) -> J {
    match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Number(n) => n.as_i64().map_or_else(|| J::Str(n.to_string()), J::Num),
        Value::String(s) => j_str(s),
        Value::Array(a) => J::Arr(a.iter().map(j_value).collect()),
        Value::Object(m) => J::Map(m.iter().map(|(k, v)| (k.clone(), j_value(v))).collect()),
    }
}

fn j_endpoint(e: &EndpointConfig) -> J {
    J::Obj(vec![
        ("profile", j_str(&e.profile)),
        ("strict_key_syntax", J::Bool(e.strict_key_syntax)),
        (
            "retry_after_seconds",
            J::Num(i64::from(e.retry_after_seconds)),
        ),
        (
            "replay_headers",
            J::Arr(e.replay_headers.iter().map(|h| j_str(h)).collect()),
        ),
        ("key_required", J::Bool(e.key_required)),
        (
            "max_body_bytes",
            J::Num(i64::try_from(e.max_body_bytes).unwrap_or(i64::MAX)),
        ),
        ("policies", j_policies(&e.policies)),
    ])
}

fn j_response(r: &Response) -> J {
    let mut m = vec![
        ("status", J::Num(i64::from(r.status))),
        ("content_type", j_str(&r.content_type)),
        ("headers", j_pairs(&r.headers)),
    ];
    j_bytes(&mut m, "body", "body_hex", &r.body);
    J::Obj(m)
}

fn j_reply(members: &mut Vec<(&'static str, J)>, r: &Reply) {
    members.push(("status", J::Num(i64::from(r.status))));
    members.push(("headers", j_pairs(&r.headers)));
    j_bytes(members, "body", "body_hex", &r.body);
}

fn j_step(s: &Step) -> J {
    let mut request = vec![
        ("tenant", j_str(&s.request.tenant)),
        ("method", j_str(&s.request.method)),
        ("route", j_str(&s.request.route)),
        ("headers", j_pairs(&s.request.headers)),
    ];
    j_bytes(&mut request, "body", "body_hex", &s.request.body);
    let handler = match &s.handler {
        Handler::Responds(r) => j_response(r),
        Handler::Throws => j_str("throws"),
        Handler::Raises(status) => J::Obj(vec![("raises", J::Num(i64::from(*status)))]),
    };
    let mut expect = vec![("kind", j_str(&s.expect.kind))];
    if let Some(refusal) = &s.expect.refusal {
        expect.push(("refusal", j_str(refusal)));
    }
    expect.push(("ran", J::Bool(s.expect.ran)));
    j_reply(&mut expect, &s.expect.reply);
    expect.push((
        "finished",
        s.expect.finished.as_deref().map_or(J::Null, j_str),
    ));
    expect.push(("finish_retries", J::Num(i64::from(s.expect.finish_retries))));
    let mut members = vec![
        ("now", J::Num(s.now)),
        ("request", J::Obj(request)),
        ("handler", handler),
    ];
    if !s.store_fails.none() {
        members.push((
            "store_fails",
            J::Obj(vec![
                ("claim", J::Num(i64::from(s.store_fails.claim))),
                ("finish", J::Num(i64::from(s.store_fails.finish))),
                ("unavailable", J::Bool(s.store_fails.unavailable)),
            ]),
        ));
    }
    members.push(("expect", J::Obj(expect)));
    J::Obj(members)
}

impl HttpVectors {
    /// The file's text: `header` lines, the counts, then every list.
    /// [`HttpVectors::parse`] reads it back to the same value.
    pub fn to_json(&self, generator_version: &str, header: &[&str]) -> String {
        let cases = self
            .cases
            .iter()
            .map(|c| {
                J::Obj(vec![
                    ("name", j_str(&c.name)),
                    ("comment", j_str(&c.comment)),
                    ("endpoint", j_endpoint(&c.endpoint)),
                    (
                        "release_statuses",
                        J::Arr(
                            c.release_statuses
                                .iter()
                                .map(|s| J::Num(i64::from(*s)))
                                .collect(),
                        ),
                    ),
                    ("header_name", j_str(&c.header_name)),
                    ("steps", J::Arr(c.steps.iter().map(j_step).collect())),
                ])
            })
            .collect();
        let fingerprints = self
            .fingerprints
            .iter()
            .map(|f| {
                let mut m = vec![
                    ("comment", j_str(&f.comment)),
                    ("tenant", j_str(&f.tenant)),
                    ("method", j_str(&f.method)),
                    ("route", j_str(&f.route)),
                    (
                        "content_type",
                        f.content_type.as_deref().map_or(J::Null, j_str),
                    ),
                ];
                j_bytes(&mut m, "body", "body_hex", &f.body);
                m.push(("policies", j_policies(&f.policies)));
                m.push(("action_type", j_str(&f.action_type)));
                j_bytes(&mut m, "material", "material_hex", &f.material);
                m.push(("fingerprint", j_str(&f.fingerprint)));
                J::Obj(m)
            })
            .collect();
        let storage_keys = self
            .storage_keys
            .iter()
            .map(|s| {
                J::Obj(vec![
                    ("comment", j_str(&s.comment)),
                    ("tenant", j_str(&s.tenant)),
                    ("profile", j_str(&s.profile)),
                    ("header_value", j_str(&s.header_value)),
                    ("client_key", j_str(&s.client_key)),
                    ("material", j_str(&s.material)),
                    ("storage_key", j_str(&s.storage_key)),
                ])
            })
            .collect();
        let answers = self
            .endpoint_answers
            .iter()
            .map(|a| {
                let mut expect = Vec::new();
                j_reply(&mut expect, &a.expect);
                J::Obj(vec![
                    ("comment", j_str(&a.comment)),
                    ("endpoint", j_endpoint(&a.endpoint)),
                    ("call", j_str(&a.call)),
                    ("now", J::Num(a.now)),
                    ("expect", J::Obj(expect)),
                ])
            })
            .collect();
        let count = |n: usize| J::Num(i64::try_from(n).unwrap_or(i64::MAX));
        let doc = J::Obj(vec![
            ("schema", j_str(HTTP_SCHEMA)),
            ("generatorVersion", j_str(generator_version)),
            ("header", J::Arr(header.iter().map(|h| j_str(h)).collect())),
            ("numberOfCases", count(self.cases.len())),
            (
                "numberOfSteps",
                count(self.cases.iter().map(|c| c.steps.len()).sum()),
            ),
            ("numberOfFingerprints", count(self.fingerprints.len())),
            ("numberOfStorageKeys", count(self.storage_keys.len())),
            (
                "numberOfEndpointAnswers",
                count(self.endpoint_answers.len()),
            ),
            ("secret_hex", J::Str(to_hex(&self.secret))),
            ("cases", J::Arr(cases)),
            ("fingerprints", J::Arr(fingerprints)),
            ("storage_keys", J::Arr(storage_keys)),
            ("endpoint_answers", J::Arr(answers)),
        ]);
        let mut out = String::new();
        doc.write(&mut out, 0, 0);
        out.push('\n');
        out
    }
}
