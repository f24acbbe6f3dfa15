//! intentkey hosts: the wasmtime embedding of the intentkey component, and the
//! `intentkey` command-line tool built on it.
//!
//! ```no_run
//! use intentkey_host::wasm::{WasmEngine, WasmIntent, WasmKeys};
//!
//! let engine = WasmEngine::from_file("dist/intentkey.wasm")?;
//! let mut keys = WasmKeys::new(&engine)?;
//! let keyer = keys.keyer(None, &[0x5c; 32])?;
//! let key = keys.derive(&keyer, &WasmIntent {
//!     tenant_id: "t1".into(),
//!     action_type: "pix.send".into(),
//!     payload_json: r#"{"amount":"10.50","currency":"BRL"}"#.into(),
//!     intent_epoch: 1_700_000_000,
//! })?;
//! assert_eq!(key.len(), 64);
//! # Ok::<(), intentkey_host::wasm::HostError>(())
//! ```

pub mod guard;

/// The repository README's examples, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct RepositoryReadme;
pub mod store;
pub mod wasm;
