//! The generated bindings, one module per world. Private: the crate's API is
//! hand-written over them.

/// World `pure`: imports secrets and randomness; exports keys, claims,
/// schema and flows.
pub(crate) mod pure {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "pure",
    });
}

/// World `intentkey`: `pure` plus the store and gateway imports and the
/// guard export. The shared interfaces are `pure`'s, so one set of types
/// serves both worlds.
pub(crate) mod full {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "intentkey",
        with: {
            "intentkey:core/types": super::pure::intentkey::core::types,
            "intentkey:core/secrets": super::pure::intentkey::core::secrets,
            "intentkey:core/random": super::pure::intentkey::core::random,
        },
    });
}
