//! Project tasks.
//!
//! ```text
//! cargo xtask build-component   # dist/intentkey.wasm and dist/intentkey-pure.wasm
//! cargo xtask check-imports F   # fail if the component F imports any WASI interface
//! cargo xtask gen-bindings      # write the error codes and versions into every binding
//! cargo xtask gen-bindings --check   # fail, naming the file, when one is stale
//! ```

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use wit_component::{ComponentEncoder, DecodedWasm};

mod gen;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("build-component") => build_component(),
        Some("check-imports") => match args.get(1) {
            Some(path) => std::fs::read(path)
                .map_err(|e| format!("cannot read {path}: {e}"))
                .and_then(|bytes| {
                    check_imports(&bytes).map(|imports| println!("imports: {}", imports.join(", ")))
                }),
            None => Err("usage: cargo xtask check-imports COMPONENT.wasm".into()),
        },
        Some("gen-bindings") => match args.get(1).map(String::as_str) {
            None => gen::gen_bindings(&workspace_root(), false),
            Some("--check") => gen::gen_bindings(&workspace_root(), true),
            Some(_) => Err("usage: cargo xtask gen-bindings [--check]".into()),
        },
        _ => Err(
            "usage: cargo xtask build-component | check-imports COMPONENT.wasm | gen-bindings [--check]"
                .into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The checkout this xtask runs for: `cargo run` (the `cargo xtask` alias)
/// sets `CARGO_MANIFEST_DIR` when it starts the binary. The path compiled in
/// is only the fallback: a target directory shared by two checkouts holds one
/// `xtask` binary, which may have been built for the other one.
fn workspace_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

/// The two components built from one crate: (file, cargo features, world).
const COMPONENTS: [(&str, &[&str], &str); 2] = [
    ("intentkey.wasm", &[], "intentkey"),
    ("intentkey-pure.wasm", &["--no-default-features"], "pure"),
];

fn build_component() -> Result<(), String> {
    for (file, features, world) in COMPONENTS {
        build_one(file, features, world)?;
    }
    Ok(())
}

fn build_one(file: &str, features: &[&str], world: &str) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace_root())
        .args([
            "build",
            "--locked",
            "--package",
            "intentkey-component",
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "component",
        ])
        .args(features)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("building the guest failed (is the target installed? rustup target add wasm32-unknown-unknown)".into());
    }
    let module_path =
        target_dir().join("wasm32-unknown-unknown/component/intentkey_component.wasm");
    let module = std::fs::read(&module_path)
        .map_err(|e| format!("cannot read {}: {e}", module_path.display()))?;
    let component = ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| format!("componentizing failed: {e:#}"))?;
    let imports = check_imports(&component)?;
    let out_dir = workspace_root().join("dist");
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let out = out_dir.join(file);
    // Written beside, then renamed: a reader never sees half a component.
    let partial = out_dir.join(format!(".{file}.partial"));
    std::fs::write(&partial, &component)
        .and_then(|()| std::fs::rename(&partial, &out))
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    // The Python package carries both components as package data.
    let py_dir = workspace_root().join("py/src/intentkey/wasm");
    std::fs::create_dir_all(&py_dir)
        .and_then(|()| std::fs::write(py_dir.join(format!(".{file}.partial")), &component))
        .and_then(|()| std::fs::rename(py_dir.join(format!(".{file}.partial")), py_dir.join(file)))
        .map_err(|e| format!("cannot write {}: {e}", py_dir.join(file).display()))?;
    println!(
        "built dist/{file} and py/src/intentkey/wasm/{file} (world {world}): {} bytes (core module {} bytes); imports: {}",
        component.len(),
        module.len(),
        imports.join(", ")
    );
    Ok(())
}

/// Lists the component's imports, failing if any is a WASI interface.
fn check_imports(component: &[u8]) -> Result<Vec<String>, String> {
    let decoded =
        wit_component::decode(component).map_err(|e| format!("not a component: {e:#}"))?;
    let DecodedWasm::Component(resolve, world) = decoded else {
        return Err("expected a component, found a WIT package".into());
    };
    let imports: Vec<String> = resolve.worlds[world]
        .imports
        .keys()
        .map(|key| resolve.name_world_key(key))
        .collect();
    let wasi: Vec<&String> = imports
        .iter()
        .filter(|name| name.starts_with("wasi:"))
        .collect();
    if !wasi.is_empty() {
        return Err(format!(
            "the component imports WASI, which hosts must not need: {wasi:?}"
        ));
    }
    Ok(imports)
}
