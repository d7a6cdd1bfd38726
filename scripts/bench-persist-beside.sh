#!/bin/bash
# Usage: scripts/bench-persist-beside.sh THAW_BINARY (BENCHMARKS.md, "Issue 28: persist by hand")
# A 40 MiB async-through file whose checkpoint runs at --checkpoint-bandwidth 1KiB,
# then `thaw fs persist` of a 1 MiB file (written --temporary: only a persist writes it).
BIN=$1; D=$(mktemp -d)
"$BIN" local --ufs "$D/ufs" --port 0 --mem-root "$D/shm" --mem-capacity 256MiB --block-size 4MiB \
  --checkpoint-bandwidth 1KiB >"$D/out" 2>"$D/err" </dev/null &
PID=$!
trap 'kill $PID; wait $PID 2>/dev/null; rm -rf "$D"' EXIT
until grep -q "master at" "$D/out"; do sleep 0.1; done
export THAW_MASTER=$(sed -n 's/.*master at \([^;]*\);.*/\1/p' "$D/out")
head -c 40M /dev/urandom >"$D/big"; head -c 1M /dev/urandom >"$D/small"
until "$BIN" fs put "$D/big" /big --write-type async-through 2>/dev/null; do sleep 0.2; done
until "$BIN" fs stat /big | grep -q persisting; do sleep 0.1; done
"$BIN" fs put "$D/small" /small --write-type async-through --temporary
start=$(date +%s.%N)
"$BIN" fs persist /small --timeout 30; rc=$?
end=$(date +%s.%N)
echo "persist /small: exit $rc after $(echo "$end - $start" | bc) s"
"$BIN" fs stat /big | grep -E "^(state|checkpoint)"
