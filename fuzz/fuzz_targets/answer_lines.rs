//! The JSON-lines answerer (`intentkey derive` reads these): any line gets
//! exactly one answer line, a JSON object with an `id` and either a key or
//! an error with a stable code; nothing panics, and the answer stays small.
#![no_main]

use intentkey::{Policy, RequestAnswerer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut answerer = RequestAnswerer::new(Policy::default());
    for line in text.split('\n') {
        let answer = answerer.answer_line(line);
        assert!(!answer.contains('\n'), "an answer is one line: {answer}");
        let value: serde_json::Value = serde_json::from_str(&answer).expect("an answer is JSON");
        let object = value.as_object().expect("an answer is a JSON object");
        assert!(object.contains_key("id"), "{answer}");
        assert!(object.contains_key("key") ^ object.contains_key("error"), "{answer}");
        // An answer echoes the line's id at most: it never grows past the line by much.
        assert!(answer.len() <= line.len() + 4096, "{} bytes for a {}-byte line", answer.len(), line.len());
    }
});
