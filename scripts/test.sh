#!/usr/bin/env bash
# All tests: formatting, lints, unit tests, the multi-process cluster tests, and
# the Python package's tests (fsspec's suite, pandas/pyarrow/DuckDB/Dask, clusters).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-toolchain.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
./scripts/python-env.sh debug
.venv/bin/ruff check python
.venv/bin/ruff format --check python
.venv/bin/python -m pytest python/tests -q
