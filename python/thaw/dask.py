"""Dask and Thaw cooperate: the scheduler tells storage what a submitted graph
will read, and storage holds it in memory exactly as long as the graph needs it.

This is scheduled-caching.txt's cooperation between scheduler and storage, with
the job-driven migration of ignem.txt / dyrs.txt behind it:

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
  read); the rest when the job's keys are released or its client goes away.
  A lease that runs out (scheduler killed, plugin gone) frees everything.
- **Reads carry the job.** Each reading task gets the annotation ``thaw_job``;
  a Thaw read inside a Dask task takes its job from it (see
  :func:`thaw.jobs.current_job_id`), so per-job counters and the job's read
  state are the Dask submission's.

Nothing here can fail a computation: a Thaw master that is down, a path that
does not exist or a restart is logged as a warning and the graph runs as it would
without the plugin (its reads fall back to the under-store as any cold read does).

Install: ``thaw.dask.install(client)`` on a running cluster, or
``dask scheduler --preload thaw.dask`` / ``LocalCluster(scheduler_kwargs=
{"preload": ["thaw.dask"]})`` for clusters the user starts (options from
``THAW_MASTER`` and the ``THAW_DASK_*`` variables, see :func:`dask_setup`).
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from .client import Client
from .fs import ThawFileSystem

_log = logging.getLogger("thaw.dask")

#: The task annotation naming the Thaw job of a task's reads.
JOB_ANNOTATION = "thaw_job"
#: The annotation a user sets (``dask.annotate(thaw_inputs=[...])``) to name a
#: task's Thaw inputs when they cannot be found from the task itself.
INPUTS_ANNOTATION = "thaw_inputs"

# How deep a task spec is searched for inputs: read tasks hold their paths a
# few levels down (Task -> args -> dict -> tuple -> str).
_MAX_DEPTH = 8


# -- finding inputs -----------------------------------------------------------


def find_inputs(run_spec: Any, default_master: str | None = None) -> set[tuple[str, str]]:
    """The Thaw files a task reads, as (master, path), found in its spec:

    - an fsspec ``OpenFile`` on a :class:`~thaw.fs.ThawFileSystem` (``read_csv``,
      ``read_text``): its path;
    - a callable that holds a Thaw filesystem as ``fs`` (dask's parquet reader):
      the absolute paths among the task's arguments;
    - a zarr array on a Thaw store (``from_zarr``): the chunk files the task's
      slice covers, or the array's directory if that cannot be told.
    """
    found: set[tuple[str, str]] = set()
    _walk(run_spec, found, None, 0, default_master)
    return found


def _thaw_fs(obj: Any) -> ThawFileSystem | None:
    fs = getattr(obj, "fs", None)
    if isinstance(fs, ThawFileSystem):
        return fs
    # zarr wraps a synchronous filesystem for its async store.
    inner = getattr(fs, "sync_fs", None)
    return inner if isinstance(inner, ThawFileSystem) else None


def _walk(
    x: Any, found: set[tuple[str, str]], fs: ThawFileSystem | None, depth: int, master: str | None
) -> None:
    if depth > _MAX_DEPTH or x is None or isinstance(x, (int, float, bool, bytes)):
        return
    if isinstance(x, str):
        if x.startswith("thaw://"):
            rest = x[len("thaw://") :].partition("/")
            netloc = rest[0] if ":" in rest[0] else ""
            m = netloc or (fs.master if fs else master)
            if m:
                found.add((m, ThawFileSystem._strip_protocol(x)))
        elif fs is not None and x.startswith("/"):
            found.add((fs.master, ThawFileSystem._strip_protocol(x)))
        return
    from dask._task_spec import DataNode, Task

    if isinstance(x, Task):
        region = region_of(x.args)
        arrays = [z for z in map(zarr_array, (getattr(a, "value", a) for a in x.args)) if z] if region else []
        if arrays:  # an inlined from_zarr getter: the chunks its region covers
            for m, root, arr in arrays:
                found.update((m, f) for f in zarr_chunk_files(root, arr, region))
            return
        fs = _thaw_fs(x.func) or fs
        _walk(x.func, found, fs, depth + 1, master)
        for a in x.args:
            _walk(a, found, fs, depth + 1, master)
        for a in x.kwargs.values():
            _walk(a, found, fs, depth + 1, master)
        return
    if isinstance(x, DataNode):
        _walk(x.value, found, fs, depth + 1, master)
        return
    if isinstance(x, functools.partial):
        fs = _thaw_fs(x.func) or fs
        for a in itertools.chain(x.args, x.keywords.values()):
            _walk(a, found, fs, depth + 1, master)
        return
    if isinstance(x, (list, tuple, set, frozenset)):
        for a in x:
            _walk(a, found, fs, depth + 1, master)
        return
    if isinstance(x, dict):
        for a in x.values():
            _walk(a, found, fs, depth + 1, master)
        return
    own = _thaw_fs(x)
    if own is not None and isinstance(getattr(x, "path", None), str):
        found.add((own.master, ThawFileSystem._strip_protocol(x.path)))  # fsspec OpenFile
        return
    zarr = _zarr_inputs(x)
    if zarr:
        found.update(zarr)


def zarr_array(x: Any) -> tuple[str, str, Any] | None:
    """(master, directory, array) if ``x`` is a zarr array on a Thaw store."""
    store_path = getattr(x, "store_path", None)
    store = getattr(store_path, "store", None)
    fs = _thaw_fs(store)
    if fs is None or not hasattr(x, "metadata") or not hasattr(x, "chunks"):
        return None
    root = "/".join(p for p in (getattr(store, "path", ""), getattr(store_path, "path", "")) if p)
    return fs.master, ThawFileSystem._strip_protocol(root), x


def zarr_chunk_files(root: str, arr: Any, region: tuple[slice, ...]) -> set[str]:
    """The chunk files of ``arr`` (stored under ``root``) that ``region`` covers."""
    ranges = []
    for s, c, n in zip(region, arr.chunks, arr.shape, strict=False):
        start, stop, _ = s.indices(n)
        ranges.append(range(start // c, -(-stop // c)))
    return {f"{root}/{arr.metadata.encode_chunk_key(coords)}" for coords in itertools.product(*ranges)}


def region_of(args: Iterable[Any]) -> tuple[slice, ...] | None:
    """The tuple of slices among a getter task's arguments (dask.array's
    ``getter(array, region)``)."""
    from dask._task_spec import DataNode

    for a in args:
        a = a.value if isinstance(a, DataNode) else a
        if isinstance(a, tuple) and a and all(isinstance(s, slice) for s in a):
            return a
    return None


def _zarr_inputs(x: Any) -> set[tuple[str, str]]:
    """A zarr array met outside a getter: its directory (every chunk file)."""
    z = zarr_array(x)
    return {(z[0], z[1])} if z else set()


# -- the job of a submission --------------------------------------------------


@dataclass
class DaskJob:
    """One submission's Thaw job, kept by the scheduler plugin."""

    id: str
    master: str
    client: str
    submitted: float
    keys: set[Any]
    # Task key -> the files it reads; file -> the tasks that read it and have not run.
    reads: dict[Any, set[str]] = field(default_factory=dict)
    readers: dict[str, set[Any]] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    done: set[Any] = field(default_factory=set)
    tasks_dispatched: int = 0
    ended: bool = False

    def files(self) -> list[str]:
        return sorted(self.readers)


