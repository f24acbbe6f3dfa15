//! Finding and loading the component for `--engine wasm`.

use std::path::{Path, PathBuf};

use intentkey_wasmtime::WasmEngine;

/// Where the build puts the keys-only component (world `pure`: it needs no
/// store, so the command line supplies none).
fn default_component() -> PathBuf {
    std::env::var_os("INTENTKEY_COMPONENT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/intentkey-pure.wasm"),
        PathBuf::from,
    )
}

/// Loads `path` (or the default): a `.cwasm` from `intentkey precompile`
/// loads in under a millisecond; an `intentkey-pure.wasm` is compiled.
pub fn load(path: Option<&Path>) -> Result<WasmEngine, String> {
    let path = path.map_or_else(default_component, Path::to_path_buf);
    let loaded = if path.extension().is_some_and(|e| e == "cwasm") {
        WasmEngine::from_precompiled_file(&path)
    } else {
        WasmEngine::from_file(&path)
    };
    loaded.map_err(|e| e.to_string())
}

/// `intentkey precompile`: compiles the component ahead of time for this host.
pub fn precompile(component: Option<&Path>, out: &Path) -> Result<(), String> {
    let path = component.map_or_else(default_component, Path::to_path_buf);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let compiled = WasmEngine::precompile(&bytes).map_err(|e| e.to_string())?;
    std::fs::write(out, &compiled).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!(
        "intentkey: wrote {} ({} bytes)",
        out.display(),
        compiled.len()
    );
    Ok(())
}
