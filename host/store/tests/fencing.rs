//! Fencing across processes, on SQLite and PostgreSQL: many recoverers race
//! for one stale record and exactly one re-executes; a superseded owner's
//! late completion is refused; a fresh claim is not due; the outcome classes;
//! fast completions. The memory store runs the same scenarios in process
//! where they apply.
//!
//! Each process scenario runs this test binary again with `--exact
//! child_process` and `IK_*` environment variables (the child test returns at
//! once without them); a child writes what it saw as `name=value` lines to
//! the file in `IK_OUT`.
//!
//! PostgreSQL tests use 127.0.0.1:5432 (trust auth, database `test`), each in
//! a schema of its own; Redis tests use 127.0.0.1:6379 database 1, each under
//! a key prefix of its own; MySQL tests use MariaDB at 127.0.0.1:3306 (root,
//! no password), each in a database of its own. Without a server they fail
//! under `CI=true` and
//! print `SKIPPED: <test>: …` otherwise.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;
#[path = "common/dynamo_db.rs"]
mod dynamo_db;
#[path = "common/mysql_db.rs"]
mod mysql_db;
#[path = "common/redis_db.rs"]
mod redis_db;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use intentkey::claim::{
    EffectResult, Finished, Lookup, Recovered, Response, Rules, Status, DEFAULT_RELEASE_STATUSES,
    DEFAULT_TTL_SECONDS,
};
use intentkey_store::guard::{Gateway, Guard};
use intentkey_store::{open, Store};

use common::{
    attempt, open_effects, read_report, record_effect, spawn_child, temp_path, wait_for_file,
    wait_ok, write_report, EffectsFile, PgSchema, Report, TempSqlite,
};
use mysql_db::MysqlDb;
use redis_db::RedisPrefix;

/// When the scenarios' records are claimed.
const NOW: i64 = 1_700_000_000;
/// How long a child waits for its parent's signal.
const PATIENCE: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// What one process does: in a child (`child_process`) or in process.

/// A scenario step's parameters: `IK_<NAME>` in a child, `name` here.
type Spec = BTreeMap<String, String>;

fn spec_i64(spec: &Spec, name: &str, default: i64) -> i64 {
    spec.get(name).map_or(default, |v| v.parse().unwrap())
}

fn guard_for<'s>(spec: &Spec, store: &'s dyn Store) -> Guard<'s> {
    let release_statuses = match spec.get("release") {
        Some(list) => list.split(',').map(|s| s.parse().unwrap()).collect(),
        None => DEFAULT_RELEASE_STATUSES.to_vec(),
    };
    Guard::new(store)
        .with_rules(Rules {
            ttl_seconds: DEFAULT_TTL_SECONDS,
            release_statuses,
            fast_completion: spec.get("fast").is_some_and(|f| f == "1"),
        })
        .with_stale_after(spec_i64(spec, "stale", 300))
}

/// The effect's answer: `status`, `body` and an optional `header` ("Name: value").
fn response_for(spec: &Spec) -> Response {
    let status = u16::try_from(spec_i64(spec, "status", 201)).unwrap();
    let body = spec.get("body").cloned().unwrap_or_else(|| "{}".into());
    let response = Response::json(status, body);
    match spec.get("header").and_then(|h| h.split_once(": ")) {
        Some((name, value)) => response.with_header(name, value),
        None => response,
    }
}

/// The effect's result: `result` is `answered` (the default), `refused` or `failed`.
fn result_for(spec: &Spec) -> EffectResult {
    match spec.get("result").map_or("answered", String::as_str) {
        "answered" => EffectResult::Answered(response_for(spec)),
        "refused" => EffectResult::Refused(None),
        "failed" => EffectResult::Failed,
        other => panic!("unknown result {other}"),
    }
}

/// A destination that answers every look-up the same way and counts the asks.
struct FixedGateway {
    answer: Lookup,
    asks: Cell<u32>,
}

