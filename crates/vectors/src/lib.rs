//! One golden-vector runner for every runtime.
//!
//! A runtime (the native core, the wasmtime-hosted component, …) implements
//! [`Subject`]; [`run`] walks every file in `tests/vectors/`, lints it (unique
//! tcIds, `numberOfTests`, flags defined in `notes`), dispatches each group by
//! type, compares results and returns a [`Report`]. An unknown group type, or a
//! known one that ran no test, is itself a failure: no runtime may skip a group.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub mod http;

/// The group types every runtime must run.
pub const GROUP_TYPES: [&str; 6] = [
    "FieldsDerivation",
    "RequestLine",
    "PolicyInvalid",
    "IntentHmac",
    "Fingerprint",
    "UuidV4",
];

/// An error as a runtime reports it: the kebab-case code and the field or
/// policy path at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The kebab-case error code.
    pub code: String,
    /// The field or policy path, when the error names one.
    pub field: Option<String>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} ({field})", self.code),
            None => f.write_str(&self.code),
        }
    }
}

/// What a runtime's answer is: a value or a refusal.
pub type Answer<T> = Result<T, Refusal>;

/// A runtime under test. `policy` is `None` for the built-in default policy.
pub trait Subject {
    /// `fields` mode: the material (UTF-8 text) and the key.
    fn fields(
        &mut self,
        policy: Option<&Value>,
        secret_hex: &str,
        tenant_id: &str,
        action_type: &str,
        payload_json: &str,
        intent_epoch: i64,
    ) -> Answer<(String, String)>;
    /// The JSON-lines contract: the answer line for one request line.
    fn request_line(&mut self, line: &str) -> String;
    /// Validates a policy document.
    fn policy(&mut self, policy: &Value) -> Answer<()>;
    /// `intent-hmac` mode.
    fn intent_hmac(
        &mut self,
        secret_hex: &str,
        tenant_id: &str,
        intent_id: &str,
        key_hex_length: u32,
    ) -> Answer<String>;
    /// The fingerprint's material and the fingerprint.
    fn fingerprint(
        &mut self,
        policy: Option<&Value>,
        secret_hex: &str,
        tenant_id: &str,
        action_type: &str,
        payload_json: &str,
    ) -> Answer<(String, String)>;
    /// `uuid` mode from given random bytes.
    fn uuid(&mut self, random: &[u8]) -> Answer<String>;
}

/// The outcome of a run.
#[derive(Debug, Default)]
pub struct Report {
    /// Vectors run, per group type.
    pub per_type: BTreeMap<String, usize>,
    /// Vector files read.
    pub files: usize,
    /// One line per failure, naming `file#tcId`.
    pub failures: Vec<String>,
}

impl Report {
    /// Vectors run in all.
    pub fn total(&self) -> usize {
        self.per_type.values().sum()
    }

    /// Fails (panics) with every failure listed, or prints the summary.
    pub fn assert_passed(&self, runtime: &str) {
        eprintln!(
            "{runtime}: {} vectors in {} files, per group type {:?}",
            self.total(),
            self.files,
            self.per_type
        );
        assert!(
            self.failures.is_empty(),
            "{runtime}: {} of {} vectors failed:\n{}",
            self.failures.len(),
            self.total(),
            self.failures.join("\n")
        );
    }
}

/// The repository's `tests/vectors` folder.
pub fn vector_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

fn str_of<'a>(test: &'a Value, name: &str) -> Result<&'a str, String> {
    test[name]
        .as_str()
        .ok_or_else(|| format!("vector member `{name}` is not a string"))
}

fn policy_of(group: &Value) -> Option<&Value> {
    match &group["policy"] {
        Value::Null => None,
        p => Some(p),
    }
}

fn hex_bytes(hex: &str) -> Result<Vec<u8>, String> {
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("not hex: {hex}"))
        })
        .collect()
}

/// Compares an answer with a vector's `result` / `expectedError`, then hands
/// a valid answer to `valid` for value checks.
fn check<T>(
    test: &Value,
    answer: Answer<T>,
    valid: impl FnOnce(T) -> Option<String>,
) -> Result<Option<String>, String> {
    let result = str_of(test, "result")?;
    Ok(match (result, answer) {
        ("valid", Ok(v)) => valid(v),
        ("valid", Err(e)) => Some(format!("expected valid, got error {e}")),
        ("invalid", Ok(_)) => Some(format!(
            "expected error {}, got a result",
            test["expectedError"]
        )),
        ("invalid", Err(e)) if test["expectedError"] == e.code.as_str() => None,
        ("invalid", Err(e)) => Some(format!("expected error {}, got {e}", test["expectedError"])),
        (other, _) => return Err(format!("unknown result {other:?}")),
    })
}

fn differs(what: &str, want: &Value, got: &str) -> Option<String> {
    match want.as_str() {
        Some(want) if want == got => None,
        Some(want) => Some(format!(
            "{what} differs:\n    want {want:?}\n    got  {got:?}"
        )),
        None => Some(format!("the vector has no `{what}`")),
    }
}

