//! The record's columns, shared by the SQL stores (the one schema,
//! `intentkey::claim::schema`).

use intentkey::claim::schema::headers_from_column;
use intentkey::claim::{Record, Response, Status};

use crate::StoreError;

/// The columns in the order the SQL stores select them (PostgreSQL spells
/// them out in `pg_sql`).
#[cfg(feature = "sqlite")]
pub(crate) const COLUMNS: &str =
    "key, fingerprint, tenant_id, action_type, status, owner_token, response_status, \
     response_content_type, response_headers, response_body, response_body_bytes, created_at, \
     expires_at, lookups, next_lookup_at";

/// One row's values, in [`COLUMNS`] order, as the SQL drivers read them.
pub(crate) struct Row {
    pub key: String,
    pub fingerprint: String,
    pub tenant_id: String,
    pub action_type: String,
    pub status: String,
    pub owner_token: String,
    pub response_status: Option<i64>,
    pub response_content_type: Option<String>,
    pub response_headers: Option<String>,
    /// The body written before schema version 3, as text.
    pub response_body: Option<String>,
    /// The body as bytes (schema version 3 on).
    pub response_body_bytes: Option<Vec<u8>>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub lookups: i64,
    pub next_lookup_at: Option<i64>,
}

impl Row {
    /// The record, or a clear error naming the malformed column.
    pub(crate) fn into_record(self) -> Result<Record, StoreError> {
        let key = self.key;
        let status = Status::parse(&self.status).ok_or_else(|| {
            StoreError::fatal(format!(
                "record {key} has an unknown status {:?}",
                self.status
            ))
        })?;
        let response = match self.response_status {
            Some(code) => Some(Response {
                status: u16::try_from(code).map_err(|_| {
                    StoreError::fatal(format!("record {key} has response status {code}"))
                })?,
                content_type: self.response_content_type.unwrap_or_default(),
                headers: headers_from_column(self.response_headers.as_deref())
                    .map_err(|e| StoreError::fatal(format!("record {key}: {}", e.message())))?,
                body: match self.response_body_bytes {
                    Some(bytes) => bytes,
                    None => self.response_body.unwrap_or_default().into_bytes(),
                },
            }),
            None => None,
        };
        Ok(Record {
            key,
            fingerprint: self.fingerprint,
            tenant_id: self.tenant_id,
            action_type: self.action_type,
            status,
            owner_token: self.owner_token,
            response,
            created_at: self.created_at,
            expires_at: self.expires_at,
            lookups: u32::try_from(self.lookups).unwrap_or(u32::MAX),
            next_lookup_at: self.next_lookup_at,
        })
    }
}
