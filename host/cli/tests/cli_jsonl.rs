//! The `intentkey derive --jsonl` contract, end to end through the binary:
//! every RequestLine vector in one run, one answer per line, in order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

fn request_line_vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/request_lines_test.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut tests = Vec::new();
    for group in doc["testGroups"].as_array().unwrap() {
        assert_eq!(group["type"], "RequestLine");
        tests.extend(group["tests"].as_array().unwrap().iter().cloned());
    }
    tests
}

fn run_jsonl(input: &[u8], extra: &[&str]) -> (String, String, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(["derive", "--jsonl"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.success(),
    )
}

#[test]
fn every_request_line_vector_through_the_binary_native() {
    every_request_line_vector(&["--engine", "native"]);
}

#[test]
fn every_request_line_vector_through_the_binary_wasm() {
    every_request_line_vector(&["--engine", "wasm"]);
}

#[test]
fn both_engines_answer_byte_for_byte_alike_under_a_policy() {
    let policy = std::env::temp_dir().join(format!("intentkey-policy-{}.json", std::process::id()));
    std::fs::write(&policy, r#"{"version":1,"keyHexLength":40,"fields":{"amount":{"class":"key","normalizer":"decimal","scale":0}}}"#).unwrap();
    let policy_arg = policy.to_str().unwrap();
    let secret = "00".repeat(32);
    let input = format!(
        "{}\n{}\n",
        format_args!(
            r#"{{"id":1,"secret_hex":"{secret}","tenant_id":"t","action_type":"a","payload":{{"amount":2.5}},"intent_epoch":0}}"#
        ),
        format_args!(
            r#"{{"id":2,"secret_hex":"{secret}","tenant_id":"t","action_type":"a","payload":{{"currency":"BRL"}},"intent_epoch":0}}"#
        ),
    );
    let (native, _, ok_native) = run_jsonl(
        input.as_bytes(),
        &["--engine", "native", "--policy", policy_arg, "--quiet"],
    );
    let (wasm, _, ok_wasm) = run_jsonl(
        input.as_bytes(),
        &["--engine", "wasm", "--policy", policy_arg, "--quiet"],
    );
    std::fs::remove_file(&policy).unwrap();
    assert!(ok_native && ok_wasm);
    assert_eq!(native, wasm);
    let answers: Vec<Value> = native
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers[0]["key"].as_str().unwrap().len(), 40);
    assert_eq!(answers[1]["error"]["code"], "unclassified-fields");
}

fn every_request_line_vector(engine: &[&str]) {
    let tests = request_line_vectors();
    let input: String = tests
        .iter()
        .map(|t| format!("{}\n", t["line"].as_str().unwrap()))
        .collect();
    let (stdout, stderr, ok) = run_jsonl(input.as_bytes(), engine);
    assert!(ok, "exit status not 0; stderr: {stderr}");
    let answers: Vec<&str> = stdout.split('\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(answers.len(), tests.len(), "one answer per line");
    let mut failures = Vec::new();
    for (test, answer) in tests.iter().zip(&answers) {
        let id = test["tcId"].as_u64().unwrap();
        let answer: Value = serde_json::from_str(answer)
            .unwrap_or_else(|e| panic!("#{id}: answer not JSON ({e}): {answer}"));
        let members: Vec<&String> = answer.as_object().unwrap().keys().collect();
        if answer["id"] != test["id"] {
            failures.push(format!(
                "request_lines_test.json#{id}: id {} != {}",
                answer["id"], test["id"]
            ));
        }
        match test["result"].as_str().unwrap() {
            "valid" if answer["key"] != test["key"] => failures.push(format!(
                "request_lines_test.json#{id}: {answer} (want key {})",
                test["key"]
            )),
            "invalid" if answer["error"]["code"] != test["expectedError"] => {
                failures.push(format!(
                    "request_lines_test.json#{id}: {answer} (want {})",
                    test["expectedError"]
                ))
            }
            "invalid"
                if answer["error"]["message"]
                    .as_str()
                    .is_none_or(str::is_empty) =>
            {
                failures.push(format!(
                    "request_lines_test.json#{id}: error without a message"
                ))
            }
            _ => {}
        }
        assert_eq!(
            members.len(),
            2,
            "#{id}: exactly id and key/error: {answer}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        stderr.contains(&format!("answered {} lines", tests.len())),
        "summary on stderr: {stderr}"
    );
}

#[test]
fn lines_split_on_newline_only() {
    let secret = "00".repeat(32);
    let line = |id: &str, remittance: &str| {
        format!(
            r#"{{"id":"{id}","secret_hex":"{secret}","tenant_id":"t","action_type":"a","payload":{{"remittance":"{remittance}"}},"intent_epoch":0}}"#
        )
    };
    // U+2028, U+2029, U+0085 raw in a string are data; U+001C raw in a string is
    // invalid JSON, but still one line; \r\n endings are tolerated.
    let input = format!(
        "{}\n{}\n{}\r\n{}\nnot json\n",
        line("a", "x\u{2028}y"),
        line("b", "x\u{2029}\u{85}y"),
        line("c", "plain"),
        line("d", "x\u{1c}y"),
    );
    let (stdout, _, ok) = run_jsonl(input.as_bytes(), &["--quiet"]);
    assert!(ok);
    let answers: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 5);
    assert_eq!(answers[0]["id"], "a");
    assert!(answers[0]["key"].is_string());
    assert!(answers[1]["key"].is_string());
    assert!(answers[2]["key"].is_string());
    assert_eq!(answers[3]["error"]["code"], "invalid-json");
    assert_eq!(answers[4]["error"]["code"], "invalid-json");
    assert_eq!(answers[4]["id"], Value::Null);
}

#[test]
fn a_bad_line_never_stops_the_run() {
    let mut input = Vec::new();
    input.extend_from_slice(b"\xff\xfe not utf-8\n");
    input.extend_from_slice(b"\n");
    input.extend_from_slice(b"[1,2]\n");
    input.extend_from_slice(format!("{}\n", "{".repeat(100_000)).as_bytes());
    let (stdout, _, ok) = run_jsonl(&input, &["--quiet"]);
    assert!(ok);
    let codes: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["error"]["code"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(codes, ["invalid-json"; 4]);
}

#[test]
fn single_derivation_takes_the_secret_from_the_environment_only() {
    let secret = "2b".repeat(32);
    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args([
            "derive",
            "--tenant",
            "t1",
            "--action",
            "pix.send",
            "--epoch",
            "1700000000",
            "--material",
        ])
        .args(["--payload", r#"{"amount":"1.005","currency":"brl"}"#])
        .env("INTENTKEY_SECRET", &secret)
        .output()
        .unwrap();
    assert!(out.status.success());
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["material"],
        r#"["t1","pix.send",{"amount":"1.01","currency":"BRL"},1888888]"#
    );
    assert_eq!(answer["key"].as_str().unwrap().len(), 64);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&secret));

    let out = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(["derive", "--tenant", "t1", "--action", "a", "--epoch", "0"])
        .env_remove("INTENTKEY_SECRET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["error"]["code"], "invalid-secret");
    let help = Command::new(env!("CARGO_BIN_EXE_intentkey"))
        .args(["derive", "--help"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&help.stdout).contains("--secret "),
        "no secret flag on argv"
    );
}

/// Lines answered on several threads come back in input order, byte for
/// byte as on one thread, with bad lines and secrets that change from line
/// to line mixed in; the component refuses more than one thread.
#[test]
fn threads_keep_the_input_order() {
    let mut input = Vec::new();
    let mut expected_ids = Vec::new();
    for i in 0..40_000u32 {
        let secret = if i % 7 == 0 { "5a" } else { "00" }.repeat(32);
        match i % 1000 {
            13 => input.extend_from_slice(b"\xff not utf-8"),
            14 => input.extend_from_slice(b"[1]"),
            _ => input.extend_from_slice(
                format!(
                    r#"{{"id":{i},"secret_hex":"{secret}","tenant_id":"t","action_type":"a","payload":{{"amount":"{i}.5","currency":"brl"}},"intent_epoch":{i}}}"#
                )
                .as_bytes(),
            ),
        }
        input.push(b'\n');
        expected_ids.push(if matches!(i % 1000, 13 | 14) {
            Value::Null
        } else {
            Value::from(i)
        });
    }
    // A line longer than a whole chunk of input (4 MiB), then one more line
    // with no line break at the end of the input.
    input.extend_from_slice(
        format!(
            r#"{{"id":"long","secret_hex":"{}","tenant_id":"t","action_type":"a","payload":{{"remittance":"{}"}},"intent_epoch":0}}"#,
            "00".repeat(32),
            "x".repeat(5 << 20)
        )
        .as_bytes(),
    );
    input.extend_from_slice(b"\n[2]");
    expected_ids.extend([Value::from("long"), Value::Null]);
    let (one, _, ok_one) = run_jsonl(&input, &["--quiet", "--threads", "1"]);
    let (four, summary, ok_four) = run_jsonl(&input, &["--threads", "4"]);
    assert!(ok_one && ok_four);
    assert_eq!(one, four, "the answers differ between 1 and 4 threads");
    let answers: Vec<Value> = four
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<Value> = answers.iter().map(|a| a["id"].clone()).collect();
    assert_eq!(ids, expected_ids);
    assert_eq!(
        answers.iter().filter(|a| a["key"].is_string()).count(),
        39_921
    );
    assert!(
        summary.contains("answered 40002 lines: 39921 keys, 81 errors"),
        "{summary}"
    );
    // A line keyed with one secret differs from the same intent under the other.
    assert_ne!(answers[0]["key"], answers[1]["key"]);

    let (_, err, ok) = run_jsonl(b"{}\n", &["--engine", "wasm", "--threads", "2"]);
    assert!(!ok);
    assert!(
        err.contains("--threads applies to --engine native"),
        "{err}"
    );
}
