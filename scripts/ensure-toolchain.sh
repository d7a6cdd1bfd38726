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
