//! intentkey for Rust services: the core's HTTP rules as a tower layer for
//! axum, over stores that never block the runtime.
//!
//! - [`IdempotencyLayer`]: `Router::layer(…)`. The same rules as the npm
//!   adapters, from the same core: the `ietf`, `stripe` and `ofb` profiles,
//!   the tenant-scoped storage key, the request fingerprint (RFC 8785 JSON),
//!   the replay allow-list with binary bodies, `Idempotent-Replayed`,
//!   `Retry-After`, and the outcome classes. The owner's handler gets the
//!   key as an [`Idempotency`] extension.
//! - Stores ([`AsyncStore`]): `PgStore` (cargo feature `postgres`:
//!   tokio-postgres with a pool, the one schema and migration, so Node and
//!   Rust services can share one database), [`memory()`], and [`Blocking`]
//!   over a synchronous store such as SQLite.
//! - [`Recoverer`]: recovery of abandoned claims as a call or a task, asking
//!   an async [`AsyncGateway`].
//!
//! The stores, the recoverer and the loops that drive the core's flows live
//! in `intentkey_store::tokio` (cargo feature `tokio`, with `AsyncGuard` for
//! effects outside HTTP); this crate re-exports them.
//!
//! ```
//! use axum::{body::Body, http::Request, routing::post, Extension, Router};
//! use intentkey::http::{Options, Profile};
//! use intentkey::Secret;
//! use intentkey_axum::{memory, Idempotency, IdempotencyLayer};
//! use tower::ServiceExt;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! async fn pay(Extension(id): Extension<Idempotency>) -> (axum::http::StatusCode, String) {
//!     (axum::http::StatusCode::CREATED, format!("paid once under {}", &id.key[..8]))
//! }
//! let layer = IdempotencyLayer::new(Secret::new([7u8; 32])?, Options::new(Profile::Ietf), memory());
//! let app = Router::new().route("/payments", post(pay)).layer(layer);
//! let request = || Request::post("/payments")
//!     .header("Idempotency-Key", "\"pay-42\"")
//!     .header("Content-Type", "application/json")
//!     .body(Body::from(r#"{"amount":100}"#)).unwrap();
//! let first = app.clone().oneshot(request()).await.unwrap();
//! assert_eq!(first.status(), 201);
//! let again = app.oneshot(request()).await.unwrap();
//! assert_eq!(again.headers()["idempotent-replayed"], "true");
//! # Ok::<(), intentkey::Error>(())
//! # }).unwrap();
//! ```

mod layer;
mod telemetry;

#[cfg(feature = "postgres")]
pub use intentkey_store::tokio::PgStore;
pub use intentkey_store::tokio::{
    drive, memory, AsyncGateway, AsyncStore, Blocking, Inline, Inserted, Recoverer, RecoveryReport,
    Reexecute, StoreFuture,
};
pub use layer::{Idempotency, IdempotencyLayer, IdempotencyService, Phase};

pub use intentkey_store::StoreError;
