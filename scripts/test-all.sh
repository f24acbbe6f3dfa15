#!/usr/bin/env bash
# Runs every test: formatting, lints, docs, the core's unit/property/vector
# tests, the CLI contract, the oracle differential, the component in wasmtime,
# Node, headless Chromium and Python, and the README's main command.
# Safe on a fresh machine: it runs scripts/setup.sh first.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

target_dir="${CARGO_TARGET_DIR:-target}"
passed=0
step() {
    printf '\n== %s ==\n' "$1"
    shift
    "$@"
    passed=$((passed + 1))
}
trap 'echo; echo "ci: ${passed} passed, 1 failed"' ERR

step "format" cargo fmt --all -- --check
step "clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
step "clippy (the component, for wasm32)" cargo clippy --locked -p intentkey-component --target wasm32-unknown-unknown -- -D warnings
step "docs" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
step "the component imports no WASI" cargo xtask check-imports dist/intentkey.wasm
step "Rust tests (unit, doc, property, golden vectors native and wasmtime, CLI, stores, races, faults, PostgreSQL restart)" cargo test --workspace --locked
step "vectors match their generator and the oracle" python3 tests/vectors/generate.py --check
step "differential against the oracle" python3 tests/differential.py --bin "$target_dir/debug/intentkey" --cases 20000
step "golden vectors in Python (wasmtime-py)" python3 py/run_vectors.py
step "Node tests (golden vectors, API, CLI, stores, guard, middleware, races on pg and SQLite)" bash -c "cd js && npm test"
step "golden vectors in headless Chromium" bash -c "cd js && npm run test:browser"
step "README main command (intentkey demo on SQLite)" cargo run -q --locked -p intentkey-cli -- demo

trap - ERR
echo
echo "ci: ${passed} passed, 0 failed"