def _job_name(keys: Iterable[Any]) -> str:
    from dask.utils import key_split

    names = sorted({key_split(k) for k in keys})
    name = names[0] if names else "graph"
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:60] or "graph"
    return f"dask-{safe}-{uuid.uuid4().hex[:6]}"


class ThawSchedulerPlugin(SchedulerPlugin):
    """Scheduler plugin: one Thaw job per graph submission (see the module doc).

    ``master``: the Thaw master for inputs given by annotation without one
    (default :func:`thaw.client.default_master`); found ``thaw://`` paths name
    their own. ``lease``: seconds a job lives unless renewed (renewed every third
    of it while its keys are wanted). ``eviction``: "explicit" keeps each file
    until its readers ran (the default), "implicit" lets each block go as soon
    as it has been read once.
    """

    name = "thaw"

    def __init__(self, master: str | None = None, *, lease: float = 30.0, eviction: str = "explicit") -> None:
        if eviction not in ("explicit", "implicit"):
            raise ValueError(f"eviction {eviction!r}: explicit or implicit")
        if not lease > 0:
            raise ValueError("lease must be positive")
        self.master = master
        self.lease = lease
        self.eviction = eviction
        self.jobs: dict[str, DaskJob] = {}
        self._job_of_key: dict[Any, str] = {}
        self._clients: dict[str, Client] = {}
        self._actions: queue.Queue[tuple[str, DaskJob, list[str]] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.warnings: list[str] = []

    # Sent to the scheduler pickled: the settings travel, the state is made there.
    def __getstate__(self) -> dict[str, Any]:
        return {"master": self.master, "lease": self.lease, "eviction": self.eviction}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["master"], lease=state["lease"], eviction=state["eviction"])  # type: ignore[misc]

    # -- scheduler hooks (on the scheduler's event loop: never block) ---------

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="thaw-dask", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        for job in list(self.jobs.values()):
            self._end(job)
        self._stop.set()
        self._actions.put(None)
        if self._thread is not None:
            self._thread.join(timeout=10)

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
        reads: dict[Any, set[tuple[str, str]]] = {}
        for key in tasks:
            ts = scheduler.tasks.get(key)
            if ts is None or ts.run_spec is None:
                continue
            found: set[tuple[str, str]] = set()
            given = named.get(key) or (ts.annotations or {}).get(INPUTS_ANNOTATION)
            if given:
                for p in [given] if isinstance(given, str) else given:
                    url = str(p) if str(p).startswith("thaw://") else f"thaw://{p}"
                    found |= find_inputs(url, self._master())
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
            job = DaskJob(
                id=_job_name(keys or task_files),
                master=master,
                client=client,
                submitted=time.time(),
                keys=set(keys),
            )
            for key, files in task_files.items():
                job.reads[key] = files
                for f in files:
                    job.readers.setdefault(f, set()).add(key)
                ts = scheduler.tasks[key]
                ts.annotations = {**(ts.annotations or {}), JOB_ANNOTATION: job.id}
                self._job_of_key[key] = job.id
            for key in keys:
                self._job_of_key.setdefault(key, job.id)
            self.jobs[job.id] = job
            _log.info("graph of %s: job %s reads %d files", client, job.id, len(job.readers))
            self._actions.put(("migrate", job, job.files()))

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
            if finish == "processing":
                job.tasks_dispatched += 1
            elif start == "processing" or finish in ("forgotten", "erred"):
                self._task_done(job, key)
        if finish == "forgotten":
            self._job_of_key.pop(key, None)
            job.keys.discard(key)
            if not job.keys and not any(k in self.scheduler.tasks for k in job.reads):
                self._end(job)

    def _task_done(self, job: DaskJob, key: Any) -> None:
        files = job.reads.get(key)
        if files is None or key in job.done:
            return
        ts = self.scheduler.tasks.get(key)
        if ts is not None and ts.state not in ("memory", "erred", "forgotten"):
            return  # back to waiting (a worker died): it will read again
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

    # -- Thaw calls, on the plugin's own thread --------------------------------

    def _master(self) -> str:
        from .client import default_master

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
                next_renew = time.monotonic() + renew_every

    def _do(self, what: str, job: DaskJob, files: list[str]) -> None:
        from .errors import NotFound

        c = self._client(job.master)
        try:
            if what == "migrate":
                if job.ended:
                    return
                try:
                    c.migrate(files, job.id, eviction=self.eviction, lease=self.lease)
                except NotFound:
                    # Some input is gone (or never existed): migrate the rest; the
                    # task reading the missing one fails as it would without Thaw.
                    present = [f for f in files if c.exists(f)]
                    self._warn(f"job {job.id}: {len(files) - len(present)} input(s) not in Thaw")
                    if present:
                        c.migrate(present, job.id, eviction=self.eviction, lease=self.lease)
            elif what == "release":
                if not job.ended:
                    c.evict(job.id, files)
            elif what == "end":
                c.evict(job.id)
        except NotFound:
            pass  # the job is already gone (lease ran out, master restarted)
        except Exception as e:
            self._warn(f"job {job.id}: {what} failed ({e}); the graph runs on without it")

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
            }
            for j in list(self.jobs.values())
        ]


