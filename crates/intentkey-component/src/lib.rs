//! The intentkey core as one WebAssembly component.
//!
//! A thin adapter: it converts WIT types to the core's and back, and calls the
//! host's imports. Every rule lives in `intentkey`. Two worlds, one source:
//! with the `guard` feature (the default) it builds world `intentkey`, which
//! imports a store and a destination and exports the guard; without it, world
//! `pure` (keys, decisions, schema and the sans-I/O flows; imports only
//! secrets and randomness). Build both with `cargo xtask build-component`.

// Generated glue: the canonical ABI needs `unsafe`, and only this glue has it.
#[allow(unsafe_code, missing_docs)]
mod bindings {
    #[cfg(feature = "guard")]
    wit_bindgen::generate!({
        path: "../../wit",
        world: "intentkey",
    });
    #[cfg(not(feature = "guard"))]
    wit_bindgen::generate!({
        path: "../../wit",
        world: "pure",
    });
}

mod convert;
mod decisions;
mod flows;
#[cfg(feature = "guard")]
mod guard;
mod http;
mod keys;
#[cfg(feature = "guard")]
mod memory;
#[cfg(feature = "guard")]
mod packed;
#[cfg(feature = "guard")]
mod redis;

struct Component;

#[allow(unsafe_code)]
mod export {
    use super::Component;
    crate::bindings::export!(Component with_types_in crate::bindings);
}
