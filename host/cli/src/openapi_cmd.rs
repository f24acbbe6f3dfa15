//! `intentkey openapi`: the OpenAPI fragment of a server's idempotency
//! (key header, expiry policy, error shapes), from the core's answers.

use clap::{Args, ValueEnum};
use intentkey::claim::DEFAULT_TTL_SECONDS;
use intentkey::http::{Options, Profile, DEFAULT_MAX_BODY_BYTES};
use serde_json::Value;

use crate::CliError;

/// The profile, as a command-line value.
#[derive(Clone, Copy, ValueEnum)]
pub enum ProfileArg {
    /// `Idempotency-Key` (IETF draft), problem+json answers.
    Ietf,
    /// Stripe's convention.
    Stripe,
    /// Open Finance Brasil.
    Ofb,
}

/// `intentkey openapi` options: the server's own settings.
#[derive(Args)]
pub struct OpenapiArgs {
    /// The idempotency convention.
    #[arg(long, value_enum, default_value = "ietf")]
    profile: ProfileArg,
    /// Seconds a completed request is replayed (the record's TTL).
    #[arg(long, default_value_t = DEFAULT_TTL_SECONDS)]
    ttl: i64,
    /// `ietf`: accept only quoted keys (RFC 8941 sf-strings), not bare ones.
    #[arg(long)]
    strict_key_syntax: bool,
    /// Requests without a key run unguarded instead of getting 400.
    #[arg(long)]
    optional_key: bool,
    /// The largest body read, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: u64,
    /// One more stored header a replay restores (repeatable).
    #[arg(long = "replay-header")]
    replay_headers: Vec<String>,
}

pub fn openapi_cmd(a: &OpenapiArgs) -> Result<Value, CliError> {
    let mut options = Options::new(match a.profile {
        ProfileArg::Ietf => Profile::Ietf,
        ProfileArg::Stripe => Profile::Stripe,
        ProfileArg::Ofb => Profile::Ofb,
    });
    options.strict_key_syntax = a.strict_key_syntax;
    options.key_required = !a.optional_key;
    options.max_body_bytes = a.max_body_bytes;
    options
        .replay_headers
        .extend(a.replay_headers.iter().cloned());
    if a.ttl <= 0 {
        return Err(CliError::new(
            intentkey::ErrorCode::InvalidArgument,
            format!("--ttl must be a positive number of seconds, not {}", a.ttl),
        ));
    }
    Ok(options.openapi(a.ttl))
}
