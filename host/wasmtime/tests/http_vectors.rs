//! The HTTP conformance vectors (`tests/vectors/http/http_test.json`)
//! through the component on wasmtime: the endpoint's rules are
//! [`WasmEndpoint`] (world `pure`); each request is served by
//! [`WasmServer`] (world `intentkey`), the core's serve flow inside the
//! component over a fresh `MemoryStore` per case, owner tokens from the
//! host's randomness. The vectors' store failures are injected by the
//! store the component imports ([`Failing`]); the component hands them to
//! the flow.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use intentkey::claim::{Completion, Record, Release, Replacement, Rules, Status};
use intentkey::http::{Admission, Handled, Incoming, Options, Profile, Reply};
use intentkey_store::{MemoryStore, Store, StoreError};
use intentkey_vectors::http::{self as v, run_http, HttpSubject, HttpVectors};
use intentkey_wasmtime::{HostError, WasmEndpoint, WasmEngine, WasmServer};

fn dist(var: &str, file: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../dist")
                .join(file)
        },
        PathBuf::from,
    )
}

fn pure_engine() -> &'static WasmEngine {
    static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        WasmEngine::from_file(dist("INTENTKEY_PURE_COMPONENT", "intentkey-pure.wasm"))
            .unwrap_or_else(|e| panic!("{e}; run `cargo xtask build-component` first"))
    })
}

fn guard_engine() -> &'static WasmEngine {
    static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        WasmEngine::from_file(dist("INTENTKEY_COMPONENT", "intentkey.wasm"))
            .unwrap_or_else(|e| panic!("{e}; run `cargo xtask build-component` first"))
    })
}

/// A memory store that fails on demand, as a step of the vectors says: the
/// next `claim` claim operations (insert, get) and the next `finish`
/// finishing writes (complete, release), as unreachable or as an error the
/// store answered.
#[derive(Default)]
struct Failing {
    records: MemoryStore,
    fails: Mutex<v::StoreFails>,
}

impl Failing {
    fn arm(&self, fails: v::StoreFails) {
        *self.fails.lock().unwrap() = fails;
    }

    /// Fails this operation when its budget (`claim` or `finish`) is not spent.
    fn check(&self, finish: bool) -> Result<(), StoreError> {
        let mut fails = self.fails.lock().unwrap();
        let unavailable = fails.unavailable;
        let budget = if finish {
            &mut fails.finish
        } else {
            &mut fails.claim
        };
        if *budget == 0 {
            return Ok(());
        }
        *budget -= 1;
        let message = "injected by the vector";
        Err(if unavailable {
            StoreError::retryable(message)
        } else {
            StoreError::fatal(message)
        })
    }
}

impl Store for Failing {
    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        self.check(false)?;
        self.records.insert(record)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.check(false)?;
        self.records.get(key)
    }

    fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
        self.check(true)?;
        self.records.complete(completion)
    }

    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
        self.records.replace(replacement)
    }

    fn release(&self, release: &Release) -> Result<bool, StoreError> {
        self.check(true)?;
        self.records.release(release)
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        self.records.list(status, limit)
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.records.purge(now)
    }
}

/// One case: the endpoint's rules (world pure) and the server (world
/// intentkey) with the same secret and options, over the case's store.
#[derive(Default)]
struct Wasm {
    endpoint: Option<WasmEndpoint<'static>>,
    server: Option<WasmServer<'static>>,
    store: Arc<Failing>,
}

fn text(e: HostError) -> String {
    e.to_string()
}

fn options(config: &v::EndpointConfig) -> Result<Options, String> {
    Ok(Options {
        profile: Profile::parse(&config.profile)
            .ok_or_else(|| format!("unknown profile {}", config.profile))?,
        strict_key_syntax: config.strict_key_syntax,
        retry_after_seconds: config.retry_after_seconds,
        replay_headers: config.replay_headers.clone(),
        key_required: config.key_required,
        max_body_bytes: config.max_body_bytes,
        max_stored_bytes: intentkey::http::DEFAULT_MAX_STORED_BYTES,
        wait_max_ms: 0,
    })
}

fn reply_out(r: Reply) -> v::Reply {
    v::Reply {
        status: r.status,
        headers: r.headers,
        body: r.body,
    }
}

