//! The `http` export: one endpoint resource over the core's HTTP rules.

use crate::bindings::exports::intentkey::core::http::{self as wit, GuestEndpoint};
use crate::bindings::intentkey::core::secrets;
use crate::bindings::intentkey::core::types as t;
use crate::convert::{attempt_out, class_out, outcome_in, response_out, wit_error};
use crate::Component;
use intentkey::http as core;
use intentkey::{Policy, Secret};

/// One server's HTTP rules, held by the guest for the resource's life.
pub(crate) struct Endpoint(pub(crate) core::Endpoint);

fn profile_in(p: wit::Profile) -> core::Profile {
    match p {
        wit::Profile::Ietf => core::Profile::Ietf,
        wit::Profile::Stripe => core::Profile::Stripe,
        wit::Profile::Ofb => core::Profile::Ofb,
    }
}

fn profile_out(p: core::Profile) -> wit::Profile {
    match p {
        core::Profile::Ietf => wit::Profile::Ietf,
        core::Profile::Stripe => wit::Profile::Stripe,
        core::Profile::Ofb => wit::Profile::Ofb,
    }
}

fn options_in(o: wit::Options) -> core::Options {
    core::Options {
        profile: profile_in(o.profile),
        strict_key_syntax: o.strict_key_syntax,
        retry_after_seconds: o.retry_after_seconds,
        replay_headers: o.replay_headers,
        key_required: o.key_required,
        max_body_bytes: o.max_body_bytes,
        max_stored_bytes: o.max_stored_bytes,
    }
}

pub(crate) fn reply_out(r: core::Reply) -> wit::Reply {
    wit::Reply {
        status: r.status,
        headers: r.headers,
        body: r.body,
    }
}

/// The key header's values of a WIT request, borrowed.
pub(crate) fn key_values(request: &wit::Request) -> Vec<&str> {
    request.key_values.iter().map(String::as_str).collect()
}

/// A WIT request as the core reads it.
pub(crate) fn incoming<'a>(
    request: &'a wit::Request,
    key_values: &'a [&'a str],
) -> core::Incoming<'a> {
    core::Incoming {
        tenant_id: &request.tenant_id,
        method: &request.method,
        route: &request.route,
        key_values,
        content_type: request.content_type.as_deref(),
        body: &request.body,
    }
}

impl wit::Guest for Component {
    type Endpoint = Endpoint;

    fn default_options(profile: wit::Profile) -> wit::Options {
        let o = core::Options::new(profile_in(profile));
        wit::Options {
            profile: profile_out(o.profile),
            strict_key_syntax: o.strict_key_syntax,
            retry_after_seconds: o.retry_after_seconds,
            replay_headers: o.replay_headers,
            key_required: o.key_required,
            max_body_bytes: o.max_body_bytes,
            max_stored_bytes: o.max_stored_bytes,
        }
    }

    fn classify_error_status(status: u16) -> t::OutcomeClass {
        class_out(core::classify_error_status(status))
    }

    fn default_methods() -> Vec<String> {
        core::DEFAULT_METHODS
            .iter()
            .map(|m| (*m).to_owned())
            .collect()
    }
}

/// What a WIT handler did, as the core's serve flow takes it.
pub(crate) fn handled_in(h: wit::Handled) -> core::Handled {
    match h {
        wit::Handled::Answered(reply) => core::Handled::Answered {
            status: reply.status,
            headers: reply.headers,
            body: reply.body,
        },
        wit::Handled::Raised(status) => core::Handled::Raised(status),
        wit::Handled::Failed => core::Handled::Failed,
    }
}

fn path_out(p: core::ServePath) -> wit::ServePath {
    match p {
        core::ServePath::Refused => wit::ServePath::Refused,
        core::ServePath::Unguarded => wit::ServePath::Unguarded,
        core::ServePath::Replay => wit::ServePath::Replay,
        core::ServePath::InFlight => wit::ServePath::InFlight,
        core::ServePath::PayloadConflict => wit::ServePath::PayloadConflict,
        core::ServePath::Unavailable => wit::ServePath::Unavailable,
        core::ServePath::Handler => wit::ServePath::Handler,
        core::ServePath::Released => wit::ServePath::Released,
        core::ServePath::Failed => wit::ServePath::Failed,
    }
}

