"""The Thaw side of the scheduler plugin's jobs, on a thread of its own (the
scheduler's event loop never waits for a master): each submission's inputs
migrated, each file released once its readers ran, the job's application told
to the cache manager, its lease renewed while its keys are wanted, its task
counters reported, and the job ended (Ignem, section III-B3, with Dask as the
job submitter)."""

from __future__ import annotations

import logging
import queue
import statistics
import threading
import time

from ..errors import NotFound
from . import placement as pl
from .contact import ThawContact
from .job import DaskJob

_log = logging.getLogger("thaw.dask")


class ThawJobs:
    """Calls the masters for the plugin's jobs, in the order asked (:meth:`ask`),
    and renews leases and reports tasks on a timer.

    ``jobs``: the plugin's live jobs (renewed and reported; the plugin adds and
    removes them). ``lease``, ``eviction``: each migration's. ``report_tasks``:
    tell the master how each job's tasks were placed (with placement only:
    without it, where tasks ran is Dask's to tell)."""

    def __init__(
        self,
        jobs: dict[str, DaskJob],
        contact: ThawContact,
        *,
        lease: float,
        eviction: str,
        report_tasks: bool,
    ) -> None:
        self.jobs = jobs
        self.lease = lease
        self.eviction = eviction
        self.report_tasks = report_tasks
        self._contact = contact
        self._actions: queue.Queue[tuple[str, DaskJob, list[str]] | None] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="thaw-dask", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Does what was asked so far, then stops (:meth:`join` waits for it)."""
        self._stop.set()
        self._actions.put(None)

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def ask(self, what: str, job: DaskJob, files: list[str]) -> None:
        """Queues a call for ``job`` (never blocks): ``migrate`` or ``release``
        ``files``, tell the master its ``app`` (``files``: its inputs), ``end`` it."""
        self._actions.put((what, job, files))

    def _run(self) -> None:
        """Migrations, releases and ends in the order they were asked for; lease
        renewals and task reports on a timer."""
        renew_every = min(self.lease / 3, 1.0)
        next_renew = time.monotonic() + renew_every
        while not (self._stop.is_set() and self._actions.empty()):
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
        c = self._contact.client(job.master)
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
                    self._contact.warn(f"job {job.id}: {len(files) - len(present)} input(s) not in Thaw")
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
            self._contact.warn(f"job {job.id}: {what} failed ({e}); the graph runs on without it")

    def _report(self) -> None:
        """Tells the master how each placing job's tasks went (``thaw jobs``
        shows it): only what changed since the last report."""
        if not self.report_tasks:
            return
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
                self._contact.client(job.master).report_tasks(
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
                unknown = set(self._contact.client(master).renew([j.id for j in jobs]))
            except Exception as e:
                self._contact.warn(f"lease renewal at {master} failed: {e}")
                continue
            for j in jobs:
                rest = [f for f in j.files() if f not in j.released]
                if j.id in unknown and rest and not j.ended:
                    _log.info("master %s no longer knows job %s: migrating again", master, j.id)
                    self._do("migrate", j, rest)
