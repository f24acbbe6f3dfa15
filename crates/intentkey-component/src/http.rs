//! The `http` export: one endpoint resource over the core's HTTP rules.

use crate::bindings::exports::intentkey::core::http::{self as wit, GuestEndpoint};
use crate::bindings::intentkey::core::secrets;
use crate::bindings::intentkey::core::types as t;
use crate::Component;
use intentkey::http as core;
use intentkey::{Policy, Secret};

/// One server's HTTP rules, held by the guest for the resource's life.
pub(crate) struct Endpoint(pub(crate) core::Endpoint);

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
        core::Options::new(profile.into()).into()
    }

    fn classify_error_status(status: u16) -> t::OutcomeClass {
        t::OutcomeClass::from(core::classify_error_status(status))
    }

    fn default_methods() -> Vec<String> {
        core::DEFAULT_METHODS
            .iter()
            .map(|m| (*m).to_owned())
            .collect()
    }
}

fn with_policies(
    mut endpoint: core::Endpoint,
    policies: Vec<(String, String)>,
) -> Result<core::Endpoint, t::Error> {
    for (action, json) in policies {
        let policy = Policy::from_json(&json).map_err(t::Error::from)?;
        endpoint = endpoint
            .with_policy(&action, policy)
            .map_err(t::Error::from)?;
    }
    Ok(endpoint)
}

impl GuestEndpoint for Endpoint {
    fn create(
        secret_id: String,
        options: wit::Options,
        policies: Vec<(String, String)>,
    ) -> Result<wit::Endpoint, t::Error> {
        let secret = Secret::new(secrets::get_secret(&secret_id)?).map_err(t::Error::from)?;
        let options = core::Options::from(options)
            .checked()
            .map_err(t::Error::from)?;
        let endpoint = core::Endpoint::new(secret, options);
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
            keyring = keyring.with_window(seconds).map_err(t::Error::from)?;
        }
        let options = core::Options::from(options)
            .checked()
            .map_err(t::Error::from)?;
        let endpoint = core::Endpoint::with_keyring(keyring, options);
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
            .map_err(t::Error::from)?;
        Ok(admission.into())
    }

    fn answer(&self, outcome: t::ClaimOutcome, now: i64) -> Option<wit::Reply> {
        self.0
            .answer(&intentkey::claim::ClaimOutcome::from(outcome), now)
            .map(wit::Reply::from)
    }

    fn capture(&self, status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> t::Response {
        t::Response::from(self.0.options().capture(status, &headers, &body))
    }

    fn too_large(&self, now: i64) -> wit::Reply {
        wit::Reply::from(self.0.too_large(now))
    }

    fn unavailable(&self, now: i64) -> wit::Reply {
        wit::Reply::from(self.0.unavailable(now))
    }

    fn failed(&self, now: i64) -> wit::Reply {
        wit::Reply::from(self.0.failed(now))
    }
}
