#!/usr/bin/env bash
# Makes the Python environment in .venv: the pinned requirements (again only when
# python/requirements-dev.txt changes), the `thaw` package built by maturin from
# crates/thaw-py (editable: python/thaw is used in place), the evaluation harness
# `thaw_bench` (editable: bench/thaw_bench is used in place), and the `thaw`
# binary beside the venv's python, where thaw.LocalCluster finds it.
#   scripts/python-env.sh [debug|release]     (default debug)
#   THAW_BIN=target/debug/thaw scripts/python-env.sh debug   (install that binary)
#   scripts/python-env.sh deps    (only the venv and its pinned requirements: what
#                                  scripts/test.sh runs in the background while it compiles)
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-debug}"
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Python 3.11 or newer is required (set PYTHON=/path/to/python3.11+)" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
want="$(sha256sum python/requirements-dev.txt | cut -d' ' -f1)"
if [ "$(cat .venv/.requirements.sha256 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r python/requirements-dev.txt
  echo "$want" > .venv/.requirements.sha256
fi
[ "$profile" = deps ] && exit 0
flags=()
[ "$profile" = release ] && flags=(--release)
# THAW_BIN: a `thaw` binary built already (scripts/test.sh passes the one its test
# build made: building `-p thaw-cli` alone would resolve dependency features
# differently from the workspace's test build and compile tokio and its
# dependents a second time).
bin="${THAW_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --locked -p thaw-cli "${flags[@]}"
  bin="target/$profile/thaw"
fi
(cd python && VIRTUAL_ENV="$PWD/../.venv" PATH="$PWD/../.venv/bin:$PATH" maturin develop --quiet "${flags[@]}")
install -m 755 "$bin" .venv/bin/thaw
# The harness: its dependencies are among the pinned requirements above (--no-deps
# keeps those pins the only versions); again only when bench/pyproject.toml changes
# or the package is missing.
want="$(sha256sum bench/pyproject.toml | cut -d' ' -f1)"
if [ "$(cat .venv/.bench.sha256 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c 'import thaw_bench' 2>/dev/null; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e bench
  echo "$want" > .venv/.bench.sha256
fi