/// What a vector's handler does, as the serve flow takes it.
fn handled(handler: &v::Handler) -> Handled {
    match handler {
        v::Handler::Responds(r) => {
            let sent = r.as_is();
            Handled::Answered {
                status: sent.status,
                headers: sent.headers,
                body: sent.body,
            }
        }
        v::Handler::Raises(status) => Handled::Raised(*status),
        v::Handler::Throws => Handled::Failed,
    }
}

fn incoming<'a>(request: &'a v::Incoming, key_values: &'a [&'a str]) -> Incoming<'a> {
    Incoming {
        tenant_id: &request.tenant_id,
        method: &request.method,
        route: &request.route,
        key_values,
        content_type: request.content_type.as_deref(),
        body: &request.body,
    }
}

impl Wasm {
    fn endpoint(&mut self) -> Result<&mut WasmEndpoint<'static>, String> {
        self.endpoint
            .as_mut()
            .ok_or_else(|| "no endpoint: start_case first".to_owned())
    }
}

impl HttpSubject for Wasm {
    fn start_case(&mut self, secret: &[u8], config: &v::EndpointConfig) -> Result<(), String> {
        let policies: Vec<(&str, &str)> = config
            .policies
            .iter()
            .map(|(a, p)| (a.as_str(), p.as_str()))
            .collect();
        let options = options(config)?;
        self.endpoint =
            Some(WasmEndpoint::new(pure_engine(), secret, &options, &policies).map_err(text)?);
        self.store = Arc::new(Failing::default());
        let store: Arc<dyn Store> = self.store.clone();
        self.server = Some(
            WasmServer::new(guard_engine(), store, secret, &options, &policies).map_err(text)?,
        );
        Ok(())
    }

    fn header_name(&mut self) -> Result<String, String> {
        self.endpoint()?.header_name().map_err(text)
    }

    fn admit(&mut self, request: &v::Incoming, now: i64) -> Result<v::Admission, String> {
        let key_values: Vec<&str> = request.key_values.iter().map(String::as_str).collect();
        let admission = self
            .endpoint()?
            .admit(&incoming(request, &key_values), now)
            .map_err(text)?;
        Ok(match admission {
            Admission::Guarded(a) => v::Admission::Guarded(v::Attempt {
                key: a.key,
                fingerprint: a.fingerprint,
                tenant_id: a.tenant_id,
                action_type: a.action_type,
            }),
            Admission::Unguarded => v::Admission::Unguarded,
            Admission::Refused(r) => v::Admission::Refused(reply_out(r)),
        })
    }

    fn too_large(&mut self, now: i64) -> Result<v::Reply, String> {
        self.endpoint()?.too_large(now).map(reply_out).map_err(text)
    }

    fn unavailable(&mut self, now: i64) -> Result<v::Reply, String> {
        self.endpoint()?
            .unavailable(now)
            .map(reply_out)
            .map_err(text)
    }

    fn failed(&mut self, now: i64) -> Result<v::Reply, String> {
        self.endpoint()?.failed(now).map(reply_out).map_err(text)
    }

    fn serve(
        &mut self,
        request: &v::Incoming,
        now: i64,
        handler: &v::Handler,
        fails: v::StoreFails,
        release_statuses: &[u16],
    ) -> Result<v::Served, String> {
        let rules = Rules {
            release_statuses: release_statuses.to_vec(),
            ..Rules::default()
        };
        let key_values: Vec<&str> = request.key_values.iter().map(String::as_str).collect();
        let server = self
            .server
            .as_mut()
            .ok_or_else(|| "no server: start_case first".to_owned())?;
        self.store.arm(fails);
        let mut ran = false;
        let served = server.serve_with(
            &incoming(request, &key_values),
            &rules,
            now,
            |_key| {
                ran = true;
                (handled(handler), now)
            },
            // The vectors resume at once after a pause.
            |_| {},
        );
        // Failures the request did not reach do not carry over.
        self.store.arm(v::StoreFails::default());
        let served = served.map_err(text)?;
        Ok(v::Served {
            path: served.path.as_str().to_owned(),
            ran,
            reply: served.reply.map(reply_out),
            finished: served.finished.map(|f| f.as_str().to_owned()),
            finish_retries: served.finish_retries,
        })
    }
}

