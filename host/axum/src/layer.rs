//! The tower layer: the core's serve flow (`intentkey::http::ServeFlow`) in
//! front of a service, over an async store.
//!
//! For each request with a guarded method it reads the profile's key
//! header, buffers the body up to the endpoint's limit, and drives the
//! core's serve flow (`intentkey_store::tokio::drive_serve`): the core
//! admits it (a bad key, a bad body or one over the limit is answered there
//! and nothing is stored), claims it, and answers an attempt that does not
//! own the effect (the replay, 409 with `Retry-After`, the profile's payload
//! conflict; a store that cannot be reached 503, one that answers with an
//! error the profile's 500). The owner's request runs the inner service with
//! an [`Idempotency`] extension; its answer is buffered and handed to the
//! flow, which captures what is stored and finishes the record by its
//! outcome class (trying a completion the store could not take again on its
//! schedule); then the answer is sent as the service gave it. A client that
//! hangs up does not cancel the owner: what is left of its run moves to a
//! task of its own, so the record is finished and a retry gets the stored
//! answer. A handler that panics leaves the record in flight (its outcome is
//! unknown) and gets the core's 500, without the panic's message. Every
//! store failure is reported through `on_error`.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::MatchedPath;
use bytes::Bytes;
use futures_util::FutureExt;
use http::header::CONTENT_TYPE;
use http::request::Parts;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use intentkey::claim::{Flow, Op, Rules, Step};
use intentkey::http::{Endpoint, Handled, Incoming, Options, Reply, ServeFlow};
use intentkey::{Keyring, Policy, Secret};
use intentkey_store::tokio::{drive_serve, AsyncStore};
use intentkey_store::StoreError;
use tower::{Layer, Service};
use tracing::Instrument as _;

/// What the owner's handler gets as a request extension
/// (`Extension<Idempotency>`): the tenant-scoped storage key, to pass to the
/// destination as its idempotency key, and the tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idempotency {
    /// The storage key (64 hex): an HMAC of the tenant and the client's key.
    pub key: String,
    /// The tenant the request was assigned to.
    pub tenant_id: String,
}

/// Where an error the client does not see came from, for [`IdempotencyLayer::on_error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The server's configuration (an empty tenant, no randomness).
    Config,
    /// Claiming the record.
    Claim,
    /// The owner's handler (a panic, or a body that failed).
    Handler,
    /// Finishing the record: a try the store could not take (tried again
    /// for about 3 s), or the last one (the record stays in flight;
    /// recovery settles it).
    Complete,
}

type TenantFn = dyn Fn(&Parts) -> String + Send + Sync;
type ClockFn = dyn Fn() -> i64 + Send + Sync;
type ErrorFn = dyn Fn(Phase, &str) + Send + Sync;

#[derive(Clone)]
struct Config {
    endpoint: Endpoint,
    store: Arc<dyn AsyncStore>,
    rules: Rules,
    tenant: Arc<TenantFn>,
    clock: Arc<ClockFn>,
    methods: Vec<Method>,
    on_error: Arc<ErrorFn>,
    deadline: std::time::Duration,
}

/// The tower layer (`Router::layer(IdempotencyLayer::new(…))`).
///
/// ```
/// use axum::{routing::post, Extension, Router};
/// use intentkey::http::{Options, Profile};
/// use intentkey::Secret;
/// use intentkey_axum::{memory, Idempotency, IdempotencyLayer};
///
/// async fn create_order(Extension(id): Extension<Idempotency>) -> String {
///     format!("charged with key {}", id.key)
/// }
///
/// let layer = IdempotencyLayer::new(Secret::new([7u8; 32])?, Options::new(Profile::Ietf), memory())
///     .tenant(|parts| parts.headers.get("x-tenant").and_then(|v| v.to_str().ok()).unwrap_or("default").to_owned());
/// let app: Router = Router::new().route("/orders", post(create_order)).layer(layer);
/// # Ok::<(), intentkey::Error>(())
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    config: Arc<Config>,
}

