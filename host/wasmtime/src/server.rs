//! [`WasmServer`]: one request at a time through the core's serve flow, on
//! world `intentkey`, over a real store.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use intentkey::claim::{Lookup, Rules};
use intentkey::http::{Handled, Incoming, Options, Served};
use intentkey::{Error, ErrorCode};
use intentkey_store::{Gateway, Store};
use wasmtime::component::ResourceAny;

use crate::bindings::full::exports::intentkey::core::flows as wit_flows;
use crate::bindings::full::exports::intentkey::core::http as wit_http;
use crate::bindings::pure::intentkey::core::types as wit;
use crate::endpoint::EndpointSpec;
use crate::engine::WasmEngine;
use crate::host_state::GuardImports;
use crate::instance::Instance;
use crate::HostError;

/// Seed bytes of a serve flow: its owner token is made from them.
const SEED_BYTES: usize = 16;

/// One server's HTTP rules and its store, run by the component (world
/// `intentkey`, `dist/intentkey.wasm`): [`WasmServer::serve`] takes a
/// request through the core's serve flow (`flows.flow.serve`) inside the
/// component: admit, claim, the handler, capture, finish by the outcome
/// class, and the answer. The flow's store operations run inside the
/// component against `store` (the `store` import, through `guard.advance`);
/// a store failure goes back to the flow, which decides what it means (503
/// or 500 before the claim, finishing tried again after pauses, a record
/// left in flight). The host runs the handler when the flow asks for it,
/// waits out the pauses, and converts types; nothing else.
///
/// The endpoint lives in the same component instance as the flow. The
/// host keeps its secret (wiped when the server is dropped) so that after
/// a trap the next call rebuilds it in a fresh instance; the trapping call
/// returns [`HostError::Trap`], and a request it interrupted is left as a
/// crash leaves it (a record in flight, settled by recovery).
///
/// ```
/// use std::sync::Arc;
/// use intentkey::claim::{Finished, Rules};
/// use intentkey::http::{Handled, Incoming, Options, Profile, ServePath};
/// use intentkey_store::MemoryStore;
/// use intentkey_wasmtime::{WasmEngine, WasmServer};
/// # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap();
///
/// let engine = WasmEngine::from_file("dist/intentkey.wasm")?;
/// let store = Arc::new(MemoryStore::default());
/// let mut server = WasmServer::new(&engine, store, &[7; 32], &Options::new(Profile::Ietf), &[])?;
/// let request = Incoming {
///     tenant_id: "acct_1", method: "POST", route: "/orders",
///     key_values: &["order-42"], content_type: Some("application/json"), body: br#"{"amount":2000}"#,
/// };
/// let mut runs = 0;
/// let mut handler = |_key: &str| {
///     runs += 1;
///     let headers = vec![("Content-Type".into(), "application/json".into())];
///     (Handled::Answered { status: 201, headers, body: br#"{"id":"ord_1"}"#.to_vec() }, 1_700_000_001)
/// };
/// // The first request runs the handler; its own answer goes out.
/// let first = server.serve(&request, &Rules::default(), 1_700_000_000, &mut handler)?;
/// assert_eq!((first.path, first.reply, first.finished), (ServePath::Handler, None, Some(Finished::Stored)));
/// // The retry is the stored answer; the handler does not run again.
/// let again = server.serve(&request, &Rules::default(), 1_700_000_002, &mut handler)?;
/// assert_eq!(again.path, ServePath::Replay);
/// assert_eq!(again.reply.map(|r| (r.status, r.body)), Some((201, br#"{"id":"ord_1"}"#.to_vec())));
/// assert_eq!(runs, 1);
/// # Ok::<(), intentkey_wasmtime::HostError>(())
/// ```
pub struct WasmServer<'e> {
    inner: Instance<'e, GuardImports>,
    endpoint: EndpointSpec,
}

impl fmt::Debug for WasmServer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmServer")
            .field("profile", &self.endpoint.profile())
            .field("policies", &self.endpoint.policy_actions())
            .field("reinstantiations", &self.inner.reinstantiations())
            .finish_non_exhaustive()
    }
}

/// A serve flow never asks the destination; should one ask, the answer is
/// "unknown", which never re-executes.
struct NoDestination;

impl Gateway for NoDestination {
    fn lookup(&self, _key: &str) -> Lookup {
        Lookup::Unknown
    }

    fn read_your_writes(&self) -> bool {
        false
    }
}

/// The component answered what a serve flow driven by `guard.advance`
/// never answers.
fn misuse(what: &str) -> HostError {
    HostError::Core(Error::new(
        ErrorCode::FlowMisuse,
        format!("the serve flow {what}"),
    ))
}

