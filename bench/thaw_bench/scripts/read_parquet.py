"""Benchmark: ``pyarrow.parquet.read_table`` of one large parquet file, from Thaw
memory next to the same file on tmpfs read directly, and the same bytes through
fsspec ``cat``.

Runs, each the median of ``--repeats`` alternating rounds, in one process:

- ``tmpfs``: ``pq.read_table(path)`` of the file in /dev/shm (pyarrow's own
  local filesystem, reading into its buffers; the bytes are already in memory).
- ``tmpfs-mmap``: the same with ``memory_map=True`` (pyarrow maps the file: no
  copy at all; the best a direct read can do).
- ``thaw``: ``pq.read_table(path, filesystem=thaw.ThawFileSystem())``; the file
  was written MUST_CACHE, so every block is in a worker's MEM tier on this host
  and pyarrow takes mapped block buffers (no copy) through ``read_buffer``.
- ``thaw-cat``: ``pq.read_table(pa.BufferReader(fs.cat(path)))``: the whole file
  copied out through fsspec ``cat`` first, then decoded.
- ``cat-only`` / ``direct-read``: just the bytes: ``fs.cat`` vs reading the tmpfs
  file into one bytes object.

    python -m thaw_bench.scripts.read_parquet --size 1GiB --repeats 5 --out bench-out/python-parquet.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import thaw
from thaw.sizes import parse_size


def make_table(size: int) -> pa.Table:
    """Eight float64/int64 columns of random values: ~``size`` bytes of parquet
    with no compression and no dictionaries (decoding is a copy, so the read path
    shows)."""
    rows = size // 64
    rng = np.random.default_rng(1)
    cols = {f"f{i}": rng.random(rows) for i in range(4)}
    cols |= {f"i{i}": rng.integers(0, 1 << 62, rows) for i in range(4)}
    return pa.table(cols)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - start
    del out
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="bench-out/python-parquet.json")
    args = ap.parse_args()
    size = parse_size(args.size)

    shm = Path(tempfile.mkdtemp(prefix="thaw-bench-", dir="/dev/shm"))
    ufs = Path(tempfile.mkdtemp(prefix="thaw-bench-ufs-"))
    try:
        local = shm / "table.parquet"
        table = make_table(size)
        pq.write_table(table, local, compression="none", use_dictionary=False, row_group_size=1 << 20)
        nbytes = local.stat().st_size
        rows = table.num_rows
        del table
        with thaw.LocalCluster(ufs=ufs, workers=1, mem_capacity=nbytes + (512 << 20)) as cluster:
            client = thaw.Client(cluster.master)
            client.put(local, "/table.parquet", write_type="must-cache", progress=False)
            st = client.stat("/table.parquet")
            assert st["in_memory_bytes"] == nbytes, st
            fs = thaw.ThawFileSystem(cluster.master)

            runs: dict[str, Callable[[], Any]] = {
                "tmpfs": lambda: pq.read_table(local),
                "tmpfs-mmap": lambda: pq.read_table(local, memory_map=True),
                "thaw": lambda: pq.read_table("/table.parquet", filesystem=fs),
                "thaw-cat": lambda: pq.read_table(pa.BufferReader(fs.cat("/table.parquet"))),
                "direct-read": lambda: local.read_bytes(),
                "cat-only": lambda: fs.cat("/table.parquet"),
            }
            # Both paths must decode the same table.
            assert pq.read_table("/table.parquet", filesystem=fs).num_rows == rows
            for fn in runs.values():  # warm up: first-touch costs out of the way
                timed(fn)
            times: dict[str, list[float]] = {k: [] for k in runs}
            names = list(runs)
            for r in range(args.repeats):
                # Rotate the order each round: no run always goes first or last.
                for k in names[r % len(names) :] + names[: r % len(names)]:
                    times[k].append(timed(runs[k]))
        med = {k: statistics.median(v) for k, v in times.items()}
        gbs = {k: nbytes / med[k] / 1e9 for k in med}
        result = {
            "benchmark": "pyarrow.parquet.read_table, Thaw MEM vs tmpfs",
            "file_bytes": nbytes,
            "rows": rows,
            "repeats": args.repeats,
            "median_seconds": med,
            "GB_per_s": gbs,
            "ratio_thaw_vs_tmpfs": med["tmpfs"] / med["thaw"],
            "ratio_thaw_vs_tmpfs_mmap": med["tmpfs-mmap"] / med["thaw"],
            "ratio_thaw_cat_vs_tmpfs": med["tmpfs"] / med["thaw-cat"],
            "ratio_cat_vs_direct_read": med["direct-read"] / med["cat-only"],
            "all_seconds": times,
        }
        print(f"parquet file {nbytes / (1 << 30):.2f} GiB, {rows} rows, median of {args.repeats}")
        for k in runs:
            print(f"  {k:<12} {med[k]:7.3f} s  {gbs[k]:6.2f} GB/s")
        print(f"  read_table  Thaw MEM / tmpfs      = {result['ratio_thaw_vs_tmpfs']:.2f}x")
        print(f"  read_table  Thaw MEM / tmpfs mmap = {result['ratio_thaw_vs_tmpfs_mmap']:.2f}x")
        print(f"  read_table  via fsspec cat / tmpfs = {result['ratio_thaw_cat_vs_tmpfs']:.2f}x")
        print(f"  bytes only  fsspec cat / direct    = {result['ratio_cat_vs_direct_read']:.2f}x")
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(ufs, ignore_errors=True)


if __name__ == "__main__":
    main()
