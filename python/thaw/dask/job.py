"""A Dask submission as the Thaw scheduler plugin keeps it: one Thaw job, the
files its tasks read, and the reading tasks held for placement."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Held:
    """A reading task the plugin places: Dask priority, when it became ready
    (reached no-worker), whether it has been launched."""

    order: Any
    ready: float | None = None
    launched: bool = False
    # Not to start before this (monotonic clock): the job's modelled start-up.
    start: float = 0.0
    # The first and the last time its job turned down a free slot for it: the
    # span between is the delay it paid for locality (after the last, it waited
    # only because no slot was free). Bounded by ``Delays.max_wait``, since an
    # overdue task takes the next free slot.
    declined: float | None = None
    declined_last: float | None = None


@dataclass
class DaskJob:
    """One submission's Thaw job, kept by the scheduler plugin."""

    id: str
    master: str
    client: str
    submitted: float
    keys: set[Any]
    submitted_at: float = field(default_factory=time.monotonic)
    # Task key -> the files it reads; file -> the tasks that read it and have not run.
    reads: dict[Any, set[str]] = field(default_factory=dict)
    # Task key -> the byte ranges it reads, for tasks annotated with ranges
    # (others read their files whole): placement looks only at those blocks.
    ranges: dict[Any, list[tuple[str, int, int]]] = field(default_factory=dict)
    readers: dict[str, set[Any]] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    done: set[Any] = field(default_factory=set)
    tasks_dispatched: int = 0
    ended: bool = False
    # Placement: held tasks (key -> state), when the job first declined a slot
    # since its last launch, and each launch's (level, delay paid, in memory).
    held: dict[Any, Held] = field(default_factory=dict)
    # The held tasks not launched: what each round of offers looks at (a round
    # must not walk every task of a large graph, most of them long launched).
    waiting: set[Any] = field(default_factory=set)
    # The held tasks launched whose run has not ended (Algorithm 1 offers a
    # slot to the jobs with fewest first).
    active: set[Any] = field(default_factory=set)
    declined_since: float | None = None
    launches: list[tuple[int, float, bool]] = field(default_factory=list)
    # Its blocks' locations have been asked for at least once.
    located: bool = False
    # Run time of its reading tasks (s, moving average), once one has run.
    task_time: float | None = None
    # Who submitted it (shown by ``thaw jobs``), and the task counters last
    # reported to the master (None: report again).
    origin: str = ""
    # Cache affinity (CAVA, section IV): the application's name and a declared
    # affinity (None: measured at runtime).
    app: str = ""
    affinity: float | None = None
    reported: tuple[int, ...] | None = None

    def hold(self, key: Any, held: Held) -> None:
        self.held[key] = held
        self.waiting.add(key)

    def set_launched(self, key: Any, launched: bool) -> None:
        """A held task launched (by placement, or handed to Dask), or held
        again (its worker died)."""
        self.held[key].launched = launched
        if launched:
            self.waiting.discard(key)
            self.active.add(key)
        else:
            self.waiting.add(key)
            self.active.discard(key)

    def files(self) -> list[str]:
        return sorted(self.readers)

    def running(self) -> int:
        return len(self.active)
