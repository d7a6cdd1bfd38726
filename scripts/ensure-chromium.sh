#!/usr/bin/env bash
# Headless Chromium for the dashboard's browser test (crates/thaw-cli/tests/it/dashboard.rs):
# installed from Debian's packages when missing and we are root with apt; otherwise
# the test prints SKIPPED and passes.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "dashboard: installing chromium (apt)" >&2
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; then
    exit 0
  fi
fi
echo "dashboard: no chromium and no way to install it: the browser test will print SKIPPED" >&2
