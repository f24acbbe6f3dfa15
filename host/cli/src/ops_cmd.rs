//! Operations commands: claim, complete, inspect, recover, purge. Each prints
//! one JSON object on stdout; every decision and the order of store
//! operations are the core's flows (through `intentkey_store::guard::Guard`).

use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use intentkey::claim::{
    ClaimOutcome, EffectResult, Lookup, Record, Recovered, RecoveryAction, Response, Rules, Status,
    DEFAULT_STALE_AFTER_SECONDS, DEFAULT_TTL_SECONDS,
};
use intentkey_store::guard::{Attempt, Gateway, Guard};
use intentkey_store::{open, Store, StoreError};
use serde_json::{json, Value};

use crate::CliError;

/// Seconds since the Unix epoch: the host reads the clock, the core never does.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A response as JSON: the body as text when it is UTF-8, else as
/// `body_hex`.
pub fn response_json(r: &Response) -> Value {
    let mut value =
        json!({"status": r.status, "content_type": r.content_type, "headers": r.headers});
    match r.body_text() {
        Some(text) => value["body"] = text.into(),
        None => {
            value["body_hex"] = r
                .body
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                .into()
        }
    }
    value
}

/// A record as JSON. The owner token is shown: it is a fencing token, not a secret.
pub fn record_json(r: &Record) -> Value {
    json!({
        "key": r.key,
        "fingerprint": r.fingerprint,
        "tenant_id": r.tenant_id,
        "action_type": r.action_type,
        "status": r.status.as_str(),
        "owner_token": r.owner_token,
        "response": r.response.as_ref().map(response_json),
        "created_at": r.created_at,
        "expires_at": r.expires_at,
        "lookups": r.lookups,
        "next_lookup_at": r.next_lookup_at,
    })
}

fn store_err(e: StoreError) -> CliError {
    CliError::new(e.code(), e.to_string())
}

#[derive(Args)]
pub struct StoreArg {
    /// The store: sqlite:PATH, postgres://USER@HOST:PORT/DB, mysql://USER@HOST:PORT/DB, redis://HOST:PORT/DB[?prefix=P], redis+cluster://HOST:PORT[,HOST:PORT…][?prefix=P&wait=N] or dynamodb://HOST:PORT/TABLE (or memory: for a dry run).
    #[arg(long)]
    store: String,
}

impl StoreArg {
    fn open(&self) -> Result<Box<dyn Store>, CliError> {
        open(&self.store).map_err(store_err)
    }
}

#[derive(Args)]
pub struct ClaimArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Tenant id.
    #[arg(long)]
    tenant: String,
    /// Action type.
    #[arg(long)]
    action: String,
    /// The idempotency key.
    #[arg(long)]
    key: String,
    /// The payload fingerprint.
    #[arg(long)]
    fingerprint: String,
}

pub fn claim_cmd(a: &ClaimArgs) -> Result<Value, CliError> {
    let store = a.store.open()?;
    let attempt = Attempt {
        key: a.key.clone(),
        fingerprint: a.fingerprint.clone(),
        tenant_id: a.tenant.clone(),
        action_type: a.action.clone(),
        prior: None,
    };
    let claimed = Guard::new(store.as_ref())
        .claim(&attempt, now())
        .map_err(store_err)?;
    let mut out = json!({"outcome": claimed.outcome.as_str(), "key": a.key});
    match &claimed.outcome {
        ClaimOutcome::Owned => out["owner_token"] = claimed.owner_token.into(),
        ClaimOutcome::Done(r) => out["response"] = response_json(r),
        _ => {}
    }
    Ok(out)
}

#[derive(Args)]
pub struct CompleteArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The idempotency key.
    #[arg(long)]
    key: String,
    /// The owner token `intentkey claim` printed: only the owner finishes.
    #[arg(long)]
    owner_token: String,
    /// The effect refused before any side effect: release the claim (a retry runs).
    #[arg(long)]
    refused: bool,
    /// The effect's status code (errors are stored and replayed too; 429 and 503 release).
    #[arg(long)]
    status: u16,
    /// The effect's response body.
    #[arg(long, default_value = "")]
    body: String,
    /// The body's media type.
    #[arg(long, default_value = "application/json")]
    content_type: String,
    /// Seconds to keep the done record: the callers' worst redelivery horizon.
    #[arg(long, default_value_t = DEFAULT_TTL_SECONDS)]
    ttl: i64,
}

pub fn complete_cmd(a: &CompleteArgs) -> Result<Value, CliError> {
    let store = a.store.open()?;
    let response = Response {
        status: a.status,
        content_type: a.content_type.clone(),
        headers: Vec::new(),
        body: a.body.clone().into_bytes(),
    };
    let rules = Rules {
        ttl_seconds: a.ttl,
        ..Rules::default()
    };
    let result = if a.refused {
        EffectResult::Refused(Some(response))
    } else {
        EffectResult::Answered(response)
    };
    // The core finishes by the outcome class, fenced on the owner token.
    let finished = Guard::new(store.as_ref())
        .with_rules(rules)
        .finish(&a.key, &a.owner_token, result, now())
        .map_err(store_err)?;
    Ok(json!({"finished": finished.as_str(), "key": a.key}))
}

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    store: StoreArg,
    /// One record by key.
    #[arg(long, conflicts_with = "status")]
    key: Option<String>,
    /// List records with this status: in_flight, done or needs_reconciliation.
    #[arg(long)]
    status: Option<String>,
    /// At most this many records in a list.
    #[arg(long, default_value_t = 100)]
    limit: usize,
}

