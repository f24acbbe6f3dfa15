//! Shared by the layer's server tests: a PostgreSQL schema of each test's
//! own (the store crate's test helpers, with the same skip rule: under
//! `CI=true` an unreachable server fails the test), an axum server on a free
//! port, and a small HTTP/1.1 client over a real socket.

#![allow(dead_code)]

#[path = "../../../store/tests/common/mod.rs"]
pub mod common;

use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Serves `app` on 127.0.0.1 (a free port); its address.
pub async fn serve(app: Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

/// An answer as the client read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    /// The first value of a header (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The bytes of `POST path` with these headers and body, HTTP/1.1, keep-alive.
pub fn post_bytes(path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

/// One keep-alive connection.
pub struct Client {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Client {
    pub async fn connect(addr: std::net::SocketAddr) -> std::io::Result<Client> {
        Ok(Client {
            stream: TcpStream::connect(addr).await?,
            buffer: Vec::new(),
        })
    }

    /// Sends one request and reads its answer (Content-Length framed).
    pub async fn post(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<Answer> {
        self.stream
            .write_all(&post_bytes(path, headers, body))
            .await?;
        self.read_answer().await
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(30), self.stream.read(&mut chunk))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 30 s")
            })??;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        self.buffer.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    async fn read_answer(&mut self) -> std::io::Result<Answer> {
        let head_end = loop {
            if let Some(i) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let start = head_end + 4;
        while self.buffer.len() < start + length {
            self.fill().await?;
        }
        let body = self.buffer[start..start + length].to_vec();
        self.buffer.drain(..start + length);
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

/// One request on a fresh connection.
pub async fn post_once(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Answer> {
    Client::connect(addr).await?.post(path, headers, body).await
}

/// Runs `test` on a tokio runtime (2 workers) with the URL of a PostgreSQL
/// schema of its own, dropped afterwards; returns without running it after
/// the skip rule when the server is unreachable (it fails under `CI=true`).
pub fn on_postgres<F, Fut>(name: &str, test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(schema) = common::PgSchema::new(name) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(test(schema.url()));
    drop(runtime);
}
