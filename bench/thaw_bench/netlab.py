"""The harness's side of ``thaw netlab up``: emulated hosts with a network
between them (docs/evaluation.md, "the network model").

:class:`NetLab` starts ``thaw netlab up --network SPEC --node NAME@HOST/RACK
...`` with a pipe on its stdin, reads the one JSON line it prints when the
namespaces, bridges and shaped links are up, and gives each node's network
namespace and address. A process runs on a node through :meth:`NetLab.argv`
(``ip netns exec NS ...``); the harness's own process moves into a node with
:meth:`NetLab.enter` (setns(2)). The lab lives while the pipe is open:
:meth:`NetLab.close`, or the harness's exit by any means (kill -9 included,
the pipe then reaches EOF), makes ``thaw netlab`` kill every process left in
its namespaces and delete them, with every link, bridge and qdisc.

Only root can make namespaces; :class:`NetLabError` says so before anything
is tried.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import select
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

from thaw.cluster import find_binary

#: setns(2)'s flag for a network namespace.
CLONE_NEWNET = 0x40000000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class NetLabError(RuntimeError):
    """The lab could not be made (not root, bad spec, the command failed)."""


@dataclass(frozen=True)
class LabNode:
    """One emulated host's place: its namespace, its address, its host and rack."""

    name: str
    netns: str
    address: str
    host: str
    rack: str


@dataclass(frozen=True)
class Place:
    """Where a node goes: its physical host (shared by nodes that are VMs on one
    machine) and its rack."""

    name: str
    host: str
    rack: str

    def arg(self) -> str:
        for part in (self.name, self.host, self.rack):
            if not _NAME.match(part):
                raise NetLabError(f"bad node place {part!r}: letters, digits, '_', '.', '-' only")
        return f"{self.name}@{self.host}/{self.rack}"


def require_root() -> None:
    """Raises :class:`NetLabError` unless this process may make namespaces."""
    if os.geteuid() != 0:
        raise NetLabError(
            "--network needs root: the emulated hosts are network namespaces joined by veth "
            "links and bridges (`ip netns add`, `tc`), which only root may make. Run as root "
            "(CI does), or leave --network out to run every node on loopback."
        )


