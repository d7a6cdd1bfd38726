"""The Python half of ``make demo``: the main job a user would run.

A DuckDB query (the top stores by revenue) over a cold parquet data set in the
under-store, read through ``thaw://``. The job goes into a one-slot job queue
(a ``ThreadPoolExecutor(max_workers=1)``, standing for a busy cluster's
scheduler) right behind another job that holds the slot for a few seconds (a
CPU-bound DuckDB query over generated rows). The submitter enters
``thaw.job("report", inputs=["/sales"])`` when it submits the job, so Thaw can
move the inputs into worker memory while the job waits, and leaves it (evicting
them) when the job is done.

The scenario runs twice, on two clusters over the same under-store directory,
with the page cache dropped before each: with ``migration_policy="none"`` (the
baseline: Thaw moves nothing ahead, the query finds its inputs cold) and with
``"dyrs"``. For each: the queue wait, the query time, the end-to-end time, and
where the query's bytes came from (blocks in memory when it started, bytes the
workers read from the under-store while it ran), then the speedup, and for
reference the same query from memory through ``thaw.arrow_dataset`` and on the
local files. The under-store is paced by the workers' emulated device model
(this machine's disk is fast and page-cached; an object store or a hard disk is
not). The runs must agree on the query's result (else it raises).

With ``--s3`` the under-store is an S3 bucket instead of a directory: a local
SeaweedFS server (``thaw.seaweed``) started for the run, the data set uploaded
to it by pyarrow's S3 client, and the clusters mounted on
``s3://thaw-demo/?endpoint=...``; everything else is the same.

    python -m thaw.demo [--size 512MiB] [--workers 2] [--ufs-speed 150MiB/s] [--ahead 4] [--s3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

import thaw
from thaw.sizes import parse_size

MIB = 1 << 20
QUERY = (
    # Amounts in cents: an exact integer sum, so every run gives the same result.
    "SELECT store, round(sum(cents) / 100, 2) AS revenue, count(*) AS sales "
    "FROM read_parquet('{}') GROUP BY store ORDER BY revenue DESC LIMIT 3"
)
# The job ahead in the queue: CPU-bound work of a fixed size, on one thread
# (the other core is left to the cluster).
AHEAD_QUERY = "SELECT sum(hash(i) % 1000) FROM range({}) t(i)"


def sales(rng: np.random.Generator, rows: int) -> pd.DataFrame:
    """Made-up sales: store, product, amount in cents, day of the year."""
    return pd.DataFrame(
        {
            "store": rng.integers(0, 500, rows, dtype=np.int32),
            "product": rng.integers(0, 100_000, rows),
            "cents": (rng.gamma(2.0, 20.0, rows) * 100).astype(np.int64),
            "day": rng.integers(0, 365, rows, dtype=np.int32),
        }
    )


def make_data(root: Path, size: int, files: int = 8) -> int:
    """``files`` parquet files of made-up sales, ~``size`` bytes in all."""
    rng = np.random.default_rng(42)
    (root / "sales").mkdir(parents=True)
    sample = root / "sample.parquet"
    sales(rng, 1_000_000).to_parquet(sample, compression=None)
    per_row = sample.stat().st_size / 1_000_000
    sample.unlink()
    rows = max(int(size / per_row / files), 1)
    for i in range(files):
        sales(rng, rows).to_parquet(root / "sales" / f"part-{i:02d}.parquet", compression=None)
    return sum(f.stat().st_size for f in (root / "sales").iterdir())


def drop_pages(root: Path, pattern: str = "*.parquet") -> None:
    """Drops the pages of ``root`` (a file) or of its files matching ``pattern``
    from the page cache (the next read is cold)."""
    for f in [root] if root.is_file() else (p for p in root.rglob(pattern) if p.is_file()):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def connect() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection without its progress bar (it would draw over the report)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


def job_ahead(rows: int) -> float:
    """The job that holds the queue's slot: a CPU-bound query over ``rows``
    generated rows. Returns its run time."""
    start = time.perf_counter()
    con = connect()
    con.execute("SET threads = 1")
    con.sql(AHEAD_QUERY.format(rows)).fetchall()
    con.close()
    return time.perf_counter() - start


def calibrate(seconds: float) -> int:
    """How many rows the job ahead needs to run about ``seconds`` here (the
    best of three short runs)."""
    rows = 20_000_000
    took = min(job_ahead(rows) for _ in range(3))
    return max(int(rows * seconds / max(took, 1e-3)), 1)


def ufs_bytes_read(client: thaw.Client) -> int:
    """Bytes the live workers have read from the under-store (their emulated
    ``ufs`` devices), asked of each worker now."""
    total = 0
    for w in client.status()["workers"]:
        if w["alive"]:
            for d in client.native().worker_stats(w["address"])["devices"]:
                if d["device"] == "ufs":
                    total += d["bytes_read"]
    return total


@dataclass
class Run:
    """One run of the scenario: times in seconds, the job's accounting."""

    policy: str
    queue_wait: float = 0.0
    query: float = 0.0
    end_to_end: float = 0.0
    ahead: float = 0.0
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    blocks: int = 0
    bytes: int = 0
    blocks_in_memory: int = 0  # when the query started
    bytes_in_memory: int = 0
    ufs_during_query: int = 0  # bytes the workers read from the under-store while the query ran
    migration: tuple[float, float] | None = None  # first start, last end (s after submission)
    stats: dict[str, Any] = field(default_factory=dict)  # the job's read counters
    arrow: float | None = None  # the query from memory through thaw.arrow_dataset

    @property
    def in_memory_fraction(self) -> float:
        return self.bytes_in_memory / self.bytes if self.bytes else 0.0


