//! The operations commands, each printing one JSON object, on a SQLite file
//! (and on PostgreSQL when it is reachable), plus `intentkey demo`.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

use serde_json::Value;

fn intentkey(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "one JSON object: {text}");
    serde_json::from_str(&text).unwrap()
}

fn claim(store: &str, key: &str, fp: &str) -> Value {
    intentkey(&[
        "claim",
        "--store",
        store,
        "--tenant",
        "t1",
        "--action",
        "pix.send",
        "--key",
        key,
        "--fingerprint",
        fp,
    ])
}

fn complete(store: &str, key: &str, token: &str, status: &str, body: &str) -> Value {
    intentkey(&[
        "complete",
        "--store",
        store,
        "--key",
        key,
        "--owner-token",
        token,
        "--status",
        status,
        "--body",
        body,
    ])
}

fn recover(store: &str, key: &str, extra: &[&str]) -> Value {
    let mut args = vec!["recover", "--store", store, "--key", key];
    args.extend_from_slice(extra);
    intentkey(&args)
}

fn operations(store: &str) {
    let owned = claim(store, "k1", "fp");
    assert_eq!(owned["outcome"], "owned");
    let token = owned["owner_token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 32);
    assert_eq!(claim(store, "k1", "fp")["outcome"], "in-flight");
    assert_eq!(claim(store, "k1", "other")["outcome"], "payload-conflict");
    // Only the owner completes.
    let intruder = complete(store, "k1", &"0".repeat(32), "200", "{}");
    assert_eq!(intruder["finished"], "superseded");
    let done = complete(
        store,
        "k1",
        &token,
        "402",
        r#"{"error":"insufficient_funds"}"#,
    );
    assert_eq!(done["finished"], "stored");
    let replay = claim(store, "k1", "fp");
    assert_eq!(replay["outcome"], "done");
    assert_eq!(replay["response"]["status"], 402);
    assert_eq!(
        complete(store, "k1", &token, "200", "{}")["finished"],
        "superseded"
    );
    let inspect = intentkey(&["inspect", "--store", store, "--key", "k1"]);
    assert_eq!(inspect["record"]["status"], "done");

    // A release status lets the retry run.
    let owned = claim(store, "k3", "fp");
    let limited = complete(
        store,
        "k3",
        owned["owner_token"].as_str().unwrap(),
        "429",
        "{}",
    );
    assert_eq!(limited["finished"], "released");
    assert_eq!(claim(store, "k3", "fp")["outcome"], "owned");

    // Recovery: a fresh claim is not due; a stale one backs off on unknown and
    // settles on found.
    assert_eq!(claim(store, "k2", "fp")["outcome"], "owned");
    let fresh = recover(store, "k2", &["--lookup", "absent", "--read-your-writes"]);
    assert_eq!(fresh["outcome"], "not-due");
    let stale = ["--stale-after", "0"];
    let later = recover(
        store,
        "k2",
        &[&stale[..], &["--lookup", "unknown"]].concat(),
    );
    assert_eq!(
        (
            later["outcome"].as_str(),
            later["action"].as_str(),
            later["lookups"].as_u64()
        ),
        (Some("applied"), Some("check-later"), Some(1))
    );
    let too_soon = recover(
        store,
        "k2",
        &[&stale[..], &["--lookup", "unknown"]].concat(),
    );
    assert_eq!(
        too_soon["outcome"], "not-due",
        "the next look-up waits 60 s"
    );
    let listed = intentkey(&["inspect", "--store", store, "--status", "in_flight"]);
    assert_eq!(listed["count"], 2);
    assert_eq!(
        intentkey(&["purge", "--store", store])["purged"],
        0,
        "nothing has expired"
    );
}

fn status_json(store: &str) -> Value {
    intentkey(&["status", "--store", store, "--json", "--stale-after", "0"])
}

/// `status` and `reconcile` after `operations`: k1 done, k2 and k3 in
/// flight. `await_reconciliation` moves a record to `needs_reconciliation`
/// as recovery would after its last look-up.
fn status_and_reconcile(store: &str, await_reconciliation: &dyn Fn(&str)) {
    let before = status_json(store);
    assert_eq!(before["counts"]["in_flight"], 2, "{before}");
    assert_eq!(before["counts"]["done"], 1, "{before}");
    assert_eq!(before["counts"]["needs_reconciliation"], 0, "{before}");
    // k3 is due at once with --stale-after 0; k2 waits for its next look-up.
    assert_eq!(before["due_lookup"], 1, "{before}");
    assert!(before["oldest_in_flight_age_seconds"].as_i64().unwrap() >= 0);

    for key in ["r1", "r2"] {
        assert_eq!(claim(store, key, "fp")["outcome"], "owned");
        await_reconciliation(key);
    }
    let awaiting = status_json(store);
    assert_eq!(awaiting["counts"]["needs_reconciliation"], 2, "{awaiting}");
    let keys: Vec<&str> = awaiting["needs_reconciliation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["r1", "r2"]);
    assert_eq!(
        claim(store, "r1", "fp")["outcome"],
        "in-flight",
        "409 until a human decides"
    );

    // The text view says the same.
    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(["status", "--store", store])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("needs_reconciliation   2"), "{text}");
    assert!(text.contains("  r1  tenant t1  action pix.send"), "{text}");

    // Found: done with the response given, replayed from then on.
    let found = intentkey(&[
        "reconcile",
        "--store",
        store,
        "--key",
        "r1",
        "--found",
        "--response-status",
        "201",
        "--response-body",
        r#"{"id":"pay_1"}"#,
    ]);
    assert_eq!(found["outcome"], "recorded", "{found}");
    let replay = claim(store, "r1", "fp");
    assert_eq!(
        (
            replay["outcome"].as_str(),
            replay["response"]["status"].as_u64()
        ),
        (Some("done"), Some(201))
    );
    // Absent: released, so the retry runs.
    let absent = intentkey(&["reconcile", "--store", store, "--key", "r2", "--absent"]);
    assert_eq!(absent["outcome"], "released", "{absent}");
    assert_eq!(claim(store, "r2", "fp")["outcome"], "owned");
    // A record in flight, or none, is not reconciled; a decision is required.
    let in_flight = intentkey(&["reconcile", "--store", store, "--key", "k2", "--absent"]);
    assert_eq!(in_flight["outcome"], "not-needed");
    assert_eq!(
        intentkey(&["reconcile", "--store", store, "--key", "nope", "--absent"])["outcome"],
        "missing"
    );
    let no_verdict = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(["reconcile", "--store", store, "--key", "k2"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !no_verdict.status.success(),
        "--found or --absent is required"
    );
    let after = status_json(store);
    assert_eq!(after["counts"]["needs_reconciliation"], 0, "{after}");
}

const AWAIT_SQL: &str =
    "UPDATE intentkey_records SET status = 'needs_reconciliation', lookups = 4, next_lookup_at = NULL WHERE key = $1";

/// The timeline from the issue that made recovery fenced: claim a key, then
/// run 8 recoverers at once with a read-your-writes `absent`. While the claim
/// is fresh none is due; once stale exactly one takes it over.
fn concurrent_recoverers(store: &str) {
    assert_eq!(claim(store, "race", "fp")["outcome"], "owned");
    let run_all = |extra: &[&str]| -> Vec<Value> {
        let children: Vec<_> = (0..8)
            .map(|_| {
                let mut args = vec![
                    "recover",
                    "--store",
                    store,
                    "--key",
                    "race",
                    "--lookup",
                    "absent",
                    "--read-your-writes",
                ];
                args.extend_from_slice(extra);
                Command::new(env!("CARGO_BIN_EXE_intentkey"))
                    .args(&args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        children
            .into_iter()
            .map(|child| {
                let out = child.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                serde_json::from_slice(&out.stdout).unwrap()
            })
            .collect()
    };
    let fresh = run_all(&[]);
    assert!(
        fresh.iter().all(|v| v["outcome"] == "not-due"),
        "a claim a second old is left to its owner: {fresh:?}"
    );
    // Two seconds later the claim is stale under --stale-after 2; a take-over
    // restarts the clock, so a recoverer would have to lag two seconds behind
    // the winner to find the new claim due.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let stale = run_all(&["--stale-after", "2"]);
    let winners: Vec<&Value> = stale
        .iter()
        .filter(|v| v["outcome"] == "applied" && v["action"] == "re-execute")
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one recoverer re-executes: {stale:?}"
    );
    assert!(
        stale.iter().all(|v| v["outcome"] == "applied"
            || v["outcome"] == "lost"
            || v["outcome"] == "not-due"),
        "{stale:?}"
    );
    let record = intentkey(&["inspect", "--store", store, "--key", "race"]);
    assert_eq!(record["record"]["owner_token"], winners[0]["owner_token"]);
}

#[test]
fn operations_on_sqlite() {
    let path = std::env::temp_dir().join(format!("ik-cli-ops-{}.sqlite", std::process::id()));
    let url = format!("sqlite:{}", path.display());
    operations(&url);
    status_and_reconcile(&url, &|key| {
        let conn = rusqlite::Connection::open(&path).unwrap();
        assert_eq!(
            conn.execute(&AWAIT_SQL.replace("$1", "?1"), [key]).unwrap(),
            1
        );
    });
    concurrent_recoverers(&url);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[test]
fn operations_on_postgres() {
    let base = "postgres://postgres@127.0.0.1:5432/test";
    let mut admin = match postgres::Client::connect(base, postgres::NoTls) {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and PostgreSQL is not reachable: {e}"
            );
            // Straight to stderr, past the harness's capture, so the run counts it.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED: operations_on_postgres: PostgreSQL is not reachable at {base} ({e}); outside CI only"
            );
            return;
        }
    };
    let schema = format!("ik_rs_cli_{}", std::process::id());
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap();
    let url = format!("{base}?options=-csearch_path%3D{schema}");
    operations(&url);
    status_and_reconcile(&url, &|key| {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        assert_eq!(c.execute(AWAIT_SQL, &[&key]).unwrap(), 1);
    });
    concurrent_recoverers(&url);
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

#[test]
fn operations_on_mysql() {
    use mysql::prelude::Queryable;
    let base = "mysql://root@127.0.0.1:3306";
    let mut admin = match mysql::Conn::new(mysql::Opts::from_url(&format!("{base}/test")).unwrap())
    {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and MySQL/MariaDB is not reachable: {e}"
            );
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED: operations_on_mysql: MySQL/MariaDB is not reachable at {base} ({e}); outside CI only"
            );
            return;
        }
    };
    let db = format!("ik_rs_cli_{}", std::process::id());
    admin
        .query_drop(format!("DROP DATABASE IF EXISTS `{db}`"))
        .unwrap();
    admin.query_drop(format!("CREATE DATABASE `{db}`")).unwrap();
    let url = format!("{base}/{db}");
    operations(&url);
    concurrent_recoverers(&url);
    admin.query_drop(format!("DROP DATABASE `{db}`")).unwrap();
}

