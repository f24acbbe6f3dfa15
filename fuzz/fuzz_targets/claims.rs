//! The claim flow's decisions, fed arbitrary records and arbitrary
//! interleavings of claims, finishes and recoveries over the memory store
//! (the reference every store is tested against). The invariants: a done
//! record never changes; only the owner token in the record can finish it;
//! an `unknown` look-up never re-executes; nothing panics.
#![no_main]

use intentkey::claim::{
    decide_existing, decide_recovery, drive, Attempt, ClaimFlow, ClaimOutcome, EffectResult,
    FinishFlow, Lookup, MemoryClaims, RecoverFlow, Recovered, RecoveryAction, RecoveryRules,
    Response, Rules, Status,
};
use libfuzzer_sys::fuzz_target;

fn lookup(b: u8) -> Lookup {
    match b % 3 {
        0 => Lookup::Found(Response::json(201, "{}")),
        1 => Lookup::Absent,
        _ => Lookup::Unknown,
    }
}

fn effect(b: u8) -> EffectResult {
    match b % 5 {
        0 => EffectResult::Answered(Response::json(201, "{}")),
        1 => EffectResult::Answered(Response::json(u16::from(b) + 300, "{}")),
        2 => EffectResult::Refused(None),
        3 => EffectResult::Failed,
        _ => EffectResult::Answered(Response::json(429, "{}")),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut store = MemoryClaims::default();
    let tokens = ["t0", "t1", "t2", "t3"];
    let mut now = 1_700_000_000i64;
    let rules = Rules::default();
    for op in data.chunks(4) {
        let [kind, a, b, c] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0), *op.get(3).unwrap_or(&0)];
        let key = ["k0", "k1"][usize::from(a & 1)];
        let token = tokens[usize::from(b % 4)];
        now += i64::from(c);
        let before = store.records().get(key).cloned();
        match kind % 4 {
            0 => {
                let attempt = Attempt {
                    key: key.into(),
                    fingerprint: ["fp-a", "fp-b"][usize::from(a >> 1 & 1)].into(),
                    tenant_id: "t".into(),
                    action_type: "a".into(),
                    prior: None,
                };
                let out = drive(ClaimFlow::new(&attempt, token, now), &mut store, &mut |_| Lookup::Unknown)
                    .expect("a claim over memory never fails");
                match (&before, &out) {
                    (None, ClaimOutcome::Owned) => {}
                    (None, other) => panic!("a free key must be owned, got {other:?}"),
                    (Some(r), o) => assert_eq!(*o, decide_existing(r, &attempt.fingerprint)),
                }
            }
            1 => {
                let flow = FinishFlow::new(key, token, effect(c), now, &rules);
                drive(flow, &mut store, &mut |_| Lookup::Unknown).expect("a finish over memory never fails");
                let owned = before.as_ref().is_some_and(|r| r.status == Status::InFlight && r.owner_token == token);
                if !owned {
                    assert_eq!(store.records().get(key), before.as_ref(), "only the owner writes");
                }
            }
            2 => {
                let rules = RecoveryRules { stale_after: i64::from(b), read_your_writes: a & 2 == 2, ttl_seconds: 100 };
                let l = lookup(c);
                let out = drive(RecoverFlow::new(key, "rec", now, &rules), &mut store, &mut |_| l.clone())
                    .expect("a recovery over memory never fails");
                if let Recovered::Applied(RecoveryAction::ReExecute) = out {
                    assert!(matches!(l, Lookup::Absent) && rules.read_your_writes, "only a trusted absent re-executes");
                }
                if let Some(r) = &before {
                    if r.status != Status::InFlight {
                        assert_eq!(store.records().get(key), before.as_ref(), "recovery leaves settled records alone");
                    }
                    // The decision function agrees on what unknown means.
                    if matches!(l, Lookup::Unknown) {
                        assert!(!matches!(decide_recovery(r, &l, true, now), RecoveryAction::ReExecute));
                    }
                }
            }
            _ => {
                let purged = store.records().get(key).is_some_and(|r| r.status == Status::InFlight);
                let _ = drive(intentkey::claim::PurgeFlow::new(now), &mut store, &mut |_| Lookup::Unknown);
                if purged {
                    assert!(store.records().contains_key(key), "a purge never removes an in-flight record");
                }
            }
        }
        if let Some(r) = &before {
            if r.status == Status::Done {
                if let Some(after) = store.records().get(key) {
                    assert_eq!(after, r, "a done record never changes (until purged)");
                }
            }
        }
    }
});
