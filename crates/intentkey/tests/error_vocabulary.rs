//! One error vocabulary: the same set of kebab-case codes in the Rust core
//! (`ErrorCode::ALL`), the WIT contract (`enum error-code`), the npm
//! package's types (`ErrorCode` in js/src/api.d.ts) and the Python binding
//! (`ErrorCode`). A code known to one place and missing from another fails
//! here, listing each missing code under each place: the bindings must never
//! meet a code they do not know (and map it, silently, to something else).
//!
//! The files are read as text, by path from the repository root; the sets are
//! compared, not written down here, so adding a code means adding it
//! everywhere and nothing in this file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use intentkey::ErrorCode;

type Codes = BTreeSet<String>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = repo().join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {relative} ({}): {e}", path.display()))
}

/// The text from just after `start` up to the first `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str, place: &str) -> Result<&'a str, String> {
    let from = text
        .find(start)
        .ok_or_else(|| format!("{place}: `{start}` not found"))?
        + start.len();
    let len = text[from..]
        .find(end)
        .ok_or_else(|| format!("{place}: no `{end}` after `{start}`"))?;
    Ok(&text[from..from + len])
}

fn is_kebab(code: &str) -> bool {
    !code.is_empty()
        && code.starts_with(|c: char| c.is_ascii_lowercase())
        && !code.ends_with('-')
        && !code.contains("--")
        && code
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn insert(codes: &mut Codes, code: &str, place: &str) -> Result<(), String> {
    if !is_kebab(code) {
        return Err(format!("{place}: {code:?} is not a kebab-case code"));
    }
    if !codes.insert(code.to_owned()) {
        return Err(format!("{place}: {code} is listed twice"));
    }
    Ok(())
}

/// Drops `//` comments (WIT `///` docs included) and `/* … */` blocks.
fn strip_c_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = rest[i..].find("*/").map_or("", |j| &rest[i + j + 2..]);
    }
    out.push_str(rest);
    out.lines()
        .map(|line| line.find("//").map_or(line, |i| &line[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Quoted literals (`'…'` or `"…"`), and whatever else stands between them.
fn literals(text: &str) -> (Vec<&str>, String) {
    let mut found = Vec::new();
    let mut other = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(['\'', '"']) {
        other.push_str(&rest[..i]);
        let quote = rest[i..].chars().next().unwrap_or('"');
        let body = &rest[i + 1..];
        match body.find(quote) {
            Some(j) => {
                found.push(&body[..j]);
                rest = &body[j + 1..];
            }
            None => {
                other.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    other.push_str(rest);
    (found, other)
}

/// The cases of `enum error-code { … }` in a WIT document.
fn wit_codes(wit: &str) -> Result<Codes, String> {
    let place = "wit/intentkey.wit enum error-code";
    let text = strip_c_comments(wit);
    let body = between(&text, "enum error-code", "}", place)?;
    let body = body
        .trim_start()
        .strip_prefix('{')
        .ok_or_else(|| format!("{place}: no `{{` after the name"))?;
    let mut codes = Codes::new();
    for case in body.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        // `%name` escapes a WIT keyword; the code is the name.
        insert(&mut codes, case.trim_start_matches('%'), place)?;
    }
    Ok(codes)
}

/// The members of `export type ErrorCode = 'a' | 'b' …;` in a .d.ts file.
fn ts_codes(dts: &str) -> Result<Codes, String> {
    let place = "js/src/api.d.ts type ErrorCode";
    let text = strip_c_comments(dts);
    let union = between(&text, "export type ErrorCode =", ";", place)?;
    let (found, other) = literals(union);
    if let Some(stray) = other
        .split(|c: char| c == '|' || c.is_whitespace())
        .find(|s| !s.is_empty())
    {
        return Err(format!(
            "{place}: {stray:?} is not a string literal; the union must list the codes only"
        ));
    }
    let mut codes = Codes::new();
    for code in found {
        insert(&mut codes, code, place)?;
    }
    Ok(codes)
}

/// The members of `ErrorCode = Literal[ … ]` in a Python module.
fn py_codes(py: &str) -> Result<Codes, String> {
    let place = "py/src/intentkey/_codes.py ErrorCode";
    let text: Vec<&str> = py
        .lines()
        .map(|line| line.find('#').map_or(line, |i| &line[..i]))
        .collect();
    let text = text.join("\n");
    let set = between(&text, "ErrorCode = Literal[", "]", place)?;
    let (found, other) = literals(set);
    if let Some(stray) = other
        .split(|c: char| c == ',' || c.is_whitespace())
        .find(|s| !s.is_empty())
    {
        return Err(format!(
            "{place}: {stray:?} is not a string literal; the set must list the codes only"
        ));
    }
    let mut codes = Codes::new();
    for code in found {
        insert(&mut codes, code, place)?;
    }
    Ok(codes)
}

fn rust_codes() -> Codes {
    let mut codes = Codes::new();
    for code in ErrorCode::ALL {
        insert(&mut codes, code.as_str(), "ErrorCode::ALL").unwrap();
        assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
    }
    codes
}

/// Every place, by name, with its codes (or why they could not be read).
fn places() -> Vec<(&'static str, Result<Codes, String>)> {
    vec![
        (
            "Rust ErrorCode::ALL (crates/intentkey/src/error.rs)",
            Ok(rust_codes()),
        ),
        (
            "WIT enum error-code (wit/intentkey.wit)",
            wit_codes(&read("wit/intentkey.wit")),
        ),
        (
            "TypeScript type ErrorCode (js/src/api.d.ts)",
            ts_codes(&read("js/src/api.d.ts")),
        ),
        (
            "Python ErrorCode (py/src/intentkey/_codes.py)",
            py_codes(&read("py/src/intentkey/_codes.py")),
        ),
    ]
}

/// What each place lacks of the union of all places: empty when they agree.
fn disagreements(places: &[(&str, Codes)]) -> Vec<String> {
    let mut known_to: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (place, codes) in places {
        for code in codes {
            known_to.entry(code).or_default().push(place);
        }
    }
    let mut problems = Vec::new();
    for (place, codes) in places {
        let missing: Vec<String> = known_to
            .iter()
            .filter(|(code, _)| !codes.contains(**code))
            .map(|(code, by)| format!("  - {code} (in {})", by.join(", ")))
            .collect();
        if !missing.is_empty() {
            problems.push(format!("{place} lacks:\n{}", missing.join("\n")));
        }
    }
    problems
}

#[test]
fn every_place_has_every_error_code() {
    let mut read_errors = Vec::new();
    let mut sets = Vec::new();
    for (place, codes) in places() {
        match codes {
            Ok(codes) if codes.is_empty() => read_errors.push(format!("{place}: no codes found")),
            Ok(codes) => sets.push((place, codes)),
            Err(e) => read_errors.push(e),
        }
    }
    assert!(
        read_errors.is_empty(),
        "could not read the error codes:\n{}",
        read_errors.join("\n")
    );
    let problems = disagreements(&sets);
    assert!(
        problems.is_empty(),
        "the error codes differ between places (add each code to every place):\n{}",
        problems.join("\n")
    );
}

/// `secret-too-short` → `SecretTooShort`, the Rust (and wit-bindgen) variant name.
fn camel(code: &str) -> String {
    code.split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// The Rust source of the component adapter (every file under its `src/`),
/// with all whitespace removed.
fn component_source() -> String {
    let dir = repo().join("crates/intentkey-component/src");
    let mut files = vec![dir];
    let mut source = String::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_some_and(|x| x == "rs") {
            source.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    source.split_whitespace().collect()
}

/// The codes the shared conversions (`crates/intentkey-wit-convert`) do not
/// list in their `ErrorCode` arms: each listed name maps the core's case to
/// the WIT case of the same name, both ways.
fn unmapped_codes(convert: &str) -> Result<Vec<String>, String> {
    let list = between(
        convert,
        "__enum!(wit::ErrorCode, ErrorCode, {",
        "});",
        "crates/intentkey-wit-convert/src/lib.rs ErrorCode arms",
    )?;
    let listed: BTreeSet<&str> = list
        .lines()
        .map(|l| l.trim().trim_end_matches(','))
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect();
    Ok(ErrorCode::ALL
        .iter()
        .map(|code| camel(code.as_str()))
        .filter(|name| !listed.contains(name.as_str()))
        .collect())
}

#[test]
fn the_component_maps_every_code_to_its_own_wit_case() {
    // A code without its own arm would cross the component boundary as some
    // other code (a catch-all arm), which callers could not tell apart. The
    // component converts through the shared macro, which maps each listed
    // name to the WIT case of the same name.
    let component = component_source();
    assert!(
        component.contains("intentkey_wit_convert::convert_types!("),
        "crates/intentkey-component/src does not convert through intentkey_wit_convert::convert_types!"
    );
    let missing = unmapped_codes(&read("crates/intentkey-wit-convert/src/lib.rs")).unwrap();
    assert!(
        missing.is_empty(),
        "crates/intentkey-wit-convert has no ErrorCode arm for: {}",
        missing.join(", ")
    );
}

#[test]
fn the_vectors_use_known_codes_only() {
    let known = rust_codes();
    let mut unknown = BTreeSet::new();
    // The generator's list of the codes vectors may expect.
    let generator = read("tests/vectors/generate.py");
    let listed = between(
        &generator,
        "ERROR_CODES = frozenset(\"\"\"",
        "\"\"\"",
        "tests/vectors/generate.py ERROR_CODES",
    )
    .unwrap();
    for code in listed.split_whitespace() {
        if !known.contains(code) {
            unknown.insert(format!("{code} (tests/vectors/generate.py ERROR_CODES)"));
        }
    }
    // Every expectedError in the vector files.
    let dir = repo().join("tests/vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no vector files in {}", dir.display());
    for file in files {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let mut stack = vec![&doc];
        while let Some(value) = stack.pop() {
            match value {
                serde_json::Value::Object(members) => {
                    if let Some(serde_json::Value::String(code)) = members.get("expectedError") {
                        if !known.contains(code) {
                            let name = file.file_name().unwrap().to_string_lossy().into_owned();
                            unknown.insert(format!("{code} ({name})"));
                        }
                    }
                    stack.extend(members.values());
                }
                serde_json::Value::Array(items) => stack.extend(items),
                _ => {}
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "codes that ErrorCode does not have: {unknown:?}"
    );
}

// The readers themselves: a reader that found nothing, or too much, would
// make the comparison above meaningless.

#[test]
fn the_wit_reader_takes_cases_and_skips_docs() {
    let wit = "interface types {\n  /// codes, e.g. not-a-case,\n  enum error-code {\n    /// first, with a comma\n    secret-too-short,\n    %flow-misuse, // trailing\n    invalid-json\n  }\n  enum status { done }\n}";
    let codes = wit_codes(wit).unwrap();
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        ["flow-misuse", "invalid-json", "secret-too-short"]
    );
    assert!(wit_codes("enum error-code { a, a }").is_err());
    assert!(wit_codes("enum error-code { Bad_Case }").is_err());
    assert!(wit_codes("enum status { done }").is_err());
}

#[test]
fn the_ts_reader_takes_literals_and_refuses_an_open_union() {
    let dts = "/** The codes: 'not-this'. */\nexport type ErrorCode =\n  | 'secret-too-short' // first\n  | \"invalid-json\";\nexport type Other = 'x';";
    let codes = ts_codes(dts).unwrap();
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        ["invalid-json", "secret-too-short"]
    );
    assert!(ts_codes("export type ErrorCode = 'a' | string;").is_err());
    assert!(ts_codes("export class IntentkeyError { code: string }").is_err());
}

#[test]
fn the_python_reader_takes_literals() {
    let py = "ErrorCode = Literal[\n    \"secret-too-short\",  # first\n    'invalid-json',\n]\nOTHER = ['x']";
    let codes = py_codes(py).unwrap();
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        ["invalid-json", "secret-too-short"]
    );
    assert!(py_codes("ErrorCode = Literal['a', CODE]").is_err());
    assert!(py_codes("CODES = ['a']").is_err());
}

#[test]
fn a_code_missing_from_one_place_is_named() {
    let set = |codes: &[&str]| codes.iter().map(|c| (*c).to_owned()).collect::<Codes>();
    let problems = disagreements(&[
        ("rust", set(&["a", "b", "c"])),
        ("wit", set(&["a", "c"])),
        ("ts", set(&["a", "b", "c", "d"])),
    ]);
    assert_eq!(
        problems,
        [
            "rust lacks:\n  - d (in ts)",
            "wit lacks:\n  - b (in rust, ts)\n  - d (in ts)",
        ]
    );
    assert_eq!(camel("secret-too-short"), "SecretTooShort");
}

#[test]
fn the_arm_reader_finds_a_missing_code() {
    let list = |names: &[String]| -> String {
        format!(
            "$crate::__enum!(wit::ErrorCode, ErrorCode, {{\n    // generated\n{}\n}});",
            names
                .iter()
                .map(|n| format!("    {n},\n"))
                .collect::<String>()
        )
    };
    let all: Vec<String> = ErrorCode::ALL.iter().map(|c| camel(c.as_str())).collect();
    assert!(unmapped_codes(&list(&all)).unwrap().is_empty());
    let without: Vec<String> = all
        .iter()
        .filter(|n| *n != "InvalidRandom")
        .cloned()
        .collect();
    assert_eq!(unmapped_codes(&list(&without)).unwrap(), ["InvalidRandom"]);
    assert!(unmapped_codes("no arms here").is_err());
}

/// Every error code SECURITY.md names is one the core raises: each
/// backticked kebab-case word there is an [`ErrorCode`], or one of the few
/// named terms that are not codes (a key strategy).
#[test]
fn security_md_names_only_real_error_codes() {
    const NOT_CODES: [&str; 1] = ["intent-hmac"];
    let text = read("SECURITY.md");
    let codes: Codes = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    let named: Codes = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| word.contains('-') && is_kebab(word))
        .map(str::to_owned)
        .collect();
    let unknown: Vec<&String> = named
        .iter()
        .filter(|w| !codes.contains(*w) && !NOT_CODES.contains(&w.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "SECURITY.md names error codes the core does not have: {unknown:?}"
    );
    for term in NOT_CODES {
        assert!(
            named.contains(term),
            "SECURITY.md no longer names `{term}`: drop it from NOT_CODES"
        );
    }
    // A short secret is `secret-too-short` (`invalid-secret` is a missing or non-hex one).
    assert!(
        text.contains("A shorter secret is refused (`secret-too-short`)"),
        "SECURITY.md must name the code a short secret gets"
    );
}