/// The same on a Redis Cluster (`redis+cluster://`, started by
/// `scripts/redis-cluster.sh`; `INTENTKEY_REDIS_CLUSTER` names another),
/// under a prefix of this test's own, whose keys are deleted at the end.
#[test]
fn operations_on_redis_cluster() {
    let base = std::env::var("INTENTKEY_REDIS_CLUSTER")
        .unwrap_or_else(|_| "redis+cluster://127.0.0.1:7000".to_owned());
    let node = base.replacen("redis+cluster://", "redis://", 1);
    let node = node.split([',', '?']).next().unwrap_or_default().to_owned();
    let mut admin = match redis::cluster::ClusterClient::new(vec![node.as_str()])
        .and_then(|c| c.get_connection())
    {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and no Redis Cluster at {base} (scripts/redis-cluster.sh start): {e}"
            );
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED: operations_on_redis_cluster: no Redis Cluster at {base} ({e}); outside CI only"
            );
            return;
        }
    };
    let prefix = format!("ik-rs-cli-{}", std::process::id());
    let url = format!("{base}?prefix={prefix}");
    operations(&url);
    concurrent_recoverers(&url);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{prefix}:*"))
        .query(&mut admin)
        .unwrap();
    assert!(!keys.is_empty(), "the records were in the cluster layout");
    for key in keys {
        let _: i64 = redis::cmd("DEL").arg(key).query(&mut admin).unwrap();
    }
}

