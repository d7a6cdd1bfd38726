"""Job context: ``with thaw.job("name"):`` names the job that every Thaw read and
write inside the block carries, so workers count accesses per job (and, with the
migration features, move a job's inputs into memory before it reads them).

A client or filesystem given a job id explicitly (``Client(job_id=...)``,
``ThawFileSystem(job_id=...)``, Dask's ``storage_options``) always uses it. For the
others the job is found in this order: the innermost ``thaw.job`` of the current
context (contextvars: threads and asyncio tasks started inside the block inherit
it when the framework copies contexts); else, for thread pools that do not copy
contexts (pandas, pyarrow and Dask's threaded scheduler), the innermost job active
in this process if all active jobs were entered by one thread; else
``THAW_JOB_ID``.
"""

from __future__ import annotations

import contextvars
import threading
import uuid
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import Client

_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar("thaw_job", default=None)
_active: list[Job] = []
_active_lock = threading.Lock()


def current_job_id() -> str | None:
    """The job id that a read or write started now would carry, if a job is set."""
    job = _current.get()
    if job is not None:
        return job.id
    with _active_lock:
        # Nested blocks of one thread: the innermost. Jobs of several threads at
        # once: a context-less thread belongs to none of them.
        if _active and len({j._thread for j in _active}) == 1:
            return _active[-1].id
    return None


class Job:
    """A named unit of work whose reads and writes Thaw can tell apart.

    ``id`` is the name, made unique with a suffix when ``unique=True``.
    """

    def __init__(self, name: str, *, unique: bool = False, client: Client | None = None) -> None:
        if not name or any(c.isspace() for c in name) or len(name) > 200:
            raise ValueError(f"job name {name!r}: 1-200 characters, no spaces")
        self.name = name
        self.id = f"{name}-{uuid.uuid4().hex[:8]}" if unique else name
        self._client = client
        self._token: contextvars.Token[Job | None] | None = None
        self._thread = 0

    def __repr__(self) -> str:
        return f"Job({self.id!r})"

    def __enter__(self) -> Job:
        if self._token is not None:
            raise RuntimeError(f"{self!r} is already entered")
        self._token = _current.set(self)
        self._thread = threading.get_ident()
        with _active_lock:
            _active.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        with _active_lock:
            if self in _active:
                _active.remove(self)

    def stats(self) -> dict[str, Any]:
        """This job's accesses summed over the workers, asked of each worker now:
        reads, bytes_read, writes, bytes_written, short_circuit_opens, and the
        same per worker address under ``workers``."""
        from .client import Client

        client = self._client or Client()
        return client.job_stats(self.id)


def job(name: str, *, unique: bool = False, client: Client | None = None) -> Job:
    """A job context: ``with thaw.job("etl") as j: ...``; ``j.stats()`` afterwards."""
    return Job(name, unique=unique, client=client)
