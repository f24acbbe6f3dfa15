//! The HTTP conformance vectors (`tests/vectors/http/http_test.json`)
//! through the tower layer: every step is a request to an axum router
//! whose handler gives the step's answer (or panics, for a handler that
//! throws). What the client gets (status, headers, body bytes), whether the
//! handler ran, and what finishing left in the store must be what the vector
//! says, for every profile.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::routing::any;
use axum::{Extension, Router};
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use intentkey::claim::{Completion, Record, Release, Replacement, Rules, Status};
use intentkey::http::{Options, Profile};
use intentkey::{Policy, Secret};
use intentkey_axum::{Idempotency, IdempotencyLayer, Inline};
use intentkey_store::{MemoryStore, Store, StoreError};
use intentkey_vectors::http::{Case, Handler, HttpVectors, Reply, StoreFails};
use tower::ServiceExt;

/// What the handler of the step being run does, and what it saw.
#[derive(Default)]
struct Script {
    handler: Mutex<Option<Handler>>,
    runs: AtomicUsize,
    key: Mutex<Option<String>>,
}

async fn handler(
    Extension(script): Extension<Arc<Script>>,
    id: Option<Extension<Idempotency>>,
) -> Response<Body> {
    script.runs.fetch_add(1, Ordering::SeqCst);
    *script.key.lock().unwrap() = id.map(|Extension(i)| i.key);
    let step = script.handler.lock().unwrap().clone();
    match step {
        Some(Handler::Responds(r)) => {
            let mut response = Response::builder().status(r.status);
            if !r.content_type.is_empty() {
                response = response.header("Content-Type", r.content_type.as_str());
            }
            for (name, value) in &r.headers {
                response = response.header(name.as_str(), value.as_str());
            }
            response.body(Body::from(r.body)).unwrap()
        }
        Some(Handler::Throws) => panic!("the ledger is down (a handler that throws)"),
        Some(Handler::Raises(_)) => panic!("an axum handler answers; it raises nothing"),
        None => panic!("no step is running"),
    }
}

/// A memory store whose next claim operations (insert, get) and finishing
/// writes (complete, release) fail as a step's `store_fails` says.
#[derive(Default)]
struct Failing {
    inner: MemoryStore,
    fails: Mutex<StoreFails>,
}

impl Failing {
    fn gate(&self, finish: bool) -> Result<(), StoreError> {
        let mut fails = self.fails.lock().unwrap();
        let budget = if finish {
            &mut fails.finish
        } else {
            &mut fails.claim
        };
        if *budget == 0 {
            return Ok(());
        }
        *budget -= 1;
        Err(if fails.unavailable {
            StoreError::retryable("injected by the vector")
        } else {
            StoreError::fatal("injected by the vector")
        })
    }
}

impl Store for Failing {
    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        self.gate(false)?;
        self.inner.insert(record)
    }
    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.gate(false)?;
        self.inner.get(key)
    }
    fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
        self.gate(true)?;
        self.inner.complete(completion)
    }
    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
        self.inner.replace(replacement)
    }
    fn release(&self, release: &Release) -> Result<bool, StoreError> {
        self.gate(true)?;
        self.inner.release(release)
    }
    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        self.inner.list(status, limit)
    }
    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.inner.purge(now)
    }
}

fn options(case: &Case) -> Options {
    let e = &case.endpoint;
    Options {
        profile: Profile::parse(&e.profile).unwrap(),
        strict_key_syntax: e.strict_key_syntax,
        retry_after_seconds: e.retry_after_seconds,
        replay_headers: e.replay_headers.clone(),
        key_required: e.key_required,
        max_body_bytes: e.max_body_bytes,
        max_stored_bytes: intentkey::http::DEFAULT_MAX_STORED_BYTES,
        wait_max_ms: 0,
    }
}

/// The reply's headers with lower-case names (HTTP/1 names are
/// case-insensitive; `http` keeps them lower-case), in order.
fn lower(headers: &[(String, String)]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect()
}

