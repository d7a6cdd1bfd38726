"""What an application's tasks measurably do, for the master's cache affinity
classifier (CAVA, section IV-A: CPU use and write traffic, measured at runtime,
not declared).

Where the figures come from, said plainly:

- **CPU**: the process's CPU time (``time.process_time()``: every thread,
  user and system) between task starts and ends.
- **Writes**: the process's ``write_bytes`` in ``/proc/self/io`` (bytes sent to
  storage, counted when pages are dirtied); writes through Thaw are counted
  by the workers and added by the master.
- **Attribution** (:class:`UsageMeter`, the Dask worker plugin): between two
  task starts or ends the process's CPU and write deltas are split equally
  among the tasks running then, each adding its share to its job. With one
  thread per Dask worker this is the task's own figure; with several it is the
  fair share of what the process did while they ran together.
- :func:`thaw.job` (one application per process block): the process's figures
  while the job is active.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_log = logging.getLogger("thaw.usage")

#: Seconds between reports of a running application.
REPORT_EVERY = 1.0
#: A job with no task for this long is forgotten by the meter (the master
#: averages the applications of the last ten minutes; after that a job's
#: figures are its last report's).
FORGET_AFTER = 600.0


def process_cpu() -> float:
    """CPU seconds this process has used (all threads)."""
    return time.process_time()


def process_write_bytes() -> int:
    """Bytes this process has written to storage (``/proc/self/io``; 0 where
    the kernel does not say)."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"write_bytes:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


@dataclass
class Figures:
    """One job's figures in this process so far."""

    wall: float = 0.0
    cpu: float = 0.0
    writes: float = 0.0
    tasks: int = 0


class UsageMeter:
    """Splits a process's CPU time and storage writes among the tasks running
    in it, by job (see the module doc). Thread-safe; ``clock``, ``cpu`` and
    ``writes`` are injectable for tests."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = process_cpu,
        writes: Callable[[], int] = process_write_bytes,
    ) -> None:
        self._clock, self._cpu, self._writes = clock, cpu, writes
        self._lock = threading.Lock()
        self._running: dict[Any, tuple[str, float]] = {}
        self.jobs: dict[str, Figures] = {}
        # Job -> when a task of it last started or ended (for forget_idle).
        self._active_at: dict[str, float] = {}
        self._last = (cpu(), writes())

    def _split(self) -> None:
        cpu, writes = self._cpu(), self._writes()
        d_cpu, d_writes = max(0.0, cpu - self._last[0]), max(0, writes - self._last[1])
        self._last = (cpu, writes)
        if not self._running:
            return  # the process's own work between tasks: nobody's
        share_cpu, share_w = d_cpu / len(self._running), d_writes / len(self._running)
        for job, _ in self._running.values():
            f = self.jobs.setdefault(job, Figures())
            f.cpu += share_cpu
            f.writes += share_w

    def start(self, key: Any, job: str) -> None:
        with self._lock:
            self._split()
            self._running[key] = (job, self._clock())
            self.jobs.setdefault(job, Figures())
            self._active_at[job] = self._clock()

    def stop(self, key: Any) -> None:
        with self._lock:
            if key not in self._running:
                return
            self._split()
            job, began = self._running.pop(key)
            f = self.jobs.setdefault(job, Figures())
            f.wall += self._clock() - began
            f.tasks += 1
            self._active_at[job] = self._clock()

    def forget_idle(self, idle_for: float) -> list[str]:
        """Drops the jobs none of whose tasks ran for ``idle_for`` seconds (a
        long-lived worker sees jobs without end); returns them."""
        with self._lock:
            busy = {job for job, _ in self._running.values()}
            now = self._clock()
            gone = [j for j, t in self._active_at.items() if j not in busy and now - t >= idle_for]
            for j in gone:
                self.jobs.pop(j, None)
                del self._active_at[j]
            return gone

    def snapshot(self) -> dict[str, Figures]:
        """Each job's figures, with running tasks counted up to now."""
        with self._lock:
            self._split()
            now = self._clock()
            out = {j: Figures(f.wall, f.cpu, f.writes, f.tasks) for j, f in self.jobs.items()}
            for job, began in self._running.values():
                out[job].wall += now - began
            return out


class JobReporter:
    """Reports one :func:`thaw.job`'s figures while it is active (a daemon
    thread, every :data:`REPORT_EVERY` seconds) and once more when it ends.
    Reporting never fails the job: a master that cannot be reached is logged."""

    def __init__(self, job_id: str, name: str, client: Callable[[], Any], declared: float | None) -> None:
        self.job_id, self.name, self._client, self.declared = job_id, name, client, declared
        self._stop = threading.Event()
        self._t0 = (time.monotonic(), process_cpu(), process_write_bytes())
        self._thread = threading.Thread(target=self._run, name=f"thaw-usage-{job_id}", daemon=True)
        self._warned = False

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        # At once (a declared affinity is known before the first reads), then
        # every REPORT_EVERY, and once more at the end: all on this thread, so
        # a master that is down never delays the job's enter or exit.
        self.report()
        while not self._stop.wait(REPORT_EVERY):
            self.report()
        self.report(ended=True)

    def report(self, ended: bool = False) -> dict[str, Any] | None:
        t0, c0, w0 = self._t0
        try:
            return self._client().report_app_usage(  # type: ignore[no-any-return]
                self.job_id,
                name=self.name,
                wall_seconds=time.monotonic() - t0,
                cpu_seconds=process_cpu() - c0,
                tasks=1,
                write_bytes=max(0, process_write_bytes() - w0),
                cache_affinity=self.declared,
                ended=ended,
                reporter=f"pid-{threading.get_native_id()}-{id(self)}",
            )
        except Exception as e:
            if not self._warned:
                _log.debug("usage report of job %s failed: %s", self.job_id, e)
                self._warned = True
            return None

    def stop(self) -> None:
        """Ends the reports (the last one, ``ended``, goes from the thread)."""
        self._stop.set()
