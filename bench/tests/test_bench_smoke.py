"""The evaluation harness, small: a 3-node emulated cluster (separate Thaw
processes, one Dask worker per node), a few SWIM jobs and a sort job, run
under the cold baseline, inputs-in-RAM and DYRS through ``python -m
thaw_bench``'s own functions. Checks the harness's accounting and the
decisions each configuration makes, not timings."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from thaw_bench import experiments as ex
from thaw_bench.__main__ import main as bench_main
from thaw_bench.cluster import ClusterSpec
from thaw_bench.report import check_accounting

pytestmark = pytest.mark.timeout(600)


def _bench(tmp_path: Path) -> ex.Bench:
    spec = ClusterSpec(
        nodes=3, slots=2, disk="64MiB/s", block_size="256KiB", mem_capacity="256MiB", heartbeat_ms=100
    )
    return ex.Bench(spec=spec, out=tmp_path / "out", say=lambda _m: None, root=str(tmp_path / "cluster"))


def _runs(results_dir: Path) -> dict[str, dict[str, Any]]:
    doc = json.loads((results_dir / "results.json").read_text())
    return {r["config"]: r for r in doc["runs"]}


def _check_bytes(run: dict[str, Any]) -> None:
    """Every job's map tasks read exactly its input, and the workers saw the
    same bytes under the job's id (so every read carried it)."""
    assert check_accounting(run) == [], run["run"]
    read: Counter[str] = Counter()
    for t in run["tasks"]:
        if t["kind"] == "map":
            read[t["job"]] += t["bytes"]
    for j in run["jobs"]:
        assert read[j["job"]] == j["input_bytes"], j["job"]
        assert j["worker_stats"]["bytes_read"] == j["input_bytes"], (run["run"], j["job"], j["worker_stats"])
        assert j["end"] >= j["submit"] and j["failed_tasks"] == 0


def first_map_start(run: dict[str, Any], job: dict[str, Any]) -> float:
    return min(t["start"] for t in run["tasks"] if t["kind"] == "map" and t["job"] == job["job"])


def test_swim_smoke_accounting_and_decisions(tmp_path: Path) -> None:
    bench = _bench(tmp_path)
    report = ex.swim(
        bench,
        jobs=12,
        byte_scale=1 / 1024,
        time_scale=1 / 4000,
        configs=["cold", "ram", "dyrs"],
        scenarios=["homogeneous"],
    )
    runs = _runs(report.parent)
    assert set(runs) == {"cold", "ram", "dyrs"}
    for run in runs.values():
        assert len(run["jobs"]) == 12
        _check_bytes(run)
    # The decisions: the baseline moves nothing and reads every block from disk;
    # inputs-in-RAM reads every block from memory.
    cold, ram = runs["cold"], runs["ram"]
    assert cold["migrations"] == []
    assert {t["source"] for t in cold["tasks"] if t["kind"] == "map"} == {"disk"}
    assert {t["source"] for t in ram["tasks"] if t["kind"] == "map"} <= {"mem", "mem-remote"}
    blocks = sum(len(j["blocks"]) for j in ram["jobs"])
    assert ram["preload"]["job"]["blocks_in_memory"] == blocks
    # The report carries the tables and figures.
    text = report.read_text()
    assert "Table I" in text and "No problems" in text
    for fig in ("reads-per-node.png", "memory-use.png", "last-reads.png"):
        assert (report.parent / fig).stat().st_size > 0


