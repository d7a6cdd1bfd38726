"""A run's bookkeeping, the same for the job runner (:mod:`thaw_bench.runner`) and
the SQL queue (:mod:`thaw_bench.sql`): the inputs-in-RAM preload, the observers
that run beside a run (every node's state sampled; the scenario's interference
driven), and the run record they leave (what ran, how long, what the observers
saw, the master's migration events), which the report reads; and
:func:`write_json`, which writes records and results.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thaw.client import Client

from .cluster import EmulatedCluster
from .configs import Config, Scenario


class InputsExceedMemory(ValueError):
    """The inputs-in-RAM configuration cannot be reached: the inputs are larger
    than the memory the cluster's workers give migrated blocks."""


def preload_inputs(
    client: Any, paths: list[str], timeout: float, say: Callable[[str], None]
) -> dict[str, Any]:
    """Moves ``paths`` into memory before a run (the inputs-in-RAM bound) and
    waits for them. Inputs larger than the sum of the live workers' migration
    buffers raise :class:`InputsExceedMemory` at once, instead of waiting for a
    bound that cannot be reached. Blocks that still fail to move (no room on the
    workers holding them) end the wait too: the result says how many made it
    (``complete`` is False then) and why the rest did not."""
    t = time.time()
    job = "inputs-in-ram"
    info = client.migrate(paths, job=job, eviction="explicit", lease=timeout + 600)
    buffers = [
        w["migration"]["buffer_limit"]
        for w in client.status()["workers"]
        if w["alive"] and w.get("migration")
    ]
    if buffers and info["bytes"] > sum(buffers):
        client.evict(job)
        raise InputsExceedMemory(
            f"inputs-in-RAM cannot be reached: the inputs are {info['bytes'] / 2**20:.0f} MiB, "
            f"the {len(buffers)} workers' migration buffers hold {sum(buffers) / 2**20:.0f} MiB "
            "(give the nodes more memory, a smaller byte scale, or fewer jobs)"
        )
    info = client.wait_migrated(job, timeout=timeout)
    preload = {
        "seconds": round(time.time() - t, 3),
        "job": info,
        "complete": info["blocks_in_memory"] == info["blocks"],
    }
    if preload["complete"]:
        say(f"  inputs in RAM: {info['blocks_in_memory']} blocks in {preload['seconds']:.1f}s")
    else:
        say(
            f"  inputs in RAM: only {info['blocks_in_memory']} of {info['blocks']} blocks "
            f"in {preload['seconds']:.1f}s ({info.get('failure') or 'no reason given'})"
        )
    return preload


class Sampler(threading.Thread):
    """Samples every node's state (memory used, migration buffer, the migration
    estimate of its disk, queue) every ``interval`` seconds."""

    def __init__(self, client: Client, t0: float, interval: float = 0.25):
        super().__init__(daemon=True, name="thaw-bench-sampler")
        self.client, self.t0, self.interval = client, t0, interval
        self.samples: list[dict[str, Any]] = []
        self._stop_evt = threading.Event()

    def run(self) -> None:
        while not self._stop_evt.wait(self.interval):
            with contextlib.suppress(Exception):
                now = time.time() - self.t0
                for w in self.client.status()["workers"]:
                    mem = next((t for t in w["tiers"] if t["tier"] == "MEM"), {})
                    m = w.get("migration") or {}
                    disk = next((d for d in m.get("devices", []) if d["device"] == "disk"), {})
                    dev = next((d for d in w.get("devices", []) if d["device"] == "disk"), {})
                    self.samples.append(
                        {
                            "t": round(now, 3),
                            "node": w["host"],
                            "alive": w["alive"],
                            "mem_used": mem.get("used", 0),
                            "buffer_used": m.get("buffer_used", 0),
                            "estimate_ns_per_byte": disk.get("ns_per_byte", 0.0),
                            "estimate_ns_per_migration": disk.get("ns_per_migration", 0.0),
                            "queued": disk.get("queued", 0),
                            "active": disk.get("active", 0),
                            "interference": dev.get("interference_streams", 0),
                        }
                    )

    def stop(self) -> None:
        self._stop_evt.set()
        self.join(5)


