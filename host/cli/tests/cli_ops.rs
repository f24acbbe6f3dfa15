//! The operations commands, each printing one JSON object, on a SQLite file
//! (and on PostgreSQL when it is reachable), plus `intentkey demo`.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

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

fn operations(store: &str) {
    let claim = |key: &str, fp: &str| {
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
    };
    assert_eq!(claim("k1", "fp")["outcome"], "owned");
    assert_eq!(claim("k1", "fp")["outcome"], "in-flight");
    assert_eq!(claim("k1", "other")["outcome"], "payload-conflict");
    let done = intentkey(&[
        "complete",
        "--store",
        store,
        "--key",
        "k1",
        "--status",
        "402",
        "--body",
        r#"{"error":"insufficient_funds"}"#,
    ]);
    assert_eq!(done["completed"], true);
    let replay = claim("k1", "fp");
    assert_eq!(replay["outcome"], "done");
    assert_eq!(replay["response"]["status"], 402);
    assert_eq!(
        intentkey(&["complete", "--store", store, "--key", "k1", "--status", "200"])["completed"],
        false
    );
    let inspect = intentkey(&["inspect", "--store", store, "--key", "k1"]);
    assert_eq!(inspect["record"]["status"], "done");
    // Recovery of an in-flight record: unknown backs off, found settles it.
    assert_eq!(claim("k2", "fp")["outcome"], "owned");
    let later = intentkey(&[
        "recover", "--store", store, "--key", "k2", "--lookup", "unknown",
    ]);
    assert_eq!(
        (later["action"].as_str(), later["lookups"].as_u64()),
        (Some("check-later"), Some(1))
    );
    let absent = intentkey(&[
        "recover",
        "--store",
        store,
        "--key",
        "k2",
        "--lookup",
        "absent",
        "--read-your-writes",
    ]);
    assert_eq!(absent["action"], "re-execute");
    let found = intentkey(&[
        "recover",
        "--store",
        store,
        "--key",
        "k2",
        "--lookup",
        "found",
        "--response-status",
        "201",
        "--response-body",
        "{}",
    ]);
    assert_eq!(found["action"], "record-done");
    let listed = intentkey(&["inspect", "--store", store, "--status", "in_flight"]);
    assert_eq!(listed["count"], 0);
    assert_eq!(
        intentkey(&["purge", "--store", store])["purged"],
        0,
        "nothing has expired"
    );
}

#[test]
fn operations_on_sqlite() {
    let path = std::env::temp_dir().join(format!("ik-cli-ops-{}.sqlite", std::process::id()));
    operations(&format!("sqlite:{}", path.display()));
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
            eprintln!("SKIPPED: PostgreSQL is not reachable at {base} ({e})");
            return;
        }
    };
    let schema = format!("ik_rs_cli_{}", std::process::id());
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap();
    operations(&format!("{base}?options=-csearch_path%3D{schema}"));
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

#[test]
fn unknown_store_urls_are_refused_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(["purge", "--store", "mysql://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("use memory:, sqlite:PATH or postgres://")
    );
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
        "each intent exactly once",
    ] {
        assert!(
            text.contains(line),
            "the demo should show {line:?}:\n{text}"
        );
    }
}
