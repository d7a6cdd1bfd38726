"""An emulated cluster on one machine: a Thaw master and N workers as separate
processes, each worker a "node" with its own host and rack label, its own
directories, a MEM tier and a DISK tier behind the device model (a hard disk:
bandwidth shared by concurrent streams with a penalty), and one Dask worker per
node with a fixed number of task slots.

By default every process listens on loopback. With ``ClusterSpec.network``
(``--network SPEC``) each node is an emulated host of its own
(:mod:`thaw_bench.netlab`): its Thaw worker, its Dask worker and its tasks run in
the node's network namespace bound to its address, the master in a node of its
own, the Dask scheduler and the harness in node ``driver``, and every byte
between nodes crosses the lab's shaped links. Several nodes may share a host
(``nodes_per_host``: VMs on one physical machine, CAVA, section III): their
Thaw workers carry the host's name as ``--host``, as the lab places them.

The Thaw processes restart for every configuration (a new migration policy, an
empty MEM tier) while the DISK tiers and the master's journal stay: input data
is placed once, with 3 replicas on DISK tiers as HDFS would, and every
configuration of an experiment reads the very same blocks. The harness runs only
on this emulated cluster: it restarts the master with each configuration's
migration policy, emulates the nodes' disks and drops their page cache, none of
which it could do to a cluster already running elsewhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from thaw.client import Client
from thaw.cluster import find_binary
from thaw.errors import ThawError

from .netlab import NetLab, Place, driver_lab

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL when the harness dies (even by
    kill -9), so no emulated node outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


#: Where the master runs on a network: a host of its own.
MASTER_PLACE = Place("master", "master", "rack0")


@dataclass
class NodeSpec:
    """One emulated node. ``disk``: the DISK tier's bandwidth ("20MiB/s");
    ``penalty``: the throughput lost per extra concurrent stream."""

    name: str
    rack: str
    disk: str
    penalty: float = 0.3
    #: The under-store as this node reaches it ("40MiB/s"), if emulated too.
    ufs: str | None = None
    #: The machine it runs on (its Thaw worker's ``--host``; on a network, the
    #: lab's host). Default: a machine of its own, named after the node.
    host: str = ""

    def __post_init__(self) -> None:
        self.host = self.host or self.name

    def place(self) -> Place:
        return Place(self.name, self.host, self.rack)

    def device_model(self) -> str:
        ufs = f",ufs={self.ufs}" if self.ufs else ""
        return f"disk={self.disk}{ufs},penalty={self.penalty}"


@dataclass
class ClusterSpec:
    """The emulated cluster. Sizes take units ("512MiB") or bytes.

    Defaults follow the scaling in BENCHMARKS.md: 7 nodes on 2 racks like the
    papers' clusters, 2 task slots per node, 1 MiB blocks on a 12 MiB/s disk
    per node (a block takes ~85 ms from disk against a few ms from memory,
    about the papers' ratio for a map task), heartbeats every 200 ms (a few
    block times, as the papers' 3 s heartbeats over 0.5-1 s block reads).
    """

    nodes: int = 7
    racks: int = 2
    slots: int = 2
    disk: str = "12MiB/s"
    penalty: float = 0.3
    block_size: str = "1MiB"
    mem_capacity: str = "512MiB"
    disk_capacity: str = "8GiB"
    heartbeat_ms: int = 200
    worker_timeout_ms: int = 5000
    plan_interval_ms: int = 50
    implicit_eviction_delay_ms: int = 2000
    #: How migrations read the disks: "idle" (only while no job reads them) or
    #: "normal" (a stream like the jobs', as in the papers).
    migration_io: str = "idle"
    node_disks: dict[int, str] = field(default_factory=dict)
    #: Each node's link to the under-store, emulated ("40MiB/s"; default: not).
    ufs: str | None = None
    #: More `thaw master` flags, and `thaw worker` flags.
    master_args: list[str] = field(default_factory=list)
    worker_args: list[str] = field(default_factory=list)
    #: Emulated hosts with a network (``thaw netlab``'s SPEC, e.g.
    #: "host=100MiB/s,rack=200MiB/s"; "" or "none": unshaped). None: loopback.
    network: str | None = None
    #: Nodes per machine (VMs on one host): node i is on host i // k, hosts
    #: on racks in turn. 1: each node its own host, named after it.
    nodes_per_host: int = 1
    #: Whether tasks read the block files of a worker on their host directly
    #: (short-circuit). Off, every read goes through a worker's data service,
    #: as between VMs, which share no files.
    short_circuit: bool = True

    def node(self, i: int) -> NodeSpec:
        k = max(1, self.nodes_per_host)
        h = i // k
        return NodeSpec(
            f"node{i}",
            f"rack{h % max(1, self.racks)}",
            self.node_disks.get(i, self.disk),
            self.penalty,
            self.ufs,
            f"node{i}" if k == 1 else f"host{h}",
        )


class EmulatedCluster:
    """The Thaw half of an emulated cluster (see the module doc). Use
    :meth:`start` with a policy, :meth:`stop`, and :meth:`start` again with
    another; ``close`` removes everything."""

    def __init__(
        self, spec: ClusterSpec, root: str | os.PathLike[str] | None = None, binary: str | None = None
    ):
        self.spec = spec
        self.binary = binary or find_binary()
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="thaw-bench-") if root is None else root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.mem_root = Path(tempfile.mkdtemp(prefix="thaw-bench-mem-", dir="/dev/shm"))
        (self.root / "ufs").mkdir(exist_ok=True)
        self.master = ""
        self.policy = ""
        self.priority: str | None = None
        self.migration_io = spec.migration_io
        self._procs: list[tuple[str, subprocess.Popen[bytes], BinaryIO]] = []
        self.nodes = [spec.node(i) for i in range(spec.nodes)]
        #: Node name -> its Thaw worker's data address (this start's).
        self.addresses: dict[str, str] = {}
        self.lab: NetLab | None = None
        if spec.network is not None:
            self.lab = driver_lab([MASTER_PLACE, *(n.place() for n in self.nodes)], spec.network, self.binary)

    # -- processes --------------------------------------------------------------

    def bind(self, node: str) -> str:
        """The address servers of ``node`` listen on: its lab address, or loopback."""
        return self.lab.node(node).address if self.lab else "127.0.0.1"

    def on_node(self, node: str, argv: list[str]) -> list[str]:
        """``argv`` run on ``node`` (in its namespace on a network)."""
        return self.lab.argv(node, argv) if self.lab else argv

    def _spawn(self, name: str, args: list[str]) -> tuple[subprocess.Popen[bytes], BinaryIO]:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ, THAW_LOG=os.environ.get("THAW_LOG", "warn"))
        proc = subprocess.Popen(
            self.on_node(name, [self.binary, *args]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent,  # only prctl, before exec
        )
        self._procs.append((name, proc, log))
        return proc, log

    def _address(self, name: str, prefix: str, timeout: float) -> str:
        path = self.root / f"{name}.log"
        deadline = time.monotonic() + timeout
        proc = next(p for n, p, _ in self._procs if n == name)
        while True:
            text = path.read_text(errors="replace")
            lines = [ln for ln in text.splitlines() if ln.startswith(prefix)]
            if lines:
                return lines[-1].removeprefix(prefix).strip()
            if proc.poll() is not None:
                raise ThawError(f"{name} exited with status {proc.returncode}:\n{text[-2000:]}")
            if time.monotonic() > deadline:
                raise ThawError(f"{name} did not start within {timeout:.0f}s:\n{text[-2000:]}")
            time.sleep(0.02)

    def start(
        self,
        policy: str = "dyrs",
        priority: str | None = None,
        timeout: float = 60.0,
        migration_io: str | None = None,
    ) -> None:
        """Starts the master with ``policy``/``priority`` and every node's worker
        (with ``migration_io``, default the spec's), and waits until every
        worker has registered and reported its DISK blocks."""
        if self._procs:
            self.stop()
        s = self.spec
        for log in self.root.glob("*.log"):
            log.write_bytes(b"")
        args = [
            "master",
            "--ufs", str(self.root / "ufs"),
            "--journal-dir", str(self.root / "journal"),
            "--port", "0",
            "--bind", self.bind("master"),
            "--block-size", s.block_size,
            "--heartbeat-ms", str(s.heartbeat_ms),
            "--worker-timeout-ms", str(s.worker_timeout_ms),
            "--migration-policy", policy,
            "--plan-interval-ms", str(s.plan_interval_ms),
        ]  # fmt: skip
        if priority:
            args += ["--priority", priority]
        self._spawn("master", [*args, *s.master_args])
        self.master = self._address("master", "thaw master listening on ", timeout)
        self.policy, self.priority = policy, priority
        self.migration_io = migration_io or s.migration_io
        for node in self.nodes:
            (self.root / node.name).mkdir(exist_ok=True)
            self._spawn(
                node.name,
                [
                    "worker",
                    "--master", self.master,
                    "--bind", self.bind(node.name),
                    "--host", node.host,
                    "--rack", node.rack,
                    "--mem-dir", str(self.mem_root / node.name),
                    "--mem-capacity", s.mem_capacity,
                    "--disk-dir", str(self.root / node.name / "disk"),
                    "--disk-capacity", s.disk_capacity,
                    "--device-model", node.device_model(),
                    "--implicit-eviction-delay-ms", str(s.implicit_eviction_delay_ms),
                    "--migration-io", self.migration_io,
                    *s.worker_args,
                ],
            )  # fmt: skip
        self.addresses = {
            node.name: self._address(node.name, "thaw worker listening on ", timeout) for node in self.nodes
        }
        self._wait_registered(timeout)

    def _wait_registered(self, timeout: float) -> None:
        c = self.client()
        want = sum(len(list((self.root / n.name / "disk" / "blocks").glob("*"))) for n in self.nodes)
        deadline = time.monotonic() + timeout
        while True:
            try:
                workers = [w for w in c.status()["workers"] if w["alive"]]
                held = sum(t["blocks"] for w in workers for t in w["tiers"] if t["tier"] == "DISK")
                if len(workers) >= len(self.nodes) and held >= want:
                    return
            except (ConnectionError, ThawError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise ThawError(f"the emulated cluster did not come up within {timeout:.0f}s")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stops every process (SIGTERM, then SIGKILL). DISK tiers and the journal stay."""
        for _, proc, _ in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, log in self._procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
        self._procs.clear()
        self.master = ""

    def kill_node(self, name: str) -> None:
        """kill -9 of a node's Thaw worker (a real crash: its memory is gone)."""
        for n, proc, _ in self._procs:
            if n == name and proc.poll() is None:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.mem_root, ignore_errors=True)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EmulatedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------------

    def client(self, job_id: str | None = None, host: str | None = None) -> Client:
        return Client(self.master, job_id, host=host, read_cache="none")

    def worker_ids(self) -> dict[str, int]:
        """Node name -> the master's worker id (they change on every start)."""
        node_of = {a: n for n, a in self.addresses.items()}
        return {
            node_of.get(w["address"], w["host"]): w["id"]
            for w in self.client().status()["workers"]
            if w["alive"]
        }

    def drop_pages(self) -> int:
        """Drops the page cache of every DISK-tier block file (posix_fadvise
        DONTNEED), so a cold run really reads the disk. Returns files dropped."""
        n = 0
        for f in self._disk_files():
            with contextlib.suppress(OSError):
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                finally:
                    os.close(fd)
        return n

    def _disk_files(self) -> Iterator[Path]:
        for node in self.nodes:
            yield from (self.root / node.name / "disk" / "blocks").glob("*")

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "nodes": [n.__dict__ for n in self.nodes],
            "spec": {k: v for k, v in self.spec.__dict__.items() if k != "node_disks"},
            "master": self.master,
        }
        if self.lab:
            out["network"] = {
                "lab": self.lab.id,
                "spec": self.lab.spec,
                "addresses": {n: self.lab.node(n).address for n in ["master", *(x.name for x in self.nodes)]},
                "netns": {n: x.netns for n, x in self.lab.nodes.items()},
            }
        return out
