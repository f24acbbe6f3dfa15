//! The native core as an HTTP vector subject: `intentkey::http::Endpoint`,
//! and its serve flow over `MemoryClaims`.

use intentkey::claim::{
    perform, Attempt, Flow, Lookup, MemoryClaims, Op, OpResult, Rules, Step, StoreFailure,
};
use intentkey::http::{Admission, Endpoint, Handled, Incoming, Options, Profile, Reply, ServeFlow};
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
        wait_max_ms: 0,
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

fn no_destination(_: &str) -> Lookup {
    Lookup::Unknown
}

impl Native {
    /// Drops every record of the case's store.
    pub fn forget(&mut self) {
        self.store = MemoryClaims::default();
    }

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

    fn too_large(&mut self, now: i64) -> Result<v::Reply, String> {
        Ok(reply_out(self.endpoint()?.too_large(now)))
    }

    fn unavailable(&mut self, now: i64) -> Result<v::Reply, String> {
        Ok(reply_out(self.endpoint()?.unavailable(now)))
    }

    fn failed(&mut self, now: i64) -> Result<v::Reply, String> {
        Ok(reply_out(self.endpoint()?.failed(now)))
    }

    fn serve(
        &mut self,
        request: &v::Incoming,
        now: i64,
        handler: &v::Handler,
        mut fails: v::StoreFails,
        release_statuses: &[u16],
    ) -> Result<v::Served, String> {
        self.tokens += 1;
        let mut seed = [0u8; 16];
        seed[8..].copy_from_slice(&self.tokens.to_be_bytes());
        let rules = Rules {
            release_statuses: release_statuses.to_vec(),
            ..Rules::default()
        };
        let key_values: Vec<&str> = request.key_values.iter().map(String::as_str).collect();
        let incoming = Incoming {
            tenant_id: &request.tenant_id,
            method: &request.method,
            route: &request.route,
            key_values: &key_values,
            content_type: request.content_type.as_deref(),
            body: &request.body,
        };
        let endpoint = self.endpoint.as_ref().ok_or("no case started")?;
        let mut flow =
            ServeFlow::new(endpoint, &incoming, rules, seed, now).map_err(|e| e.to_string())?;
        let mut ran = false;
        let mut step = flow.start();
        let served = loop {
            step = match step {
                Step::Done(served) => break served,
                Step::Io(Op::Effect(_)) => {
                    ran = true;
                    flow.handled(handled(handler), now)
                        .map_err(|e| e.to_string())?
                }
                Step::Io(Op::Wait(_)) => {
                    flow.resume(OpResult::Waited).map_err(|e| e.to_string())?
                }
                Step::Io(op) => {
                    let budget = match op {
                        Op::Insert(_) | Op::Get(_) => &mut fails.claim,
                        _ => &mut fails.finish,
                    };
                    let result = if *budget > 0 {
                        *budget -= 1;
                        OpResult::Failed(StoreFailure {
                            unavailable: fails.unavailable,
                            message: "injected by the vector".into(),
                        })
                    } else {
                        perform(&mut self.store, &op, &mut no_destination)
                            .map_err(|e| e.to_string())?
                    };
                    flow.resume(result).map_err(|e| e.to_string())?
                }
            };
        };
        Ok(v::Served {
            path: served.path.as_str().to_owned(),
            ran,
            reply: served.reply.map(reply_out),
            finished: served.finished.map(|f| f.as_str().to_owned()),
            finish_retries: served.finish_retries,
        })
    }
}

/// What a vector's handler does, as the serve flow takes it.
fn handled(handler: &v::Handler) -> Handled {
    match handler {
        v::Handler::Responds(r) => {
            let sent = r.as_is();
            Handled::Answered {
                status: sent.status,
                headers: sent.headers,
                body: sent.body,
            }
        }
        v::Handler::Raises(status) => Handled::Raised(*status),
        v::Handler::Throws => Handled::Failed,
    }
}