class NetLab:
    """A running ``thaw netlab up`` (a context manager): ``nodes`` maps each
    node's name to its :class:`LabNode` once started."""

    def __init__(
        self,
        places: list[Place],
        network: str = "",
        binary: str | None = None,
        timeout: float = 60.0,
    ):
        if not places:
            raise NetLabError("a network needs at least one node")
        names = [p.name for p in places]
        if len(set(names)) != len(names):
            raise NetLabError(f"node names repeat: {', '.join(names)}")
        self.places = places
        self.network = network
        self.binary = binary or find_binary()
        self.timeout = timeout
        self.id = ""
        self.spec: dict[str, Any] = {}
        self.nodes: dict[str, LabNode] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        #: The write end of the lab's stdin, a bare descriptor: no Python object
        #: owns it, so the interpreter's shutdown never closes it; the lab ends
        #: when this process has ended (or on close()), not while it is ending
        #: (the lab kills what is left in its namespaces, this process included).
        self._pipe = -1

    # -- life -------------------------------------------------------------------

    def start(self) -> NetLab:
        require_root()
        args = [self.binary, "netlab", "up", "--network", self.network or "none"]
        for p in self.places:
            args += ["--node", p.arg()]
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self._pipe = os.dup(self._proc.stdin.fileno())
        self._proc.stdin.close()
        line = self._ready_line(self._proc.stdout)
        try:
            doc = json.loads(line)
            self.id = str(doc["id"])
            self.spec = dict(doc.get("spec") or {})
            self.nodes = {
                name: LabNode(name, n["netns"], n["address"], n["host"], n["rack"])
                for name, n in doc["nodes"].items()
            }
        except (ValueError, KeyError, TypeError) as e:
            self.close()
            raise NetLabError(
                f"thaw netlab up printed what is not its ready line: {line[:500]!r} ({e})"
            ) from e
        missing = [p.name for p in self.places if p.name not in self.nodes]
        if missing:
            self.close()
            raise NetLabError(f"thaw netlab up made no namespace for {', '.join(missing)}")
        return self

    def _ready_line(self, out: IO[bytes]) -> str:
        assert self._proc is not None
        deadline = time.monotonic() + self.timeout
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise NetLabError(f"thaw netlab up was not ready within {self.timeout:.0f}s{self._why()}")
            ready, _, _ = select.select([out], [], [], min(left, 0.2))
            if not ready:
                continue
            chunk = os.read(out.fileno(), 65536)
            if not chunk:
                code = self._proc.wait()
                why = self._why()
                self.close()
                raise NetLabError(f"thaw netlab up exited with status {code} before it was ready{why}")
            buf += chunk
        return buf.split(b"\n", 1)[0].decode(errors="replace")

    def _why(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read()[-3000:].decode(errors="replace").strip()
        return f":\n{text}" if text else ""

    def close(self, timeout: float = 30.0) -> str:
        """Ends the lab (EOF on its stdin) and waits until its namespaces are
        gone. Returns what ``thaw netlab`` said on stderr. Safe to call twice."""
        proc, self._proc = self._proc, None
        said = ""
        if self._pipe >= 0:
            with contextlib.suppress(OSError):
                os.close(self._pipe)
            self._pipe = -1
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            said = self._why().lstrip(":\n")
            self._stderr.close()
            self._stderr = None
        return said

    def __enter__(self) -> NetLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The supervisor's process id while it runs."""
        return None if self._proc is None else self._proc.pid

    # -- running on a node ------------------------------------------------------

    def node(self, name: str) -> LabNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise NetLabError(f"no node {name!r} in this lab (nodes: {', '.join(self.nodes)})") from None

    def prefix(self, name: str) -> list[str]:
        """The argv prefix that runs a command on node ``name``."""
        return ["ip", "netns", "exec", self.node(name).netns]

    def argv(self, name: str, cmd: list[str]) -> list[str]:
        return [*self.prefix(name), *cmd]

    def enter(self, name: str) -> None:
        """Moves this process into node ``name``'s network namespace (setns(2)).
        It moves the calling thread only, and the threads made after it, so it
        must come before any other thread (a Dask client, a native Thaw
        client's runtime): with other Python threads running it refuses."""
        if threading.active_count() > 1:
            raise NetLabError(
                f"enter({name!r}) with {threading.active_count()} threads running: setns moves only the "
                "calling thread; move into the node before any client or thread starts"
            )
        enter_netns(self.node(name).netns)


#: The lab this process entered (see :func:`driver_lab`). Process-wide, as the
#: namespace it stands for is: a process's threads (the native client's
#: runtime, Dask's event loop) stay in the namespace they started in, so a
#: process enters one lab once and never leaves it.
_driver: NetLab | None = None

DRIVER = Place("driver", "driver", "rack0")


def driver_lab(places: list[Place], network: str, binary: str | None = None) -> NetLab:
    """The lab of this process, with node ``driver`` (this process, moved
    into it) and ``places``: started and entered on the first call; later calls
    get the same lab and must ask for the same network and no node it lacks.
    It ends with the process (its stdin pipe's EOF)."""
    global _driver
    want = [DRIVER, *(p for p in places if p.name != DRIVER.name)]
    if _driver is None:
        lab = NetLab(want, network, binary).start()
        try:
            lab.enter(DRIVER.name)
        except BaseException:
            lab.close()
            raise
        _driver = lab
        return lab
    have = {p.name: p for p in _driver.places}
    other = [p.arg() for p in want if have.get(p.name) != p]
    if _driver.network != network or other:
        raise NetLabError(
            f"this process already runs in lab {_driver.id} (--network {_driver.network or 'none'}, nodes "
            f"{', '.join(have)}); a process enters one lab, and this one has no "
            f"{', '.join(other) or 'network ' + network}"
        )
    return _driver


def enter_netns(netns: str) -> None:
    """setns(2) of the calling thread into the named network namespace
    (``/var/run/netns/NAME``, as ``ip netns`` keeps them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetLabError(f"setns into {netns}: {os.strerror(err)}")
    finally:
        os.close(fd)


def netns_list() -> list[str]:
    """The network namespaces ``ip netns list`` shows (names only)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.strip()]
