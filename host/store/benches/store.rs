//! Claim + complete throughput and latency on SQLite and PostgreSQL, against
//! the floor: a bare `INSERT … ON CONFLICT DO NOTHING` on the same connection.
//!
//! `cargo bench -p intentkey-store --bench store` (PostgreSQL at 127.0.0.1:5432,
//! database `test`; its part is skipped with a message when unreachable).
//! Prints p50/p99 per operation and the ratio to the floor.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::time::Instant;

use intentkey::claim::Response;
use intentkey_store::guard::{Attempt, Guard};
use intentkey_store::open;

const N: usize = 3000;

fn percentiles(mut ns: Vec<u128>) -> (f64, f64, f64) {
    ns.sort_unstable();
    let total: u128 = ns.iter().sum();
    let p = |q: f64| ns[((ns.len() as f64 - 1.0) * q) as usize] as f64 / 1000.0;
    (p(0.5), p(0.99), N as f64 / (total as f64 / 1e9))
}

fn measure(mut op: impl FnMut(usize)) -> (f64, f64, f64) {
    for i in 0..200 {
        op(1_000_000 + i); // warm up
    }
    let mut times = Vec::with_capacity(N);
    for i in 0..N {
        let start = Instant::now();
        op(i);
        times.push(start.elapsed().as_nanos());
    }
    percentiles(times)
}

fn report(what: &str, floor: (f64, f64, f64), ours: (f64, f64, f64)) {
    println!(
        "| {what} | {:.0} µs / {:.0} µs ({:.0}/s) | {:.0} µs / {:.0} µs ({:.0}/s) | {:.2}× |",
        floor.0,
        floor.1,
        floor.2,
        ours.0,
        ours.1,
        ours.2,
        ours.0 / floor.0
    );
}

fn run(what: &str, url: &str, bare: &mut dyn FnMut(usize)) {
    let store = open(url).unwrap();
    let guard = Guard::new(store.as_ref());
    let tag = std::process::id();
    let floor = measure(bare);
    let ours = measure(|i| {
        let attempt = Attempt {
            key: format!("bench-{tag}-{i}"),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
        };
        guard
            .run(&attempt, 1_700_000_000, |_| Response::json(201, "{}"))
            .unwrap();
    });
    report(what, floor, ours);
}

fn main() {
    println!("| store | bare INSERT … ON CONFLICT DO NOTHING: p50 / p99 (throughput) | claim + complete: p50 / p99 (throughput) | p50 ratio |");
    println!("|---|---|---|---|");
    // SQLite: the same file and settings (WAL, synchronous = FULL).
    let path = std::env::temp_dir().join(format!("ik-bench-{}.sqlite", std::process::id()));
    let url = format!("sqlite:{}", path.display());
    open(&url).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.execute_batch("CREATE TABLE floor (key TEXT PRIMARY KEY, v TEXT)")
        .unwrap();
    let tag = std::process::id();
    run("SQLite (WAL, synchronous=FULL)", &url, &mut |i| {
        conn.execute(
            "INSERT INTO floor (key, v) VALUES (?1, 'x') ON CONFLICT (key) DO NOTHING",
            [format!("f-{tag}-{i}")],
        )
        .unwrap();
    });
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    // PostgreSQL: a schema of its own.
    let base = "postgres://postgres@127.0.0.1:5432/test";
    match postgres::Client::connect(base, postgres::NoTls) {
        Ok(mut client) => {
            let schema = format!("ik_bench_{tag}");
            client.batch_execute(&format!("CREATE SCHEMA {schema}; SET search_path = {schema}; CREATE TABLE floor (key TEXT PRIMARY KEY, v TEXT)")).unwrap();
            let url = format!("{base}?options=-csearch_path%3D{schema}");
            let stmt = client
                .prepare("INSERT INTO floor (key, v) VALUES ($1, 'x') ON CONFLICT (key) DO NOTHING")
                .unwrap();
            run("PostgreSQL 15 (loopback)", &url, &mut |i| {
                client.execute(&stmt, &[&format!("f-{tag}-{i}")]).unwrap();
            });
            client
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .unwrap();
        }
        Err(e) => println!("PostgreSQL skipped: not reachable at {base} ({e})"),
    }
}
