"""The Dask cluster beside an :class:`~thaw_bench.cluster.EmulatedCluster`:
:func:`start_dask_on` gives one Dask worker per node, named after it, with the
node's position in its environment (``THAW_HOST``, ``THAW_RACK`` and, on a
network, ``THAW_WORKER``: the node's Thaw worker, so its tasks' reads and the
plugin's placement know which worker is their own).

On loopback it is :func:`thaw_bench.runner.start_dask`. On a network
(``EmulatedCluster.lab``) the scheduler runs in a process of its own in node
``driver`` (where this process is), listening on the driver's address, and
each node's Dask worker is a ``dask worker`` process (a Nanny, whose worker
process and task threads inherit its namespace) started in the node's
namespace with ``ip netns exec``, listening on the node's address. They die
with this process (``PR_SET_PDEATHSIG``), and ``thaw netlab`` kills whatever
is left in its namespaces when the lab ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .cluster import EmulatedCluster, _die_with_parent
from .runner import _scheduler_process, start_dask


class NetDask:
    """A Dask scheduler (in node ``driver``) and one ``dask worker`` process per
    node, each in its node's namespace. ``close`` stops them all and removes
    their logs and local directories."""

    def __init__(self) -> None:
        self.scheduler: Any = None
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.logs = Path(tempfile.mkdtemp(prefix="thaw-bench-dask-"))

    def close(self) -> None:
        for _, p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        if self.scheduler is not None:
            with contextlib.suppress(Exception):
                self.scheduler.close()
            self.scheduler = None
        shutil.rmtree(self.logs, ignore_errors=True)

    def log(self, node: str) -> str:
        path = self.logs / f"dask-{node}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def start_dask_on(
    cluster: EmulatedCluster,
    slots: int,
    nodes: list[str] | None = None,
    timeout: float = 120.0,
    per_node: int = 1,
) -> tuple[Any, Any]:
    """One Dask worker with ``slots`` threads on each of ``nodes`` (default:
    every node) of ``cluster`` (``per_node`` of them, named NODE-K, if more
    than one), and a client. Returns (cluster, client): close both with
    :func:`thaw_bench.runner.stop_dask`."""
    by_name = {n.name: n for n in cluster.nodes}
    at = [(n, n if per_node <= 1 else f"{n}-{k}") for n in nodes or list(by_name) for k in range(per_node)]
    if cluster.lab is None:
        return start_dask(
            [(w, by_name[n].rack, by_name[n].host) for n, w in at], slots, cluster.spec.short_circuit
        )
    import dask
    from distributed import Client as DaskClient
    from distributed import SpecCluster

    dask.config.set({"distributed.worker.daemon": False, "distributed.admin.tick.limit": "10s"})
    net = NetDask()
    try:
        scheduler = {
            "cls": _scheduler_process(),
            "options": {"scheduler_kwargs": {"host": cluster.bind("driver"), "dashboard": False}},
        }
        net.scheduler = SpecCluster(workers={}, scheduler=scheduler, silence_logs=40)
        address = net.scheduler.scheduler_address
        for name, worker in at:
            node = by_name[name]
            env = dict(
                os.environ,
                THAW_HOST=node.host,
                THAW_RACK=node.rack,
                THAW_WORKER=cluster.addresses.get(name, ""),
                OMP_NUM_THREADS="1",
                MALLOC_ARENA_MAX="2",
                DASK_DISTRIBUTED__WORKER__DAEMON="False",
                DASK_DISTRIBUTED__ADMIN__TICK__LIMIT="10s",
            )
            if not cluster.spec.short_circuit:
                env["THAW_SHORT_CIRCUIT"] = "0"
            argv = [
                sys.executable, "-m", "distributed.cli.dask_worker", address,
                "--name", worker, "--nthreads", str(slots), "--memory-limit", "0",
                "--host", cluster.bind(name), "--no-dashboard", "--nanny",
                "--local-directory", str(net.logs / worker),
            ]  # fmt: skip
            log = open(net.logs / f"dask-{worker}.log", "ab")  # noqa: SIM115 - the child's; closed here
            try:
                proc = subprocess.Popen(
                    cluster.on_node(name, argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=_die_with_parent,
                )
            finally:
                log.close()
            net.procs.append((worker, proc))
        client = DaskClient(address)
        deadline = time.monotonic() + timeout
        while len(client.scheduler_info(n_workers=-1)["workers"]) < len(at):
            dead = [(n, p.returncode) for n, p in net.procs if p.poll() is not None]
            if dead:
                n, code = dead[0]
                raise RuntimeError(f"the Dask worker of {n} exited with status {code}:\n{net.log(n)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Dask workers did not all join within {timeout:.0f}s")
            time.sleep(0.1)
        return net, client
    except BaseException:
        net.close()
        raise
