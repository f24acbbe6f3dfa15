//! The native core as an HTTP vector subject: `intentkey::http::Endpoint`,
//! and the claim flow over `MemoryClaims` through `drive`.

use intentkey::claim::{
    drive, owner_token, Attempt, ClaimFlow, ClaimOutcome, EffectResult, FinishFlow, Lookup,
    MemoryClaims, Response, Rules,
};
use intentkey::http::{Admission, Endpoint, Incoming, Options, Profile, Reply};
use intentkey::{Policy, Secret};
use intentkey_vectors::http as v;

/// One endpoint and one memory store per case; owner tokens from a counter.
#[derive(Default)]
pub struct Native {
    endpoint: Option<Endpoint>,
    store: MemoryClaims,
    tokens: u64,
}

pub fn options(config: &v::EndpointConfig) -> Result<Options, String> {
    Ok(Options {
        profile: Profile::parse(&config.profile)
            .ok_or_else(|| format!("unknown profile {}", config.profile))?,
        strict_key_syntax: config.strict_key_syntax,
        retry_after_seconds: config.retry_after_seconds,
        replay_headers: config.replay_headers.clone(),
        key_required: config.key_required,
        max_body_bytes: config.max_body_bytes,
        max_stored_bytes: intentkey::http::DEFAULT_MAX_STORED_BYTES,
    })
}

pub fn endpoint(secret: &[u8], config: &v::EndpointConfig) -> Result<Endpoint, String> {
    let secret = Secret::new(secret.to_vec()).map_err(|e| e.to_string())?;
    let mut endpoint = Endpoint::new(secret, options(config)?);
    for (action, json) in &config.policies {
        let policy = Policy::from_json(json).map_err(|e| e.to_string())?;
        endpoint = endpoint
            .with_policy(action, policy)
            .map_err(|e| e.to_string())?;
    }
    Ok(endpoint)
}

pub fn response_in(r: &v::Response) -> Response {
    Response {
        status: r.status,
        content_type: r.content_type.clone(),
        headers: r.headers.clone(),
        body: r.body.clone(),
    }
}

fn response_out(r: Response) -> v::Response {
    v::Response {
        status: r.status,
        content_type: r.content_type,
        headers: r.headers,
        body: r.body,
    }
}

fn reply_out(r: Reply) -> v::Reply {
    v::Reply {
        status: r.status,
        headers: r.headers,
        body: r.body,
    }
}

fn attempt_out(a: Attempt) -> v::Attempt {
    v::Attempt {
        key: a.key,
        fingerprint: a.fingerprint,
        tenant_id: a.tenant_id,
        action_type: a.action_type,
    }
}

fn attempt_in(a: &v::Attempt) -> Attempt {
    Attempt {
        key: a.key.clone(),
        fingerprint: a.fingerprint.clone(),
        tenant_id: a.tenant_id.clone(),
        action_type: a.action_type.clone(),
        prior: None,
    }
}

fn outcome_in(o: &v::Outcome) -> ClaimOutcome {
    match o {
        v::Outcome::Owned => ClaimOutcome::Owned,
        v::Outcome::InFlight => ClaimOutcome::InFlight,
        v::Outcome::Done(r) => ClaimOutcome::Done(response_in(r)),
        v::Outcome::PayloadConflict => ClaimOutcome::PayloadConflict,
    }
}

fn outcome_out(o: ClaimOutcome) -> v::Outcome {
    match o {
        ClaimOutcome::Owned => v::Outcome::Owned,
        ClaimOutcome::InFlight => v::Outcome::InFlight,
        ClaimOutcome::Done(r) => v::Outcome::Done(response_out(r)),
        ClaimOutcome::PayloadConflict => v::Outcome::PayloadConflict,
    }
}

fn no_destination(_: &str) -> Lookup {
    Lookup::Unknown
}

impl Native {
    fn endpoint(&self) -> Result<&Endpoint, String> {
        self.endpoint
            .as_ref()
            .ok_or_else(|| "no endpoint: start_case first".to_owned())
    }
}

impl v::HttpSubject for Native {
    fn start_case(&mut self, secret: &[u8], config: &v::EndpointConfig) -> Result<(), String> {
        self.endpoint = Some(endpoint(secret, config)?);
        self.store = MemoryClaims::default();
        Ok(())
    }

    fn header_name(&mut self) -> Result<String, String> {
        Ok(self.endpoint()?.header_name().to_owned())
    }

    fn admit(&mut self, request: &v::Incoming, now: i64) -> Result<v::Admission, String> {
        let key_values: Vec<&str> = request.key_values.iter().map(String::as_str).collect();
        let admission = self
            .endpoint()?
            .admit(
                &Incoming {
                    tenant_id: &request.tenant_id,
                    method: &request.method,
                    route: &request.route,
                    key_values: &key_values,
                    content_type: request.content_type.as_deref(),
                    body: &request.body,
                },
                now,
            )
            .map_err(|e| e.to_string())?;
        Ok(match admission {
            Admission::Guarded(a) => v::Admission::Guarded(attempt_out(a)),
            Admission::Unguarded => v::Admission::Unguarded,
            Admission::Refused(r) => v::Admission::Refused(reply_out(r)),
        })
    }

    fn answer(&mut self, outcome: &v::Outcome, now: i64) -> Result<Option<v::Reply>, String> {
        Ok(self
            .endpoint()?
            .answer(&outcome_in(outcome), now)
            .map(reply_out))
    }

    fn too_large(&mut self, now: i64) -> Result<v::Reply, String> {
        Ok(reply_out(self.endpoint()?.too_large(now)))
    }

    fn unavailable(&mut self, now: i64) -> Result<v::Reply, String> {
        Ok(reply_out(self.endpoint()?.unavailable(now)))
    }

    fn failed(&mut self, now: i64) -> Result<v::Reply, String> {
        Ok(reply_out(self.endpoint()?.failed(now)))
    }

    fn claim(&mut self, attempt: &v::Attempt, now: i64) -> Result<(v::Outcome, String), String> {
        self.tokens += 1;
        let mut random = [0u8; 16];
        random[8..].copy_from_slice(&self.tokens.to_be_bytes());
        let token = owner_token(random);
        let outcome = drive(
            ClaimFlow::new(&attempt_in(attempt), &token, now),
            &mut self.store,
            &mut no_destination,
        )
        .map_err(|e| e.to_string())?;
        Ok((outcome_out(outcome), token))
    }

    fn finish(
        &mut self,
        key: &str,
        owner_token: &str,
        effect: v::Effect,
        now: i64,
        release_statuses: &[u16],
    ) -> Result<String, String> {
        let effect = match effect {
            v::Effect::Answered(r) => EffectResult::Answered(response_in(&r)),
            v::Effect::Failed => EffectResult::Failed,
        };
        let rules = Rules {
            release_statuses: release_statuses.to_vec(),
            ..Rules::default()
        };
        let finished = drive(
            FinishFlow::new(key, owner_token, effect, now, &rules),
            &mut self.store,
            &mut no_destination,
        )
        .map_err(|e| e.to_string())?;
        Ok(finished.as_str().to_owned())
    }
}
