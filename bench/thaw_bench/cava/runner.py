"""Runs CAVA's applications: a fresh Thaw cluster under a policy with the Thaw
Dask plugins installed, each application a Dask graph of one task per block
(annotated with its job, kind, inputs, start-up and, for Static-CA, declared
affinity), at most ``concurrency`` at once; and the run's record (per
application: runtime, bytes from memory and from the under-store, writes, the
class the master gave; per run: hit ratios, hot data cached, the workers'
counters, where the plugin placed the tasks, the sampled timeline). A run that
fails is recorded with its error.

The cluster is an emulated one (:class:`thaw_bench.cluster.EmulatedCluster`):
``scale.workers`` nodes on ``scale.racks`` racks, each a Thaw worker (its own
MEM tier, its own emulated link to the under-store) and a Dask worker beside it
(``THAW_HOST``: its tasks read their node's memory by short-circuit and fill
cold blocks into it). With ``scale.network`` (``--network SPEC``, root only)
each node is an emulated host of :mod:`thaw_bench.netlab` and its Dask worker
runs in its namespace (:func:`thaw_bench.netdask.start_dask_on`), so a hit in
another worker's memory crosses the shaped links. The Thaw processes restart for every run (memory empty,
the run's cache policy); the Dask workers and the under-store directory serve
every run of an invocation (:func:`environment`)."""

from __future__ import annotations

import contextlib
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import thaw.dask as td
from thaw.client import Client

from ..cluster import ClusterSpec, EmulatedCluster
from ..netdask import start_dask_on
from ..runner import stop_dask
from .policies import Policy
from .sampler import Sampler
from .tasks import app_task, collect
from .workloads import APPS, PAPER_AFFINITY, AppSpec, Scale, Workload

#: A worker's MEM tier for the ``unlimited`` policy: more than any workload's input.
UNLIMITED_MEM = "2GiB"


def cluster_spec(scale: Scale) -> ClusterSpec:
    """The emulated cluster of ``scale``: its nodes' MEM tiers and under-store
    links; no DISK-tier reads (the inputs are in the under-store)."""
    return ClusterSpec(
        nodes=scale.workers, racks=scale.racks, slots=scale.slots, disk="1GiB/s", penalty=scale.penalty,
        block_size=str(scale.block_size), mem_capacity=str(scale.mem_capacity), disk_capacity="256MiB",
        heartbeat_ms=scale.heartbeat_ms, ufs=scale.ufs, network=scale.network,
    )  # fmt: skip


@contextlib.contextmanager
def environment(scale: Scale, root: str | None) -> Iterator[tuple[EmulatedCluster, Any]]:
    """The emulated cluster (not started; in a scratch directory under ``root``,
    default the system's, removed at the end, its under-store directory in it)
    and a Dask client of one worker per node."""
    import tempfile

    import dask

    scratch = None if root is None else tempfile.mkdtemp(prefix="thaw-cava-", dir=root)
    cluster = EmulatedCluster(cluster_spec(scale), root=scratch)
    dask_cluster = dask_client = None
    try:
        dask_cluster, dask_client = start_dask_on(cluster, scale.slots)
        dask.config.set({"distributed.admin.tick.limit": "10s"})
        yield cluster, dask_client
    finally:
        stop_dask(dask_cluster, dask_client)
        cluster.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class Context:
    """What every run shares: the scale, the Dask client, the emulated cluster
    (its under-store directory: ``ufs``)."""

    scale: Scale
    dask: Any
    cluster: EmulatedCluster | None
    say: Callable[[str], None] = print
    affinity: dict[str, float] = field(default_factory=lambda: dict(PAPER_AFFINITY))

    @property
    def ufs(self) -> Path:
        if self.cluster is None:
            raise RuntimeError("no cluster")
        return self.cluster.root / "ufs"


def _graph(
    app: AppSpec, run_id: str, master: str, policy: Policy, ctx: Context, size: int, out_root: str
) -> Any:
    """One application: a task per block of its input, then one collecting
    task; every reading task annotated with the job, the application's kind,
    its range of the input, its start-up and, for Static-CA, the declared
    affinity."""
    import dask

    bs = ctx.scale.block_size
    notes: dict[str, Any] = {
        td.JOB_ANNOTATION: app.name,
        td.APP_ANNOTATION: app.kind,  # a run starts from the class the last one got
        td.START_ANNOTATION: time.time() + ctx.scale.startup_s,
    }
    if policy.declare:
        notes[td.AFFINITY_ANNOTATION] = float(ctx.affinity[app.kind])
    parts = []
    for i, offset in enumerate(range(0, size, bs)):
        length = min(bs, size - offset)
        output = f"{out_root}/{app.name}/part-{i:04d}" if APPS[app.kind].write_ratio > 0 else None
        with dask.annotate(**notes, **{td.INPUTS_ANNOTATION: [(app.path, offset, length)]}):
            parts.append(
                dask.delayed(app_task, pure=False)(
                    master, app.name, app.kind, app.path, offset, length, policy.read_cache, output,
                    ctx.scale.pagerank_iters, dask_key_name=f"{run_id}-{app.name}-{i}",
                )
            )  # fmt: skip
    return dask.delayed(collect, pure=False)(*parts, dask_key_name=f"{run_id}-{app.name}-done")