impl std::fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("endpoint", &self.config.endpoint)
            .field("rules", &self.config.rules)
            .field("methods", &self.config.methods)
            .finish_non_exhaustive()
    }
}

fn system_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl IdempotencyLayer {
    /// A layer with `options` (the profile, the body limit, the replayed
    /// headers…) over `store`. Defaults: every request's tenant is
    /// `"default"`, the default rules (`Rules::default()`), POST and PATCH
    /// guarded, errors the client does not see written to stderr.
    pub fn new(secret: Secret, options: Options, store: impl AsyncStore) -> Self {
        Self::with_shared_store(secret, options, Arc::new(store))
    }

    /// The same over a store shared with other layers or a recovery task.
    pub fn with_shared_store(secret: Secret, options: Options, store: Arc<dyn AsyncStore>) -> Self {
        IdempotencyLayer {
            config: Arc::new(Config {
                endpoint: Endpoint::new(secret, options),
                store,
                rules: Rules::default(),
                tenant: Arc::new(|_| "default".to_owned()),
                clock: Arc::new(system_now),
                methods: intentkey::http::DEFAULT_METHODS
                    .iter()
                    .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
                    .collect(),
                on_error: Arc::new(|phase, message| {
                    eprintln!("intentkey: {phase:?}: {message}");
                }),
                deadline: intentkey_store::tokio::STORE_DEADLINE,
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.config));
        self
    }

    /// A policy for one action, `"METHOD route"` (`"POST /orders"`, the
    /// route as axum matched it): its ignored fields leave the fingerprint.
    ///
    /// # Errors
    /// `invalid-action-type` when `action` is not a method and a route.
    pub fn policy(self, action: &str, policy: Policy) -> Result<Self, intentkey::Error> {
        let endpoint = self.config.endpoint.clone().with_policy(action, policy)?;
        Ok(self.edit(|c| c.endpoint = endpoint))
    }

    /// Keys the layer with a keyring instead of its one secret: storage keys
    /// use the secret active at the layer's clock, and during the keyring's
    /// window after an activation a retry of a request first seen before it
    /// is answered from that request's record (see [`intentkey::Keyring`]).
    pub fn keyring(self, keyring: Keyring) -> Self {
        let endpoint = self.config.endpoint.clone().rekeyed(keyring);
        self.edit(|c| c.endpoint = endpoint)
    }

    /// A retry that finds its key in flight (with the same payload) waits up
    /// to `max` for the first attempt's answer and gets its replay, instead
    /// of 409 at once. The core decides the wait (`intentkey::claim::wait`);
    /// the store wakes the waiter (`AsyncStore::watch`: PostgreSQL
    /// `LISTEN/NOTIFY`, the process's own writes for the memory and SQLite
    /// stores, polling otherwise). A client that hangs up stops its wait.
    ///
    /// # Errors
    /// `invalid-argument` (field `wait-max-ms`) for more than 60 s.
    pub fn wait(self, max: std::time::Duration) -> Result<Self, intentkey::Error> {
        let ms = u32::try_from(max.as_millis()).unwrap_or(u32::MAX);
        let endpoint = self.config.endpoint.clone().with_wait(ms)?;
        Ok(self.edit(|c| c.endpoint = endpoint))
    }

    /// The deadline of each store call (the core's `STORE_DEADLINE_MS`, 2 s,
    /// by default). A claim the store has not answered by then gets the
    /// profile's 503 with `Retry-After` at once, never a hang; if it was
    /// the insert (it may have been committed, its answer lost), the claim
    /// is released in a task of its own, fenced on its owner token, as soon
    /// as the store answers again: its handler never ran. A completion past
    /// it is tried again on the core's schedule.
    pub fn store_deadline(self, deadline: std::time::Duration) -> Self {
        self.edit(|c| c.deadline = deadline)
    }

    /// Reports the records in flight and needing reconciliation as the
    /// OpenTelemetry observable gauge `intentkey.records` (attribute
    /// `intentkey.status`), from the store's cheap count (`AsyncStore::count`)
    /// read every `every` by a task of its own (cargo feature `otel`; call it
    /// inside a tokio runtime).
    #[cfg(feature = "otel")]
    pub fn records_gauge(self, every: std::time::Duration) -> Self {
        crate::telemetry::otel::records_gauge(Arc::clone(&self.config.store), every);
        self
    }

    /// Which tenant a request belongs to (tenants never share a key space).
    /// It must answer a non-empty id; an empty one is the server's mistake
    /// (500, reported).
    pub fn tenant(self, f: impl Fn(&Parts) -> String + Send + Sync + 'static) -> Self {
        self.edit(|c| c.tenant = Arc::new(f))
    }

    /// The claim rules: the TTL of done records, the release statuses,
    /// fast completions.
    pub fn rules(self, rules: Rules) -> Self {
        self.edit(|c| c.rules = rules)
    }

    /// The clock, in whole seconds (tests pin it).
    pub fn clock(self, f: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        self.edit(|c| c.clock = Arc::new(f))
    }

    /// The methods guarded (the core's `DEFAULT_METHODS` by default: POST and PATCH, matched
    /// case-insensitively); others pass through.
    pub fn methods(self, methods: &[Method]) -> Self {
        let methods = methods.to_vec();
        self.edit(|c| c.methods = methods)
    }

    /// Where errors the client does not see go (a panic, a store that failed
    /// while finishing): `f(phase, message)`. Messages never hold the secret.
    pub fn on_error(self, f: impl Fn(Phase, &str) + Send + Sync + 'static) -> Self {
        self.edit(|c| c.on_error = Arc::new(f))
    }

    /// The endpoint (its rules), for a service that wants its header name or
    /// answers.
    pub fn endpoint(&self) -> &Endpoint {
        &self.config.endpoint
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service [`IdempotencyLayer`] wraps around an inner service.
#[derive(Clone)]
pub struct IdempotencyService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> std::fmt::Debug for IdempotencyService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyService").finish_non_exhaustive()
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request<Body>> for IdempotencyService<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The inner service that was polled ready goes with this request.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        let config = Arc::clone(&self.config);
        Box::pin(async move { Ok(handle(config, inner, request).await) })
    }
}

/// A core reply as an HTTP response.
pub(crate) fn reply_response(reply: Reply) -> Response<Body> {
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    for (name, value) in reply.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            headers.append(name, value);
        }
    }
    response
}

