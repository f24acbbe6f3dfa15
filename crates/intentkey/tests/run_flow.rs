//! The composite run flow: claim, effect, finish, recovery and the bounded
//! claim-again, over the reference memory store.

use std::convert::Infallible;

use intentkey::claim::{
    drive_run, Attempt, ClaimStore, Completion, DriveError, EffectResult, Finished, FlowError,
    Lookup, MemoryClaims, Record, Recovered, RecoveryRules, Release, Replacement, Response,
    RunFlow, RunKind, RunOutcome, RunSpec, Status, CLAIM_TRIES,
};
use intentkey::ErrorCode;

fn attempt(fingerprint: &str) -> Attempt {
    Attempt {
        key: "k1".into(),
        fingerprint: fingerprint.into(),
        tenant_id: "t1".into(),
        action_type: "pix.send".into(),
        prior: None,
    }
}

fn recovery(read_your_writes: bool) -> RecoveryRules {
    RecoveryRules {
        stale_after: 60,
        read_your_writes,
        ..RecoveryRules::default()
    }
}

fn run<S: ClaimStore<Error = Infallible>>(
    spec: &RunSpec,
    seed: u8,
    store: &mut S,
    lookup: Lookup,
    effects: &mut u32,
) -> Result<RunOutcome, DriveError<Infallible>> {
    let mut asked = |_: &str| lookup.clone();
    drive_run(
        &mut RunFlow::new(spec.clone(), [seed; 16]),
        store,
        &mut asked,
        &mut |key| {
            *effects += 1;
            (
                EffectResult::Answered(Response::json(201, format!(r#"{{"key":"{key}"}}"#))),
                spec.now + 1,
            )
        },
    )
}

/// Leaves `k1` in flight, claimed at `at` by a crashed owner.
fn crashed(store: &mut MemoryClaims, at: i64) {
    let record = Record::in_flight(&attempt("fp"), "crashed-owner", at);
    assert!(store.insert(&record).unwrap_or(false));
}

#[test]
fn runs_once_and_replays() {
    let mut store = MemoryClaims::default();
    let spec = RunSpec::new(attempt("fp"), RunKind::Effect, 100);
    let mut effects = 0;
    let first = run(&spec, 1, &mut store, Lookup::Unknown, &mut effects).unwrap();
    assert_eq!(
        first,
        RunOutcome::Ran {
            finished: Finished::Stored,
            recovered: false
        }
    );
    let again = run(&spec, 2, &mut store, Lookup::Unknown, &mut effects).unwrap();
    assert!(
        matches!(again, RunOutcome::Replayed { ref response, recovered: false } if response.status == 201)
    );
    assert_eq!(effects, 1);
    // The stored record belongs to the first run's token, not a constant.
    let stored = &store.records()["k1"];
    assert_eq!(stored.status, Status::Done);
    assert_eq!(stored.owner_token.len(), 32);
}

#[test]
fn another_payload_is_a_conflict_and_runs_nothing() {
    let mut store = MemoryClaims::default();
    let mut effects = 0;
    run(
        &RunSpec::new(attempt("fp"), RunKind::Effect, 100),
        1,
        &mut store,
        Lookup::Unknown,
        &mut effects,
    )
    .unwrap();
    let other = RunSpec::new(attempt("other"), RunKind::Effect, 100);
    assert_eq!(
        run(&other, 2, &mut store, Lookup::Unknown, &mut effects).unwrap(),
        RunOutcome::Conflict
    );
    assert_eq!(effects, 1);
}

#[test]
fn in_flight_without_a_look_up_is_answered_not_recovered() {
    let mut store = MemoryClaims::default();
    crashed(&mut store, 0);
    let mut effects = 0;
    let spec = RunSpec::new(attempt("fp"), RunKind::Effect, 10_000);
    assert_eq!(
        run(&spec, 1, &mut store, Lookup::Absent, &mut effects).unwrap(),
        RunOutcome::InFlight { recovery: None }
    );
    assert_eq!(effects, 0);
}

#[test]
fn a_stale_record_found_at_the_destination_is_replayed() {
    let mut store = MemoryClaims::default();
    crashed(&mut store, 0);
    let mut spec = RunSpec::new(attempt("fp"), RunKind::Effect, 10_000);
    spec.recovery = Some(recovery(false));
    let mut effects = 0;
    let found = Lookup::Found(Response::json(201, r#"{"id":"pay_1"}"#));
    let out = run(&spec, 1, &mut store, found, &mut effects).unwrap();
    assert!(
        matches!(out, RunOutcome::Replayed { ref response, recovered: true } if response.body == br#"{"id":"pay_1"}"#)
    );
    assert_eq!(effects, 0);
}

#[test]
fn unknown_never_re_executes_and_absent_needs_read_your_writes() {
    for (lookup, ryw) in [(Lookup::Unknown, true), (Lookup::Absent, false)] {
        let mut store = MemoryClaims::default();
        crashed(&mut store, 0);
        let mut spec = RunSpec::new(attempt("fp"), RunKind::Effect, 10_000);
        spec.recovery = Some(recovery(ryw));
        let mut effects = 0;
        let out = run(&spec, 1, &mut store, lookup.clone(), &mut effects).unwrap();
        assert!(
            matches!(
                out,
                RunOutcome::InFlight {
                    recovery: Some(Recovered::Applied(_))
                }
            ),
            "{lookup:?}: {out:?}"
        );
        assert_eq!(effects, 0, "{lookup:?} must not re-execute");
        assert_eq!(store.records()["k1"].status, Status::InFlight);
    }
}

#[test]
fn a_trusted_absent_re_executes_under_a_new_token() {
    let mut store = MemoryClaims::default();
    crashed(&mut store, 0);
    let mut spec = RunSpec::new(attempt("fp"), RunKind::Effect, 10_000);
    spec.recovery = Some(recovery(true));
    let mut effects = 0;
    let out = run(&spec, 1, &mut store, Lookup::Absent, &mut effects).unwrap();
    assert_eq!(
        out,
        RunOutcome::Ran {
            finished: Finished::Stored,
            recovered: true
        }
    );
    assert_eq!(effects, 1);
    let stored = &store.records()["k1"];
    assert_eq!(stored.status, Status::Done);
    assert_ne!(stored.owner_token, "crashed-owner");
}

#[test]
fn a_record_not_yet_stale_is_not_due() {
    let mut store = MemoryClaims::default();
    crashed(&mut store, 9_990);
    let mut spec = RunSpec::new(attempt("fp"), RunKind::Step, 10_000);
    spec.recovery = Some(recovery(true));
    let mut effects = 0;
    let out = run(&spec, 1, &mut store, Lookup::Unknown, &mut effects).unwrap();
    assert_eq!(
        out,
        RunOutcome::InFlight {
            recovery: Some(Recovered::NotDue { due_at: 10_050 })
        }
    );
    assert_eq!(effects, 0);
}

#[test]
fn a_crashed_step_is_taken_over_without_asking_the_host() {
    let mut store = MemoryClaims::default();
    crashed(&mut store, 0);
    let spec = RunSpec::new(attempt("fp"), RunKind::Step, 10_000);
    let mut effects = 0;
    let mut asked = 0;
    let out = drive_run(
        &mut RunFlow::new(spec, [3; 16]),
        &mut store,
        &mut |_| {
            asked += 1;
            Lookup::Unknown
        },
        &mut |_| {
            effects += 1;
            (EffectResult::Answered(Response::json(200, "{}")), 10_001)
        },
    )
    .unwrap();
    assert_eq!(
        out,
        RunOutcome::Ran {
            finished: Finished::Stored,
            recovered: true
        }
    );
    assert_eq!(
        (effects, asked),
        (1, 0),
        "a step's look-up is the journal's: absent"
    );
}

/// A store whose record is taken away from every owner before it completes:
/// each completion finds another owner's record (superseded) and the record
/// is gone by the next claim.
#[derive(Default)]
struct AlwaysSuperseded {
    inner: MemoryClaims,
    completions: u32,
}

impl ClaimStore for AlwaysSuperseded {
    type Error = Infallible;
    fn insert(&mut self, record: &Record) -> Result<bool, Infallible> {
        self.inner.insert(record)
    }
    fn get(&mut self, key: &str) -> Result<Option<Record>, Infallible> {
        self.inner.get(key)
    }
    fn complete(&mut self, c: &Completion) -> Result<bool, Infallible> {
        self.completions += 1;
        let taken = Release {
            key: c.key.clone(),
            owner_token: c.owner_token.clone(),
        };
        self.inner.release(&taken)?;
        Ok(false)
    }
    fn replace(&mut self, r: &Replacement) -> Result<bool, Infallible> {
        self.inner.replace(r)
    }
    fn release(&mut self, r: &Release) -> Result<bool, Infallible> {
        self.inner.release(r)
    }
    fn list(&mut self, status: Status, limit: u32) -> Result<Vec<Record>, Infallible> {
        self.inner.list(status, limit)
    }
    fn purge(&mut self, now: i64) -> Result<u64, Infallible> {
        self.inner.purge(now)
    }
}

#[test]
fn a_step_superseded_on_every_try_fails_with_record_vanished() {
    let mut store = AlwaysSuperseded::default();
    let spec = RunSpec::new(attempt("fp"), RunKind::Step, 100);
    let mut effects = 0;
    let err = run(&spec, 1, &mut store, Lookup::Unknown, &mut effects).unwrap_err();
    let DriveError::Flow(flow) = err;
    assert!(matches!(flow, FlowError::Vanished { ref key } if key == "k1"));
    assert_eq!(flow.code(), ErrorCode::RecordVanished);
    assert_eq!(effects, CLAIM_TRIES);
    assert_eq!(store.completions, CLAIM_TRIES);
}

#[test]
fn an_effect_superseded_keeps_its_own_answer() {
    let mut store = AlwaysSuperseded::default();
    let spec = RunSpec::new(attempt("fp"), RunKind::Effect, 100);
    let mut effects = 0;
    let out = run(&spec, 1, &mut store, Lookup::Unknown, &mut effects).unwrap();
    assert_eq!(
        out,
        RunOutcome::Ran {
            finished: Finished::Superseded,
            recovered: false
        }
    );
    assert_eq!(effects, 1, "an effect on the world is never run again here");
}

#[test]
fn a_refused_effect_releases_and_a_failed_one_stays_in_flight() {
    for (result, finished, status) in [
        (EffectResult::Refused(None), Finished::Released, None),
        (
            EffectResult::Failed,
            Finished::LeftInFlight,
            Some(Status::InFlight),
        ),
    ] {
        let mut store = MemoryClaims::default();
        let spec = RunSpec::new(attempt("fp"), RunKind::ToolCall, 100);
        let out = drive_run(
            &mut RunFlow::new(spec, [1; 16]),
            &mut store,
            &mut |_| Lookup::Unknown,
            &mut |_| (result.clone(), 101),
        )
        .unwrap();
        assert_eq!(
            out,
            RunOutcome::Ran {
                finished,
                recovered: false
            }
        );
        assert_eq!(store.records().get("k1").map(|r| r.status), status);
    }
}

#[test]
fn each_claim_and_recovery_writes_a_token_of_its_own() {
    let mut store = MemoryClaims::default();
    crashed(&mut store, 0);
    let mut spec = RunSpec::new(attempt("fp"), RunKind::Effect, 10_000);
    spec.recovery = Some(recovery(true));
    let mut flow = RunFlow::new(spec, [9; 16]);
    let mut tokens = Vec::new();
    let mut step = intentkey::claim::Flow::start(&mut flow);
    loop {
        match step {
            intentkey::claim::Step::Done(_) => break,
            intentkey::claim::Step::Io(intentkey::claim::Op::Effect(_)) => {
                tokens.push(flow.owner_token());
                step = intentkey::claim::Flow::resume(
                    &mut flow,
                    intentkey::claim::OpResult::Effected(
                        EffectResult::Answered(Response::json(200, "{}")),
                        10_001,
                    ),
                )
                .unwrap();
            }
            intentkey::claim::Step::Io(op) => {
                if let intentkey::claim::Op::Insert(r) = &op {
                    tokens.push(r.owner_token.clone());
                }
                if let intentkey::claim::Op::Replace(r) = &op {
                    tokens.push(r.record.owner_token.clone());
                }
                let result =
                    intentkey::claim::perform(&mut store, &op, &mut |_| Lookup::Absent).unwrap();
                step = intentkey::claim::Flow::resume(&mut flow, result).unwrap();
            }
        }
    }
    // insert (claim token), replace (recovery token), effect (recovery token)
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert_ne!(tokens[0], tokens[1]);
    assert_eq!(tokens[1], tokens[2]);
    assert!(matches!(store.records()["k1"].status, Status::Done));
}