@contextlib.contextmanager
def thaw_cluster(ctx: Context, policy: Policy) -> Iterator[tuple[EmulatedCluster, Client]]:
    """The emulated cluster started afresh under ``policy`` (memory empty, no
    migration) with the Thaw Dask plugins installed for it, placing by memory
    locality if ``ctx.scale.placement`` (and removed before it stops, so that
    they do not report to a master that is gone)."""
    cluster = ctx.cluster
    if cluster is None:
        raise RuntimeError("no cluster")
    args = ["--cache-policy", policy.cache_policy, "--cache-window", ctx.scale.cache_window]
    mem = UNLIMITED_MEM if policy.unlimited else str(ctx.scale.mem_capacity)
    cluster.spec = replace(cluster.spec, worker_args=args, mem_capacity=mem)
    cluster.start("none")
    try:
        td.install(ctx.dask, cluster.master, eviction="implicit", placement=ctx.scale.placement, lease=60.0)
        try:
            yield cluster, Client(cluster.master, read_cache="mem")
        finally:
            for name in (td.ThawUsage.name, td.ThawWorkerPlace.name):
                with contextlib.suppress(Exception):
                    ctx.dask.unregister_worker_plugin(name)
            with contextlib.suppress(Exception):
                ctx.dask.unregister_scheduler_plugin(td.ThawSchedulerPlugin.name)
    finally:
        cluster.stop()


def run_apps(
    ctx: Context,
    client: Client,
    workload: Workload,
    policy: Policy,
    run_id: str,
    *,
    concurrency: int,
) -> dict[str, Any]:
    """Runs ``workload``'s applications on the cluster ``client`` talks to,
    under ``policy``, at most ``concurrency`` at once, each next one submitted
    when one ends."""
    from distributed import as_completed

    master = client.master
    out_root = f"/cava-out/{run_id}"
    t0 = time.time()
    sampler = Sampler(client, t0, ctx.scale.sample_interval)
    sampler.sample()
    sampler.start()
    queue = list(workload.apps)
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    records: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    futures = as_completed()
    by_key: dict[str, AppSpec] = {}

    def submit(app: AppSpec) -> None:
        graph = _graph(app, run_id, master, policy, ctx, workload.files[app.path].size, out_root)
        started[app.name] = time.time()
        fut = ctx.dask.compute(graph)
        by_key[fut.key] = app
        futures.add(fut)

    try:
        while queue and len(started) < concurrency:
            submit(queue.pop(0))
        deadline = t0 + ctx.scale.timeout
        for fut in futures:
            app = by_key.pop(fut.key)
            ended[app.name] = time.time()
            try:
                records[app.name] = fut.result()
            except Exception as e:
                errors[app.name] = repr(e)[:500]
            fut.release()
            if time.time() > deadline:
                raise TimeoutError(f"{run_id}: still running after {ctx.scale.timeout:.0f}s")
            if queue:
                submit(queue.pop(0))
        wall = time.time() - t0
        time.sleep(2 * ctx.scale.heartbeat_ms / 1000)  # the workers' last counters reach the master
    finally:
        sampler.stop()
    final = sampler.sample()
    with contextlib.suppress(Exception):
        client.rm(out_root, recursive=True)
    shutil.rmtree(ctx.ufs / out_root.lstrip("/"), ignore_errors=True)
    run = _run_record(workload, policy, run_id, t0, wall, started, ended, records, errors, sampler, final)
    run["placement"] = placement_record(ctx, {a.name for a in workload.apps})
    return run


def placement_record(ctx: Context, jobs: set[str]) -> dict[str, Any]:
    """Where the plugin launched ``jobs``' tasks (CAVA, Algorithm 1's levels) and
    the delay they paid: :func:`thaw.dask.launch_summary` of its launch log;
    ``{"placed": 0, "by": "dask"}`` with placement off."""
    if not ctx.scale.placement:
        return {"placed": 0, "by": "dask"}
    log = [x for x in td.placements(ctx.dask) if x["job"] in jobs]
    levels = {name: i for i, name in enumerate(td.placement.LEVELS)}
    launches = [(levels[x["level"]], float(x["delay"]), bool(x["in_memory"])) for x in log]
    return {**td.launch_summary(launches), "by": "thaw"}


