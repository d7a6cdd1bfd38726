"""The scheduled-caching experiment (:mod:`thaw_bench.scheduled`): a small
replay on a real 3-node emulated cluster through the command line, checking the
report's structure and the decisions each configuration makes (where each map
read from, what was migrated and held), not timings; and the miss
classification and summary arithmetic on runs made by hand."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from thaw_bench import scheduled as sc
from thaw_bench.__main__ import main as bench_main
from thaw_bench.configs import CONFIGS
from thaw_bench.report import check_accounting

pytestmark = pytest.mark.timeout(300)


def test_scheduled_config_is_the_posters_cooperation() -> None:
    c = CONFIGS["scheduled"]
    # Prefetch at submission and placement by memory locality (plugin "place"),
    # do-not-evict until read (explicit eviction), no preload.
    assert (c.plugin, c.eviction, c.preload, c.migration_io) == ("place", "explicit", False, None)


def test_scheduled_quick_on_an_emulated_cluster(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = bench_main(
        [
            "scheduled", "--quick", "--jobs", "8", "--nodes", "3", "--disk", "64MiB/s", "--block-size",
            "256KiB", "--mem", "256MiB", "--heartbeat-ms", "100", "--byte-scale", str(1 / 1024),
            "--time-scale", str(1 / 4000), "--startup", "2", "--out", str(out), "--root", str(tmp_path / "c"),
        ]
    )  # fmt: skip
    assert code == 0
    doc = json.loads((out / "scheduled-quick" / "results.json").read_text())
    runs = {r["config"]: r for r in doc["runs"]}
    assert set(runs) == {"cold", "ram", "scheduled"} and doc["params"]["startups"] == [2.0]
    for run in runs.values():
        assert check_accounting(run) == [], run["run"]
        assert len(run["jobs"]) == 8 and run["scenario"] == "startup2s"
    maps = {c: [t for t in r["tasks"] if t["kind"] == "map"] for c, r in runs.items()}
    sources = {c: Counter(t["source"] for t in ts) for c, ts in maps.items()}
    blocks = sum(len(j["blocks"]) for j in runs["cold"]["jobs"])
    # On-disk reads every block from disk; the ideal and scheduled caching (2 s
    # of start-up for a few 256 KiB blocks on 64 MiB/s disks) from memory, and
    # scheduled caching mostly on the node holding the block (placement is delay
    # scheduling: a task whose node's slot stays busy past the wait's bound runs
    # elsewhere and reads the block from that node's memory).
    assert sources["cold"] == Counter({"disk": blocks})
    assert set(sources["ram"]) <= {"mem", "mem-remote"}
    assert set(sources["scheduled"]) <= {"mem", "mem-remote"}, sources
    assert sources["scheduled"]["mem"] > blocks // 2, sources
    sched = runs["scheduled"]
    assert sched["eviction"] == "explicit" and len(sched["placements"]) == blocks
    done = {m["block_id"] for m in sched["migrations"] if m["outcome"] == "done"}
    assert done == {b for j in sched["jobs"] for b in j["blocks"]}
    # The summary: every configuration, the figures the table prints, no misses.
    st = doc["scheduled"]["startups"]["startup2s"]
    assert set(st["configs"]) == {"cold", "ram", "scheduled"}
    row = st["configs"]["scheduled"]
    assert row["speedup"] == pytest.approx(st["configs"]["cold"]["mean_job_s"] / row["mean_job_s"])
    assert row["distance"] == pytest.approx(row["mean_job_s"] / st["configs"]["ram"]["mean_job_s"] - 1)
    assert row["distance_placed"] is None  # no ram-place in the quick run
    assert row["shared_reachable_share"] is not None and 0.0 <= row["shared_reachable_share"] <= 1.0
    assert row["mem_bytes_share"] == 1.0 and row["mem_local_share"] > 0.5
    assert st["misses"] == [] and st["misses_by_why"] == {}
    assert 0.0 <= st["completion"]["on_disk_share"] <= 1.0
    text = (out / "scheduled-quick" / "report.md").read_text()
    assert "## Scheduled caching" in text and "speedup over on-disk" in text and "Table I" in text


def _run(tasks: list[dict[str, Any]], migrations: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    jobs = [{"job": "j", "submit": 0.0, "duration": 1.0, "input_bytes": 4, "holders": [["node0"]] * 4}]
    return {"run": "r", "config": "scheduled", "scenario": "s", "jobs": jobs, "tasks": tasks,
            "migrations": migrations, **kw}  # fmt: skip


def test_misses_say_why() -> None:
    def task(block: int, source: str) -> dict[str, Any]:
        return {"kind": "map", "job": "j", "block": block, "source": source, "start": 1.0, "bytes": 1}

    run = _run(
        [task(1, "mem"), task(2, "disk"), task(3, "disk"), task(4, "disk"), task(5, "disk"), task(6, "disk")],
        [
            {"block_id": 1, "outcome": "done", "end": 0.5},
            {"block_id": 2, "outcome": "done", "end": 1.5},  # copied after the read began
            {"block_id": 3, "outcome": "evicted", "end": 0.5},
            {"block_id": 5, "outcome": "done", "end": 0.2},  # in memory, yet read from disk
            {"block_id": 6, "outcome": "read-first", "end": 1.3},  # still queued at the read
        ],
    )
    why = {m["block"]: m["why"] for m in sc.misses(run)}
    assert why == {2: "late", 3: "evicted", 4: "none", 5: "in memory, read from disk", 6: "queued"}


def test_summary_speedup_distance_per_repeat() -> None:
    def run(cfg: str, rep: int, d: float) -> dict[str, Any]:
        jobs = [{"job": "j", "submit": 0.0, "duration": d, "input_bytes": 0}]
        return {"run": f"{cfg}{rep}", "config": cfg, "scenario": "startup2s", "repeat": rep, "jobs": jobs}

    doc = {"runs": [run("cold", 0, 4.0), run("ram", 0, 1.0), run("scheduled", 0, 1.1),
                    run("cold", 1, 6.0), run("ram", 1, 2.0), run("scheduled", 1, 2.0)]}  # fmt: skip
    st = sc.summarize(doc)["startups"]["startup2s"]["configs"]
    assert st["scheduled"]["speedup"] == pytest.approx(5.0 / 1.55)
    assert st["scheduled"]["distance"] == pytest.approx(1.55 / 1.5 - 1)
    assert st["scheduled"]["run_distances"] == pytest.approx([0.1, 0.0])
    assert st["cold"]["run_means"] == [4.0, 6.0]
    text = sc.render(sc.summarize(doc))
    assert "+10.0%" in text and "3.23x" in text


def test_bad_startup_is_refused(tmp_path: Path) -> None:
    from thaw_bench.experiments import Bench

    with pytest.raises(ValueError, match="start-ups must be positive"):
        sc.scheduled(Bench(out=tmp_path), startup=0.0)


def test_shared_reachable_charges_overlapping_jobs_for_the_same_disks() -> None:
    """One 1 MiB/s disk; job a (1 MiB) reads at 1 s, job b (2 MiB) at 2 s, both
    submitted at 0. Each alone could have its input moved in its lead time; shared,
    a goes first (earliest deadline) and b gets the second second only."""
    mib = 1 << 20
    params = {"nodes": 1, "disk": "1MiB/s", "penalty": 0.0}
    jobs = [
        {"job": "a", "submit": 0.0, "duration": 1.5, "input_bytes": mib, "holders": [["node0"]]},
        {"job": "b", "submit": 0.0, "duration": 2.5, "input_bytes": 2 * mib, "holders": [["node0"]] * 2},
    ]
    tasks = [{"kind": "map", "job": "a", "start": 1.0}, {"kind": "map", "job": "b", "start": 2.0}]
    run = {"scenario": "homogeneous", "jobs": jobs, "tasks": tasks}
    got = sc.shared_reachable(run, params)
    assert got["input_bytes"] == 3 * mib and got["reachable_bytes"] == pytest.approx(2 * mib)
    assert got["jobs"] == pytest.approx({"a": 1.0, "b": 0.5})
    from thaw_bench.bounds import reachable

    assert reachable(run, params)["reachable_bytes"] == pytest.approx(3 * mib)  # each alone: all of it
