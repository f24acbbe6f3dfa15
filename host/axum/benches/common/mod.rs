//! The service both benches measure: one `POST /orders` handler answering
//! 201, bare or behind the layer (profile `ietf`).

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{AsyncStore, IdempotencyLayer};

/// The test database (trust auth).
pub const PG: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The request body.
pub const BODY: &str = r#"{"sku":"A1","qty":2}"#;
/// The handler's answer.
pub const ANSWER: &str = r#"{"id":"ord_1","status":"accepted"}"#;

async fn create_order() -> impl IntoResponse {
    (
        StatusCode::CREATED,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::LOCATION, "/orders/ord_1"),
        ],
        ANSWER,
    )
}

/// The handler alone.
pub fn bare() -> Router {
    Router::new().route("/orders", post(create_order))
}

/// The handler behind the layer over `store`.
pub fn guarded(store: Arc<dyn AsyncStore>) -> Router {
    let layer = IdempotencyLayer::with_shared_store(
        Secret::new([0x5c; 32]).unwrap(),
        Options::new(Profile::Ietf),
        store,
    );
    bare().layer(layer)
}

/// The floor of a first request on PostgreSQL: two commits into the store's
/// own table (its columns and its three indexes), an insert of eight
/// columns and an update writing the answer, prepared, on one pooled
/// connection: the least work for an answer kept where the layer keeps it.
pub async fn two_commits(pool: &deadpool_postgres::Pool, key: &str) {
    let c = pool.get().await.unwrap();
    let ins = c
        .prepare_cached(
            "INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, \
             status, owner_token, created_at, lookups) VALUES ($1, 'fp', 't', 'a', \
             'in_flight', '0123456789abcdef0123456789abcdef', 1700000000, 0) \
             ON CONFLICT (key) DO NOTHING",
        )
        .await
        .unwrap();
    let upd = c
        .prepare_cached(
            "UPDATE intentkey_records SET status = 'done', response_status = 201, \
             response_content_type = 'application/json', response_body_bytes = $2, \
             expires_at = 1700086400, next_lookup_at = NULL WHERE key = $1",
        )
        .await
        .unwrap();
    assert_eq!(c.execute(&ins, &[&key]).await.unwrap(), 1);
    assert_eq!(
        c.execute(&upd, &[&key, &ANSWER.as_bytes()]).await.unwrap(),
        1
    );
}