def _run_record(
    workload: Workload,
    policy: Policy,
    run_id: str,
    t0: float,
    wall: float,
    started: dict[str, float],
    ended: dict[str, float],
    records: dict[str, list[dict[str, Any]]],
    errors: dict[str, str],
    sampler: Sampler,
    final: dict[str, Any],
) -> dict[str, Any]:
    apps = []
    for a in workload.apps:
        rs = records.get(a.name, [])
        runtime = ended.get(a.name, t0) - started.get(a.name, t0)
        seen = sampler.apps.get(a.name) or {}
        apps.append(
            {
                "app": a.name,
                "kind": a.kind,
                "path": a.path,
                "hot_file": workload.files[a.path].hot,
                "start": round(started.get(a.name, t0) - t0, 3),
                "end": round(ended.get(a.name, t0) - t0, 3),
                "runtime": round(runtime, 3),
                "tasks": len(rs),
                "blocks_hit": sum(1 for r in rs if r["bytes_ufs"] == 0),
                "bytes": sum(r["bytes"] for r in rs),
                "bytes_mem": sum(r["bytes_mem"] for r in rs),
                "bytes_local_mem": sum(r["bytes_local_mem"] for r in rs),
                "bytes_ufs": sum(r["bytes_ufs"] for r in rs),
                "written": sum(r["written"] for r in rs),
                "cpu_s": round(sum(r["cpu_s"] for r in rs), 3),
                "task_s": round(sum(r["end"] - r["start"] for r in rs), 3),
                # What the master measured and concluded (cache report).
                "class": seen.get("class"),
                "master": seen or None,
                "error": errors.get(a.name),
            }
        )
    tasks = sum(a["tasks"] for a in apps)
    read = sum(a["bytes"] for a in apps)
    files = final["files"]
    hot = [f for f in workload.files.values() if f.hot]
    cold = [f for f in workload.files.values() if not f.hot]
    hot_bytes = sum(f.size for f in hot)
    hot_cached = sum(min(f.size, files.get(f.path, 0)) for f in hot)
    workers = final["workers"]
    hits = sum(int(w.get("hits") or 0) for w in workers)
    misses = sum(int(w.get("misses") or 0) for w in workers)
    return {
        "run": run_id,
        "workload": workload.name,
        "policy": policy.name,
        "policy_label": policy.label,
        "wall_s": round(wall, 3),
        "mean_app_runtime": round(statistics.mean(a["runtime"] for a in apps), 3) if apps else None,
        "failed_apps": sorted(errors),
        "hit_ratio": round(sum(a["blocks_hit"] for a in apps) / tasks, 4) if tasks else None,
        "byte_hit_ratio": round(sum(a["bytes_mem"] for a in apps) / read, 4) if read else None,
        "worker_hit_ratio": round(hits / (hits + misses), 4) if hits + misses else None,
        "drops": sum(int(w.get("drops") or 0) for w in workers),
        "skipped": sum(int(w.get("skipped") or 0) for w in workers),
        "evictions": sum(int(w.get("evictions") or 0) for w in workers),
        "apps": apps,
        "cache": {
            "hot_bytes": hot_bytes,
            "hot_cached_bytes": hot_cached,
            "hot_cached_share": round(hot_cached / hot_bytes, 4) if hot_bytes else None,
            "cold_cached_bytes": sum(min(f.size, files.get(f.path, 0)) for f in cold),
            "files": {p: files.get(p, 0) for p in workload.files},
            "workers": workers,
            "apps_seen": final["apps"],
            "file_details": final["file_details"],
        },
        "timeline": sampler.samples,
        "sample_errors": sampler.errors,
    }


def run_on_fresh_cluster(ctx: Context, workload: Workload, policy: Policy, run_id: str) -> dict[str, Any]:
    """``workload`` under ``policy`` on a cluster of its own; a run that fails
    is recorded as failed, with its error."""
    try:
        with thaw_cluster(ctx, policy) as (_, client):
            return run_apps(ctx, client, workload, policy, run_id, concurrency=ctx.scale.concurrency)
    except Exception as e:
        ctx.say(f"  {workload.name} {policy.label}: FAILED ({e!r:.300})")
        return {
            "run": run_id,
            "workload": workload.name,
            "policy": policy.name,
            "policy_label": policy.label,
            "failed": repr(e)[:1000],
        }
