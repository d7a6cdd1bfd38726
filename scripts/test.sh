#!/usr/bin/env bash
# All tests: formatting, lints, unit tests, and the multi-process cluster tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-toolchain.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
