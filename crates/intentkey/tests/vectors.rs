//! Runs every golden vector in `tests/vectors/*.json` against the native core.
//!
//! A failure names `file#tcId`. An unknown group type fails the run: no
//! runner may skip a group. The files are also linted (unique tcIds, correct
//! `numberOfTests`, every flag defined in `notes`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;

use intentkey::{
    uuid_key, Deriver, Error, Intent, KeyLength, Payload, Policy, RequestAnswerer, Secret,
};
use serde_json::Value;

fn vector_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

fn str_of<'a>(test: &'a Value, name: &str) -> &'a str {
    test[name]
        .as_str()
        .unwrap_or_else(|| panic!("vector member `{name}` is not a string: {test}"))
}

/// What a vector expects: a value (key, fingerprint…) with optional material, or an error code.
enum Expected<'a> {
    Valid,
    Invalid(&'a str),
}

fn expected(test: &Value) -> Expected<'_> {
    match str_of(test, "result") {
        "valid" => Expected::Valid,
        "invalid" => Expected::Invalid(str_of(test, "expectedError")),
        other => panic!("unknown result {other:?}"),
    }
}

/// Compares an outcome with the vector; returns a failure description.
fn check<T>(
    test: &Value,
    outcome: Result<T, Error>,
    valid: impl FnOnce(&Value, T) -> Option<String>,
) -> Option<String> {
    match (expected(test), outcome) {
        (Expected::Valid, Ok(v)) => valid(test, v),
        (Expected::Valid, Err(e)) => Some(format!("expected valid, got error {e}")),
        (Expected::Invalid(code), Ok(_)) => Some(format!("expected error {code}, got a result")),
        (Expected::Invalid(code), Err(e)) if e.code().as_str() == code => None,
        (Expected::Invalid(code), Err(e)) => Some(format!("expected error {code}, got {e}")),
    }
}

fn compare(what: &str, want: &Value, got: &str) -> Option<String> {
    let want = want
        .as_str()
        .unwrap_or_else(|| panic!("vector lacks `{what}`"));
    (want != got).then(|| format!("{what} differs:\n    want {want:?}\n    got  {got:?}"))
}

fn policy_of(group: &Value) -> Result<Policy, Error> {
    match &group["policy"] {
        Value::Null => Ok(Policy::default()),
        p => Policy::from_value(p),
    }
}

fn run_fields(group: &Value, test: &Value) -> Option<String> {
    let outcome = (|| {
        let policy = policy_of(group)?;
        let secret = Secret::from_hex(str_of(test, "secretHex"))?;
        let payload = Payload::from_json(str_of(test, "payload"))?;
        let epoch = test["intentEpoch"].as_i64().expect("intentEpoch is an i64");
        let deriver = Deriver::new(&secret, policy);
        let intent = Intent {
            tenant_id: str_of(test, "tenantId"),
            action_type: str_of(test, "actionType"),
            payload: &payload,
            intent_epoch: epoch,
        };
        let material = deriver.material(&intent)?;
        let key = deriver.derive(&intent)?;
        Ok((String::from_utf8(material).expect("material is UTF-8"), key))
    })();
    check(test, outcome, |t, (material, key)| {
        compare("material", &t["material"], &material)
            .or_else(|| compare("key", &t["key"], key.as_str()))
    })
}

fn run_request_line(test: &Value) -> Option<String> {
    let mut answerer = RequestAnswerer::new(Policy::default());
    let answer = answerer.answer(str_of(test, "line"));
    if answer.id != test["id"] {
        return Some(format!(
            "id echo differs: want {}, got {}",
            test["id"], answer.id
        ));
    }
    check(test, answer.outcome, |t, key| {
        compare("key", &t["key"], key.as_str())
    })
}

fn run_policy_invalid(test: &Value) -> Option<String> {
    match Policy::from_value(&test["policy"]) {
        Ok(_) => Some("expected invalid-policy, the policy was accepted".into()),
        Err(e) if e.code().as_str() != str_of(test, "expectedError") => Some(format!("got {e}")),
        Err(e) => {
            let want = str_of(test, "errorPath");
            let got = e.field_name().unwrap_or("");
            (want != got).then(|| format!("error path differs: want {want:?}, got {got:?} ({e})"))
        }
    }
}

