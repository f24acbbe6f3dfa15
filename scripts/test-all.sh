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

# Runs a command with its output also kept in a log, so skipped tests can be
# counted: a test that cannot reach PostgreSQL prints a line starting
# "SKIPPED:" (outside CI; under CI=true it fails instead), and so does an
# oracle check in a clone with no ../shared beside it.
logs="$(mktemp -d)"
logged() {
    local name="$1"
    shift
    "$@" 2>&1 | tee "$logs/$name.log"
    return "${PIPESTATUS[0]}"
}

# A real Redis Cluster (3 masters, 3 replicas on 127.0.0.1:7000-7005) for the
# cluster store tests in every host, stopped when this script ends; the
# failover tests make their own on 7100-7105 and 7110-7115.
# dynalite, a local DynamoDB endpoint, for the DynamoDB store tests (also
# stopped at the end).
bash scripts/redis-cluster.sh start
bash scripts/dynalite.sh start 4567
trap 'bash scripts/redis-cluster.sh stop; bash scripts/dynalite.sh stop 4567' EXIT
export INTENTKEY_REDIS_CLUSTER="redis+cluster://127.0.0.1:7000"
export INTENTKEY_DYNAMODB="dynamodb://127.0.0.1:4567"

step "format" cargo fmt --all -- --check
step "clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
step "clippy (the component, for wasm32)" cargo clippy --locked -p intentkey-component --target wasm32-unknown-unknown -- -D warnings
step "docs" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
step "generated bindings are up to date (error codes, WIT and package versions)" cargo xtask gen-bindings --check
step "every relative link in the Markdown resolves (files and #anchors)" python3 scripts/check_links.py
step "the components import no WASI" bash -c "cargo xtask check-imports dist/intentkey.wasm && cargo xtask check-imports dist/intentkey-pure.wasm"
# The component crate is a wasm32 cdylib (built and checked above); natively its
# exported symbols do not link, so the native test run leaves it out.
step "Rust tests (unit, doc, property, golden vectors native and wasmtime, CLI, stores (SQLite, PostgreSQL, MySQL/MariaDB, Redis, Redis Cluster with a failover under load, DynamoDB on dynalite), races, faults, recovery races, PostgreSQL restart, the journal)" \
    logged rust-tests cargo test --workspace --exclude intentkey-component --locked
step "vectors match their generator and the oracle" logged vectors python3 tests/vectors/generate.py --check
step "differential against the oracle" logged differential python3 tests/differential.py --bin "$target_dir/debug/intentkey" --cases 20000
step "Python package: the wheel (pure, both components, py.typed) in a fresh virtualenv, mypy --strict, pytest on the installed wheel (892 golden vectors, 36 HTTP cases/192 steps, guard, keyring, CLI and demo, stores on SQLite, PostgreSQL, MySQL, Redis, Redis Cluster and DynamoDB shared with Node and Rust, MySQL kill trials, ASGI/WSGI middleware with httpx and Stripe's SDK, the journal and the openai agent, Celery kill trials on RabbitMQ, a virtualenv with only the wheel)" \
    logged python-tests env INTENTKEY_BIN="$target_dir/debug/intentkey" bash scripts/test-py.sh
step "Node tests (golden vectors, API, CLI, stores, guard, middleware, races on pg, SQLite, MySQL, Redis, Redis Cluster and DynamoDB, store kill trials on Redis and MySQL, BullMQ and pg-boss kill trials, the journal and the openai agent loop)" logged node-tests bash -c "cd js && npm test"
step "golden vectors in headless Chromium" bash -c "cd js && npm run test:browser"
step "the packed npm package in Bun (key and HTTP vectors, intentkey/fetch)" logged bun bash -c "cd js && npm run -s test:bun"
step "the packed npm package in Deno (key and HTTP vectors, intentkey/fetch)" logged deno bash -c "cd js && npm run -s test:deno"
step "the packed npm package in workerd via miniflare (key and HTTP vectors, intentkey/fetch)" logged workerd bash -c "cd js && npm run -s test:workerd"
step "audits: npm audit of the npm package's dependencies, cargo deny (bans, licenses, sources)" bash -c "(cd js && npm audit --omit=dev) && cargo deny check bans licenses sources"
step "fuzz smoke (every target 10 s, including native against wasmtime; no crash, no trap, no difference)" logged fuzz bash scripts/fuzz.sh 10
step "README main command (intentkey demo on SQLite)" cargo run -q --locked -p intentkey-cli -- demo

trap - ERR
skipped="$(cat "$logs"/*.log | grep -c 'SKIPPED' || true)"
echo
if [ "$skipped" -gt 0 ]; then
    echo "ci: ${skipped} test(s) SKIPPED (PostgreSQL unreachable or oracle absent):"
    cat "$logs"/*.log | grep 'SKIPPED' | sort | uniq -c
fi
echo "ci: ${passed} passed, 0 failed, ${skipped} skipped"
