//! `intentkey demo`: the main job, a readable timeline against a fresh SQLite
//! file (or any store), with a fake destination that counts effects.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;

use intentkey::claim::{
    ClaimOutcome, EffectResult, Finished, Lookup, Recovered, RecoveryAction, Response, Status,
};
use intentkey::{Deriver, Intent, Payload, Policy, Secret};
use intentkey_store::guard::{Attempt, Gateway, Guard};
use intentkey_store::{open, Store};

/// A fake payment destination: it executes effects (counting them) and
/// answers look-ups by key.
struct Destination {
    effects: RefCell<HashMap<String, u32>>,
    payments: RefCell<HashMap<String, Response>>,
    /// Keys whose look-ups time out (the destination cannot tell).
    unreachable: RefCell<Vec<String>>,
}

impl Destination {
    fn pay(&self, key: &str, amount: &str) -> Response {
        *self.effects.borrow_mut().entry(key.to_owned()).or_default() += 1;
        let id = format!("pay_{}", &key[..8]);
        let response = Response::json(
            201,
            format!(r#"{{"payment_id":"{id}","amount":"{amount}"}}"#),
        );
        self.payments
            .borrow_mut()
            .insert(key.to_owned(), response.clone());
        response
    }

    fn effects(&self, key: &str) -> u32 {
        self.effects.borrow().get(key).copied().unwrap_or(0)
    }
}

impl Gateway for Destination {
    fn lookup(&self, key: &str) -> Lookup {
        if self.unreachable.borrow().iter().any(|k| k == key) {
            return Lookup::Unknown;
        }
        self.payments
            .borrow()
            .get(key)
            .cloned()
            .map_or(Lookup::Absent, Lookup::Found)
    }

    fn read_your_writes(&self) -> bool {
        false
    }
}

struct Timeline {
    start: i64,
}

impl Timeline {
    fn say(&self, now: i64, who: &str, what: &str) {
        println!("  t+{:>4}s  {who:<22} {what}", now - self.start);
    }
}

fn short(key: &str) -> String {
    format!("{}…", &key[..12])
}

fn outcome_text(outcome: &ClaimOutcome) -> String {
    match outcome {
        ClaimOutcome::Owned => "claim → owned".into(),
        ClaimOutcome::InFlight => "claim → in-flight: 409 Conflict".into(),
        ClaimOutcome::Done(r) => format!(
            "claim → done: replayed {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ),
        ClaimOutcome::PayloadConflict => {
            "claim → payload-conflict: 422 Unprocessable Content".into()
        }
    }
}

/// Runs the demo; returns a failure message if any promise was broken.
pub fn run(store_url: Option<String>) -> Result<(), String> {
    let (url, file) = match store_url {
        Some(url) => (url, None),
        None => {
            let path: PathBuf =
                std::env::temp_dir().join(format!("intentkey-demo-{}.sqlite", std::process::id()));
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            (format!("sqlite:{}", path.display()), Some(path))
        }
    };
    let store = open(&url).map_err(|e| e.to_string())?;
    let result = timeline(store.as_ref(), &url);
    if let Some(path) = file {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    result
}

#[allow(clippy::too_many_lines)]
fn timeline(store: &dyn Store, url: &str) -> Result<(), String> {
    let secret = Secret::new([0x5c; 32]).map_err(|e| e.to_string())?;
    let deriver = Deriver::new(&secret, Policy::default());
    let dest = Destination {
        effects: RefCell::new(HashMap::new()),
        payments: RefCell::new(HashMap::new()),
        unreachable: RefCell::new(Vec::new()),
    };
    let guard = Guard::new(store);
    let t0 = 1_700_000_000;
    let tl = Timeline { start: t0 };
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let attempt = |payload: &str, epoch: i64| -> Result<(Attempt, String), String> {
        let payload = Payload::from_json(payload).map_err(|e| err(&e))?;
        let intent = Intent {
            tenant_id: "tenant-1",
            action_type: "pix.send",
            payload: &payload,
            intent_epoch: epoch,
        };
        let key = deriver.derive(&intent).map_err(|e| err(&e))?.into_string();
        let fingerprint = deriver
            .fingerprint("tenant-1", "pix.send", &payload)
            .map_err(|e| err(&e))?;
        let amount = payload
            .get("amount")
            .map(ToString::to_string)
            .unwrap_or_default();
        Ok((
            Attempt {
                key,
                fingerprint: fingerprint.as_str().into(),
                tenant_id: "tenant-1".into(),
                action_type: "pix.send".into(),
                prior: None,
            },
            amount.trim_matches('"').to_owned(),
        ))
    };
    let check = |ok: bool, promise: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("demo: broken promise: {promise}"))
        }
    };

