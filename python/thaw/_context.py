"""What a call made now is for and where it goes, kept below the client and
the job context so that both can read it without importing each other.

- The job a read or write carries (:func:`current_job_id`): the innermost
  :func:`thaw.job` of the current context, else the Dask task's ``thaw_job``
  annotation, else the innermost job active in this process if one thread
  entered them all (see :mod:`thaw.jobs` for why).
- The cluster a ``Client()`` with no address reaches (:func:`default_master`):
  the running :func:`thaw.lineage.step`'s, else the latest
  :class:`~thaw.LocalCluster` of this process, else ``THAW_MASTER``.
- The lineage whose lost outputs a write rebuilds (:func:`recovering`): a
  rerun run inside a process that does other work too (a Dask worker's), as
  ``THAW_RECOVER_LINEAGE`` does for a process of its own.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
from typing import Any

from . import _native

DEFAULT_MASTER: str = _native.DEFAULT_MASTER

# -- the job ---------------------------------------------------------------------

# The innermost entered job's id in this context, and every job entered in this
# process with the thread that entered it (in order: the last is the innermost).
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("thaw_job", default=None)
_active: list[tuple[object, str, int]] = []
_active_lock = threading.Lock()


def enter_job(job: object, job_id: str) -> contextvars.Token[str | None]:
    """``job`` (named ``job_id``) is entered by this thread: calls made in this
    context carry it until :func:`leave_job`."""
    token = _current.set(job_id)
    with _active_lock:
        _active.append((job, job_id, threading.get_ident()))
    return token


def leave_job(job: object, token: contextvars.Token[str | None] | None) -> None:
    """``job`` is left: the context gets back the job it had before it."""
    if token is not None:
        _current.reset(token)
    with _active_lock:
        for i, (j, _, _) in enumerate(_active):
            if j is job:
                del _active[i]
                break


def current_job_id() -> str | None:
    """The job id that a read or write started now would carry, if a job is set."""
    job_id = _current.get()
    if job_id is not None:
        return job_id
    dask_job = _dask_task_job()
    if dask_job is not None:
        return dask_job
    with _active_lock:
        # Nested blocks of one thread: the innermost. Jobs of several threads at
        # once: a context-less thread belongs to none of them.
        if _active and len({thread for _, _, thread in _active}) == 1:
            return _active[-1][1]
    return None


def _dask_task_job() -> str | None:
    """Inside a Dask task: the Thaw job the scheduler plugin gave it (the
    ``thaw_job`` annotation, see :mod:`thaw.dask`)."""
    worker_mod = sys.modules.get("distributed.worker")
    if worker_mod is None:
        return None
    key = getattr(worker_mod.thread_state, "key", None)
    if key is None:
        return None
    try:
        ts = worker_mod.get_worker().state.tasks.get(key)
    except ValueError:  # not in a worker
        return None
    job = (ts.annotations or {}).get("thaw_job") if ts is not None else None
    return job if isinstance(job, str) else None


# -- the cluster -----------------------------------------------------------------

#: LocalClusters running in this process, latest last (:class:`thaw.LocalCluster`
#: adds and removes itself).
clusters: list[Any] = []

#: The master of the :func:`thaw.lineage.step` running now, if any: its body's
#: ``Client()`` and ``thaw://`` paths reach the cluster the step records on.
current_step_master: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "thaw_step_master", default=None
)


def default_master() -> str:
    """Where ``Client()`` connects when given no address: the cluster of the
    :func:`thaw.lineage.step` running now, else the latest
    :class:`~thaw.LocalCluster` running in this process, else ``THAW_MASTER``,
    else 127.0.0.1:19998."""
    step = current_step_master.get()
    if step:
        return step
    if clusters:
        return str(clusters[-1].master)
    return os.environ.get("THAW_MASTER") or DEFAULT_MASTER


# -- a rerun in this process -----------------------------------------------------

#: The lineage whose lost outputs the rerun running in this context rebuilds
#: (0: none): every client's writes here carry it (:meth:`thaw.Client.native`).
current_recovery: contextvars.ContextVar[int] = contextvars.ContextVar("thaw_recovery", default=0)


class recovering:
    """``with recovering(lineage, job_id):`` the calls made in this context
    (this thread, this task) rebuild ``lineage``'s lost outputs and carry job
    ``job_id``; other threads of the process are untouched."""

    def __init__(self, lineage: int, job_id: str | None = None) -> None:
        self.lineage, self.job_id = lineage, job_id
        self._tokens: list[Any] = []

    def __enter__(self) -> recovering:
        self._tokens = [current_recovery.set(self.lineage)]
        if self.job_id:
            self._tokens.append(_current.set(self.job_id))
        return self

    def __exit__(self, *exc: object) -> None:
        if len(self._tokens) > 1:
            _current.reset(self._tokens[1])
        current_recovery.reset(self._tokens[0])
