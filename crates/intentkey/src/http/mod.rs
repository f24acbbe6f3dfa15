//! The HTTP rules for keys that clients send: pure, written once, used by
//! every adapter.
//!
//! A request with a client-sent key goes through four rules, each in its
//! own module:
//!
//! 1. [`header`]: find the profile's key header and parse it
//!    ([`Options::client_key`]); a missing or bad key is a [`KeyError`],
//!    answered with 400 ([`Options::key_error_reply`]) and never stored.
//! 2. [`storage_key`](mod@storage_key): the store's primary key is
//!    `HMAC(secret, ["intentkey/client-key/v1", tenant, client key])`, never
//!    the raw client key, so tenants never collide.
//! 3. [`fingerprint`]: the request fingerprint over tenant, method, route
//!    and the body in the canonical form of its media type ([`body`]: JSON
//!    by RFC 8785, forms as sorted pairs, anything else as bytes). It needs
//!    no policy; a route's [`Policy`](crate::Policy) may drop its ignored
//!    fields.
//! 4. [`reply`]: what the profile answers when the handler does not run:
//!    the stored response replayed (with `Idempotent-Replayed: true`), 409
//!    with `Retry-After` while the first request runs, and the profile's
//!    status for a key reused with another payload.
//!
//! The claim itself (insert, read, decide, complete) is [`crate::claim`]'s
//! one flow, fed the storage key and the fingerprint.
//!
//! # Profiles
//!
//! | | `ietf` (default) | `stripe` | `ofb` (Open Finance Brasil) |
//! |---|---|---|---|
//! | header | `Idempotency-Key` | `Idempotency-Key` | `x-idempotency-key` |
//! | key | RFC 8941 sf-string (`"…"`, `\"` and `\\` escapes) or a bare token (visible ASCII, no `"` or `,`), 1–255 characters; the sf-string only with [`Options::strict_key_syntax`] | bare, 1–255 characters | bare, 1–40 characters |
//! | missing or bad key | 400 `application/problem+json` | 400 `invalid_request_error` | 400 `PARAMETRO_NAO_INFORMADO` / `PARAMETRO_INVALIDO` |
//! | same key, other payload | 422 problem | 400 `idempotency_error` | 422 `ERRO_IDEMPOTENCIA` |
//! | in flight | 409 problem, `Retry-After` | 409 `idempotency_error` (`code: idempotency_key_in_use`), `Retry-After` | 409 `ERRO_IDEMPOTENCIA`, `Retry-After` |
//! | replay | stored status, `Content-Type`, allow-listed headers, body, `Idempotent-Replayed: true` | same | same |
//!
//! Keys are printable ASCII (0x20–0x7E) in every profile, header names
//! match case-insensitively, leading and trailing spaces and tabs are not
//! part of a key, an empty header is a missing one, and a header sent more
//! than once is invalid. Error messages name the header and say what to
//! send; they never repeat the value sent.
//!
//! # Problem types (`ietf`)
//!
//! Every problem's `type` is [`PROBLEM_TYPE_BASE`]
//! (`https://intentkey.dev/problems/`) followed by a slug; the body is
//! `{"type","title","status","detail"}` in that order:
//!
//! | type | status | when |
//! |---|---|---|
//! | `https://intentkey.dev/problems/idempotency-key-missing` | 400 | the key header is absent or empty |
//! | `https://intentkey.dev/problems/idempotency-key-invalid` | 400 | sent twice, a control character or non-ASCII byte, a bare key with a space, `"` or `,` (or any bare key with `strict_key_syntax`) |
//! | `https://intentkey.dev/problems/idempotency-key-too-long` | 400 | longer than 255 characters |
//! | `https://intentkey.dev/problems/idempotency-key-reused` | 422 | the key was first used with another request |
//! | `https://intentkey.dev/problems/request-in-flight` | 409 | the first request with the key has not finished |
//! | `https://intentkey.dev/problems/request-body-invalid` | 400 | a JSON body that does not parse |
//! | `https://intentkey.dev/problems/request-too-large` | 413 | a body larger than [`Options::max_body_bytes`] |
//! | `https://intentkey.dev/problems/outcome-unknown` | 500 | the handler failed; the record stays in flight for recovery |
//! | `https://intentkey.dev/problems/store-unavailable` | 503 | the store could not be reached; nothing was done (`Retry-After`) |
//!
//! The `stripe` bodies are `{"error":{"type":…,"message":…}}` (Stripe's
//! `invalid_request_error` for a bad key, `idempotency_error` otherwise);
//! the `ofb` bodies are `{"errors":[{"code","title","detail"}],"meta":
//! {"requestDateTime"}}` in Portuguese, dated by the `now` the host passes.
//! No body carries a stack trace, a secret or the key sent.
//!
//! # Example
//!
//! ```
//! use intentkey::claim::{drive, Attempt, ClaimFlow, ClaimOutcome, EffectResult, FinishFlow, MemoryClaims, Response, Rules};
//! use intentkey::http::{request_fingerprint, storage_key, Options, Profile, Request};
//! use intentkey::Secret;
//!
//! let secret = Secret::new([42u8; 32])?;
//! let options = Options::new(Profile::Ietf);
//! let mut store = MemoryClaims::default();
//! let no_destination = &mut |_: &str| unreachable!();
//!
//! // One request, as an adapter sees it.
//! let headers = [("Content-Type", "application/json"), ("Idempotency-Key", r#""order-7f3a""#)];
//! let body = br#"{"sku":"A1","qty":2}"#;
//! let request = Request { tenant_id: "shop-1", method: "POST", route: "/orders", content_type: Some("application/json"), body };
//!
//! let client_key = options.client_key(headers).unwrap();
//! let attempt = Attempt {
//!     key: storage_key(&secret, "shop-1", &client_key)?.into_string(),
//!     fingerprint: request_fingerprint(&secret, &request, None)?.into_string(),
//!     tenant_id: "shop-1".into(),
//!     action_type: "POST /orders".into(),
//!     prior: None,
//! };
//!
//! // First time: owned, so the handler runs and its answer is stored.
//! assert_eq!(drive(ClaimFlow::new(&attempt, "owner-a", 100), &mut store, no_destination)?, ClaimOutcome::Owned);
//! let created = Response::json(201, r#"{"id":"ord_1"}"#).with_header("Location", "/orders/ord_1");
//! drive(FinishFlow::new(&attempt.key, "owner-a", EffectResult::Answered(created), 101, &Rules::default()), &mut store, no_destination)?;
//!
//! // The retry gets the stored answer, marked as a replay.
//! let outcome = drive(ClaimFlow::new(&attempt, "owner-b", 102), &mut store, no_destination)?;
//! let reply = options.reply(&outcome, 102).unwrap();
//! assert_eq!((reply.status, reply.header("location"), reply.is_replay()), (201, Some("/orders/ord_1"), true));
//! assert_eq!(reply.body, br#"{"id":"ord_1"}"#);
//!
//! // The same key with another body is refused.
//! let other = Request { body: br#"{"sku":"B2","qty":1}"#, ..request };
//! let reused = Attempt { fingerprint: request_fingerprint(&secret, &other, None)?.into_string(), ..attempt.clone() };
//! let outcome = drive(ClaimFlow::new(&reused, "owner-c", 103), &mut store, no_destination)?;
//! assert_eq!(options.reply(&outcome, 103).unwrap().status, 422);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod body;
pub mod endpoint;
pub mod fingerprint;
pub mod header;
mod jcs;
pub mod openapi;
pub mod profile;
pub mod reply;
pub mod serve;
pub mod storage_key;

