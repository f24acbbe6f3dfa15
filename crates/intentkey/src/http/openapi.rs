//! The OpenAPI fragment a server publishes: its key header, its expiry
//! policy and its error shapes, as the IETF draft asks servers to document.
//!
//! The fragment is built from the same code that makes the answers: every
//! example body is the reply the profile sends, so the document cannot
//! drift from the behaviour.

use serde_json::{json, Map, Value};

use super::header::KeyErrorReason;
use super::profile::{Options, Profile};
use super::reply::{Refusal, Reply, PROBLEM_TYPE_BASE, REPLAYED_HEADER};

impl Options {
    /// An OpenAPI 3.1 document (JSON) with no paths: `components` holds
    /// the key header parameter, the `Retry-After` and
    /// `Idempotent-Replayed` headers and one response per refusal, each with
    /// the profile's real body as its example; `x-idempotency` states the
    /// expiry policy (`ttl_seconds`: how long a completed request is
    /// replayed), the key syntax, what the fingerprint covers and which
    /// headers a replay restores. Reference the components from your paths.
    ///
    /// ```
    /// use intentkey::http::{Options, Profile};
    /// let doc = Options::new(Profile::Stripe).openapi(86_400);
    /// assert_eq!(doc["x-idempotency"]["expires-after-seconds"], 86_400);
    /// assert_eq!(doc["components"]["parameters"]["IdempotencyKey"]["name"], "Idempotency-Key");
    /// assert_eq!(doc["components"]["responses"]["IdempotencyKeyReused"]["x-status"], 400);
    /// ```
    pub fn openapi(&self, ttl_seconds: i64) -> Value {
        let profile = self.profile;
        let key_errors: Vec<(&str, Reply)> = KeyErrorReason::ALL
            .into_iter()
            .filter_map(|reason| {
                let error = self
                    .client_key_from_values(example_values(profile, reason))
                    .err()?;
                Some((reason.as_str(), self.key_error_reply(&error, 0)))
            })
            .collect();
        let mut responses = Map::new();
        let mut add = |name: &str, description: &str, examples: Vec<(&str, Reply)>| {
            let Some((_, first)) = examples.first() else {
                return;
            };
            let status = first.status;
            let content_type = first
                .content_type()
                .unwrap_or("application/json")
                .to_owned();
            let mut headers = Map::new();
            if first.header("Retry-After").is_some() {
                headers.insert(
                    "Retry-After".into(),
                    json!({"$ref": "#/components/headers/RetryAfter"}),
                );
            }
            let examples: Map<String, Value> = examples
                .into_iter()
                .map(|(slug, reply)| {
                    let value = serde_json::from_slice::<Value>(&reply.body).unwrap_or(Value::Null);
                    (slug.to_owned(), json!({ "value": value }))
                })
                .collect();
            let mut content = Map::new();
            content.insert(
                content_type,
                json!({
                    "schema": { "$ref": format!("#/components/schemas/{}", schema_name(profile)) },
                    "examples": examples,
                }),
            );
            responses.insert(
                name.into(),
                json!({
                    "description": description,
                    "x-status": status,
                    "headers": headers,
                    "content": content,
                }),
            );
        };
        add(
            "IdempotencyKeyInvalid",
            "The key header is missing, sent more than once, too long, or not printable ASCII. Nothing was done or stored.",
            key_errors,
        );
        add(
            "RequestInFlight",
            "The first request with this key has not finished. Retry after Retry-After with the same key and request.",
            vec![("request-in-flight", self.refuse(Refusal::InFlight, 0))],
        );
        add(
            "IdempotencyKeyReused",
            "The key was first used with a different request (tenant, method, route or body).",
            vec![(
                "idempotency-key-reused",
                self.refuse(Refusal::PayloadConflict, 0),
            )],
        );
        add(
            "RequestTooLarge",
            "The body is larger than the most this endpoint reads. Nothing was done.",
            vec![(
                "request-too-large",
                self.refuse(Refusal::TooLarge(self.max_body_bytes), 0),
            )],
        );
        add(
            "OutcomeUnknown",
            "The handler failed and its outcome is unknown. Retrying with the same key answers 409 until the server settles it; it never runs twice.",
            vec![("outcome-unknown", self.refuse(Refusal::Failed, 0))],
        );
        add(
            "StoreUnavailable",
            "The idempotency store could not be reached. Nothing was done; retry with the same key.",
            vec![("store-unavailable", self.refuse(Refusal::Unavailable, 0))],
        );
        let mut schemas = Map::new();
        schemas.insert(schema_name(profile).into(), error_schema(profile));
        json!({
            "openapi": "3.1.0",
            "info": {
                "title": format!("Idempotency ({} profile)", profile.as_str()),
                "version": "1",
                "description": "Generated by intentkey from the answers it sends. Reference these components from the paths that take an idempotency key.",
            },
            "paths": {},
            "components": {
                "parameters": { "IdempotencyKey": key_parameter(self) },
                "headers": {
                    "RetryAfter": {
                        "description": "Seconds to wait before retrying with the same key.",
                        "schema": { "type": "integer", "example": self.retry_after_seconds },
                    },
                    "IdempotentReplayed": {
                        "description": "`true` on a response replayed from the first request with this key.",
                        "schema": { "type": "string", "enum": ["true"] },
                    },
                },
                "responses": responses,
                "schemas": schemas,
            },
            "x-idempotency": {
                "profile": profile.as_str(),
                "header": profile.header_name(),
                "key-required": self.key_required,
                "key-max-length": profile.max_key_len(),
                "key-syntax": key_syntax(self),
                "expires-after-seconds": ttl_seconds,
                "fingerprint": "tenant, method, route and body: JSON by RFC 8785 (JCS), application/x-www-form-urlencoded as sorted pairs, any other media type as its bytes",
                "replayed-headers": self.replay_headers,
                "replayed-marker": REPLAYED_HEADER,
                "max-body-bytes": self.max_body_bytes,
            },
        })
    }
}