pub fn inspect_cmd(a: &InspectArgs) -> Result<Value, CliError> {
    let store = a.store.open()?;
    if let Some(key) = &a.key {
        let record = store.get(key).map_err(store_err)?;
        return Ok(json!({"key": key, "record": record.as_ref().map(record_json)}));
    }
    let status = match &a.status {
        Some(s) => Some(Status::parse(s).ok_or_else(|| {
            CliError::new(
                intentkey::ErrorCode::InvalidArgument,
                format!(
                    "--status: unknown status {s:?}; use in_flight, done or needs_reconciliation"
                ),
            )
        })?),
        None => None,
    };
    let records = store.list(status, a.limit).map_err(store_err)?;
    Ok(
        json!({"count": records.len(), "records": records.iter().map(record_json).collect::<Vec<_>>()}),
    )
}

/// A look-up answer given on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LookupArg {
    /// The destination has the effect (give --response-status and --response-body).
    Found,
    /// The destination has no record of the key.
    Absent,
    /// The destination could not tell.
    Unknown,
}

#[derive(Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The in-flight record's key.
    #[arg(long)]
    key: String,
    /// What the destination answered when asked with this key.
    #[arg(long, value_enum)]
    lookup: LookupArg,
    /// The destination documents read-your-writes (only then is `absent` trusted).
    #[arg(long)]
    read_your_writes: bool,
    /// With --lookup found: the effect's status code.
    #[arg(long, default_value_t = 200)]
    response_status: u16,
    /// With --lookup found: the effect's response body.
    #[arg(long, default_value = "")]
    response_body: String,
    /// Records claimed less than this many seconds ago are not due: their
    /// owner may still be running, so nothing is asked or written.
    #[arg(long, default_value_t = DEFAULT_STALE_AFTER_SECONDS)]
    stale_after: i64,
}

struct Answered(Lookup, bool);

impl Gateway for Answered {
    fn lookup(&self, _key: &str) -> Lookup {
        self.0.clone()
    }
    fn read_your_writes(&self) -> bool {
        self.1
    }
}

fn action_json(action: &RecoveryAction) -> Value {
    match action {
        RecoveryAction::RecordDone(r) => {
            json!({"action": "record-done", "response": response_json(r)})
        }
        RecoveryAction::ReExecute => json!({"action": "re-execute"}),
        RecoveryAction::CheckLater {
            lookups,
            next_lookup_at,
        } => json!({"action": "check-later", "lookups": lookups, "next_lookup_at": next_lookup_at}),
        RecoveryAction::Reconcile { lookups } => {
            json!({"action": "needs-reconciliation", "lookups": lookups})
        }
    }
}

pub fn recover_cmd(a: &RecoverArgs) -> Result<Value, CliError> {
    let store = a.store.open()?;
    let lookup = match a.lookup {
        LookupArg::Found => {
            Lookup::Found(Response::json(a.response_status, a.response_body.clone()))
        }
        LookupArg::Absent => Lookup::Absent,
        LookupArg::Unknown => Lookup::Unknown,
    };
    let guard = Guard::new(store.as_ref()).with_stale_after(a.stale_after);
    // The command line cannot run the effect: an applied re-execute makes the
    // new owner token the caller's, to run the effect with and complete.
    let recovery = guard
        .recover(&a.key, &Answered(lookup, a.read_your_writes), now(), None)
        .map_err(store_err)?;
    let mut out = json!({"key": a.key, "outcome": recovery.outcome.as_str()});
    match &recovery.outcome {
        Recovered::Missing => out["reason"] = "no record with this key".into(),
        Recovered::NotInFlight(status) => {
            out["reason"] = format!("the record is {status}").into();
        }
        Recovered::NotDue { due_at } => {
            out["due_at"] = (*due_at).into();
            out["reason"] =
                "claimed less than --stale-after seconds ago: its owner may still be running"
                    .into();
        }
        Recovered::Applied(action) | Recovered::Lost(action) => {
            if let (Value::Object(fields), Some(o)) = (action_json(action), out.as_object_mut()) {
                o.extend(fields);
            }
            if matches!(
                recovery.outcome,
                Recovered::Applied(RecoveryAction::ReExecute)
            ) {
                out["owner_token"] = recovery.owner_token.clone().into();
                out["note"] = "you own the record now: run the effect again with this same key, then `intentkey complete --owner-token`".into();
            }
        }
    }
    Ok(out)
}

pub fn purge_cmd(store: &StoreArg) -> Result<Value, CliError> {
    let store = store.open()?;
    let purged = Guard::new(store.as_ref()).purge(now()).map_err(store_err)?;
    Ok(json!({"purged": purged}))
}