/// The body, read up to one byte past `max`: enough for the core to answer
/// 413 (once the key is good) without reading the rest.
async fn read_body(body: Body, max: u64) -> Result<Bytes, String> {
    let cap = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
    let mut body = body;
    let mut bytes: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        if let Ok(data) = frame.into_data() {
            let room = cap.saturating_sub(bytes.len());
            bytes.extend_from_slice(&data[..data.len().min(room)]);
            if bytes.len() >= cap {
                break;
            }
        }
    }
    Ok(Bytes::from(bytes))
}

async fn handle<S>(config: Arc<Config>, inner: S, request: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    let mut inner = inner;
    let method = request.method().as_str();
    if !config
        .methods
        .iter()
        .any(|m| m.as_str().eq_ignore_ascii_case(method))
    {
        return match inner.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    let report = Report {
        span: crate::telemetry::span(
            config.endpoint.options().profile.as_str(),
            config.store.kind(),
        ),
        store_time: std::time::Duration::ZERO,
        store: config.store.kind(),
    };
    let span = report.span.clone();
    guarded(config, inner, request, report)
        .instrument(span)
        .await
}

/// What a guarded request reports (see `crate::telemetry`): its span, and
/// the time its store calls took.
struct Report {
    span: tracing::Span,
    store_time: std::time::Duration,
    store: &'static str,
}

impl Report {
    fn timed(&mut self, op: &'static str, took: std::time::Duration) {
        self.store_time += took;
        crate::telemetry::store_call(op, took, self.store);
    }

    fn served(&self, served: &intentkey::http::Served, key: Option<&str>) {
        crate::telemetry::served(&self.span, served, key, self.store, self.store_time);
    }
}

async fn guarded<S>(
    config: Arc<Config>,
    mut inner: S,
    request: Request<Body>,
    mut report: Report,
) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    let endpoint = &config.endpoint;
    let (mut parts, body) = request.into_parts();
    let now = (config.clock)();
    let body = match read_body(body, endpoint.options().max_body_bytes).await {
        Ok(body) => body,
        Err(e) => {
            // The client hung up or sent a broken body: nothing ran, nothing is stored.
            (config.on_error)(Phase::Handler, &format!("reading the request body: {e}"));
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::BAD_REQUEST;
            return response;
        }
    };
    let key_values: Vec<String> = parts
        .headers
        .get_all(endpoint.header_name())
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    let key_refs: Vec<&str> = key_values.iter().map(String::as_str).collect();
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path().to_owned(), |m| m.as_str().to_owned());
    let tenant_id = (config.tenant)(&parts);
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let incoming = Incoming {
        tenant_id: &tenant_id,
        method: parts.method.as_str(),
        route: &route,
        key_values: &key_refs,
        content_type: content_type.as_deref(),
        body: &body,
    };
    // The core's serve flow decides everything: admission, claim, capture,
    // finish (tried again on its schedule), the answer. This performs it.
    let seed = match new_seed() {
        Ok(seed) => seed,
        Err(e) => {
            (config.on_error)(Phase::Config, &e);
            return reply_response(endpoint.failed(now));
        }
    };
    let mut flow = match ServeFlow::new(endpoint, &incoming, config.rules.clone(), seed, now) {
        Ok(flow) => flow,
        Err(e) => {
            (config.on_error)(Phase::Config, &e.to_string());
            return reply_response(endpoint.failed(now));
        }
    };
    let start = flow.start();
    let mut reported = false;
    let step = match drive_serve(
        &mut flow,
        start,
        &*config.store,
        config.deadline,
        &mut |e| {
            reported = true;
            (config.on_error)(Phase::Claim, &e.to_string());
        },
        &mut |op, took| report.timed(op, took),
    )
    .await
    {
        Ok(step) => step,
        Err(e) => {
            (config.on_error)(Phase::Claim, &e.to_string());
            return reply_response(endpoint.failed(now));
        }
    };
    let key = match step {
        Step::Done(mut served) => {
            if let (Some(failure), false) = (&served.claim_failure, reported) {
                // The flow's own (a record that vanished on every look).
                (config.on_error)(Phase::Claim, &failure.message);
            }
            report.served(&served, flow.attempt().map(|a| a.key.as_str()));
            if let Some(release) = served.unreleased.take() {
                release_in_background(&config, release);
            }
            return match served.reply {
                Some(reply) => reply_response(reply),
                // No key, and keys are optional: the handler runs unguarded.
                None => {
                    let request = Request::from_parts(parts, Body::from(body));
                    match inner.call(request).await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    }
                }
            };
        }
        Step::Io(Op::Effect(key)) => key,
        Step::Io(op) => {
            (config.on_error)(
                Phase::Claim,
                &format!("the serve flow stopped at {}", op.as_str()),
            );
            return reply_response(endpoint.failed(now));
        }
    };

    // Owned: the handler runs here, inline; if the client hangs up and this
    // future is dropped halfway, the rest runs on in a task of its own
    // (`Detached`), so the record is finished either way.
    parts.extensions.insert(Idempotency { key, tenant_id });
    let request = Request::from_parts(parts, Body::from(body));
    let owner = {
        let config = Arc::clone(&config);
        async move {
            let ran = AssertUnwindSafe(inner.call(request)).catch_unwind().await;
            let response = match ran {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_) => {
                    // A panic: the outcome is unknown; the panic's message is not sent.
                    (config.on_error)(Phase::Handler, "the handler panicked");
                    return finish(&config, &mut flow, Handled::Failed, None, &mut report).await;
                }
            };
            let (head, body) = response.into_parts();
            match body.collect().await {
                Ok(collected) => {
                    let bytes = collected.to_bytes();
                    let handled = Handled::Answered {
                        status: head.status.as_u16(),
                        headers: header_pairs(&head),
                        body: bytes.to_vec(),
                    };
                    finish(
                        &config,
                        &mut flow,
                        handled,
                        Some(Response::from_parts(head, Body::from(bytes))),
                        &mut report,
                    )
                    .await
                }
                Err(e) => {
                    (config.on_error)(Phase::Handler, &format!("the handler's body failed: {e}"));
                    finish(&config, &mut flow, Handled::Failed, None, &mut report).await
                }
            }
        }
    };
    Detached(Some(Box::pin(owner))).await
}

