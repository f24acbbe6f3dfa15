//! One guarded HTTP endpoint: the four rules applied to a request in one
//! call. [`super::ServeFlow`] composes them with the claim, the handler and
//! the finish, so an adapter only reads the request and writes the answer.

use std::fmt;

use crate::claim::{Attempt, ClaimOutcome, PriorKey};
use crate::error::{Error, ErrorCode, Result};
use crate::keyring::Keyring;
use crate::policy::Policy;
use crate::secret::Secret;

use super::fingerprint::{fingerprint_of, request_fingerprint_material, Request};
use super::header::KeyErrorReason;
use super::profile::Options;
use super::reply::{Refusal, Reply};
use super::storage_key::storage_key;

/// A request as an adapter reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Incoming<'a> {
    /// The tenant the server assigns the request to (non-empty).
    pub tenant_id: &'a str,
    /// The method.
    pub method: &'a str,
    /// The route: a template (`/orders/:id`) or the path (non-empty).
    pub route: &'a str,
    /// The values of the profile's key header ([`Endpoint::header_name`]),
    /// one per header line; none when the request has no such header.
    pub key_values: &'a [&'a str],
    /// The `Content-Type` header, if any.
    pub content_type: Option<&'a str>,
    /// The body as received.
    pub body: &'a [u8],
}

/// What an endpoint does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Claim this attempt; the handler runs only if the claim is owned.
    Guarded(Attempt),
    /// No key was sent and [`Options::key_required`] is off: run the
    /// handler unguarded.
    Unguarded,
    /// Answer this and run nothing (a bad key, a bad or too large body).
    /// Nothing is stored.
    Refused(Reply),
}