impl<'e> WasmServer<'e> {
    /// A server over `store` (memory, SQLite, PostgreSQL: any [`Store`]),
    /// keyed with `secret` (at least 32 bytes), with `options` and
    /// `policies`: `("METHOD route", policy JSON)` pairs whose ignored
    /// fields leave that route's fingerprints.
    ///
    /// # Errors
    /// [`HostError::Load`] when the engine holds the world-`pure` component
    /// (load `dist/intentkey.wasm`); the core's `secret-too-short`,
    /// `invalid-policy` or `invalid-action-type`; a trap.
    pub fn new(
        engine: &'e WasmEngine,
        store: Arc<dyn Store>,
        secret: &[u8],
        options: &Options,
        policies: &[(&str, &str)],
    ) -> Result<Self, HostError> {
        let mut inner = Instance::new(engine, imports(store))?;
        let endpoint = EndpointSpec::new(&mut inner, secret, options, policies);
        WasmServer::built(inner, endpoint)
    }

    /// A server over `store` keyed by a keyring of `(id, active_from,
    /// secret)` entries, as [`crate::WasmEndpoint::with_keyring`].
    ///
    /// # Errors
    /// As [`WasmServer::new`], and the core's `invalid-keyring`.
    pub fn with_keyring(
        engine: &'e WasmEngine,
        store: Arc<dyn Store>,
        keyring: &[(&str, i64, &[u8])],
        window_seconds: Option<i64>,
        options: &Options,
        policies: &[(&str, &str)],
    ) -> Result<Self, HostError> {
        let mut inner = Instance::new(engine, imports(store))?;
        let endpoint =
            EndpointSpec::with_keyring(&mut inner, keyring, window_seconds, options, policies);
        WasmServer::built(inner, endpoint)
    }

    /// The server, with its endpoint made now (so a bad option or keyring
    /// is an error here, not at the first request).
    fn built(inner: Instance<'e, GuardImports>, endpoint: EndpointSpec) -> Result<Self, HostError> {
        let mut server = WasmServer { inner, endpoint };
        server.endpoint.resource(&mut server.inner)?;
        Ok(server)
    }

    /// The profile's key header name, as the profile spells it.
    ///
    /// # Errors
    /// A trap.
    pub fn header_name(&mut self) -> Result<String, HostError> {
        self.endpoint.header_name(&mut self.inner)
    }

    /// Serves `request` at `now`, finishing by `rules`. When the flow
    /// asks for the handler (this request owns the key), `handler` runs
    /// with the storage key and returns what it did and when it ended
    /// (seconds); it runs at most once, and not at all for a replay, a 409,
    /// a payload conflict, a refusal, a store failure before the claim or
    /// an unguarded request (for [`intentkey::http::ServePath::Unguarded`]
    /// the caller runs its handler itself). Pauses before finishing again
    /// after a store failure are slept on this thread.
    ///
    /// Returns the core's [`Served`]: the answer to send (`None`: the
    /// handler's own answer, or the framework's for a released claim), what
    /// finishing did, and the store failures to report.
    ///
    /// # Errors
    /// The core's `invalid-tenant-id` or `invalid-action-type` for what the
    /// server got wrong (an empty tenant, method or route), `invalid-random`
    /// when the system has no randomness for the owner token; a trap.
    /// Store failures are not errors: they are in [`Served`].
    pub fn serve(
        &mut self,
        request: &Incoming<'_>,
        rules: &Rules,
        now: i64,
        handler: impl FnOnce(&str) -> (Handled, i64),
    ) -> Result<Served, HostError> {
        self.serve_with(request, rules, now, handler, std::thread::sleep)
    }

    /// As [`WasmServer::serve`], with `pause` waiting out each pause the
    /// flow asks for (a host with its own timer, or a test that does not
    /// wait).
    ///
    /// # Errors
    /// As [`WasmServer::serve`].
    pub fn serve_with(
        &mut self,
        request: &Incoming<'_>,
        rules: &Rules,
        now: i64,
        handler: impl FnOnce(&str) -> (Handled, i64),
        mut pause: impl FnMut(Duration),
    ) -> Result<Served, HostError> {
        let endpoint = self.endpoint.resource(&mut self.inner)?;
        let request = request_out(request);
        let rules = wit::Rules::from(rules.clone());
        let mut seed = vec![0u8; SEED_BYTES];
        // With no OS randomness the seed stays short and the component
        // refuses it with invalid-random.
        if getrandom::fill(&mut seed).is_err() {
            seed.clear();
        }
        let created = self.inner.exports.flows.flow().call_serve(
            &mut self.inner.store,
            endpoint,
            &request,
            &rules,
            &seed,
            now,
        );
        let flow = self.inner.answer(created)?;
        let generation = self.inner.generation();
        let mut served = self.drive(flow, handler, &mut pause);
        if self.inner.generation() == generation
            && flow.resource_drop(&mut self.inner.store).is_err()
        {
            // The guest trapped in the flow's destructor: start afresh; the
            // request's answer stands.
            self.inner.replace_after_trap();
        }
        if let Ok(served) = &mut served {
            if let Some(release) = served.unreleased.take() {
                self.release_once(release);
            }
        }
        served
    }

