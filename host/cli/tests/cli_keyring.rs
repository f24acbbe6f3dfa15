//! `intentkey derive --keyring-file`: each intent is keyed with the secret
//! active at its own epoch, the same key as deriving with that secret alone;
//! calls that cannot pick a secret are refused; no secret is ever printed.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const OLD: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str = "2222222222222222222222222222222222222222222222222222222222222222";
const ROTATION: i64 = 1_800_000_000;
const PAYLOAD: &str = r#"{"creditor_key":"a@b.c","amount":"10.00","currency":"BRL"}"#;

/// An intent-hmac derivation, before its secret options.
const HMAC: [&str; 6] = [
    "--mode",
    "intent-hmac",
    "--tenant",
    "t1",
    "--intent-id",
    "i-1",
];

fn file(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("intentkey-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn keyring(secrets: &[(&str, i64, &str)]) -> PathBuf {
    let list: Vec<Value> = secrets
        .iter()
        .map(
            |(id, from, hex)| serde_json::json!({"id": id, "active_from": from, "secret_hex": hex}),
        )
        .collect();
    let name = secrets.iter().map(|s| s.0).collect::<Vec<_>>().join("-");
    file(
        &format!("{name}.json"),
        &serde_json::json!({"secrets": list}).to_string(),
    )
}

/// Runs `intentkey derive`, with `secret` in INTENTKEY_SECRET when given:
/// (exit success, the JSON answer, stdout and stderr).
fn derive(args: &[&str], secret: Option<&str>) -> (bool, Value, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_intentkey"));
    command
        .arg("derive")
        .args(args)
        .env_remove("INTENTKEY_SECRET");
    if let Some(secret) = secret {
        command.env("INTENTKEY_SECRET", secret);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    (
        out.status.success(),
        serde_json::from_str(text.trim()).unwrap(),
        all,
    )
}

fn fields(epoch: i64) -> Vec<String> {
    [
        "--tenant",
        "t1",
        "--action",
        "pix.send",
        "--payload",
        PAYLOAD,
        "--epoch",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([epoch.to_string()])
    .collect()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn the_secret_of_the_intents_epoch_keys_it() {
    let ring = keyring(&[("2026-11", 0, OLD), ("2026-12", ROTATION, NEW)]);
    let ring_arg = ring.to_str().unwrap();
    for (epoch, id, secret) in [(ROTATION - 1, "2026-11", OLD), (ROTATION, "2026-12", NEW)] {
        let mut with_ring = fields(epoch);
        with_ring.extend(["--keyring-file".into(), ring_arg.into()]);
        let (ok, by_ring, all) = derive(&args(&with_ring), None);
        assert!(ok, "{all}");
        let (ok, alone, _) = derive(&args(&fields(epoch)), Some(secret));
        assert!(ok);
        assert_eq!(by_ring["key"], alone["key"], "epoch {epoch}");
        assert_eq!(
            by_ring["fingerprint"], alone["fingerprint"],
            "epoch {epoch}"
        );
        assert_eq!(by_ring["secret_id"], id, "epoch {epoch}");
        assert!(
            !all.contains(OLD) && !all.contains(NEW),
            "a secret was printed: {all}"
        );

        let epoch_text = epoch.to_string();
        let mut with_ring: Vec<&str> = HMAC.to_vec();
        with_ring.extend(["--epoch", &epoch_text, "--keyring-file", ring_arg]);
        let (ok, by_ring, _) = derive(&with_ring, None);
        assert!(ok);
        let (_, alone, _) = derive(&HMAC, Some(secret));
        assert_eq!(by_ring["key"], alone["key"], "intent-hmac at {epoch}");
    }
}

#[test]
fn calls_that_cannot_pick_a_secret_are_refused() {
    let ring = keyring(&[("a", 0, OLD), ("b", ROTATION, NEW)]);
    let ring_arg = ring.to_str().unwrap();
    // intent-hmac needs the intent's epoch once there are two secrets.
    let (ok, answer, _) = derive(&[&HMAC[..], &["--keyring-file", ring_arg]].concat(), None);
    assert!(!ok);
    assert_eq!(answer["error"]["code"], "invalid-keyring", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("epoch"),
        "{answer}"
    );

    // The previous secret dropped: an intent recorded before is refused.
    let retired = keyring(&[("b", ROTATION, NEW)]);
    let mut old_intent = fields(ROTATION - 1);
    old_intent.extend(["--keyring-file".into(), retired.to_str().unwrap().into()]);
    let (ok, answer, _) = derive(&args(&old_intent), None);
    assert!(!ok);
    assert_eq!(answer["error"]["code"], "secret-retired", "{answer}");

    // A malformed keyring names the problem, never the secret.
    let twice = keyring(&[("a", 0, OLD), ("a", 5, NEW)]);
    let mut bad = fields(1);
    bad.extend(["--keyring-file".into(), twice.to_str().unwrap().into()]);
    let (ok, answer, all) = derive(&args(&bad), None);
    assert!(!ok);
    assert_eq!(answer["error"]["code"], "invalid-keyring", "{answer}");
    assert!(!all.contains(OLD) && !all.contains(NEW), "{all}");
    let short = keyring(&[("short", 0, "abcd")]);
    let mut bad = fields(1);
    bad.extend(["--keyring-file".into(), short.to_str().unwrap().into()]);
    assert_eq!(
        derive(&args(&bad), None).1["error"]["code"],
        "secret-too-short"
    );
}
