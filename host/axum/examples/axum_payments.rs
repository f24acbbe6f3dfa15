//! A payment endpoint behind the intentkey layer, on PostgreSQL, with a fake
//! bank as the destination. Run it, then follow the `curl` session in
//! `host/axum/README.md`:
//!
//! ```sh
//! cargo run -p intentkey-axum --example axum-payments
//! ```
//!
//! `INTENTKEY_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`)
//! picks the database, `PORT` (default 3000) the port, and
//! `INTENTKEY_SECRET` (64 hex digits) the secret: the default is a fixed demo
//! secret, never to be used for real keys.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use intentkey::claim::{Lookup, Response as Stored};
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{AsyncGateway, AsyncStore, Idempotency, IdempotencyLayer, PgStore, Recoverer};

/// The destination: a bank that records each payment under the idempotency
/// key it was sent with (as real payment APIs do), and answers look-ups.
#[derive(Default)]
struct Bank {
    payments: Mutex<HashMap<String, (u64, String)>>,
    next: AtomicU64,
}

impl Bank {
    /// Charges once per key: a second charge with the same key answers the first.
    fn charge(&self, key: &str, body: &str) -> (u64, String) {
        let mut payments = self
            .payments
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        payments
            .entry(key.to_owned())
            .or_insert_with(|| {
                (
                    self.next.fetch_add(1, Ordering::SeqCst) + 1,
                    body.to_owned(),
                )
            })
            .clone()
    }
}

/// Recovery asks the bank whether a payment whose owner vanished happened.
struct BankGateway(Arc<Bank>);

impl AsyncGateway for BankGateway {
    fn ask<'a>(
        &'a self,
        key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Lookup> + Send + 'a>> {
        let found = self
            .0
            .payments
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned();
        Box::pin(async move {
            match found {
                Some((id, _)) => Lookup::Found(
                    Stored::json(201, format!(r#"{{"id":"pay_{id}","status":"paid"}}"#))
                        .with_header("Location", format!("/payments/pay_{id}")),
                ),
                None => Lookup::Absent,
            }
        })
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

/// `POST /payments`: `{"amount": 1000, "to": "…", "delay_ms": 0}`. The
/// delay makes the bank slow, to see a 409 while the first request runs.
async fn pay(
    Extension(bank): Extension<Arc<Bank>>,
    Extension(id): Extension<Idempotency>,
    body: Bytes,
) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let delay = text
        .split("\"delay_ms\":")
        .nth(1)
        .and_then(|rest| {
            rest.trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()
        })
        .and_then(|digits| digits.parse::<u64>().ok())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(delay.min(30_000))).await;
    // The storage key goes to the bank as its idempotency key.
    let (payment, _) = bank.charge(&id.key, &text);
    println!(
        "bank: charged pay_{payment} (tenant {}, key {}…)",
        id.tenant_id,
        &id.key[..12]
    );
    (
        StatusCode::CREATED,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::LOCATION, format!("/payments/pay_{payment}")),
        ],
        format!(r#"{{"id":"pay_{payment}","status":"paid"}}"#),
    )
        .into_response()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("INTENTKEY_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let port = std::env::var("PORT").unwrap_or_else(|_| "3000".to_owned());
    let secret = match std::env::var("INTENTKEY_SECRET") {
        Ok(hex) => Secret::from_hex(&hex)?,
        Err(_) => {
            eprintln!("INTENTKEY_SECRET is not set: using the demo secret (never for real keys)");
            Secret::from_hex(&"5c".repeat(32))?
        }
    };
    let store: Arc<dyn AsyncStore> = Arc::new(PgStore::connect(&url, 8).await?);
    let bank = Arc::new(Bank::default());

    // Settles payments whose owner died mid-request, by asking the bank.
    Recoverer::new(Arc::clone(&store), Arc::new(BankGateway(Arc::clone(&bank)))).spawn(
        Duration::from_secs(30),
        |round| match round {
            Ok(done) if !done.is_empty() => println!("recovery: {} record(s) settled", done.len()),
            Ok(_) => {}
            Err(e) => eprintln!("recovery: {e}"),
        },
    );

    let layer = IdempotencyLayer::with_shared_store(secret, Options::new(Profile::Ietf), store)
        .tenant(|parts| {
            parts
                .headers
                .get("x-tenant")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("demo")
                .to_owned()
        });
    let app = Router::new()
        .route("/payments", post(pay))
        .layer(layer)
        .layer(Extension(bank));
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!(
        "axum-payments: listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, app).await?;
    Ok(())
}