#[test]
fn http_vectors_wasmtime() {
    let vectors = HttpVectors::load().unwrap_or_else(|e| panic!("{e}"));
    let report = run_http(&mut Wasm::default(), &vectors, &mut |_, _, _| Vec::new());
    report.assert_passed("wasmtime");
    let expected_runs = vectors
        .cases
        .iter()
        .flat_map(|c| &c.steps)
        .filter(|s| s.expect.ran)
        .count();
    assert_eq!(report.handler_runs, expected_runs);
}

#[test]
fn the_wasmtime_runner_can_fail() {
    let mut vectors = HttpVectors::load().unwrap_or_else(|e| panic!("{e}"));
    vectors.cases.truncate(2);
    vectors.cases[0].steps[1].expect.reply.body.push(b' ');
    vectors.cases[1].steps[0].expect.ran = false;
    vectors.fingerprints.truncate(1);
    vectors.fingerprints[0].fingerprint = "0".repeat(64);
    vectors.storage_keys.truncate(1);
    vectors.endpoint_answers.truncate(1);
    let report = run_http(&mut Wasm::default(), &vectors, &mut |_, _, _| Vec::new());
    assert_eq!(report.failures.len(), 3, "{:#?}", report.failures);
    assert_eq!((report.cases_passed, report.fingerprints_passed), (0, 0));
    assert_eq!((report.storage_keys_passed, report.answers_passed), (1, 1));
}

fn endpoint(profile: Profile) -> WasmEndpoint<'static> {
    WasmEndpoint::new(pure_engine(), &[7; 32], &Options::new(profile), &[]).unwrap()
}

#[test]
fn a_trap_rebuilds_the_endpoint_in_a_fresh_instance() {
    let mut endpoint = endpoint(Profile::Ofb);
    let request = Incoming {
        tenant_id: "t",
        method: "POST",
        route: "/pix",
        key_values: &["k-1"],
        content_type: None,
        body: b"",
    };
    let Admission::Guarded(before) = endpoint.admit(&request, 0).unwrap() else {
        panic!("not guarded")
    };
    endpoint.interrupt_next_call();
    assert!(matches!(
        endpoint.admit(&request, 0),
        Err(HostError::Trap(_))
    ));
    assert_eq!(endpoint.reinstantiations(), 1);
    let Admission::Guarded(after) = endpoint.admit(&request, 0).unwrap() else {
        panic!("not guarded")
    };
    assert_eq!(before, after, "the same secret and options after the trap");
    assert_eq!(endpoint.header_name().unwrap(), "x-idempotency-key");
}

#[test]
fn the_endpoint_refuses_what_the_core_refuses() {
    let short = WasmEndpoint::new(pure_engine(), &[7; 16], &Options::default(), &[]);
    assert_eq!(
        short.unwrap_err().code(),
        Some(intentkey::ErrorCode::SecretTooShort)
    );
    let bad_policy = WasmEndpoint::new(
        pure_engine(),
        &[7; 32],
        &Options::default(),
        &[("POST /orders", "{\"version\":2}")],
    );
    assert_eq!(
        bad_policy.unwrap_err().code(),
        Some(intentkey::ErrorCode::InvalidPolicy)
    );
    let bad_action = WasmEndpoint::new(
        pure_engine(),
        &[7; 32],
        &Options::default(),
        &[("/orders", "{\"version\":1,\"fields\":{}}")],
    );
    assert_eq!(
        bad_action.unwrap_err().code(),
        Some(intentkey::ErrorCode::InvalidActionType)
    );
    let full = WasmEndpoint::new(guard_engine(), &[7; 32], &Options::default(), &[]);
    assert!(matches!(full, Err(HostError::Load(_))));
    let mut endpoint = endpoint(Profile::Ietf);
    let empty_tenant = Incoming {
        tenant_id: "",
        method: "POST",
        route: "/orders",
        key_values: &["\"k\""],
        content_type: None,
        body: b"",
    };
    assert_eq!(
        endpoint.admit(&empty_tenant, 0).unwrap_err().code(),
        Some(intentkey::ErrorCode::InvalidTenantId)
    );
}

