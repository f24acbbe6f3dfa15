//! Operations commands: claim, complete, inspect, recover, purge, status,
//! reconcile. Each prints one JSON object on stdout (`status` prints text
//! unless `--json`); every decision and the order of store
//! operations are the core's flows (through `intentkey_store::guard::Guard`).

use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use intentkey::claim::{
    recovery_due, ClaimOutcome, EffectResult, Lookup, Reconciled, Record, Recovered,
    RecoveryAction, Response, Rules, Status, Verdict, DEFAULT_STALE_AFTER_SECONDS,
    DEFAULT_TTL_SECONDS,
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

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// In-flight records older than this many seconds are due a look-up
    /// (the recovery's staleness).
    #[arg(long, default_value_t = DEFAULT_STALE_AFTER_SECONDS)]
    stale_after: i64,
    /// At most this many in-flight and awaiting records are read (for the
    /// oldest age, the due count and the list).
    #[arg(long, default_value_t = 10_000)]
    limit: usize,
}

impl StatusArgs {
    /// Whether `--json` was given.
    pub fn json(&self) -> bool {
        self.json
    }
}

/// Counts by status: the store's count statement, or (a store that
/// cannot count) the records listed, up to `limit` each.
fn counts(store: &dyn Store, limit: usize) -> Result<Vec<(Status, u64, bool)>, CliError> {
    if let Some(counted) = store.count(None).map_err(store_err)? {
        return Ok(Status::ALL
            .into_iter()
            .map(|s| {
                let n = counted
                    .iter()
                    .find(|c| c.status == s)
                    .map_or(0, |c| c.count);
                (s, n, false)
            })
            .collect());
    }
    Status::ALL
        .into_iter()
        .map(|s| {
            let n = store.list(Some(s), limit).map_err(store_err)?.len();
            Ok((s, n as u64, n >= limit))
        })
        .collect()
}

/// `intentkey status`: the JSON and the text of an operator's view.
pub fn status_cmd(a: &StatusArgs) -> Result<(Value, String), CliError> {
    let store = a.store.open()?;
    let now = now();
    let counts = counts(store.as_ref(), a.limit)?;
    let in_flight = store
        .list(Some(Status::InFlight), a.limit)
        .map_err(store_err)?;
    let awaiting = store
        .list(Some(Status::NeedsReconciliation), a.limit)
        .map_err(store_err)?;
    let oldest = in_flight.iter().map(|r| r.created_at).min();
    let oldest_age = oldest.map(|c| (now - c).max(0));
    let due = in_flight
        .iter()
        .filter(|r| recovery_due(r, now, a.stale_after))
        .count();
    let mut count_json = serde_json::Map::new();
    for (status, n, at_least) in &counts {
        count_json.insert(status.as_str().to_owned(), (*n).into());
        if *at_least {
            count_json.insert(format!("{}_at_least", status.as_str()), true.into());
        }
    }
    let value = json!({
        "counts": count_json,
        "oldest_in_flight_age_seconds": oldest_age,
        "due_lookup": due,
        "stale_after_seconds": a.stale_after,
        "needs_reconciliation": awaiting.iter().map(record_json).collect::<Vec<_>>(),
    });
    let mut text = String::new();
    for (status, n, at_least) in &counts {
        let plus = if *at_least { "+" } else { "" };
        text.push_str(&format!("{:<22} {n}{plus}\n", status.as_str()));
    }
    match oldest_age {
        Some(age) => text.push_str(&format!("oldest in flight       {age} s\n")),
        None => text.push_str("oldest in flight       -\n"),
    }
    text.push_str(&format!(
        "due a look-up          {due} (in flight longer than {} s)\n",
        a.stale_after
    ));
    if awaiting.is_empty() {
        text.push_str("awaiting reconciliation: none\n");
    } else {
        text.push_str("awaiting reconciliation (settle each with `intentkey reconcile --key K --found|--absent`):\n");
        for r in &awaiting {
            text.push_str(&format!(
                "  {}  tenant {}  action {}  claimed at {}  look-ups {}\n",
                r.key, r.tenant_id, r.action_type, r.created_at, r.lookups
            ));
        }
    }
    Ok((value, text))
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("verdict").required(true).args(["found", "absent"])))]
pub struct ReconcileArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The key of the record awaiting reconciliation.
    #[arg(long)]
    key: String,
    /// The effect happened: the record becomes done with this response
    /// (--response-status, --response-body) and retries replay it.
    #[arg(long)]
    found: bool,
    /// The effect did not happen: the record is released and the next retry runs it.
    #[arg(long)]
    absent: bool,
    /// With --found: the effect's status code.
    #[arg(long, default_value_t = 200)]
    response_status: u16,
    /// With --found: the effect's response body (JSON).
    #[arg(long, default_value = "")]
    response_body: String,
}

/// `intentkey reconcile`: a human's decision, through the core's flow.
pub fn reconcile_cmd(a: &ReconcileArgs) -> Result<Value, CliError> {
    let store = a.store.open()?;
    let verdict = if a.found {
        Verdict::Found(Response::json(a.response_status, a.response_body.clone()))
    } else {
        Verdict::Absent
    };
    let outcome = Guard::new(store.as_ref())
        .reconcile(&a.key, verdict, now())
        .map_err(store_err)?;
    let mut out = json!({"key": a.key, "outcome": outcome.as_str()});
    match outcome {
        Reconciled::Missing => out["reason"] = "no record with this key".into(),
        Reconciled::NotNeeded(status) => {
            out["reason"] = format!("the record is {status}, not awaiting reconciliation").into();
        }
        Reconciled::Lost => {
            out["reason"] = "the record changed before this decision was written (another decision?): nothing written; look again with `intentkey inspect --key`".into();
        }
        Reconciled::Recorded | Reconciled::Released => {}
    }
    Ok(out)
}
