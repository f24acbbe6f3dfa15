//! Redis Cluster failover under load: a cluster of its own (3 masters, 3
//! replicas on 127.0.0.1:7100-7105, made by `scripts/redis-cluster.sh`),
//! claims from 8 threads, and a master SIGKILLed mid-load; its replica takes
//! over. Claims acknowledged with `wait=1` (each write waited for `WAIT 1`)
//! all survive; without it, the claims acknowledged but lost are counted and
//! their window before the kill is printed (`docs/stores.md`, "Redis
//! Cluster"). A replica that cannot acknowledge makes a `wait=1` write fail
//! as retryable, where a write without it succeeds.
//!
//! Without `redis-server` the test fails under `CI=true` and prints
//! `SKIPPED:` otherwise.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use intentkey::claim::redis::Layout;
use intentkey::claim::{Attempt, Record};
use intentkey_store::open;

/// The failover test's cluster; the other test's is on `BASE + 10`
/// (the two run at once, each on a cluster of its own).
const BASE: u16 = 7100;
const THREADS: usize = 8;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster.sh")
}

fn cluster(action: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(script())
        .arg(action)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// A cluster of one test's own (ports `base`..`base + 5`), stopped when dropped.
struct Cluster(u16);

impl Cluster {
    fn start(test: &str, base: u16) -> Option<Cluster> {
        match cluster("start", &[&base.to_string()]) {
            Ok(_) => Some(Cluster(base)),
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "{test}: CI=true and no Redis Cluster could be started: {e}"
                );
                common::skipped(&format!(
                    "{test}: no Redis Cluster could be started ({e}); it needs redis-server (it fails under CI=true)"
                ));
                None
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = cluster("stop", &[&self.0.to_string()]);
    }
}

fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap()
}

/// The master that serves `key` and its replica: (master port, replica port).
fn master_and_replica(base: u16, key: &str) -> (u16, u16) {
    let mut c = node(base);
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut c)
        .unwrap();
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut c).unwrap();
    let port = |line: &str| -> u16 {
        let addr = line.split(' ').nth(1).unwrap();
        addr.split(['@', ':']).nth(1).unwrap().parse().unwrap()
    };
    let master = nodes
        .lines()
        .find(|l| {
            l.split(' ').nth(2).unwrap().contains("master")
                && l.split(' ').skip(8).any(|range| {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    (lo.parse().unwrap_or(u16::MAX)..=hi.parse().unwrap_or(0)).contains(&slot)
                })
        })
        .unwrap();
    let id = master.split(' ').next().unwrap();
    let replica = nodes
        .lines()
        .find(|l| l.split(' ').nth(3) == Some(id))
        .unwrap();
    (port(master), port(replica))
}

fn pid(port: u16) -> i32 {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut node(port))
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn signal(pid: i32, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

/// Whether a node other than `dead` serves `slot`'s keys as master again.
fn promoted(dead: u16, key: &str) -> bool {
    (BASE..BASE + 6).filter(|&p| p != dead).any(|p| {
        let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{p}"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
        else {
            return false;
        };
        let role: Result<Vec<redis::Value>, _> = redis::cmd("ROLE").query(&mut c);
        let is_master =
            matches!(role.as_deref(), Ok([redis::Value::BulkString(r), ..]) if r == b"master");
        let served: Result<String, _> = redis::cmd("CLUSTER").arg("NODES").query(&mut c);
        let slot: Result<u16, _> = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut c);
        is_master
            && served.is_ok_and(|n| {
                n.lines().any(|l| {
                    l.contains("myself")
                        && slot.as_ref().is_ok_and(|&s| {
                            l.split(' ').skip(8).any(|range| {
                                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                                (lo.parse().unwrap_or(u16::MAX)..=hi.parse().unwrap_or(0))
                                    .contains(&s)
                            })
                        })
                })
            })
    })
}

fn record(key: &str) -> Record {
    let attempt = Attempt {
        key: key.into(),
        fingerprint: "fp".into(),
        tenant_id: "t".into(),
        action_type: "pix.send".into(),
        prior: None,
    };
    Record::in_flight(&attempt, &"ab".repeat(16), 1_700_000_000)
}

/// What one failover run measured (printed through `Debug`).
#[derive(Debug)]
#[allow(dead_code)] // read through Debug
struct Run {
    acknowledged: usize,
    on_victim: usize,
    lost: usize,
    /// The longest time between a lost claim's acknowledgement and the kill.
    window: Duration,
    refused_during_failover: usize,
    failover: Duration,
}

