"""Memory-locality placement (CAVA, section III, Algorithm 1) by the Thaw scheduler
plugin: the levels and the decision for one offered slot, then on an emulated
cluster (one Thaw worker and one Dask worker per node) where each task runs on
the node whose memory holds its blocks, and tasks wait for such a slot no longer
than the bound."""

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
from thaw.bench.cluster import ClusterSpec, EmulatedCluster
from thaw.dask import PLACE_METADATA, ThawSchedulerPlugin
from thaw.dask import placement as pl

from .test_migration import wait_for

A = pl.Place("w-a:1", "host-a", "rack-1")
B = pl.Place("w-b:1", "host-b", "rack-1")
C = pl.Place("w-c:1", "host-c", "rack-2")


def mem(place: pl.Place) -> pl.Replica:
    return pl.Replica(place.worker or "", place.host, place.rack, True)


def disk(place: pl.Place) -> pl.Replica:
    return pl.Replica(place.worker or "", place.host, place.rack, False)


def test_levels_run_from_worker_memory_to_anywhere() -> None:
    a_on_other_worker_same_host = pl.Replica("w-a2:1", "host-a", "rack-1", True)
    assert pl.level([[mem(A)], [mem(A), disk(B)]], A) == pl.WORKER_MEMORY
    assert pl.level([[a_on_other_worker_same_host]], A) == pl.HOST_MEMORY
    assert pl.level([[mem(A)]], B) == pl.RACK_MEMORY
    assert pl.level([[disk(B)]], B) == pl.WORKER_DISK
    assert pl.level([[disk(A)]], B) == pl.RACK_DISK
    assert pl.level([[mem(A)]], C) == pl.ANY
    # Every block counts: one block only on disk makes the task disk-local.
    assert pl.level([[mem(B)], [disk(B)]], B) == pl.WORKER_DISK
    assert pl.level([], A) == pl.ANY  # no blocks known (cold in the under-store)


def task(
    key: str, lvl: int, possible: int = pl.WORKER_MEMORY, waited: float = 0.0, order: int = 0
) -> pl.Candidate:
    # Every level from ``possible`` down is reachable: the paper's full ladder.
    reachable = frozenset(range(possible, pl.ANY + 1))
    return pl.Candidate(key, lvl, reachable, lvl <= pl.RACK_MEMORY, waited, order)


def test_a_slot_at_the_best_level_is_taken_at_once() -> None:
    d = pl.Delays(memory=1.0, disk=1.0, max_wait=5.0)
    chosen = pl.choose([task("far", pl.RACK_MEMORY), task("here", pl.WORKER_MEMORY)], 0.0, 1.0, d)
    assert chosen is not None and chosen.key == "here"


def test_waits_per_level_are_proportional_to_the_cached_fraction() -> None:
    d = pl.Delays(memory=1.0, disk=1.0, max_wait=5.0)
    rack = [task("t", pl.RACK_MEMORY)]  # its blocks sit in memory on another node
    # All cached: the job waits 2 x 1.0 s (worker, then host level) before rack.
    assert pl.choose(rack, 1.9, 1.0, d) is None
    assert pl.choose(rack, 2.0, 1.0, d) is not None
    # A quarter cached: a quarter of the wait.
    assert pl.choose(rack, 0.4, 0.25, d) is None
    assert pl.choose(rack, 0.5, 0.25, d) is not None
    # Nothing cached: no wait at all.
    assert pl.choose(rack, 0.0, 0.0, d) is not None
    assert d.threshold(pl.HOST_MEMORY, 1.0) < d.threshold(pl.RACK_MEMORY, 1.0) < d.threshold(pl.ANY, 1.0)


def test_no_wait_for_a_level_no_worker_could_give() -> None:
    d = pl.Delays(memory=1.0, disk=1.0, max_wait=5.0)
    cold = [task("t", pl.ANY, possible=pl.ANY, order=0)]
    assert pl.choose(cold, 0.0, 1.0, d) is not None


