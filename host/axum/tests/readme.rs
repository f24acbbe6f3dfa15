//! The README's `curl` session, run against the `axum-payments` example on
//! PostgreSQL: each `sh` block (after the first, which starts the example)
//! is run with `sh`, and what it prints must be the `http` block that follows
//! it, line for line, all but the `date` header.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use support::common::skipped;

fn readme() -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The fenced blocks of a Markdown text: (language, text).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => current = Some((lang.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => out.push(current.take().unwrap()),
            (Some((_, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

fn without_date(text: &str) -> Vec<String> {
    text.replace("\r\n", "\n")
        .trim_end()
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("date:"))
        .map(str::to_owned)
        .collect()
}

/// The example, built by `cargo test` next to this test's binary.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/axum-payments")
}

#[test]
fn the_readme_session_runs_as_shown() {
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and curl is missing"
        );
        skipped("axum readme: curl is missing");
        return;
    }
    let Some(schema) = support::common::PgSchema::new("axum_readme") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(example())
        .env("INTENTKEY_PG_URL", schema.url())
        .env("PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the axum-payments example (built by cargo test)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("axum-payments: listening on"), "{first}");

    let blocks = blocks(&readme());
    let sessions: Vec<(&String, &String)> = blocks
        .windows(2)
        .filter(|w| w[0].0 == "sh" && w[1].0 == "http")
        .map(|w| (&w[0].1, &w[1].1))
        .collect();
    assert!(
        sessions.len() >= 5,
        "the README shows {} curl steps",
        sessions.len()
    );
    let mut failures = Vec::new();
    for (i, (script, shown)) in sessions.iter().enumerate() {
        let script = script.replace("localhost:3000", &format!("127.0.0.1:{port}"));
        let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        let got = without_date(&String::from_utf8_lossy(&out.stdout));
        let want = without_date(shown);
        if got != want {
            failures.push(format!(
                "step {}:\n{script}\nwant:\n{}\ngot:\n{}",
                i + 1,
                want.join("\n"),
                got.join("\n")
            ));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        failures.is_empty(),
        "the README's session differs:\n{}",
        failures.join("\n\n")
    );
    println!(
        "README: {} curl steps against the example answered as shown",
        sessions.len()
    );
}
