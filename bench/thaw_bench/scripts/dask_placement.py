"""Benchmark: memory-local placement of Dask tasks by the Thaw scheduler plugin
(CAVA, Algorithm 1) against Dask's own placement, when the blocks are in
memory before their tasks run.

An emulated cluster (``thaw_bench.cluster``: 7 nodes on 2 racks, one Thaw worker
and one Dask worker process of ``--slots`` threads per node). Input files are
written with 3 replicas on the nodes' disks, then one job migrates and holds
them all, so each block sits in one node's memory. Two workloads, each a plain
Dask graph whose map tasks read one block each (annotated with their byte range,
``thaw_inputs=[(path, offset, length)]``), submitted through the plugin:

- ``sort``: one job over ``--sort-blocks`` blocks;
- ``jobs``: ``--jobs`` jobs of 2-16 blocks submitted together (a mix of small and
  large jobs, as in the SWIM traces).

Configurations, side by side in one run, alternating, ``--repeats`` each:
``dask`` (the plugin migrates but leaves placement to Dask) and ``thaw`` (the
plugin places). Per run: the share of map tasks that read all their bytes from
memory on their own host (memory-local, from each task's own read statistics),
the delay each task paid for locality (plugin's log: median, p99, max; bound
``--max-wait``), and the wall time from submission to the last result.

    python -m thaw_bench.scripts.dask_placement --out bench-out/dask-placement.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import dask

import thaw
import thaw.dask
from thaw.dask import placement as pl
from thaw_bench.cluster import ClusterSpec, EmulatedCluster
from thaw_bench.runner import start_dask


def map_task(master: str, path: str, offset: int, length: int) -> dict[str, Any]:
    """Reads one block through Thaw, as a map task does, and reports where it ran
    and where its bytes came from."""
    with thaw.Client(master).open(path) as f:
        f.seek(offset)
        data = f.read(length)
        stats = f.stats()
    return {"node": os.environ.get("THAW_HOST", ""), "crc": zlib.crc32(data), "bytes": len(data), **stats}


def write_inputs(ec: EmulatedCluster, name: str, files: int, blocks_per_file: int, block: int) -> list[str]:
    """Files of ``blocks_per_file`` blocks, 3 replicas each on the nodes' disks."""
    nodes = [n.name for n in ec.nodes]
    paths = []
    for i in range(files):
        path = f"/bench/placement/{name}/f{i:04d}"
        writer = thaw.Client(ec.master, host=nodes[i % len(nodes)])
        with writer.open(path, "wb", write_type="replicated:3", block_size=block) as f:
            f.write(os.urandom(blocks_per_file * block))
        paths.append(path)
    return paths


def blocks_of(client: thaw.Client, paths: list[str]) -> list[tuple[str, int, int, str]]:
    """(path, offset, length, node whose memory holds it) of every block."""
    out = []
    for p in paths:
        for b in client.stat(p, blocks=True)["blocks"]:
            mem = [r["host"] for r in b["replicas"] if r["tier"] == "MEM"]
            out.append((p, b["offset"], b["length"], mem[0] if mem else ""))
    return out


def run_jobs(dc: Any, master: str, jobs: list[list[tuple[str, int, int, str]]], tag: str) -> dict[str, Any]:
    """Submits every job (one graph each) at once; waits for all."""
    t0 = time.perf_counter()
    futures = []
    for j, blocks in enumerate(jobs):
        tasks = []
        for path, off, n, _ in blocks:
            with dask.annotate(thaw_inputs=[(path, off, n)], thaw_job=f"{tag}-{j}"):
                tasks.append(dask.delayed(map_task, pure=False)(master, path, off, n))
        futures.append(dc.compute(tasks))
    results = [r for f in futures for r in dc.gather(f)]
    wall = time.perf_counter() - t0
    expected = [node for blocks in jobs for *_, node in blocks]
    local = sum(1 for r in results if r["short_circuit"] == r["bytes"])
    on_holder = sum(1 for r, node in zip(results, expected, strict=True) if r["node"] == node)
    return {
        "wall_s": wall,
        "tasks": len(results),
        "memory_local": local / len(results),
        "on_holder": on_holder,
    }


