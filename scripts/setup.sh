#!/usr/bin/env bash
# Installs what the build and the tests need. Idempotent; safe on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "setup: cargo is missing; install Rust with rustup" >&2; exit 1; }
command -v python3 >/dev/null || { echo "setup: python3 is missing (the oracle and the vector generator need it)" >&2; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fetch --locked >/dev/null
