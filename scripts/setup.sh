#!/usr/bin/env bash
# Installs and builds what the tests need. Idempotent; safe on a fresh machine
# (installing Chromium needs root, as on the project machines and in CI).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== setup: %s ==\n' "$*"; }
command -v cargo >/dev/null || { echo "setup: cargo is missing; install Rust with rustup" >&2; exit 1; }
command -v python3 >/dev/null || { echo "setup: python3 is missing (the oracle, the vector generator and py/ need it)" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup: npm is missing (Node.js 20 runs js/)" >&2; exit 1; }

say "Rust toolchain and the wasm32-unknown-unknown target"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
rustup target add wasm32-unknown-unknown
cargo fetch --locked >/dev/null

say "the fuzzing and audit tools: nightly, cargo-fuzz, cargo-deny"
rustup toolchain install nightly --profile minimal >/dev/null
# Installed once per machine (cargo install skips a version already there).
cargo install --locked --quiet cargo-fuzz --version 0.13.2
cargo install --locked --quiet cargo-deny --version 0.20.2

say "Python: venv and ensurepip (scripts/test-py.sh installs py/requirements-dev.txt into its own virtualenv)"
python3 -c 'import venv, ensurepip' || { echo "setup: python3 lacks venv/ensurepip (Debian: apt-get install python3-venv)" >&2; exit 1; }

say "Chromium (Debian's) for the browser test"
if ! command -v chromium >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
chromium --version

say "the component: dist/intentkey.wasm"
cargo xtask build-component

say "the npm package: npm ci (better-sqlite3 builds from source) and the jco build"
# better-sqlite3 compiles against Node's headers; Debian's nodejs ships them in /usr.
if [ -f /usr/include/node/node.h ]; then export npm_config_nodedir=/usr; fi
# node-gyp has failed now and then after a complete build (ENOENT on
# build/node_gyp_bins); one more clean install is then enough.
(cd js && { npm ci --no-audit --no-fund || { echo "npm ci failed; one more try" >&2; npm ci --no-audit --no-fund; }; } \
    && npm run build)

say "dynalite (a local DynamoDB endpoint for the store tests): npm ci in scripts/dynalite"
(cd scripts/dynalite && npm ci --ignore-scripts --no-audit --no-fund)
