"""The Python client: metadata calls, security, jobs and migration, lineage,
file objects, put/get, cluster status.

All I/O runs in the Rust client with the GIL released. Where a ``Client()``
with no address connects and which job a call carries are in
:mod:`thaw._context`; the shared native clients in :mod:`thaw._connect`; the
file objects (:class:`ThawFile`, :class:`ThawWriter`) in :mod:`thaw.files`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from . import _native, errors
from ._connect import _SETTINGS, _native_client
from ._context import DEFAULT_MASTER, current_job_id, current_recovery, current_step_master, default_master
from ._progress import Progress
from .errors import InvalidArgument
from .files import ThawFile, ThawWriter

# Importable from here, where they were first defined.
__all__ = [
    "DEFAULT_MASTER",
    "Client",
    "ThawFile",
    "ThawWriter",
    "current_step_master",
    "default_master",
]


class Client:
    """A handle on a Thaw cluster.

    ``master``: host:port (see :func:`default_master`). ``job_id``: the job id
    carried by this client's reads and writes; without one, the enclosing
    :func:`thaw.job` names them (else ``THAW_JOB_ID``). ``host``/``rack``/``worker``
    say where this client runs, for locality (default: ``THAW_HOST`` or the host
    name, ``THAW_RACK``, ``THAW_WORKER``). ``short_circuit=False`` never reads block
    files directly; ``read_cache`` ("mem", "disk", "none") is where a read of a
    cold block leaves it. On a cluster with a secret, ``token`` (from
    :meth:`issue_token` or ``thaw auth token``) or ``secret_file`` (acting as
    ``THAW_USER`` or the OS user) prove who calls; by default the
    environment's ``THAW_TOKEN``, ``THAW_TOKEN_FILE`` or ``THAW_SECRET_FILE``,
    or the secret of a :class:`~thaw.LocalCluster` this process started.
    ``tls_ca``: the CA to trust on a cluster serving TLS (default
    ``THAW_TLS_CA``, or the CA of a ``LocalCluster(tls=True)`` of this process).
    """

    def __init__(
        self,
        master: str | None = None,
        job_id: str | None = None,
        *,
        host: str | None = None,
        rack: str | None = None,
        worker: str | None = None,
        short_circuit: bool | None = None,
        read_cache: str | None = None,
        token: str | None = None,
        secret_file: str | os.PathLike[str] | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
    ) -> None:
        self.master = master or default_master()
        secret = None if secret_file is None else os.fspath(secret_file)
        ca = None if tls_ca is None else os.fspath(tls_ca)
        self._settings = (host, rack, worker, short_circuit, read_cache, token, secret, ca)
        self._job_id = job_id
        self._native_base()  # fail now on a bad setting

    def __repr__(self) -> str:
        return f"thaw.Client(master={self.master!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        kwargs = dict(zip(_SETTINGS, self._settings, strict=True))
        return (_make_client, (self.master, self._job_id, kwargs))

    def _native_base(self) -> _native.NativeClient:
        return _native_client(self.master, self._settings)

    @property
    def job_id(self) -> str:
        """The job id a call made now carries: the client's own if it was given
        one, else the enclosing :func:`thaw.job`'s, else ``THAW_JOB_ID``."""
        return self._job_id or current_job_id() or self._native_base().job_id

    def native(self, job_id: str | None = None) -> _native.NativeClient:
        """The native client carrying ``job_id`` (default: :attr:`job_id`): a
        cheap view sharing the cluster's connections. Inside a rerun
        (:class:`thaw._context.recovering`) its writes rebuild the rerun's lost
        outputs."""
        native = self._native_base().with_job(job_id if job_id is not None else self.job_id)
        recovery = current_recovery.get()
        return native.with_recovery(recovery) if recovery else native

    # -- metadata -------------------------------------------------------------

    def stat(self, path: str, blocks: bool = False) -> dict[str, Any]:
        """A file's or directory's status; with ``blocks``, each block's replicas
        (worker address, host, rack, tier, and locality to this client)."""
        return self.native().stat(path, blocks)

    def ls(self, path: str = "/", blocks: bool = False) -> list[dict[str, Any]]:
        """A directory's entries (for a file, its own status); with ``blocks``, each
        file's blocks and their replicas."""
        return self.native().list(path, blocks)

    def iter_ls(self, path: str = "/", blocks: bool = False, page: int = 1000) -> Iterator[dict[str, Any]]:
        """A directory's entries in name order, fetched ``page`` at a time as
        the loop goes (a directory of millions of entries is never held
        whole); a directory deleted midway raises ``FileNotFoundError``."""
        after = ""
        while True:
            entries, more = self.native().list_page(path, blocks, after, page)
            yield from entries
            if not (more and entries):
                return
            after = entries[-1]["name"]

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def mkdir(self, path: str, parents: bool = False, exist_ok: bool = False) -> dict[str, Any]:
        try:
            return self.native().mkdir(path, parents, exist_ok)
        except errors.NotFound as e:
            if parents:
                raise
            raise errors.NotFound(f"{e} (pass parents=True to create the parents too)") from None

    def rm(self, path: str, recursive: bool = False) -> None:
        try:
            self.native().delete(path, recursive)
        except errors.DirectoryNotEmpty as e:
            raise errors.DirectoryNotEmpty(
                f"{e} (pass recursive=True to delete it with everything in it)"
            ) from None

    def mv(self, src: str, dst: str) -> dict[str, Any]:
        return self.native().rename(src, dst)

    # -- security (a cluster with a secret) -------------------------------------

    def chmod(self, path: str, mode: int) -> dict[str, Any]:
        """Sets an entry's permission bits (e.g. ``0o640``): its owner or the
        superuser."""
        return self.native().set_attributes(path, mode=mode)

    def chown(self, path: str, owner: str | None = None, group: str | None = None) -> dict[str, Any]:
        """Gives an entry to ``owner`` (the superuser only) and/or ``group`` (its
        owner, to one of its own groups)."""
        return self.native().set_attributes(path, owner=owner, group=group)

    def whoami(self) -> dict[str, Any]:
        """Whom the master takes this client for: ``user``, ``groups``,
        ``superuser``, and ``security`` (whether it checks at all)."""
        user, groups, superuser, security = self.native().who_am_i()
        return {"user": user, "groups": groups, "superuser": superuser, "security": security}

    def issue_token(self, user: str = "", groups: list[str] | None = None, hours: float = 0) -> str:
        """A token from the master, for ``THAW_TOKEN`` or ``Client(token=...)``:
        this client's own (``user`` empty) or, for a superuser, ``user``'s in
        ``groups``. ``hours`` 0: the master's default lifetime (24 h)."""
        token, _ = self.native().issue_token(user, groups or [], int(hours * 3_600_000))
        return token

    def status(self) -> dict[str, Any]:
        """The cluster: under-store, file and in-memory block counts, and each
        worker's address, host, rack, liveness, tiers (used/capacity), per-job
        counters and emulated devices (as of its last heartbeat)."""
        return self.native().status()

    def interfere(
        self, worker: int | str, device: str = "disk", on: bool = True, streams: int = 1
    ) -> dict[str, Any]:
        """Starts (``on``) or stops synthetic interference on a worker's emulated
        ``device`` ("disk": its DISK tier; "ufs": the under-store as it reads it):
        ``streams`` readers that keep the device busy, as the dd jobs of the DYRS
        evaluation. For evaluations only: the worker must run with a device model
        (``LocalCluster(device_model=...)``). ``worker``: its id (as in
        :meth:`status`) or its data address. Returns the worker's tiers, jobs and
        devices, asked of the worker."""
        if on and streams < 1:
            raise InvalidArgument("streams must be at least 1 with on=True (on=False stops the interference)")
        if isinstance(worker, int):
            workers = self.status()["workers"]
            match = [w["address"] for w in workers if w["id"] == worker]
            if not match:
                known = ", ".join(str(w["id"]) for w in workers) or "none"
                raise InvalidArgument(f"no worker with id {worker} (workers: {known})")
            address = match[0]
        else:
            address = worker
        return self.native().device_control(address, device, streams if on else 0)

    def job_stats(self, job_id: str | None = None) -> dict[str, Any]:
        """One job's accesses summed over the live workers, asked of each worker
        now (``workers`` has them per worker address): reads, bytes_read (of
        them bytes_from_memory, found in memory, and bytes_cold, from the
        under-store or DISK), writes, bytes_written, short_circuit_opens."""
        job = job_id if job_id is not None else self.job_id
        keys = (
            "reads",
            "bytes_read",
            "bytes_from_memory",
            "bytes_cold",
            "writes",
            "bytes_written",
            "short_circuit_opens",
        )
        total: dict[str, Any] = {"job_id": job, "workers": {}, **dict.fromkeys(keys, 0)}
        for w in self.status()["workers"]:
            if not w["alive"]:
                continue
            for j in self.native().worker_stats(w["address"])["jobs"]:
                if j["job_id"] == job:
                    total["workers"][w["address"]] = {k: j[k] for k in keys}
                    for k in keys:
                        total[k] += j[k]
        return total

    # -- jobs and migration ---------------------------------------------------

    def migrate(
        self,
        paths: str | list[str],
        job: str | None = None,
        *,
        eviction: str = "explicit",
        lease: float | None = None,
        origin: str | None = None,
    ) -> dict[str, Any]:
        """Tells the master that ``job`` (default: :attr:`job_id`) will read
        ``paths`` (files or directories, recursively), so their cold blocks move
        into memory before it does. Returns at once with the job's progress.

        ``eviction="implicit"``: a block leaves memory once the job has read it;
        ``"explicit"``: on :meth:`evict`. The job lives ``lease`` seconds (default:
        the master's) unless renewed (:meth:`renew`; :func:`thaw.job` does it).
        ``origin``: who submits the job, free text shown with it (``thaw jobs``,
        :meth:`jobs`), at most 200 bytes without control characters; None or
        empty keeps the origin the job has.
        """
        job = job or self.job_id
        if not job:
            raise ValueError("migrate needs a job id: pass job=, or use thaw.job(...)")
        paths = [paths] if isinstance(paths, str) else list(paths)
        if lease is not None and not lease > 0:
            raise ValueError(f"lease must be a positive number of seconds, not {lease!r}")
        lease_ms = 0 if lease is None else max(1, int(lease * 1000))
        return self.native(job).migrate(job, [_strip(p) for p in paths], eviction, lease_ms, origin or "")

    def report_tasks(
        self,
        job: str | None = None,
        *,
        tasks: int,
        placed: int,
        done: int,
        memory_local: int,
        inputs_in_memory: int,
        delay_ms_median: float = 0,
        delay_ms_p99: float = 0,
        delay_ms_max: float = 0,
    ) -> dict[str, Any]:
        """Records at the master how ``job``'s tasks that read its inputs went,
        shown with the job (``thaw jobs``, :meth:`jobs`): ``tasks`` of them,
        ``placed`` (launched on a worker), ``done``, ``memory_local`` (placed on a
        worker whose host held all their blocks in memory), ``inputs_in_memory``
        (placed when all their blocks were in memory somewhere), and the delay
        placed tasks paid waiting for a memory-local slot (ms, rounded).

        Absolute values: each report replaces the last (report again after a
        master restart, which forgets jobs). ``InvalidArgument`` if they do not
        add up (placed, done <= tasks; memory_local, inputs_in_memory <= placed;
        median <= p99 <= max); ``NotFound`` for a job the master does not know.
        Returns the job's progress, ``tasks`` included.
        """
        job = job or self.job_id
        if not job:
            raise ValueError("report_tasks needs a job id: pass job=, or use thaw.job(...)")
        counts = {
            "tasks": tasks,
            "placed": placed,
            "done": done,
            "memory_local": memory_local,
            "inputs_in_memory": inputs_in_memory,
        }
        for name, n in counts.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"{name} must be a count (an int >= 0), not {n!r}")
        delays = {
            "delay_ms_median": delay_ms_median,
            "delay_ms_p99": delay_ms_p99,
            "delay_ms_max": delay_ms_max,
        }
        ms: dict[str, int] = {}
        for name, d in delays.items():
            if isinstance(d, bool) or not isinstance(d, int | float) or not 0 <= d < float("inf"):
                raise ValueError(f"{name} must be a number of milliseconds >= 0, not {d!r}")
            ms[name] = round(d)
        return self.native(job).report_job_tasks(job, **counts, **ms)

    def evict(self, job: str | None = None, paths: str | list[str] | None = None) -> dict[str, Any] | None:
        """Releases ``job``'s blocks under ``paths`` from memory, or all of them
        (ending the job) when ``paths`` is None. Returns the job's progress if it
        goes on."""
        job = job or self.job_id
        if paths is None:
            return self.native(job).evict(job, [])
        paths = [paths] if isinstance(paths, str) else list(paths)
        if not paths:
            raise ValueError("evict of no paths: pass paths=None to release all of the job's blocks")
        return self.native(job).evict(job, [_strip(p) for p in paths])

    def renew(self, jobs: str | list[str]) -> list[str]:
        """Renews job leases; returns the ids the master does not know (it
        restarted, or the lease ran out), whose inputs must be migrated again."""
        return self.native().renew_leases([jobs] if isinstance(jobs, str) else list(jobs))

    def jobs(self) -> dict[str, Any]:
        """Every job with migration state: ``policy``, ``priority`` and ``jobs``,
        each with blocks pending, queued, in memory, read and failed, bytes,
        ``progress`` (0-1), ``origin`` (who submitted it; "" if nobody said),
        ``tasks`` (its submitter's latest :meth:`report_tasks` counters, or None),
        ``blocks_migrated``/``bytes_migrated`` (moved into memory for it) and
        ``read_bytes``/``read_bytes_from_memory`` (what its reads took). Jobs
        that ended lately (evicted, or their lease ran out: the master keeps the
        last 100 for 10 minutes) follow the live ones, with ``state`` "ended",
        ``ended_ms`` and ``end_reason``, as they stood when they ended."""
        return self.native().jobs()

    def cache_report(self, max_files: int = 100) -> dict[str, Any]:
        """The memory cache as the cache manager sees it (CAVA, section IV):
        ``workers`` (address, policy, capacity, cached_bytes, hits, misses,
        hit_ratio, evictions, drops, skipped), ``apps`` (job_id, name, class,
        affinity, source, cpu_util, write_rate, cached_fraction, probability,
        input_bytes, live) and ``files`` (path, length, cached_bytes,
        frequency, affinity, benefit; highest benefit first, at most
        ``max_files``)."""
        return self.native().cache_report(max_files)

    def report_app_usage(
        self,
        job: str | None = None,
        *,
        name: str = "",
        wall_seconds: float = 0.0,
        cpu_seconds: float = 0.0,
        tasks: int = 0,
        write_bytes: int = 0,
        inputs: list[str] | None = None,
        cache_affinity: float | None = None,
        ended: bool = False,
        reporter: str = "",
    ) -> dict[str, Any]:
        """Tells the master what application ``job``'s tasks did so far
        (absolute figures: each report replaces the last), from which it
        classifies the job's cache affinity; ``cache_affinity`` names it
        instead (taken at its word). Several processes may report figures of
        one job, each as its own ``reporter``: the master sums their latest.
        Returns how the cache manager sees the job. The Dask integration and
        :func:`thaw.job` report for their jobs."""
        if cache_affinity is not None and not 0.0 <= cache_affinity <= 1.0:
            raise ValueError(f"cache_affinity {cache_affinity} is outside [0, 1]")
        return self.native().report_app_usage(
            job or self.job_id,
            name,
            wall_seconds,
            cpu_seconds,
            tasks,
            write_bytes,
            list(inputs or []),
            cache_affinity,
            ended,
            reporter,
        )

    def job(self, job: str | None = None, *, ended: bool = False) -> dict[str, Any] | None:
        """One live job's migration progress, or None if it is not running
        (never migrated, evicted, or its lease ran out). ``ended=True``: a job
        that ended lately too, as it stood then (``state`` "ended")."""
        from .errors import NotFound

        try:
            info: dict[str, Any] = self.native().jobs(job or self.job_id)["jobs"][0]
        except NotFound:
            return None
        return info if ended or info["state"] != "ended" else None

    def wait_migrated(self, job: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Waits until no block of ``job`` is pending or queued (each is in
        memory, already read, or given up); returns its progress.
        ``TimeoutError`` after ``timeout`` seconds."""
        from .errors import NotFound

        job = job or self.job_id
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.job(job)
            if info is None:
                raise NotFound(f"no job {job!r} (never migrated, evicted, or its lease ran out)")
            if info["blocks_pending"] + info["blocks_queued"] == 0:
                return info
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job!r} still migrating after {timeout}s: {info}")
            # As `thaw migrate --wait`: longer for big jobs, whose progress the
            # master counts block by block under its lock (5 us a block, <= 1 s).
            time.sleep(min(1.0, max(0.05, info["blocks"] * 5e-6)))

    def migration_events(self, since: int = 0, limit: int = 0) -> dict[str, Any]:
        """The log of ended migrations from sequence number ``since`` on:
        ``events`` (block_id, worker_id, source, start_ms, end_ms, bytes,
        outcome, jobs: the jobs it was for) and ``next``, the ``since`` of the next call."""
        return self.native().migration_events(since, limit)

    # -- data -----------------------------------------------------------------

    def open(
        self,
        path: str,
        mode: str = "rb",
        *,
        write_type: str = "cache-through",
        block_size: int = 0,
        overwrite: bool | None = None,
        temporary: bool = False,
        length: int = 0,
    ) -> ThawFile | ThawWriter:
        """A binary file object. ``rb``: seekable reads. ``wb``: a new file (an
        existing one is replaced); ``xb``: a new file, failing if it exists.
        ``write_type``: must-cache, async-through (memory speed, persisted in the
        background), cache-through, through or replicated:N. ``temporary``
        (async-through): never persisted unless :meth:`persist` is called.
        ``length``: the file's length if known: a must-cache or async-through
        write then gets all the memory it needs at once, or fails at once."""
        if mode == "rb":
            return self._open_read(path)
        if mode in ("wb", "xb"):
            replace = (mode == "wb") if overwrite is None else overwrite
            native = self.native().create(path, write_type, block_size, replace, True, temporary, length)
            return ThawWriter(native)
        raise ValueError(
            f"mode {mode!r}: Thaw files are immutable once written; open them 'rb', 'wb' or 'xb'"
            " (text modes: through fsspec)"
        )

    def persist(self, path: str, *, wait: bool = True, timeout: float = 300.0) -> dict[str, Any]:
        """Writes a file to the under-store now: first in the master's checkpoint
        order (Tachyon, section 2.7). With ``wait``, returns once its ``persistence``
        is ``persisted``; raises if it is lost meanwhile or ``timeout`` seconds
        pass. A directory, or a file still being written, is an error."""
        return self.native().persist(path, wait, timeout)

    def recompute(
        self, path: str, *, wait: bool = True, retry: bool = False, timeout: float = 600.0
    ) -> dict[str, Any]:
        """Rebuilds a lost file from its lineage (Tachyon, section 2.6): the master
        reruns the steps that wrote it (and those of its lost inputs first).
        With ``wait``, returns once it is available again; raises if it cannot
        be rebuilt (no lineage, a step that fails or is not deterministic) or
        ``timeout`` seconds pass. ``retry``: even if its lineage failed before.
        A reader of a lost file does the same by itself."""
        return self.native().recompute(path, wait, retry, timeout)

    def _open_read(self, path: str) -> ThawFile:
        return ThawFile(self._native_reader(path))

    def _native_reader(self, path: str) -> _native.NativeReader:
        """Opens ``path``; a lost file with lineage is waited for until rebuilt.
        In a Dask task the wait gives the task's thread back to its worker
        first (see :mod:`thaw.dask.recompute`)."""
        if not _in_dask_task():
            return self.native().open(path)
        r = self.native().open(path, False)
        info = r.info()
        if not (info["lost"] and info["lineage_id"]):
            return r
        r.close()
        with _seceded():
            self.recompute(path, wait=True)
        return self.native().open(path)

    def cat(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """A file's bytes, or those in [start, end) (negative: from the end)."""
        r = self._native_reader(path)
        try:
            size = r.length
            s = 0 if start is None else (max(size + start, 0) if start < 0 else min(start, size))
            e = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
            return r.read_at(s, max(e - s, 0))
        finally:
            r.close()

    def write_bytes(
        self,
        path: str,
        data: bytes,
        *,
        write_type: str = "cache-through",
        overwrite: bool = True,
        temporary: bool = False,
    ) -> dict[str, Any]:
        """Writes a whole file; returns its status."""
        w = self.native().create(path, write_type, 0, overwrite, True, temporary, len(data))
        try:
            w.write(data)
        except BaseException:
            w.abort()
            raise
        return w.close()

    def put(
        self,
        local: str | os.PathLike[str],
        path: str,
        *,
        write_type: str = "cache-through",
        block_size: int = 0,
        overwrite: bool = False,
        progress: bool | None = None,
        temporary: bool = False,
    ) -> list[dict[str, Any]]:
        """Copies a local file, or a directory tree, into Thaw as ``cp -r``
        does (and ``thaw fs put``): to ``path``, or into it under its own name
        if ``path`` is a directory (or ends with ``/``).
        ``progress``: a tqdm bar (default: when stderr is a terminal)."""
        if path.endswith("/") or self._is_dir(path):
            path = f"{path.rstrip('/')}/{os.path.basename(os.path.abspath(os.fspath(local)))}"
        pairs = _local_tree(os.fspath(local), path)
        total = sum(os.path.getsize(lp) for lp, _ in pairs)
        out = []
        with Progress(total, f"put {os.fspath(local)}", progress, len(pairs)) as bar:
            for lp, rp in pairs:
                put = self.native().put_file
                out.append(put(lp, rp, write_type, block_size, overwrite, bar.update_fn, temporary))
        return out

    def get(self, path: str, local: str | os.PathLike[str], *, progress: bool | None = None) -> int:
        """Copies a Thaw file, or a directory tree, to ``local`` as ``cp -r``
        does (and ``thaw fs get``): to ``local``, or into it under its own name
        if ``local`` is a directory. Returns bytes copied. Each file lands
        whole or not at all."""
        local = os.fspath(local)
        name = self.stat(path)["path"].rstrip("/").rsplit("/", 1)[-1]
        if os.path.isdir(local) and name:
            local = os.path.join(local, name)
        pairs = list(self._remote_tree(path, local))
        total = sum(size for _, _, size in pairs)
        done = 0
        with Progress(total, f"get {path}", progress, len(pairs)) as bar:
            for rp, lp, _ in pairs:
                os.makedirs(os.path.dirname(lp) or ".", exist_ok=True)
                done += self.native().get_file(rp, lp, bar.update_fn)
        return done

    def _is_dir(self, path: str) -> bool:
        try:
            return bool(self.stat(path)["type"] == "directory")
        except (FileNotFoundError, NotADirectoryError):
            return False

    def _remote_tree(self, path: str, local: str) -> Iterator[tuple[str, str, int]]:
        info = self.stat(path)
        if info["type"] == "file":
            yield info["path"], local, info["length"]
            return
        os.makedirs(local, exist_ok=True)
        for e in self.ls(path):
            yield from self._remote_tree(e["path"], os.path.join(local, e["name"]))


def _in_dask_task() -> bool:
    """Whether this thread runs a Dask task (without importing Dask)."""
    worker = sys.modules.get("distributed.worker")
    return worker is not None and getattr(worker.thread_state, "key", None) is not None


@contextlib.contextmanager
def _seceded() -> Iterator[None]:
    """Gives this Dask task's thread back to its worker while the block runs: a
    task waiting for a rebuild must not hold the slot the rebuild needs
    (Tachyon, section 4; see :mod:`thaw.dask.recompute`)."""
    from distributed import rejoin, secede

    secede()
    try:
        yield
    finally:
        rejoin()


def _strip(path: str) -> str:
    """A path in the cluster: ``thaw://host:port/p`` and ``thaw:///p`` become ``/p``."""
    if path.startswith("thaw://"):
        rest = path[len("thaw://") :]
        return "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    return path


def _make_client(master: str, job_id: str | None, kwargs: dict[str, Any]) -> Client:
    return Client(master, job_id, **kwargs)


def _local_tree(local: str, path: str) -> list[tuple[str, str]]:
    if not os.path.isdir(local):
        return [(local, path)]
    pairs = []
    for root, dirs, files in os.walk(local):
        dirs.sort()
        rel = os.path.relpath(root, local)
        base = path.rstrip("/") if rel == "." else f"{path.rstrip('/')}/{rel}"
        pairs.extend((os.path.join(root, f), f"{base}/{f}") for f in sorted(files))
    return pairs
