"""Memory-locality placement (CAVA, section III, Algorithm 1) by the Thaw scheduler
plugin: the levels and the decision for one offered slot. (On the evaluation
harness's emulated cluster, where each task runs on the node whose memory holds
its blocks: bench/tests/test_placement_emulated.py.)"""

from __future__ import annotations

import pytest

from thaw.dask import placement as pl

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
