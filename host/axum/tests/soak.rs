//! A soak test with faults: 64 clients for `SOAK_SECONDS` (12 by default;
//! the full run is 60) against two worker processes (the `soak-worker`
//! example: the axum layer on PostgreSQL, whose effect is a row in
//! `soak_effects`). The clients mix new keys, repeats of finished keys
//! (byte-identical replays), concurrent duplicates of a key in flight (409,
//! then the replay) and the same key with another payload (422), and retry
//! connection errors, 409 and 503 with a bounded backoff against either
//! worker. A third of the way in PostgreSQL is restarted; two thirds in
//! worker `b` is killed (SIGKILL) and started again a second later.
//!
//! At the end the workers are stopped, recovery (`Recoverer`, asking the
//! effects table) settles what they left in flight, and the test checks:
//! every key whose effect ran ran it exactly once (or its record is in
//! `needs_reconciliation`); no record is lost (every 201 has a `done` record
//! with that answer, every effect row has a record, nothing is left in
//! flight); no 5xx but the clear 503s; replays byte-identical. It prints the
//! requests, outcomes, p50/p99 latency, throughput and the fault timings.
//!
//! `SOAK_SEED` (printed at the start) replays a run's mix of operations;
//! `SOAK_CLIENTS` changes the concurrency. This restarts the machine's
//! PostgreSQL, so it lives in a test binary of its own (cargo runs test
//! binaries one at a time). Without the server (or without the rights to
//! restart it) it says `SKIPPED`, and fails under `CI=true`.
//!
//! The workers are this test binary run again in child processes (the
//! ignored test `worker_process`, with the example's code compiled in), so
//! they always run the code this build holds.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "../examples/soak_worker.rs"]
#[allow(dead_code)]
mod soak_worker;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use intentkey::claim::{EffectResult, Finished, Recovered, RecoveryAction, Status};
use intentkey::Secret;
use intentkey_axum::{AsyncStore, PgStore, Recoverer, Reexecute};
use soak_worker::{run_effect, Effect, EffectsGateway, EFFECTS_TABLE_SQL};
use support::common::{restart_postgres, skipped};
use support::{on_postgres, Answer, Client};

/// The secret every worker of the run shares (a test secret).
const SECRET_HEX: &str = "a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7";
const PATH: &str = "/soak/effects";
/// Pool size of each worker.
const CONNECTIONS: usize = 16;
/// 409s in a row before a client leaves a key to recovery (its owner may be dead).
const MAX_CONFLICTS: u32 = 12;
/// How long a client retries connection errors and 503s for one request.
const RETRY_FOR: Duration = Duration::from_secs(60);
/// How long an operation under way may go on after the run ends.
const GRACE: Duration = Duration::from_secs(5);
/// 409s in a row after which a request counts as waiting on a key left in
/// flight (about a second of backoff: longer than the slowest handler).
const LONG_WAIT: u32 = 5;
/// Keys of finished operations replayed once more after recovery.
const REPLAY_SAMPLE: usize = 500;

fn secret() -> Secret {
    Secret::from_hex(SECRET_HEX).unwrap()
}

/// Writes a line to the process's stderr, past the harness's capture, so a
/// plain `cargo test` run shows the seed and the figures.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

// ---------------------------------------------------------------- config

struct Config {
    seconds: u64,
    seed: u64,
    clients: usize,
}

fn config() -> Config {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let seconds = var("SOAK_SECONDS").map_or(12, |v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("SOAK_SECONDS={v:?} is not a number of seconds"))
    });
    assert!(seconds >= 3, "SOAK_SECONDS must be at least 3");
    let seed = var("SOAK_SEED").map_or_else(
        || {
            let mut b = [0u8; 8];
            getrandom::fill(&mut b).unwrap();
            u64::from_le_bytes(b)
        },
        |v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            }
            .unwrap_or_else(|_| panic!("SOAK_SEED={v:?} is not a number"))
        },
    );
    let clients = var("SOAK_CLIENTS").map_or(64, |v| v.trim().parse().unwrap());
    Config {
        seconds,
        seed,
        clients,
    }
}

/// SplitMix64: a small seeded generator, the same sequence on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = Rng(seed ^ stream.wrapping_mul(0xA24B_AED4_963E_E407));
        rng.next();
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// ---------------------------------------------------------------- workers

/// A worker in a child process; killed when dropped.
struct WorkerProcess {
    name: String,
    child: Child,
    addr: SocketAddr,
}

impl WorkerProcess {
    /// SIGKILL, and wait for the process to end.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts worker `name` on `port` (0: a free one) and waits until it listens.
fn spawn_worker(name: &str, url: &str, port: u16) -> WorkerProcess {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "worker_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("SOAK_WORKER_CHILD", "1")
        .env("SOAK_PG_URL", url)
        .env("PORT", port.to_string())
        .env("SOAK_WORKER", name)
        .env("INTENTKEY_SECRET", SECRET_HEX)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Reads the address, then drains the pipe until the process ends.
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.split("listening on http://").nth(1) {
                let _ = tx.send(addr.trim().to_owned());
            }
        }
    });
    let mut worker = WorkerProcess {
        name: name.to_owned(),
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(addr) => worker.addr = addr.parse().unwrap(),
        Err(_) => {
            worker.kill();
            panic!("worker {name} did not listen within 60 s (see its stderr above)");
        }
    }
    worker
}

/// The worker's process, when the soak starts it (`SOAK_WORKER_CHILD`);
/// otherwise nothing.
#[test]
#[ignore = "the soak's worker process: the soak test runs it in a child process"]
fn worker_process() {
    if std::env::var("SOAK_WORKER_CHILD").is_err() {
        return;
    }
    let var = |name: &str| std::env::var(name).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let secret = Secret::from_hex(&var("INTENTKEY_SECRET")).unwrap();
    let served = runtime.block_on(soak_worker::run(
        &var("SOAK_PG_URL"),
        &var("SOAK_WORKER"),
        var("PORT").parse().unwrap(),
        CONNECTIONS,
        secret,
    ));
    if let Err(e) = served {
        panic!("soak worker {}: {e}", var("SOAK_WORKER"));
    }
}

