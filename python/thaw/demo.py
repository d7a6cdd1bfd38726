"""The Python half of ``make demo``: a parquet data set in an under-store
directory, queried by DuckDB and pandas through ``thaw://`` on a LocalCluster.

The first query finds the data cold (pages dropped from the page cache): each
block is read from the under-store once and left in worker memory. The second
query reads it from memory. The same queries straight on the local files run
beside them, cold and warm, for comparison. Each Thaw query runs in a
``thaw.job``, and the workers' per-job counters are printed.

    python -m thaw.demo [--size 256MiB] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

import thaw

QUERY = (
    "SELECT store, round(sum(amount), 2) AS revenue, count(*) AS sales "
    "FROM read_parquet('{}') GROUP BY store ORDER BY revenue DESC LIMIT 3"
)


def make_data(root: Path, size: int, files: int = 8) -> int:
    """``files`` parquet files of made-up sales, ~``size`` bytes in all."""
    rng = np.random.default_rng(42)
    rows = size // 16 // files
    (root / "sales").mkdir(parents=True)
    for i in range(files):
        df = pd.DataFrame(
            {
                "store": rng.integers(0, 500, rows, dtype=np.int32),
                "product": rng.integers(0, 100_000, rows),
                "amount": rng.gamma(2.0, 20.0, rows),
                "day": rng.integers(0, 365, rows, dtype=np.int32),
            }
        )
        df.to_parquet(root / "sales" / f"part-{i:02d}.parquet", compression=None)
    return sum(f.stat().st_size for f in (root / "sales").iterdir())


def drop_pages(root: Path) -> None:
    for f in root.rglob("*.parquet"):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run(con: duckdb.DuckDBPyConnection, source: str) -> tuple[float, list[tuple[object, ...]]]:
    """The query over a path (read by DuckDB's parquet reader) or a registered view."""
    start = time.perf_counter()
    scan = f"read_parquet('{source}')" if "/" in source else source
    rows = con.sql(QUERY.replace("read_parquet('{}')", scan)).fetchall()
    return time.perf_counter() - start, rows


def main() -> None:
    ap = argparse.ArgumentParser(description="Thaw from Python: DuckDB and pandas on thaw:// paths")
    ap.add_argument("--size", default="256MiB", help="data set size (MiB or GiB units)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    mult = {"MiB": 1 << 20, "GiB": 1 << 30}
    size = next((int(float(args.size[:-3]) * m) for u, m in mult.items() if args.size.endswith(u)), None)
    size = size if size is not None else int(args.size)

    tmp = Path(tempfile.mkdtemp(prefix="thaw-pydemo-"))
    try:
        ufs = tmp / "ufs"
        nbytes = make_data(ufs, size)
        print(f"data set: {nbytes / (1 << 20):.0f} MiB of parquet in {ufs}/sales (8 files)")
        with thaw.LocalCluster(ufs=ufs, workers=args.workers, mem_capacity=nbytes + (256 << 20)) as cluster:
            print(f"cluster: master {cluster.master}, {args.workers} workers (thaw local)")
            con = thaw.register_duckdb(duckdb.connect())
            local = str(ufs / "sales" / "*.parquet")
            remote = "thaw:///sales/*.parquet"

            drop_pages(ufs)
            t_local_cold, want = run(con, local)
            t_local_warm, _ = run(con, local)
            drop_pages(ufs)
            with thaw.job("demo-cold") as cold:
                t_cold, got = run(con, remote)
            with thaw.job("demo-warm") as warm:
                t_warm, got2 = run(con, remote)
                con.register("sales", thaw.arrow_dataset("/sales"))
                t_arrow, got3 = run(con, "sales")
            assert got == want == got2 == got3, (got, want)

            client = thaw.Client()
            in_mem = sum(e["in_memory_bytes"] for e in client.ls("/sales"))
            print("\nDuckDB: top stores by revenue")
            for store, revenue, sales in got:
                print(f"  store {store:>3}  revenue {revenue:>14,.2f}  sales {sales:,}")
            print(f"\n  {'DuckDB query over the data set':<42}{'seconds':>8}{'MiB/s':>9}")
            for name, t in [
                ("local files, cold (page cache dropped)", t_local_cold),
                ("local files, warm (page cache)", t_local_warm),
                ("thaw://, cold (from the under-store)", t_cold),
                ("thaw://, from worker memory", t_warm),
                ("thaw arrow_dataset, from worker memory", t_arrow),
            ]:
                print(f"  {name:<42}{t:>8.3f}{nbytes / t / (1 << 20):>9.0f}")
            print(
                f"\nafter the cold query {in_mem / (1 << 20):.0f} of {nbytes / (1 << 20):.0f} MiB"
                " are in worker memory"
            )
            for j in (cold, warm):
                s = j.stats()
                print(
                    f"job {j.id}: {s['reads']} block accesses ({s['short_circuit_opens']} opened in place "
                    f"by short-circuit), on {len(s['workers'])} worker(s)"
                )
            with thaw.job("demo-pandas"):
                df = pd.read_parquet("thaw:///sales/part-00.parquet", columns=["store", "amount"])
            print(f"pandas: part-00 has {len(df):,} rows, mean amount {df['amount'].mean():.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
