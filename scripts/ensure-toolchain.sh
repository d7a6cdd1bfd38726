#!/usr/bin/env bash
# Checks what a build needs. protoc comes vendored with the build (protoc-bin-vendored),
# so only a Rust toolchain is required.
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "cargo is in \$HOME/.cargo/bin but not on PATH: run 'source \$HOME/.cargo/env' first" >&2
  else
    echo "a Rust toolchain (cargo) is required: https://rustup.rs" >&2
  fi
  exit 1
fi
# `thaw mount` (FUSE) needs fusermount3 (Debian's fuse3 package, with libfuse3)
# for users other than root, and to unmount as them; root mounts without it.
if ! command -v fusermount3 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing fuse3 (fusermount3) for thaw mount" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fuse3 >/dev/null 2>&1; then
      apt-get update >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fuse3 >/dev/null 2>&1 ||
        echo "warning: could not install fuse3: thaw mount works as root only, and its tests run as root or are skipped" >&2
    fi
  else
    echo "note: fusermount3 is missing (Debian/Ubuntu: apt-get install fuse3): thaw mount then works as root only" >&2
  fi
fi
