//! The intentkey component on wasmtime.
//!
//! One component binary, two worlds:
//!
//! - **keys** (world `pure`, `dist/intentkey-pure.wasm`): [`WasmKeys`]
//!   derives keys and fingerprints. The host supplies secrets and
//!   randomness, nothing else.
//! - **guard** (world `intentkey`, `dist/intentkey.wasm`): [`WasmGuard`]
//!   runs the core's one claim flow inside the component against a real
//!   [`intentkey_store::Store`] (memory, SQLite, PostgreSQL) and a real
//!   [`intentkey_store::Gateway`], both given at construction: no import is
//!   stubbed. It derives keys too.
//! - **http** (world `pure`): [`WasmEndpoint`] runs the core's HTTP rules
//!   (the `http` export): it admits a request (key header, body limit,
//!   storage key, fingerprint) and writes each profile's answers.
//! - **serve** (world `intentkey`): [`WasmServer`] serves one request at a
//!   time through the core's serve flow (admit, claim, the handler,
//!   capture, finish, answer) inside the component, over a real store; the
//!   host runs the handler when the flow asks and waits out its pauses.
//!
//! [`WasmEngine`] compiles a component once (or loads a precompiled copy)
//! and tells its world; instances reuse one component instance for every
//! call. A trap poisons an instance, so the trapping call returns
//! [`HostError::Trap`] and the next call runs on a fresh instance, with its
//! keyers rebuilt and its store and gateway kept. The component's errors
//! come back as the core's own [`intentkey::Error`] ([`HostError::Core`]).
//!
//! Secrets: the host keeps each keyer's secret (to rebuild it after a trap)
//! until the [`WasmKeyer`] is dropped, then wipes it and drops the guest
//! resource holding the guest's copy. The secret crosses into the guest
//! through the `secrets` import once per keyer (again after a trap); that
//! transient buffer is freed by wasmtime without a wipe. No `Debug` here
//! prints secret bytes.
//!
//! ```
//! use std::sync::Arc;
//! use intentkey::claim::{Attempt, ClaimOutcome, EffectResult, Finished, Lookup, Response, Rules};
//! use intentkey_store::{Gateway, MemoryStore};
//! use intentkey_wasmtime::{WasmEngine, WasmGuard, WasmIntent, WasmKeys};
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap();
//!
//! // Keys alone: world pure (both files are built by `cargo xtask build-component`).
//! let engine = WasmEngine::from_file("dist/intentkey-pure.wasm")?;
//! let mut keys = WasmKeys::new(&engine)?;
//! let keyer = keys.keyer(None, &[0x5c; 32])?;
//! let intent = WasmIntent {
//!     tenant_id: "t1".into(),
//!     action_type: "pix.send".into(),
//!     payload_json: r#"{"amount":"10.50","currency":"BRL"}"#.into(),
//!     intent_epoch: 1_700_000_000,
//! };
//! let key = keys.derive(&keyer, &intent)?;
//! assert_eq!(key.len(), 64);
//!
//! // The guard: world intentkey, over a real store and destination.
//! struct Destination;
//! impl Gateway for Destination {
//!     fn lookup(&self, _key: &str) -> Lookup { Lookup::Unknown }
//!     fn read_your_writes(&self) -> bool { false }
//! }
//! let engine = WasmEngine::from_file("dist/intentkey.wasm")?;
//! let mut guard = WasmGuard::new(&engine, Arc::new(MemoryStore::default()), Arc::new(Destination))?;
//! let attempt = Attempt { key, fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
//! let (outcome, token) = guard.claim(&attempt, 1_700_000_000)?;
//! assert_eq!(outcome, ClaimOutcome::Owned);
//! let paid = EffectResult::Answered(Response::json(201, r#"{"id":"pay_1"}"#));
//! assert_eq!(guard.finish(&attempt.key, &token, paid, 1_700_000_001, &Rules::default())?, Finished::Stored);
//! let (replay, _) = guard.claim(&attempt, 1_700_000_002)?;
//! assert!(matches!(replay, ClaimOutcome::Done(r) if r.status == 201));
//! # Ok::<(), intentkey_wasmtime::HostError>(())
//! ```

use std::fmt;

use intentkey::{Error, ErrorCode};

mod bindings;
mod convert;
mod endpoint;
mod engine;
mod guard;
mod host_state;
mod imports;
mod instance;
mod keyer;
mod keys;
mod keys_api;
mod keys_export;
mod server;

pub use endpoint::WasmEndpoint;
pub use engine::{WasmEngine, World};
pub use guard::WasmGuard;
pub use keyer::WasmKeyer;
pub use keys::WasmKeys;
pub use server::WasmServer;

/// A failure calling the component.
#[derive(Debug)]
pub enum HostError {
    /// The core refused (or its store failed): the same typed error, code,
    /// field and message, that the native core gives. Store failures carry
    /// `store-unavailable` (retryable) or `store-failed` and the store's
    /// message.
    Core(Error),
    /// The component trapped or could not run; the instance has been replaced.
    Trap(String),
    /// The component could not be loaded, compiled or instantiated, or is
    /// the other world than the one asked for.
    Load(String),
    /// The host used the API wrongly (a keyer with an instance that did not
    /// make it).
    Misuse(String),
}

impl HostError {
    /// The core's error code, for [`HostError::Core`].
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            HostError::Core(e) => Some(e.code()),
            _ => None,
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Core(e) => write!(f, "{e}"),
            HostError::Trap(m) => write!(f, "the intentkey component trapped: {m}"),
            HostError::Load(m) => write!(f, "cannot load the intentkey component: {m}"),
            HostError::Misuse(m) => write!(f, "intentkey host misuse: {m}"),
        }
    }
}

impl std::error::Error for HostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HostError::Core(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Error> for HostError {
    fn from(e: Error) -> Self {
        HostError::Core(e)
    }
}

/// One intent for the `fields` mode, as the component takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WasmIntent {
    /// The tenant.
    pub tenant_id: String,
    /// The action type.
    pub action_type: String,
    /// The payload as JSON object text.
    pub payload_json: String,
    /// The recorded intent time in seconds.
    pub intent_epoch: i64,
}
