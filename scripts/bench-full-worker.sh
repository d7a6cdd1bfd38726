#!/usr/bin/env bash
# Issue 28, item 1: `thaw --job small migrate /small --wait` over FILES cold
# files of 4 KiB on `thaw local` with 2 workers of MEM memory each, after a
# must-cache file of FILL bytes (0: none) filled one worker's memory with data
# persisted nowhere else. Prints the wall time of the migrate call, the job's
# line, and the migration events that failed.
#
# Usage: scripts/bench-full-worker.sh THAW MEM BLOCK FILL FILES [TIMEOUT]
#   e.g. scripts/bench-full-worker.sh target/release/thaw 16MiB 4MiB 24MiB 300
set -euo pipefail
THAW=$(realpath "$1"); MEM=$2; BLOCK=$3; FILL=$4; FILES=$5; TIMEOUT=${6:-15m}
PORT=$((21000 + RANDOM % 20000))
dir=$(mktemp -d /tmp/bench-full-worker.XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/ufs/small"
for i in $(seq -w 1 "$FILES"); do head -c 4096 /dev/urandom > "$dir/ufs/small/f$i"; done
"$THAW" local --ufs "$dir/ufs" --workers 2 --mem-capacity "$MEM" --block-size "$BLOCK" \
    --port "$PORT" --state-dir "$dir/state" > "$dir/local.log" 2>&1 &
pid=$!
export THAW_MASTER=127.0.0.1:$PORT
for _ in $(seq 100); do "$THAW" status > /dev/null 2>&1 && break; sleep 0.1; done
if [ "$FILL" != 0 ]; then
    head -c "$(numfmt --from=iec-i --suffix=B "$FILL" | tr -d B)" /dev/urandom > "$dir/fill"
    "$THAW" fs put --write-type must-cache "$dir/fill" /fill
fi
start=$(date +%s.%N)
"$THAW" --job small migrate /small --wait --timeout "$TIMEOUT"
end=$(date +%s.%N)
echo "migrate --wait: $(echo "$end - $start" | bc) s"
echo "failed events: $("$THAW" events | grep -c failed || true)"
"$THAW" events | grep failed | head -2 || true
