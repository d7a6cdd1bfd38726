"""The Thaw scheduler plugin: one Thaw job per Dask graph submission (what it
does is told in :mod:`thaw.dask`).

The plugin holds the scheduler's hooks and the jobs; it owns the parts that do
the work and calls them, handing each what it needs: :class:`ThawJobs` makes
the calls to the master on a thread of its own (:mod:`thaw.dask.thaw_jobs`),
:class:`Placer` places the held reading tasks (:mod:`thaw.dask.placer`),
:class:`RecomputeExecutor` runs lineage reruns as Dask tasks
(:mod:`thaw.dask.recompute`). What a graph reads is found by
:func:`thaw.dask.inputs.graph_reads`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from . import placement as pl
from .annotations import AFFINITY_ANNOTATION, APP_ANNOTATION, JOB_ANNOTATION, START_ANNOTATION
from .contact import ThawContact
from .inputs import graph_reads
from .job import DaskJob, Held
from .placer import HOLD, Placer, launch_summary
from .recompute import RECOMPUTE_PRIORITY, RecomputeExecutor
from .thaw_jobs import ThawJobs

_log = logging.getLogger("thaw.dask")


def _graph_name(keys: Iterable[Any]) -> str:
    """A graph's name: the first of its keys' names (``sum-tree``, ``read_parquet``)."""
    from dask.utils import key_split

    names = sorted({key_split(k) for k in keys})
    name = names[0] if names else "graph"
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:60] or "graph"


def _job_name(keys: Iterable[Any]) -> str:
    return f"dask-{_graph_name(keys)}-{uuid.uuid4().hex[:6]}"


class ThawSchedulerPlugin(SchedulerPlugin):
    """Scheduler plugin: one Thaw job per graph submission (see :mod:`thaw.dask`).

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
        self._contact = ThawContact(master)
        self.thaw_jobs = ThawJobs(
            self.jobs, self._contact, lease=lease, eviction=eviction, report_tasks=placement
        )
        self.placer = Placer(self.jobs, self._contact, placement=placement, delays=self.delays)
        self._ticker: asyncio.Task[None] | None = None
        self._job_of_key: dict[Any, str] = {}
        self._added = False

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

    @property
    def warnings(self) -> list[str]:
        """The last 100 warnings: what went wrong with Thaw while graphs ran on."""
        return self._contact.warnings

    @property
    def launch_log(self) -> list[dict[str, Any]]:
        """Every launch placement made (see :func:`thaw.dask.placements`)."""
        return self.placer.launch_log

    # -- scheduler hooks (on the scheduler's event loop: never block) ---------

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.thaw_jobs.start()
        self.placer.start(scheduler)
        self._ticker = asyncio.create_task(self._tick_loop())
        if self.recompute:
            # Reruns yield to queued job tasks unless asked to go first.
            queued = (lambda: bool(scheduler.queued)) if self.recompute_priority < 0 else None
            self.recompute_executor = RecomputeExecutor(
                scheduler.address, self._contact.master(), priority=self.recompute_priority,
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
        self._stop()
        await asyncio.to_thread(self.thaw_jobs.join, 10)
        await asyncio.to_thread(self.placer.join, 10)

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
        self.scheduler = self.placer.scheduler = scheduler
        try:
            self._update_graph(scheduler, client, keys, tasks, annotations)
        except Exception as e:  # never fail a submission
            self._contact.warn(f"could not find the Thaw inputs of a graph: {e!r}")

    def _update_graph(
        self, scheduler: Any, client: str, keys: set[Any], tasks: list[Any], annotations: dict[str, Any]
    ) -> None:
        reads, ranges = graph_reads(scheduler, tasks, annotations, self._contact.master())
        if not reads:
            return
        job_names = annotations.get(JOB_ANNOTATION, {})
        starts = annotations.get(START_ANNOTATION, {})
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
            self.thaw_jobs.ask("migrate", job, job.files())
            notes = [scheduler.tasks[k].annotations or {} for k in task_files]
            declared = {n.get(AFFINITY_ANNOTATION) for n in notes} - {None}
            apps = {n.get(APP_ANNOTATION) for n in notes} - {None}
            job.app = str(apps.pop()) if len(apps) == 1 else graph
            job.affinity = float(declared.pop()) if len(declared) == 1 else None  # type: ignore[arg-type]
            self.thaw_jobs.ask("app", job, job.files())
            self.placer.locate(job)

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
                self.placer.wake()
            if finish == "processing":
                job.tasks_dispatched += 1
            elif start == "processing" or finish in ("forgotten", "erred"):
                if finish == "memory":
                    self._ran(job, kwargs.get("startstops") or ())
                self._task_done(job, key)
                self.placer.wake()
        if finish == "forgotten":
            self._job_of_key.pop(key, None)
            job.keys.discard(key)
            if not job.keys and not any(k in self.scheduler.tasks for k in job.reads):
                self._end(job)

    def _ran(self, job: DaskJob, startstops: Iterable[dict[str, Any]]) -> None:
        """A reading task ran for what its ``compute`` spans say (placement caps
        its waits by the run times)."""
        took = sum(s["stop"] - s["start"] for s in startstops if s.get("action") == "compute")
        if took > 0:
            self.placer.ran(job, took)

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
            self.thaw_jobs.ask("release", job, done)

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
        self.thaw_jobs.ask("end", job, [])
        self.placer.forget(job)
        if job.waiting:
            # Tasks still held go back to Dask (never left in no-worker).
            try:
                asyncio.get_running_loop().call_soon(self.placer.unhold, job)
            except RuntimeError:  # no loop: the scheduler is closing
                self.placer.unhold(job)

    # -- the clock: offers of free slots, and whether Dask removed the plugin --

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            if self._removed():
                self._retire()
                return
            self.placer.place_now()

    def _removed(self) -> bool:
        """Dask removes a plugin without closing it (unregister_scheduler_plugin).
        (It starts a plugin before adding it: only one seen added can be removed.)"""
        scheduler = getattr(self, "scheduler", None)
        if scheduler is not None and scheduler.plugins.get(self.name) is self:
            self._added = True
        return self._added and scheduler.plugins.get(self.name) is not self

    def _retire(self) -> None:
        """Removed from the scheduler: its jobs end (their blocks are released,
        held tasks go back to Dask) and its threads stop."""
        _log.info("thaw plugin removed: ending %d job(s)", len(self.jobs))
        for job in list(self.jobs.values()):
            self._end(job)
        self._stop()

    def _stop(self) -> None:
        self.thaw_jobs.stop()
        self.placer.stop()

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
