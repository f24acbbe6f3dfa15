#![doc = include_str!("../README.md")]

pub mod canonical;
pub mod claim;
mod decimal;
mod deriver;
mod error;
pub mod http;
pub mod journal;
mod key;
mod keyer;
mod keyring;
pub mod normalize;
mod payload;
mod policy;
mod reader;
pub mod request;
mod secret;
mod sink;
pub mod telemetry;

pub use deriver::{Deriver, Fingerprint, Intent, FINGERPRINT_LABEL, INTENT_HMAC_LABEL};
pub use error::{Error, ErrorCode, Result};
pub use key::{uuid_key, uuid_key_from_slice, Key, KeyLength};
pub use keyer::Keyer;
pub use keyring::{Keyring, KeyringEntry, MAX_SECRET_ID_LEN, SINGLE_SECRET_ID};
pub use normalize::Normalizer;
pub use payload::{Payload, MAX_DEPTH};
pub use policy::{FieldClass, Policy, DEFAULT_BUCKET_SECONDS};
pub use request::{Answer, RequestAnswerer};
pub use secret::{Secret, MIN_SECRET_LEN};
