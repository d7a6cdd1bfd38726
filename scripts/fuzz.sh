#!/usr/bin/env bash
# Runs the fuzz targets of crates/thaw-fuzz for SECONDS each (release build,
# bolero's random engine, stable toolchain) and prints how many inputs each
# ran; a failing input is printed and kept by bolero under
# crates/thaw-fuzz/tests/__fuzz__/<target>/crashes (commit it with the fix:
# every later `cargo test` replays it). docs/reliability.md has the figures.
#   scripts/fuzz.sh [SECONDS] [TARGET]        e.g. scripts/fuzz.sh 600 data_stream
# Coverage-guided, with libFuzzer (cargo install cargo-bolero first; on this
# machine the build did not link yet: undefined __sanitizer_cov_* symbols in the
# library's test target, left to work out):
#   cargo bolero test data_stream -p thaw-fuzz --sanitizer NONE -T 10min
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
TARGET=${2:-}
BOLERO_RANDOM_TEST_TIME_MS=$((SECONDS_EACH * 1000)) \
  cargo test --release --locked -p thaw-fuzz --test fuzz -- --nocapture --test-threads 1 ${TARGET:+--exact "$TARGET"} 2>&1 |
  grep -E "^test |iterations/s|panicked|Input|Error|test result"
