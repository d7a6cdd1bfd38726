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
# - the Python tests run on pytest-xdist workers (three for the package's, whose
#   tests wait on clusters more than they compute: 126 s on two, 101 on three;
#   three for the harness's, whose emulated devices keep them waiting too),
#   longest first; those marked `serial` (they measure CPU time or wall-clock
#   pacing and need the machine to themselves) and `spark` (a Spark cluster's
#   JVMs: beside the harness's tests, a query outlived its 300 s timeout in a
#   fresh-clone run) after, alone.
#   Every step's line at the end says its wall and CPU seconds;
# - the Java modules' tests run beside the Rust tests (both mostly wait);
# - one Rust build for everything (`cargo build --workspace --all-targets`: a
#   build of one package alone resolves features differently and compiles its
#   dependencies again), which clippy lints as it compiles (no second pass
#   over the dependencies, as `cargo clippy` would make); the thaw binary's
#   integration tests are one test binary (37 took 200 s of it on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."

steps=()
# CPU seconds (user + system) of every child this shell has waited for, so
# each step's line says how busy it kept the cores (wall vs CPU: a step far
# below twice its wall time on two cores waits more than it computes).
# (`times` runs in this shell: in a command substitution's subshell it would
# count that subshell's children.)
times_file="$(mktemp)"
cpu_now() {
  times >"$times_file"
  CPU=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] } printf "%d", t }' "$times_file")
}
step() {
  local name="$1" start=$SECONDS cpu
  cpu_now
  cpu=$CPU
  shift
  "$@"
  cpu_now
  steps+=("$(printf '%-28s %4ds  cpu %5ds' "$name" $((SECONDS - start)) $((CPU - cpu)))")
}
report() {
  echo "--- where the time went (make test): wall, CPU of the step's processes ---"
  printf '%s\n' "${steps[@]}"
  cpu_now
  printf '%-28s %4ds  cpu %5ds\n' total "$SECONDS" "$CPU"
  rm -f "$times_file"
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
step layout python3 scripts/check_layout.py
# Clippy lints the workspace as the test build compiles it: cargo hands the
# workspace's own crates to clippy-driver (rustc with clippy's lints, warnings
# as errors), so the dependencies compile once and are never checked a second
# time, as `cargo clippy` after a build would (minutes on two cores). Every
# cargo call below inherits this, so none of them builds the workspace again.
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)"
if [ -z "$RUSTC_WORKSPACE_WRAPPER" ]; then
  echo "clippy-driver is missing: rustup component add clippy" >&2
  exit 1
fi
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# A fresh clone (CI) gains nothing from incremental compilation's caches, which
# cost time to write.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
# The test build: every target of the workspace (the tests; target/debug/thaw,
# the binary the venv gets; the native library the Java modules carry), with
# the features of the whole workspace, so nothing below builds anything again.
step rust-build cargo build --workspace --all-targets --locked
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
# (maturin's build of the extension keeps the clippy wrapper: the workspace's
# crates then match the test build's and only pyo3 and thaw-py compile again,
# 20 s; without it every workspace crate compiled again, 143 s in CI.)
step python-env env THAW_BIN=target/debug/thaw ./scripts/python-env.sh debug
step system-setup wait_bg "$setup_pid" "$setup_log"
run_serial() {
  .venv/bin/python -m pytest python/tests -q -m "serial or spark" --durations=5
  .venv/bin/python -m pytest bench/tests -q -m serial
}
# The Java modules (thaw:// for Hadoop, Spark) and their tests, in the
# background beside the Rust tests: one JVM, and nextest's two test processes
# wait on clusters more than they compute (alone, 1.1 of the two cores; Java
# 0.9). The PySpark tests below use the jars. (The Java line's wall time is
# what was left to wait for after the Rust tests, its CPU all of it.)
java_log="$(mktemp)"
env THAW_JAVA_PREBUILT=1 ./scripts/java.sh test >"$java_log" 2>&1 &
java_pid=$!
step rust-tests .venv/bin/cargo-nextest nextest run --workspace --locked
step java wait_bg "$java_pid" "$java_log"
step ruff .venv/bin/ruff check python bench scripts
step ruff-format .venv/bin/ruff format --check python bench scripts
# One session per package (each under its own pyproject.toml's settings).
step python-tests .venv/bin/python -m pytest python/tests -q -n 3 -m "not serial and not spark"
step bench-tests .venv/bin/python -m pytest bench/tests -q -n 3 -m "not serial" --durations=5
step serial-tests run_serial
