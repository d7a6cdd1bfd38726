"""Benchmark: a Spark SQL query queued behind another, its inputs cold in an
under-store paced by the device model, in four configurations (the issue's
"queued query" experiment; Ignem/DYRS's Hive experiment on Spark):

- ``ufs``: the query reads the under-store directory itself (``file://``, its
  pages dropped first; the real local disk, which is faster than the modelled
  device: Thaw's configurations read it at the modelled speed);
- ``thaw``: ``thaw://``, the extension off (no migration; reads go through to
  the under-store and cache what they read);
- ``thaw-dyrs``: ``thaw://`` with ``io.thaw.spark.ThawSparkExtension`` and the
  master's ``dyrs`` policy: the query's files are submitted when it is planned
  and move into memory while it waits;
- ``memory``: the inputs already in memory (migrated and waited for before the
  query), the extension off.

A Spark standalone cluster (two one-core workers on 127.0.0.2 and .3) beside a
Thaw cluster (a worker on each host, under-store reads paced at ``--ufs-rate``
each), one application in the FIFO pool: a blocker holds both cores for
``--wait`` seconds, and TPC-H Q6 over ``lineitem`` (parquet, scale ``--sf``) is
submitted right after it. Per run: the query's time from submission, its run
time from its first scan task's launch, its scan tasks' locality, and where
Thaw served its reads from (memory or cold). Each run has fresh cold copies of
the files (pages dropped). Rounds alternate the configurations' order.

    python -m thaw_bench.scripts.spark_queued --sf 1 --repeats 3 --out bench-out/spark-queued.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import thaw
from thaw import sparkcluster as sc
from thaw.sizes import parse_size
from thaw_bench.sql import generate_tpch

CONFIGS = ("ufs", "thaw", "thaw-dyrs", "memory")
#: TPC-H Q6 (forecasting revenue change): a scan of lineitem, little else.
Q6 = """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"""
#: The job id every read of the application carries.
READS = "spark-queued-reads"


def copy_cold(src: list[Path], dst: Path) -> None:
    """Copies the parts into `dst` (a directory of the under-store), pages dropped."""
    dst.mkdir(parents=True)
    for p in src:
        shutil.copyfile(p, dst / p.name)
        fd = os.open(dst / p.name, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_once(
    spark: Any, client: thaw.Client, config: str, url: str, schema: Any, wait_s: float
) -> dict[str, Any]:
    """One queued query: the blocker, then Q6 over `url`, timed from its
    submission. The table is defined first with its schema given, as a
    metastore's table is: no job lists or infers anything before the query."""
    spark.conf.set("spark.thaw.migrate.enabled", "true" if config == "thaw-dyrs" else "false")
    desc = f"q6 {config} {time.monotonic_ns()}"
    spark.read.schema(schema).parquet(url).createOrReplaceTempView("lineitem")

    def blocker() -> None:
        spark.sparkContext.setJobDescription(f"blocker {desc}")
        spark.range(0, 2, 1, 2).selectExpr(
            f"reflect('java.lang.Thread', 'sleep', {int(wait_s * 1000)}L)"
        ).collect()

    t = threading.Thread(target=blocker)
    t.start()
    try:
        sc.wait_for(
            "the blocker running", lambda: any(s["numActiveTasks"] == 2 for s in sc.rest(spark, "stages"))
        )
        before = client.job_stats(READS)
        spark.sparkContext.setJobDescription(desc)
        start = time.time()
        revenue = spark.sql(Q6).collect()[0][0]
        end = time.time()
        spark.sparkContext.setLocalProperty("spark.job.description", None)
        after = client.job_stats(READS)
    finally:
        t.join()
    tasks = sc.scan_tasks(spark, desc)
    first = min(sc.spark_ms(x["launchTime"]) for x in tasks) / 1000
    # NODE_LOCAL: on a host its input's locations named (a task with no
    # locations at all runs anywhere, reported PROCESS_LOCAL).
    local = sum(x["taskLocality"] == "NODE_LOCAL" for x in tasks)
    localities: dict[str, int] = {}
    for x in tasks:
        localities[x["taskLocality"]] = localities.get(x["taskLocality"], 0) + 1
    read = after["bytes_read"] - before["bytes_read"]
    return {
        "config": config,
        "revenue": float(revenue),
        "total_s": end - start,
        "run_s": end - first,
        "waited_s": first - start,
        "scan_tasks": len(tasks),
        "node_local": local,
        "localities": localities,
        "thaw_bytes_read": read,
        "thaw_bytes_from_memory": after["bytes_from_memory"] - before["bytes_from_memory"],
        "thaw_bytes_cold": after["bytes_cold"] - before["bytes_cold"],
    }


