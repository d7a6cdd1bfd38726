#!/usr/bin/env bash
# Benchmarks: builds the release binaries and runs every benchmark of thaw-bench
# (Thaw next to its baselines, median of 5 alternating runs, 1 GiB per read run).
# Results go to stdout and to bench-out/results.json; extra arguments are passed
# on (e.g. `./scripts/bench.sh --size 256MiB`). See BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-toolchain.sh
cargo build --release -p thaw-cli -p thaw-bench
mkdir -p bench-out
./target/release/thaw-bench all --out bench-out/results.json "$@" | tee bench-out/results.txt