    println!("intentkey demo: store {url}, destination = a fake payment API that counts effects\n");

    // 1. A redelivered intent executes once.
    println!("1. A queue redelivers the same payment intent");
    let (a, amount) = attempt(
        r#"{"creditor_key":"123.456.789-09","amount":"10.50","currency":"BRL","request_id":"r-1","attempt":1}"#,
        t0,
    )?;
    let first = guard
        .run(&a, t0, |key| dest.pay(key, &amount))
        .map_err(|e| err(&e))?;
    tl.say(
        t0,
        "intent A, attempt 1",
        &format!(
            "key {}  {}  → effect runs, {} stored",
            short(&a.key),
            outcome_text(&first.outcome),
            first.status
        ),
    );
    let (a2, _) = attempt(
        r#"{"creditor_key":"12345678909","amount":10.5,"currency":" brl ","request_id":"r-2","attempt":2}"#,
        t0 + 40,
    )?;
    let again = guard
        .run(&a2, t0 + 40, |key| dest.pay(key, &amount))
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 40,
        "intent A, redelivery",
        &format!("key {}  {}", short(&a2.key), outcome_text(&again.outcome)),
    );
    check(
        a.key == a2.key && dest.effects(&a.key) == 1 && again.replayed,
        "a redelivery executes once",
    )?;
    tl.say(
        t0 + 40,
        "",
        &format!("destination effects for A: {}", dest.effects(&a.key)),
    );

    // 2. A concurrent duplicate gets 409.
    println!("\n2. Two workers take the same intent at once");
    let (b, amount_b) = attempt(
        r#"{"creditor_key":"maria@example.com","amount":"99.90","currency":"BRL"}"#,
        t0 + 60,
    )?;
    let worker1 = guard.claim(&b, t0 + 60).map_err(|e| err(&e))?;
    let o1 = worker1.outcome.clone();
    tl.say(
        t0 + 60,
        "intent B, worker 1",
        &format!(
            "key {}  {}  (effect still running)",
            short(&b.key),
            outcome_text(&o1)
        ),
    );
    let o2 = guard.claim(&b, t0 + 61).map_err(|e| err(&e))?.outcome;
    tl.say(t0 + 61, "intent B, worker 2", &outcome_text(&o2));
    let response = dest.pay(&b.key, &amount_b);
    let finished = guard
        .finish(
            &b.key,
            &worker1.owner_token,
            EffectResult::Answered(response.clone()),
            t0 + 62,
        )
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 62,
        "intent B, worker 1",
        &format!("effect done → {} stored", response.status),
    );
    check(
        o1 == ClaimOutcome::Owned
            && o2 == ClaimOutcome::InFlight
            && finished == Finished::Stored
            && dest.effects(&b.key) == 1,
        "a concurrent duplicate gets 409",
    )?;

    // 3. A changed payload under the same key gets 422.
    println!("\n3. A client reuses intent B's key with a different amount");
    let tampered = Attempt {
        fingerprint: attempt(
            r#"{"creditor_key":"maria@example.com","amount":"999.00","currency":"BRL"}"#,
            t0 + 60,
        )?
        .0
        .fingerprint,
        ..b.clone()
    };
    let conflict = guard
        .run(&tampered, t0 + 90, |key| dest.pay(key, "999.00"))
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 90,
        "intent B, other body",
        &format!(
            "{}  {}",
            outcome_text(&conflict.outcome),
            conflict.body_text()
        ),
    );
    check(
        conflict.status == 422 && dest.effects(&b.key) == 1,
        "a changed payload gets 422",
    )?;

    // 4. A crash after the effect, recovered by a look-up.
    println!("\n4. A worker crashes after the payment, before recording it");
    let (c, amount_c) = attempt(
        r#"{"creditor_key":"12.345.678/0001-95","amount":"250.00","currency":"BRL"}"#,
        t0 + 120,
    )?;
    guard.claim(&c, t0 + 120).map_err(|e| err(&e))?;
    dest.pay(&c.key, &amount_c);
    tl.say(
        t0 + 120,
        "intent C, worker",
        &format!(
            "key {}  claim → owned, effect runs, then the process dies",
            short(&c.key)
        ),
    );
    let retry = guard
        .run(&c, t0 + 150, |key| dest.pay(key, &amount_c))
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 150,
        "intent C, redelivery",
        &format!(
            "{} (in_flight is never released by age)",
            outcome_text(&retry.outcome)
        ),
    );
    let recovered = guard
        .recover_due(&dest, t0 + 420, 100, None)
        .map_err(|e| err(&e))?;
    for (key, recovery) in &recovered {
        if *key == c.key {
            tl.say(
                t0 + 420,
                "recovery",
                &format!(
                    "look-up of {} at the destination → {}",
                    short(key),
                    recovered_text(&recovery.outcome)
                ),
            );
        }
    }
    let replay = guard
        .run(&c, t0 + 480, |key| dest.pay(key, &amount_c))
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 480,
        "intent C, redelivery",
        &outcome_text(&replay.outcome),
    );
    check(
        dest.effects(&c.key) == 1 && replay.replayed && retry.status == 409,
        "a crash after the effect is recovered without running it again",
    )?;

    // 5. An unknown look-up backs off and ends in reconciliation.
    println!("\n5. A worker crashes and the destination cannot say what happened");
    let (d, amount_d) = attempt(
        r#"{"creditor_key":"joao@example.com","amount":"42.00","currency":"BRL"}"#,
        t0 + 600,
    )?;
    guard.claim(&d, t0 + 600).map_err(|e| err(&e))?;
    dest.pay(&d.key, &amount_d);
    dest.unreachable.borrow_mut().push(d.key.clone());
    tl.say(
        t0 + 600,
        "intent D, worker",
        &format!(
            "key {}  claim → owned, effect runs, the process dies",
            short(&d.key)
        ),
    );
    let mut now = t0 + 900;
    while let Some(record) = store.get(&d.key).map_err(|e| err(&e))? {
        if record.status != Status::InFlight {
            break;
        }
        let recovery = guard
            .recover(&d.key, &dest, now, None)
            .map_err(|e| err(&e))?;
        tl.say(
            now,
            "recovery",
            &format!(
                "look-up of {} → unknown → {}",
                short(&d.key),
                recovered_text(&recovery.outcome)
            ),
        );
        match recovery.outcome {
            Recovered::Applied(RecoveryAction::CheckLater { next_lookup_at, .. }) => {
                now = next_lookup_at;
            }
            _ => break,
        }
    }
    let listed = store
        .list(Some(Status::NeedsReconciliation), 10)
        .map_err(|e| err(&e))?;
    tl.say(
        now,
        "operator",
        &format!(
            "intentkey inspect --status needs_reconciliation → {} record(s)",
            listed.len()
        ),
    );
    let blocked = guard
        .run(&d, now + 60, |key| dest.pay(key, &amount_d))
        .map_err(|e| err(&e))?;
    tl.say(
        now + 60,
        "intent D, redelivery",
        &format!("{} (never re-executed)", outcome_text(&blocked.outcome)),
    );
    check(
        dest.effects(&d.key) == 1 && listed.iter().any(|r| r.key == d.key) && blocked.status == 409,
        "unknown never re-executes; it ends in reconciliation",
    )?;

    // 6. "Nothing happened" releases the claim; a superseded owner cannot overwrite.
    println!("\n6. The destination rate-limits the first attempt, then a slow owner is superseded");
    let (e, amount_e) = attempt(
        r#"{"creditor_key":"ana@example.com","amount":"7.00","currency":"BRL"}"#,
        t0 + 2000,
    )?;
    let limited = guard
        .run(&e, t0 + 2000, |_| {
            Response::json(429, r#"{"error":"rate_limited"}"#)
        })
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 2000,
        "intent E, attempt 1",
        &format!(
            "destination answers 429 → claim {} (nothing happened)",
            limited.finished.map_or("?", Finished::as_str)
        ),
    );
    let paid = guard
        .run(&e, t0 + 2010, |key| dest.pay(key, &amount_e))
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 2010,
        "intent E, retry",
        &format!(
            "{} → effect runs, {} stored",
            outcome_text(&paid.outcome),
            paid.status
        ),
    );
    let (f, amount_f) = attempt(
        r#"{"creditor_key":"rui@example.com","amount":"3.00","currency":"BRL"}"#,
        t0 + 2100,
    )?;
    let slow = guard.claim(&f, t0 + 2100).map_err(|e| err(&e))?;
    let taken = guard
        .recover(
            &f.key,
            &ReadYourWrites(&dest),
            t0 + 2400,
            Some(&mut |key: &str| EffectResult::Answered(dest.pay(key, &amount_f))),
        )
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 2400,
        "recovery",
        &format!(
            "intent F stale, destination (read-your-writes) says absent → {}, effect runs once",
            recovered_text(&taken.outcome)
        ),
    );
    let late = guard
        .finish(
            &f.key,
            &slow.owner_token,
            EffectResult::Answered(Response::json(201, "{}")),
            t0 + 2401,
        )
        .map_err(|e| err(&e))?;
    tl.say(
        t0 + 2401,
        "intent F, slow owner",
        &format!("finishes late → {} (nothing overwritten)", late.as_str()),
    );
    check(
        limited.finished == Some(Finished::Released)
            && paid.outcome == ClaimOutcome::Owned
            && dest.effects(&e.key) == 1
            && late == Finished::Superseded
            && dest.effects(&f.key) == 1,
        "a release lets the retry run; a superseded owner cannot overwrite",
    )?;

    println!(
        "\nEffects at the destination: A {}, B {}, C {}, D {}, E {}, F {} (each intent exactly once).",
        dest.effects(&a.key),
        dest.effects(&b.key),
        dest.effects(&c.key),
        dest.effects(&d.key),
        dest.effects(&e.key),
        dest.effects(&f.key)
    );
    Ok(())
}

