//! DynamoDB for the store test binaries: a table of each test's own on the
//! local endpoint the test script starts (dynalite on 127.0.0.1:4567, or
//! `INTENTKEY_DYNAMODB`), deleted at the end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::{rand_u32, skipped};

/// The endpoint: `INTENTKEY_DYNAMODB` (`dynamodb://HOST:PORT`), else dynalite's.
pub fn endpoint() -> String {
    std::env::var("INTENTKEY_DYNAMODB").unwrap_or_else(|_| "dynamodb://127.0.0.1:4567".to_owned())
}

fn host() -> String {
    endpoint()
        .trim_start_matches("dynamodb://")
        .trim_end_matches('/')
        .to_owned()
}

/// A table of one test's own; deleted when dropped.
///
/// When the endpoint is unreachable: under `CI=true` the test fails;
/// otherwise it prints a line starting `SKIPPED:` and the caller returns.
pub struct DynamoTable {
    pub table: String,
}

impl DynamoTable {
    pub fn new(test: &str) -> Option<DynamoTable> {
        if let Err(e) = TcpStream::connect_timeout(
            &host().parse().expect("INTENTKEY_DYNAMODB names HOST:PORT"),
            Duration::from_secs(2),
        ) {
            let url = endpoint();
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true and no DynamoDB endpoint at {url}: {e}"
            );
            skipped(&format!(
                "{test}: no DynamoDB endpoint at {url} ({e}); the test script starts dynalite (it fails under CI=true)"
            ));
            return None;
        }
        Some(DynamoTable {
            table: format!("ik-rs-{test}-{}-{}", std::process::id(), rand_u32()),
        })
    }

    /// The store URL.
    pub fn url(&self) -> String {
        format!("{}/{}", endpoint().trim_end_matches('/'), self.table)
    }
}

/// One DynamoDB API call over plain HTTP (a local endpoint checks the
/// signature's form, not its value); the response body.
#[allow(dead_code)] // the tests that read the table directly use it
pub fn call(action: &str, body: &str) -> String {
    let mut s = TcpStream::connect(host()).unwrap();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-amz-json-1.0\r\n\
         X-Amz-Target: DynamoDB_20120810.{action}\r\nX-Amz-Date: 20260101T000000Z\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, Signature=0\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        host(),
        body.len()
    );
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or(out)
}

impl Drop for DynamoTable {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            call(
                "DeleteTable",
                &format!(r#"{{"TableName":"{}"}}"#, self.table),
            )
        });
    }
}
