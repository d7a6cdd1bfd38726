"""Runs a workload under each configuration, on one emulated (or real) cluster,
and records what happened.

A configuration (:data:`~thaw_bench.configs.CONFIGS`) is a migration setting,
a scenario (:data:`~thaw_bench.configs.SCENARIOS`) the devices' condition; the
run's observers and record are :mod:`thaw_bench.record`'s.

Each job is a plain Dask graph (a map task per input block, annotated with the
block's byte range and the job's name; reducers if it shuffles) submitted at the
job's submission time. The harness calls no Thaw migrate and places no task:
in the migrating configurations the Thaw scheduler plugin (:mod:`thaw.dask`)
finds the inputs at submission, migrates them (implicit eviction), and, with
``plugin="place"``, places the map tasks by memory locality; with
``plugin="migrate"`` Dask places them. The baselines (cold, inputs-in-RAM) run
without the plugin. A job's modelled start-up (``lead_time``) holds its tasks
(``thaw_start_after``) while its inputs migrate; without the plugin the graph
is submitted after it. Lead-time is that plus whatever the job spends waiting
for task slots.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thaw.client import Client
from thaw.dask.placement import Delays

from . import tasks
from .cluster import EmulatedCluster
from .configs import Config, Scenario
from .record import migration_events, observe, preload_inputs, run_record
from .workloads import JobSpec


class CpuMeter:
    """CPU time over a run: the machine's busy share (``/proc/stat``) and the
    CPU seconds of each group of processes (Dask workers, Thaw servers, the
    Dask scheduler with the plugin and this process, the harness), to tell an
    I/O-bound run from one decided by the wait for a core."""

    _TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, groups: dict[str, list[int]]):
        self.groups = groups
        self.cores = os.cpu_count() or 1
        self._t = time.monotonic()
        self._stat = self._machine()
        self._cpu = {g: self._seconds(pids) for g, pids in groups.items()}

    @staticmethod
    def _machine() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields) - idle, sum(fields)

    @classmethod
    def _seconds(cls, pids: list[int]) -> float:
        total = 0
        for pid in pids:
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        return total / cls._TICK

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self._t
        busy, total = self._machine()
        capacity = wall * self.cores
        out: dict[str, Any] = {
            "cores": self.cores,
            "wall_s": round(wall, 3),
            "busy_share": round((busy - self._stat[0]) / max(1, total - self._stat[1]), 4),
        }
        for g, pids in self.groups.items():
            used = self._seconds(pids) - self._cpu[g]
            out[f"{g}_cpu_s"] = round(used, 3)
            out[f"{g}_share"] = round(used / capacity, 4) if capacity else 0.0
        return out


@dataclass
class Split:
    """One map task's input: a block of a part file and its DISK replica holders."""

    path: str
    offset: int
    length: int
    block: int
    holders: list[str]


def splits_of(client: Client, job: JobSpec) -> list[Split]:
    out = []
    for path in job.inputs:
        for b in client.stat(path, blocks=True)["blocks"]:
            holders = sorted({r["host"] for r in b["replicas"] if r["tier"] == "DISK"})
            out.append(Split(path, b["offset"], b["length"], b["block_id"], holders))
    return out


class _JobRun:
    def __init__(self, spec: JobSpec, splits: list[Split]):
        self.spec, self.splits = spec, splits
        self.submit = 0.0
        self.graph_submit = 0.0
        self.end = 0.0
        self.pending = 0
        self.failed = 0
        self.futures: list[Any] = []
        self.migration: dict[str, Any] | None = None
        self.stats: dict[str, Any] | None = None


