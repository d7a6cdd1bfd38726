"""DuckDB's own ``read_parquet`` over ``thaw mount`` against the same files warm
in the local page cache: the query of ``make demo`` (top stores by revenue over
the demo's sales data set), interleaved, median of N runs (BENCHMARKS.md,
"thaw mount").

The data set is put in worker memory twice: with 16 MiB blocks (the demo's;
each file is several block files) and with one block per file (opened in kernel
passthrough where the kernel has it). The 16 MiB-block copy is read through the
default mount (``direct_io`` until DuckDB's small reads are seen, then the
kernel's page cache, kept across opens), through a mount with ``--direct-io``
(every read a round trip to the mount process), and, as a first query, through
a fresh default mount each time (nothing seen, nothing cached). For comparison
in the same run: the same copy through ``thaw://`` (DuckDB's Python filesystem
bridge, what ``make demo`` measures).

    python -m thaw_bench.scripts.mount_duckdb --size 512MiB --repeats 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import thaw
from thaw.demo import MIB, QUERY, connect, make_data
from thaw.sizes import parse_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="512MiB")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--mount-arg", action="append", default=[], help="a flag for thaw mount (repeatable)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="thaw-bench-mount-"))
    mnt = tmp / "mnt"
    try:
        local = tmp / "local"
        nbytes = make_data(local, parse_size(args.size))
        files = sorted((local / "sales").iterdir())
        biggest = max(f.stat().st_size for f in files)
        with thaw.LocalCluster(ufs=tmp / "ufs", workers=1, block_size=16 * MIB, mem_capacity=3 * nbytes) as c:
            client = thaw.Client(c.master)
            client.put(local / "sales", "/blocks16", write_type="must-cache", progress=False)
            one_block = -(-biggest // MIB) * MIB
            client.put(
                local / "sales", "/oneblock", write_type="must-cache", block_size=one_block, progress=False
            )
            mnt.mkdir()
            direct = tmp / "mnt-direct"
            direct.mkdir()
            with (
                thaw.Mount(mnt, master=c.master, args=args.mount_arg) as mount,
                thaw.Mount(direct, master=c.master, args=["--direct-io", *args.mount_arg]) as mount_direct,
            ):
                mnt16, one = str(mnt / "blocks16" / "*.parquet"), str(mnt / "oneblock" / "*.parquet")
                cases: dict[str, str] = {
                    "local files, warm page cache": str(local / "sales" / "*.parquet"),
                    "thaw mount, 16 MiB blocks (default)": mnt16,
                    "thaw mount --direct-io, 16 MiB blocks (splice)": str(direct / "blocks16" / "*.parquet"),
                    "thaw mount, one block per file (passthrough)": one,
                    "thaw://, 16 MiB blocks (DuckDB's fsspec bridge)": "thaw:///blocks16/*.parquet",
                }
                con = thaw.register_duckdb(connect(), thaw.ThawFileSystem(client=client))
                results = {}
                for path in cases.values():  # warm-up: page cache, DuckDB's metadata
                    results[path] = con.sql(QUERY.format(path)).fetchall()
                if len({repr(r) for r in results.values()}) != 1:
                    raise SystemExit(f"the answers differ: {results}")
                times: dict[str, list[float]] = {name: [] for name in cases}
                for _ in range(args.repeats):
                    for name, path in cases.items():
                        t0 = time.perf_counter()
                        con.sql(QUERY.format(path)).fetchall()
                        times[name].append(time.perf_counter() - t0)
            # A fresh default mount's first query: nothing seen, nothing cached.
            first = "thaw mount, 16 MiB blocks, a fresh mount's first query"
            times[first] = []
            for i in range(args.repeats):
                fresh = tmp / f"mnt-fresh-{i}"
                fresh.mkdir()
                with thaw.Mount(fresh, master=c.master, args=args.mount_arg):
                    t0 = time.perf_counter()
                    con.sql(QUERY.format(str(fresh / "blocks16" / "*.parquet"))).fetchall()
                    times[first].append(time.perf_counter() - t0)
        base = statistics.median(times["local files, warm page cache"])
        print(
            f"DuckDB read_parquet, make demo's query over {nbytes / MIB:.0f} MiB of parquet "
            f"({len(files)} files), median of {args.repeats}, interleaved"
        )
        print(f"{'read':<50} {'median s':>9} {'vs local':>9}")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"{name:<50} {m:>9.3f} {base / m:>8.2f}x")
        print(mount.served)
        print(f"--direct-io: {mount_direct.served}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
