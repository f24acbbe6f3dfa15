//! What each profile answers when the handler does not run: a replay, a
//! request still in flight, a key reused with another payload, a bad key.

use crate::canonical::write_str;
use crate::claim::{ClaimOutcome, EffectResult, Response, RunOutcome};
use crate::error::Error;

use super::header::{KeyError, KeyErrorReason};
use super::profile::{Options, Profile};

/// The base of this project's problem-type URIs (`ietf` profile): a
/// problem's `type` is this base followed by its slug.
pub const PROBLEM_TYPE_BASE: &str = "https://intentkey.dev/problems/";

/// The header a replay carries, with the value `true`.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";

/// The header of an answer that was too large to keep ([`Options::capture`]),
/// with the value `false`; always replayed.
pub const ANSWER_KEPT_HEADER: &str = "Idempotent-Answer-Kept";

/// Headers a replay never restores, whatever the allow-list says: they
/// describe one connection or one encoding of the body, not the response.
const NEVER_REPLAYED: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "idempotent-replayed",
];

/// An HTTP answer: status, headers (`Content-Type` among them) and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers, in order, as (name, value).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The first value of a header, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Content-Type` header, if any.
    pub fn content_type(&self) -> Option<&str> {
        self.header("Content-Type")
    }

    /// Whether this replays a stored response (it carries
    /// `Idempotent-Replayed: true`).
    pub fn is_replay(&self) -> bool {
        self.header(REPLAYED_HEADER) == Some("true")
    }

    fn json(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body,
        }
    }
}