/// The owner's run: polled in place, and handed to a task of its own if it
/// is dropped before it ends (the client hung up), so that the handler and
/// the completion of the record are never cut halfway.
struct Detached(Option<BoxFuture<Response<Body>>>);

impl Future for Detached {
    type Output = Response<Body>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response<Body>> {
        let Some(owner) = self.0.as_mut() else {
            return Poll::Pending;
        };
        match owner.as_mut().poll(cx) {
            Poll::Ready(response) => {
                self.0 = None;
                Poll::Ready(response)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(owner) = self.0.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(owner);
            }
        }
    }
}

/// Releases a claim whose handler never ran (its insert's answer was lost)
/// in a task of its own, until the store answers (the core's
/// `ReleaseFlow`); a release that gives up leaves the record to recovery.
fn release_in_background(config: &Arc<Config>, release: intentkey::claim::Release) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let config = Arc::clone(config);
    runtime.spawn(async move {
        let finished =
            intentkey_store::tokio::drive_release(release, &*config.store, config.deadline).await;
        crate::telemetry::released(finished, config.store.kind());
        if finished == intentkey::claim::Finished::LeftInFlight {
            (config.on_error)(
                Phase::Claim,
                "a claim whose answer was lost could not be released (its handler never ran): recovery settles it",
            );
        }
    });
}

