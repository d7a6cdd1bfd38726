#!/usr/bin/env bash
# Makes sure a JDK (javac) and Maven are on PATH: installs Debian's
# default-jdk-headless and maven with apt when they are missing and we are
# root. Exits 1, saying why, when they cannot be had (callers decide whether
# that skips their tests or fails).
set -euo pipefail
if command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing a JDK and Maven (apt)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless maven >/dev/null
  exit 0
fi
echo "no JDK/Maven here, and no way to install them (not root, or no apt-get)" >&2
exit 1