pub use body::{canonical_body, canonical_json, BodyKind};
pub use endpoint::{Admission, Endpoint, Incoming};
pub use fingerprint::{
    request_fingerprint, request_fingerprint_material, Request, RequestFingerprint,
    REQUEST_FINGERPRINT_LABEL,
};
pub use header::{ClientKey, KeyError, KeyErrorReason};
pub use profile::{
    Options, Profile, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_STORED_BYTES, DEFAULT_REPLAY_HEADERS,
    DEFAULT_RETRY_AFTER_SECONDS,
};
pub use reply::{Reply, ANSWER_KEPT_HEADER, PROBLEM_TYPE_BASE, REPLAYED_HEADER};
pub use serve::{Handled, ServeFlow, ServePath, Served};
pub use storage_key::{storage_key, storage_key_material, CLIENT_KEY_LABEL};

use crate::claim::OutcomeClass;
use crate::error::{Error, ErrorCode, Result};
use crate::secret::Secret;

/// The methods an adapter guards by default: the non-idempotent ones the
/// Idempotency-Key draft names. Other methods pass through unguarded.
pub const DEFAULT_METHODS: [&str; 2] = ["POST", "PATCH"];

/// HMAC-SHA256 of `material` under `secret`.
fn hmac(secret: &Secret, material: &[u8]) -> [u8; 32] {
    secret.keyed().mac(material)
}

/// The tenant check of every key and fingerprint: non-empty.
fn check_tenant(tenant_id: &str) -> Result<()> {
    if tenant_id.is_empty() {
        return Err(Error::field(
            ErrorCode::InvalidTenantId,
            "tenant_id",
            "`tenant_id` is empty; every key belongs to a tenant",
        ));
    }
    Ok(())
}

/// How the claim of an owned request is settled when, instead of an answer,
/// its handler chain raises an error that carries an HTTP status (Node: the
/// error's `status` or `statusCode`, as body parsers, `http-errors`,
/// Fastify and Hono's `HTTPException` set it).
///
/// - **4xx** ([`OutcomeClass::Released`]): the request was refused as the
///   client's mistake, before anything happened. Body parsers (a body that
///   is valid JSON but not an object, a bad charset, a wrong media type) run
///   before the handler, and a handler that validates throws before its
///   effect. The record is deleted under the owner's token, the framework's
///   answer to the error (that status) goes to the client unstored, and a
///   retry with the same key runs the request again (a corrected body is
///   then accepted, the same bad one refused again), never 409.
/// - **anything else** ([`OutcomeClass::Ambiguous`]): a 5xx, or a status
///   that is not an error status, says nothing about what the handler did:
///   the record stays in flight and the client gets
///   [`Endpoint::failed`]'s 500, as for an error without a status.
///
/// An error is never [`OutcomeClass::Terminal`]: an answer to be stored and
/// replayed is one the handler sends, not one it throws. A handler that has
/// done its effect and must answer 4xx sends the answer.
///
/// ```
/// use intentkey::claim::OutcomeClass;
/// use intentkey::http::classify_error_status;
/// assert_eq!(classify_error_status(400), OutcomeClass::Released);
/// assert_eq!(classify_error_status(413), OutcomeClass::Released);
/// assert_eq!(classify_error_status(500), OutcomeClass::Ambiguous);
/// assert_eq!(classify_error_status(302), OutcomeClass::Ambiguous);
/// assert_eq!(classify_error_status(0), OutcomeClass::Ambiguous);
/// ```
pub fn classify_error_status(status: u16) -> OutcomeClass {
    if (400..=499).contains(&status) {
        OutcomeClass::Released
    } else {
        OutcomeClass::Ambiguous
    }
}