def describe(run: dict[str, Any]) -> str:
    mib = run["thaw_bytes_from_memory"] >> 20, run["thaw_bytes_read"] >> 20
    return (
        f"total {run['total_s']:6.2f} s  run {run['run_s']:6.2f} s  "
        f"node-local {run['node_local']}/{run['scan_tasks']}  from memory {mib[0]}/{mib[1]} MiB"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--part-size", default="24MiB")
    ap.add_argument("--ufs-rate", default="20MiB/s", help="each Thaw worker's under-store read rate")
    ap.add_argument("--wait", type=float, default=20.0, help="seconds the blocker holds both cores")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", default="bench-out/tpch-spark", help="where the generated parquet is kept")
    ap.add_argument("--out", default="bench-out/spark-queued.json")
    args = ap.parse_args()
    reason = sc.skip_reason()
    if reason:
        raise SystemExit(f"cannot run Spark here: {reason}")
    parts = generate_tpch(Path(args.data).resolve(), args.sf, parse_size(args.part_size))["lineitem"]
    size = sum(p.stat().st_size for p in parts)
    tmp = Path(tempfile.mkdtemp(prefix="thaw-bench-spark-"))
    runs: list[dict[str, Any]] = []
    try:
        worker_flags = ("--device-model", f"ufs={args.ufs_rate}")
        mem = str(2 * size + (256 << 20))
        with sc.clusters(
            tmp, thaw_worker_flags=worker_flags, block_size="16MiB", mem_capacity=mem, jvm_options=""
        ) as c:
            spark = sc.session(
                c,
                "spark-queued",
                **{
                    "spark.hadoop.fs.thaw.job": READS,
                    # One task per part file.
                    "spark.sql.files.openCostInBytes": str(256 << 20),
                    "spark.sql.files.maxPartitionBytes": str(256 << 20),
                },
            )
            client = thaw.Client(c.thaw)
            schema = spark.read.parquet(f"file://{parts[0]}").schema
            try:
                for r in range(args.repeats):
                    order = CONFIGS if r % 2 == 0 else tuple(reversed(CONFIGS))
                    for config in order:
                        name = f"li-{r}-{config}"
                        copy_cold(parts, c.ufs / name)
                        url = f"file://{c.ufs / name}" if config == "ufs" else f"thaw:///{name}"
                        if config == "memory":
                            client.migrate(f"/{name}", job=f"preload-{name}")
                            client.wait_migrated(f"preload-{name}", timeout=600)
                        run = run_once(spark, client, config, url, schema, args.wait)
                        run["round"] = r
                        runs.append(run)
                        print(f"round {r + 1} {config}: {describe(run)}", flush=True)
                        if config == "memory":
                            client.evict(job=f"preload-{name}")
                        client.rm(f"/{name}", recursive=True)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    revenues = {round(r["revenue"], 2) for r in runs}
    if len(revenues) != 1:
        raise RuntimeError(f"the configurations disagree on Q6's answer: {revenues}")
    med = {
        cfg: {k: statistics.median(r[k] for r in runs if r["config"] == cfg) for k in ("total_s", "run_s")}
        for cfg in CONFIGS
    }
    ratios = {
        "thaw-dyrs / memory (run)": med["thaw-dyrs"]["run_s"] / med["memory"]["run_s"],
        "thaw / memory (run)": med["thaw"]["run_s"] / med["memory"]["run_s"],
        "ufs / memory (run)": med["ufs"]["run_s"] / med["memory"]["run_s"],
    }
    local = {
        cfg: sum(r["node_local"] for r in runs if r["config"] == cfg)
        / max(1, sum(r["scan_tasks"] for r in runs if r["config"] == cfg))
        for cfg in CONFIGS
    }
    doc = {
        "benchmark": "spark-queued",
        "sf": args.sf,
        "lineitem_bytes": size,
        "parts": len(parts),
        "ufs_rate": args.ufs_rate,
        "wait_s": args.wait,
        "repeats": args.repeats,
        "runs": runs,
        "median": med,
        "ratios": ratios,
        "node_local_share": local,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    for cfg in CONFIGS:
        m = med[cfg]
        print(f"{cfg:10s} total {m['total_s']:6.2f} s  run {m['run_s']:6.2f} s  node-local {local[cfg]:.0%}")
    for k, v in ratios.items():
        print(f"{k:28s} {v:.2f}x")


if __name__ == "__main__":
    main()