#[test]
fn default_options_and_debug() {
    let mut endpoint = endpoint(Profile::Stripe);
    for profile in Profile::ALL {
        assert_eq!(
            endpoint.default_options(profile).unwrap(),
            Options::new(profile)
        );
    }
    let debug = format!("{endpoint:?}");
    assert!(
        debug.contains("Stripe") && !debug.contains("7, 7"),
        "{debug}"
    );
}

/// An endpoint keyed by a keyring admits as the native one does: the
/// secret active now, and inside the window the prior key under the
/// previous secret (the claim reads it first); rebuilt after a trap.
#[test]
fn a_keyring_endpoint_admits_with_the_prior_key_inside_the_window() {
    use intentkey::http::{Admission, Endpoint, Incoming, Options, Profile};
    use intentkey::{Keyring, Secret};
    const ROTATION: i64 = 1_800_000_000;
    let (old, new) = ([0x11u8; 32], [0x22u8; 32]);
    let ring: [(&str, i64, &[u8]); 2] = [("2026-11", 0, &old), ("2026-12", ROTATION, &new)];
    let options = Options::new(Profile::Ietf);
    let mut wasm =
        WasmEndpoint::with_keyring(pure_engine(), &ring, Some(600), &options, &[]).unwrap();
    let native = Endpoint::with_keyring(
        Keyring::new(vec![
            ("2026-11".into(), 0, Secret::new(old).unwrap()),
            ("2026-12".into(), ROTATION, Secret::new(new).unwrap()),
        ])
        .unwrap()
        .with_window(600)
        .unwrap(),
        options,
    );
    let request = Incoming {
        tenant_id: "shop",
        method: "POST",
        route: "/orders",
        key_values: &["\"order-1\""],
        content_type: Some("application/json"),
        body: br#"{"amount":"10.00"}"#,
    };
    let guarded = |a: Admission| match a {
        Admission::Guarded(attempt) => attempt,
        other => panic!("{other:?}"),
    };
    for now in [ROTATION - 1, ROTATION + 5, ROTATION + 600] {
        assert_eq!(
            guarded(wasm.admit(&request, now).unwrap()),
            guarded(native.admit(&request, now).unwrap()),
            "at {now}"
        );
    }
    let before = guarded(wasm.admit(&request, ROTATION - 1).unwrap());
    let during = guarded(wasm.admit(&request, ROTATION + 5).unwrap());
    assert_eq!(
        during.prior.as_ref().map(|p| p.key.as_str()),
        Some(before.key.as_str())
    );
    assert!(before.prior.is_none());
    // A bad keyring is the core's error.
    let twice: [(&str, i64, &[u8]); 2] = [("a", 0, &old), ("a", 5, &new)];
    let refused = WasmEndpoint::with_keyring(
        pure_engine(),
        &twice,
        None,
        &Options::new(Profile::Ietf),
        &[],
    )
    .unwrap_err();
    assert!(
        matches!(&refused, HostError::Core(e) if e.code().as_str() == "invalid-keyring"),
        "{refused:?}"
    );
}

fn order(key: &'static [&'static str]) -> Incoming<'static> {
    Incoming {
        tenant_id: "shop",
        method: "POST",
        route: "/orders",
        key_values: key,
        content_type: Some("application/json"),
        body: br#"{"amount":"10.00"}"#,
    }
}

fn created(_key: &str) -> (Handled, i64) {
    let headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    let body = br#"{"id":"ord_1"}"#.to_vec();
    (
        Handled::Answered {
            status: 201,
            headers,
            body,
        },
        101,
    )
}

