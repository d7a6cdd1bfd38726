"""The Thaw scheduler plugin's placement at work (CAVA, section III, Algorithm 1, on
Dask): reading tasks held in state no-worker, rounds of offers of the free slots,
each job's launches, and where the blocks are (asked of the master on a thread
of its own). What to launch on an offered slot is decided by the pure
:mod:`thaw.dask.placement`; the plugin (:mod:`thaw.dask.plugin`) owns a
:class:`Placer` and calls it, and the placer calls nothing of the plugin's."""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import queue
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from . import placement as pl
from .contact import ThawContact
from .job import DaskJob, Held

#: The worker restriction that holds a task back until the plugin places it: no
#: worker has this address, so Dask keeps the task in state no-worker.
HOLD = "thaw-placement://held"
#: Scheduler metadata under which each Dask worker says where it sits in Thaw.
PLACE_METADATA = "thaw-place"


@dataclass
class _Levels:
    """A held task's blocks as placement sees them, for one version (``stamp``)
    of the files it reads: the level each place gives it, and the levels the
    cluster's places could give it."""

    stamp: tuple[int, ...]
    blocks: list[list[pl.Replica]]
    in_memory: bool
    at: dict[pl.Place, int] = field(default_factory=dict)
    reachable: dict[frozenset[pl.Place], frozenset[int]] = field(default_factory=dict)


@dataclass
class _Round:
    """One round of offers (:meth:`Placer._place`): its time, and
    per job its running tasks, its held tasks ready now, its cached fraction."""

    now: float
    running: dict[str, int]
    ready: dict[str, list[tuple[Any, Held]]]
    cached: dict[str, float]


#: Seconds between asks for the locations of a file whose blocks are all in memory.
SETTLED_REFRESH = 1.0


