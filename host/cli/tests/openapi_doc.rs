//! docs/openapi/*.json are what `intentkey openapi` prints for each profile
//! with the defaults: regenerate them with
//! `cargo run -q -p intentkey-cli -- openapi --profile <p> > docs/openapi/<p>.json`.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

#[test]
fn the_published_fragments_are_current() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi");
    for profile in ["ietf", "stripe", "ofb"] {
        let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
            .args(["openapi", "--profile", profile])
            .output()
            .unwrap();
        assert!(out.status.success(), "{profile}: {out:?}");
        let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let file = docs.join(format!("{profile}.json"));
        let published: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            printed,
            published,
            "{} is stale: regenerate it with `cargo run -q -p intentkey-cli -- openapi --profile {profile} > docs/openapi/{profile}.json`",
            file.display()
        );
        assert_eq!(published["x-idempotency"]["expires-after-seconds"], 86_400);
    }
}

#[test]
fn the_server_settings_reach_the_fragment() {
    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args([
            "openapi",
            "--profile",
            "ofb",
            "--ttl",
            "3600",
            "--optional-key",
            "--replay-header",
            "ETag",
        ])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let x = &doc["x-idempotency"];
    assert_eq!(
        (
            &x["expires-after-seconds"],
            &x["key-required"],
            &x["header"]
        ),
        (
            &serde_json::json!(3600),
            &serde_json::json!(false),
            &serde_json::json!("x-idempotency-key")
        )
    );
    assert_eq!(
        x["replayed-headers"],
        serde_json::json!(["Location", "Content-Type", "ETag"])
    );
    assert_eq!(
        doc["components"]["parameters"]["IdempotencyKey"]["required"],
        false
    );
}
