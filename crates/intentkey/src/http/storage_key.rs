//! The tenant-scoped storage key: what the store's primary key is made of
//! when the client sends its own key.

use crate::canonical::write_str;
use crate::error::Result;
use crate::key::{Key, KeyLength};
use crate::secret::Secret;

use super::header::ClientKey;
use super::{check_tenant, hmac};

/// Domain label of the storage-key material.
pub const CLIENT_KEY_LABEL: &str = "intentkey/client-key/v1";

/// The storage key of a client's key: HMAC-SHA256 under `secret` over the
/// canonical JSON of `["intentkey/client-key/v1", tenant_id, client key]`,
/// as 64 lowercase hex.
///
/// The raw client key is never the store's primary key: two tenants that
/// send the same key get different storage keys, neither can probe the
/// other's, and the table holds no client-chosen strings.
///
/// ```
/// use intentkey::http::{storage_key, storage_key_material, Options, Profile};
/// use intentkey::Secret;
///
/// let secret = Secret::new([7u8; 32])?;
/// let key = Options::new(Profile::Stripe).client_key([("Idempotency-Key", "order-42")]).unwrap();
/// let a = storage_key(&secret, "tenant-a", &key)?;
/// let b = storage_key(&secret, "tenant-b", &key)?;
/// assert_ne!(a, b);
/// assert_eq!(a.as_str().len(), 64);
/// assert_eq!(String::from_utf8(storage_key_material("tenant-a", &key)?).unwrap(), r#"["intentkey/client-key/v1","tenant-a","order-42"]"#);
/// # Ok::<(), intentkey::Error>(())
/// ```
///
/// # Errors
/// `invalid-tenant-id` when `tenant_id` is empty.
pub fn storage_key(secret: &Secret, tenant_id: &str, client_key: &ClientKey) -> Result<Key> {
    let material = storage_key_material(tenant_id, client_key)?;
    Ok(Key::from_digest(&hmac(secret, &material), KeyLength::FULL))
}

/// The bytes [`storage_key`] hashes: the canonical JSON of
/// `["intentkey/client-key/v1", tenant_id, client key]`.
///
/// # Errors
/// `invalid-tenant-id` when `tenant_id` is empty.
pub fn storage_key_material(tenant_id: &str, client_key: &ClientKey) -> Result<Vec<u8>> {
    check_tenant(tenant_id)?;
    let key = client_key.as_str();
    let mut out = Vec::with_capacity(CLIENT_KEY_LABEL.len() + tenant_id.len() + key.len() + 10);
    out.push(b'[');
    write_str(&mut out, CLIENT_KEY_LABEL);
    out.push(b',');
    write_str(&mut out, tenant_id);
    out.push(b',');
    write_str(&mut out, key);
    out.push(b']');
    Ok(out)
}