class Placer:
    """Places the held reading tasks of the scheduler plugin's jobs.

    ``jobs``: the plugin's live jobs (the plugin adds and removes them; the
    placer reads them and the tasks' launch state). ``contact``: the way to the
    Thaw masters, for block locations and warnings. ``placement``: False only
    hands tasks held for a start-up to Dask when they are due. The plugin calls
    :meth:`start` and :meth:`stop`, :meth:`locate` for each new job,
    :meth:`wake` when tasks become ready or end, :meth:`place_now` on its tick,
    :meth:`ran` with each reading task's run time, :meth:`unhold` and
    :meth:`forget` when a job ends."""

    def __init__(
        self, jobs: dict[str, DaskJob], contact: ThawContact, *, placement: bool, delays: pl.Delays
    ) -> None:
        self.scheduler: Any = None
        self.jobs = jobs
        self.placement = placement
        self.delays = delays
        self._contact = contact
        # Block replicas of the files of jobs with tasks to place, by (master,
        # path), refreshed by the locator thread; ``_file_version`` gives a
        # file a new number each time its blocks change, so a held task's levels
        # are worked out again only when its blocks moved (``_memo``: key ->
        # _Levels). Measured before: placement took a third of the scheduler's
        # loop on SWIM, most of it recomputing levels after every poll.
        self.blocks: dict[tuple[str, str], list[tuple[int, int, list[pl.Replica]]]] = {}
        self._file_version: dict[tuple[str, str], int] = {}
        self._polled: dict[tuple[str, str], float] = {}  # when each file was last asked
        # Never repeats, so a memo of a file dropped and polled again cannot match.
        self._versions = itertools.count(1)
        self._memo: dict[Any, _Levels] = {}
        self._thaw_workers: list[dict[str, Any]] = []
        self._workers_polled = 0.0
        self._place_soon = False
        #: Run time of every job's reading tasks (s, moving average): the wait
        #: cap of a job none of whose tasks has run yet.
        self.task_time: float | None = None
        #: Every launch (see :func:`thaw.dask.placements`).
        self.launch_log: list[dict[str, Any]] = []
        # New jobs whose block locations placement needs (see _locate_loop).
        self._to_locate: queue.Queue[DaskJob | None] = queue.Queue()
        self._stop = threading.Event()
        self._locator: threading.Thread | None = None

    def start(self, scheduler: Any) -> None:
        """Places on ``scheduler``'s tasks; with placement, starts asking where
        blocks are."""
        self.scheduler = scheduler
        self._stop.clear()
        if self.placement:
            self._locator = threading.Thread(target=self._locate_loop, name="thaw-dask-locate", daemon=True)
            self._locator.start()

    def stop(self) -> None:
        """Stops the locator thread (:meth:`join` waits for it)."""
        self._stop.set()
        self._to_locate.put(None)

    def join(self, timeout: float) -> None:
        if self._locator is not None:
            self._locator.join(timeout)

    def locate(self, job: DaskJob) -> None:
        """A new job: where its blocks are is asked at once (its tasks wait for it)."""
        if self.placement:
            self._to_locate.put(job)

    def ran(self, job: DaskJob, took: float) -> None:
        """One of ``job``'s reading tasks ran for ``took`` seconds: the job's and
        every job's moving averages (the waits are capped by them)."""
        job.task_time = _average(job.task_time, took)
        self.task_time = _average(self.task_time, took)

    def forget(self, job: DaskJob) -> None:
        """An ended job's tasks need no levels any more."""
        for k in job.reads:
            self._memo.pop(k, None)

    def wake(self) -> None:
        """Offers free slots soon (after the current transitions finish)."""
        if not self._place_soon:
            self._place_soon = True
            asyncio.get_running_loop().call_soon(self.place_now)

    def place_now(self) -> None:
        self._place_soon = False
        try:
            self._place()
        except Exception as e:  # a placement bug must not stop the scheduler
            self._contact.warn(f"placement failed: {e!r}")

    def _place(self) -> None:
        from distributed.core import Status

        now = time.monotonic()
        tasks = self.scheduler.tasks
        # Each job's held tasks that are ready to run now, worked out once per
        # round of offers (not once per offered slot).
        ready: dict[str, list[tuple[Any, Held]]] = {}
        for j in list(self.jobs.values()):
            due = [(k, h) for k in j.waiting if (h := j.held[k]).ready and h.start <= now]
            if due:
                ready[j.id] = due
        if not ready:
            return
        jobs = [self.jobs[i] for i in ready if i in self.jobs]
        if not self.placement:
            for job in jobs:  # held only for a start-up: now Dask places them
                self.unhold(job, due=now)
            return
        for i, due in ready.items():
            ready[i] = [(k, h) for k, h in due if k in tasks and tasks[k].state == "no-worker"]
        round_ = _Round(now, {j.id: j.running() for j in jobs}, ready, {})
        workers = [ws for ws in self.scheduler.workers.values() if ws.status == Status.running]
        places = {ws.address: self._place_of(ws) for ws in workers}
        everywhere = frozenset(places.values())
        saturation = getattr(self.scheduler, "WORKER_SATURATION", 1.0)
        for ws in workers:
            at = places[ws.address]
            for _ in range(_free_slots(ws, saturation)):
                if not self._offer(jobs, ws, at, everywhere, round_):
                    break

    def unhold(self, job: DaskJob, due: float | None = None) -> None:
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

    def _offer(
        self, jobs: list[DaskJob], ws: Any, at: pl.Place, places: frozenset[pl.Place], round_: _Round
    ) -> bool:
        """One free slot on ``ws``, offered to the jobs with fewest running
        tasks first; True if a task was launched there."""
        now = round_.now
        for job in sorted(jobs, key=lambda j: (round_.running[j.id], j.submitted)):
            if not job.located and now - job.submitted_at < self.delays.max_wait:
                continue  # where its blocks are is being asked (one poll)
            due = round_.ready.get(job.id)
            if not due:
                continue
            candidates = [self._candidate(job, key, h, at, places, now) for key, h in due]
            waited = 0.0 if job.declined_since is None else now - job.declined_since
            task_time = job.task_time if job.task_time is not None else self.task_time
            cached = round_.cached.get(job.id)
            if cached is None:
                cached = round_.cached[job.id] = self._cached(job)
            chosen = pl.choose(candidates, waited, cached, self.delays, task_time)
            if chosen is None:
                if job.declined_since is None:
                    job.declined_since = now
                for c in candidates:
                    held = job.held[c.key]
                    held.declined = held.declined or now
                    held.declined_last = now
                continue
            self._launch(job, chosen, ws, now)
            round_.ready[job.id] = [(k, h) for k, h in due if k != chosen.key]
            round_.running[job.id] += 1
            return True
        return False

    def _candidate(
        self, job: DaskJob, key: Any, held: Held, at: pl.Place, places: frozenset[pl.Place], now: float
    ) -> pl.Candidate:
        stamp = tuple(self._file_version.get((job.master, f), 0) for f in job.reads.get(key, ()))
        memo = self._memo.get(key)
        if memo is None or memo.stamp != stamp:
            blocks = self._task_blocks(job, key)
            memo = self._memo[key] = _Levels(stamp, blocks, pl.in_memory(blocks))
        lvl = memo.at.get(at)
        if lvl is None:
            lvl = memo.at[at] = pl.level(memo.blocks, at)
        reachable = memo.reachable.get(places)
        if reachable is None:
            reachable = memo.reachable[places] = frozenset(pl.level(memo.blocks, p) for p in places)
        waited = now - max(held.ready or now, held.start)
        return pl.Candidate(key, lvl, reachable, memo.in_memory, waited, held.order)

    def _task_blocks(self, job: DaskJob, key: Any) -> list[list[pl.Replica]]:
        """The replicas of each block the task reads (of its ranges, if it has)."""
        spans = job.ranges.get(key)
        if spans is None:
            return [r for f in job.reads.get(key, ()) for _, _, r in self.blocks.get((job.master, f), ())]
        return [
            r
            for path, start, length in spans
            for off, n, r in self.blocks.get((job.master, path), ())
            if off < start + length and start < off + n
        ]

    def _cached(self, job: DaskJob) -> float:
        """The job's cached fraction R_j: its unreleased blocks in memory."""
        total = cached = 0
        for f in job.files():
            if f in job.released:
                continue
            for _, _, replicas in self.blocks.get((job.master, f), ()):
                total += 1
                cached += any(r.memory for r in replicas)
        return cached / total if total else 0.0

    def _launch(self, job: DaskJob, c: pl.Candidate, ws: Any, now: float) -> None:
        held = job.held[c.key]
        job.set_launched(c.key, True)
        self._memo.pop(c.key, None)
        delay = 0.0 if held.declined is None else (held.declined_last or now) - held.declined
        held.declined = held.declined_last = None
        job.declined_since = None
        job.launches.append((c.level, delay, c.in_memory))
        self.launch_log.append(
            {
                "job": job.id,
                "key": str(c.key),
                "level": pl.LEVELS[c.level],
                "delay": delay,
                "at": time.time(),
                # Seconds from the job's submission to this launch, and of
                # those, held ready (delay paid, or no slot free).
                "since_submit": now - job.submitted_at,
                "held": c.waited,
                "in_memory": c.in_memory,
                "worker": ws.address,
            }
        )
        del self.launch_log[:-100_000]
        self.scheduler.tasks[c.key].worker_restrictions = {ws.address}
        self.scheduler.transitions({c.key: "processing"}, stimulus_id=f"thaw-placement-{now}")

    def _place_of(self, ws: Any) -> pl.Place:
        """Where a Dask worker sits: what it said (:class:`ThawWorkerPlace`), else
        the Thaw worker at its IP address if there is exactly one."""
        said = self.scheduler.get_metadata([PLACE_METADATA, ws.address], default=None)
        if said:
            host, rack, worker = said.get("host", ""), said.get("rack", ""), said.get("worker") or None
            if worker is None:  # the one Thaw worker on its host, if there is one
                on_host = [w["address"] for w in self._thaw_workers if w["host"] == host]
                worker = on_host[0] if len(on_host) == 1 else None
            return pl.Place(worker, host, rack)
        same_ip = [w for w in self._thaw_workers if w["address"].rsplit(":", 1)[0] == ws.host]
        if len(same_ip) == 1:
            w = same_ip[0]
            return pl.Place(w["address"], w["host"], w["rack"])
        hosts = {(w["host"], w["rack"]) for w in same_ip}
        if len(hosts) == 1:
            host, rack = hosts.pop()
            return pl.Place(None, host, rack)
        return pl.Place(None, ws.host, "")

    def _locate_loop(self) -> None:
        """Placement's view of where blocks are, on a thread of its own: a new
        job's locations at once (its tasks wait for them), then every job's on a
        timer. Apart from the migrations, so that neither waits for the other
        (measured on SWIM, queueing only: a new job's first answer took 0.06 s
        on average and up to 0.45 s behind migrations, renewals and polls)."""
        next_poll = time.monotonic()
        while not self._stop.is_set():
            try:
                job = self._to_locate.get(timeout=max(0.0, next_poll - time.monotonic()))
            except queue.Empty:
                job = None
            if job is not None and not job.ended:
                self._poll(only=job)
            if time.monotonic() >= next_poll and not self._stop.is_set():
                began = time.monotonic()
                self._poll()
                # Full polls take at most a third of this thread's time.
                next_poll = time.monotonic() + max(0.05, 2 * (time.monotonic() - began))

    def _poll(self, only: DaskJob | None = None) -> None:
        """Refreshes the block replicas of the files whose tasks are still to be
        placed (and the Thaw workers, for Dask workers that said nothing).
        ``only``: just that new job's files, merged into what is known: a new
        job's tasks wait for its first answer, which must not wait for a poll of
        every other job's files (measured: +0.1 s per job on SWIM).

        A file whose every block is in memory is asked again only after
        ``SETTLED_REFRESH`` seconds: its blocks stay there while a job holds
        them, and each ask is a call to the master and work for the scheduler's
        process, every round, for every such file."""
        from ..errors import NotFound

        want: set[tuple[str, str]] = set()
        asked = []
        for job in [only] if only is not None else list(self.jobs.values()):
            if job.waiting:
                want.update((job.master, f) for f in job.files() if f not in job.released)
                asked.append(job)
        if not want:
            return
        now = time.monotonic()
        known = self.blocks
        settled = {
            k
            for k in want
            if only is None
            and now - self._polled.get(k, 0.0) < SETTLED_REFRESH
            and pl.in_memory([r for _, _, r in known.get(k, ())])
        }
        fresh: dict[tuple[str, str], list[tuple[int, int, list[pl.Replica]]]] = {}
        for master, path in want - settled:
            try:
                st = self._contact.client(master).stat(path, blocks=True)
            except NotFound:
                continue
            except Exception as e:
                self._contact.warn(f"block locations of {path} at {master}: {e}")
                continue
            fresh[(master, path)] = [
                (
                    b["offset"],
                    b["length"],
                    [
                        pl.Replica(r["address"], r["host"], r["rack"], r["tier"] == "MEM")
                        for r in b["replicas"]
                    ],
                )
                for b in st.get("blocks", [])
            ]
            self._polled[(master, path)] = now
        if time.monotonic() - self._workers_polled > 1.0:
            self._workers_polled = time.monotonic()
            try:
                master = next(iter(want))[0]
                self._thaw_workers = [
                    w for w in self._contact.client(master).status()["workers"] if w["alive"]
                ]
            except Exception as e:
                self._contact.warn(f"Thaw workers at {master}: {e}")
        changed = [k for k, v in fresh.items() if known.get(k) != v]
        if only is None:
            fresh.update((k, known[k]) for k in settled)
            self._polled = {k: t for k, t in self._polled.items() if k in fresh}
        self.blocks = {**known, **fresh} if only is not None else fresh
        # After the blocks: a task's levels are never kept under a newer stamp
        # than the blocks they were worked out from.
        versions = (
            dict(self._file_version)
            if only is not None
            else {k: v for k, v in self._file_version.items() if k in fresh}
        )
        versions.update((k, next(self._versions)) for k in changed)
        self._file_version = versions
        for job in asked:
            job.located = True


