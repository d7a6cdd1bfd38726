"""Memory-locality placement (CAVA, section III, Algorithm 1) by the Thaw scheduler
plugin on the harness's emulated cluster (one Thaw worker and one Dask worker per
node): each task runs on the node whose memory holds its blocks, and tasks wait
for such a slot no longer than the bound. (The levels and the decision for one
offered slot: python/tests/test_dask_placement.py.)"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import dask
import pytest
from distributed import Client as DaskClient
from distributed import LocalCluster as DaskCluster

import thaw
import thaw.dask
from thaw.dask import PLACE_METADATA, ThawSchedulerPlugin
from thaw.dask import placement as pl
from thaw_bench.cluster import ClusterSpec, EmulatedCluster

from tests.test_migration import wait_for

NODES = 3


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedCluster]:
    spec = ClusterSpec(nodes=NODES, racks=1, disk="400MiB/s", block_size="256KiB", heartbeat_ms=100)
    with EmulatedCluster(spec, tmp_path_factory.mktemp("placement")) as ec:
        ec.start("dyrs")
        yield ec


def dask_on_nodes(ec: EmulatedCluster, nodes: list[str], **plugin: Any) -> tuple[DaskCluster, DaskClient]:
    """One one-thread Dask worker per node (named after it), each saying which
    node it sits on as :class:`thaw.dask.ThawWorkerPlace` would, and the plugin."""
    dc = DaskCluster(n_workers=len(nodes), threads_per_worker=1, processes=False, dashboard_address=None)
    c = DaskClient(dc)
    where = {w["host"]: w for w in ec.client().status()["workers"]}
    for addr, node in zip(sorted(c.scheduler_info()["workers"]), nodes, strict=True):
        w = where[node]
        c.set_metadata([PLACE_METADATA, addr], {"worker": w["address"], "host": w["host"], "rack": w["rack"]})
    c.register_plugin(ThawSchedulerPlugin(ec.master, **plugin))
    return dc, c


def node_of(c: DaskClient, nodes: list[str]) -> dict[str, str]:
    return dict(zip(sorted(c.scheduler_info()["workers"]), nodes, strict=True))


def log_job(c: DaskClient) -> str:
    """The job of the plugin's first launch."""
    wait_for(lambda: bool(thaw.dask.placements(c)))
    return str(thaw.dask.placements(c)[0]["job"])


def files_in_memory_on(ec: EmulatedCluster, layout: dict[str, int]) -> dict[str, str]:
    """Writes ``count`` files into memory on each named node: path -> node."""
    root = f"/p-{uuid.uuid4().hex[:8]}"
    out = {}
    for node, count in layout.items():
        c = ec.client(host=node)
        for i in range(count):
            path = f"{root}/{node}-{i}"
            c.write_bytes(path, os.urandom(200_000), write_type="must-cache")
            hosts = {r["host"] for b in c.stat(path, blocks=True)["blocks"] for r in b["replicas"]}
            assert hosts == {node}, hosts
            out[path] = node
    return out


def read_where(master: str, path: str) -> str:
    """Reads a Thaw file in a Dask task; returns the Dask worker's address."""
    from distributed import get_worker

    with thaw.Client(master).open(path) as f:
        f.read()
    return str(get_worker().address)


def test_tasks_run_where_their_blocks_are_in_memory(emulated: EmulatedCluster) -> None:
    files = files_in_memory_on(emulated, {"node0": 3, "node1": 3, "node2": 2})
    nodes = ["node0", "node1", "node2"]
    dc, c = dask_on_nodes(emulated, nodes)
    try:
        tasks = []
        for path in files:
            with dask.annotate(thaw_inputs=[path]):
                tasks.append(dask.delayed(read_where, pure=False)(emulated.master, path))
        ran_on = c.compute(tasks, sync=True)
        on, wanted = [node_of(c, nodes)[a] for a in ran_on], list(files.values())
        # Delay scheduling waits for the node's slot only up to its bound: on a
        # loaded machine one task of the eight may pass it and launch elsewhere,
        # but then the placement log must say so (no silent misplacement).
        elsewhere = sum(a != b for a, b in zip(on, wanted, strict=True))
        assert elsewhere <= 1, (on, wanted)
        log = thaw.dask.placements(c)
        assert len(log) == len(files), log
        assert sum(e["level"] == "worker-memory" for e in log) == len(files) - elsewhere, (log, on, wanted)
        # The reading tasks' run time was measured (it caps the waits).
        took = c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins["thaw"].placer.task_time)
        assert took is not None and 0 < took < 5, took
    finally:
        c.close()
        dc.close()


