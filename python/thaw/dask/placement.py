"""Memory-locality placement of Dask tasks that read Thaw blocks: CAVA, section III
(locality levels, Algorithm 1) on Dask.

Levels, best first: the task's blocks are all in the memory of the Thaw worker
beside the Dask worker (worker memory), of a Thaw worker on its host (host
memory), in its rack (rack memory); then the same three for Thaw's disk tier;
then anywhere (including the under-store).

Algorithm 1 offers each free slot to the jobs in increasing order of running
tasks; a job launches its best task for that slot if the slot's level is the
best there is, or if the job has waited long enough for a better one: for the
memory levels a wait proportional to the job's cached fraction ``R_j`` (a job
with little in memory is not held back for nothing), for the disk levels and
anywhere a fixed one. A launch resets the job's wait.

Improvements on the paper, for Dask (which has no heartbeats, but offers a slot
whenever a task ends and on a short tick):

- Skip counts become seconds waited since the job's last launch, so the delay
  does not depend on how often slots are offered; and a task that has waited
  ``max_wait`` runs on the next free slot whatever its level, so no task waits
  past the configured bound.
- A step down to a level no worker could give the task costs no wait (the
  paper counts every level; with one Dask worker per host, the host levels
  would only add a wait to every task that misses its worker).
- No step waits longer than ``task_runs`` (default 3) times the run time the
  job's reading tasks are measured to take. A better level saves part of a
  task's read, never more than the task's run: with tasks of a few tens of
  milliseconds, a fixed half-second wait lost more than locality could win
  (SWIM, queueing only). Measured on SWIM with inputs in memory: one run time
  gave 89-91% of the maps memory-local, three gave 98%. The paper's own
  waits are small skip counts for the memory levels for the same reason
  (CAVA, section V: 1, 3, 6 skips, "the performance of PM ML and RM ML is
  comparable to that of VM ML").
- Among a job's tasks at the same level, those whose blocks are in memory
  anywhere go first (the scheduled-caching poster's "tasks whose input data are already
  in memory ahead of other tasks"), then Dask's own priority.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LEVELS = ("worker-memory", "host-memory", "rack-memory", "worker-disk", "host-disk", "rack-disk", "any")
WORKER_MEMORY, HOST_MEMORY, RACK_MEMORY, WORKER_DISK, HOST_DISK, RACK_DISK, ANY = range(7)
#: The levels counted as memory-local (the task reads memory on its own host).
MEMORY_LOCAL = (WORKER_MEMORY, HOST_MEMORY)


@dataclass(frozen=True)
class Place:
    """Where a Dask worker sits in Thaw's topology: the Thaw worker beside it
    (address, if any), its host and rack labels."""

    worker: str | None
    host: str
    rack: str


@dataclass(frozen=True)
class Replica:
    worker: str
    host: str
    rack: str
    memory: bool


def level(blocks: Sequence[Sequence[Replica]], at: Place) -> int:
    """The best level at which every one of a task's blocks is available to a
    task run at ``at``; ``ANY`` for a task with no known blocks."""
    if not blocks:
        return ANY
    checks = (
        lambda r: r.memory and r.worker == at.worker,
        lambda r: r.memory and r.host == at.host,
        lambda r: r.memory and r.rack == at.rack,
        lambda r: r.worker == at.worker,
        lambda r: r.host == at.host,
        lambda r: r.rack == at.rack,
    )
    for i, check in enumerate(checks):
        if all(any(check(r) for r in replicas) for replicas in blocks):
            return i
    return ANY


def in_memory(blocks: Sequence[Sequence[Replica]]) -> bool:
    """Every block has a replica in some worker's memory."""
    return bool(blocks) and all(any(r.memory for r in replicas) for replicas in blocks)


@dataclass(frozen=True)
class Delays:
    """Algorithm 1's waits, in seconds. ``memory``: the wait before each step
    down the memory levels at cached fraction 1 (``R_j x M``); ``disk``: before
    each step down the disk levels and to anywhere (``D``); ``max_wait``: the
    bound on any task's wait for a slot at a better level; ``task_runs``: no
    step waits longer than this many of the task's measured run times."""

    memory: float = 0.5
    disk: float = 0.5
    max_wait: float = 2.0
    task_runs: float = 3.0

    def __post_init__(self) -> None:
        if min(self.memory, self.disk, self.max_wait, self.task_runs) < 0:
            raise ValueError(f"placement delays must not be negative: {self}")

    def threshold(
        self,
        lvl: int,
        cached: float,
        reachable: Iterable[int] | None = None,
        task_time: float | None = None,
    ) -> float:
        """How long a job must have waited to accept a slot at level ``lvl``:
        one wait per step down from the best level, ``R_j x memory`` for a step
        to a memory level, ``disk`` for a step past them. ``reachable``: the
        levels some worker of the cluster could give the task; steps to other
        levels cost nothing (with one Dask worker per host, no task can ever get
        host memory, and waiting for it would only delay it). Default: every
        level, the paper's ladder. ``task_time``: the run time the task is
        expected to take, if measured; each step waits at most ``task_runs`` of
        it."""
        cap = float("inf") if task_time is None else self.task_runs * task_time
        mem = max(0.0, min(1.0, cached)) * min(self.memory, cap)
        disk = min(self.disk, cap)
        levels = sorted(set(range(len(LEVELS)) if reachable is None else reachable))
        # Waiting starts at the best reachable level: one wait per step below it.
        steps = [lv for lv in levels[1:] if lv <= lvl]
        wait = sum(mem if lv <= RACK_MEMORY else disk for lv in steps)
        return wait if lvl <= RACK_MEMORY else min(self.max_wait, wait)


@dataclass(frozen=True)
class Candidate:
    """A held task as the decision sees it, for one offered slot."""

    key: object
    level: int  # the level the offered slot gives it
    reachable: frozenset[int]  # the levels some worker could give it now
    in_memory: bool
    waited: float  # seconds since the task became ready
    order: int  # Dask's priority order among the job's tasks (smaller first)

    @property
    def possible(self) -> int:
        """The best level any worker could give it now."""
        return min(self.reachable)


def choose(
    candidates: Iterable[Candidate],
    job_waited: float,
    cached: float,
    delays: Delays,
    task_time: float | None = None,
) -> Candidate | None:
    """Algorithm 1 for one job and one offered slot: the task to launch there,
    or None (the job skips the slot and keeps waiting for a better one).
    ``task_time``: the run time the job's tasks are measured to take, if known."""
    tasks = list(candidates)
    if not tasks:
        return None
    best = min(tasks, key=lambda c: (c.level, not c.in_memory, c.order))
    # A job waits only for a level one of its tasks could get somewhere now
    # (all cold in the under-store: nothing to wait for).
    wait = delays.threshold(best.level, cached, best.reachable, task_time)
    if best.level <= min(c.possible for c in tasks) or job_waited >= wait:
        return best
    overdue = [c for c in tasks if c.waited >= delays.max_wait]
    return max(overdue, key=lambda c: c.waited) if overdue else None