fn run_one(
    subject: &mut dyn Subject,
    kind: &str,
    group: &Value,
    test: &Value,
) -> Result<Option<String>, String> {
    match kind {
        "FieldsDerivation" => {
            let epoch = test["intentEpoch"]
                .as_i64()
                .ok_or("intentEpoch is not an i64")?;
            let answer = subject.fields(
                policy_of(group),
                str_of(test, "secretHex")?,
                str_of(test, "tenantId")?,
                str_of(test, "actionType")?,
                str_of(test, "payload")?,
                epoch,
            );
            check(test, answer, |(material, key)| {
                differs("material", &test["material"], &material)
                    .or_else(|| differs("key", &test["key"], &key))
            })
        }
        "RequestLine" => {
            let line = subject.request_line(str_of(test, "line")?);
            let answer: Value = serde_json::from_str(&line)
                .map_err(|e| format!("answer is not JSON ({e}): {line}"))?;
            let members = answer.as_object().map_or(0, serde_json::Map::len);
            if answer["id"] != test["id"] || members != 2 {
                return Ok(Some(format!(
                    "answer {line} does not echo id {} alone",
                    test["id"]
                )));
            }
            let outcome = match (&answer["key"], &answer["error"]) {
                (Value::String(key), Value::Null) => Ok(key.clone()),
                (Value::Null, error)
                    if error["message"].as_str().is_some_and(|m| !m.is_empty()) =>
                {
                    Err(Refusal {
                        code: error["code"].as_str().unwrap_or_default().to_owned(),
                        field: None,
                    })
                }
                _ => return Ok(Some(format!("malformed answer {line}"))),
            };
            check(test, outcome, |key| differs("key", &test["key"], &key))
        }
        "PolicyInvalid" => {
            let answer = subject.policy(&test["policy"]);
            let want_path = str_of(test, "errorPath")?;
            check(test, answer, |()| None).map(|failure| {
                failure.or_else(|| match subject.policy(&test["policy"]) {
                    Err(Refusal { field, .. }) if field.as_deref().unwrap_or("") != want_path => {
                        Some(format!(
                            "error path differs: want {want_path:?}, got {:?}",
                            field.unwrap_or_default()
                        ))
                    }
                    _ => None,
                })
            })
        }
        "IntentHmac" => {
            let length = test["keyHexLength"]
                .as_u64()
                .ok_or("keyHexLength is not a number")?;
            let answer = subject.intent_hmac(
                str_of(test, "secretHex")?,
                str_of(test, "tenantId")?,
                str_of(test, "intentId")?,
                u32::try_from(length).map_err(|e| e.to_string())?,
            );
            check(test, answer, |key| differs("key", &test["key"], &key))
        }
        "Fingerprint" => {
            let answer = subject.fingerprint(
                policy_of(group),
                str_of(test, "secretHex")?,
                str_of(test, "tenantId")?,
                str_of(test, "actionType")?,
                str_of(test, "payload")?,
            );
            check(test, answer, |(material, fingerprint)| {
                differs("material", &test["material"], &material)
                    .or_else(|| differs("fingerprint", &test["fingerprint"], &fingerprint))
            })
        }
        "UuidV4" => {
            let random = hex_bytes(str_of(test, "randomHex")?)?;
            check(test, subject.uuid(&random), |key| {
                differs("key", &test["key"], &key)
            })
        }
        other => Err(format!(
            "unknown group type {other:?}: every runtime must run every group"
        )),
    }
}

/// Runs every vector file against `subject`.
///
/// # Errors
/// Returns a message when the vector folder cannot be read or a file is not
/// a well-formed vector file (those are not vector failures but broken input).
pub fn run(subject: &mut dyn Subject) -> Result<Report, String> {
    let dir = vector_dir();
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("no vector files in {}", dir.display()));
    }
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
        let doc: Value =
            serde_json::from_str(&text).map_err(|e| format!("{name}: not JSON: {e}"))?;
        if doc["schema"] != "intentkey_vectors_v1" {
            return Err(format!("{name}: schema is not intentkey_vectors_v1"));
        }
        let notes: BTreeSet<&str> = doc["notes"]
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut ids = BTreeSet::new();
        let mut count = 0u64;
        for group in doc["testGroups"]
            .as_array()
            .ok_or_else(|| format!("{name}: no testGroups"))?
        {
            let kind = group["type"]
                .as_str()
                .ok_or_else(|| format!("{name}: a group has no type"))?;
            for test in group["tests"]
                .as_array()
                .ok_or_else(|| format!("{name}: a group has no tests"))?
            {
                count += 1;
                let id = test["tcId"]
                    .as_u64()
                    .ok_or_else(|| format!("{name}: a test has no tcId"))?;
                let label = format!("{name}#{id}");
                if !ids.insert(id) {
                    report.failures.push(format!("{label}: duplicate tcId"));
                }
                for flag in test["flags"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    if !flag.as_str().is_some_and(|f| notes.contains(f)) {
                        report
                            .failures
                            .push(format!("{label}: flag {flag} is not defined in notes"));
                    }
                }
                *report.per_type.entry(kind.to_owned()).or_default() += 1;
                match run_one(subject, kind, group, test) {
                    Ok(None) => {}
                    Ok(Some(why)) => report.failures.push(format!(
                        "{label} ({}): {why}",
                        test["comment"].as_str().unwrap_or("")
                    )),
                    Err(broken) => report.failures.push(format!("{label}: {broken}")),
                }
            }
        }
        if doc["numberOfTests"].as_u64() != Some(count) {
            report.failures.push(format!(
                "{name}: numberOfTests says {}, found {count}",
                doc["numberOfTests"]
            ));
        }
    }
    for kind in GROUP_TYPES {
        if !report.per_type.contains_key(kind) {
            report
                .failures
                .push(format!("group type {kind} ran no test"));
        }
    }
    Ok(report)
}
