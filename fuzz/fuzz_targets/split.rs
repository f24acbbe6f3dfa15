//! How the HTTP targets read their input: header values up to the first
//! 0xff byte (split at 0xfe), then the body.

/// The key header values and the body of `rest`.
pub fn values_and_body(rest: &[u8]) -> (Vec<String>, &[u8]) {
    let (values, body) = match rest.iter().position(|&b| b == 0xff) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let values = if values.is_empty() {
        Vec::new()
    } else {
        values.split(|&b| b == 0xfe).map(|v| String::from_utf8_lossy(v).into_owned()).collect()
    };
    (values, body)
}
