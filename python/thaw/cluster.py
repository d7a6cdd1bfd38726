"""``thaw.LocalCluster``: a master and N workers on this machine, from the
installed ``thaw`` binary, for notebooks, tests and laptops (like Dask's
``LocalCluster``).

The cluster runs as one child process (``thaw local``). It stops on ``close()``,
on leaving the ``with`` block (also on an error), at interpreter exit, and, as
the child watches its standard input, when this process dies in any way, even
by kill -9: no orphaned servers, no tmpfs left behind.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from . import _context
from . import client as _client
from .errors import ThawError


def find_binary() -> str:
    """The ``thaw`` binary: ``THAW_BIN``, else the one installed beside this
    Python (a venv's bin), else a build in this source tree, else ``PATH``."""
    env = os.environ.get("THAW_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise ThawError(f"THAW_BIN={env} is not an executable file")
        return env
    beside = Path(sys.executable).parent / "thaw"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    # A source tree (an editable install): the newest build.
    root = Path(__file__).resolve().parent.parent.parent
    builds = [root / "target" / p / "thaw" for p in ("release", "debug")]
    builds = [b for b in builds if b.is_file() and os.access(b, os.X_OK)]
    if builds:
        return str(max(builds, key=lambda b: b.stat().st_mtime))
    found = shutil.which("thaw")
    if found:
        return found
    raise ThawError(
        "cannot find the thaw binary: set THAW_BIN, or build it (cargo build --release -p thaw-cli) "
        "and put it on PATH"
    )


class LocalCluster:
    """A local Thaw cluster. ``ufs``: the under-store mounted at ``/``: a directory
    (files already there are readable; default a temporary directory, removed on
    close) or ``s3://BUCKET/PREFIX?endpoint=URL&region=NAME`` (credentials from
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, here or in ``env``: more
    environment for the cluster's processes). ``workers``: how many. Sizes take
    units ("2GiB") or bytes.

    ``master`` is its address; ``thaw.Client()`` with no address connects to the
    latest cluster started in this process.

    Migration: ``migration_policy`` "dyrs" (late binding to the replica expected
    to finish first), "ignem" (random replica, bound at once) or "none";
    ``priority`` "fifo" or "smallest-job-first" (default: smallest job first;
    "fifo" for the naive comparison policy);
    ``migration_buffer``: memory per worker for migrated blocks (default 80% of
    ``mem_capacity``); a migration that finds no room in it for
    ``migration_room_wait_ms`` (nothing freed meanwhile) fails, saying which
    jobs hold it. A full MEM tier evicts cached blocks (read into memory, or
    released by their jobs) by ``cache_policy`` (``replacement`` is its old
    name): "lru", "lfu", "cava" (CAVA, section IV-B: lowest caching benefit, i.e.
    reads in the last ``cache_window`` x the highest cache affinity of their
    applications; a read's fill not worth its victims is dropped) or "ca"
    (CA-Only: by affinity alone); blocks a job still expects and blocks with
    no other copy stay. Affinities are classified from measured figures
    (``ca_cpu_threshold`` in cores, ``ca_write_threshold`` in bytes per
    second; "auto": the mean of the applications measured in the last ten
    minutes).

    Checkpoints (``async-through`` writes, persisted in the background,
    Tachyon, section 2.7): ``checkpoint_order`` "newest" (the most recently written
    file first) or "creation"; ``checkpoint_bandwidth`` caps each worker's
    copies to the under-store (bytes per second, e.g. "200MiB"; default none
    beyond the idle I/O class they run in). Files lost before their checkpoint
    are rebuilt from lineage (:mod:`thaw.lineage`): ``recompute`` "proactive"
    (as soon as the loss is seen), "reactive" (when read) or "off";
    ``recompute_attempts`` tries of a failing step before it is given up on.

    For evaluations, ``device_model`` puts an emulated device in front of every
    worker's DISK-tier and under-store reads, e.g.
    ``"disk=40MiB/s,ufs=20MiB/s,penalty=0.3"`` (slow, and slower still under
    concurrent streams, as the papers' hard disks); ``worker_device_models``
    gives worker ``i`` (numbered from 1, as :meth:`Client.status` shows it) its
    own instead. :meth:`Client.interfere` adds
    synthetic load.

    ``metrics_port``: serve Prometheus metrics at ``/metrics``, the master on
    this port and worker ``i`` (from 1) on the port + ``i`` (0: free ports); the
    addresses are in :attr:`metrics` ("master", "worker 1", ...). Default none.

    ``writer_lease_ms``: an unfinished file whose writer (a process killed
    mid-write) has not renewed its lease for this long is deleted, with its
    blocks; live writers renew theirs in the background.

    ``masters``: 1, or a group of highly available masters over a replicated
    journal (3 survive the loss of one); :attr:`master` then names them all
    (``a,b,c``), and clients follow whichever leads.

    ``web_port``: the master serves its web dashboard (workers, jobs, files,
    migration events) on this port (0: a free one); its URL is in
    :attr:`dashboard`. Default none.

    ``s3_port``: serve S3 (``thaw gateway``) on this port (0: a free one):
    buckets are top-level directories; its endpoint URL is in :attr:`s3`
    (``https://`` with ``tls``). Without ``secret_file``, requests are
    signed with access key ``thaw`` and secret key ``thawsecret`` or
    unsigned; with it, signed with S3 keys of the cluster's users (``thaw
    auth s3-key create``). Default none.

    ``state_dir``: keep the journal (the namespace) and the DISK tiers in this
    directory, made if missing, after the cluster stops: a later cluster given
    the same ``state_dir`` starts from them. Default: in the scratch space, so
    each cluster starts empty.
    """

    def __init__(
        self,
        ufs: str | os.PathLike[str] | None = None,
        workers: int = 1,
        *,
        mem_capacity: int | str = "1GiB",
        disk_capacity: int | str = "4GiB",
        block_size: int | str = "64MiB",
        port: int = 0,
        mem_root: str | os.PathLike[str] = "/dev/shm",
        heartbeat_ms: int = 500,
        worker_timeout_ms: int = 5000,
        writer_lease_ms: int = 60_000,
        binary: str | None = None,
        startup_timeout: float = 60.0,
        migration_policy: str = "dyrs",
        priority: str | None = None,
        migration_buffer: int | str | None = None,
        implicit_eviction_delay_ms: int = 2000,
        migration_room_wait_ms: int = 5000,
        replacement: str | None = None,
        cache_policy: str = "lru",
        cache_window: str | float = "10m",
        ca_cpu_threshold: float | str = "auto",
        ca_write_threshold: int | str = "auto",
        device_model: str | None = None,
        worker_device_models: dict[int, str] | None = None,
        checkpoint_bandwidth: int | str | None = None,
        checkpoint_order: str = "newest",
        recompute: str = "proactive",
        recompute_attempts: int = 3,
        env: dict[str, str] | None = None,
        metrics_port: int | None = None,
        web_port: int | None = None,
        s3_port: int | None = None,
        secret_file: str | os.PathLike[str] | None = None,
        tls: bool = False,
        masters: int = 1,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        if masters < 1:
            raise ValueError("masters must be at least 1")
        binary = binary or find_binary()
        self.workers = workers
        self.master = ""
        #: Where each part serves Prometheus metrics (host:port), by name.
        self.metrics: dict[str, str] = {}
        self._metrics_wanted = 0 if metrics_port is None else workers + 1
        #: The web dashboard's URL (``http://host:port/``), if asked for.
        self.dashboard: str | None = None
        self._dashboard_wanted = web_port is not None
        #: The S3 gateway's endpoint URL (``http://host:port``), if asked for.
        self.s3: str | None = None
        self._s3_wanted = s3_port is not None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        # Only the process that started the cluster may stop it (a forked child
        # inherits this object, and its exit must not take the cluster down).
        self._owner = os.getpid()
        # Scratch space: state, log, and the under-store when none is given. The
        # cluster removes it when it stops, even if this process was killed.
        self._tmp = tempfile.mkdtemp(prefix="thaw-cluster-")
        if isinstance(ufs, str) and ufs.startswith(("fs://", "file://")):
            ufs = ufs.split("://", 1)[1]
        if isinstance(ufs, str) and "://" in ufs:
            self.ufs = ufs  # an object store's URI, as it is
        else:
            self.ufs = str(Path(self._tmp, "ufs") if ufs is None else Path(ufs).resolve())
        self._env = None if env is None else {**os.environ, **env}
        #: The cluster secret (security on): clients of this process use it
        #: unless the environment names credentials; others need a token.
        self.secret_file = None if secret_file is None else os.fspath(secret_file)
        #: With ``tls=True``: the cluster's CA (``thaw auth certs`` made it and
        #: a certificate for this host); clients of this process trust it,
        #: others need ``THAW_TLS_CA``.
        self.tls_ca: str | None = None
        self.log_path = str(Path(self._tmp, "cluster.log"))
        cmd = [
            binary,
            "local",
            "--ufs", self.ufs,
            "--workers", str(workers),
            "--masters", str(masters),
            "--port", str(port),
            "--mem-capacity", str(mem_capacity),
            "--disk-capacity", str(disk_capacity),
            "--block-size", str(block_size),
            "--mem-root", os.fspath(mem_root),
            "--state-dir", str(Path(self._tmp, "state") if state_dir is None else Path(state_dir).resolve()),
            "--heartbeat-ms", str(heartbeat_ms),
            "--worker-timeout-ms", str(worker_timeout_ms),
            "--writer-lease-ms", str(writer_lease_ms),
            "--exit-with-stdin",
            "--remove-on-exit", self._tmp,
            "--migration-policy", migration_policy,
            "--implicit-eviction-delay-ms", str(implicit_eviction_delay_ms),
            "--migration-room-wait-ms", str(migration_room_wait_ms),
            "--cache-policy", replacement or cache_policy,
            "--cache-window", f"{cache_window}s" if isinstance(cache_window, (int, float)) else cache_window,
            "--ca-cpu-threshold", str(ca_cpu_threshold),
            "--ca-write-threshold", str(ca_write_threshold),
            "--checkpoint-order", checkpoint_order,
            "--recompute", recompute,
            "--recompute-attempts", str(recompute_attempts),
        ]  # fmt: skip
        if checkpoint_bandwidth is not None:
            cmd += ["--checkpoint-bandwidth", str(checkpoint_bandwidth)]
        if priority is not None:
            cmd += ["--priority", priority]
        if migration_buffer is not None:
            cmd += ["--migration-buffer", str(migration_buffer)]
        if device_model is not None:
            cmd += ["--device-model", device_model]
        if metrics_port is not None:
            cmd += ["--metrics-port", str(metrics_port)]
        if web_port is not None:
            cmd += ["--web-port", str(web_port)]
        if s3_port is not None:
            cmd += ["--s3-port", str(s3_port)]
        if self.secret_file is not None:
            cmd += ["--secret-file", self.secret_file]
        if tls:
            certs = Path(self._tmp, "tls")
            hosts = ",".join(["127.0.0.1", "localhost", socket.gethostname()])
            subprocess.run(
                [binary, "auth", "certs", str(certs), "--hosts", hosts], check=True, capture_output=True
            )
            self.tls_ca = str(certs / "ca.pem")
            cmd += ["--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server-key.pem")]
            cmd += ["--tls-ca", self.tls_ca]
        for index, spec in sorted((worker_device_models or {}).items()):
            cmd += ["--worker-device-model", f"{index}:{spec}"]
        try:
            self._start(cmd, startup_timeout)
        except BaseException:
            self.close()
            raise

    def _start(self, cmd: list[str], timeout: float) -> None:
        # Kept open: the log stays readable through this handle after the
        # cluster has removed its directory.
        self._log = open(self.log_path, "w+b")  # noqa: SIM115
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self._env,
            # Ctrl-C in a terminal reaches Python, which stops the cluster in
            # order; the child does not race it.
            start_new_session=True,
        )
        _context.clusters.append(self)
        _running.add(self)
        deadline = time.monotonic() + timeout
        while not self.master:
            self._check_alive()
            for line in self._log_text().splitlines():
                if line.startswith("thaw local: master at "):
                    self.master = line.removeprefix("thaw local: master at ").split(";")[0].strip()
            if time.monotonic() > deadline:
                raise ThawError(f"the cluster did not start within {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(0.02)
        c = _client.Client(self.master)
        while True:
            self._check_alive()
            # "thaw local: worker 1 metrics listening on ADDR", after the master line.
            for line in self._log_text().splitlines():
                who, sep, addr = line.removeprefix("thaw local: ").partition(" metrics listening on ")
                if sep and line.startswith("thaw local: "):
                    self.metrics[who] = addr.strip()
                if line.startswith("thaw local: dashboard at "):
                    self.dashboard = line.removeprefix("thaw local: dashboard at ").strip()
                if line.startswith("thaw local: S3 gateway at "):
                    self.s3 = line.removeprefix("thaw local: S3 gateway at ").split()[0]
            try:
                alive = [w for w in c.status()["workers"] if w["alive"]]
                addresses_known = (
                    len(self.metrics) >= self._metrics_wanted
                    and (self.dashboard is not None or not self._dashboard_wanted)
                    and (self.s3 is not None or not self._s3_wanted)
                )
                if len(alive) >= self.workers and addresses_known:
                    return
            except ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise ThawError(f"workers did not register within {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise ThawError(f"the cluster exited with status {self._proc.returncode}:\n{self.log_tail()}")

    def _log_text(self) -> str:
        if self._log is None or self._log.closed:
            return ""
        size = os.fstat(self._log.fileno()).st_size
        return os.pread(self._log.fileno(), size, 0).decode(errors="replace")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the cluster's log (also at :attr:`log_path` while
        it runs)."""
        return "\n".join(self._log_text().splitlines()[-lines:])

    @property
    def pid(self) -> int | None:
        """The process id of the cluster (``thaw local``), while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return os.getpid() == self._owner and self._proc is not None and self._proc.poll() is None

    def client(self, job_id: str | None = None) -> _client.Client:
        return _client.Client(self.master, job_id)

    def status(self) -> dict[str, Any]:
        return self.client().status()

    def close(self, timeout: float = 15.0) -> None:
        """Stops the cluster (SIGTERM, then SIGKILL after ``timeout``) and removes
        its state, and the under-store if it made one. Idempotent. In a process
        forked from the one that started it, only forgets it."""
        if self in _context.clusters:
            _context.clusters.remove(self)
        _running.discard(self)
        if os.getpid() != self._owner:
            return
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdin is not None:
                proc.stdin.close()
        if self._log is not None:
            self._log.close()
        # The temporary directory holds state and log, and the under-store only
        # when this cluster made it.
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalCluster(master={self.master!r}, workers={self.workers}, ufs={self.ufs!r}, {state})"


_running: set[LocalCluster] = set()


@atexit.register
def _stop_all() -> None:
    for c in list(_running):
        c.close()