// ---------------------------------------------------------------- clients

/// One intent: a client key and its payload.
#[derive(Clone, Debug)]
struct Intent {
    /// The `Idempotency-Key` header's value (an RFC 8941 string).
    header: String,
    amount: u64,
    delay_ms: u64,
}

impl Intent {
    fn body(&self) -> String {
        format!(
            r#"{{"amount":{},"delay_ms":{},"intent":{}}}"#,
            self.amount, self.delay_ms, self.header
        )
    }

    /// The same JSON written another way (members reordered, spaces): the
    /// same request to the fingerprint.
    fn body_rewritten(&self, rng: &mut Rng) -> String {
        match rng.below(3) {
            0 => self.body(),
            1 => format!(
                r#"{{ "intent": {}, "amount": {}, "delay_ms": {} }}"#,
                self.header, self.amount, self.delay_ms
            ),
            _ => format!(
                "{{\"delay_ms\":{},\n  \"intent\":{},\"amount\":{}.0}}",
                self.delay_ms, self.header, self.amount
            ),
        }
    }

    /// Another payload under the same key.
    fn mismatched(&self) -> String {
        format!(
            r#"{{"amount":{},"delay_ms":{},"intent":{}}}"#,
            self.amount + 1,
            self.delay_ms,
            self.header
        )
    }
}

/// An intent a client got a 201 for: the first answer.
#[derive(Debug)]
struct Created {
    intent: Intent,
    storage_key: String,
    body: Vec<u8>,
    location: Option<String>,
}

/// Why a client left a key without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GiveUp {
    /// Still 409 after [`MAX_CONFLICTS`] tries: its owner may be dead.
    InFlight,
    /// Connection errors or 503s for [`RETRY_FOR`].
    NoAnswer,
    /// The run ended.
    RunEnded,
}

#[derive(Clone, Debug, Default)]
struct Second {
    requests: u32,
    created: u32,
    unavailable: u32,
    conflicts: u32,
    conn_errors: u32,
    latency_us: Vec<u32>,
}

#[derive(Default)]
struct Log {
    requests: u64,
    /// (operation, status) → answers.
    statuses: BTreeMap<(&'static str, u16), u64>,
    conn_errors: u64,
    latency_us: Vec<u32>,
    /// Request latency by operation.
    request_latency_us: BTreeMap<&'static str, Vec<u32>>,
    /// Operation latency, retries included.
    op_latency_us: BTreeMap<&'static str, Vec<u32>>,
    timeline: Vec<Second>,
    violations: Vec<String>,
    /// Replays compared byte for byte with the first answer.
    replays_checked: u64,
    /// Concurrent duplicate pairs, and how many saw a 409 before their 201.
    duplicate_pairs: u64,
    duplicates_with_409: u64,
    mismatches_422: u64,
    /// New keys whose first 201 was a replay (the first answer was lost).
    new_answered_by_replay: u64,
    gave_up: Vec<(Intent, GiveUp)>,
    gave_up_counts: BTreeMap<(&'static str, &'static str), u64>,
    /// Finished keys a repeat found still in flight (their completion was lost).
    completion_lost: Vec<Arc<Created>>,
}

impl Log {
    fn second(&mut self, at: usize) -> &mut Second {
        if self.timeline.len() <= at {
            self.timeline.resize(at + 1, Second::default());
        }
        &mut self.timeline[at]
    }

    fn merge(&mut self, other: Log) {
        self.requests += other.requests;
        for (k, v) in other.statuses {
            *self.statuses.entry(k).or_default() += v;
        }
        self.conn_errors += other.conn_errors;
        self.latency_us.extend(other.latency_us);
        for (k, v) in other.request_latency_us {
            self.request_latency_us.entry(k).or_default().extend(v);
        }
        for (k, v) in other.op_latency_us {
            self.op_latency_us.entry(k).or_default().extend(v);
        }
        for (i, s) in other.timeline.into_iter().enumerate() {
            let t = self.second(i);
            t.requests += s.requests;
            t.created += s.created;
            t.unavailable += s.unavailable;
            t.conflicts += s.conflicts;
            t.conn_errors += s.conn_errors;
            t.latency_us.extend(s.latency_us);
        }
        self.violations.extend(other.violations);
        self.replays_checked += other.replays_checked;
        self.duplicate_pairs += other.duplicate_pairs;
        self.duplicates_with_409 += other.duplicates_with_409;
        self.mismatches_422 += other.mismatches_422;
        self.new_answered_by_replay += other.new_answered_by_replay;
        self.gave_up.extend(other.gave_up);
        self.completion_lost.extend(other.completion_lost);
        for (k, v) in other.gave_up_counts {
            *self.gave_up_counts.entry(k).or_default() += v;
        }
    }
}

/// What the run shares with its clients.
struct Ctx {
    seed: u64,
    /// Requests that have answered 409 [`LONG_WAIT`] times in a row.
    long_waits: AtomicU64,
    addrs: Mutex<[SocketAddr; 2]>,
    started: Instant,
    stop: AtomicBool,
    stopped_at_ms: AtomicU64,
    finished: Mutex<Vec<Arc<Created>>>,
}

impl Ctx {
    fn second(&self) -> usize {
        self.started.elapsed().as_secs() as usize
    }

    fn past_grace(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
            && self.started.elapsed()
                > Duration::from_millis(self.stopped_at_ms.load(Ordering::SeqCst)) + GRACE
    }

