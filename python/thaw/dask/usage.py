"""The Dask side of cache affinity at runtime (CAVA, section IV-A): a worker plugin
that measures what each Thaw job's tasks do in its process (CPU time and
storage writes, split among the tasks running together: see
:mod:`thaw.usage`) and reports each job's figures to the Thaw master every
second, as this worker's own (``reporter``: the worker's address); the master
sums the workers' figures and classifies the job.

A task's job is its ``thaw_job`` annotation (the scheduler plugin sets it on
reading tasks; a user may set it on any). Tasks without one are not counted.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from ..usage import FORGET_AFTER, REPORT_EVERY, UsageMeter

_log = logging.getLogger("thaw.dask")

JOB_ANNOTATION = "thaw_job"
#: Seconds a report waits after a task's end for others ending with it.
SETTLE = 0.05


class ThawUsage(WorkerPlugin):
    """Worker plugin: per-job CPU and write figures of this worker's tasks,
    reported to the Thaw master (``master``; default: ``THAW_MASTER``)."""

    name = "thaw-usage"

    def __init__(self, master: str | None = None, every: float = REPORT_EVERY) -> None:
        self.master = master
        self.every = every
        self.meter: UsageMeter | None = None
        self._stop = threading.Event()
        # Set when a task ends: its job's figures go out soon, not a second later
        # (a short application would otherwise end before it was classified).
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None
        self._worker: Any = None
        self._sent: dict[str, tuple[float, int]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"master": self.master, "every": self.every}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["master"], state["every"])  # type: ignore[misc]

    def setup(self, worker: Any) -> None:
        self._worker = worker
        self.meter = UsageMeter()
        self._thread = threading.Thread(target=self._run, name="thaw-usage", daemon=True)
        self._thread.start()

    def teardown(self, worker: Any) -> None:
        self._stop.set()
        self._ended.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        meter = self.meter
        if meter is None:
            return
        if finish == "executing":
            ts = self._worker.state.tasks.get(key) if self._worker is not None else None
            job = (ts.annotations or {}).get(JOB_ANNOTATION) if ts is not None else None
            if isinstance(job, str) and job:
                meter.start(key, job)
        elif start == "executing":
            meter.stop(key)
            self._ended.set()

    def _run(self) -> None:
        from ..client import Client

        client: Client | None = None
        warned = False
        while not self._stop.is_set():
            self._ended.wait(self.every)
            self._ended.clear()
            if self._stop.is_set():
                break
            time.sleep(SETTLE)  # tasks ending together: one report
            if self.meter is None:
                continue
            try:
                client = client or Client(self.master)
                self.report(client)
            except Exception as e:
                if not warned:
                    _log.warning("thaw usage reports fail (%s); cache affinity is not measured here", e)
                    warned = True
        if client is not None and self.meter is not None:
            with contextlib.suppress(Exception):
                self.report(client)

    def report(self, client: Any) -> None:
        """Sends the figures of every job that ran a task here since the last
        report (absolute values: the master keeps each reporter's latest)."""
        assert self.meter is not None
        reporter = str(getattr(self._worker, "address", "") or id(self))
        for job, f in self.meter.snapshot().items():
            mark = (round(f.wall, 3), f.tasks)
            if self._sent.get(job) == mark:
                continue
            client.report_app_usage(
                job,
                wall_seconds=f.wall,
                cpu_seconds=f.cpu,
                tasks=max(f.tasks, 1),
                write_bytes=int(f.writes),
                reporter=reporter,
            )
            self._sent[job] = mark
        for job in self.meter.forget_idle(FORGET_AFTER):
            self._sent.pop(job, None)