    /// Releases a claim whose insert failed (its handler never ran) with the
    /// core's release flow, one try: a synchronous server does not hold the
    /// request for the flow's later tries, so a claim the store did not
    /// take now is left to recovery.
    fn release_once(&mut self, release: intentkey::claim::Release) {
        let request = wit::ReleaseRequest::from(release);
        let created = self
            .inner
            .exports
            .flows
            .flow()
            .call_release_claim(&mut self.inner.store, &request);
        let flow = match created {
            Ok(flow) => flow,
            Err(e) => {
                let _ = self.inner.trapped(&e);
                return;
            }
        };
        let generation = self.inner.generation();
        let advanced = self
            .inner
            .exports
            .guard
            .call_advance(&mut self.inner.store, flow, None);
        let _ = self.inner.answer(advanced);
        if self.inner.generation() == generation
            && flow.resource_drop(&mut self.inner.store).is_err()
        {
            self.inner.replace_after_trap();
        }
    }

    /// Advances `flow` over the imported store until it is done, running
    /// the handler and waiting out pauses when it asks.
    fn drive(
        &mut self,
        flow: ResourceAny,
        handler: impl FnOnce(&str) -> (Handled, i64),
        pause: &mut impl FnMut(Duration),
    ) -> Result<Served, HostError> {
        let mut handler = Some(handler);
        let mut done: Option<wit_flows::OpResult> = None;
        loop {
            let result =
                self.inner
                    .exports
                    .guard
                    .call_advance(&mut self.inner.store, flow, done.as_ref());
            done = Some(match self.inner.answer(result)? {
                wit_flows::Step::Done(wit_flows::Output::Served(served)) => {
                    return Ok(served.into())
                }
                wit_flows::Step::Done(_) => return Err(misuse("ended without a served request")),
                wit_flows::Step::Io(wit_flows::Op::Effect(key)) => {
                    let run = handler
                        .take()
                        .ok_or_else(|| misuse("asked for the handler twice"))?;
                    let (handled, now) = run(&key);
                    wit_flows::OpResult::Handled(wit_flows::HandlerOutcome {
                        handled: wit_http::Handled::from(handled),
                        now,
                    })
                }
                wit_flows::Step::Io(wit_flows::Op::Wait(ms)) => {
                    pause(Duration::from_millis(u64::from(ms)));
                    wit_flows::OpResult::Waited
                }
                // A synchronous server has no notifications: it polls, on
                // the core's intervals.
                wit_flows::Step::Io(wit_flows::Op::Watch(w)) => {
                    let started = std::time::Instant::now();
                    pause(Duration::from_millis(u64::from(w.ms)));
                    let elapsed = started.elapsed().as_millis();
                    wit_flows::OpResult::Watched(wit_flows::Watched {
                        elapsed_ms: u32::try_from(elapsed).unwrap_or(u32::MAX),
                        now: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
                    })
                }
                wit_flows::Step::Io(wit_flows::Op::Ask(key)) => {
                    wit_flows::OpResult::Answered(self.inner.imports().gateway.lookup(&key).into())
                }
                wit_flows::Step::Io(_) => {
                    return Err(misuse("asked the host for a store operation"))
                }
            });
        }
    }

    /// Makes the next call trap at once (for testing trap recovery).
    pub fn interrupt_next_call(&mut self) {
        self.inner.interrupt_next_call();
    }

    /// How many times the instance has been replaced after a trap.
    pub fn reinstantiations(&self) -> u64 {
        self.inner.reinstantiations()
    }
}

fn imports(store: Arc<dyn Store>) -> GuardImports {
    GuardImports {
        store,
        gateway: Arc::new(NoDestination),
    }
}

/// A request as the component's serve flow takes it.
fn request_out(request: &Incoming<'_>) -> wit_http::Request {
    wit_http::Request {
        tenant_id: request.tenant_id.to_owned(),
        method: request.method.to_owned(),
        route: request.route.to_owned(),
        key_values: request.key_values.iter().map(|v| (*v).to_owned()).collect(),
        content_type: request.content_type.map(str::to_owned),
        body: request.body.to_vec(),
    }
}
