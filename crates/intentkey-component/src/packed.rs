//! The packed calls of `memory-store` (`claim-intent-packed`,
//! `finish-packed`): the same claim and finish as the typed methods, with
//! every argument in one byte list and the answer in two. A host that pays
//! for each string it hands in (one `cabi_realloc` call each: Python through
//! ctypes) makes one call where the typed method takes six. Nothing here
//! decides: the request is taken apart into the typed values, and the typed
//! methods' answers are put together again.

use serde_json::json;

use crate::bindings::exports::intentkey::core::memory::Packed;
use crate::bindings::intentkey::core::types as t;
use intentkey::claim::OWNER_TOKEN_BYTES;
use intentkey::{Error, ErrorCode};

/// A packed claim, taken apart.
pub(crate) struct ClaimRequest {
    pub(crate) seed: Vec<u8>,
    pub(crate) intent: t::Intent,
    pub(crate) intent_id: Option<String>,
    pub(crate) key_hex_length: Option<u32>,
    pub(crate) now: i64,
}

/// A packed finish, taken apart.
pub(crate) struct FinishRequest {
    pub(crate) key: String,
    pub(crate) owner_token: String,
    pub(crate) effect: t::EffectResult,
    pub(crate) now: i64,
    pub(crate) rules: t::Rules,
}

fn bad(message: impl Into<String>) -> t::Error {
    t::Error::from(Error::field(ErrorCode::InvalidArgument, "request", message))
}

/// `request` split at `header_len` (after `skip` leading bytes): the JSON
/// header and what follows it.
fn split(request: &[u8], skip: usize, header_len: u32) -> Result<(&[u8], &[u8]), t::Error> {
    let rest = request
        .get(skip..)
        .ok_or_else(|| bad(format!("a packed request starts with {skip} bytes")))?;
    let at = usize::try_from(header_len).map_err(|_| bad("header-len does not fit"))?;
    if at > rest.len() {
        return Err(bad(format!(
            "header-len {at} is past the request's {} bytes",
            rest.len()
        )));
    }
    Ok(rest.split_at(at))
}

fn header<T: serde::de::DeserializeOwned>(bytes: &[u8], shape: &str) -> Result<T, t::Error> {
    serde_json::from_slice(bytes)
        .map_err(|e| bad(format!("the header is not the JSON array {shape}: {e}")))
}

fn text(bytes: &[u8], what: &str) -> Result<String, t::Error> {
    String::from_utf8(bytes.to_vec()).map_err(|_| bad(format!("{what} is not UTF-8")))
}

type ClaimHeader = (String, String, i64, Option<String>, Option<u32>, i64);

/// `seed ‖ [tenant-id, action-type, intent-epoch, intent-id, key-hex-length, now] ‖ payload`.
pub(crate) fn claim_request(request: &[u8], header_len: u32) -> Result<ClaimRequest, t::Error> {
    let seed = request
        .get(..OWNER_TOKEN_BYTES)
        .ok_or_else(|| {
            bad(format!(
                "a packed claim starts with {OWNER_TOKEN_BYTES} random bytes"
            ))
        })?
        .to_vec();
    let (head, payload) = split(request, OWNER_TOKEN_BYTES, header_len)?;
    let (tenant_id, action_type, intent_epoch, intent_id, key_hex_length, now): ClaimHeader =
        header(
            head,
            "[tenant-id, action-type, intent-epoch, intent-id, key-hex-length, now]",
        )?;
    Ok(ClaimRequest {
        seed,
        intent: t::Intent {
            tenant_id,
            action_type,
            payload_json: text(payload, "the payload")?,
            intent_epoch,
        },
        intent_id,
        key_hex_length,
        now,
    })
}

type FinishHeader = (
    String,
    String,
    String,
    u16,
    String,
    Vec<(String, String)>,
    i64,
    i64,
    Vec<u16>,
    bool,
);

/// `[key, owner-token, effect, status, content-type, headers, now,
/// ttl-seconds, release-statuses, fast-completion] ‖ body`.
pub(crate) fn finish_request(request: &[u8], header_len: u32) -> Result<FinishRequest, t::Error> {
    let (head, body) = split(request, 0, header_len)?;
    let (key, owner_token, effect, status, content_type, headers, now, ttl, release, fast): FinishHeader =
        header(
            head,
            "[key, owner-token, effect, status, content-type, headers, now, ttl-seconds, release-statuses, fast-completion]",
        )?;
    let response = || t::Response {
        status,
        content_type: content_type.clone(),
        headers: headers.clone(),
        body: body.to_vec(),
    };
    let effect = match effect.as_str() {
        "answered" => t::EffectResult::Answered(response()),
        "refused" => t::EffectResult::Refused(Some(response())),
        "refused-empty" => t::EffectResult::Refused(None),
        "failed" => t::EffectResult::Failed,
        other => {
            return Err(bad(format!(
                "effect is answered, refused, refused-empty or failed, not {other:?}"
            )))
        }
    };
    Ok(FinishRequest {
        key,
        owner_token,
        effect,
        now,
        rules: t::Rules {
            ttl_seconds: ttl,
            release_statuses: release,
            fast_completion: fast,
        },
    })
}

/// A claim's answer packed: `[key, outcome, owner-token]`, and for a stored
/// answer its status, content type and headers, with the body beside;
/// `tag`, when given, goes first.
pub(crate) fn claimed(
    tag: Option<&str>,
    key: &str,
    outcome: t::ClaimOutcome,
    owner_token: &str,
) -> Packed {
    let (header, body) = claimed_parts(tag, key, outcome, owner_token);
    packed(header, body)
}

/// The header and the body of [`claimed`].
pub(crate) fn claimed_parts(
    tag: Option<&str>,
    key: &str,
    outcome: t::ClaimOutcome,
    owner_token: &str,
) -> (serde_json::Value, Vec<u8>) {
    let (name, stored) = match outcome {
        t::ClaimOutcome::Owned => ("owned", None),
        t::ClaimOutcome::InFlight => ("in-flight", None),
        t::ClaimOutcome::PayloadConflict => ("payload-conflict", None),
        t::ClaimOutcome::Done(r) => ("done", Some(r)),
    };
    let mut header: Vec<serde_json::Value> = tag.map(|tag| json!(tag)).into_iter().collect();
    header.extend([json!(key), json!(name), json!(owner_token)]);
    let body = match stored {
        Some(r) => {
            header.extend([json!(r.status), json!(r.content_type), json!(r.headers)]);
            r.body
        }
        None => Vec::new(),
    };
    (serde_json::Value::Array(header), body)
}

/// A JSON header and a body, as the packed calls answer.
pub(crate) fn packed(header: serde_json::Value, body: Vec<u8>) -> Packed {
    Packed {
        header: header.to_string().into_bytes(),
        body,
    }
}
