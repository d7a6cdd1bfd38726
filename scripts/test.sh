#!/usr/bin/env bash
# All tests: formatting, lints, the layout check, unit tests, the multi-process
# cluster tests, the Java modules' tests (Hadoop's FileSystem contract tests on
# `thaw://`), and the Python package's tests (fsspec's suite,
# pandas/pyarrow/DuckDB/Dask, clusters), under-store tests against a real SeaweedFS
# (S3) and a real MiniDFSCluster (HDFS), the web dashboard in headless Chromium,
# and the evaluation harness's tests (bench/tests).
#
# Where the time goes is printed at the end (one line per step). What makes it
# fast without dropping a test:
# - the system set-up that waits on downloads (a JDK and Maven for HDFS, Chromium)
#   and the venv's pinned packages install in the background while the CPU compiles;
# - the Rust tests run under cargo-nextest (from the pinned Python requirements),
#   which keeps both cores busy across test binaries instead of waiting for the
#   slowest test of each binary in turn;
# - the Python tests run on two pytest-xdist workers, except those marked `serial`
#   (they measure CPU time or wall-clock pacing and need the machine to themselves),
#   which run after, alone;
# - the layout check (no file over 800 lines, no import circle) runs with the lints.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=()
step() {
  local name="$1" start=$SECONDS
  shift
  "$@"
  steps+=("$(printf '%-28s %4ds' "$name" $((SECONDS - start)))")
}
report() {
  echo "--- where the time went (make test) ---"
  printf '%s\n' "${steps[@]}"
  printf '%-28s %4ds\n' total "$SECONDS"
}
trap report EXIT

step toolchain ./scripts/ensure-toolchain.sh
# A real HDFS (MiniDFSCluster: Maven jars, a JDK) and headless Chromium for the
# dashboard's browser test: downloads, so in the background while we compile.
setup_log="$(mktemp)"
(./scripts/hdfs/setup.sh && ./scripts/ensure-chromium.sh) >"$setup_log" 2>&1 &
setup_pid=$!
# The venv's pinned packages (pyspark alone is ~500 MB): downloads too.
deps_log="$(mktemp)"
./scripts/python-env.sh deps >"$deps_log" 2>&1 &
deps_pid=$!
step fmt cargo fmt --all --check
step clippy cargo clippy --workspace --all-targets --locked -- -D warnings
step layout python3 scripts/check_layout.py
# The test build also makes target/debug/thaw, the binary the venv gets.
step rust-build cargo test --workspace --locked --no-run
# Waits for a background job (PID, LOG), shows its log, returns its status.
wait_bg() {
  local rc=0
  wait "$1" || rc=$?
  cat "$2"
  rm -f "$2"
  return "$rc"
}
step python-deps wait_bg "$deps_pid" "$deps_log"
# The venv: the package, and SeaweedFS (`weed`), moto (`moto_server`) and
# cargo-nextest, which the Rust tests need.
step python-env env THAW_BIN=target/debug/thaw ./scripts/python-env.sh debug
step system-setup wait_bg "$setup_pid" "$setup_log"
run_serial() {
  .venv/bin/python -m pytest python/tests -q -m serial
  .venv/bin/python -m pytest bench/tests -q -m serial
}
# The Java modules (thaw:// for Hadoop, Spark) and their tests; the PySpark
# tests below use their jars.
step java ./scripts/java.sh test
step rust-tests .venv/bin/cargo-nextest nextest run --workspace --locked
step ruff .venv/bin/ruff check python bench scripts
step ruff-format .venv/bin/ruff format --check python bench scripts
# One session per package (each under its own pyproject.toml's settings).
step python-tests .venv/bin/python -m pytest python/tests -q -n 2 -m "not serial"
step bench-tests .venv/bin/python -m pytest bench/tests -q -n 2 -m "not serial" --durations=5
step serial-tests run_serial