def test_a_step_to_a_level_no_worker_could_give_costs_no_wait() -> None:
    d = pl.Delays(memory=1.0, disk=1.0, max_wait=5.0)
    # One Dask worker per host: its block in memory on A, the task can get
    # worker memory (on A), rack memory (B) or anywhere (C), never host memory.
    workers = [A, B, C]
    blocks = [[mem(A)]]
    reachable = frozenset(pl.level(blocks, p) for p in workers)
    assert reachable == {pl.WORKER_MEMORY, pl.RACK_MEMORY, pl.ANY}
    at_b = pl.Candidate("t", pl.level(blocks, B), reachable, True, 0.0, 0)
    # One memory step (worker -> rack), not two.
    assert pl.choose([at_b], 0.9, 1.0, d) is None
    assert pl.choose([at_b], 1.0, 1.0, d) is not None
    # Anywhere: that step and one more, not every level in between.
    at_c = pl.Candidate("t", pl.level(blocks, C), reachable, True, 0.0, 0)
    assert d.threshold(pl.ANY, 1.0, reachable) == 2.0
    assert pl.choose([at_c], 1.9, 1.0, d) is None
    assert pl.choose([at_c], 2.0, 1.0, d) is not None
    # Without the reachable levels, every level counts (the paper's ladder).
    assert d.threshold(pl.RACK_MEMORY, 1.0) == 2.0 and d.threshold(pl.ANY, 1.0) == 5.0


def test_no_step_waits_longer_than_the_tasks_run() -> None:
    d = pl.Delays(memory=1.0, disk=1.0, max_wait=5.0, task_runs=2.0)
    rack = [task("t", pl.RACK_MEMORY)]
    # Tasks measured at 0.1 s: each step waits at most 2 x 0.1 s, not 1 s.
    assert d.threshold(pl.RACK_MEMORY, 1.0, task_time=0.1) == pytest.approx(0.4)
    assert pl.choose(rack, 0.35, 1.0, d, task_time=0.1) is None
    assert pl.choose(rack, 0.45, 1.0, d, task_time=0.1) is not None
    # Still proportional to the cached fraction; long tasks keep the set wait.
    assert d.threshold(pl.RACK_MEMORY, 0.5, task_time=0.1) == pytest.approx(0.2)
    assert d.threshold(pl.RACK_MEMORY, 1.0, task_time=10.0) == 2.0
    # Not measured yet: the set waits.
    assert d.threshold(pl.ANY, 1.0) == 5.0


def test_no_task_waits_past_the_bound() -> None:
    d = pl.Delays(memory=10.0, disk=10.0, max_wait=2.0)
    tasks = [task("young", pl.RACK_MEMORY, waited=0.5), task("old", pl.ANY, waited=2.5)]
    chosen = pl.choose(tasks, 0.1, 1.0, d)
    assert chosen is not None and chosen.key == "old"
    assert pl.choose([task("young", pl.RACK_MEMORY, waited=0.5)], 0.1, 1.0, d) is None


def test_in_memory_tasks_go_first_among_equals() -> None:
    d = pl.Delays()
    cold = pl.Candidate("cold", pl.ANY, frozenset({pl.ANY}), False, 0.0, 0)
    warm = pl.Candidate("warm", pl.ANY, frozenset({pl.ANY}), True, 0.0, 5)
    chosen = pl.choose([cold, warm], 0.0, 0.5, d)
    assert chosen is not None and chosen.key == "warm"


def test_a_job_keeps_its_waiting_and_running_tasks_as_they_launch_and_return() -> None:
    from thaw.dask.job import DaskJob, Held

    job = DaskJob(id="j", master="m", client="c", submitted=0.0, keys=set())
    for k in "abc":
        job.hold(k, Held(order=0))
    job.set_launched("a", True)
    job.set_launched("b", True)
    assert job.waiting == {"c"} and job.running() == 2
    job.set_launched("a", False)  # its worker died: held again
    assert job.waiting == {"a", "c"} and job.running() == 1
    assert not job.held["a"].launched and job.held["b"].launched


def test_bad_delays_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        pl.Delays(memory=-1)


# -- on an emulated cluster -----------------------------------------------------

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
        assert [node_of(c, nodes)[a] for a in ran_on] == list(files.values())
        log = thaw.dask.placements(c)
        assert len(log) == len(files) and all(e["level"] == "worker-memory" for e in log), log
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
