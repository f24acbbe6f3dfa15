//! [`WasmEndpoint`]: the component's HTTP rules (the `http` export) on
//! world `pure`.

use std::fmt;

use intentkey::claim::ClaimOutcome;
use intentkey::http::{Admission, Incoming, Options, Profile, Reply};
use wasmtime::component::ResourceAny;

use crate::bindings::pure::exports::intentkey::core::http as wit;
use crate::engine::WasmEngine;
use crate::host_state::NoImports;
use crate::instance::{Imports, Instance};
use crate::HostError;

/// One server's HTTP rules run by the component (world `pure`,
/// `dist/intentkey-pure.wasm`): its secret, [`Options`] and route policies,
/// held in the guest's `endpoint` resource. The answers are the core's
/// [`intentkey::http::Endpoint`]'s, computed inside the component: parse
/// the key header, check the body, derive the storage key and the request
/// fingerprint ([`WasmEndpoint::admit`]), and write each profile's answers.
///
/// The claim itself is not here: to serve requests over a store (admit,
/// claim, the handler, finish and the answer, sequenced by the core), use
/// [`crate::WasmServer`].
///
/// The host keeps the secret (wiped when the endpoint is dropped) so that
/// after a trap the next call rebuilds the resource in a fresh instance;
/// the trapping call returns [`HostError::Trap`].
///
/// ```
/// use intentkey::claim::ClaimOutcome;
/// use intentkey::http::{Admission, Incoming, Options, Profile};
/// use intentkey_wasmtime::{WasmEndpoint, WasmEngine};
/// # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap();
///
/// let engine = WasmEngine::from_file("dist/intentkey-pure.wasm")?;
/// let mut endpoint = WasmEndpoint::new(&engine, &[7; 32], &Options::new(Profile::Stripe), &[])?;
/// let request = Incoming {
///     tenant_id: "acct_1", method: "POST", route: "/v1/charges",
///     key_values: &["order-42"], content_type: Some("application/json"), body: br#"{"amount":2000}"#,
/// };
/// let Admission::Guarded(attempt) = endpoint.admit(&request, 1_700_000_000)? else { unreachable!() };
/// assert_eq!(attempt.action_type, "POST /v1/charges");
/// let busy = endpoint.answer(&ClaimOutcome::InFlight, 1_700_000_000)?.unwrap();
/// assert_eq!((busy.status, busy.header("retry-after")), (409, Some("1")));
/// # Ok::<(), intentkey_wasmtime::HostError>(())
/// ```
pub struct WasmEndpoint<'e> {
    inner: Instance<'e, NoImports>,
    spec: EndpointSpec,
}

/// What makes an endpoint's guest resource (again, after a trap), in an
/// instance of either world, and the resource made last.
pub(crate) struct EndpointSpec {
    secret_id: String,
    /// A keyring endpoint's secrets (keyring id, activation, `secrets` import
    /// id) and window; empty for a one-secret endpoint (`secret_id`).
    keyring: Vec<wit::KeyringEntry>,
    window_seconds: Option<i64>,
    options: wit::Options,
    policies: Vec<(String, String)>,
    /// The guest resource and the instance generation it lives in.
    resource: Option<(u64, ResourceAny)>,
}

impl EndpointSpec {
    /// A one-secret endpoint: `secret` held by `inner` until it is dropped.
    pub(crate) fn new<I: Imports>(
        inner: &mut Instance<'_, I>,
        secret: &[u8],
        options: &Options,
        policies: &[(&str, &str)],
    ) -> Self {
        let secret_id = inner.hold_secret(secret);
        EndpointSpec::of(secret_id, Vec::new(), None, options, policies)
    }

    /// A keyring endpoint: every secret held by `inner` until it is dropped.
    pub(crate) fn with_keyring<I: Imports>(
        inner: &mut Instance<'_, I>,
        keyring: &[(&str, i64, &[u8])],
        window_seconds: Option<i64>,
        options: &Options,
        policies: &[(&str, &str)],
    ) -> Self {
        let entries = keyring
            .iter()
            .map(|(id, active_from, secret)| wit::KeyringEntry {
                id: (*id).to_owned(),
                active_from: *active_from,
                secret_id: inner.hold_secret(secret),
            })
            .collect();
        EndpointSpec::of(String::new(), entries, window_seconds, options, policies)
    }