def test_a_task_waits_for_its_node_no_longer_than_the_bound(emulated: EmulatedCluster) -> None:
    # Six tasks whose blocks are all on node0, which has one slot; node1 and
    # node2 are free. Delay scheduling holds them for node0 a while, then lets
    # them run elsewhere: each waits at most the bound.
    files = files_in_memory_on(emulated, {"node0": 6})
    delays = pl.Delays(memory=0.3, disk=0.3, max_wait=0.6)
    nodes = ["node0", "node1", "node2"]
    dc, c = dask_on_nodes(emulated, nodes, delays=delays)
    try:
        # Long enough that the job is still running when the plugin next
        # reports to the master (each second): node0 takes two tasks at once
        # (one queued, as Dask's own queuing would), the other four start
        # elsewhere after their wait, so the job lasts about 2.5 s.
        def slow_read(master: str, path: str) -> str:
            time.sleep(1.0)
            return read_where(master, path)

        tasks = []
        for path in files:
            with dask.annotate(thaw_inputs=[path]):
                tasks.append(dask.delayed(slow_read, pure=False)(emulated.master, path))
        futures = c.compute(tasks)
        # While it runs, `thaw jobs` shows how its tasks were placed.
        wait_for(lambda: ((emulated.client().job(log_job(c)) or {}).get("tasks") or {}).get("placed", 0) >= 2)
        counts = emulated.client().job(log_job(c))["tasks"]
        assert counts["tasks"] == 6 and counts["memory_local"] >= 1, counts
        ran_on = c.gather(futures)
        log = thaw.dask.placements(c)
        assert len(log) == 6
        levels = [e["level"] for e in log]
        assert "worker-memory" in levels and "rack-memory" in levels, log
        assert {node_of(c, nodes)[a] for a in ran_on} > {"node0"}, ran_on
        waited = [e["delay"] for e in log if e["level"] != "worker-memory"]
        # They turned down free slots on node1 and node2 while waiting for
        # node0, but no task for longer than the bound.
        assert max(waited) > 0.1, log
        assert all(e["delay"] <= delays.max_wait for e in log), log
        summary = thaw.dask.launch_summary(
            [(pl.LEVELS.index(e["level"]), e["delay"], e["in_memory"]) for e in log]
        )
        assert summary["placed"] == 6 and 0 < summary["memory_local"] < 1
    finally:
        c.close()
        dc.close()


def test_a_held_task_queues_behind_a_busy_worker_as_dask_s_own_queuing_would(
    emulated: EmulatedCluster,
) -> None:
    # node0's one thread runs a long task that reads nothing; a task whose
    # block is in node0's memory is then submitted. Dask's queuing keeps a
    # worker one task ahead (worker-saturation 1.1 x 1 thread: 2 slots), so the
    # plugin launches it on node0 at once, to run next there, and does not
    # hold it for node0's thread to go idle (turning down node1 and node2).
    (path,) = files_in_memory_on(emulated, {"node0": 1})
    nodes = ["node0", "node1", "node2"]
    delays = pl.Delays(memory=5.0, disk=5.0, max_wait=10.0)
    dc, c = dask_on_nodes(emulated, nodes, delays=delays)
    try:
        node0 = next(a for a, n in node_of(c, nodes).items() if n == "node0")
        busy = c.submit(time.sleep, 1.5, workers=[node0], pure=False)
        wait_for(lambda: bool(c.processing().get(node0)))
        with dask.annotate(thaw_inputs=[path]):
            reader = c.compute(dask.delayed(read_where, pure=False)(emulated.master, path))
        wait_for(lambda: bool(thaw.dask.placements(c)))
        (launch,) = thaw.dask.placements(c)
        assert launch["level"] == "worker-memory" and launch["delay"] < 0.5, launch
        assert not busy.done(), "launched only once node0's thread was idle"
        assert reader.result() == node0
    finally:
        c.close()
        dc.close()


def test_placement_off_leaves_dask_s_own_placement(emulated: EmulatedCluster) -> None:
    files = files_in_memory_on(emulated, {"node1": 2})
    dc, c = dask_on_nodes(emulated, ["node0", "node1"], placement=False)
    try:
        tasks = []
        for path in files:
            with dask.annotate(thaw_inputs=[path]):
                tasks.append(dask.delayed(read_where, pure=False)(emulated.master, path))
        c.compute(tasks, sync=True)
        assert thaw.dask.placements(c) == []
        wait_for(lambda: not thaw.dask.jobs(c))
    finally:
        c.close()
        dc.close()


def test_tasks_reading_ranges_run_where_their_block_is_in_memory(emulated: EmulatedCluster) -> None:
    # One file of 6 blocks with a replica of each on every node's disk; a job
    # migrates it, which puts each block in one node's memory. Tasks that each
    # read one block (annotated with their byte range, in a user-named job) run
    # where their block is in memory.
    block = 256 * 1024
    path = f"/ranges-{uuid.uuid4().hex[:8]}"
    writer = thaw.Client(emulated.master, host="node0")
    with writer.open(path, "wb", write_type="replicated:3", block_size=block) as f:
        f.write(os.urandom(6 * block))
    pre = thaw.Client(emulated.master)
    pre.migrate([path], "pre", lease=60)
    pre.wait_migrated("pre", timeout=30)
    holder = {
        b["offset"]: next(r["host"] for r in b["replicas"] if r["tier"] == "MEM")
        for b in pre.stat(path, blocks=True)["blocks"]
    }
    assert len(set(holder.values())) > 1, holder  # spread over nodes
    nodes = ["node0", "node1", "node2"]
    dc, c = dask_on_nodes(emulated, nodes)
    try:
        tasks = []
        for off in sorted(holder):
            with dask.annotate(thaw_inputs=[(path, off, block)], thaw_job="ranges-job"):
                tasks.append(dask.delayed(read_where, pure=False)(emulated.master, path))
        ran_on = c.compute(tasks, sync=True)
        assert [node_of(c, nodes)[a] for a in ran_on] == [holder[o] for o in sorted(holder)]
        log = thaw.dask.placements(c)
        assert {e["job"] for e in log} == {"ranges-job"} and all(
            e["level"] == "worker-memory" for e in log
        ), log
    finally:
        c.close()
        dc.close()
        pre.evict("pre")