    fn pick_finished(&self, rng: &mut Rng) -> Option<Arc<Created>> {
        let finished = self.finished.lock().unwrap();
        if finished.is_empty() {
            return None;
        }
        Some(Arc::clone(
            &finished[rng.below(finished.len() as u64) as usize],
        ))
    }
}

/// A client's keep-alive connections, one per worker.
struct Conns {
    conns: [Option<Client>; 2],
}

impl Conns {
    fn new() -> Conns {
        Conns {
            conns: [None, None],
        }
    }

    async fn post(
        &mut self,
        ctx: &Ctx,
        worker: usize,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<Answer> {
        if self.conns[worker].is_none() {
            let addr = ctx.addrs.lock().unwrap()[worker];
            let client = tokio::time::timeout(Duration::from_secs(10), Client::connect(addr))
                .await
                .map_err(|_| std::io::Error::other("connect timed out"))??;
            self.conns[worker] = Some(client);
        }
        let answer = self.conns[worker]
            .as_mut()
            .unwrap()
            .post(PATH, headers, body)
            .await;
        if answer.is_err() {
            self.conns[worker] = None;
        }
        answer
    }
}

/// Counts a client in [`Ctx::long_waits`] from `start` until dropped.
struct LongWait<'a>(&'a AtomicU64, std::cell::Cell<bool>);

impl LongWait<'_> {
    fn start(&self) {
        if !self.1.replace(true) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Drop for LongWait<'_> {
    fn drop(&mut self) {
        if self.1.get() {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What one request came to, after its retries.
enum Sent {
    /// A final answer, and the 409s seen before it.
    Answer(Answer, u32),
    GaveUp(GiveUp),
}

fn is_problem(answer: &Answer) -> bool {
    answer.header("content-type") == Some("application/problem+json")
}

/// Exponential backoff from 50 ms, capped by `Retry-After` (1 s when absent),
/// with jitter.
async fn backoff(rng: &Mutex<Rng>, tries: u32, retry_after: Option<&str>) {
    let cap = retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(1_000, |s| s.saturating_mul(1_000).clamp(50, 5_000));
    let base = (50u64 << tries.min(6)).min(cap);
    let jitter = 50 + rng.lock().unwrap().below(51);
    tokio::time::sleep(Duration::from_millis(base * jitter / 100)).await;
}

/// Sends one request and retries it like a real client: connection errors
/// and 503 against either worker, 409 after its `Retry-After`, within bounds.
async fn send(
    ctx: &Ctx,
    conns: &mut Conns,
    rng: &Mutex<Rng>,
    log: &Mutex<Log>,
    op: &'static str,
    header: &str,
    body: &str,
) -> Sent {
    let headers = [
        ("Idempotency-Key", header),
        ("Content-Type", "application/json"),
    ];
    let began = Instant::now();
    let mut worker = rng.lock().unwrap().below(2) as usize;
    let mut tries = 0u32;
    let mut conflicts = 0u32;
    let long_wait = LongWait(&ctx.long_waits, std::cell::Cell::new(false));
    loop {
        if ctx.past_grace() {
            return Sent::GaveUp(GiveUp::RunEnded);
        }
        if began.elapsed() > RETRY_FOR {
            return Sent::GaveUp(GiveUp::NoAnswer);
        }
        let sent_at = Instant::now();
        let result = conns.post(ctx, worker, &headers, body).await;
        let elapsed = sent_at.elapsed();
        let second = ctx.second();
        let answer = match result {
            Ok(answer) => answer,
            Err(_) => {
                {
                    let mut log = log.lock().unwrap();
                    log.conn_errors += 1;
                    log.second(second).conn_errors += 1;
                }
                // The worker may be down: the other one next.
                worker = 1 - worker;
                backoff(rng, tries, None).await;
                tries += 1;
                continue;
            }
        };
        {
            let mut log = log.lock().unwrap();
            log.requests += 1;
            let us = u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX);
            log.latency_us.push(us);
            log.request_latency_us.entry(op).or_default().push(us);
            *log.statuses.entry((op, answer.status)).or_default() += 1;
            let s = log.second(second);
            s.requests += 1;
            s.latency_us.push(us);
            match answer.status {
                201 => s.created += 1,
                409 => s.conflicts += 1,
                503 => s.unavailable += 1,
                _ => {}
            }
        }
        match answer.status {
            503 => {
                if answer.header("retry-after").is_none() || !is_problem(&answer) {
                    log.lock().unwrap().violations.push(format!(
                        "{op} {header}: a 503 without Retry-After or problem+json: {answer:?}"
                    ));
                }
                worker = rng.lock().unwrap().below(2) as usize;
                backoff(rng, tries, answer.header("retry-after")).await;
                tries += 1;
            }
            409 => {
                if answer.header("retry-after").is_none() || !is_problem(&answer) {
                    log.lock().unwrap().violations.push(format!(
                        "{op} {header}: a 409 without Retry-After or problem+json: {answer:?}"
                    ));
                }
                conflicts += 1;
                if conflicts == LONG_WAIT {
                    long_wait.start();
                }
                if conflicts >= MAX_CONFLICTS {
                    return Sent::GaveUp(GiveUp::InFlight);
                }
                backoff(rng, conflicts, answer.header("retry-after")).await;
            }
            _ => return Sent::Answer(answer, conflicts),
        }
    }
}

fn storage_key_of(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    Some(value.get("key")?.as_str()?.to_owned())
}

fn gave_up(log: &Mutex<Log>, op: &'static str, intent: &Intent, why: GiveUp) {
    let mut log = log.lock().unwrap();
    let name = match why {
        GiveUp::InFlight => "in-flight",
        GiveUp::NoAnswer => "no-answer",
        GiveUp::RunEnded => "run-ended",
    };
    *log.gave_up_counts.entry((op, name)).or_default() += 1;
    if op == "new" || op == "duplicate" {
        log.gave_up.push((intent.clone(), why));
    }
}

/// A 201 for a key sent for the first time: kept as the answer every
/// replay must repeat.
fn created(ctx: &Ctx, log: &Mutex<Log>, op: &str, intent: &Intent, answer: &Answer) {
    let Some(storage_key) = storage_key_of(&answer.body) else {
        log.lock().unwrap().violations.push(format!(
            "{op} {}: a 201 without the effect's key: {}",
            intent.header,
            answer.text()
        ));
        return;
    };
    if answer.header("idempotent-replayed") == Some("true") {
        log.lock().unwrap().new_answered_by_replay += 1;
    }
    ctx.finished.lock().unwrap().push(Arc::new(Created {
        intent: intent.clone(),
        storage_key,
        body: answer.body.clone(),
        location: answer.header("location").map(str::to_owned),
    }));
}

/// A replay must be the first answer, byte for byte, marked replayed.
fn check_replay(log: &Mutex<Log>, op: &str, first: &Created, answer: &Answer) {
    let mut log = log.lock().unwrap();
    log.replays_checked += 1;
    if answer.status != 201
        || answer.body != first.body
        || answer.header("location").map(str::to_owned) != first.location
        || answer.header("idempotent-replayed") != Some("true")
    {
        log.violations.push(format!(
            "{op} {}: the replay differs from the first answer {:?} (location {:?}): {answer:?}",
            first.intent.header,
            String::from_utf8_lossy(&first.body),
            first.location
        ));
    }
}

async fn op_new(ctx: &Ctx, conns: &mut Conns, rng: &Mutex<Rng>, log: &Mutex<Log>, intent: Intent) {
    match send(ctx, conns, rng, log, "new", &intent.header, &intent.body()).await {
        Sent::Answer(answer, _) if answer.status == 201 => {
            created(ctx, log, "new", &intent, &answer)
        }
        Sent::Answer(answer, _) => log.lock().unwrap().violations.push(format!(
            "new {}: {} {}",
            intent.header,
            answer.status,
            answer.text()
        )),
        Sent::GaveUp(why) => gave_up(log, "new", &intent, why),
    }
}

async fn op_repeat(
    ctx: &Ctx,
    conns: &mut Conns,
    rng: &Mutex<Rng>,
    log: &Mutex<Log>,
    first: &Arc<Created>,
) {
    let body = first.intent.body_rewritten(&mut rng.lock().unwrap());
    match send(ctx, conns, rng, log, "repeat", &first.intent.header, &body).await {
        Sent::Answer(answer, _) => check_replay(log, "repeat", first, &answer),
        // A key answered 201 whose completion was lost (the store failed
        // after the handler answered): in flight until recovery finds its
        // effect. Checked at the end.
        Sent::GaveUp(GiveUp::InFlight) => {
            gave_up(log, "repeat", &first.intent, GiveUp::InFlight);
            log.lock().unwrap().completion_lost.push(Arc::clone(first));
        }
        Sent::GaveUp(why) => gave_up(log, "repeat", &first.intent, why),
    }
}

async fn op_mismatch(
    ctx: &Ctx,
    conns: &mut Conns,
    rng: &Mutex<Rng>,
    log: &Mutex<Log>,
    first: &Created,
) {
    let body = first.intent.mismatched();
    match send(
        ctx,
        conns,
        rng,
        log,
        "mismatch",
        &first.intent.header,
        &body,
    )
    .await
    {
        Sent::Answer(answer, _) if answer.status == 422 && is_problem(&answer) => {
            log.lock().unwrap().mismatches_422 += 1;
        }
        Sent::Answer(answer, _) => log.lock().unwrap().violations.push(format!(
            "mismatch {}: another payload under a finished key got {} {} (expected 422)",
            first.intent.header,
            answer.status,
            answer.text()
        )),
        Sent::GaveUp(GiveUp::InFlight) => log.lock().unwrap().violations.push(format!(
            "mismatch {}: a finished key answered 409 {MAX_CONFLICTS} times",
            first.intent.header
        )),
        Sent::GaveUp(why) => gave_up(log, "mismatch", &first.intent, why),
    }
}

/// Two requests with one key, the second sent while the first is at the
/// (slow) handler: one effect, and the same answer for both.
async fn op_duplicate(
    ctx: &Ctx,
    conns: &mut Conns,
    second_conns: &mut Conns,
    rng: &Mutex<Rng>,
    log: &Mutex<Log>,
    intent: Intent,
) {
    let pause = Duration::from_millis(10 + rng.lock().unwrap().below(40));
    let body = intent.body();
    let (a, b) = tokio::join!(
        send(ctx, conns, rng, log, "duplicate", &intent.header, &body),
        async {
            tokio::time::sleep(pause).await;
            send(
                ctx,
                second_conns,
                rng,
                log,
                "duplicate",
                &intent.header,
                &body,
            )
            .await
        }
    );
    let mut answers = Vec::new();
    let mut saw_409 = false;
    for sent in [a, b] {
        match sent {
            Sent::Answer(answer, conflicts) if answer.status == 201 => {
                saw_409 |= conflicts > 0;
                answers.push(answer);
            }
            Sent::Answer(answer, _) => log.lock().unwrap().violations.push(format!(
                "duplicate {}: {} {}",
                intent.header,
                answer.status,
                answer.text()
            )),
            Sent::GaveUp(why) => gave_up(log, "duplicate", &intent, why),
        }
    }
    {
        let mut log = log.lock().unwrap();
        log.duplicate_pairs += 1;
        if saw_409 {
            log.duplicates_with_409 += 1;
        }
        if let [first, second] = answers.as_slice() {
            let owners = answers
                .iter()
                .filter(|a| a.header("idempotent-replayed").is_none())
                .count();
            if first.body != second.body
                || first.header("location") != second.header("location")
                || owners > 1
            {
                log.violations.push(format!(
                    "duplicate {}: two requests got two answers (or ran twice): {first:?} / {second:?}",
                    intent.header
                ));
            }
        }
    }
    if let Some(first) = answers.first() {
        created(ctx, log, "duplicate", &intent, first);
    }
}

fn pick(ctx: &Ctx, rng: &Mutex<Rng>) -> Option<Arc<Created>> {
    let mut rng = rng.lock().unwrap();
    ctx.pick_finished(&mut rng)
}

async fn client(ctx: Arc<Ctx>, c: usize) -> Log {
    let rng = Mutex::new(Rng::new(ctx.seed, c as u64 + 1));
    let log = Mutex::new(Log::default());
    let mut conns = Conns::new();
    let mut second_conns = Conns::new();
    let mut n = 0u64;
    while !ctx.stop.load(Ordering::SeqCst) {
        n += 1;
        let (roll, amount, delay) = {
            let mut rng = rng.lock().unwrap();
            (rng.below(100), 1 + rng.below(100_000), rng.below(4))
        };
        let fresh = |suffix: &str, delay_ms: u64| Intent {
            header: format!("\"soak-{:016x}-{c}-{n}{suffix}\"", ctx.seed),
            amount,
            delay_ms,
        };
        let began = Instant::now();
        let op = match roll {
            0..45 => {
                op_new(&ctx, &mut conns, &rng, &log, fresh("", delay)).await;
                "new"
            }
            45..70 => match pick(&ctx, &rng) {
                Some(first) => {
                    op_repeat(&ctx, &mut conns, &rng, &log, &first).await;
                    "repeat"
                }
                None => {
                    op_new(&ctx, &mut conns, &rng, &log, fresh("", delay)).await;
                    "new"
                }
            },
            70..85 => {
                let slow = 150 + rng.lock().unwrap().below(250);
                op_duplicate(
                    &ctx,
                    &mut conns,
                    &mut second_conns,
                    &rng,
                    &log,
                    fresh("-d", slow),
                )
                .await;
                "duplicate"
            }
            _ => match pick(&ctx, &rng) {
                Some(first) => {
                    op_mismatch(&ctx, &mut conns, &rng, &log, &first).await;
                    "mismatch"
                }
                None => {
                    op_new(&ctx, &mut conns, &rng, &log, fresh("", delay)).await;
                    "new"
                }
            },
        };
        let took = u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX);
        log.lock()
            .unwrap()
            .op_latency_us
            .entry(op)
            .or_default()
            .push(took);
    }
    log.into_inner().unwrap()
}

// ---------------------------------------------------------------- the run

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)]) / 1000.0
}