def _average(old: float | None, sample: float) -> float:
    """A moving average of task run times (weight 0.3 on the new sample)."""
    return sample if old is None else 0.7 * old + 0.3 * sample


def launch_summary(launches: list[tuple[int, float, bool]]) -> dict[str, Any]:
    """Placed tasks, the share that ran memory-local (worker or host memory),
    and the delay they paid waiting for a better slot (median, p99, max)."""
    if not launches:
        return {"placed": 0}
    delays = sorted(d for _, d, _ in launches)
    p99 = delays[min(len(delays) - 1, int(0.99 * len(delays)))]
    return {
        "placed": len(launches),
        "memory_local": sum(1 for lvl, _, _ in launches if lvl in pl.MEMORY_LOCAL) / len(launches),
        "in_memory": sum(1 for *_, m in launches if m) / len(launches),
        "levels": {pl.LEVELS[i]: sum(1 for lvl, _, _ in launches if lvl == i) for i in range(len(pl.LEVELS))},
        "delay_median": statistics.median(delays),
        "delay_p99": p99,
        "delay_max": delays[-1],
    }


class ThawWorkerPlace(WorkerPlugin):
    """Says where a Dask worker sits in Thaw's topology, for placement: the Thaw
    worker beside it (``THAW_WORKER``), its host (``THAW_HOST``, default the
    host name) and rack (``THAW_RACK``), as the Thaw client of that process
    would. Given explicitly, they win over the environment."""

    name = "thaw-place"

    def __init__(self, worker: str | None = None, host: str | None = None, rack: str | None = None) -> None:
        self.place = {"worker": worker, "host": host, "rack": rack}

    async def setup(self, worker: Any) -> None:
        place = {
            "worker": self.place["worker"] or os.environ.get("THAW_WORKER") or None,
            "host": self.place["host"] or os.environ.get("THAW_HOST") or socket.gethostname(),
            "rack": self.place["rack"] or os.environ.get("THAW_RACK", ""),
        }
        await worker.scheduler.set_metadata(keys=[PLACE_METADATA, worker.address], value=place)


def _free_slots(ws: Any, saturation: float) -> int:
    """The slots of Dask worker ``ws`` a held task may take: as many as Dask's
    own queuing gives root tasks (``worker-saturation``, 1.1 x its threads by
    default, so a worker keeps a task ready behind those running), or its idle
    threads when queuing is off.

    Offering only idle threads starved held tasks: Dask hands a worker every
    non-root task whose inputs it holds, beyond its threads, so on a busy
    cluster a thread was rarely idle and a held map waited behind newer jobs'
    reducers (SWIM, queueing only: maps held 0.25 s (median) with no slot
    offered, against their 0.03 s run)."""
    cap = ws.nthreads if math.isinf(saturation) else max(math.ceil(saturation * ws.nthreads), 1)
    return cap - (len(ws.processing) - len(ws.long_running))