    fn of(
        secret_id: String,
        keyring: Vec<wit::KeyringEntry>,
        window_seconds: Option<i64>,
        options: &Options,
        policies: &[(&str, &str)],
    ) -> Self {
        EndpointSpec {
            secret_id,
            keyring,
            window_seconds,
            options: wit::Options::from(options.clone()),
            policies: policies
                .iter()
                .map(|(a, p)| ((*a).to_owned(), (*p).to_owned()))
                .collect(),
            resource: None,
        }
    }

    /// The guest resource in `inner`, created (again, after a trap) when needed.
    pub(crate) fn resource<I: Imports>(
        &mut self,
        inner: &mut Instance<'_, I>,
    ) -> Result<ResourceAny, HostError> {
        if let Some((generation, resource)) = self.resource {
            if generation == inner.generation() {
                return Ok(resource);
            }
        }
        let created = if self.keyring.is_empty() {
            inner.http.endpoint().call_create(
                &mut inner.store,
                &self.secret_id,
                &self.options,
                &self.policies,
            )
        } else {
            inner.http.endpoint().call_create_keyring(
                &mut inner.store,
                &self.keyring,
                self.window_seconds,
                &self.options,
                &self.policies,
            )
        };
        let resource = inner.answer(created)?;
        self.resource = Some((inner.generation(), resource));
        Ok(resource)
    }

    /// The profile's key header name.
    pub(crate) fn header_name<I: Imports>(
        &mut self,
        inner: &mut Instance<'_, I>,
    ) -> Result<String, HostError> {
        let resource = self.resource(inner)?;
        let result = inner
            .http
            .endpoint()
            .call_header_name(&mut inner.store, resource);
        result.map_err(|e| inner.trapped(&e))
    }

    pub(crate) fn profile(&self) -> wit::Profile {
        self.options.profile
    }

    pub(crate) fn policy_actions(&self) -> Vec<&str> {
        self.policies.iter().map(|(a, _)| a.as_str()).collect()
    }
}

impl fmt::Debug for WasmEndpoint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmEndpoint")
            .field("profile", &self.spec.profile())
            .field("policies", &self.spec.policy_actions())
            .field("reinstantiations", &self.inner.reinstantiations())
            .finish_non_exhaustive()
    }
}

impl<'e> WasmEndpoint<'e> {
    /// An endpoint keyed with `secret` (at least 32 bytes), with `options`
    /// and `policies`: `("METHOD route", policy JSON)` pairs whose ignored
    /// fields leave that route's fingerprints.
    ///
    /// # Errors
    /// [`HostError::Load`] when the engine holds the world-`intentkey`
    /// component (load `dist/intentkey-pure.wasm`); the core's
    /// `secret-too-short`, `invalid-policy` or `invalid-action-type`; a trap.
    pub fn new(
        engine: &'e WasmEngine,
        secret: &[u8],
        options: &Options,
        policies: &[(&str, &str)],
    ) -> Result<Self, HostError> {
        let mut inner = Instance::new(engine, NoImports)?;
        let spec = EndpointSpec::new(&mut inner, secret, options, policies);
        WasmEndpoint::built(inner, spec)
    }

    /// An endpoint keyed by a keyring of `(id, active_from, secret)`
    /// entries ([`intentkey::Keyring`]): storage keys and fingerprints use
    /// the secret active at `now`, and for `window_seconds` after an
    /// activation (`None`: the default, 24 h) each guarded attempt carries
    /// its prior key under the previous secret, which the claim reads first.
    ///
    /// # Errors
    /// As [`WasmEndpoint::new`], and the core's `invalid-keyring`.
    pub fn with_keyring(
        engine: &'e WasmEngine,
        keyring: &[(&str, i64, &[u8])],
        window_seconds: Option<i64>,
        options: &Options,
        policies: &[(&str, &str)],
    ) -> Result<Self, HostError> {
        let mut inner = Instance::new(engine, NoImports)?;
        let spec =
            EndpointSpec::with_keyring(&mut inner, keyring, window_seconds, options, policies);
        WasmEndpoint::built(inner, spec)
    }