/// The same on DynamoDB (`dynamodb://HOST:PORT/TABLE`: the dynalite the
/// test script starts, or `INTENTKEY_DYNAMODB`), in a table of this test's
/// own (created by the store, deleted at the end).
#[test]
fn operations_on_dynamodb() {
    let base = std::env::var("INTENTKEY_DYNAMODB")
        .unwrap_or_else(|_| "dynamodb://127.0.0.1:4567".to_owned());
    let host = base
        .trim_start_matches("dynamodb://")
        .trim_end_matches('/')
        .to_owned();
    if let Err(e) = std::net::TcpStream::connect(&host) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and no DynamoDB endpoint at {base}: {e}"
        );
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED: operations_on_dynamodb: no DynamoDB endpoint at {base} ({e}); outside CI only"
        );
        return;
    }
    let table = format!("ik-rs-cli-{}", std::process::id());
    let url = format!("{}/{table}", base.trim_end_matches('/'));
    operations(&url);
    concurrent_recoverers(&url);
    // The table is the test's own: delete it (a local endpoint checks the
    // signature's form, not its value).
    use std::io::{Read as _, Write as _};
    let body = format!(r#"{{"TableName":"{table}"}}"#);
    let mut s = std::net::TcpStream::connect(&host).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-amz-json-1.0\r\n\
         X-Amz-Target: DynamoDB_20120810.DeleteTable\r\nX-Amz-Date: 20260101T000000Z\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn unknown_store_urls_are_refused_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(["purge", "--store", "cassandra://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "store-failed");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("use memory:, sqlite:PATH, postgres://USER@HOST:PORT/DB, mysql://"));
}

#[test]
fn the_demo_keeps_every_promise() {
    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .arg("demo")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "claim → done: replayed 201",
        "409 Conflict",
        "422 Unprocessable Content",
        "found: recorded as done",
        "moved to needs_reconciliation after 4 look-ups",
        "claim released (nothing happened)",
        "superseded (nothing overwritten)",
        "each intent exactly once",
    ] {
        assert!(
            text.contains(line),
            "the demo should show {line:?}:\n{text}"
        );
    }
}