/// Claims under load from 8 threads for 1.5 s, SIGKILLs the master of
/// `probe`'s slot (after stopping its replica for `stall`, a replica that
/// lags behind), waits for the replica to take over, claims on for a while,
/// and checks every acknowledged claim.
fn failover(url: &str, prefix: &str, stall: Duration) -> Run {
    let store = open(url).unwrap();
    let layout = Layout::cluster(prefix).unwrap();
    let probe = layout.record_key("probe");
    let (victim, replica) = master_and_replica(BASE, &probe);
    let (victim_pid, replica_pid) = (pid(victim), pid(replica));
    // The buckets the victim serves (a bucket is one slot).
    let victim_buckets: Vec<u16> = (0..intentkey::claim::redis::CLUSTER_BUCKETS)
        .filter(|&b| {
            let key = (0..)
                .map(|i| format!("b{i}"))
                .find(|k| layout.bucket(k) == b)
                .unwrap();
            master_and_replica(BASE, &layout.record_key(&key)).0 == victim
        })
        .collect();
    let on_victim = |key: &str| victim_buckets.contains(&layout.bucket(key));
    let stop = AtomicBool::new(false);
    let acked: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());
    let refused = std::sync::atomic::AtomicUsize::new(0);
    let killed_at = Mutex::new(None::<Instant>);
    let mut failover_took = Duration::ZERO;
    /// Stops the claiming threads when dropped, so that a failed
    /// assertion in the scope's own thread ends the scope instead of
    /// waiting for them forever.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for t in 0..THREADS {
            let (store, stop, acked, refused) = (store.as_ref(), &stop, &acked, &refused);
            s.spawn(move || {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("fo-{t}-{i}");
                    i += 1;
                    match store.insert(&record(&key)) {
                        Ok(true) => acked.lock().unwrap().push((key, Instant::now())),
                        Ok(false) => panic!("{key} was new"),
                        Err(e) => {
                            assert!(e.is_retryable(), "{key}: {e}");
                            refused.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1500));
        if !stall.is_zero() {
            signal(replica_pid, "-STOP");
            std::thread::sleep(stall);
        }
        let at = Instant::now();
        signal(victim_pid, "-KILL");
        if !stall.is_zero() {
            signal(replica_pid, "-CONT");
        }
        *killed_at.lock().unwrap() = Some(at);
        let deadline = at + Duration::from_secs(60);
        while !promoted(victim, &probe) {
            assert!(Instant::now() < deadline, "no replica took over in 60 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        failover_took = at.elapsed();
        // Claims go on against the new master.
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
    });
    let killed_at = killed_at.lock().unwrap().unwrap();
    let acked = acked.into_inner().unwrap();
    let after = acked
        .iter()
        .filter(|(_, t)| *t > killed_at + failover_took)
        .count();
    assert!(after > 0, "claims succeed again after the failover");
    let mut lost = 0;
    let mut window = Duration::ZERO;
    let mut victim_count = 0;
    for (key, t) in &acked {
        if on_victim(key) {
            victim_count += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let got = loop {
            match store.get(key) {
                Ok(v) => break v,
                Err(e) if e.is_retryable() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("{key}: {e}"),
            }
        };
        if got.is_none() {
            lost += 1;
            window = window.max(killed_at.saturating_duration_since(*t));
        }
    }
    Run {
        acknowledged: acked.len(),
        on_victim: victim_count,
        lost,
        window,
        refused_during_failover: refused.into_inner(),
        failover: failover_took,
    }
}

#[test]
fn failover_under_load_keeps_every_claim_acknowledged_with_wait() {
    let test = "redis_cluster_failover";
    let mut runs = Vec::new();
    let stall_ms: u64 = std::env::var("IK_FAILOVER_STALL_MS").map_or(6000, |v| v.parse().unwrap());
    for stall in [Duration::ZERO, Duration::from_millis(stall_ms)] {
        for wait in ["", "&wait=1&wait_timeout_ms=500"] {
            let Some(c) = Cluster::start(test, BASE) else {
                return;
            };
            let url = format!(
                "redis+cluster://127.0.0.1:{BASE},127.0.0.1:{}?prefix=fo{wait}",
                BASE + 1
            );
            let run = failover(&url, "fo", stall);
            drop(c);
            eprintln!(
                "redis cluster failover, replica stalled {stall:?} before the kill, {}: {run:?}",
                if wait.is_empty() { "no wait" } else { "wait=1" }
            );
            runs.push((stall, wait, run));
        }
    }
    for (stall, wait, run) in &runs {
        assert!(run.acknowledged > 1000, "{stall:?} {wait}: {run:?}");
        assert!(run.on_victim > 0, "the victim served claims: {run:?}");
        if !wait.is_empty() {
            assert_eq!(
                run.lost, 0,
                "a claim acknowledged after WAIT 1 survives failover ({stall:?}): {run:?}"
            );
        }
    }
}

/// A replica that cannot acknowledge (stopped): a write with `wait=1`
/// fails as retryable; the same write without it succeeds.
#[test]
fn a_write_the_replica_did_not_acknowledge_is_not_acknowledged() {
    let base = BASE + 10;
    let Some(_c) = Cluster::start("redis_cluster_wait_refused", base) else {
        return;
    };
    let prefix = "wr";
    let layout = Layout::cluster(prefix).unwrap();
    let url = format!("redis+cluster://127.0.0.1:{base}?prefix={prefix}");
    let waiting = open(&format!("{url}&wait=1&wait_timeout_ms=300")).unwrap();
    let plain = open(&url).unwrap();
    assert!(waiting.insert(&record("acked")).unwrap());
    let (_, replica) = master_and_replica(base, &layout.record_key("stalled"));
    let replica_pid = pid(replica);
    signal(replica_pid, "-STOP");
    let started = Instant::now();
    let refused = waiting.insert(&record("stalled"));
    let took = started.elapsed();
    let without = plain.insert(&record("stalled-plain"));
    signal(replica_pid, "-CONT");
    let e = refused.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert!(e.message().contains("0 of the 1 replica"), "{e}");
    assert!(
        took >= Duration::from_millis(290),
        "WAIT waited its timeout: {took:?}"
    );
    assert!(without.unwrap());
    // The refused claim is on the master: a retry finds it in flight (the
    // flow then treats it as someone else's, never runs the effect twice).
    assert!(!waiting.insert(&record("stalled")).unwrap());
}
