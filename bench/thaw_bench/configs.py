"""What a run of the harness varies: the configuration (:data:`CONFIGS`: the
migration policy, inputs-in-RAM, the Thaw scheduler plugin) and the scenario
(:data:`SCENARIOS`: interference on the nodes' disks).

The configurations: the cold baseline (policy none, pages dropped),
inputs-in-RAM (every input migrated and held in memory before the run: the
upper bound), Ignem, DYRS (in the paper's FIFO order, named explicitly since
the master's default for ``dyrs`` is smallest job first), DYRS with
smallest-job-first priority (Thaw's default), and DYRS with memory-locality
placement (FIFO too, so placement is all it adds to ``dyrs``); and the papers' bounds and ablations: instant
migration (Ignem, section IV-C4 and Fig. 7's hypothetical scheme: each job's
input migrated at its submission with copies the device model does not pace,
held until the job's tasks have read it), Ignem with prioritisation off (FIFO;
Ignem, section IV-C5) and DYRS, Fig. 10's naive load balancing (the master's
``naive`` policy: the replica holder with the fewest outstanding migrations,
no time estimates). And scheduled caching (the scheduled-caching poster, Pundir
et al.: the scheduler tells storage what a job will read, storage tells the
scheduler where it sits in memory), ``scheduled``: the plugin prefetches each
job's inputs at its submission (``update_graph``, the poster's *pre-fetch* hint),
holds each input file until every task reading it has run (explicit eviction,
the poster's *do not evict* hint, released file by file rather than at the job's
end), and places the reading tasks by memory locality (the poster's tasks run
where their data sits in memory: its in-memory HDFS instance's locality). The
master plans with DYRS (the poster's ``fetch()`` has no replica choice; DYRS's
is the best Thaw has). The scenarios: homogeneous, one slow node
(persistent interference), or interference switching on and off (DYRS, Table II).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """A migration configuration: the master's policy and priority, the inputs
    moved into memory before the run or not, and the Thaw scheduler plugin."""

    name: str
    policy: str
    priority: str | None = None
    preload: bool = False  # inputs-in-RAM: all inputs migrated before the run
    label: str = ""
    #: The Thaw scheduler plugin: "off", "migrate" (Dask places), "place".
    plugin: str = "off"
    #: The workers' ``--migration-io`` for this configuration (None: the
    #: cluster's); "instant": copies not paced by the device model.
    migration_io: str | None = None
    #: The plugin's eviction: "implicit" (each block let go once read) or
    #: "explicit" (each input file held until the tasks reading it ran).
    eviction: str = "implicit"


CONFIGS: dict[str, Config] = {
    c.name: c
    for c in [
        Config("cold", "none", label="cold (policy none)"),
        Config("ram", "dyrs", preload=True, label="inputs-in-RAM"),
        Config(
            "ram-place",
            "dyrs",
            preload=True,
            label="inputs-in-RAM + memory-locality placement",
            plugin="place",
        ),
        Config("ignem", "ignem", label="Ignem", plugin="migrate"),
        Config("dyrs", "dyrs", "fifo", label="DYRS", plugin="migrate"),
        Config("dyrs-sjf", "dyrs", "smallest-job-first", label="DYRS + smallest-job-first", plugin="migrate"),
        Config("dyrs-place", "dyrs", "fifo", label="DYRS + memory-locality placement", plugin="place"),
        Config(
            "instant",
            "ignem",
            label="instant migration (Ignem, Fig. 7)",
            plugin="migrate",
            migration_io="instant",
            eviction="explicit",
        ),
        Config("ignem-fifo", "ignem", "fifo", label="Ignem, prioritisation off (FIFO)", plugin="migrate"),
        Config("naive", "naive", label="naive load balancing (DYRS, Fig. 10)", plugin="migrate"),
        Config(
            "scheduled",
            "dyrs",
            label="scheduled caching (prefetch, do-not-evict, memory-locality placement)",
            plugin="place",
            eviction="explicit",
        ),
    ]
}


@dataclass(frozen=True)
class Scenario:
    """Interference on the DISK tiers of some nodes: ``nodes`` (indices),
    ``period`` seconds on and off (0: always on), ``alternate``: when several
    nodes, one is on while the next is off (DYRS, Table II)."""

    name: str
    nodes: tuple[int, ...] = ()
    period: float = 0.0
    alternate: bool = False
    streams: int = 2  # the paper's two dd readers
    label: str = ""


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("homogeneous", label="homogeneous"),
        Scenario("slow-node", (0,), label="node 1: persistently active"),
        Scenario("alt10", (0,), 10.0, label="node 1: alternates every 10 s"),
        Scenario("alt20", (0,), 20.0, label="node 1: alternates every 20 s"),
        Scenario("alt10x2", (0, 1), 10.0, True, label="nodes 1 and 2: alternate every 10 s"),
        Scenario("alt20x2", (0, 1), 20.0, True, label="nodes 1 and 2: alternate every 20 s"),
    ]
}
