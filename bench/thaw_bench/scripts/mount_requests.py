"""What one request costs through ``thaw mount`` against the same file in the
local page cache: open + an 8-byte read of the footer + close (what DuckDB does per
file before its reads), a 1 MiB ``pread`` and a 64 KiB ``pread``, each averaged.
The files are 64 MiB of random bytes, in worker MEM with ``--block-size`` blocks
(16 MiB: the demo's, so each file is several blocks and no open is passthrough).

    python -m thaw_bench.scripts.mount_requests [--block-size 16MiB] [--mount-arg=--no-splice]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import thaw
from thaw.demo import MIB
from thaw.sizes import parse_size

FILE = 64 * MIB


def costs(files: list[Path]) -> tuple[float, float, float]:
    """Seconds per open+read+close, per 1 MiB pread, per 64 KiB pread."""
    for f in files:  # warm-up
        f.read_bytes()
    t0 = time.perf_counter()
    for _ in range(50):
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            os.pread(fd, 8, FILE - 8)
            os.close(fd)
    per_open = (time.perf_counter() - t0) / (50 * len(files))
    fd = os.open(files[0], os.O_RDONLY)
    try:
        buf = bytearray(MIB)
        t0 = time.perf_counter()
        for _ in range(3):
            for off in range(0, FILE, MIB):
                os.preadv(fd, [buf], off)
        per_mib = (time.perf_counter() - t0) / (3 * FILE // MIB)
        t0 = time.perf_counter()
        for off in range(0, FILE, 64 << 10):
            os.pread(fd, 64 << 10, off)
        per_64k = (time.perf_counter() - t0) / (FILE // (64 << 10))
    finally:
        os.close(fd)
    return per_open, per_mib, per_64k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block-size", default="16MiB")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--mount-arg", action="append", default=[], help="a flag for thaw mount (repeatable)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="thaw-bench-requests-"))
    mnt = tmp / "mnt"
    try:
        local = tmp / "local"
        local.mkdir()
        for i in range(args.files):
            (local / f"f{i}.bin").write_bytes(os.urandom(FILE))
        size = parse_size(args.block_size)
        with thaw.LocalCluster(ufs=tmp / "ufs", block_size=size, mem_capacity=2 * args.files * FILE) as c:
            thaw.Client(c.master).put(local, "/d", write_type="must-cache", progress=False)
            mnt.mkdir()
            mounted = f"thaw mount, {args.block_size} blocks {' '.join(args.mount_arg)}"
            with thaw.Mount(mnt, master=c.master, args=args.mount_arg):
                rows = {
                    "local files, page cache": costs(sorted(local.iterdir())),
                    mounted: costs(sorted((mnt / "d").iterdir())),
                }
        print(f"{'read':<44} {'open+read+close':>16} {'1 MiB pread':>12} {'64 KiB pread':>13}")
        for name, (o, m, k) in rows.items():
            print(f"{name:<44} {o * 1e6:>13.0f} us {m * 1e6:>9.0f} us {k * 1e6:>10.0f} us")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