/// The HTTP rules of one server: its secret, its [`Options`], and the
/// policies of the routes that have one.
///
/// ```
/// use intentkey::claim::{ClaimOutcome, Response};
/// use intentkey::http::{Admission, Endpoint, Incoming, Options, Profile};
/// use intentkey::Secret;
///
/// let endpoint = Endpoint::new(Secret::new([9u8; 32])?, Options::new(Profile::Stripe));
/// let request = Incoming {
///     tenant_id: "acct_1", method: "POST", route: "/v1/charges",
///     key_values: &["order-42"], content_type: Some("application/json"), body: br#"{"amount":2000}"#,
/// };
/// let Admission::Guarded(attempt) = endpoint.admit(&request, 0)? else { unreachable!() };
/// assert_eq!((attempt.key.len(), attempt.action_type.as_str()), (64, "POST /v1/charges"));
///
/// // A key of 10,000 characters is refused, in Stripe's shape.
/// let long = "k".repeat(10_000);
/// let Admission::Refused(reply) = endpoint.admit(&Incoming { key_values: &[&long], ..request }, 0)? else { unreachable!() };
/// assert_eq!(reply.status, 400);
///
/// // Replays carry the stored answer.
/// let replay = endpoint.answer(&ClaimOutcome::Done(Response::json(200, "{}")), 0).unwrap();
/// assert!(replay.is_replay());
/// # Ok::<(), intentkey::Error>(())
/// ```
#[derive(Clone)]
pub struct Endpoint {
    keyring: Keyring,
    /// Shared with every serve flow of the endpoint (one request's
    /// flow holds it, not a copy).
    options: std::sync::Arc<Options>,
    policies: Vec<(String, Policy)>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("keyring", &self.keyring)
            .field("options", &self.options)
            .field(
                "policies",
                &self.policies.iter().map(|(a, _)| a).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Endpoint {
    /// An endpoint with one secret and no route policies.
    pub fn new(secret: Secret, options: Options) -> Self {
        Endpoint::with_keyring(Keyring::single(secret), options)
    }

    /// An endpoint keyed by a [`Keyring`]: storage keys and fingerprints use
    /// the secret active at `now`, and during the keyring's window after an
    /// activation each guarded attempt also carries its [`PriorKey`] under
    /// the previous secret, so the claim answers a retry of a request first
    /// seen before the rotation from that request's record.
    ///
    /// ```
    /// use intentkey::http::{Admission, Endpoint, Incoming, Options, Profile};
    /// use intentkey::{Keyring, Secret};
    ///
    /// let keyring = Keyring::new(vec![
    ///     ("a".into(), 0, Secret::new([1u8; 32])?),
    ///     ("b".into(), 1_000, Secret::new([2u8; 32])?),
    /// ])?.with_window(600)?;
    /// let endpoint = Endpoint::with_keyring(keyring, Options::new(Profile::Stripe));
    /// let request = Incoming {
    ///     tenant_id: "acct_1", method: "POST", route: "/v1/charges",
    ///     key_values: &["order-42"], content_type: Some("application/json"), body: b"{}",
    /// };
    /// let Admission::Guarded(before) = endpoint.admit(&request, 999)? else { unreachable!() };
    /// let Admission::Guarded(during) = endpoint.admit(&request, 1_000)? else { unreachable!() };
    /// let Admission::Guarded(after) = endpoint.admit(&request, 1_600)? else { unreachable!() };
    /// assert!(before.prior.is_none());
    /// assert_eq!(during.prior.as_ref().unwrap().key, before.key);
    /// assert_ne!(during.key, before.key);
    /// assert!(after.prior.is_none() && after.key == during.key);
    /// # Ok::<(), intentkey::Error>(())
    /// ```
    pub fn with_keyring(keyring: Keyring, options: Options) -> Self {
        Endpoint {
            keyring,
            options: std::sync::Arc::new(options),
            policies: Vec::new(),
        }
    }

    /// The same endpoint (options and route policies) keyed by `keyring`:
    /// how a server adds a secret ahead of its activation, or drops the
    /// previous one once the window is over.
    pub fn rekeyed(mut self, keyring: Keyring) -> Self {
        self.keyring = keyring;
        self
    }

    /// The keyring.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// The same endpoint with a policy for one action, `"METHOD route"`
    /// (`"POST /orders"`): its ignored fields leave that route's
    /// fingerprints. A later policy for the same action replaces it.
    ///
    /// # Errors
    /// `invalid-action-type` (field `policies`) when the action is not a
    /// method, one space and a route.
    pub fn with_policy(mut self, action: &str, policy: Policy) -> Result<Self> {
        let action = normalize_action(action).ok_or_else(|| {
            Error::field(
                ErrorCode::InvalidActionType,
                "policies",
                format!(
                    "a route policy is keyed by `METHOD route` (for example `POST /orders`); `{}` is not",
                    crate::error::clip(action)
                ),
            )
        })?;
        self.policies.retain(|(a, _)| *a != action);
        self.policies.push((action, policy));
        Ok(self)
    }

    /// The same endpoint with retries that find their key in flight waiting
    /// up to `max_ms` milliseconds for the first attempt's answer
    /// ([`Options::wait_max_ms`]; 0: no wait).
    ///
    /// # Errors
    /// `invalid-argument` (field `wait-max-ms`) past
    /// [`crate::claim::WAIT_MAX_MS_LIMIT`].
    pub fn with_wait(mut self, max_ms: u32) -> Result<Self> {
        std::sync::Arc::make_mut(&mut self.options).wait_max_ms =
            crate::claim::check_wait_max_ms("wait-max-ms", max_ms)?;
        Ok(self)
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The options, shared (what a serve flow holds).
    pub(crate) fn shared_options(&self) -> std::sync::Arc<Options> {
        std::sync::Arc::clone(&self.options)
    }

    /// The profile's key header name, as the profile spells it.
    pub fn header_name(&self) -> &'static str {
        self.options.profile.header_name()
    }

    /// Applies the rules to a request: parse the key, check the body size,
    /// derive the tenant-scoped storage key and the request fingerprint.
    ///
    /// # Errors
    /// Only for what the server, not the client, got wrong: an empty tenant
    /// (`invalid-tenant-id`), an empty method or route
    /// (`invalid-action-type`), a keyring with no secret active at `now`
    /// (`secret-retired`). Everything the client sent wrong is an
    /// [`Admission::Refused`] answer.
    pub fn admit(&self, request: &Incoming<'_>, now: i64) -> Result<Admission> {
        let key = match self.options.client_key_from_values(request.key_values) {
            Ok(key) => key,
            Err(e) if e.reason() == KeyErrorReason::Missing && !self.options.key_required => {
                return Ok(Admission::Unguarded)
            }
            Err(e) => return Ok(Admission::Refused(self.options.key_error_reply(&e, now))),
        };
        if request.body.len() as u64 > self.options.max_body_bytes {
            return Ok(Admission::Refused(self.too_large(now)));
        }
        let method = request.method.to_ascii_uppercase();
        let action_type = format!("{method} {}", request.route);
        let policy = self
            .policies
            .iter()
            .find(|(a, _)| *a == action_type)
            .map(|(_, p)| p);
        let request_facts = Request {
            tenant_id: request.tenant_id,
            method: &method,
            route: request.route,
            content_type: request.content_type,
            body: request.body,
        };
        let secret = self
            .keyring
            .at(now)
            .map_err(|_| {
                let first = &self.keyring.entries()[0];
                Error::field(
                    ErrorCode::SecretRetired,
                    "keyring",
                    format!(
                        "no secret of the keyring is active now ({now}): the earliest, `{}`, is active from {}. Keep a secret active now in the keyring",
                        first.id(),
                        first.active_from()
                    ),
                )
            })?
            .secret();
        let material = match request_fingerprint_material(&request_facts, policy) {
            Ok(material) => material,
            Err(e) if e.code() == ErrorCode::InvalidJson => {
                return Ok(Admission::Refused(
                    self.options.refuse(Refusal::Body(&e), now),
                ))
            }
            Err(e) => return Err(e),
        };
        let fingerprint = fingerprint_of(secret, &material);
        let prior = match self.keyring.prior_at(now) {
            None => None,
            Some(entry) => Some(PriorKey {
                key: storage_key(entry.secret(), request.tenant_id, &key)?.into_string(),
                fingerprint: fingerprint_of(entry.secret(), &material).into_string(),
            }),
        };
        Ok(Admission::Guarded(Attempt {
            key: storage_key(secret, request.tenant_id, &key)?.into_string(),
            fingerprint: fingerprint.into_string(),
            tenant_id: request.tenant_id.to_owned(),
            action_type,
            prior,
        }))
    }

    /// The answer to a claim outcome ([`Options::reply`]); `None` when the
    /// attempt owns the effect.
    pub fn answer(&self, outcome: &ClaimOutcome, now: i64) -> Option<Reply> {
        self.options.reply(outcome, now)
    }

    /// 413: the body is larger than [`Options::max_body_bytes`]. Adapters
    /// that stream the body stop reading at the limit and answer this.
    pub fn too_large(&self, now: i64) -> Reply {
        self.options
            .refuse(Refusal::TooLarge(self.options.max_body_bytes), now)
    }

    /// 500: the handler failed (threw, timed out) and its outcome is
    /// unknown. The record stays in flight, so a retry gets 409 until
    /// recovery settles it; no stack trace or message of the error is sent.
    pub fn failed(&self, now: i64) -> Reply {
        self.options.refuse(Refusal::Failed, now)
    }

    /// 503 with `Retry-After`: the store could not be reached. Nothing was
    /// decided; the client retries with the same key.
    pub fn unavailable(&self, now: i64) -> Reply {
        self.options.refuse(Refusal::Unavailable, now)
    }
}

/// `"post  /orders"` → `"POST /orders"`; `None` unless a method and a route.
fn normalize_action(action: &str) -> Option<String> {
    let (method, route) = action.trim().split_once(' ')?;
    let route = route.trim_start();
    if method.is_empty() || route.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    Some(format!("{} {route}", method.to_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_normalized() {
        assert_eq!(
            normalize_action("post /orders").as_deref(),
            Some("POST /orders")
        );
        assert_eq!(
            normalize_action(" PUT   /a/:id ").as_deref(),
            Some("PUT /a/:id")
        );
        assert_eq!(normalize_action("/orders"), None);
        assert_eq!(normalize_action("POST"), None);
        assert_eq!(normalize_action("PO-ST /x"), None);
    }
}