def report_job(client: thaw.Client, job: thaw.Job, submitted: float, run: Run) -> None:
    """The job of interest, run by the queue when the slot frees: the query
    over the data set, every read carrying the job's id."""
    started = time.perf_counter()
    run.queue_wait = started - submitted
    progress = job.progress() or {}
    run.blocks, run.bytes = progress.get("blocks", 0), progress.get("bytes", 0)
    run.blocks_in_memory = progress.get("blocks_in_memory", 0)
    run.bytes_in_memory = progress.get("bytes_in_memory", 0)
    ufs_before = ufs_bytes_read(client)
    fs = thaw.ThawFileSystem(client=thaw.Client(client.master, job.id))
    con = thaw.register_duckdb(connect(), fs)
    t0 = time.perf_counter()
    run.rows = con.sql(QUERY.format("thaw:///sales/*.parquet")).fetchall()
    done = time.perf_counter()
    con.close()
    run.query = done - t0
    run.end_to_end = done - submitted
    run.ufs_during_query = ufs_bytes_read(client) - ufs_before
    run.stats = job.stats()


def scenario(cluster: thaw.LocalCluster, policy: str, ahead_rows: int) -> Run:
    """The job ahead takes the queue's only slot; the report job is submitted
    right behind it, and its submitter tells Thaw its inputs at submission."""
    client = cluster.client()
    run = Run(policy)
    events_from = client.migration_events()["next"]
    with ThreadPoolExecutor(max_workers=1) as queue:
        ahead = queue.submit(job_ahead, ahead_rows)
        submitted = time.perf_counter()
        submitted_wall = time.time()
        # The migrate call returns at once; the migration overlaps the wait.
        with thaw.job("report", inputs=["/sales"], client=client) as job:
            queue.submit(report_job, client, job, submitted, run).result()
            if policy != "none":
                # For reference, while the inputs are still in memory: the same
                # query through Arrow's scan instead of DuckDB's filesystem bridge.
                fs = thaw.ThawFileSystem(client=thaw.Client(client.master, "reference"))
                con = connect()
                con.register("sales", thaw.arrow_dataset("/sales", fs=fs))
                t0 = time.perf_counter()
                rows = con.sql(QUERY.replace("read_parquet('{}')", "sales")).fetchall()
                run.arrow = time.perf_counter() - t0
                con.close()
                if rows != run.rows:
                    raise RuntimeError(f"the Arrow scan disagrees: {rows} / {run.rows}")
        run.ahead = ahead.result()
    done = [e for e in client.migration_events(events_from)["events"] if e["outcome"] == "done"]
    if done:
        first = min(e["start_ms"] for e in done) / 1000 - submitted_wall
        run.migration = (first, max(e["end_ms"] for e in done) / 1000 - submitted_wall)
    return run


