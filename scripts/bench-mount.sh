#!/usr/bin/env bash
# `cat` of a 1 GiB file in worker MEM through `thaw mount`, beside `cat` of the
# same bytes in a tmpfs file, interleaved, medians of N runs (BENCHMARKS.md,
# "thaw mount"). Four mounts side by side: the default (passthrough for
# single-block files; otherwise direct_io, the block file spliced into each
# reply, since cat's reads are large), --page-cache (the kernel's page cache
# kept across opens; timed again with its pages dropped, as a first read),
# --direct-io, and --direct-io --no-splice (pread + copy).
# Two Thaw files: 64 MiB blocks (16 block files) and one 1 GiB block
# (passthrough where the kernel has it).
# Usage: scripts/bench-mount.sh [SIZE_MIB] [RUNS]   (needs root or fusermount3)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${1:-1024}
RUNS=${2:-5}
BIN=${THAW_BIN:-./target/release/thaw}
[ -x "$BIN" ] || cargo build --release -p thaw-cli
PORT=${THAW_BENCH_PORT:-19931}
export THAW_MASTER=127.0.0.1:$PORT
WORK=$(mktemp -d /tmp/thaw-bench-mount.XXXXXX)
SHM=$(mktemp -d /dev/shm/thaw-bench-mount.XXXXXX)
pids=()
cleanup() {
  for d in "$WORK"/mnt-*; do
    [ -d "$d" ] && { "$BIN" umount --lazy "$d" 2>/dev/null || true; }
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT

mkdir -p "$WORK/ufs"
"$BIN" local --ufs "$WORK/ufs" --port "$PORT" --mem-capacity $((SIZE_MIB * 3))MiB \
  --mem-root "$SHM" --state-dir "$WORK/state" >"$WORK/local.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do "$BIN" status >/dev/null 2>&1 && break; sleep 0.1; done

head -c $((SIZE_MIB << 20)) /dev/urandom >"$SHM/tmpfs.bin"
"$BIN" fs put --write-type must-cache "$SHM/tmpfs.bin" /bench/blocks64.bin >/dev/null
"$BIN" fs put --write-type must-cache --block-size "${SIZE_MIB}MiB" "$SHM/tmpfs.bin" /bench/oneblock.bin >/dev/null

mount_one() { # NAME ARGS...
  local name=$1
  shift
  mkdir -p "$WORK/mnt-$name"
  "$BIN" mount "$WORK/mnt-$name" "$@" >"$WORK/mount-$name.out" 2>"$WORK/mount-$name.log" &
  pids+=($!)
  for _ in $(seq 100); do grep -q mounted "$WORK/mount-$name.out" 2>/dev/null && return; sleep 0.1; done
  echo "mount $name failed: $(cat "$WORK/mount-$name.log")" >&2
  exit 1
}
mount_one default
mount_one pagecache --page-cache
mount_one direct --direct-io
mount_one pread --direct-io --no-passthrough --no-splice

secs() { # FILE [dd|cold]: seconds for `cat FILE > /dev/null` (dd: with 1 MiB
  # reads; cold: after dropping the file's cached pages, none on the mount)
  local t0 t1
  t0=$(date +%s.%N)
  [ "${2:-cat}" = cold ] && dd if="$1" iflag=nocache count=0 status=none
  if [ "${2:-cat}" = dd ]; then dd if="$1" of=/dev/null bs=1M status=none; else cat "$1" >/dev/null; fi
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.4f", $2 - $1}'
}
# The one-block file's block file itself, in the worker's MEM tier (tmpfs).
BLOCKFILE=$(find "$SHM" -type f -size +$((SIZE_MIB - 1))M ! -name tmpfs.bin | head -1)
cases=(
  "tmpfs file (baseline)|$SHM/tmpfs.bin"
  "tmpfs file, dd bs=1M (cat's buffer on the mount)|$SHM/tmpfs.bin|dd"
  "the worker's block file itself (tmpfs)|$BLOCKFILE"
  "mount, one block (passthrough)|$WORK/mnt-default/bench/oneblock.bin"
  "mount, 64 MiB blocks (default)|$WORK/mnt-default/bench/blocks64.bin"
  "mount --page-cache, 64 MiB blocks (kept)|$WORK/mnt-pagecache/bench/blocks64.bin"
  "mount --page-cache, first read (pages dropped)|$WORK/mnt-pagecache/bench/blocks64.bin|cold"
  "mount --direct-io, 64 MiB blocks (splice)|$WORK/mnt-direct/bench/blocks64.bin"
  "mount --direct-io --no-splice, 64 MiB blocks (pread)|$WORK/mnt-pread/bench/blocks64.bin"
)
declare -A times
for r in $(seq "$RUNS"); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name file tool <<<"$c"
    times[$name]+="$(secs "$file" "$tool") "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(echo "${times[tmpfs file (baseline)]}" | median)
printf "cat of a %d MiB file, median of %d runs, interleaved (%s, %d cores)\n" "$SIZE_MIB" "$RUNS" "$(uname -r)" "$(nproc)"
printf "%-55s %9s %10s %9s\n" "read" "median s" "MiB/s" "vs tmpfs"
for c in "${cases[@]}"; do
  name=${c%%|*}
  m=$(echo "${times[$name]}" | median)
  awk -v n="$name" -v m="$m" -v b="$base" -v s="$SIZE_MIB" 'BEGIN {printf "%-55s %9.3f %10.0f %8.2fx\n", n, m, s / m, b / m}'
done
for name in default pagecache direct pread; do
  "$BIN" umount "$WORK/mnt-$name"
done
wait "${pids[@]:1}" 2>/dev/null || true
for name in default pagecache direct pread; do
  grep served "$WORK/mount-$name.log" | sed "s/^/$name: /"
done
