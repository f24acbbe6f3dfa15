//! The request fingerprint: what a repeat with the same key is compared on.

use std::fmt;

use crate::canonical::write_str;
use crate::error::{Error, ErrorCode, Result};
use crate::key::digest_hex;
use crate::policy::Policy;
use crate::secret::Secret;

use super::body::canonical_body;
use super::{check_tenant, hmac};

/// Domain label of request-fingerprint material (distinct from
/// [`FINGERPRINT_LABEL`](crate::FINGERPRINT_LABEL), the intent fingerprint,
/// and from every key label).
pub const REQUEST_FINGERPRINT_LABEL: &str = "intentkey/request-fingerprint/v1";

/// The parts of an HTTP request that its fingerprint covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The tenant (non-empty).
    pub tenant_id: &'a str,
    /// The method; compared uppercased (`post` is `POST`).
    pub method: &'a str,
    /// The route, as the server names it: a template (`/orders/:id`) or the
    /// path, but the same on every attempt (non-empty).
    pub route: &'a str,
    /// The `Content-Type` header, if any: it picks the canonical form.
    pub content_type: Option<&'a str>,
    /// The body as received.
    pub body: &'a [u8],
}

/// A request fingerprint: 64 lowercase hex, stored beside the storage key
/// and compared (by the claim flow, in constant time) on every repeat.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestFingerprint(String);

impl RequestFingerprint {
    /// The fingerprint as 64 lowercase hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Takes the fingerprint's string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for RequestFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The request fingerprint: HMAC-SHA256 under `secret` over
/// [`request_fingerprint_material`]. It needs no policy: any JSON API works
/// as it is; a route's `policy`, if given, only drops its ignored fields.
///
/// ```
/// use intentkey::http::{request_fingerprint, Request};
/// use intentkey::{Policy, Secret};
///
/// let secret = Secret::new([7u8; 32])?;
/// let first = Request { tenant_id: "t1", method: "POST", route: "/orders", content_type: Some("application/json"), body: br#"{"sku":"A1","qty":2}"# };
/// let again = Request { method: "post", body: br#"{ "qty": 2.0, "sku": "A1" }"#, ..first };
/// assert_eq!(request_fingerprint(&secret, &first, None)?, request_fingerprint(&secret, &again, None)?);
///
/// let other = Request { body: br#"{"sku":"A1","qty":3}"#, ..first };
/// assert_ne!(request_fingerprint(&secret, &first, None)?, request_fingerprint(&secret, &other, None)?);
///
/// // A policy drops what changes per attempt.
/// let traced = Request { body: br#"{"sku":"A1","qty":2,"trace_id":"x-9"}"#, ..first };
/// let policy = Policy::default();
/// assert_eq!(request_fingerprint(&secret, &first, Some(&policy))?, request_fingerprint(&secret, &traced, Some(&policy))?);
/// # Ok::<(), intentkey::Error>(())
/// ```
///
/// # Errors
/// As [`request_fingerprint_material`].
pub fn request_fingerprint(
    secret: &Secret,
    request: &Request<'_>,
    policy: Option<&Policy>,
) -> Result<RequestFingerprint> {
    let material = request_fingerprint_material(request, policy)?;
    Ok(fingerprint_of(secret, &material))
}

/// The fingerprint of material already made by
/// [`request_fingerprint_material`] (so that two secrets, during a
/// rotation window, canonicalize the body once).
pub(crate) fn fingerprint_of(secret: &Secret, material: &[u8]) -> RequestFingerprint {
    RequestFingerprint(digest_hex(&hmac(secret, material), 64))
}

/// The bytes [`request_fingerprint`] hashes: the canonical JSON of
/// `["intentkey/request-fingerprint/v1", tenant_id, METHOD, route, kind]`
/// immediately followed by the body in the canonical form of its kind
/// ([`canonical_body`]). The head is self-delimiting, so the two parts
/// cannot be confused, and the body is never copied into hex.
///
/// ```
/// use intentkey::http::{request_fingerprint_material, Request};
/// let request = Request { tenant_id: "t1", method: "put", route: "/orders/:id", content_type: Some("application/json"), body: br#"{"b":1,"a":[1.50,"x"]}"# };
/// assert_eq!(
///     String::from_utf8(request_fingerprint_material(&request, None)?).unwrap(),
///     r#"["intentkey/request-fingerprint/v1","t1","PUT","/orders/:id","json"]{"a":[1.5,"x"],"b":1}"#
/// );
/// # Ok::<(), intentkey::Error>(())
/// ```
///
/// # Errors
/// `invalid-tenant-id` for an empty tenant; `invalid-action-type` (field
/// `method` or `route`) for an empty method or route, which together name
/// the action; `invalid-json` for a JSON body that does not parse.
pub fn request_fingerprint_material(
    request: &Request<'_>,
    policy: Option<&Policy>,
) -> Result<Vec<u8>> {
    check_tenant(request.tenant_id)?;
    for (field, value) in [("method", request.method), ("route", request.route)] {
        if value.is_empty() {
            return Err(Error::field(
                ErrorCode::InvalidActionType,
                field,
                format!(
                    "the request's `{field}` is empty; the method and the route name the action"
                ),
            ));
        }
    }
    let (kind, body) = canonical_body(request.content_type, request.body, policy)?;
    let method = request.method.to_ascii_uppercase();
    let mut out = Vec::with_capacity(
        REQUEST_FINGERPRINT_LABEL.len()
            + request.tenant_id.len()
            + method.len()
            + request.route.len()
            + body.len()
            + 24,
    );
    out.push(b'[');
    for part in [
        REQUEST_FINGERPRINT_LABEL,
        request.tenant_id,
        &method,
        request.route,
    ] {
        write_str(&mut out, part);
        out.push(b',');
    }
    write_str(&mut out, kind.as_str());
    out.push(b']');
    out.extend_from_slice(&body);
    Ok(out)
}