/// The destination asked as a read-your-writes one (its `absent` is trusted).
struct ReadYourWrites<'d>(&'d Destination);

impl Gateway for ReadYourWrites<'_> {
    fn lookup(&self, key: &str) -> Lookup {
        self.0.lookup(key)
    }

    fn read_your_writes(&self) -> bool {
        true
    }
}

fn recovered_text(outcome: &Recovered) -> String {
    match outcome {
        Recovered::Applied(action) => action_text(action),
        Recovered::Lost(action) => {
            format!("{} (another recoverer wrote first)", action_text(action))
        }
        Recovered::NotDue { due_at } => format!("not due before t+{}s", due_at - 1_700_000_000),
        Recovered::NotInFlight(status) => format!("nothing to do: the record is {status}"),
        Recovered::Missing => "nothing to do: no such record".into(),
    }
}

fn action_text(action: &RecoveryAction) -> String {
    match action {
        RecoveryAction::RecordDone(r) => {
            format!("found: recorded as done ({}), not run again", r.status)
        }
        RecoveryAction::ReExecute => {
            "re-execute: taken over with a new owner token, run again with the same key".into()
        }
        RecoveryAction::CheckLater {
            lookups,
            next_lookup_at,
        } => format!(
            "check again at t+{}s (look-up {lookups})",
            next_lookup_at - 1_700_000_000
        ),
        RecoveryAction::Reconcile { lookups } => {
            format!("moved to needs_reconciliation after {lookups} look-ups")
        }
    }
}