def delays(dc: Any) -> dict[str, Any]:
    log = thaw.dask.placements(dc)
    launches = [(pl.LEVELS.index(e["level"]), e["delay"], e["in_memory"]) for e in log]
    return thaw.dask.launch_summary(launches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=7)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--block", default="1MiB")
    ap.add_argument("--sort-blocks", type=int, default=84)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-wait", type=float, default=2.0)
    ap.add_argument("--memory-wait", type=float, default=0.5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    block = {"KiB": 1 << 10, "MiB": 1 << 20}[args.block[-3:]] * int(args.block[:-3])
    spec = ClusterSpec(nodes=args.nodes, racks=2, slots=args.slots, disk="400MiB/s", block_size=args.block)
    rng = random.Random(7)
    sizes = [rng.choice([2, 2, 4, 4, 8, 16]) for _ in range(args.jobs)]
    rows: list[dict[str, Any]] = []
    with EmulatedCluster(spec) as ec:
        ec.start("dyrs")
        client = thaw.Client(ec.master)
        sort_paths = write_inputs(ec, "sort", args.sort_blocks // 4, 4, block)
        job_paths = write_inputs(ec, "jobs", sum(sizes), 1, block)
        client.migrate(["/bench/placement"], "hold-inputs", lease=3600)
        client.wait_migrated("hold-inputs", timeout=300)
        sort_blocks = blocks_of(client, sort_paths)
        single = blocks_of(client, job_paths)
        mix, k = [], 0
        for n in sizes:
            mix.append(single[k : k + n])
            k += n
        nodes = [(n.name, n.rack) for n in ec.nodes]
        print(
            f"inputs in memory: {len(sort_blocks)} sort blocks, {len(single)} job blocks; nodes {len(nodes)}"
        )
        for rep in range(args.repeats):
            for config in ("dask", "thaw") if rep % 2 == 0 else ("thaw", "dask"):
                cluster, dc = start_dask(nodes, args.slots)
                try:
                    d = pl.Delays(memory=args.memory_wait, disk=args.memory_wait, max_wait=args.max_wait)
                    thaw.dask.install(dc, ec.master, placement=(config == "thaw"), delays=d)
                    for workload, jobs in (("sort", [sort_blocks]), ("jobs", mix)):
                        r = run_jobs(dc, ec.master, jobs, f"{workload}-{config}-{rep}")
                        r.update(config=config, workload=workload, repeat=rep)
                        if config == "thaw":
                            r["placement"] = delays(dc)
                            dc.run_on_scheduler(_clear_log)
                        rows.append(r)
                        place = r.get("placement", {})
                        print(
                            f"{workload:5s} {config:5s} rep {rep}: {r['tasks']} tasks, "
                            f"memory-local {r['memory_local']:.0%}, wall {r['wall_s']:.2f} s"
                            + (
                                f", delay median {place['delay_median']:.3f} p99 {place['delay_p99']:.3f}"
                                f" max {place['delay_max']:.3f} s"
                                if place.get("placed")
                                else ""
                            )
                        )
                finally:
                    dc.close()
                    cluster.close()
        client.evict("hold-inputs")
    summary = {}
    for workload in ("sort", "jobs"):
        for config in ("dask", "thaw"):
            rs = [r for r in rows if r["workload"] == workload and r["config"] == config]
            summary[f"{workload}/{config}"] = {
                "memory_local_median": statistics.median(r["memory_local"] for r in rs),
                "memory_local_range": [
                    min(r["memory_local"] for r in rs),
                    max(r["memory_local"] for r in rs),
                ],
                "wall_median_s": statistics.median(r["wall_s"] for r in rs),
                "wall_range_s": [min(r["wall_s"] for r in rs), max(r["wall_s"] for r in rs)],
                "delay_max_s": max((r.get("placement", {}).get("delay_max", 0.0) for r in rs), default=0.0),
            }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"args": vars(args) | {"out": str(args.out)}, "rows": rows, "summary": summary}
        args.out.write_text(json.dumps(record, indent=1))


def _clear_log(dask_scheduler: Any) -> None:
    plugin = dask_scheduler.plugins.get("thaw")
    if plugin is not None:
        plugin.launch_log.clear()


if __name__ == "__main__":
    sys.exit(main())
