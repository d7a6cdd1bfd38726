"""Dask and Thaw cooperate: the scheduler tells storage what a submitted graph
will read, and storage holds it in memory exactly as long as the graph needs it.

This is the scheduled-caching poster's cooperation between scheduler and storage, with
the job-driven migration of Ignem / DYRS behind it:

- **Prefetch at submission.** When a graph reaches the scheduler
  (``update_graph``), its ``thaw://`` inputs are found from the task specs with no
  call in the user's code (``dd.read_parquet``, ``dd.read_csv``,
  ``db.read_text``, ``da.from_zarr``; ``dask.annotate(thaw_inputs=[...])`` for
  anything else) and one submission (a ``compute``/``persist``/``submit`` call)
  becomes one Thaw job whose inputs are migrated at once: the earliest moment the
  scheduler knows them, so the whole time the graph waits for workers is
  lead-time.
- **Do not evict, for exactly as long as needed.** The job's lease is renewed
  while any of its keys is wanted. Each input file is released as soon as every
  task that reads it has run (implicit eviction at the granularity the tasks
  read), and the job ends with its last file; the rest when the job's keys are
  released or its client goes away. A lease that runs out (scheduler killed)
  frees everything; a plugin Dask removes ends its jobs itself.
- **Reads carry the job.** Each reading task gets the annotation ``thaw_job``;
  a Thaw read inside a Dask task takes its job from it (see
  :func:`thaw.jobs.current_job_id`), so per-job counters and the job's read
  state are the Dask submission's.
- **Memory-locality placement** (CAVA, section III: the decision in
  :mod:`thaw.dask.placement`, its rounds in :mod:`thaw.dask.scheduling`). The
  reading tasks are held (state no-worker) and launched by the plugin on each
  free slot (those Dask's own queuing would give a root task), best locality
  level first, with delay scheduling bounded per task;
  ``placement=False`` leaves placement to Dask. The master learns each job's
  origin and task counters, which ``thaw jobs`` shows.
- **Cache affinity at runtime** (CAVA, section IV-A). Each submission's job is an
  application to the master's cache manager: the plugin tells it the job's
  name (``thaw_app`` annotation, else the graph's) and inputs, and a worker
  plugin (:class:`thaw.dask.usage.ThawUsage`) measures each job's tasks (CPU
  time and storage writes of the Dask worker process, split among the tasks
  running together) and reports them every second, from which the master
  classifies the job for the ``cava`` cache policy.
  ``dask.annotate(thaw_cache_affinity=0.3)`` names the affinity instead.

Nothing here can fail a computation: a Thaw master that is down, a path that
does not exist or a restart is logged as a warning and the graph runs as it would
without the plugin (its reads fall back to the under-store as any cold read does).

Install: ``thaw.dask.install(client)`` on a running cluster, or
``dask scheduler --preload thaw.dask`` / ``LocalCluster(scheduler_kwargs=
{"preload": ["thaw.dask"]})`` for clusters the user starts (options from
``THAW_MASTER`` and the ``THAW_DASK_*`` variables, see :func:`dask_setup`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import statistics
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from ..client import Client, default_master
from . import placement as pl
from .inputs import find_inputs, region_of, zarr_array, zarr_chunk_files
from .job import DaskJob, Held
from .recompute import RECOMPUTE_PRIORITY, RecomputeExecutor
from .scheduling import (
    HOLD,
    PLACE_METADATA,
    Placement,
    ThawWorkerPlace,
    launch_summary,
)
from .usage import ThawUsage

__all__ = [
    "HOLD",
    "INPUTS_ANNOTATION",
    "JOB_ANNOTATION",
    "PLACE_METADATA",
    "START_ANNOTATION",
    "DaskJob",
    "Held",
    "ThawSchedulerPlugin",
    "ThawUsage",
    "ThawWorkerPlace",
    "dask_setup",
    "install",
    "jobs",
    "launch_summary",
    "placements",
]

_log = logging.getLogger("thaw.dask")

#: The task annotation naming the Thaw job of a task's reads. The plugin sets
#: it; a user who sets it (``dask.annotate(thaw_job="nightly")``) names the job.
JOB_ANNOTATION = "thaw_job"
#: The annotation a user sets (``dask.annotate(thaw_inputs=[...])``) to name a
#: task's Thaw inputs when they cannot be found from the task itself: paths or
#: URLs, or ``(path, offset, length)`` for a task that reads only that range
#: (placement then looks at those blocks alone).
INPUTS_ANNOTATION = "thaw_inputs"


#: Cache affinity (CAVA, section IV): ``dask.annotate(thaw_cache_affinity=0.3)``
#: names the job's affinity (taken at its word, CAVA's Static-CA) instead of
#: the one measured at runtime; ``thaw_app="grep"`` names the application, so
#: its runs start from the class the last one was given (default: the graph's
#: name).
AFFINITY_ANNOTATION = "thaw_cache_affinity"
APP_ANNOTATION = "thaw_app"


#: An annotation holding a task until a time (seconds since the epoch): a job's
#: start-up (container allocation, interpreter start) modelled by a harness,
#: during which its inputs already migrate. Honoured with or without placement.
START_ANNOTATION = "thaw_start_after"


def _annotated_input(item: Any) -> tuple[str, tuple[int, int] | None]:
    """One ``thaw_inputs`` item: a path or URL, ``(path, offset, length)``, or
    ``{"path": ..., "offset": ..., "length": ...}``."""
    if isinstance(item, dict):
        return str(item["path"]), (
            int(item.get("offset", 0)),
            int(item["length"]),
        ) if "length" in item else None
    if isinstance(item, (tuple, list)):
        if len(item) != 3:
            raise ValueError(f"a thaw_inputs range is (path, offset, length), not {item!r}")
        return str(item[0]), (int(item[1]), int(item[2]))
    return str(item), None


def _average(old: float | None, sample: float) -> float:
    """A moving average of task run times (weight 0.3 on the new sample)."""
    return sample if old is None else 0.7 * old + 0.3 * sample


def _graph_name(keys: Iterable[Any]) -> str:
    """A graph's name: the first of its keys' names (``sum-tree``, ``read_parquet``)."""
    from dask.utils import key_split

    names = sorted({key_split(k) for k in keys})
    name = names[0] if names else "graph"
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:60] or "graph"


def _job_name(keys: Iterable[Any]) -> str:
    return f"dask-{_graph_name(keys)}-{uuid.uuid4().hex[:6]}"


class ThawSchedulerPlugin(Placement, SchedulerPlugin):
    """Scheduler plugin: one Thaw job per graph submission (see the module doc).

    ``master``: the Thaw master for inputs given by annotation without one
    (default :func:`thaw.client.default_master`); found ``thaw://`` paths name
    their own. ``lease``: seconds a job lives unless renewed (renewed every third
    of it while its keys are wanted). ``eviction``: "explicit" keeps each file
    until its readers ran (the default), "implicit" lets each block go as soon
    as it has been read once. ``placement``: place reading tasks by memory
    locality (:mod:`thaw.dask.placement`) with ``delays``; off, Dask places
    them as it would (migration only). ``tick``: seconds between offers of free
    slots besides the one at each task's end. ``recompute``: run the master's
    lineage reruns as Dask tasks on this cluster (the master runs with
    ``--recompute-executor external``; see :mod:`thaw.dask.recompute`), at Dask
    priority ``recompute_priority`` (default -1: below the jobs' tasks).
    """

    name = "thaw"

    def __init__(
        self,
        master: str | None = None,
        *,
        lease: float = 30.0,
        eviction: str = "explicit",
        placement: bool = True,
        delays: pl.Delays | None = None,
        tick: float = 0.02,
        recompute: bool = False,
        recompute_priority: int = RECOMPUTE_PRIORITY,
    ) -> None:
        if eviction not in ("explicit", "implicit"):
            raise ValueError(f"eviction {eviction!r}: explicit or implicit")
        if not lease > 0:
            raise ValueError("lease must be positive")
        self.master = master
        self.lease = lease
        self.eviction = eviction
        self.placement = placement
        self.delays = delays or pl.Delays()
        self.tick = tick
        self.recompute = recompute
        self.recompute_priority = recompute_priority
        self.recompute_executor: RecomputeExecutor | None = None
        self.jobs: dict[str, DaskJob] = {}
        self._init_placement()
        self._ticker: asyncio.Task[None] | None = None
        self._job_of_key: dict[Any, str] = {}
        self._clients: dict[str, Client] = {}
        self._actions: queue.Queue[tuple[str, DaskJob, list[str]] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._locator: threading.Thread | None = None
        self._stop = threading.Event()
        self.warnings: list[str] = []

    # Sent to the scheduler pickled: the settings travel, the state is made there.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "master": self.master,
            "lease": self.lease,
            "eviction": self.eviction,
            "placement": self.placement,
            "delays": self.delays,
            "tick": self.tick,
            "recompute": self.recompute,
            "recompute_priority": self.recompute_priority,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        master = state.pop("master")
        self.__init__(master, **state)  # type: ignore[misc]

    # -- scheduler hooks (on the scheduler's event loop: never block) ---------

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="thaw-dask", daemon=True)
        self._thread.start()
        if self.placement:
            self._locator = threading.Thread(target=self._locate_loop, name="thaw-dask-locate", daemon=True)
            self._locator.start()
        self._ticker = asyncio.create_task(self._tick_loop())
        if self.recompute:
            # Reruns yield to queued job tasks unless asked to go first.
            queued = (lambda: bool(scheduler.queued)) if self.recompute_priority < 0 else None
            self.recompute_executor = RecomputeExecutor(
                scheduler.address, self.master or default_master(), priority=self.recompute_priority,
                jobs_waiting=queued,
            )  # fmt: skip
            self.recompute_executor.start()

    async def close(self) -> None:
        if self.recompute_executor is not None:
            await asyncio.to_thread(self.recompute_executor.stop)
        if self._ticker is not None:
            self._ticker.cancel()
        for job in list(self.jobs.values()):
            self._end(job)
        self._stop.set()
        self._actions.put(None)
        self._to_locate.put(None)
        for thread in (self._thread, self._locator):
            if thread is not None:
                await asyncio.to_thread(thread.join, 10)

    def update_graph(
        self,
        scheduler: Any,
        *,
        client: str,
        keys: set[Any],
        tasks: list[Any],
        annotations: dict[str, Any],
        priority: dict[Any, Any],
        stimulus_id: str,
        **kwargs: Any,
    ) -> None:
        self.scheduler = scheduler
        try:
            self._update_graph(scheduler, client, keys, tasks, annotations)
        except Exception as e:  # never fail a submission
            self._warn(f"could not find the Thaw inputs of a graph: {e!r}")

    def _update_graph(
        self, scheduler: Any, client: str, keys: set[Any], tasks: list[Any], annotations: dict[str, Any]
    ) -> None:
        named = annotations.get(INPUTS_ANNOTATION, {})
        job_names = annotations.get(JOB_ANNOTATION, {})
        starts = annotations.get(START_ANNOTATION, {})
        reads: dict[Any, set[tuple[str, str]]] = {}
        ranges: dict[Any, list[tuple[str, int, int]]] = {}
        for key in tasks:
            ts = scheduler.tasks.get(key)
            if ts is None or ts.run_spec is None:
                continue
            found: set[tuple[str, str]] = set()
            given = named.get(key) or (ts.annotations or {}).get(INPUTS_ANNOTATION)
            if given:
                for item in [given] if isinstance(given, (str, dict)) else given:
                    path, span = _annotated_input(item)
                    url = path if path.startswith("thaw://") else f"thaw://{path}"
                    here = find_inputs(url, self._master())
                    found |= here
                    if span is not None:
                        ranges.setdefault(key, []).extend((p, *span) for _, p in here)
            elif not ts.dependencies:
                value = getattr(ts.run_spec, "value", ts.run_spec)
                # A from_zarr array node: its getters read the chunks.
                found = set() if zarr_array(value) else find_inputs(ts.run_spec)
            else:
                found = self._zarr_getter_inputs(ts)
            if found:
                reads[key] = found
        if not reads:
            return
        by_master: dict[str, dict[Any, set[str]]] = {}
        for key, found in reads.items():
            for m, path in found:
                by_master.setdefault(m, {}).setdefault(key, set()).add(path)
        for master, task_files in by_master.items():
            # A job the user named (dask.annotate(thaw_job=...)) keeps its name.
            names = {
                job_names.get(k) or (scheduler.tasks[k].annotations or {}).get(JOB_ANNOTATION)
                for k in task_files
            }
            name = names.pop() if len(names) == 1 else None
            job_id = (
                name
                if isinstance(name, str) and name and name not in self.jobs
                else _job_name(keys or task_files)
            )
            job = DaskJob(id=job_id, master=master, client=client, submitted=time.time(), keys=set(keys))
            graph = _graph_name(keys or task_files)
            job.origin = f"dask {client}, graph {graph}, {len(task_files)} reading tasks"[:200]
            for key, files in task_files.items():
                job.reads[key] = files
                if key in ranges:
                    job.ranges[key] = ranges[key]
                for f in files:
                    job.readers.setdefault(f, set()).add(key)
                ts = scheduler.tasks[key]
                ts.annotations = {**(ts.annotations or {}), JOB_ANNOTATION: job.id}
                self._job_of_key[key] = job.id
                # Held back for placement or a start-up, unless the user
                # restricted it.
                start = starts.get(key) or (ts.annotations or {}).get(START_ANNOTATION) or 0.0
                if (self.placement or start) and not (
                    ts.worker_restrictions or ts.host_restrictions or ts.resource_restrictions
                ):
                    ts.worker_restrictions = {HOLD}
                    ts.loose_restrictions = False
                    begin = time.monotonic() + max(0.0, float(start) - time.time()) if start else 0.0
                    job.hold(key, Held(order=ts.priority, start=begin))
            for key in keys:
                self._job_of_key.setdefault(key, job.id)
            self.jobs[job.id] = job
            _log.info("graph of %s: job %s reads %d files", client, job.id, len(job.readers))
            self._actions.put(("migrate", job, job.files()))
            notes = [scheduler.tasks[k].annotations or {} for k in task_files]
            declared = {n.get(AFFINITY_ANNOTATION) for n in notes} - {None}
            apps = {n.get(APP_ANNOTATION) for n in notes} - {None}
            job.app = str(apps.pop()) if len(apps) == 1 else graph
            job.affinity = float(declared.pop()) if len(declared) == 1 else None  # type: ignore[arg-type]
            self._actions.put(("app", job, job.files()))
            if self.placement:
                self._to_locate.put(job)

    @staticmethod
    def _zarr_getter_inputs(ts: Any) -> set[tuple[str, str]]:
        """A from_zarr getter reading from an array node (the default,
        ``inline_array=False``): the chunk files of its region."""
        from dask._task_spec import DataNode, Task

        if len(ts.dependencies) != 1 or not isinstance(ts.run_spec, Task):
            return set()
        (dep,) = ts.dependencies
        spec = dep.run_spec
        z = zarr_array(spec.value if isinstance(spec, DataNode) else spec)
        region = region_of(ts.run_spec.args) if z else None
        if z is None or region is None:
            return set()
        return {(z[0], f) for f in zarr_chunk_files(z[1], z[2], region)}

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        job_id = self._job_of_key.get(key)
        if job_id is None:
            return
        job = self.jobs.get(job_id)
        if job is None or job.ended:
            self._job_of_key.pop(key, None)
            return
        if key in job.reads:
            held = job.held.get(key)
            if held is not None and finish == "no-worker":
                if held.launched:  # its worker died: hold it again
                    self.scheduler.tasks[key].worker_restrictions = {HOLD}
                    job.set_launched(key, False)
                    held.ready = None
                held.ready = held.ready or time.monotonic()
                self._wake()
            if finish == "processing":
                job.tasks_dispatched += 1
            elif start == "processing" or finish in ("forgotten", "erred"):
                if finish == "memory":
                    self._ran(job, kwargs.get("startstops") or ())
                self._task_done(job, key)
                self._wake()
        if finish == "forgotten":
            self._job_of_key.pop(key, None)
            job.keys.discard(key)
            if not job.keys and not any(k in self.scheduler.tasks for k in job.reads):
                self._end(job)

    def _ran(self, job: DaskJob, startstops: Iterable[dict[str, Any]]) -> None:
        """A reading task ran for what its ``compute`` spans say: the job's and
        every job's moving averages (placement caps its waits by them)."""
        took = sum(s["stop"] - s["start"] for s in startstops if s.get("action") == "compute")
        if took <= 0:
            return
        job.task_time = _average(job.task_time, took)
        self._task_time = _average(self._task_time, took)

    def _task_done(self, job: DaskJob, key: Any) -> None:
        files = job.reads.get(key)
        if files is None:
            return
        ts = self.scheduler.tasks.get(key)
        if ts is not None and ts.state not in ("memory", "erred", "forgotten"):
            return  # back to waiting (a worker died): it will read again
        job.active.discard(key)
        if key in job.done:
            return
        job.done.add(key)
        done = []
        for f in files:
            readers = job.readers.get(f, set())
            readers.discard(key)
            if not readers and f not in job.released:
                job.released.add(f)
                done.append(f)
        if len(job.released) == len(job.readers):
            self._end(job)  # every input read: nothing left to hold
        elif done:
            self._actions.put(("release", job, done))

    def remove_client(self, scheduler: Any, client: str) -> None:
        for job in list(self.jobs.values()):
            if job.client == client:
                self._end(job)

    def _end(self, job: DaskJob) -> None:
        if job.ended:
            return
        job.ended = True
        self.jobs.pop(job.id, None)
        for k in list(job.reads) + list(job.keys):
            if self._job_of_key.get(k) == job.id:
                del self._job_of_key[k]
        self._actions.put(("end", job, []))
        for k in job.reads:
            self._memo.pop(k, None)
        if job.waiting:
            # Tasks still held go back to Dask (never left in no-worker).
            try:
                asyncio.get_running_loop().call_soon(self._unhold, job)
            except RuntimeError:  # no loop: the scheduler is closing
                self._unhold(job)

    def _unhold(self, job: DaskJob, due: float | None = None) -> None:
        """Hands the job's held tasks (those due by ``due``, default all) to Dask."""
        recommendations = {}
        for key in list(job.waiting):
            held, ts = job.held[key], self.scheduler.tasks.get(key)
            if ts is None or HOLD not in (ts.worker_restrictions or ()):
                continue
            if due is not None and (held.start > due or not held.ready):
                continue
            ts.worker_restrictions = set()
            job.set_launched(key, True)
            if ts.state == "no-worker":
                recommendations[key] = "processing"
        if recommendations:
            self.scheduler.transitions(recommendations, stimulus_id=f"thaw-unhold-{time.time()}")

    # -- placement's clock (the rounds are in thaw.dask.scheduling) ------------

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            if self._removed():
                self._retire()
                return
            self._place_now()

    def _removed(self) -> bool:
        """Dask removes a plugin without closing it (unregister_scheduler_plugin).
        (It starts a plugin before adding it: only one seen added can be removed.)"""
        scheduler = getattr(self, "scheduler", None)
        if scheduler is not None and scheduler.plugins.get(self.name) is self:
            self._added = True
        return getattr(self, "_added", False) and scheduler.plugins.get(self.name) is not self

    def _retire(self) -> None:
        """Removed from the scheduler: its jobs end (their blocks are released,
        held tasks go back to Dask) and its thread stops."""
        _log.info("thaw plugin removed: ending %d job(s)", len(self.jobs))
        for job in list(self.jobs.values()):
            self._end(job)
        self._stop.set()
        self._actions.put(None)
        self._to_locate.put(None)

    # -- Thaw calls, on the plugin's own threads -------------------------------

    def _master(self) -> str:
        return self.master or default_master()

    def _client(self, master: str) -> Client:
        c = self._clients.get(master)
        if c is None:
            c = self._clients[master] = Client(master)
        return c

    def _warn(self, msg: str) -> None:
        _log.warning("%s", msg)
        with self._lock:
            self.warnings.append(msg)
            del self.warnings[:-100]

    def _run(self) -> None:
        """Migrations, releases and ends in the order they were asked for; lease
        renewals and task reports on a timer."""
        renew_every = min(self.lease / 3, 1.0)
        next_renew = time.monotonic() + renew_every
        while not (self._stop.is_set() and self._actions.empty()):
            if not self.placement and not self._stop.is_set() and self._removed():
                self._retire()  # (with placement, the ticker on the loop does it)
            try:
                action = self._actions.get(timeout=max(0.0, next_renew - time.monotonic()))
            except queue.Empty:
                action = None
            if action is not None:
                self._do(*action)
            if time.monotonic() >= next_renew:
                self._renew()
                self._report()
                next_renew = time.monotonic() + renew_every

    def _do(self, what: str, job: DaskJob, files: list[str]) -> None:
        from ..errors import NotFound

        c = self._client(job.master)
        try:
            if what == "migrate":
                if job.ended:
                    return
                job.reported = None  # a master that (re)learns the job gets its counters
                try:
                    c.migrate(files, job.id, eviction=self.eviction, lease=self.lease, origin=job.origin)
                except NotFound:
                    # Some input is gone (or never existed): migrate the rest; the
                    # task reading the missing one fails as it would without Thaw.
                    present = [f for f in files if c.exists(f)]
                    self._warn(f"job {job.id}: {len(files) - len(present)} input(s) not in Thaw")
                    if present:
                        c.migrate(
                            present, job.id, eviction=self.eviction, lease=self.lease, origin=job.origin
                        )
            elif what == "release":
                if not job.ended:
                    c.evict(job.id, files)
            elif what == "app":
                # Name, inputs (for the caching probability) and a declared
                # affinity; the workers' ThawUsage plugins report the figures.
                c.report_app_usage(
                    job.id, name=job.app, inputs=files, cache_affinity=job.affinity, reporter="scheduler"
                )
            elif what == "end":
                try:
                    c.report_app_usage(job.id, ended=True, reporter="scheduler")
                except Exception as e:
                    _log.debug("job %s: end of usage not reported: %s", job.id, e)
                c.evict(job.id)
        except NotFound:
            pass  # the job is already gone (lease ran out, master restarted)
        except Exception as e:
            self._warn(f"job {job.id}: {what} failed ({e}); the graph runs on without it")

    def _report(self) -> None:
        """Tells the master how each placing job's tasks went (``thaw jobs``
        shows it): only what changed since the last report."""
        if not self.placement:
            return  # without placement, where tasks ran is Dask's to tell
        for job in list(self.jobs.values()):
            launches = list(job.launches)
            delays = sorted(d for _, d, _ in launches)
            tasks = len(job.reads)
            placed = min(len(launches), tasks)  # a task run again after its worker died counts once
            counts = (
                tasks,
                placed,
                min(len(job.done), tasks),
                min(placed, sum(1 for lvl, _, _ in launches if lvl in pl.MEMORY_LOCAL)),
                min(placed, sum(1 for *_, m in launches if m)),
                round(1000 * statistics.median(delays)) if delays else 0,
                round(1000 * delays[min(len(delays) - 1, int(0.99 * len(delays)))]) if delays else 0,
                round(1000 * delays[-1]) if delays else 0,
            )
            if job.ended or counts == job.reported:
                continue
            try:
                self._client(job.master).report_tasks(
                    job.id,
                    tasks=counts[0],
                    placed=counts[1],
                    done=counts[2],
                    memory_local=counts[3],
                    inputs_in_memory=counts[4],
                    delay_ms_median=counts[5],
                    delay_ms_p99=counts[6],
                    delay_ms_max=counts[7],
                )
                job.reported = counts
            except Exception as e:  # the job may have just ended; the next round tells
                _log.debug("task report of %s: %s", job.id, e)

    def _renew(self) -> None:
        """Renews the live jobs' leases; a master that forgot a job (it
        restarted: migration state is soft) is told its unreleased inputs again."""
        live = [j for j in list(self.jobs.values()) if not j.ended]
        by_master: dict[str, list[DaskJob]] = {}
        for j in live:
            by_master.setdefault(j.master, []).append(j)
        for master, jobs in by_master.items():
            try:
                unknown = set(self._client(master).renew([j.id for j in jobs]))
            except Exception as e:
                self._warn(f"lease renewal at {master} failed: {e}")
                continue
            for j in jobs:
                rest = [f for f in j.files() if f not in j.released]
                if j.id in unknown and rest and not j.ended:
                    _log.info("master %s no longer knows job %s: migrating again", master, j.id)
                    self._do("migrate", j, rest)

    # -- what the plugin knows -------------------------------------------------

    def summary(self) -> list[dict[str, Any]]:
        """The live jobs: id, client, files, tasks reading, started and done."""
        return [
            {
                "job_id": j.id,
                "client": j.client,
                "files": j.files(),
                "released": sorted(j.released),
                "tasks": len(j.reads),
                "tasks_dispatched": j.tasks_dispatched,
                "tasks_done": len(j.done),
                **launch_summary(j.launches),
            }
            for j in list(self.jobs.values())
        ]


def install(client: Any, master: str | None = None, **options: Any) -> None:
    """Installs the plugin on ``client``'s scheduler (``thaw.dask.install(client)``)
    and, for placement, :class:`ThawWorkerPlace` on its workers.

    ``master`` defaults to the one this process would use (``THAW_MASTER``), so
    annotated inputs name the same cluster here and on the scheduler. Options:
    see :class:`ThawSchedulerPlugin`.
    """
    client.register_plugin(ThawSchedulerPlugin(master or default_master(), **options))
    client.register_plugin(ThawUsage(master or default_master()))
    if options.get("placement", True):
        client.register_plugin(ThawWorkerPlace())


def placements(client: Any) -> list[dict[str, Any]]:
    """Every launch the plugin made: job, key, level, delay paid, when (``at``,
    seconds since the epoch; ``since_submit``, after its job's submission;
    ``held``, of those ready), whether the task's blocks were in memory, worker."""

    def ask(dask_scheduler: Any) -> list[dict[str, Any]]:
        plugin = dask_scheduler.plugins.get(ThawSchedulerPlugin.name)
        return list(plugin.launch_log) if plugin is not None else []

    return client.run_on_scheduler(ask)  # type: ignore[no-any-return]


def jobs(client: Any) -> list[dict[str, Any]]:
    """The plugin's live jobs, asked of ``client``'s scheduler."""

    def ask(dask_scheduler: Any) -> list[dict[str, Any]]:
        plugin = dask_scheduler.plugins.get(ThawSchedulerPlugin.name)
        return plugin.summary() if plugin is not None else []

    return client.run_on_scheduler(ask)  # type: ignore[no-any-return]


async def dask_setup(server: Any) -> None:
    """``--preload thaw.dask``: on a scheduler, adds the plugin, configured by
    ``THAW_MASTER``, ``THAW_DASK_LEASE`` (seconds), ``THAW_DASK_EVICTION`` and
    ``THAW_DASK_PLACEMENT`` (0 turns placement off); on a worker, says where it
    sits (:class:`ThawWorkerPlace`)."""
    from distributed import Scheduler

    if not isinstance(server, Scheduler):
        await server.plugin_add(ThawWorkerPlace(), name=ThawWorkerPlace.name)
        await server.plugin_add(ThawUsage(os.environ.get("THAW_MASTER") or None), name=ThawUsage.name)
        return
    server.add_plugin(
        ThawSchedulerPlugin(
            os.environ.get("THAW_MASTER") or None,
            lease=float(os.environ.get("THAW_DASK_LEASE", "30")),
            eviction=os.environ.get("THAW_DASK_EVICTION", "explicit"),
            placement=os.environ.get("THAW_DASK_PLACEMENT", "1") != "0",
        )
    )