/// 16 random bytes from the operating system: the seed of a serve flow's owner token.
fn new_seed() -> Result<[u8; 16], String> {
    intentkey_store::guard::new_seed().map_err(|e: StoreError| e.to_string())
}

/// The handler's headers as it set them, in order.
fn header_pairs(head: &http::response::Parts) -> Vec<(String, String)> {
    head.headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Hands the handler's outcome to the serve flow and drives it to its end
/// (the core captures what is stored, finishes the record and tries a
/// completion the store could not take again on its schedule, each failure
/// reported). The answer: the handler's own (`sent`), whatever finishing
/// did, or the core's when it gives one (500 for a failed handler).
async fn finish(
    config: &Config,
    flow: &mut ServeFlow,
    handled: Handled,
    sent: Option<Response<Body>>,
    report: &mut Report,
) -> Response<Body> {
    let now = (config.clock)();
    let fallback = || reply_response(config.endpoint.failed(now));
    let step = match flow.handled(handled, now) {
        Ok(step) => step,
        Err(e) => {
            (config.on_error)(Phase::Complete, &e.to_string());
            return sent.unwrap_or_else(fallback);
        }
    };
    let end = drive_serve(
        flow,
        step,
        &*config.store,
        config.deadline,
        &mut |e| {
            (config.on_error)(Phase::Complete, &e.to_string());
        },
        &mut |op, took| report.timed(op, took),
    )
    .await;
    match end {
        Ok(Step::Done(served)) => {
            report.served(&served, flow.attempt().map(|a| a.key.as_str()));
            match served.reply {
                Some(reply) => reply_response(reply),
                None => sent.unwrap_or_else(fallback),
            }
        }
        Ok(Step::Io(op)) => {
            (config.on_error)(
                Phase::Complete,
                &format!("the serve flow stopped at {}", op.as_str()),
            );
            sent.unwrap_or_else(fallback)
        }
        Err(e) => {
            (config.on_error)(Phase::Complete, &e.to_string());
            sent.unwrap_or_else(fallback)
        }
    }
}