impl FixedGateway {
    fn new(answer: &str) -> FixedGateway {
        FixedGateway {
            answer: match answer {
                "absent" => Lookup::Absent,
                "unknown" => Lookup::Unknown,
                "found" => Lookup::Found(Response::json(201, r#"{"found":true}"#)),
                other => panic!("unknown look-up answer {other}"),
            },
            asks: Cell::new(0),
        }
    }
}

impl Gateway for FixedGateway {
    fn lookup(&self, _key: &str) -> Lookup {
        self.asks.set(self.asks.get() + 1);
        self.answer.clone()
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

fn finished_str(finished: Option<Finished>) -> String {
    finished.map_or("-", Finished::as_str).to_owned()
}

fn report(pairs: &[(&str, String)]) -> Report {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// Performs `op` on `store` as `spec` says.
///
/// - `run`: [`Guard::run_with`] with the effect `result_for(spec)` (recorded
///   in the effects file `dest` when given).
/// - `claim`: [`Guard::claim`].
/// - `recover`: [`Guard::recover`] with a [`FixedGateway`] answering
///   `lookup`; a re-execution records an effect by `by` in `dest` and answers
///   `response_for(spec)`.
/// - `own-then-finish`: claims, writes its token to `token_out`, waits for the
///   file `go`, then finishes with `response_for(spec)` and, after that, with
///   a refusal (a release).
fn perform(op: &str, spec: &Spec, store: &dyn Store) -> Report {
    let guard = guard_for(spec, store);
    let key = spec["key"].as_str();
    let fingerprint = spec.get("fp").map_or("fp", String::as_str);
    let now = spec_i64(spec, "now", NOW);
    let by = spec.get("by").cloned().unwrap_or_default();
    let dest = spec.get("dest").map(|p| open_effects(p));
    match op {
        "run" => {
            let mut ran = 0;
            let (answer, _) = guard
                .run_with(&attempt(key, fingerprint), now, |k| {
                    ran += 1;
                    if let Some(dest) = &dest {
                        record_effect(dest, k, &by);
                    }
                    result_for(spec)
                })
                .unwrap();
            let headers: Vec<String> = answer
                .headers
                .iter()
                .map(|(n, v)| format!("{n}: {v}"))
                .collect();
            report(&[
                ("outcome", answer.outcome.as_str().into()),
                ("finished", finished_str(answer.finished)),
                ("status", answer.status.to_string()),
                ("replayed", answer.replayed.to_string()),
                ("body", answer.body_text().to_owned()),
                ("headers", headers.join("; ")),
                ("ran", ran.to_string()),
            ])
        }
        "claim" => {
            let claimed = guard.claim(&attempt(key, fingerprint), now).unwrap();
            report(&[
                ("outcome", claimed.outcome.as_str().into()),
                ("token", claimed.owner_token),
            ])
        }
        "recover" => {
            let gateway = FixedGateway::new(spec.get("lookup").map_or("absent", String::as_str));
            let mut reexecute = |k: &str| {
                if let Some(dest) = &dest {
                    record_effect(dest, k, &by);
                }
                EffectResult::Answered(response_for(spec))
            };
            let recovery = guard
                .recover(key, &gateway, now, Some(&mut reexecute))
                .unwrap();
            let detail = match &recovery.outcome {
                Recovered::Applied(action) | Recovered::Lost(action) => action.as_str().to_owned(),
                Recovered::NotDue { due_at } => due_at.to_string(),
                Recovered::NotInFlight(status) => status.as_str().to_owned(),
                Recovered::Missing => "-".to_owned(),
            };
            report(&[
                ("outcome", recovery.outcome.as_str().into()),
                ("detail", detail),
                ("token", recovery.owner_token),
                ("finished", finished_str(recovery.finished)),
                ("asks", gateway.asks.get().to_string()),
                ("by", by),
            ])
        }
        "own-then-finish" => {
            let claimed = guard.claim(&attempt(key, fingerprint), now).unwrap();
            write_report(
                Path::new(&spec["token_out"]),
                &report(&[
                    ("outcome", claimed.outcome.as_str().into()),
                    ("token", claimed.owner_token.clone()),
                ]),
            );
            assert!(
                wait_for_file(Path::new(&spec["go"]), PATIENCE),
                "the owner was never told to finish"
            );
            let answered = EffectResult::Answered(response_for(spec));
            let finished = guard
                .finish(key, &claimed.owner_token, answered, now + 1)
                .unwrap();
            let released = guard
                .finish(
                    key,
                    &claimed.owner_token,
                    EffectResult::Refused(None),
                    now + 2,
                )
                .unwrap();
            report(&[
                ("finished", finished.as_str().into()),
                ("release", released.as_str().into()),
            ])
        }
        other => panic!("unknown child operation {other}"),
    }
}

/// The child side of every process scenario in this file.
#[test]
fn child_process() {
    let Ok(op) = std::env::var("IK_OP") else {
        return; // only runs as a child of a scenario
    };
    let spec: Spec = std::env::vars()
        .filter_map(|(k, v)| Some((k.strip_prefix("IK_")?.to_lowercase(), v)))
        .collect();
    let store = open(&spec["url"]).unwrap();
    if let Some(ready) = spec.get("ready") {
        std::fs::write(ready, b"ready").unwrap();
    }
    if let Some(start) = spec.get("start") {
        assert!(
            wait_for_file(Path::new(start), PATIENCE),
            "never told to start"
        );
    }
    let out = perform(&op, &spec, store.as_ref());
    write_report(Path::new(&spec["out"]), &out);
}

/// A running child scenario step.
struct Running {
    child: std::process::Child,
    out: std::path::PathBuf,
    what: String,
}

impl Running {
    fn report(self) -> Report {
        wait_ok(self.child, &self.what);
        read_report(&self.out)
    }
}

fn spawn_op(url: &str, op: &str, spec: &[(&str, String)]) -> Running {
    let out = temp_path("child-out", "");
    let mut env = vec![
        ("IK_OP".to_owned(), op.to_owned()),
        ("IK_URL".to_owned(), url.to_owned()),
        ("IK_OUT".to_owned(), out.display().to_string()),
    ];
    env.extend(
        spec.iter()
            .map(|(k, v)| (format!("IK_{}", k.to_uppercase()), v.clone())),
    );
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    Running {
        child: spawn_child("child_process", &env),
        out,
        what: format!("{op} {spec:?}"),
    }
}

/// Where a scenario step runs: here (memory) or in a child process on a shared store.
enum Runner<'a> {
    Here(&'a dyn Store),
    Child(String),
}

impl Runner<'_> {
    fn run(&self, op: &str, spec: &[(&str, String)]) -> Report {
        match self {
            Runner::Here(store) => {
                let spec: Spec = spec
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect();
                perform(op, &spec, *store)
            }
            Runner::Child(url) => spawn_op(url, op, spec).report(),
        }
    }
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

// ---------------------------------------------------------------------------
// Recovery race: 16 processes recover one stale record at the same moment.

const RECOVERERS: usize = 16;
const RECOVERY_ROUNDS: usize = 3;

fn recovery_race(url: &str, what: &str) {
    let store = open(url).unwrap();
    let guard = Guard::new(store.as_ref()).with_stale_after(60);
    let dest = EffectsFile::new("recovery-race-dest");
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..RECOVERY_ROUNDS {
        let key = format!("stale-{round}");
        // The owner claimed long ago and vanished: the record is stale.
        let original = guard.claim(&attempt(&key, "fp"), NOW).unwrap();
        assert_eq!(original.outcome.as_str(), "owned");
        let start = temp_path("recovery-race-start", "");
        let readies: Vec<_> = (0..RECOVERERS)
            .map(|c| temp_path(&format!("recovery-race-ready-{c}"), ""))
            .collect();
        let children: Vec<Running> = (0..RECOVERERS)
            .map(|c| {
                spawn_op(
                    url,
                    "recover",
                    &[
                        ("key", key.clone()),
                        ("now", s(NOW + 600)),
                        ("stale", s(60)),
                        ("lookup", s("absent")),
                        ("dest", dest.path.display().to_string()),
                        ("by", format!("r{c}")),
                        ("status", s(201)),
                        ("body", format!(r#"{{"paid_by":"r{c}"}}"#)),
                        ("ready", readies[c].display().to_string()),
                        ("start", start.display().to_string()),
                    ],
                )
            })
            .collect();
        for ready in &readies {
            assert!(
                wait_for_file(ready, PATIENCE),
                "{what}: a recoverer never got ready"
            );
            let _ = std::fs::remove_file(ready);
        }
        std::fs::write(&start, b"go").unwrap();
        let reports: Vec<Report> = children.into_iter().map(Running::report).collect();
        let _ = std::fs::remove_file(&start);

        let winners: Vec<&Report> = reports
            .iter()
            .filter(|r| r["outcome"] == "applied")
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "{what}: exactly one recoverer applies its decision: {reports:?}"
        );
        let winner = winners[0];
        assert_eq!(
            (winner["detail"].as_str(), winner["finished"].as_str()),
            ("re-execute", "stored"),
            "{what}: {winner:?}"
        );
        for r in &reports {
            *seen
                .entry(format!("{} {}", r["outcome"], r["detail"]))
                .or_default() += 1;
            if r["outcome"] == "applied" {
                continue;
            }
            // Lost: it read the stale record, but the winner's take-over
            // changed the token first. not-in-flight: it read after the
            // winner finished. not-due: it read the taken-over record,
            // which is fresh again (claimed at the recovery's `now`).
            assert!(
                matches!(
                    (r["outcome"].as_str(), r["detail"].as_str()),
                    ("lost", _) | ("not-in-flight", "done") | ("not-due", _)
                ),
                "{what}: a losing recoverer: {r:?}"
            );
            assert_eq!(r["finished"], "-", "{what}: a loser runs nothing: {r:?}");
        }
        // Exactly one re-execution: one effect, the winner's.
        assert_eq!(
            dest.by(&key),
            [winner["by"].clone()],
            "{what}: exactly one re-execution, by the winner"
        );
        let record = store.get(&key).unwrap().unwrap();
        let response = record.response.as_ref().unwrap();
        assert_eq!(
            (
                record.status,
                response.status,
                response.body_text().unwrap(),
                record.owner_token.as_str()
            ),
            (
                Status::Done,
                201,
                format!(r#"{{"paid_by":"{}"}}"#, winner["by"]).as_str(),
                winner["token"].as_str()
            ),
            "{what}: the record is the winner's"
        );
        assert_ne!(record.owner_token, original.owner_token);
    }
    eprintln!(
        "{what}: {RECOVERY_ROUNDS} rounds × {RECOVERERS} recoverers of one stale record: \
         1 re-execution per round; outcomes {seen:?}"
    );
}

#[test]
fn recovery_race_sqlite_processes() {
    let db = TempSqlite::new("recovery-race");
    recovery_race(&db.url(), "sqlite recovery race");
}

#[test]
fn recovery_race_postgres_processes() {
    let Some(schema) = PgSchema::new("recovery_race_postgres_processes") else {
        return;
    };
    recovery_race(&schema.url(), "postgres recovery race");
}

// ---------------------------------------------------------------------------
// A superseded owner: its late completion is refused.

fn superseded_owner(url: &str, what: &str) {
    let store = open(url).unwrap();
    let dest = EffectsFile::new("superseded-dest");
    let key = "slow-owner";
    let token_out = temp_path("superseded-token", "");
    let go = temp_path("superseded-go", "");
    // A claims at NOW and holds its token (its effect is stuck somewhere).
    let owner = spawn_op(
        url,
        "own-then-finish",
        &[
            ("key", s(key)),
            ("now", s(NOW)),
            ("status", s(200)),
            ("body", s(r#"{"paid_by":"owner"}"#)),
            ("token_out", token_out.display().to_string()),
            ("go", go.display().to_string()),
        ],
    );
    assert!(
        wait_for_file(&token_out, PATIENCE),
        "{what}: the owner never claimed"
    );
    let claimed = read_report(&token_out);
    assert_eq!(claimed["outcome"], "owned", "{what}");
    // A recoverer in another process finds the record stale, takes it over and finishes it.
    let recovered = spawn_op(
        url,
        "recover",
        &[
            ("key", s(key)),
            ("now", s(NOW + 600)),
            ("stale", s(300)),
            ("lookup", s("absent")),
            ("dest", dest.path.display().to_string()),
            ("by", s("recoverer")),
            ("status", s(201)),
            ("body", s(r#"{"paid_by":"recoverer"}"#)),
        ],
    )
    .report();
    assert_eq!(
        (
            recovered["outcome"].as_str(),
            recovered["detail"].as_str(),
            recovered["finished"].as_str()
        ),
        ("applied", "re-execute", "stored"),
        "{what}: {recovered:?}"
    );
    assert_ne!(recovered["token"], claimed["token"]);
    // Now A finishes with another response, then tries to release: both refused.
    std::fs::write(&go, b"go").unwrap();
    let late = owner.report();
    let _ = std::fs::remove_file(&go);
    assert_eq!(
        (late["finished"].as_str(), late["release"].as_str()),
        ("superseded", "superseded"),
        "{what}: the superseded owner's writes are refused"
    );
    let record = store.get(key).unwrap().unwrap();
    let response = record.response.as_ref().unwrap();
    assert_eq!(
        (
            record.status,
            response.status,
            response.body_text().unwrap(),
            record.owner_token.as_str()
        ),
        (
            Status::Done,
            201,
            r#"{"paid_by":"recoverer"}"#,
            recovered["token"].as_str()
        ),
        "{what}: the record keeps the recoverer's response and token"
    );
    assert_eq!(dest.by(key), ["recoverer"]);
    // A repeat replays the recoverer's answer.
    let again = Guard::new(store.as_ref())
        .run(&attempt(key, "fp"), NOW + 700, |_| panic!("must not run"))
        .unwrap();
    assert_eq!(
        (again.status, again.replayed, again.body_text()),
        (201, true, r#"{"paid_by":"recoverer"}"#)
    );
}

#[test]
fn superseded_owner_sqlite_processes() {
    let db = TempSqlite::new("superseded");
    superseded_owner(&db.url(), "sqlite superseded owner");
}

#[test]
fn superseded_owner_postgres_processes() {
    let Some(schema) = PgSchema::new("superseded_owner_postgres_processes") else {
        return;
    };
    superseded_owner(&schema.url(), "postgres superseded owner");
}

// ---------------------------------------------------------------------------
// Not due: a fresh claim is left alone; the destination is not asked.

fn not_due(runner: &Runner<'_>, store: &dyn Store, what: &str) {
    let guard = Guard::new(store).with_stale_after(300);
    let key = "fresh";
    assert_eq!(
        guard
            .claim(&attempt(key, "fp"), NOW)
            .unwrap()
            .outcome
            .as_str(),
        "owned"
    );
    let before = store.get(key).unwrap().unwrap();
    let recover = |now: i64, lookup: &str| {
        runner.run(
            "recover",
            &[
                ("key", s(key)),
                ("now", s(now)),
                ("stale", s(300)),
                ("lookup", s(lookup)),
            ],
        )
    };
    // One second before it is stale: not due; nothing asked, nothing written.
    let early = recover(NOW + 299, "absent");
    assert_eq!(
        (
            early["outcome"].as_str(),
            early["detail"].as_str(),
            early["asks"].as_str(),
            early["finished"].as_str()
        ),
        ("not-due", "1700000300", "0", "-"),
        "{what}: {early:?}"
    );
    assert_eq!(
        store.get(key).unwrap().unwrap(),
        before,
        "{what}: nothing written"
    );
    let gateway = FixedGateway::new("absent");
    assert!(guard
        .recover_due(&gateway, NOW + 299, 10, None)
        .unwrap()
        .is_empty());
    assert_eq!(gateway.asks.get(), 0, "{what}");
    assert_eq!(
        store.get(key).unwrap().unwrap(),
        before,
        "{what}: nothing written"
    );
    // At stale-after it is due: the destination is asked once.
    let due = recover(NOW + 300, "unknown");
    assert_eq!(
        (
            due["outcome"].as_str(),
            due["detail"].as_str(),
            due["asks"].as_str()
        ),
        ("applied", "check-later", "1"),
        "{what}: {due:?}"
    );
    let after = store.get(key).unwrap().unwrap();
    assert_eq!(
        (
            after.status,
            after.lookups,
            after.next_lookup_at,
            &after.owner_token
        ),
        (Status::InFlight, 1, Some(NOW + 360), &before.owner_token),
        "{what}"
    );
}

#[test]
fn not_due_memory() {
    let store = open("memory:").unwrap();
    not_due(
        &Runner::Here(store.as_ref()),
        store.as_ref(),
        "memory not due",
    );
}

#[test]
fn not_due_sqlite_processes() {
    let db = TempSqlite::new("not-due");
    let store = open(&db.url()).unwrap();
    not_due(&Runner::Child(db.url()), store.as_ref(), "sqlite not due");
}

#[test]
fn not_due_postgres_processes() {
    let Some(schema) = PgSchema::new("not_due_postgres_processes") else {
        return;
    };
    let store = open(&schema.url()).unwrap();
    not_due(
        &Runner::Child(schema.url()),
        store.as_ref(),
        "postgres not due",
    );
}

// ---------------------------------------------------------------------------
// Outcome classes: terminal answers stored (headers too), "nothing happened"
// released, ambiguous failures left in flight.

fn outcome_classes(runner: &Runner<'_>, store: &dyn Store, what: &str) {
    let run = |key: &str, extra: &[(&str, String)]| {
        let mut spec = vec![("key", s(key))];
        spec.extend_from_slice(extra);
        let r = runner.run("run", &spec);
        (
            r["outcome"].clone(),
            r["finished"].clone(),
            r["status"].parse::<u16>().unwrap(),
            r["ran"].clone(),
            r,
        )
    };
    let answered = |status: u16| vec![("status", s(status))];
    let owned = |finished: &str| (s("owned"), s(finished));

    // 429 and 503 release: the record is deleted, and a retry owns and runs.
    for status in [429, 503] {
        let key = format!("busy-{status}");
        let (o, f, st, ran, _) = run(&key, &answered(status));
        assert_eq!(
            (o, f, st, ran.as_str()),
            (s("owned"), s("released"), status, "1"),
            "{what}"
        );
        assert!(
            store.get(&key).unwrap().is_none(),
            "{what}: {status} deletes the claim"
        );
        let (o, f, st, ran, _) = run(&key, &answered(201));
        assert_eq!(
            ((o, f), st, ran.as_str()),
            (owned("stored"), 201, "1"),
            "{what}: the retry owns and runs"
        );
        let (o, _, st, ran, r) = run(&key, &answered(201));
        assert_eq!(
            (o.as_str(), st, ran.as_str(), r["replayed"].as_str()),
            ("done", 201, "0", "true"),
            "{what}"
        );
    }

    // Custom release statuses (only 409): 409 releases, 429 is terminal.
    let only_409 = |status: u16| vec![("status", s(status)), ("release", s("409"))];
    let (o, f, _, _, _) = run("custom-409", &only_409(409));
    assert_eq!((o, f), owned("released"), "{what}");
    assert!(store.get("custom-409").unwrap().is_none(), "{what}");
    let (o, f, _, _, _) = run("custom-409", &only_409(201));
    assert_eq!((o, f), owned("stored"), "{what}");
    let (o, f, _, _, _) = run("custom-429", &only_409(429));
    assert_eq!(
        (o, f),
        owned("stored"),
        "{what}: 429 is terminal when not a release status"
    );
    let (o, _, st, ran, _) = run("custom-429", &only_409(201));
    assert_eq!(
        (o.as_str(), st, ran.as_str()),
        ("done", 429, "0"),
        "{what}: the stored 429 is replayed"
    );

    // Refused: nothing happened, released; a retry owns and runs.
    let (o, f, _, _, _) = run("refused", &[("result", s("refused"))]);
    assert_eq!((o, f), owned("released"), "{what}");
    assert!(store.get("refused").unwrap().is_none(), "{what}");
    let (o, f, _, ran, _) = run("refused", &answered(201));
    assert_eq!(((o, f), ran.as_str()), (owned("stored"), "1"), "{what}");

    // Failed: ambiguous, left in flight; a repeat gets in-flight (409) and runs nothing.
    let (o, f, _, _, _) = run("failed", &[("result", s("failed"))]);
    assert_eq!((o, f), owned("left-in-flight"), "{what}");
    assert_eq!(
        store.get("failed").unwrap().unwrap().status,
        Status::InFlight,
        "{what}"
    );
    let (o, f, st, ran, _) = run("failed", &answered(201));
    assert_eq!(
        (o.as_str(), f.as_str(), st, ran.as_str()),
        ("in-flight", "-", 409, "0"),
        "{what}"
    );

    // Terminal answers keep their headers: a Location is replayed with the body.
    let located = vec![
        ("status", s(201)),
        ("body", s(r#"{"id":"pay_1"}"#)),
        ("header", s("Location: /payments/pay_1")),
    ];
    let (o, f, _, _, first) = run("located", &located);
    assert_eq!((o, f), owned("stored"), "{what}");
    assert_eq!(first["headers"], "Location: /payments/pay_1", "{what}");
    let (o, _, st, ran, again) = run("located", &answered(500));
    assert_eq!(
        (
            o.as_str(),
            st,
            ran.as_str(),
            again["replayed"].as_str(),
            again["body"].as_str(),
            again["headers"].as_str()
        ),
        (
            "done",
            201,
            "0",
            "true",
            r#"{"id":"pay_1"}"#,
            "Location: /payments/pay_1"
        ),
        "{what}: {again:?}"
    );
    let stored = store.get("located").unwrap().unwrap().response.unwrap();
    assert_eq!(
        stored.headers,
        [("Location".to_owned(), "/payments/pay_1".to_owned())],
        "{what}"
    );
}

#[test]
fn outcome_classes_memory() {
    let store = open("memory:").unwrap();
    outcome_classes(
        &Runner::Here(store.as_ref()),
        store.as_ref(),
        "memory outcome classes",
    );
}

#[test]
fn outcome_classes_sqlite_processes() {
    let db = TempSqlite::new("outcome-classes");
    let store = open(&db.url()).unwrap();
    outcome_classes(
        &Runner::Child(db.url()),
        store.as_ref(),
        "sqlite outcome classes",
    );
}

#[test]
fn outcome_classes_postgres_processes() {
    let Some(schema) = PgSchema::new("outcome_classes_postgres_processes") else {
        return;
    };
    let store = open(&schema.url()).unwrap();
    outcome_classes(
        &Runner::Child(schema.url()),
        store.as_ref(),
        "postgres outcome classes",
    );
}

// ---------------------------------------------------------------------------
// Fast completion: the commit does not wait for the disk, and the record is
// stored all the same (seen from another store handle and another process).

fn fast_completion(url: &str, what: &str) {
    let store = open(url).unwrap();
    let guard = Guard::new(store.as_ref()).with_rules(Rules {
        fast_completion: true,
        ..Rules::default()
    });
    for i in 0..20 {
        let key = format!("fast-{i}");
        let claimed = guard.claim(&attempt(&key, "fp"), NOW).unwrap();
        assert_eq!(claimed.outcome.as_str(), "owned", "{what}");
        let response = Response::json(201, format!(r#"{{"n":{i}}}"#));
        assert_eq!(
            guard
                .finish(
                    &key,
                    &claimed.owner_token,
                    EffectResult::Answered(response),
                    NOW
                )
                .unwrap(),
            Finished::Stored,
            "{what}"
        );
    }
    let second = open(url).unwrap();
    for i in 0..20 {
        let record = second.get(&format!("fast-{i}")).unwrap().unwrap();
        assert_eq!(
            (
                record.status,
                record.response.map(|r| r.body),
                record.expires_at
            ),
            (
                Status::Done,
                Some(format!(r#"{{"n":{i}}}"#).into_bytes()),
                Some(NOW + DEFAULT_TTL_SECONDS)
            ),
            "{what}: a fast completion is visible from a second store handle"
        );
    }
    // The same from another process: its fast completion is replayed here.
    let child = Runner::Child(url.to_owned());
    let r = child.run(
        "run",
        &[
            ("key", s("fast-child")),
            ("fast", s("1")),
            ("status", s(201)),
            ("body", s("child")),
        ],
    );
    assert_eq!(
        (r["outcome"].as_str(), r["finished"].as_str()),
        ("owned", "stored"),
        "{what}"
    );
    let replay = Guard::new(second.as_ref())
        .run(&attempt("fast-child", "fp"), NOW + 1, |_| {
            panic!("must not run")
        })
        .unwrap();
    assert_eq!(
        (replay.status, replay.replayed, replay.body_text()),
        (201, true, "child"),
        "{what}"
    );
}

#[test]
fn fast_completion_sqlite() {
    let db = TempSqlite::new("fast");
    fast_completion(&db.url(), "sqlite fast completion");
}

#[test]
fn fast_completion_postgres() {
    let Some(schema) = PgSchema::new("fast_completion_postgres") else {
        return;
    };
    fast_completion(&schema.url(), "postgres fast completion");
}

// ---------------------------------------------------------------------------
// The same on Redis (database 1, a key prefix of each test's own).

#[test]
fn recovery_race_redis_processes() {
    let Some(p) = RedisPrefix::new("recovery_race_redis") else {
        return;
    };
    recovery_race(&p.url(), "redis recovery race");
}

#[test]
fn superseded_owner_redis_processes() {
    let Some(p) = RedisPrefix::new("superseded_owner_redis") else {
        return;
    };
    superseded_owner(&p.url(), "redis superseded owner");
}

#[test]
fn not_due_redis_processes() {
    let Some(p) = RedisPrefix::new("not_due_redis") else {
        return;
    };
    let store = open(&p.url()).unwrap();
    not_due(&Runner::Child(p.url()), store.as_ref(), "redis not due");
}

#[test]
fn outcome_classes_redis_processes() {
    let Some(p) = RedisPrefix::new("outcome_classes_redis") else {
        return;
    };
    let store = open(&p.url()).unwrap();
    outcome_classes(
        &Runner::Child(p.url()),
        store.as_ref(),
        "redis outcome classes",
    );
}

#[test]
fn fast_completion_redis() {
    let Some(p) = RedisPrefix::new("fast_completion_redis") else {
        return;
    };
    fast_completion(&p.url(), "redis fast completion");
}

// ---------------------------------------------------------------------------
// The same on MySQL / MariaDB (a database of each test's own).

#[test]
fn recovery_race_redis_cluster_processes() {
    let Some(p) = RedisPrefix::cluster("recovery_race_redis_cluster") else {
        return;
    };
    recovery_race(&p.url(), "redis cluster recovery race");
}

#[test]
fn superseded_owner_redis_cluster_processes() {
    let Some(p) = RedisPrefix::cluster("superseded_owner_redis_cluster") else {
        return;
    };
    superseded_owner(&p.url(), "redis cluster superseded owner");
}

#[test]
fn not_due_redis_cluster_processes() {
    let Some(p) = RedisPrefix::cluster("not_due_redis_cluster") else {
        return;
    };
    let store = open(&p.url()).unwrap();
    not_due(
        &Runner::Child(p.url()),
        store.as_ref(),
        "redis cluster not due",
    );
}

#[test]
fn fast_completion_redis_cluster() {
    let Some(p) = RedisPrefix::cluster("fast_completion_redis_cluster") else {
        return;
    };
    fast_completion(&p.url(), "redis cluster fast completion");
}

#[test]
fn recovery_race_dynamodb_processes() {
    let Some(t) = dynamo_db::DynamoTable::new("recovery_race_dynamodb") else {
        return;
    };
    recovery_race(&t.url(), "dynamodb recovery race");
}

#[test]
fn superseded_owner_dynamodb_processes() {
    let Some(t) = dynamo_db::DynamoTable::new("superseded_owner_dynamodb") else {
        return;
    };
    superseded_owner(&t.url(), "dynamodb superseded owner");
}

#[test]
fn not_due_dynamodb_processes() {
    let Some(t) = dynamo_db::DynamoTable::new("not_due_dynamodb") else {
        return;
    };
    let store = open(&t.url()).unwrap();
    not_due(&Runner::Child(t.url()), store.as_ref(), "dynamodb not due");
}

#[test]
fn outcome_classes_dynamodb_processes() {
    let Some(t) = dynamo_db::DynamoTable::new("outcome_classes_dynamodb") else {
        return;
    };
    let store = open(&t.url()).unwrap();
    outcome_classes(
        &Runner::Child(t.url()),
        store.as_ref(),
        "dynamodb outcome classes",
    );
}

#[test]
fn recovery_race_mysql_processes() {
    let Some(db) = MysqlDb::new("recovery_race_mysql") else {
        return;
    };
    recovery_race(&db.url(), "mysql recovery race");
}

#[test]
fn superseded_owner_mysql_processes() {
    let Some(db) = MysqlDb::new("superseded_owner_mysql") else {
        return;
    };
    superseded_owner(&db.url(), "mysql superseded owner");
}

#[test]
fn not_due_mysql_processes() {
    let Some(db) = MysqlDb::new("not_due_mysql") else {
        return;
    };
    let store = open(&db.url()).unwrap();
    not_due(&Runner::Child(db.url()), store.as_ref(), "mysql not due");
}

#[test]
fn outcome_classes_mysql_processes() {
    let Some(db) = MysqlDb::new("outcome_classes_mysql") else {
        return;
    };
    let store = open(&db.url()).unwrap();
    outcome_classes(
        &Runner::Child(db.url()),
        store.as_ref(),
        "mysql outcome classes",
    );
}