/// The server: the handler runs once, a retry is the replay; a store that
/// cannot be reached before the claim is 503 with the failure reported; a
/// finish that keeps failing is tried again after each pause and leaves the
/// record in flight (409 to the retry); after a trap the next request runs
/// on a fresh instance over the same store.
#[test]
fn a_server_runs_the_handler_once_and_replays() {
    use intentkey::claim::Finished;
    use intentkey::http::ServePath;
    let store = Arc::new(Failing::default());
    let options = Options::new(Profile::Ietf);
    let mut server =
        WasmServer::new(guard_engine(), store.clone(), &[7; 32], &options, &[]).unwrap();
    assert_eq!(server.header_name().unwrap(), "Idempotency-Key");
    let rules = Rules::default();
    let runs = std::cell::Cell::new(0);
    let handler = |key: &str| {
        runs.set(runs.get() + 1);
        assert_eq!(key.len(), 64);
        created(key)
    };
    let first = server
        .serve(&order(&["k-1"]), &rules, 100, handler)
        .unwrap();
    assert_eq!(
        (first.path, first.reply, first.finished),
        (ServePath::Handler, None, Some(Finished::Stored))
    );
    let again = server
        .serve(&order(&["k-1"]), &rules, 102, handler)
        .unwrap();
    let reply = again.reply.unwrap();
    assert_eq!((again.path, reply.status), (ServePath::Replay, 201));
    assert_eq!(reply.body, br#"{"id":"ord_1"}"#);
    assert_eq!(runs.get(), 1);

    // The store cannot be reached: 503, the handler does not run, the
    // failure is reported.
    store.arm(v::StoreFails {
        claim: 1,
        finish: 0,
        unavailable: true,
    });
    let down = server
        .serve(&order(&["k-2"]), &rules, 103, handler)
        .unwrap();
    store.arm(v::StoreFails::default());
    assert_eq!(down.path, ServePath::Unavailable);
    assert_eq!(down.reply.map(|r| r.status), Some(503));
    assert_eq!(
        down.claim_failure.map(|f| (f.unavailable, f.message)),
        Some((true, "injected by the vector".to_owned()))
    );
    assert_eq!(runs.get(), 1);

    // Finishing fails every time: each pause is the host's to wait out.
    store.arm(v::StoreFails {
        claim: 0,
        finish: 100,
        unavailable: true,
    });
    let mut pauses = Vec::new();
    let stuck = server
        .serve_with(&order(&["k-3"]), &rules, 104, handler, |d| pauses.push(d))
        .unwrap();
    store.arm(v::StoreFails::default());
    assert_eq!((stuck.path, stuck.finished), (ServePath::Handler, None));
    assert_eq!(stuck.finish_retries as usize, pauses.len());
    assert!(!pauses.is_empty());
    assert_eq!(stuck.finish_failures.len(), pauses.len() + 1);
    let busy = server
        .serve(&order(&["k-3"]), &rules, 105, handler)
        .unwrap();
    assert_eq!(
        (busy.path, busy.reply.map(|r| r.status)),
        (ServePath::InFlight, Some(409))
    );
    assert_eq!(runs.get(), 2);

    // A trap: that call fails, the next one runs on a fresh instance over
    // the same store (the endpoint is rebuilt with the same secret).
    server.interrupt_next_call();
    assert!(matches!(
        server.serve(&order(&["k-1"]), &rules, 106, handler),
        Err(HostError::Trap(_))
    ));
    assert_eq!(server.reinstantiations(), 1);
    let after = server
        .serve(&order(&["k-1"]), &rules, 107, handler)
        .unwrap();
    assert_eq!(after.path, ServePath::Replay);
    assert_eq!(runs.get(), 2);
    assert!(format!("{server:?}").contains("Ietf"));
}

#[test]
fn a_server_refuses_what_the_core_refuses() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let pure = WasmServer::new(
        pure_engine(),
        store.clone(),
        &[7; 32],
        &Options::default(),
        &[],
    );
    assert!(matches!(pure, Err(HostError::Load(_))));
    let short = WasmServer::new(
        guard_engine(),
        store.clone(),
        &[7; 16],
        &Options::default(),
        &[],
    );
    assert_eq!(
        short.unwrap_err().code(),
        Some(intentkey::ErrorCode::SecretTooShort)
    );
    let mut server =
        WasmServer::new(guard_engine(), store, &[7; 32], &Options::default(), &[]).unwrap();
    let mut empty_tenant = order(&["k"]);
    empty_tenant.tenant_id = "";
    let refused = server.serve(&empty_tenant, &Rules::default(), 0, |_| panic!("ran"));
    assert_eq!(
        refused.unwrap_err().code(),
        Some(intentkey::ErrorCode::InvalidTenantId)
    );
}