fn key_parameter(options: &Options) -> Value {
    let profile = options.profile;
    json!({
        "name": profile.header_name(),
        "in": "header",
        "required": options.key_required,
        "description": format!(
            "The request's idempotency key: the same on every retry of one request, a new one for a new request. {}. A completed request is replayed for the server's expires-after-seconds (x-idempotency).",
            key_syntax(options)
        ),
        "schema": { "type": "string", "minLength": 1, "maxLength": profile.max_key_len() + usize::from(profile == Profile::Ietf) * 2 },
    })
}

fn key_syntax(options: &Options) -> String {
    let max = options.profile.max_key_len();
    match options.profile {
        Profile::Ietf if !options.strict_key_syntax => format!(
            "A bare token (visible ASCII, no space, `\"` or `,`) or an RFC 8941 sf-string (\"…\"), 1 to {max} printable ASCII characters"
        ),
        Profile::Ietf => format!(
            "An RFC 8941 sf-string (\"…\", with \\\" and \\\\ escapes), 1 to {max} printable ASCII characters"
        ),
        Profile::Stripe | Profile::Ofb => {
            format!("1 to {max} printable ASCII characters, sent bare")
        }
    }
}

fn schema_name(profile: Profile) -> &'static str {
    match profile {
        Profile::Ietf => "Problem",
        Profile::Stripe => "StripeError",
        Profile::Ofb => "OfbError",
    }
}

fn error_schema(profile: Profile) -> Value {
    match profile {
        Profile::Ietf => json!({
            "type": "object",
            "description": format!("RFC 9457 problem details; `type` is {PROBLEM_TYPE_BASE} followed by a slug."),
            "required": ["type", "title", "status", "detail"],
            "properties": {
                "type": { "type": "string", "format": "uri" },
                "title": { "type": "string" },
                "status": { "type": "integer" },
                "detail": { "type": "string" },
            },
        }),
        Profile::Stripe => json!({
            "type": "object",
            "required": ["error"],
            "properties": { "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {
                    "type": { "type": "string", "enum": ["idempotency_error", "invalid_request_error", "api_error"] },
                    "code": { "type": "string" },
                    "message": { "type": "string" },
                },
            } },
        }),
        Profile::Ofb => json!({
            "type": "object",
            "required": ["errors", "meta"],
            "properties": {
                "errors": { "type": "array", "items": {
                    "type": "object",
                    "required": ["code", "title", "detail"],
                    "properties": {
                        "code": { "type": "string" },
                        "title": { "type": "string" },
                        "detail": { "type": "string" },
                    },
                } },
                "meta": { "type": "object", "properties": { "requestDateTime": { "type": "string", "format": "date-time" } } },
            },
        }),
    }
}

/// Header values that give each key error.
fn example_values(profile: Profile, reason: KeyErrorReason) -> Vec<String> {
    match reason {
        KeyErrorReason::Missing => Vec::new(),
        KeyErrorReason::Invalid => vec!["\"a\"".into(), "\"b\"".into()],
        KeyErrorReason::TooLong => {
            let long = "k".repeat(profile.max_key_len() + 1);
            vec![if profile == Profile::Ietf {
                format!("\"{long}\"")
            } else {
                long
            }]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_documents_every_answer_with_its_real_status() {
        for profile in Profile::ALL {
            let options = Options::new(profile);
            let doc = options.openapi(3_600);
            let responses = &doc["components"]["responses"];
            let want = [
                ("IdempotencyKeyInvalid", 400),
                ("RequestInFlight", 409),
                (
                    "IdempotencyKeyReused",
                    if profile == Profile::Stripe { 400 } else { 422 },
                ),
                ("RequestTooLarge", 413),
                ("OutcomeUnknown", 500),
                ("StoreUnavailable", 503),
            ];
            for (name, status) in want {
                assert_eq!(responses[name]["x-status"], status, "{profile} {name}");
                let content = responses[name]["content"].as_object().unwrap();
                let (_, media) = content.iter().next().unwrap();
                for (_, example) in media["examples"].as_object().unwrap() {
                    assert!(
                        example["value"].is_object(),
                        "{profile} {name}: a JSON body"
                    );
                }
            }
            assert_eq!(
                responses["IdempotencyKeyInvalid"]["content"]
                    .as_object()
                    .unwrap()
                    .values()
                    .next()
                    .unwrap()["examples"]
                    .as_object()
                    .unwrap()
                    .len(),
                3
            );
            assert!(responses["RequestInFlight"]["headers"]["Retry-After"].is_object());
            assert_eq!(doc["x-idempotency"]["expires-after-seconds"], 3_600);
            assert_eq!(doc["x-idempotency"]["header"], profile.header_name());
        }
    }
}