class Interference(threading.Thread):
    """Drives a :class:`Scenario`'s interference through ``Client.interfere``."""

    def __init__(self, cluster: EmulatedCluster, scenario: Scenario, t0: float):
        super().__init__(daemon=True, name="thaw-bench-interference")
        self.cluster, self.scenario, self.t0 = cluster, scenario, t0
        self.log: list[dict[str, Any]] = []
        self._stop_evt = threading.Event()
        self._on: dict[int, bool] = {}

    def _set(self, ids: dict[str, int], node: int, on: bool) -> None:
        if self._on.get(node) == on:
            return
        name = self.cluster.nodes[node].name
        self.cluster.client().interfere(ids[name], "disk", on, self.scenario.streams)
        self._on[node] = on
        self.log.append({"t": round(time.time() - self.t0, 3), "node": name, "on": on})

    def run(self) -> None:
        s = self.scenario
        if not s.nodes:
            return
        ids = self.cluster.worker_ids()
        while not self._stop_evt.is_set():
            phase = 0 if s.period <= 0 else int((time.time() - self.t0) // s.period)
            for k, node in enumerate(s.nodes):
                on = True if s.period <= 0 else (phase + (k if s.alternate else 0)) % 2 == 0
                with contextlib.suppress(Exception):
                    self._set(ids, node, on)
            self._stop_evt.wait(0.05)

    def stop(self) -> None:
        self._stop_evt.set()
        self.join(5)
        ids = self.cluster.worker_ids()
        for node in list(self._on):
            with contextlib.suppress(Exception):
                self._set(ids, node, False)


def migration_events(client: Client) -> list[dict[str, Any]]:
    """Every migration event the master still holds, read page by page."""
    events: list[dict[str, Any]] = []
    since = 0
    while True:
        page = client.migration_events(since, 10_000)
        events += page["events"]
        if not page["events"] or page["next"] == since:
            return events
        since = page["next"]


def write_json(path: Path, data: Any) -> None:
    """Writes ``data`` to ``path`` as JSON, whole or not at all (a temporary file
    renamed over it)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


@dataclass
class Observers:
    """What watches one run from ``t0`` (every time in its record counts from there)."""

    t0: float
    sampler: Sampler
    interference: Interference


@contextlib.contextmanager
def observe(cluster: EmulatedCluster, client: Client, scenario: Scenario) -> Iterator[Observers]:
    """Samples the nodes and drives ``scenario``'s interference from now until
    the block ends (then the interference is switched off)."""
    t0 = time.time()
    sampler = Sampler(client, t0)
    sampler.start()
    interference = Interference(cluster, scenario, t0)
    interference.start()
    try:
        yield Observers(t0, sampler, interference)
    finally:
        interference.stop()
        sampler.stop()


def run_record(
    run: str,
    config: Config,
    scenario: Scenario,
    cluster: EmulatedCluster,
    seen: Observers,
    events: list[dict[str, Any]],
    *,
    wall: float,
    dropped: int,
    preload: dict[str, Any] | None,
    **fields: Any,
) -> dict[str, Any]:
    """A run's record: its configuration and scenario, wall time, the pages
    dropped and the preload, then the runner's own ``fields`` (jobs, tasks...),
    then the observers' samples and interference log and the migration
    ``events`` (read from the master when the run ended), each event's worker
    named by its node and its times counted from ``t0``."""
    ids = {v: k for k, v in cluster.worker_ids().items()}
    return {
        "run": run,
        "config": config.name,
        "config_label": config.label,
        "scenario": scenario.name,
        "scenario_label": scenario.label,
        "policy": config.policy,
        "priority": config.priority,
        "migration_io": cluster.migration_io,
        "eviction": config.eviction if config.plugin != "off" else None,
        "wall_s": round(wall, 3),
        "pages_dropped": dropped,
        "preload": preload,
        **fields,
        "samples": seen.sampler.samples,
        "interference": seen.interference.log,
        "migrations": [
            dict(
                e,
                node=ids.get(e.get("worker_id"), str(e.get("worker_id"))),
                start=round(e["start_ms"] / 1000 - seen.t0, 4),
                end=round(e["end_ms"] / 1000 - seen.t0, 4),
            )
            for e in events
        ],
    }


def finish_document(
    doc: dict[str, Any],
    results_dir: Path,
    say: Callable[[str], None],
    summarize: Callable[[dict[str, Any]], Any],
    write_report: Callable[[dict[str, Any], Path], Path],
    table_lines: Callable[[dict[str, Any]], list[str]],
) -> Path:
    """An experiment's end: its summary and finish time into ``doc``,
    ``results.json`` and the report into ``results_dir``, the tables said;
    returns the report's path (as :func:`thaw_bench.experiments.swim` does)."""
    doc["summary"] = summarize(doc)
    doc["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    results_dir.mkdir(parents=True, exist_ok=True)
    write_json(results_dir / "results.json", doc)
    report = write_report(doc, results_dir)
    for line in table_lines(doc):
        say(line)
    say(f"results: {results_dir / 'results.json'}; report: {report}")
    return report