/// Why the handler does not run.
#[derive(Clone, Copy)]
pub(crate) enum Refusal<'a> {
    Key(&'a KeyError),
    InFlight,
    PayloadConflict,
    /// The body does not parse as its media type says (400).
    Body(&'a Error),
    /// The body is larger than the limit, in bytes (413).
    TooLarge(u64),
    /// The store could not be reached (503, `Retry-After`).
    Unavailable,
    /// The handler failed (threw, crashed, timed out): its outcome is
    /// unknown and the record stays in flight for recovery (500).
    Failed,
}

impl Options {
    /// The answer to a claim outcome, or `None` when the attempt owns the
    /// effect and must run it.
    ///
    /// - `Done`: the stored response replayed ([`Options::replay`]).
    /// - `InFlight`: 409 with `Retry-After`.
    /// - `PayloadConflict`: 422 (`ietf`, `ofb`) or 400 (`stripe`).
    ///
    /// `now` (seconds since the Unix epoch, from the host) dates the `ofb`
    /// body's `meta.requestDateTime`; the other profiles ignore it.
    ///
    /// ```
    /// use intentkey::claim::{ClaimOutcome, Response};
    /// use intentkey::http::{Options, Profile};
    ///
    /// let ietf = Options::new(Profile::Ietf);
    /// let busy = ietf.reply(&ClaimOutcome::InFlight, 0).unwrap();
    /// assert_eq!((busy.status, busy.header("retry-after")), (409, Some("1")));
    /// assert_eq!(busy.content_type(), Some("application/problem+json"));
    ///
    /// let stripe = Options::new(Profile::Stripe);
    /// let reused = stripe.reply(&ClaimOutcome::PayloadConflict, 0).unwrap();
    /// assert_eq!(reused.status, 400);
    /// assert!(reused.body.starts_with(br#"{"error":{"type":"idempotency_error","#));
    ///
    /// let stored = Response::json(201, r#"{"id":"ord_1"}"#).with_header("Location", "/orders/ord_1").with_header("Set-Cookie", "s=1");
    /// let replay = stripe.reply(&ClaimOutcome::Done(stored), 0).unwrap();
    /// assert_eq!(replay.headers, [("Content-Type".into(), "application/json".into()), ("Location".into(), "/orders/ord_1".into()), ("Idempotent-Replayed".into(), "true".into())]);
    /// assert!(ietf.reply(&ClaimOutcome::Owned, 0).is_none());
    /// ```
    pub fn reply(&self, outcome: &ClaimOutcome, now: i64) -> Option<Reply> {
        match outcome {
            ClaimOutcome::Owned => None,
            ClaimOutcome::Done(response) => Some(self.replay(response)),
            ClaimOutcome::InFlight => Some(self.refuse(Refusal::InFlight, now)),
            ClaimOutcome::PayloadConflict => Some(self.refuse(Refusal::PayloadConflict, now)),
        }
    }

    /// What is stored of a handler's answer: its status, its `Content-Type`
    /// (the first one), the headers a replay restores
    /// ([`Options::replays_header`], in order) and its body bytes. Every
    /// host captures through this one rule.
    ///
    /// An answer whose body is larger than [`Options::max_stored_bytes`] is
    /// not kept: the stored response keeps the status and says so instead
    /// (`application/problem+json`, type `answer-not-kept`, header
    /// `Idempotent-Answer-Kept: false`), so a retry learns that the request
    /// ran and that its answer cannot be replayed; it is never run again.
    ///
    /// ```
    /// use intentkey::http::Options;
    ///
    /// let mut options = Options::default();
    /// let headers = [("Location".to_owned(), "/orders/1".to_owned()), ("Set-Cookie".to_owned(), "s=1".to_owned()), ("content-type".to_owned(), "application/json".to_owned())];
    /// let kept = options.capture(201, &headers, br#"{"id":1}"#);
    /// assert_eq!((kept.status, kept.content_type.as_str()), (201, "application/json"));
    /// assert_eq!(kept.headers, [("Location".to_owned(), "/orders/1".to_owned())]);
    ///
    /// options.max_stored_bytes = 4;
    /// let dropped = options.capture(201, &headers, br#"{"id":1}"#);
    /// assert_eq!(dropped.status, 201);
    /// assert_eq!(dropped.content_type, "application/problem+json");
    /// assert!(std::str::from_utf8(&dropped.body).unwrap().contains("answer-not-kept"));
    /// ```
    pub fn capture(&self, status: u16, headers: &[(String, String)], body: &[u8]) -> Response {
        let content_type = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("Content-Type"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        if body.len() as u64 > self.max_stored_bytes {
            return self.not_kept(status, body.len());
        }
        let kept = headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("Content-Type") && self.replays_header(n))
            .cloned()
            .collect();
        Response {
            status,
            content_type,
            headers: kept,
            body: body.to_vec(),
        }
    }

    fn not_kept(&self, status: u16, len: usize) -> Response {
        let mut body = Vec::with_capacity(320);
        body.extend_from_slice(b"{\"type\":");
        write_str(&mut body, &format!("{PROBLEM_TYPE_BASE}answer-not-kept"));
        body.extend_from_slice(b",\"title\":\"Answer not kept\",\"status\":");
        body.extend_from_slice(status.to_string().as_bytes());
        body.extend_from_slice(b",\"detail\":");
        write_str(
            &mut body,
            &format!(
                "the request with this key ran once; its answer ({len} bytes) was larger than the {} bytes kept for replays, so it cannot be replayed. It is not run again",
                self.max_stored_bytes
            ),
        );
        body.push(b'}');
        Response {
            status,
            content_type: "application/problem+json".to_owned(),
            headers: vec![(ANSWER_KEPT_HEADER.to_owned(), "false".to_owned())],
            body,
        }
    }

    /// The profile's answer to a run ([`crate::claim::RunFlow`]): the
    /// effect's own response when it ran and gave one (not a replay); 503
    /// with `Retry-After` when it refused without one (nothing happened:
    /// retry); 500 when its outcome is unknown (the record stays in flight);
    /// otherwise the answer to the claim outcome (a replay, 409, 422).
    ///
    /// ```
    /// use intentkey::claim::{EffectResult, Finished, Response, RunOutcome};
    /// use intentkey::http::Options;
    ///
    /// let options = Options::default();
    /// let ran = RunOutcome::Ran { finished: Finished::Stored, recovered: false };
    /// let paid = EffectResult::Answered(Response::json(201, "{}"));
    /// assert_eq!(options.run_reply(&ran, Some(&paid), 0).status, 201);
    /// let unknown = RunOutcome::Ran { finished: Finished::LeftInFlight, recovered: false };
    /// assert_eq!(options.run_reply(&unknown, Some(&EffectResult::Failed), 0).status, 500);
    /// let busy = options.run_reply(&RunOutcome::InFlight { recovery: None }, None, 0);
    /// assert_eq!((busy.status, busy.header("retry-after")), (409, Some("1")));
    /// ```
    pub fn run_reply(
        &self,
        outcome: &RunOutcome,
        effect: Option<&EffectResult>,
        now: i64,
    ) -> Reply {
        match (outcome.claim_outcome(), effect) {
            (Some(claimed), _) => self
                .reply(&claimed, now)
                .unwrap_or_else(|| self.refuse(Refusal::Failed, now)),
            (None, Some(EffectResult::Answered(r) | EffectResult::Refused(Some(r)))) => {
                let mut headers = Vec::with_capacity(r.headers.len() + 1);
                if !r.content_type.is_empty() {
                    headers.push(("Content-Type".to_owned(), r.content_type.clone()));
                }
                headers.extend(r.headers.iter().cloned());
                Reply {
                    status: r.status,
                    headers,
                    body: r.body.clone(),
                }
            }
            (None, Some(EffectResult::Refused(None))) => self.refuse(Refusal::Unavailable, now),
            (None, Some(EffectResult::Failed) | None) => self.refuse(Refusal::Failed, now),
        }
    }

    /// Whether a replay restores the stored header `name`: it is on
    /// [`Options::replay_headers`] (case-insensitively) and is not a header
    /// that is never replayed (hop-by-hop ones, `Idempotent-Replayed`).
    /// Hosts store only these headers of an answer (`Set-Cookie` never
    /// reaches the store unless the user adds it).
    ///
    /// ```
    /// use intentkey::http::{Options, Profile};
    /// let options = Options::new(Profile::Ietf);
    /// assert!(options.replays_header("location"));
    /// assert!(!options.replays_header("Set-Cookie"));
    /// ```
    pub fn replays_header(&self, name: &str) -> bool {
        (name.eq_ignore_ascii_case(ANSWER_KEPT_HEADER)
            || self
                .replay_headers
                .iter()
                .any(|h| h.eq_ignore_ascii_case(name)))
            && !NEVER_REPLAYED.iter().any(|h| h.eq_ignore_ascii_case(name))
    }

    /// A stored response replayed: its status, its body, its `Content-Type`
    /// and the stored headers named in [`Options::replay_headers`] (matched
    /// case-insensitively, in stored order), then `Idempotent-Replayed: true`.
    /// The same for every profile.
    pub fn replay(&self, response: &Response) -> Reply {
        let allowed = |name: &str| self.replays_header(name);
        let mut headers = Vec::with_capacity(response.headers.len() + 2);
        let mut content_type = false;
        if !response.content_type.is_empty() && allowed("Content-Type") {
            headers.push(("Content-Type".to_owned(), response.content_type.clone()));
            content_type = true;
        }
        for (name, value) in &response.headers {
            let is_content_type = name.eq_ignore_ascii_case("Content-Type");
            if allowed(name) && !(is_content_type && content_type) {
                headers.push((name.clone(), value.clone()));
                content_type |= is_content_type;
            }
        }
        headers.push((REPLAYED_HEADER.to_owned(), "true".to_owned()));
        Reply {
            status: response.status,
            headers,
            body: response.body.clone(),
        }
    }

    /// The 400 answer to a missing or bad key, in the profile's shape.
    /// Nothing is stored for such a request.
    ///
    /// ```
    /// use intentkey::http::{Options, Profile};
    /// let ofb = Options::new(Profile::Ofb);
    /// let error = ofb.client_key([("accept", "*/*")]).unwrap_err();
    /// let reply = ofb.key_error_reply(&error, 1_700_000_000);
    /// assert_eq!(reply.status, 400);
    /// assert_eq!(
    ///     String::from_utf8(reply.body).unwrap(),
    ///     r#"{"errors":[{"code":"PARAMETRO_NAO_INFORMADO","title":"Parâmetro não informado.","detail":"O cabeçalho x-idempotency-key é obrigatório: envie a chave de idempotência da requisição, a mesma em toda nova tentativa."}],"meta":{"requestDateTime":"2023-11-14T22:13:20Z"}}"#
    /// );
    /// ```
    pub fn key_error_reply(&self, error: &KeyError, now: i64) -> Reply {
        self.refuse(Refusal::Key(error), now)
    }

    pub(crate) fn refuse(&self, refusal: Refusal<'_>, now: i64) -> Reply {
        let mut reply = match self.profile {
            Profile::Ietf => ietf(refusal),
            Profile::Stripe => stripe(refusal),
            Profile::Ofb => ofb(refusal, now),
        };
        if matches!(refusal, Refusal::InFlight | Refusal::Unavailable) {
            reply
                .headers
                .push(("Retry-After".into(), self.retry_after_seconds.to_string()));
        }
        reply
    }
}

/// RFC 9457 problem details.
fn ietf(refusal: Refusal<'_>) -> Reply {
    let too_large = too_large_detail(refusal);
    let (status, slug, title, detail) = match refusal {
        Refusal::Key(error) => (
            400,
            error.code(),
            match error.reason() {
                KeyErrorReason::Missing => "Idempotency-Key is missing",
                KeyErrorReason::Invalid => "Idempotency-Key is invalid",
                KeyErrorReason::TooLong => "Idempotency-Key is too long",
            },
            error.message(),
        ),
        Refusal::InFlight => (
            409,
            "request-in-flight",
            "A request is outstanding for this Idempotency-Key",
            "The first request with this key has not finished. Retry after the Retry-After delay with the same key and the same request.",
        ),
        Refusal::PayloadConflict => (
            422,
            "idempotency-key-reused",
            "Idempotency-Key is already used",
            "This key was first used with a different request. Send that request again unchanged, or use a new key for a new request.",
        ),
        Refusal::Body(error) => (
            400,
            "request-body-invalid",
            "The request body is not valid",
            error.message(),
        ),
        Refusal::TooLarge(_) => (
            413,
            "request-too-large",
            "The request body is too large",
            &*too_large,
        ),
        Refusal::Unavailable => (
            503,
            "store-unavailable",
            "The idempotency store is unavailable",
            "Nothing was done. Retry after the Retry-After delay with the same key and the same request.",
        ),
        Refusal::Failed => (
            500,
            "outcome-unknown",
            "The request failed and its outcome is unknown",
            "The server could not tell whether the request took effect. Retrying with the same key answers 409 until the server has settled it; it will not run twice.",
        ),
    };
    let mut body = Vec::with_capacity(256);
    body.extend_from_slice(b"{\"type\":");
    write_str(&mut body, &format!("{PROBLEM_TYPE_BASE}{slug}"));
    body.extend_from_slice(b",\"title\":");
    write_str(&mut body, title);
    body.extend_from_slice(format!(",\"status\":{status},\"detail\":").as_bytes());
    write_str(&mut body, detail);
    body.push(b'}');
    Reply::json(status, "application/problem+json", body)
}

/// Stripe's error object.
fn stripe(refusal: Refusal<'_>) -> Reply {
    let too_large = too_large_detail(refusal);
    let (status, kind, code, message) = match refusal {
        Refusal::Key(error) => (400, "invalid_request_error", None, error.message()),
        Refusal::InFlight => (
            409,
            "idempotency_error",
            Some("idempotency_key_in_use"),
            "There is currently another in-progress request using this idempotency key. Retry after the Retry-After delay with the same key.",
        ),
        Refusal::PayloadConflict => (
            400,
            "idempotency_error",
            None,
            "Keys for idempotent requests can only be used with the same parameters they were first used with. Send the original request again, or use a new key for a different request.",
        ),
        Refusal::Body(error) => (400, "invalid_request_error", None, error.message()),
        Refusal::TooLarge(_) => (413, "invalid_request_error", None, &*too_large),
        Refusal::Unavailable => (
            503,
            "api_error",
            None,
            "The idempotency store is unavailable and nothing was done. Retry after the Retry-After delay with the same key.",
        ),
        Refusal::Failed => (
            500,
            "api_error",
            None,
            "The request failed and its outcome is unknown. Retrying with the same key will not run it twice.",
        ),
    };
    let mut body = Vec::with_capacity(256);
    body.extend_from_slice(b"{\"error\":{\"type\":");
    write_str(&mut body, kind);
    if let Some(code) = code {
        body.extend_from_slice(b",\"code\":");
        write_str(&mut body, code);
    }
    body.extend_from_slice(b",\"message\":");
    write_str(&mut body, message);
    body.extend_from_slice(b"}}");
    Reply::json(status, "application/json", body)
}

/// Open Finance Brasil's error body (`ResponseError`), in Portuguese.
fn ofb(refusal: Refusal<'_>, now: i64) -> Reply {
    let (status, code, title, detail) = match refusal {
        Refusal::Key(error) => match error.reason() {
            KeyErrorReason::Missing => (
                400,
                "PARAMETRO_NAO_INFORMADO",
                "Parâmetro não informado.",
                "O cabeçalho x-idempotency-key é obrigatório: envie a chave de idempotência da requisição, a mesma em toda nova tentativa.",
            ),
            KeyErrorReason::Invalid => (
                400,
                "PARAMETRO_INVALIDO",
                "Parâmetro inválido.",
                "O cabeçalho x-idempotency-key deve ser enviado uma única vez, com de 1 a 40 caracteres ASCII imprimíveis.",
            ),
            KeyErrorReason::TooLong => (
                400,
                "PARAMETRO_INVALIDO",
                "Parâmetro inválido.",
                "O cabeçalho x-idempotency-key tem mais de 40 caracteres: envie no máximo 40.",
            ),
        },
        Refusal::InFlight => (
            409,
            "ERRO_IDEMPOTENCIA",
            "Requisição em processamento.",
            "Uma requisição com esta chave de idempotência (x-idempotency-key) ainda está em processamento: tente novamente após o tempo indicado em Retry-After, com a mesma chave.",
        ),
        Refusal::PayloadConflict => (
            422,
            "ERRO_IDEMPOTENCIA",
            "Erro de idempotência.",
            "O conteúdo da requisição diverge do conteúdo associado a esta chave de idempotência (x-idempotency-key).",
        ),
        Refusal::Body(_) => (
            400,
            "PARAMETRO_INVALIDO",
            "Parâmetro inválido.",
            "O corpo da requisição não é válido para o seu Content-Type: envie um JSON válido.",
        ),
        Refusal::TooLarge(_) => (
            413,
            "TAMANHO_EXCEDIDO",
            "Requisição muito grande.",
            "O corpo da requisição excede o tamanho máximo aceito.",
        ),
        Refusal::Unavailable => (
            503,
            "SERVICO_INDISPONIVEL",
            "Serviço indisponível.",
            "Nada foi executado: tente novamente após o tempo indicado em Retry-After, com a mesma chave.",
        ),
        Refusal::Failed => (
            500,
            "ERRO_INTERNO",
            "Erro interno.",
            "Não foi possível saber se a requisição teve efeito. Uma nova tentativa com a mesma chave não a executará duas vezes.",
        ),
    };
    let mut body = Vec::with_capacity(384);
    body.extend_from_slice(b"{\"errors\":[{\"code\":");
    write_str(&mut body, code);
    body.extend_from_slice(b",\"title\":");
    write_str(&mut body, title);
    body.extend_from_slice(b",\"detail\":");
    write_str(&mut body, detail);
    body.extend_from_slice(b"}],\"meta\":{\"requestDateTime\":");
    write_str(&mut body, &rfc3339_utc(now));
    body.extend_from_slice(b"}}");
    Reply::json(status, "application/json", body)
}

/// The detail of a 413 (empty for other refusals).
fn too_large_detail(refusal: Refusal<'_>) -> String {
    match refusal {
        Refusal::TooLarge(limit) => format!(
            "The request body is larger than {limit} bytes, the most this endpoint reads. Nothing was done."
        ),
        _ => String::new(),
    }
}

/// `now` (seconds since the Unix epoch) as RFC 3339 UTC, `YYYY-MM-DDThh:mm:ssZ`,
/// clamped to the years 1970 to 9999.
fn rfc3339_utc(now: i64) -> String {
    const LAST: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    let now = now.clamp(0, LAST);
    let (days, secs) = (now.div_euclid(86_400), now.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3_600,
        secs % 3_600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_utc() {
        for (now, want) in [
            (0, "1970-01-01T00:00:00Z"),
            (-5, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (951_868_799, "2000-02-29T23:59:59Z"),
            (951_868_800, "2000-03-01T00:00:00Z"),
            (1_700_000_000, "2023-11-14T22:13:20Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"),
            (i64::MAX, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339_utc(now), want, "{now}");
        }
    }

    #[test]
    fn a_stored_content_type_header_is_not_doubled() {
        let mut stored = Response::json(200, "{}").with_header("content-type", "text/plain");
        let options = Options::default();
        let reply = options.replay(&stored);
        assert_eq!(
            reply
                .headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("content-type"))
                .count(),
            1
        );
        assert_eq!(reply.content_type(), Some("application/json"));
        stored.content_type.clear();
        assert_eq!(options.replay(&stored).content_type(), Some("text/plain"));
    }
}
