//! Operations commands: claim, complete, inspect, recover, purge. Each prints
//! one JSON object on stdout.

use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use intentkey::claim::{
    complete_in, Lookup, Record, RecoveryAction, Response, Status, DEFAULT_TTL_SECONDS,
};
use intentkey_store::guard::{Gateway, Guard};
use intentkey_store::{claim, driven, open, Driven, Store};
use serde_json::{json, Value};

/// Seconds since the Unix epoch: the host reads the clock, the core never does.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A record as JSON.
pub fn record_json(r: &Record) -> Value {
    json!({
        "key": r.key,
        "fingerprint": r.fingerprint,
        "tenant_id": r.tenant_id,
        "action_type": r.action_type,
        "status": r.status.as_str(),
        "response": r.response.as_ref().map(|x| json!({"status": x.status, "content_type": x.content_type, "body": x.body})),
        "created_at": r.created_at,
        "expires_at": r.expires_at,
        "lookups": r.lookups,
        "next_lookup_at": r.next_lookup_at,
    })
}

#[derive(Args)]
pub struct StoreArg {
    /// The store: sqlite:PATH or postgres://USER@HOST:PORT/DB (or memory: for a dry run).
    #[arg(long)]
    store: String,
}

impl StoreArg {
    fn open(&self) -> Result<Box<dyn Store>, String> {
        open(&self.store).map_err(|e| e.to_string())
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

pub fn claim_cmd(a: &ClaimArgs) -> Result<Value, String> {
    let store = a.store.open()?;
    let record = Record::in_flight(&a.key, &a.fingerprint, &a.tenant, &a.action, now());
    let outcome = claim(store.as_ref(), &record).map_err(|e| e.to_string())?;
    let mut out = json!({"outcome": outcome.as_str(), "key": a.key});
    if let intentkey::claim::ClaimOutcome::Done(r) = &outcome {
        out["response"] =
            json!({"status": r.status, "content_type": r.content_type, "body": r.body});
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
    /// The effect's status code (errors are stored and replayed too).
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

pub fn complete_cmd(a: &CompleteArgs) -> Result<Value, String> {
    let store = a.store.open()?;
    let response = Response {
        status: a.status,
        content_type: a.content_type.clone(),
        body: a.body.clone(),
    };
    // The core completes only an in-flight record (`complete_in`).
    let completed = complete_in(&mut Driven(store.as_ref()), &a.key, response, now(), a.ttl)
        .map_err(|e| driven(e).to_string())?;
    if completed {
        return Ok(json!({"completed": true, "key": a.key}));
    }
    let reason = match store.get(&a.key).map_err(|e| e.to_string())? {
        Some(record) => format!("the record is {}", record.status),
        None => "no such record".to_owned(),
    };
    Ok(json!({"completed": false, "key": a.key, "reason": reason}))
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

pub fn inspect_cmd(a: &InspectArgs) -> Result<Value, String> {
    let store = a.store.open()?;
    if let Some(key) = &a.key {
        let record = store.get(key).map_err(|e| e.to_string())?;
        return Ok(json!({"key": key, "record": record.as_ref().map(record_json)}));
    }
    let status = match &a.status {
        Some(s) => Some(Status::parse(s).ok_or_else(|| {
            format!("unknown status {s:?}: use in_flight, done or needs_reconciliation")
        })?),
        None => None,
    };
    let records = store.list(status, a.limit).map_err(|e| e.to_string())?;
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

pub fn recover_cmd(a: &RecoverArgs) -> Result<Value, String> {
    let store = a.store.open()?;
    let Some(record) = store.get(&a.key).map_err(|e| e.to_string())? else {
        return Err(format!("no record with key {}", a.key));
    };
    if record.status != Status::InFlight {
        return Ok(
            json!({"key": a.key, "action": "none", "reason": format!("the record is {}", record.status)}),
        );
    }
    let lookup = match a.lookup {
        LookupArg::Found => {
            Lookup::Found(Response::json(a.response_status, a.response_body.clone()))
        }
        LookupArg::Absent => Lookup::Absent,
        LookupArg::Unknown => Lookup::Unknown,
    };
    let guard = Guard::new(store.as_ref());
    // The command line cannot run the effect: a re-execute decision leaves the
    // record in flight for its owner, and says so.
    let action = guard
        .recover_one(&Answered(lookup, a.read_your_writes), record, now(), None)
        .map_err(|e| e.to_string())?;
    let out = match action {
        RecoveryAction::RecordDone(_) => json!({"key": a.key, "action": "record-done"}),
        RecoveryAction::ReExecute => {
            return Ok(
                json!({"key": a.key, "action": "re-execute", "note": "run the effect again with this same key, then `intentkey complete`"}),
            )
        }
        RecoveryAction::CheckLater {
            lookups,
            next_lookup_at,
        } => {
            json!({"key": a.key, "action": "check-later", "lookups": lookups, "next_lookup_at": next_lookup_at})
        }
        RecoveryAction::Reconcile { lookups } => {
            json!({"key": a.key, "action": "needs-reconciliation", "lookups": lookups})
        }
    };
    Ok(out)
}

pub fn purge_cmd(store: &StoreArg) -> Result<Value, String> {
    let store = store.open()?;
    let purged = store.purge(now()).map_err(|e| e.to_string())?;
    Ok(json!({"purged": purged}))
}