fn ms(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[test]
fn soak_with_a_postgres_restart_and_a_killed_worker() {
    if !std::path::Path::new("/etc/postgresql").exists() {
        let why = "no PostgreSQL cluster to restart (/etc/postgresql)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: {why}"
        );
        skipped(&format!("axum soak: {why}"));
        return;
    }
    on_postgres("axum_soak", soak);
}

async fn soak(url: String) {
    let cfg = config();
    let total = Duration::from_secs(cfg.seconds);
    say(&format!(
        "soak: SOAK_SEED={} SOAK_SECONDS={} clients={} (set SOAK_SEED to replay this mix)",
        cfg.seed, cfg.seconds, cfg.clients
    ));

    // The schema and the effects table, before the workers start.
    {
        let setup = PgStore::connect(&url, 1).await.unwrap();
        setup
            .pool()
            .get()
            .await
            .unwrap()
            .batch_execute(EFFECTS_TABLE_SQL)
            .await
            .unwrap();
    }
    let spawn = |name: &'static str, port: u16| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || spawn_worker(name, &url, port))
    };
    let mut a = spawn("a", 0).await.unwrap();
    let mut b = spawn("b", 0).await.unwrap();
    let ctx = Arc::new(Ctx {
        seed: cfg.seed,
        addrs: Mutex::new([a.addr, b.addr]),
        started: Instant::now(),
        stop: AtomicBool::new(false),
        stopped_at_ms: AtomicU64::new(0),
        finished: Mutex::new(Vec::new()),
        long_waits: AtomicU64::new(0),
    });
    // Samples, once a second, how many requests wait on a key left in flight.
    let sampler = {
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut ticks = tokio::time::interval(Duration::from_secs(1));
            while !ctx.stop.load(Ordering::SeqCst) {
                ticks.tick().await;
                samples.push(ctx.long_waits.load(Ordering::SeqCst));
            }
            samples
        })
    };
    let clients: Vec<_> = (0..cfg.clients)
        .map(|c| tokio::spawn(client(Arc::clone(&ctx), c)))
        .collect();

    // A third of the way: PostgreSQL restarts.
    tokio::time::sleep_until((ctx.started + total / 3).into()).await;
    let restart_began = ctx.started.elapsed();
    let restarted = tokio::task::spawn_blocking(restart_postgres).await.unwrap();
    let restart_ended = ctx.started.elapsed();
    if let Err(why) = &restarted {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: {why}"
        );
        skipped(&format!(
            "axum soak: {why}; the run goes on without the PostgreSQL restart"
        ));
    }

    // Two thirds of the way: worker b is killed, and started again a second later.
    tokio::time::sleep_until((ctx.started + total * 2 / 3).into()).await;
    let killed_at = ctx.started.elapsed();
    let port_b = b.addr.port();
    tokio::task::spawn_blocking(move || {
        b.kill();
        b
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let respawn_began = ctx.started.elapsed();
    b = spawn("b", port_b).await.unwrap();
    let b_back_at = ctx.started.elapsed();
    assert_eq!(b.addr.port(), port_b, "worker b came back on another port");

    tokio::time::sleep_until((ctx.started + total).into()).await;
    ctx.stopped_at_ms
        .store(ctx.started.elapsed().as_millis() as u64, Ordering::SeqCst);
    ctx.stop.store(true, Ordering::SeqCst);
    let mut log = Log::default();
    for c in clients {
        log.merge(c.await.unwrap());
    }
    let waiting = sampler.await.unwrap();
    let run_time = ctx.started.elapsed();

    // The restarted worker serves: a fresh key straight to it.
    let probe_key = format!("\"soak-{:016x}-probe\"", cfg.seed);
    let probe_body = r#"{"amount":1,"delay_ms":0,"intent":"probe"}"#;
    let probe = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = support::post_once(
                b.addr,
                PATH,
                &[
                    ("Idempotency-Key", probe_key.as_str()),
                    ("Content-Type", "application/json"),
                ],
                probe_body,
            )
            .await;
            match answer {
                Ok(answer) if answer.status != 503 || Instant::now() > deadline => {
                    break Some(answer)
                }
                _ if Instant::now() > deadline => break None,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    };
    let mut worker_stats = Vec::new();
    for w in [&a, &b] {
        worker_stats.push(get_stats(w.addr).await.unwrap_or_else(|| "?".to_owned()));
    }

    // The workers stop; recovery settles what they left in flight.
    let stop_workers = tokio::task::spawn_blocking(move || {
        a.kill();
        b.kill();
        (a.name.clone(), b.name.clone())
    });
    let worker_names = stop_workers.await.unwrap();
    let store = Arc::new(PgStore::connect(&url, 4).await.unwrap());
    let pool = store.pool().clone();
    let in_flight_before = store
        .list(Some(Status::InFlight), 1_000_000)
        .await
        .unwrap()
        .len();
    let reexecute: Arc<Reexecute> = {
        let pool = pool.clone();
        Arc::new(move |key: String| {
            let pool = pool.clone();
            Box::pin(async move {
                match run_effect(&pool, &key, "recovery").await.0 {
                    Effect::Ran(row) => EffectResult::Answered(row.stored()),
                    Effect::NotRun(_) => EffectResult::Refused(None),
                    Effect::Unknown(_) => EffectResult::Failed,
                }
            })
        })
    };
    let recoverer = Recoverer::new(
        Arc::clone(&store) as Arc<dyn AsyncStore>,
        Arc::new(EffectsGateway(pool.clone())),
    )
    .stale_after(0)
    .reexecute(reexecute);
    let reports = recoverer
        .recover_due(unix_now() + 1, 1_000_000)
        .await
        .unwrap();
    let mut recovery: BTreeMap<String, u64> = BTreeMap::new();
    for report in &reports {
        let name = match (&report.outcome, report.finished) {
            (Recovered::Applied(RecoveryAction::RecordDone(_)), _) => "found: recorded done",
            (Recovered::Applied(RecoveryAction::ReExecute), Some(Finished::Stored)) => {
                "absent: re-executed, stored"
            }
            (Recovered::Applied(RecoveryAction::ReExecute), _) => "absent: re-execution not stored",
            (Recovered::Applied(RecoveryAction::CheckLater { .. }), _) => "unknown: check later",
            (Recovered::Applied(RecoveryAction::Reconcile { .. }), _) => "needs reconciliation",
            (other, _) => other.as_str(),
        };
        *recovery.entry(name.to_owned()).or_default() += 1;
    }

    // A finished key may answer 409 only while its completion is lost:
    // recovery then found its effect and recorded the answer.
    let found_by_recovery: HashSet<&str> = reports
        .iter()
        .filter(|r| matches!(r.outcome, Recovered::Applied(RecoveryAction::RecordDone(_))))
        .map(|r| r.key.as_str())
        .collect();
    let unexplained_409: Vec<String> = log
        .completion_lost
        .iter()
        .filter(|c| !found_by_recovery.contains(c.storage_key.as_str()))
        .map(|c| {
            format!(
                "{} ({}): answered 201, then 409 {MAX_CONFLICTS} times, and recovery did not find it in flight",
                c.intent.header, c.storage_key
            )
        })
        .collect();

    // Replays after recovery, through a fresh worker in this process: every
    // key a client gave up on, and a sample of the finished ones.
    let (router, _) = soak_worker::app(&url, "verify", 8, secret()).await.unwrap();
    let verify = support::serve(router).await;
    let finished: Vec<Arc<Created>> = ctx.finished.lock().unwrap().clone();
    let mut sample_rng = Rng::new(cfg.seed, 0);
    let mut replays: Vec<(Intent, Option<Arc<Created>>)> = Vec::new();
    let mut seen = HashSet::new();
    for first in &log.completion_lost {
        if seen.insert(first.intent.header.clone()) {
            replays.push((first.intent.clone(), Some(Arc::clone(first))));
        }
    }
    for (intent, _) in &log.gave_up {
        if seen.insert(intent.header.clone()) {
            replays.push((intent.clone(), None));
        }
    }
    for _ in 0..REPLAY_SAMPLE.min(finished.len()) {
        let first = &finished[sample_rng.below(finished.len() as u64) as usize];
        if seen.insert(first.intent.header.clone()) {
            replays.push((first.intent.clone(), Some(Arc::clone(first))));
        }
    }
    // Keys that had no 201 before: the answer they get now (settled by
    // recovery, or run now if nothing was left of them).
    let settled_after: Arc<Mutex<Vec<(Intent, Answer)>>> = Arc::default();
    let replay_violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let replay_count = replays.len();
    let chunks: Vec<Vec<_>> = replays
        .chunks(replays.len().div_ceil(16).max(1))
        .map(<[_]>::to_vec)
        .collect();
    let mut tasks = Vec::new();
    for chunk in chunks {
        let (settled_after, replay_violations) =
            (Arc::clone(&settled_after), Arc::clone(&replay_violations));
        tasks.push(tokio::spawn(async move {
            let mut client = Client::connect(verify).await.unwrap();
            for (intent, first) in chunk {
                let headers = [
                    ("Idempotency-Key", intent.header.as_str()),
                    ("Content-Type", "application/json"),
                ];
                let answer = client.post(PATH, &headers, &intent.body()).await.unwrap();
                match first {
                    Some(first) => {
                        let log = Mutex::new(Log::default());
                        check_replay(&log, "replay after recovery", &first, &answer);
                        replay_violations
                            .lock()
                            .unwrap()
                            .extend(log.into_inner().unwrap().violations);
                    }
                    None if answer.status == 201 => {
                        settled_after.lock().unwrap().push((intent, answer))
                    }
                    None => replay_violations.lock().unwrap().push(format!(
                        "after recovery, {} (left by its client) got {} {}",
                        intent.header,
                        answer.status,
                        answer.text()
                    )),
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    log.violations
        .extend(replay_violations.lock().unwrap().drain(..));

    // The invariants, from the database.
    let db = pool.get().await.unwrap();
    let counts = |sql: &'static str| {
        let db = &db;
        async move {
            let rows = db.query(sql, &[]).await.unwrap();
            rows.iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect::<Vec<_>>()
        }
    };
    let effects: HashMap<String, i64> =
        counts("SELECT storage_key, count(*) FROM soak_effects GROUP BY storage_key")
            .await
            .into_iter()
            .collect();
    let effects_by: BTreeMap<String, i64> =
        counts("SELECT worker, count(*) FROM soak_effects GROUP BY worker")
            .await
            .into_iter()
            .collect();
    let records: HashMap<String, intentkey::claim::Record> = store
        .list(None, 10_000_000)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.key.clone(), r))
        .collect();
    let mut by_status: BTreeMap<&'static str, u64> = BTreeMap::new();
    for record in records.values() {
        *by_status.entry(record.status.as_str()).or_default() += 1;
    }

    let mut twice = Vec::new();
    let mut effect_without_record = Vec::new();
    for (key, &n) in &effects {
        let record = records.get(key);
        if record.is_none() {
            effect_without_record.push(key.clone());
        }
        let reconciling = record.is_some_and(|r| r.status == Status::NeedsReconciliation);
        if n != 1 && !reconciling {
            twice.push(format!("{key}: {n} effects"));
        }
    }
    let mut lost = Vec::new();
    let mut answered: Vec<(String, Vec<u8>)> = finished
        .iter()
        .map(|c| (c.storage_key.clone(), c.body.clone()))
        .collect();
    for (intent, answer) in settled_after.lock().unwrap().iter() {
        match storage_key_of(&answer.body) {
            Some(key) => answered.push((key, answer.body.clone())),
            None => lost.push(format!("{}: a 201 without a key", intent.header)),
        }
    }
    if let Some(answer) = &probe {
        if let Some(key) = storage_key_of(&answer.body) {
            answered.push((key, answer.body.clone()));
        }
    }
    for (key, body) in &answered {
        match records.get(key) {
            None => lost.push(format!("{key}: answered 201, no record")),
            Some(r) if r.status != Status::Done => {
                lost.push(format!("{key}: answered 201, record {}", r.status.as_str()))
            }
            Some(r) if r.response.as_ref().map(|s| &s.body) != Some(body) => lost.push(format!(
                "{key}: the stored answer {:?} is not the one sent {:?}",
                r.response.as_ref().and_then(|s| s.body_text()),
                String::from_utf8_lossy(body)
            )),
            Some(_) => {}
        }
    }
    let mut done_without_effect = Vec::new();
    let mut left_in_flight = Vec::new();
    for record in records.values() {
        match record.status {
            Status::Done => {
                let ok = record.response.as_ref().is_some_and(|r| r.status == 201)
                    && effects.get(&record.key) == Some(&1);
                if !ok {
                    done_without_effect.push(format!(
                        "{}: done ({:?}) with {} effects",
                        record.key,
                        record.response.as_ref().map(|r| r.status),
                        effects.get(&record.key).copied().unwrap_or(0)
                    ));
                }
            }
            Status::InFlight => left_in_flight.push(record.key.clone()),
            Status::NeedsReconciliation => {}
        }
    }
    let fivexx: Vec<String> = log
        .statuses
        .iter()
        .filter(|((_, status), _)| *status >= 500 && *status != 503)
        .map(|((op, status), n)| format!("{op}: {n} x {status}"))
        .collect();

    // The summary.
    let mut latency = std::mem::take(&mut log.latency_us);
    latency.sort_unstable();
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    for ((_, status), n) in &log.statuses {
        *statuses.entry(*status).or_default() += n;
    }
    let run_secs = total.as_secs_f64();
    let in_run = log.timeline.iter().take(cfg.seconds as usize).fold(
        Second::default(),
        |mut sum: Second, s| {
            sum.requests += s.requests;
            sum.created += s.created;
            sum
        },
    );
    let mut lines = vec![
        format!(
            "soak: seed {} ({:#x}), {} clients, {} s run ({} until the last client stopped), 2 workers x {CONNECTIONS} connections",
            cfg.seed,
            cfg.seed,
            cfg.clients,
            cfg.seconds,
            ms(run_time)
        ),
        format!(
            "soak: {} requests, {} connection errors; answers {:?}",
            log.requests, log.conn_errors, statuses
        ),
        format!(
            "soak: throughput over the {} s run: {:.0} req/s, {:.0} answers 201/s ({} requests after it, while the operations under way ended)",
            cfg.seconds,
            in_run.requests as f64 / run_secs,
            in_run.created as f64 / run_secs,
            log.requests - u64::from(in_run.requests)
        ),
        format!(
            "soak: request latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
            percentile(&latency, 0.5),
            percentile(&latency, 0.9),
            percentile(&latency, 0.99),
            percentile(&latency, 0.999),
            latency.last().map_or(0.0, |&v| f64::from(v) / 1000.0)
        ),
    ];
    for (op, v) in &mut log.op_latency_us {
        v.sort_unstable();
        let mut requests = log.request_latency_us.remove(op).unwrap_or_default();
        requests.sort_unstable();
        let answers: Vec<String> = log
            .statuses
            .iter()
            .filter(|((o, _), _)| o == op)
            .map(|((_, s), n)| format!("{s}: {n}"))
            .collect();
        lines.push(format!(
            "soak:   {op:<9} {:>6} ops ({:.0}/s), p50 {:.2} ms, p99 {:.2} ms (retries included); \
             {} requests, p50 {:.2} ms, p99 {:.2} ms: {}",
            v.len(),
            v.len() as f64 / run_secs,
            percentile(v, 0.5),
            percentile(v, 0.99),
            requests.len(),
            percentile(&requests, 0.5),
            percentile(&requests, 0.99),
            answers.join(", ")
        ));
    }
    lines.push(format!(
        "soak: {} keys answered 201 ({} of them first by a replay, after a lost answer); {} replays compared byte for byte; \
         {} duplicate pairs ({} saw 409 then the replay); {} payload mismatches answered 422",
        finished.len(),
        log.new_answered_by_replay,
        log.replays_checked,
        log.duplicate_pairs,
        log.duplicates_with_409,
        log.mismatches_422
    ));
    lines.push(format!(
        "soak: left by their client (to recovery): {:?}; finished keys a repeat found in flight (their completion was lost): {}",
        log.gave_up_counts,
        log.completion_lost.len()
    ));
    lines.push(format!(
        "soak: faults: PostgreSQL restart at {} (took {}{}); worker b killed at {}, started again at {}, listening at {}",
        ms(restart_began),
        ms(restart_ended - restart_began),
        if restarted.is_ok() { "" } else { ", FAILED: not restarted" },
        ms(killed_at),
        ms(respawn_began),
        ms(b_back_at)
    ));
    lines.push(format!(
        "soak: workers {:?}: {:?}",
        worker_names, worker_stats
    ));
    lines.push(format!(
        "soak: recovery: {in_flight_before} records in flight after the run; {} recovered: {recovery:?}",
        reports.len()
    ));
    lines.push(format!(
        "soak: after recovery: records {by_status:?}; effects {} on {} keys, by {effects_by:?}; {replay_count} replays after recovery",
        effects.values().sum::<i64>(),
        effects.len()
    ));
    lines.push(format!(
        "soak: per second: requests, 201, 503, 409, connection errors, latency p50/p99 (ms), \
             requests waiting on a key left in flight ({LONG_WAIT} or more 409s in a row)"
    ));
    for (i, s) in log.timeline.iter_mut().enumerate() {
        s.latency_us.sort_unstable();
        lines.push(format!(
            "soak:   {i:>3} s {:>5} {:>5} {:>4} {:>4} {:>4}  {:>7.2} {:>7.2}  {}",
            s.requests,
            s.created,
            s.unavailable,
            s.conflicts,
            s.conn_errors,
            percentile(&s.latency_us, 0.5),
            percentile(&s.latency_us, 0.99),
            waiting
                .get(i)
                .map_or_else(|| "-".to_owned(), u64::to_string)
        ));
    }
    let invariants = [
        (
            "each effect ran exactly once (or needs_reconciliation)",
            twice.len(),
        ),
        ("every effect row has a record", effect_without_record.len()),
        ("every 201 has its done record, same answer", lost.len()),
        (
            "every done record has exactly one effect",
            done_without_effect.len(),
        ),
        (
            "nothing left in flight after recovery",
            left_in_flight.len(),
        ),
        (
            "a finished key answers 409 only while its completion is lost",
            unexplained_409.len(),
        ),
        ("no 5xx but 503", fivexx.len()),
        (
            "client checks (replays, 409/503 shape, 422, duplicates)",
            log.violations.len(),
        ),
    ];
    for (name, failures) in &invariants {
        lines.push(format!(
            "soak: invariant {name}: {}",
            if *failures == 0 {
                "ok".to_owned()
            } else {
                format!("FAILED ({failures})")
            }
        ));
    }
    for line in &lines {
        say(line);
    }

    let few = |v: &[String]| v.iter().take(10).cloned().collect::<Vec<_>>();
    for (what, keys) in [
        ("effects that ran more than once", &twice),
        ("effects whose record is lost", &effect_without_record),
        ("answers whose record is lost or differs", &lost),
        (
            "done records without exactly one effect",
            &done_without_effect,
        ),
        ("records recovery did not settle", &left_in_flight),
        ("finished keys that answered 409", &unexplained_409),
    ] {
        assert!(keys.is_empty(), "{what}: {:?}", few(keys));
    }
    assert!(fivexx.is_empty(), "5xx other than 503: {fivexx:?}");
    assert!(
        log.violations.is_empty(),
        "{} client checks failed: {:?}",
        log.violations.len(),
        few(&log.violations)
    );
    let probe = probe.expect("the restarted worker b never answered the probe");
    assert_eq!(
        probe.status,
        201,
        "the restarted worker b answered the probe {} {}",
        probe.status,
        probe.text()
    );
    assert!(!finished.is_empty(), "no key was answered 201");
    if restarted.is_ok() {
        assert!(
            log.timeline
                .iter()
                .skip(restart_ended.as_secs() as usize + 1)
                .any(|s| s.created > 0),
            "no 201 after the PostgreSQL restart"
        );
    }
}

async fn get_stats(addr: SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut text))
        .await
        .ok()?
        .ok()?;
    text.split("\r\n\r\n").nth(1).map(str::to_owned)
}