def demo(
    size: int = 512 * MIB,
    workers: int = 2,
    ufs_speed: str = "150MiB/s",
    ahead: float = 4.0,
    block_size: int = 16 * MIB,
    s3: bool = False,
) -> dict[str, Any]:
    """Runs both scenarios; returns the data set size, the runs, and a local reference."""
    tmp = Path(tempfile.mkdtemp(prefix="thaw-pydemo-"))
    server = None
    try:
        ufs = tmp / "ufs"
        ahead_rows = calibrate(ahead)  # first: writing the data set keeps the machine busy for a while
        nbytes = make_data(ufs, size)
        mount: str | Path = ufs
        env = None
        if s3:
            from thaw.seaweed import SeaweedS3

            server = SeaweedS3(["thaw-demo"])
            bucket = server.filesystem()
            for f in sorted((ufs / "sales").iterdir()):
                with open(f, "rb") as src, bucket.open_output_stream(f"thaw-demo/sales/{f.name}") as dst:
                    shutil.copyfileobj(src, dst, 8 * MIB)
            mount, env = server.uri("thaw-demo"), server.env
        runs = []
        for policy in ("none", "dyrs"):
            drop_pages(ufs)
            with thaw.LocalCluster(
                ufs=mount,
                env=env,
                workers=workers,
                block_size=block_size,
                mem_capacity=nbytes + 256 * MIB,
                migration_buffer=nbytes + 64 * MIB,
                migration_policy=policy,
                device_model=f"ufs={ufs_speed}",
            ) as cluster:
                runs.append(scenario(cluster, policy, ahead_rows))
        # For reference: the same query straight on the local files, warm in
        # the page cache (no emulated device, no Thaw).
        local = str(ufs / "sales" / "*.parquet")
        con = connect()
        con.sql(QUERY.format(local)).fetchall()
        t0 = time.perf_counter()
        local_rows = con.sql(QUERY.format(local)).fetchall()
        local_warm = time.perf_counter() - t0
        if not runs[0].rows == runs[1].rows == local_rows:
            raise RuntimeError(f"the runs disagree: {runs[0].rows} / {runs[1].rows} / local {local_rows}")
        return {
            "bytes": nbytes,
            "files": len(list((ufs / "sales").iterdir())),
            "runs": runs,
            "local_rows": local_rows,
            "local_warm": local_warm,
            "ahead_rows": ahead_rows,
            "ufs": str(mount),
        }
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(tmp, ignore_errors=True)


def mib(n: float) -> str:
    return f"{n / MIB:.0f} MiB"


