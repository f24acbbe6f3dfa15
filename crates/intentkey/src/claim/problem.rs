//! HTTP answers for claims that do not run the effect (RFC 9457 problems).

use super::decide::ClaimOutcome;

/// An HTTP answer for a claim that does not run the effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpAnswer {
    /// Status code.
    pub status: u16,
    /// Media type (`application/problem+json` for problems, RFC 9457).
    pub content_type: String,
    /// Replayed headers (empty for problems).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: String,
    /// Whether this is a replay of a stored response.
    pub replayed: bool,
}

fn problem(status: u16, kind: &str, title: &str, detail: &str) -> HttpAnswer {
    let mut body = serde_json::Map::new();
    body.insert(
        "type".into(),
        format!("urn:intentkey:problem:{kind}").into(),
    );
    body.insert("title".into(), title.into());
    body.insert("status".into(), status.into());
    body.insert("detail".into(), detail.into());
    HttpAnswer {
        status,
        content_type: "application/problem+json".into(),
        headers: Vec::new(),
        body: serde_json::Value::Object(body).to_string(),
        replayed: false,
    }
}

/// The HTTP answer for a claim outcome, or `None` when the attempt owns the
/// effect and must run it.
///
/// ```
/// use intentkey::claim::{http_answer, ClaimOutcome};
/// let answer = http_answer(&ClaimOutcome::InFlight).unwrap();
/// assert_eq!(answer.status, 409);
/// assert_eq!(answer.content_type, "application/problem+json");
/// assert!(http_answer(&ClaimOutcome::Owned).is_none());
/// ```
pub fn http_answer(outcome: &ClaimOutcome) -> Option<HttpAnswer> {
    match outcome {
        ClaimOutcome::Owned => None,
        ClaimOutcome::Done(response) => Some(HttpAnswer {
            status: response.status,
            content_type: response.content_type.clone(),
            headers: response.headers.clone(),
            body: response.body.clone(),
            replayed: true,
        }),
        ClaimOutcome::InFlight => Some(problem(
            409,
            "request-in-flight",
            "A request with this idempotency key is in progress",
            "The original request has not completed. Retry later with the same key; do not change it.",
        )),
        ClaimOutcome::PayloadConflict => Some(problem(
            422,
            "idempotency-key-reused",
            "This idempotency key was used with a different payload",
            "The key belongs to an earlier request whose payload differs. Send that payload again, or make a new intent with a new key.",
        )),
    }
}

/// The 400 answer when a required idempotency key is missing.
pub fn missing_key_answer(header: &str) -> HttpAnswer {
    problem(
        400,
        "idempotency-key-missing",
        "An idempotency key is required",
        &format!("Send the intent's key in the `{header}` header, the same on every retry."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::Response;

    #[test]
    fn replays_errors_and_headers_too() {
        let stored = Response::json(402, r#"{"error":"insufficient_funds"}"#)
            .with_header("Location", "/payments/1");
        let answer = http_answer(&ClaimOutcome::Done(stored)).unwrap();
        assert_eq!((answer.status, answer.replayed), (402, true));
        assert_eq!(answer.headers, [("Location".into(), "/payments/1".into())]);
    }
}