def test_sort_with_lead_time_reads_from_memory_under_dyrs(tmp_path: Path) -> None:
    """With lead-time to spare, DYRS has every block in memory before the job's
    tasks start; the cold baseline reads all of them from disk. Runs through the
    command line, as a user would."""
    out = tmp_path / "out"
    code = bench_main(
        [
            "sort", "--nodes", "3", "--disk", "64MiB/s", "--block-size", "256KiB", "--mem", "256MiB",
            "--heartbeat-ms", "100", "--sizes", "4MiB", "--leads", "2", "--configs", "cold,dyrs,dyrs-place",
            "--out", str(out), "--root", str(tmp_path / "cluster"),
        ]
    )  # fmt: skip
    assert code == 0
    runs = _runs(out / "sort")
    for run in runs.values():
        _check_bytes(run)
        (job,) = run["jobs"]
        # The start-up holds the tasks (the plugin's graph goes in at once, the
        # baseline's after it).
        assert job["lead_time_added"] == 2.0 and first_map_start(run, job) - job["submit"] >= 2.0
        assert job["shuffle_bytes"] == job["input_bytes"] == 4 << 20
    sources = {c: Counter(t["source"] for t in r["tasks"] if t["kind"] == "map") for c, r in runs.items()}
    assert sources["cold"] == Counter({"disk": 16})
    assert sources["dyrs"]["disk"] == 0 and sum(sources["dyrs"].values()) == 16
    # With placement, the maps run where their blocks are in memory.
    assert sources["dyrs-place"] == Counter({"mem": 16}), sources
    # The run keeps the plugin's launches: every map, none waiting past the bound.
    placed = runs["dyrs-place"]["placements"]
    assert len(placed) == 16 and all(p["level"] == "worker-memory" and p["delay"] <= 2.0 for p in placed)
    assert runs["dyrs"]["placements"] == [] and runs["dyrs-place"]["cpu"]["scheduler_and_harness_cpu_s"] > 0
    done = [m for m in runs["dyrs"]["migrations"] if m["outcome"] == "done"]
    assert len({m["block_id"] for m in done}) == 16
    # The reducers wrote the whole input back out, sorted.
    written = sum(t["written"] for t in runs["dyrs"]["tasks"] if t["kind"] == "reduce")
    assert written == 4 << 20


def test_bad_arguments_are_clear(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_main(["swim", "--configs", "cold,warp"])
    assert "unknown warp" in capsys.readouterr().err


def test_swim_with_startup_gives_every_job_its_lead_time(tmp_path: Path) -> None:
    """``swim --startup``: each job's first task starts the start-up after its
    submission (the migrate call), durations include it, and the results stay
    apart from the queueing-only SWIM's."""
    out = tmp_path / "out"
    code = bench_main(
        [
            "swim", "--nodes", "3", "--disk", "64MiB/s", "--block-size", "256KiB", "--mem", "256MiB",
            "--heartbeat-ms", "100", "--jobs", "6", "--byte-scale", str(1 / 1024), "--time-scale",
            str(1 / 4000), "--configs", "cold,dyrs", "--scenarios", "homogeneous", "--startup", "0.5",
            "--out", str(out), "--root", str(tmp_path / "cluster"),
        ]
    )  # fmt: skip
    assert code == 0 and not (out / "swim").exists()
    runs = _runs(out / "swim-startup0.5s")
    for run in runs.values():
        _check_bytes(run)
        for job in run["jobs"]:
            assert job["lead_time_added"] == 0.5
            assert first_map_start(run, job) - job["submit"] >= 0.5 and job["duration"] >= 0.5


@pytest.mark.early(39)
def test_the_pipeline_gives_the_same_results_by_every_write_type_and_after_a_kill(tmp_path: Path) -> None:
    from thaw_bench.pipeline import CONFIGS, pipeline

    # An under-store slow enough that the victim's grep outputs (128 KiB) are still
    # being checkpointed at the kill, so the run rebuilds one (at 64 MiB/s both were at
    # times persisted by checkpoints finishing as the worker died, and none rebuilt).
    path = pipeline(
        tmp_path / "out", parts=3, part_size=256 << 10, nodes=2, slots=2, ufs="256KiB/s", repeats=1,
        say=lambda _m: None,
    )  # fmt: skip
    doc = json.loads(path.read_text())
    runs = {r["config"]: r for r in doc["runs"]}
    assert set(runs) == set(CONFIGS)
    assert doc["summary"]["same_results"], doc["runs"]
    for config in ("async-through-kill", "async-through-kill-process"):
        killed = runs[config]
        # Whatever the kill lost (what was not checkpointed yet) was rebuilt, none failed.
        # A file counted lost at the kill whose checkpoint the worker had finished
        # just before it died is persisted by the master a moment later (it publishes
        # the copy), and then needs no rebuild: nothing stays lost either way.
        assert killed["recomputations_failed"] == 0, killed
        assert killed["lost_at_end"] == 0, killed
        assert killed["recomputations_done"] >= 1 or killed["lost_at_kill"] <= 1, killed
    # The Dask executor's reruns ran in its workers' interpreters, each without error.
    reruns = runs["async-through-kill"]["timeline"].get("reruns", [])
    assert all(r["where"] == "in-process" and not r["error"] for r in reruns), reruns