def print_report(r: dict[str, Any], args: argparse.Namespace) -> None:
    base, mig = r["runs"]
    print("Thaw demo: a DuckDB query over a cold data set, queued behind another job, without and with")
    print("moving its inputs into memory while it waits\n")
    rows = [
        (
            "data set",
            f"{mib(r['bytes'])} of parquet ({r['files']} files, {mig.blocks} blocks) in an under-store"
            + (f" S3 bucket (a local SeaweedFS: {r['ufs']})" if args.s3 else " directory"),
        ),
        (
            "under-store",
            f"its speed is emulated: each worker reads it at {args.ufs_speed} (device_model, penalty 0.3 per"
            " extra stream), as from an object store or a hard disk (this machine's disk is fast and"
            " page-cached); its pages are dropped from the page cache before each run",
        ),
        (
            "job queue",
            "one slot (a ThreadPoolExecutor(max_workers=1), standing for a busy cluster's scheduler); the job"
            f" ahead holds it with about {args.ahead:g} s of work here (a CPU-bound DuckDB query over"
            f" {r['ahead_rows']:,} generated rows, one thread)",
        ),
        (
            "the job",
            '"report", top stores by revenue over thaw:///sales/*.parquet, submitted right behind it; its'
            ' submitter enters thaw.job("report", inputs=["/sales"]) at submission and leaves it (evicting)'
            " when the job is done",
        ),
        (
            "runs",
            f'two clusters of {args.workers} workers over the same under-store: migration_policy="none" (the'
            ' baseline: nothing moves before the reads) and "dyrs" (the inputs move into worker memory'
            " while the job waits)",
        ),
    ]
    for name, text in rows:
        print(f"{name:<12}{fill(text, 12)}")

    print("\nthe job's query: top stores by revenue")
    for store, revenue, sales in mig.rows:
        print(f"  store {store:>3}  revenue {revenue:>14,.2f}  sales {sales:,}")
    print("  (the same in both runs, and on the local files)")

    head = ("", "queue wait", "query", "end-to-end", "in memory at query start", "from the under-store")
    print(f"\n{head[0]:<16}{head[1]:>11}{head[2]:>9}{head[3]:>12}   {head[4]:<27}{head[5]}")
    print(f"{'':<16}{'':>11}{'':>9}{'':>12}   {'':<27}during the query")
    for run in (base, mig):
        name = f'policy "{run.policy}"'
        frac = f"{run.blocks_in_memory} of {run.blocks} blocks ({run.in_memory_fraction:.0%})"
        times = f"{run.queue_wait:>9.2f} s{run.query:>7.2f} s{run.end_to_end:>10.2f} s"
        print(f"{name:<16}{times}   {frac:<27}{mib(run.ufs_during_query)}")
    print(
        f"\nthe query ran {base.query / mig.query:.1f}x faster ({base.query:.2f} s -> {mig.query:.2f} s);"
        f" end to end, queue wait included, {base.end_to_end:.2f} s -> {mig.end_to_end:.2f} s"
    )
    if mig.migration is not None:
        first, last = mig.migration
        print(
            f"the migration ran from {first:.2f} s to {last:.2f} s after submission;"
            f" the job waited {mig.queue_wait:.2f} s for the slot"
        )
    if mig.in_memory_fraction < 1.0:
        print(
            f"the wait was too short for the whole input: {mig.in_memory_fraction:.0%} of its bytes"
            f" ({mib(mig.bytes_in_memory)} of {mib(mig.bytes)}) were in memory when the query started"
        )
    counts = [f'{run.stats.get("reads", 0)} under "{run.policy}"' for run in (base, mig)]
    reads = sum(run.stats.get("reads", 0) for run in (base, mig))
    opens = sum(run.stats.get("short_circuit_opens", 0) for run in (base, mig))
    text = (
        f"the job's counters on the workers: {counts[0]}, {counts[1]} block reads,"
        f" {'all' if opens == reads else opens} opened in place in worker memory by short-circuit"
        ' (under "none" each cold block was first filled in from the under-store)'
    )
    print(fill(text, 2))
    print("\nfor reference, the same query")
    print(f"  from worker memory, DuckDB's read_parquet('thaw://...') (the job above) {mig.query:>6.2f} s")
    if mig.arrow is not None:
        print(
            f"  from worker memory, a DuckDB view over thaw.arrow_dataset('/sales')     {mig.arrow:>6.2f} s"
        )
    print(
        f"  on the local files, warm in the page cache (no Thaw, nothing emulated)  {r['local_warm']:>6.2f} s"
    )


def fill(text: str, indent: int, width: int = 100) -> str:
    """``text`` wrapped to ``width`` for printing after ``indent`` columns, its
    later lines indented to line up."""
    pad = " " * indent
    return textwrap.fill(text, width, initial_indent=pad, subsequent_indent=pad)[indent:]


def parser() -> argparse.ArgumentParser:
    """``python -m thaw.demo``'s options, each with its help."""
    ap = argparse.ArgumentParser(
        prog="python -m thaw.demo",
        description=(
            "Thaw's main job: a DuckDB query over a cold data set, queued, with and without migration"
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--size", default="512MiB", help="data set size (KiB, MiB or GiB units)")
    ap.add_argument("--workers", type=int, default=2, help="workers of each run's local cluster")
    ap.add_argument(
        "--ufs-speed",
        default="150MiB/s",
        help="emulated under-store read bandwidth per worker, e.g. 150MiB/s (the machine's disk is faster)",
    )
    ap.add_argument("--ahead", type=float, default=4.0, help="seconds the job ahead holds the queue's slot")
    ap.add_argument(
        "--block-size",
        default="16MiB",
        help="block size of the data set's files (a migration moves whole blocks)",
    )
    ap.add_argument("--s3", action="store_true", help="the under-store is an S3 bucket (a local SeaweedFS)")
    return ap


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = parser()
    args = ap.parse_args(argv)
    r = demo(
        size=parse_size(args.size),
        workers=args.workers,
        ufs_speed=args.ufs_speed,
        ahead=args.ahead,
        block_size=parse_size(args.block_size),
        s3=args.s3,
    )
    print_report(r, args)
    return r


if __name__ == "__main__":
    main()