async fn reply_of(response: Response<Body>) -> Reply {
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

#[tokio::test]
async fn every_case_through_the_layer() {
    let vectors = HttpVectors::load().expect("tests/vectors/http/http_test.json");
    let mut steps = 0;
    let mut runs = 0;
    let mut failures = Vec::new();
    let mut stack_refused = 0;
    // A handler that throws panics; the layer catches it. Keep its message out of the output.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains("a handler that throws") {
            default_hook(info);
        }
    }));
    let mut raising = Vec::new();
    for case in &vectors.cases {
        // An axum handler answers with a response; it cannot raise an error
        // carrying a status for the layer to release the claim on (that is
        // the Node adapters' body parsers). Such cases are left to them.
        if case
            .steps
            .iter()
            .any(|s| matches!(s.handler, Handler::Raises(_)))
        {
            raising.push(case.name.clone());
            continue;
        }
        let store = Arc::new(Inline(Failing::default()));
        let now = Arc::new(AtomicI64::new(0));
        let clock = Arc::clone(&now);
        let mut layer = IdempotencyLayer::with_shared_store(
            Secret::new(vectors.secret.clone()).unwrap(),
            options(case),
            store.clone(),
        )
        .tenant(|parts| parts.headers["x-tenant"].to_str().unwrap().to_owned())
        .clock(move || clock.load(Ordering::SeqCst))
        .methods(&[Method::POST, Method::PUT, Method::PATCH])
        .rules(Rules {
            release_statuses: case.release_statuses.clone(),
            ..Rules::default()
        })
        .on_error(|_, _| {});
        for (action, json) in &case.endpoint.policies {
            layer = layer
                .policy(action, Policy::from_json(json).unwrap())
                .unwrap();
        }
        let script = Arc::new(Script::default());
        let mut app = Router::new();
        for route in [
            "/orders",
            "/carts",
            "/v1/charges",
            "/reports",
            "/pix/payments",
        ] {
            app = app.route(route, any(handler));
        }
        let app = app.layer(layer).layer(Extension(Arc::clone(&script)));

        for (i, step) in case.steps.iter().enumerate() {
            steps += 1;
            let label = format!("{}#{}", case.name, i + 1);
            now.store(step.now, Ordering::SeqCst);
            *script.handler.lock().unwrap() = Some(step.handler.clone());
            *script.key.lock().unwrap() = None;
            *store.0.fails.lock().unwrap() = step.store_fails;
            let before = script.runs.load(Ordering::SeqCst);
            let mut request = Request::builder()
                .method(step.request.method.as_str())
                .uri(step.request.route.as_str())
                .header("x-tenant", step.request.tenant.as_str());
            for (name, value) in &step.request.headers {
                request = request.header(name.as_str(), value.as_bytes());
            }
            let Ok(request) = request.body(Body::from(step.request.body.clone())) else {
                // A header value with a control character: the `http` types (and
                // hyper's parser, on the wire) refuse it before any layer runs.
                // The vector must then say 400 and nothing ran, as the core does.
                stack_refused += 1;
                if step.expect.ran || step.expect.reply.status != 400 {
                    failures.push(format!(
                        "{label}: http refuses this request, but the vector expects {} (ran: {})",
                        step.expect.reply.status, step.expect.ran
                    ));
                }
                continue;
            };
            let response = app.clone().oneshot(request).await.unwrap();
            let got = reply_of(response).await;
            let ran = script.runs.load(Ordering::SeqCst) > before;
            runs += usize::from(ran);
            let want = &step.expect.reply;
            let mut problems = Vec::new();
            if ran != step.expect.ran {
                problems.push(format!("handler ran: want {}, got {ran}", step.expect.ran));
            }
            if got.status != want.status {
                problems.push(format!("status: want {}, got {}", want.status, got.status));
            }
            // Content-Length is framing (axum adds it for a body of known size):
            // it must match the body, and is not part of the answer compared.
            let framing: Vec<&(String, String)> = got
                .headers
                .iter()
                .filter(|(n, _)| n == "content-length")
                .collect();
            if framing
                .iter()
                .any(|(_, v)| *v != got.body.len().to_string())
            {
                problems.push(format!(
                    "content-length {framing:?} for {} bytes",
                    got.body.len()
                ));
            }
            let answer: Vec<(String, String)> = got
                .headers
                .iter()
                .filter(|(n, _)| n != "content-length")
                .cloned()
                .collect();
            let wanted: Vec<(String, String)> = lower(&want.headers)
                .into_iter()
                .filter(|(n, _)| n != "content-length")
                .collect();
            if lower(&answer) != wanted {
                problems.push(format!(
                    "headers: want {:?}, got {:?}",
                    want.headers, got.headers
                ));
            }
            if got.body != want.body {
                problems.push(format!(
                    "body: want {:?}, got {:?}",
                    String::from_utf8_lossy(&want.body),
                    String::from_utf8_lossy(&got.body)
                ));
            }
            // What finishing left in the store follows from the handler and the rules.
            let key = script.key.lock().unwrap().clone();
            let record = key.as_ref().and_then(|k| store.0.inner.get(k).unwrap());
            let want_status = match (step.expect.kind.as_str(), step.expect.finished.as_deref()) {
                ("handler" | "failed", Some("stored")) => Some(Some(Status::Done)),
                ("handler" | "failed", Some("released")) => Some(None),
                // Left in flight: the handler failed, or every try to finish failed.
                ("handler" | "failed", Some("left-in-flight") | None) => {
                    Some(Some(Status::InFlight))
                }
                _ => None,
            };
            if let Some(want_status) = want_status {
                if key.is_none() {
                    problems.push("the handler got no Idempotency extension".to_owned());
                }
                let got_status = record.as_ref().map(|r| r.status);
                if got_status != want_status {
                    problems.push(format!("record: want {want_status:?}, got {got_status:?}"));
                }
            }
            if !problems.is_empty() {
                failures.push(format!(
                    "{label} ({}): {}",
                    step.expect.kind,
                    problems.join("; ")
                ));
            }
        }
    }
    assert!(steps > 100, "only {steps} steps in the vectors");
    assert!(
        failures.is_empty(),
        "{} of {steps} steps failed through the layer:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!(
        "HTTP vectors through the axum layer: {} cases, {steps} steps ({stack_refused} refused by the http types before the layer, as the vectors expect), {runs} handler runs, all passed; {} case(s) with a handler that raises left to the Node adapters: {raising:?}",
        vectors.cases.len() - raising.len(),
        raising.len()
    );
    assert!(
        raising.len() <= 1,
        "more cases skipped than the one with raised errors"
    );
    assert!(
        stack_refused < 5,
        "{stack_refused} steps never reached the layer"
    );
}