class Runner:
    """Runs jobs on a Dask cluster (one worker per emulated node, named after it)
    against the Thaw cluster, one configuration at a time."""

    def __init__(
        self, cluster: EmulatedCluster, dask_client: Any, out_dir: Path, delays: Delays | None = None
    ):
        self.cluster = cluster
        self.delays = delays or Delays()
        self.dask = dask_client
        self.out_dir = out_dir
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.workers = {
            info["name"]: addr for addr, info in dask_client.scheduler_info(n_workers=-1)["workers"].items()
        }

    def run(
        self,
        jobs: list[JobSpec],
        config: Config,
        scenario: Scenario,
        run_name: str,
        timeout: float = 1800.0,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        say = progress or (lambda _m: None)
        self.cluster.start(config.policy, config.priority, migration_io=config.migration_io)
        self._plugin(config)
        dropped = self.cluster.drop_pages()
        client = self.cluster.client()
        # The master's own word on how it plans (what the configuration asked).
        planner = {k: v for k, v in client.jobs().items() if k in ("policy", "priority")}
        splits = {j.name: splits_of(client, j) for j in jobs}
        preload = None
        if config.preload:
            preload = preload_inputs(client, [p for j in jobs for p in j.inputs], timeout, say)
        log_dir = self.out_dir / f"{run_name}-tasks"
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True)
        runs = {j.name: _JobRun(j, splits[j.name]) for j in jobs}
        done_q: queue.Queue[_JobRun] = queue.Queue()
        lock = threading.Lock()
        cpu = CpuMeter(
            {
                "dask_workers": list(self.dask.run(os.getpid).values()),
                "thaw": [p.pid for _, p, _ in self.cluster._procs],
                "scheduler_and_harness": [os.getpid(), self.dask.run_on_scheduler(os.getpid)],
            }
        )
        with observe(self.cluster, client, scenario) as seen:
            t0 = seen.t0
            evictor = threading.Thread(target=self._evict_loop, args=(client, done_q, config), daemon=True)
            evictor.start()
            try:
                for jr in sorted(runs.values(), key=lambda r: r.spec.submit_at):
                    delay = t0 + jr.spec.submit_at - time.time()
                    if delay > 0:
                        time.sleep(delay)
                    self._submit(jr, client, config, run_name, str(log_dir), lock, done_q)
                deadline = time.time() + timeout
                while any(r.end == 0.0 for r in runs.values()):
                    if time.time() > deadline:
                        raise TimeoutError(f"{run_name}: jobs still running after {timeout:.0f}s")
                    time.sleep(0.05)
                wall = time.time() - t0
                cpu_use = cpu.stop()
            finally:
                done_q.put(None)  # type: ignore[arg-type]
                evictor.join(30)
        events = migration_events(client)
        placed = self._placements(config, {j.name for j in jobs})
        task_log = _read_task_log(log_dir)
        shutil.rmtree(log_dir, ignore_errors=True)
        with contextlib.suppress(Exception):
            client.rm(f"/out/{run_name}", recursive=True)
        return run_record(
            run_name,
            config,
            scenario,
            self.cluster,
            seen,
            events,
            wall=wall,
            dropped=dropped,
            preload=preload,
            planner=planner,
            cpu=cpu_use,
            jobs=[
                {
                    "job": r.spec.name,
                    "kind": r.spec.kind,
                    "submit": round(r.submit - t0, 4),
                    "end": round(r.end - t0, 4),
                    "duration": round(r.end - r.submit, 4),
                    "input_bytes": r.spec.input_bytes,
                    "shuffle_bytes": r.spec.shuffle_bytes,
                    "output_bytes": r.spec.output_bytes,
                    "maps": len(r.splits),
                    "blocks": [s.block for s in r.splits],
                    # Each block's DISK replica holders (the reachable bound's disks).
                    "holders": [s.holders for s in r.splits],
                    "failed_tasks": r.failed,
                    "migration": r.migration,
                    "worker_stats": r.stats,
                    "trace": r.spec.trace,
                    "variant": r.spec.variant,
                    "lead_time_added": r.spec.lead_time,
                    "graph_submit": round(r.graph_submit - t0, 4),
                }
                for r in runs.values()
            ],
            tasks=[
                dict(
                    t,
                    start=round(t["start"] - t0, 4),
                    end=round(t["end"] - t0, 4),
                    **({"read_end": round(t["read_end"] - t0, 4)} if "read_end" in t else {}),
                )
                for t in task_log
            ],
            placements=[dict(e, at=round(e["at"] - t0, 4)) for e in placed],
        )

    def _plugin(self, config: Config) -> None:
        """Installs the Thaw scheduler plugin as ``config`` says (it replaces the
        previous run's, which ends itself), or removes it."""
        import thaw.dask

        if config.plugin == "off":
            name = thaw.dask.ThawSchedulerPlugin.name
            if self.dask.run_on_scheduler(lambda dask_scheduler: name in dask_scheduler.plugins):
                self.dask.unregister_scheduler_plugin(name)
            return
        thaw.dask.install(
            self.dask,
            self.cluster.master,
            eviction=config.eviction,
            placement=config.plugin == "place",
            delays=self.delays,
        )

    def _placements(self, config: Config, names: set[str]) -> list[dict[str, Any]]:
        """The plugin's launches of this run's tasks: level, delay paid, time
        held (each run installs a plugin of its own, so its log is this run's)."""
        if config.plugin != "place":
            return []
        import thaw.dask

        return [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in e.items() if k != "worker"}
            for e in thaw.dask.placements(self.dask)
            if e["job"] in names
        ]

    def _submit(
        self,
        jr: _JobRun,
        client: Client,
        config: Config,
        run: str,
        log_dir: str,
        lock: threading.Lock,
        done_q: queue.Queue[_JobRun],
    ) -> None:
        spec = jr.spec
        jr.submit = time.time()
        if config.plugin != "off" and spec.inputs:
            # The graph goes in at once: the plugin migrates its inputs during
            # the start-up, which holds the tasks.
            start = jr.submit + spec.lead_time if spec.lead_time > 0 else 0.0
            self._submit_graph(jr, client, run, log_dir, lock, done_q, start)
        elif spec.lead_time > 0:
            timer = threading.Timer(
                spec.lead_time, self._submit_graph, (jr, client, run, log_dir, lock, done_q)
            )
            timer.daemon = True
            timer.start()
        else:
            self._submit_graph(jr, client, run, log_dir, lock, done_q)

    def _submit_graph(
        self,
        jr: _JobRun,
        client: Client,
        run: str,
        log_dir: str,
        lock: threading.Lock,
        done_q: queue.Queue[_JobRun],
        start: float = 0.0,
    ) -> None:
        """Submits the job as one plain Dask graph: a map per input block
        (annotated with the block's range, the job's name and its start-up),
        then, if the job shuffles, reducers fed by one shuffle part of every map.
        Placement is Dask's, or the plugin's."""
        import dask

        spec = jr.spec
        jr.graph_submit = time.time()
        master = self.cluster.master
        nodes = len(self.cluster.nodes)
        block_size = _block_size(client)
        reducers = spec.reducers(block_size, nodes)
        out = f"/out/{run}/{spec.name}"
        maps = []
        n = max(1, len(jr.splits))
        shuffle_each = [spec.shuffle_bytes * s.length // max(1, spec.input_bytes) for s in jr.splits]
        for i, s in enumerate(jr.splits):
            output = None if reducers else (f"{out}/map-{i:05d}", spec.output_bytes // n)
            notes: dict[str, Any] = {"thaw_inputs": [(s.path, s.offset, s.length)], "thaw_job": spec.name}
            if start:
                notes["thaw_start_after"] = start
            with dask.annotate(**notes):
                maps.append(
                    dask.delayed(tasks.map_task, pure=False)(
                        master, spec.name, spec.kind, s.path, s.offset, s.length, s.block,
                        shuffle_each[i], reducers, output, log_dir,
                        dask_key_name=f"{run}-{spec.name}-map-{i}",
                    )
                )  # fmt: skip
        if not jr.splits and spec.output_bytes:
            # A job without input still writes its output (one map-only task).
            output = (f"{out}/part-00000", spec.output_bytes)
            maps.append(
                dask.delayed(tasks.reduce_task, pure=False)(
                    master, spec.name, spec.kind, 0, output, log_dir, dask_key_name=f"{run}-{spec.name}-write"
                )
            )
        graph = maps
        if reducers and jr.splits:
            graph = []
            for r in range(reducers):
                parts = (
                    maps
                    if reducers == 1
                    else [
                        dask.delayed(tasks.part, pure=False)(
                            m, r, dask_key_name=f"{run}-{spec.name}-part-{i}-{r}"
                        )
                        for i, m in enumerate(maps)
                    ]
                )
                output = (f"{out}/part-{r:05d}", spec.output_bytes // reducers)
                graph.append(
                    dask.delayed(tasks.reduce_task, pure=False)(
                        master, spec.name, spec.kind, r, output, log_dir, *parts,
                        dask_key_name=f"{run}-{spec.name}-reduce-{r}",
                    )
                )  # fmt: skip
        # One submission: one Thaw job for the plugin.
        final = self.dask.compute(graph) if graph else []
        if not final:
            jr.end = time.time()
            done_q.put(jr)
            return
        with lock:
            jr.pending = len(final)
            jr.futures = final

        def finished(fut: Any) -> None:
            with lock:
                if fut.status != "finished":
                    jr.failed += 1
                jr.pending -= 1
                if jr.pending == 0:
                    jr.end = time.time()
                    jr.futures = []
                    done_q.put(jr)

        for f in final:
            f.add_done_callback(finished)

    def _evict_loop(self, client: Client, done_q: queue.Queue[_JobRun], config: Config) -> None:
        while True:
            jr = done_q.get()
            if jr is None:
                return
            with contextlib.suppress(Exception):
                # What the workers saw of the job (the accounting cross-check).
                stats = client.job_stats(jr.spec.name)
                jr.stats = {k: v for k, v in stats.items() if k != "workers"}
            if config.plugin == "off" or not jr.spec.inputs:
                continue
            with contextlib.suppress(Exception):
                # The plugin releases the job's blocks as its tasks run; what the
                # master still has of it, if anything.
                jr.migration = client.job(jr.spec.name)


_block_sizes: dict[str, int] = {}


def _block_size(client: Client) -> int:
    if client.master not in _block_sizes:
        _block_sizes[client.master] = int(client.status()["default_block_size"])
    return _block_sizes[client.master]


def _read_task_log(log_dir: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(log_dir.glob("tasks-*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def stop_dask(cluster: Any, client: Any) -> None:
    """Closes a Dask client and its cluster (either may be None), whatever
    state they are in: a bench's teardown must not fail over a dead worker."""
    for thing in (client, cluster):
        if thing is not None:
            with contextlib.suppress(Exception):
                thing.close()


def start_dask(nodes: list[tuple[str, ...]], slots: int, short_circuit: bool = True) -> tuple[Any, Any]:
    """A Dask cluster on loopback of one worker process per (node, rack[,
    host]), named after the node, with ``slots`` threads (task slots) each, and
    its scheduler in a process of its own. Its tasks' Thaw clients take the
    node's position from ``THAW_HOST`` (the host, default the node's name) and
    ``THAW_RACK``; without ``short_circuit`` they read through a worker even
    on its host (``THAW_SHORT_CIRCUIT=0``). Returns (cluster, client)."""
    import dask
    from distributed import Client as DaskClient
    from distributed import Nanny, SpecCluster

    dask.config.set({"distributed.worker.daemon": False, "distributed.admin.tick.limit": "10s"})
    workers = {
        n: {
            "cls": Nanny,
            "options": {
                "nthreads": slots, "name": n, "memory_limit": 0, "host": "127.0.0.1",
                "env": {"THAW_HOST": n if len(h) == 0 else h[0], "THAW_RACK": rack, "OMP_NUM_THREADS": "1",
                        "MALLOC_ARENA_MAX": "2", **({} if short_circuit else {"THAW_SHORT_CIRCUIT": "0"})},
            },
        }
        for n, rack, *h in nodes
    }  # fmt: skip
    scheduler = {
        "cls": _scheduler_process(),
        "options": {"scheduler_kwargs": {"host": "127.0.0.1", "dashboard": False}},
    }
    cluster = SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)
    client = DaskClient(cluster)
    client.wait_for_workers(len(nodes), timeout=120)
    return cluster, client


def _die_with_parent() -> None:
    """In a child before it runs: the kernel sends it SIGTERM when the process
    that started it dies (``PR_SET_PDEATHSIG``), so a harness killed mid-run
    leaves no Dask scheduler behind (its cluster's close is never reached)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _scheduler_process() -> Any:
    """The class of :func:`start_dask`'s scheduler (imported late: distributed
    is loaded only by the experiments that run Dask)."""
    from distributed.deploy.subprocess import SubprocessScheduler

    class SchedulerProcess(SubprocessScheduler):  # type: ignore[misc]
        """The Dask scheduler in a process of its own, as in any real
        deployment. In the harness's process it shared one event loop and the
        GIL with the client submitting the jobs, so the scheduler's own work,
        the placement plugin's rounds included, delayed the submissions
        themselves: graphs reached the scheduler 0.1-0.9 s (mean per run) after
        the harness sent them (SWIM, queueing only). Its log goes to a file:
        the pipe distributed's class gives it is never read, and would fill and
        stop it. Its address file is removed once read (the process is killed
        at the end, before it could remove it itself). It dies with the
        harness (:func:`_die_with_parent`)."""

        async def _start(self) -> None:
            import asyncio
            import sys
            import tempfile

            env = {**os.environ, "DASK_DISTRIBUTED__ADMIN__TICK__LIMIT": "10s"}
            spec = {"cls": "distributed.Scheduler", "opts": {**self.scheduler_kwargs}}
            log = tempfile.TemporaryFile()  # noqa: SIM115 (the process's stderr, closed with it)
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "dask", "spec", "--spec", json.dumps(spec),
                stdout=log, stderr=log, env=env, preexec_fn=_die_with_parent,
            )  # fmt: skip
            scheduler_file = Path(self.scheduler_kwargs["scheduler_file"])
            deadline = time.monotonic() + self.timeout
            while self.process.returncode is None and time.monotonic() < deadline:
                try:
                    self.address = json.loads(scheduler_file.read_text())["address"]
                    scheduler_file.unlink(missing_ok=True)
                    return
                except (OSError, ValueError, KeyError):
                    await asyncio.sleep(0.1)
            log.seek(0)
            raise RuntimeError(
                f"the Dask scheduler did not start: {log.read()[-2000:].decode(errors='replace')}"
            )

    return SchedulerProcess
