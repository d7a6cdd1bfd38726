"""Job context: ``with thaw.job("name"):`` names the job that every Thaw read and
write inside the block carries, so workers count accesses per job.

With ``inputs=[...]`` the context is also the job submitter of Ignem, section III-B3:
on enter it tells the master what the job will read (a migrate call, which
returns at once, so the migration overlaps whatever the job waits for), renews
the job's lease in the background while the block runs (an expired lease means a
failed job, whose blocks the workers drop), migrates again if the master
restarted, and evicts the job's blocks on exit.

A client or filesystem given a job id explicitly (``Client(job_id=...)``,
``ThawFileSystem(job_id=...)``, Dask's ``storage_options``) always uses it. For the
others the job is found in this order: the innermost ``thaw.job`` of the current
context (contextvars: threads and asyncio tasks started inside the block inherit
it when the framework copies contexts); else, in a Dask task, the job the Thaw scheduler plugin annotated it
with (:mod:`thaw.dask`); else, for thread pools that do not copy
contexts (pandas, pyarrow and Dask's threaded scheduler), the innermost job active
in this process if all active jobs were entered by one thread; else
``THAW_JOB_ID``.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
import uuid
from types import TracebackType
from typing import Any

from ._context import current_job_id, enter_job, leave_job
from .client import Client

__all__ = ["Job", "current_job_id", "job"]

_log = logging.getLogger("thaw.jobs")


class Job:
    """A named unit of work whose reads and writes Thaw can tell apart.

    ``id`` is the name, made unique with a suffix when ``unique=True``. With
    ``inputs``, entering migrates them (``eviction``: "explicit", blocks stay
    until the job ends; "implicit", each leaves memory once the job has read it)
    under a lease of ``lease`` seconds renewed in the background, and leaving
    evicts them. ``wait=True`` (or a number of seconds) waits on enter until the
    migration is done.
    """

    def __init__(
        self,
        name: str,
        *,
        unique: bool = False,
        client: Client | None = None,
        inputs: str | list[str] | None = None,
        eviction: str = "explicit",
        lease: float = 30.0,
        wait: bool | float = False,
        cache_affinity: float | None = None,
        measure: bool = True,
    ) -> None:
        if cache_affinity is not None and not (
            isinstance(cache_affinity, (int, float)) and 0.0 <= cache_affinity <= 1.0
        ):
            raise ValueError(f"cache_affinity {cache_affinity!r} is outside [0, 1]")
        if not name or any(c.isspace() for c in name) or len(name) > 200:
            raise ValueError(f"job name {name!r}: 1-200 characters, no spaces")
        if eviction not in ("explicit", "implicit"):
            raise ValueError(f"eviction {eviction!r}: explicit or implicit")
        if lease <= 0:
            raise ValueError("lease must be positive")
        self.name = name
        self.id = f"{name}-{uuid.uuid4().hex[:8]}" if unique else name
        self.inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        self.eviction = eviction
        self.lease = lease
        self._wait = wait
        self._client = client
        self._token: contextvars.Token[str | None] | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.remigrations = 0
        self.cache_affinity = None if cache_affinity is None else float(cache_affinity)
        self._measure = measure
        self._usage: Any = None

    def __repr__(self) -> str:
        return f"Job({self.id!r})"

    def client(self) -> Client:
        return self._client or Client()

    def __enter__(self) -> Job:
        if self._token is not None:
            raise RuntimeError(f"{self!r} is already entered")
        if self.inputs:
            self.migrate()
        self._token = enter_job(self, self.id)
        if self._measure or self.cache_affinity is not None:
            from .usage import JobReporter

            self._usage = JobReporter(self.id, self.name, self.client, self.cache_affinity)
            self._usage.start()
        if self.inputs and self._wait is not False:
            try:
                self._wait_migrated(None if self._wait is True else float(self._wait))
            except BaseException:
                # A failed enter leaves nothing behind: no context, no renewer,
                # no job holding memory.
                self.__exit__(*sys.exc_info())
                raise
        return self

    def _wait_migrated(self, timeout: float | None) -> dict[str, Any]:
        """Waits for the migration; a master that forgot the job (it restarted)
        is told again, as the renewer would."""
        from .errors import NotFound

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return self.client().wait_migrated(self.id, left)
            except NotFound:
                self.client().migrate(self.inputs, self.id, eviction=self.eviction, lease=self.lease)
                self.remigrations += 1

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        leave_job(self, self._token)
        self._token = None
        if self._usage is not None:
            self._usage.stop()
            self._usage = None
        if self.inputs:
            self._stop.set()
            if self._renewer is not None:
                self._renewer.join()
                self._renewer = None
            self._end()

    def migrate(self) -> dict[str, Any]:
        """Tells the master this job's inputs (again) and starts renewing its
        lease; returns its progress."""
        info = self.client().migrate(self.inputs, self.id, eviction=self.eviction, lease=self.lease)
        if self._renewer is None:
            self._stop.clear()
            self._renewer = threading.Thread(target=self._renew, name=f"thaw-lease-{self.id}", daemon=True)
            self._renewer.start()
        return info

    def _renew(self) -> None:
        """Renews the lease every third of it; a master that does not know the job
        (it restarted: migration state is soft) is told again."""
        client = self.client()
        while not self._stop.wait(min(self.lease / 3, 1.0)):
            try:
                if client.renew(self.id):
                    _log.info("master no longer knows job %s: migrating its inputs again", self.id)
                    client.migrate(self.inputs, self.id, eviction=self.eviction, lease=self.lease)
                    self.remigrations += 1
            except Exception as e:
                _log.warning("lease renewal of job %s failed: %s", self.id, e)

    def _end(self) -> None:
        from .errors import NotFound, Unavailable

        try:
            self.client().evict(self.id)
        except NotFound:
            pass  # already gone: its lease ran out, or the master restarted
        except Unavailable as e:
            _log.warning("could not evict job %s (its lease will run out): %s", self.id, e)

    def progress(self) -> dict[str, Any] | None:
        """The job's migration progress (blocks pending, queued, in memory,
        read, failed; ``progress`` 0-1), or None if the master does not know it."""
        return self.client().job(self.id)

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Waits until none of the job's blocks is pending or queued."""
        return self._wait_migrated(timeout)

    def stats(self) -> dict[str, Any]:
        """This job's accesses summed over the workers, asked of each worker now:
        reads, bytes_read (of them bytes_from_memory and bytes_cold), writes,
        bytes_written, short_circuit_opens, and the same per worker address
        under ``workers``."""
        return self.client().job_stats(self.id)


def job(
    name: str,
    *,
    unique: bool = False,
    client: Client | None = None,
    inputs: str | list[str] | None = None,
    eviction: str = "explicit",
    lease: float = 30.0,
    wait: bool | float = False,
    cache_affinity: float | None = None,
    measure: bool = True,
) -> Job:
    """A job context: ``with thaw.job("etl", inputs=["/tables/sales"]) as j: ...``.

    Without ``inputs`` it only names the job of every read and write inside.
    With them, it migrates them on enter and evicts them on exit (see :class:`Job`).

    Cache affinity (CAVA, section IV-A): while the block runs, the process's CPU
    time and storage writes are reported to the master every second
    (``measure=False`` turns this off), which classifies the job as high,
    medium or low affinity for the ``cava`` and ``ca`` cache policies; a job
    of the same ``name`` starts from the class its last run was given.
    ``cache_affinity=0.3`` names the value instead (CAVA's Static-CA),
    and the master takes it at its word.
    """
    return Job(
        name,
        unique=unique,
        client=client,
        inputs=inputs,
        eviction=eviction,
        lease=lease,
        wait=wait,
        cache_affinity=cache_affinity,
        measure=measure,
    )