/// A store failure as the WIT reports it.
pub(crate) fn failure_out(f: intentkey::claim::StoreFailure) -> t::StoreError {
    if f.unavailable {
        t::StoreError::Unavailable(f.message)
    } else {
        t::StoreError::Failed(f.message)
    }
}

/// A WIT store error as the core's store failure.
pub(crate) fn failure_in(e: t::StoreError) -> intentkey::claim::StoreFailure {
    match e {
        t::StoreError::Unavailable(message) => intentkey::claim::StoreFailure {
            unavailable: true,
            message,
        },
        t::StoreError::Failed(message) => intentkey::claim::StoreFailure {
            unavailable: false,
            message,
        },
    }
}

/// How a request ended, for the WIT.
pub(crate) fn served_out(s: core::Served) -> wit::Served {
    wit::Served {
        path: path_out(s.path),
        reply: s.reply.map(reply_out),
        finished: s.finished.map(crate::convert::finished_out),
        finish_retries: s.finish_retries,
        claim_failure: s.claim_failure.map(failure_out),
        finish_failures: s.finish_failures.into_iter().map(failure_out).collect(),
    }
}

fn with_policies(
    mut endpoint: core::Endpoint,
    policies: Vec<(String, String)>,
) -> Result<core::Endpoint, t::Error> {
    for (action, json) in policies {
        let policy = Policy::from_json(&json).map_err(wit_error)?;
        endpoint = endpoint.with_policy(&action, policy).map_err(wit_error)?;
    }
    Ok(endpoint)
}

impl GuestEndpoint for Endpoint {
    fn create(
        secret_id: String,
        options: wit::Options,
        policies: Vec<(String, String)>,
    ) -> Result<wit::Endpoint, t::Error> {
        let secret = Secret::new(secrets::get_secret(&secret_id)?).map_err(wit_error)?;
        let endpoint = core::Endpoint::new(secret, options_in(options));
        Ok(wit::Endpoint::new(Endpoint(with_policies(
            endpoint, policies,
        )?)))
    }

    fn create_keyring(
        keyring: Vec<t::KeyringEntry>,
        window_seconds: Option<i64>,
        options: wit::Options,
        policies: Vec<(String, String)>,
    ) -> Result<wit::Endpoint, t::Error> {
        let mut keyring = crate::keys::keyring_from(keyring)?;
        if let Some(seconds) = window_seconds {
            keyring = keyring.with_window(seconds).map_err(wit_error)?;
        }
        let endpoint = core::Endpoint::with_keyring(keyring, options_in(options));
        Ok(wit::Endpoint::new(Endpoint(with_policies(
            endpoint, policies,
        )?)))
    }

    fn header_name(&self) -> String {
        self.0.header_name().to_owned()
    }

    fn admit(&self, request: wit::Request, now: i64) -> Result<wit::Admission, t::Error> {
        let key_values = key_values(&request);
        let admission = self
            .0
            .admit(&incoming(&request, &key_values), now)
            .map_err(wit_error)?;
        Ok(match admission {
            core::Admission::Guarded(attempt) => wit::Admission::Guarded(attempt_out(attempt)),
            core::Admission::Unguarded => wit::Admission::Unguarded,
            core::Admission::Refused(reply) => wit::Admission::Refused(reply_out(reply)),
        })
    }

    fn answer(&self, outcome: t::ClaimOutcome, now: i64) -> Option<wit::Reply> {
        self.0.answer(&outcome_in(outcome), now).map(reply_out)
    }

    fn capture(&self, status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> t::Response {
        response_out(self.0.options().capture(status, &headers, &body))
    }

    fn too_large(&self, now: i64) -> wit::Reply {
        reply_out(self.0.too_large(now))
    }

    fn unavailable(&self, now: i64) -> wit::Reply {
        reply_out(self.0.unavailable(now))
    }

    fn failed(&self, now: i64) -> wit::Reply {
        reply_out(self.0.failed(now))
    }
}
