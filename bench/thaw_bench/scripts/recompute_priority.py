"""Benchmark: who gets the slots while a lost file is rebuilt (Tachyon, section 4).

Tachyon's rule: a recomputation runs at a priority below the jobs that are not
waiting for it and above the jobs that are. With Dask (``thaw.dask.install(...,
recompute=True)`` and ``thaw master --recompute-executor external``), the rerun
is a Dask task at priority -1, and a task that reads a lost file secedes from its
worker's thread pool while it waits (see :mod:`thaw.dask.recompute`).

An emulated cluster of 2 nodes (Thaw workers) and one Dask worker with 2 threads.
A grep step (``thaw.lineage.step``) writes its output async-through beside node0;
node0's Thaw worker is killed (kill -9), so the output is lost. Then two jobs are
submitted together: ``waiting``, 2 tasks reading the lost file, and ``busy``, 8
tasks of 0.4 s that need nothing lost. Reported per configuration (median of
``--repeats``): the busy job's makespan (alone it takes 8 x 0.4 / 2 = 1.6 s), when
the rerun started and ended, and when the waiting job ended, all from submission.

- ``thaw``: the rerun at priority -1 (below busy), the waiting tasks seceded;
- ``rerun-first``: the rerun at priority +1 (above every job's tasks).

Without the secession, the two waiting tasks would hold both threads while the
rerun they wait for could never run (``test_dask.py`` checks this on one thread).

    python -m thaw_bench.scripts.recompute_priority --out bench-out/recompute-priority.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import thaw
import thaw.dask
from thaw_bench.cluster import ClusterSpec, EmulatedCluster
from thaw_bench.pipeline import generate_log, grep_step, run_task
from thaw_bench.runner import start_dask


def read_task(master: str, path: str) -> tuple[float, float]:
    """A task of the waiting job: reads the lost file (waits for its rebuild)."""
    t = time.time()
    thaw.Client(master).cat(path)
    return t, time.time()


def busy_task(seconds: float) -> tuple[float, float]:
    """A task of the busy job: needs nothing lost."""
    t = time.time()
    time.sleep(seconds)
    return t, time.time()


def one_run(ec: EmulatedCluster, dask_cluster: Any, config: str, run: int) -> dict[str, Any]:
    from distributed import Client as DaskClient

    ec.start("none")
    c = thaw.Client(ec.master, host="node0")
    c.write_bytes("/logs", generate_log(run, 8 << 20), write_type="cache-through", overwrite=True)
    out = f"/errors-{config}-{run}"
    run_task(ec.master, grep_step, ["/logs"], [out], "narrow", "async-through")
    ec.kill_node("node0")
    while not c.stat(out)["lost"]:
        time.sleep(0.05)
    with DaskClient(dask_cluster) as dc:
        priority = -1 if config == "thaw" else 1
        thaw.dask.install(dc, ec.master, recompute=True, placement=False, recompute_priority=priority)
        t0 = time.time()
        waiting = [dc.submit(read_task, ec.master, out, pure=False) for _ in range(2)]
        busy = [dc.submit(busy_task, 0.4, pure=False) for _ in range(8)]
        busy_spans = [f.result(timeout=300) for f in busy]
        waiting_spans = [f.result(timeout=300) for f in waiting]
        ran: list[dict[str, Any]] = []
        while not ran:
            ran = dc.run_on_scheduler(
                lambda dask_scheduler: dask_scheduler.plugins["thaw"].recompute_executor.ran
            )
            time.sleep(0.05)
        dc.unregister_scheduler_plugin("thaw")
    rerun = [(r["start"], r["end"]) for r in ran]
    return {
        "config": config,
        "run": run,
        "busy_makespan": max(e for _, e in busy_spans) - t0,
        "waiting_done": max(e for _, e in waiting_spans) - t0,
        "rerun_start": min(s for s, _ in rerun) - t0 if rerun else None,
        "rerun_end": max(e for _, e in rerun) - t0 if rerun else None,
        "rerun_errors": [r["error"] for r in ran],
    }


def run(repeats: int, out: Path) -> Path:
    """Runs both configurations ``repeats`` times, alternating; writes ``out``."""
    spec = ClusterSpec(
        nodes=2, slots=2, disk="200MiB/s", block_size="1MiB", mem_capacity="256MiB", heartbeat_ms=200,
        worker_timeout_ms=1000,
        master_args=["--recompute", "reactive", "--recompute-executor", "external"],
        # Checkpoints never finish before the kill (1 KiB/s per node).
        worker_args=["--checkpoint-bandwidth", "1KiB"],
    )  # fmt: skip
    ec = EmulatedCluster(spec)
    # The step's output lands beside node0 (put back after: `thaw_bench paper`
    # runs the other experiments in this process).
    host_before = os.environ.get("THAW_HOST")
    os.environ["THAW_HOST"] = "node0"
    runs: list[dict[str, Any]] = []
    dask_cluster = dask_client = None
    try:
        ec.start("none")
        dask_cluster, dask_client = start_dask([("node1", "rack1")], 2)
        for r in range(repeats):
            for config in ("thaw", "rerun-first") if r % 2 == 0 else ("rerun-first", "thaw"):
                run = one_run(ec, dask_cluster, config, r)
                runs.append(run)
                print(json.dumps(run), flush=True)
    finally:
        if dask_client is not None:
            dask_client.close()
        if dask_cluster is not None:
            dask_cluster.close()
        ec.close()
        if host_before is None:
            os.environ.pop("THAW_HOST", None)
        else:
            os.environ["THAW_HOST"] = host_before
    summary = {
        config: {
            k: round(statistics.median(x[k] for x in runs if x["config"] == config and x[k] is not None), 3)
            for k in ("busy_makespan", "rerun_start", "rerun_end", "waiting_done")
        }
        for config in ("thaw", "rerun-first")
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))
    print(json.dumps(summary, indent=2))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("bench-out/recompute-priority.json"))
    a = p.parse_args()
    run(a.repeats, a.out)


if __name__ == "__main__":
    main()
