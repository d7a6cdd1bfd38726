#!/usr/bin/env bash
# Thaw's Java modules (java/: thaw-hadoop, the `thaw://` Hadoop FileSystem over
# the Rust client by JNI; thaw-spark), built by Maven around the native library
# (crates/thaw-jni), which each jar carries.
#   scripts/java.sh test      debug library; `mvn verify`: the modules' tests
#                             (Hadoop's FileSystem contract tests among them) on
#                             real Thaw clusters of target/debug/thaw
#   scripts/java.sh release   release library; the jars, tests skipped (`make java`)
# The jars land in java/*/target/ (the PySpark tests use them from there).
# Without a JDK that can be had, says so and exits 0 (their tests then skip).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-test}"
if ! ./scripts/ensure-jdk.sh; then
  echo "java: skipped (no JDK/Maven): the Java and Spark tests will skip" >&2
  exit 0
fi
case "$mode" in
  test) profile=debug goal=verify skip=false ;;
  release) profile=release goal=package skip=true ;;
  *) echo "usage: scripts/java.sh [test|release]" >&2; exit 2 ;;
esac
if [ "$mode" = test ]; then
  # The workspace's test build (`make test` made it already and says so with
  # THAW_JAVA_PREBUILT=1).
  # Building `-p thaw-jni -p thaw-cli` alone would resolve tokio without the
  # `test-util` a dev-dependency adds, and compile tokio and all that depends
  # on it a second time (90 s of `make test`).
  if [ "${THAW_JAVA_PREBUILT:-}" != 1 ]; then
    cargo build --locked --workspace --all-targets
  fi
  if [ ! -f target/debug/libthaw_jni.so ] || [ ! -x target/debug/thaw ]; then
    echo "java: target/debug/libthaw_jni.so or target/debug/thaw is missing: build the workspace first" >&2
    exit 1
  fi
else
  cargo build --locked -p thaw-jni -p thaw-cli --release
fi
mvn -B -ntp -Dstyle.color=never -f java/pom.xml \
  -Dthaw.native.dir="$PWD/target/$profile" -Dthaw.bin="$PWD/target/$profile/thaw" \
  -DskipTests="$skip" "$goal"
ls java/*/target/thaw-*.jar | grep -v original-