fn run_intent_hmac(test: &Value) -> Option<String> {
    let outcome = (|| {
        let secret = Secret::from_hex(str_of(test, "secretHex"))?;
        let length = KeyLength::new(test["keyHexLength"].as_u64().expect("keyHexLength") as usize)?;
        Deriver::new(&secret, Policy::default()).intent_key(
            str_of(test, "tenantId"),
            str_of(test, "intentId"),
            length,
        )
    })();
    check(test, outcome, |t, key| {
        compare("key", &t["key"], key.as_str())
    })
}

fn run_fingerprint(group: &Value, test: &Value) -> Option<String> {
    let outcome = (|| {
        let policy = policy_of(group)?;
        let secret = Secret::from_hex(str_of(test, "secretHex"))?;
        let payload = Payload::from_json(str_of(test, "payload"))?;
        let deriver = Deriver::new(&secret, policy);
        let (tenant, action) = (str_of(test, "tenantId"), str_of(test, "actionType"));
        let material = deriver.fingerprint_material(tenant, action, &payload)?;
        let fingerprint = deriver.fingerprint(tenant, action, &payload)?;
        Ok((String::from_utf8(material).expect("UTF-8"), fingerprint))
    })();
    check(test, outcome, |t, (material, fp)| {
        compare("material", &t["material"], &material)
            .or_else(|| compare("fingerprint", &t["fingerprint"], fp.as_str()))
            .or_else(|| {
                (!fp.matches(fp.as_str())).then(|| "fingerprint does not match itself".into())
            })
    })
}

fn run_uuid(test: &Value) -> Option<String> {
    let hex = str_of(test, "randomHex");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("randomHex is hex"))
        .collect();
    let random: [u8; 16] = bytes.try_into().expect("16 random bytes");
    compare("key", &test["key"], uuid_key(random).as_str())
}

#[test]
fn golden_vectors() {
    let mut files: Vec<PathBuf> = fs::read_dir(vector_dir())
        .expect("tests/vectors exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no vector files in {}",
        vector_dir().display()
    );

    let mut failures = Vec::new();
    let mut per_type: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let doc: Value = serde_json::from_str(&fs::read_to_string(path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
        assert_eq!(doc["schema"], "intentkey_vectors_v1", "{name}: schema");
        let notes: BTreeSet<&str> = doc["notes"]
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut ids = BTreeSet::new();
        let mut count = 0;
        for group in doc["testGroups"].as_array().expect("testGroups") {
            let kind = group["type"].as_str().expect("group type");
            for test in group["tests"].as_array().expect("tests") {
                count += 1;
                let id = test["tcId"].as_u64().expect("tcId");
                assert!(ids.insert(id), "{name}#{id}: duplicate tcId");
                for flag in test["flags"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    let flag = flag.as_str().expect("flag string");
                    assert!(
                        notes.contains(flag),
                        "{name}#{id}: flag {flag} not defined in notes"
                    );
                }
                let failure = match kind {
                    "FieldsDerivation" => run_fields(group, test),
                    "RequestLine" => run_request_line(test),
                    "PolicyInvalid" => run_policy_invalid(test),
                    "IntentHmac" => run_intent_hmac(test),
                    "Fingerprint" => run_fingerprint(group, test),
                    "UuidV4" => run_uuid(test),
                    other => panic!("{name}: unknown group type {other:?}; the native runner must run every group"),
                };
                *per_type.entry(kind.to_owned()).or_default() += 1;
                if let Some(why) = failure {
                    failures.push(format!(
                        "{name}#{id} ({}): {why}",
                        test["comment"].as_str().unwrap_or("")
                    ));
                }
            }
        }
        assert_eq!(
            doc["numberOfTests"].as_u64(),
            Some(count as u64),
            "{name}: numberOfTests"
        );
        total += count;
    }
    eprintln!(
        "native core: {} vectors in {} files, {per_type:?}",
        total,
        files.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