def install(client: Any, master: str | None = None, **options: Any) -> None:
    """Installs the plugin on ``client``'s scheduler (``thaw.dask.install(client)``).

    ``master`` defaults to the one this process would use (``THAW_MASTER``), so
    annotated inputs name the same cluster here and on the scheduler.
    """
    from .client import default_master

    client.register_plugin(ThawSchedulerPlugin(master or default_master(), **options))


def jobs(client: Any) -> list[dict[str, Any]]:
    """The plugin's live jobs, asked of ``client``'s scheduler."""

    def ask(dask_scheduler: Any) -> list[dict[str, Any]]:
        plugin = dask_scheduler.plugins.get(ThawSchedulerPlugin.name)
        return plugin.summary() if plugin is not None else []

    return client.run_on_scheduler(ask)  # type: ignore[no-any-return]


def dask_setup(scheduler: Any) -> None:
    """``dask scheduler --preload thaw.dask``: adds the plugin, configured by
    ``THAW_MASTER``, ``THAW_DASK_LEASE`` (seconds) and ``THAW_DASK_EVICTION``."""
    plugin = ThawSchedulerPlugin(
        os.environ.get("THAW_MASTER") or None,
        lease=float(os.environ.get("THAW_DASK_LEASE", "30")),
        eviction=os.environ.get("THAW_DASK_EVICTION", "explicit"),
    )
    scheduler.add_plugin(plugin)