    /// The endpoint, with its guest resource made now (so a bad option or
    /// keyring is an error here, not at the first request).
    fn built(inner: Instance<'e, NoImports>, spec: EndpointSpec) -> Result<Self, HostError> {
        let mut endpoint = WasmEndpoint { inner, spec };
        endpoint.resource()?;
        Ok(endpoint)
    }

    /// The guest resource, created (again, after a trap) when needed.
    fn resource(&mut self) -> Result<ResourceAny, HostError> {
        self.spec.resource(&mut self.inner)
    }

    /// A wasmtime result with no core error: the value, or a trap.
    fn value<T>(&mut self, result: wasmtime::Result<T>) -> Result<T, HostError> {
        result.map_err(|e| self.inner.trapped(&e))
    }

    /// The profile's key header name, as the profile spells it.
    ///
    /// # Errors
    /// A trap.
    pub fn header_name(&mut self) -> Result<String, HostError> {
        self.spec.header_name(&mut self.inner)
    }

    /// Applies the rules to a request: [`Admission::Guarded`] with the
    /// attempt to claim, [`Admission::Unguarded`] (no key, keys optional),
    /// or [`Admission::Refused`] with the answer (a bad key, a bad or too
    /// large body).
    ///
    /// # Errors
    /// The core's `invalid-tenant-id` or `invalid-action-type` for what the
    /// server got wrong (an empty tenant, method or route); a trap.
    pub fn admit(&mut self, request: &Incoming<'_>, now: i64) -> Result<Admission, HostError> {
        let resource = self.resource()?;
        let request = wit::Request {
            tenant_id: request.tenant_id.to_owned(),
            method: request.method.to_owned(),
            route: request.route.to_owned(),
            key_values: request.key_values.iter().map(|v| (*v).to_owned()).collect(),
            content_type: request.content_type.map(str::to_owned),
            body: request.body.to_vec(),
        };
        let result =
            self.inner
                .http
                .endpoint()
                .call_admit(&mut self.inner.store, resource, &request, now);
        self.inner.answer(result).map(Admission::from)
    }

    /// The answer to a claim outcome: the replay, 409 or the payload
    /// conflict; `None` when the attempt owns the effect.
    ///
    /// # Errors
    /// A trap.
    pub fn answer(&mut self, outcome: &ClaimOutcome, now: i64) -> Result<Option<Reply>, HostError> {
        let resource = self.resource()?;
        let outcome = wit::ClaimOutcome::from(outcome.clone());
        let result =
            self.inner
                .http
                .endpoint()
                .call_answer(&mut self.inner.store, resource, &outcome, now);
        self.value(result).map(|r| r.map(Reply::from))
    }

    /// 413: the body is larger than the endpoint's `max_body_bytes`.
    ///
    /// # Errors
    /// A trap.
    pub fn too_large(&mut self, now: i64) -> Result<Reply, HostError> {
        let resource = self.resource()?;
        let result =
            self.inner
                .http
                .endpoint()
                .call_too_large(&mut self.inner.store, resource, now);
        self.value(result).map(Reply::from)
    }

    /// 503 with `Retry-After`: the store could not be reached.
    ///
    /// # Errors
    /// A trap.
    pub fn unavailable(&mut self, now: i64) -> Result<Reply, HostError> {
        let resource = self.resource()?;
        let result =
            self.inner
                .http
                .endpoint()
                .call_unavailable(&mut self.inner.store, resource, now);
        self.value(result).map(Reply::from)
    }

    /// 500: the handler failed and its outcome is unknown (the record stays
    /// in flight). No stack trace, no error message.
    ///
    /// # Errors
    /// A trap.
    pub fn failed(&mut self, now: i64) -> Result<Reply, HostError> {
        let resource = self.resource()?;
        let result = self
            .inner
            .http
            .endpoint()
            .call_failed(&mut self.inner.store, resource, now);
        self.value(result).map(Reply::from)
    }

    /// A profile's documented defaults, as the component gives them.
    ///
    /// # Errors
    /// A trap.
    pub fn default_options(&mut self, profile: Profile) -> Result<Options, HostError> {
        let result = self
            .inner
            .http
            .call_default_options(&mut self.inner.store, profile.into());
        self.value(result).map(Options::from)
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
