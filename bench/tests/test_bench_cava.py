"""The CAVA evaluation harness (``python -m thaw_bench cava``): its workloads
have the shapes of CAVA, Table III, its applications' work writes what it
says, its ``--tiny`` version runs end to end (a real LocalCluster under each
policy, Dask; the affinity and workload experiments) and writes well-formed
results, and a run that fails is recorded as failed. Checks
structure and decisions, never timings."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from thaw_bench.__main__ import main as bench_main
from thaw_bench.cava import policies, report, runner, tasks, workloads

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("preset", ["full", "quick", "tiny"])
def test_workloads_have_the_shapes_of_table_iii(preset: str) -> None:
    scale = workloads.PRESETS[preset]
    for name in scale.workloads:
        shape = workloads.SHAPES[name]
        wl = workloads.generate_workload(shape, scale, seed=3)
        d = wl.describe(scale)
        assert d["apps"] == scale.apps == len(wl.apps)
        # The distinct input does not fit in the cluster's memory.
        assert d["distinct_input_bytes"] > d["cluster_memory_bytes"], d
        # HD-H: hot files (read more than three times) hold more than half of it.
        assert d["hot_files"] >= 1
        assert (d["hot_share_of_input"] > 0.5) == (shape.hot == "HD-H"), d
        assert d["hot_shared_across_classes"] == shape.cross, d
        # The mix: the high-affinity kind dominates CA-H, the medium one CA-M.
        top = max(d["kinds"], key=d["kinds"].get)
        assert top == ("grep" if shape.mix == "CA-H" else "sort"), d
        for f in wl.files.values():
            assert f.size == f.blocks * scale.block_size and f.reads >= 1
            if not shape.cross and f.hot:
                assert len({workloads.APPS[k].affinity for k in f.readers}) == 1
        # Seeded: the same arguments give the same workload.
        again = workloads.generate_workload(shape, scale, seed=3)
        assert [(a.name, a.path) for a in again.apps] == [(a.name, a.path) for a in wl.apps]
    tw = workloads.trace_workload(scale, seed=3)
    assert len(tw.apps) == scale.trace_jobs
    assert any(f.hot for f in tw.files.values())


def test_the_work_writes_in_pieces_what_each_kind_says() -> None:
    data = random.Random(1).randbytes(64 * 1024)
    assert list(tasks._grep(data, 10)) == []
    runs = list(tasks._sort(data, 10))
    assert len(runs) == tasks.PIECES and sum(map(len, runs)) == len(data)
    for run in runs:
        keys = np.frombuffer(run, dtype=np.uint64)
        assert (keys[1:] >= keys[:-1]).all()
    ranks = list(tasks._pagerank(data, 8))
    assert len(ranks) == tasks.PIECES
    assert sum(map(len, ranks)) == pytest.approx(len(data) * workloads.APPS["pagerank"].write_ratio, rel=0.01)


def _check_run(run: dict[str, Any], files: dict[str, int]) -> None:
    assert "failed" not in run, run
    assert run["wall_s"] > 0 and run["failed_apps"] == [], run["run"]
    for app in run["apps"]:
        # Every block of the app's input was read exactly once by its tasks,
        # and it wrote what its kind writes.
        assert app["bytes"] == files[app["path"]], (run["run"], app)
        assert app["bytes_mem"] + app["bytes_ufs"] == app["bytes"]
        assert app["runtime"] > 0 and app["error"] is None
        assert (app["written"] > 0) == (workloads.APPS[app["kind"]].write_ratio > 0), app
        # The master saw the application (the Dask plugins' reports).
        assert app["master"] is not None and app["master"]["tasks"] >= 1, app
    share = run["cache"]["hot_cached_share"]
    assert share is not None and 0.0 <= share <= 1.0
    assert 0.0 <= run["hit_ratio"] <= 1.0


def test_tiny_cava_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "cava"
    # (The trace replay runs the same way as the workloads: left out for time.)
    args = ["--experiments", "affinity,workloads", "--policies", "no-cache,lru,cava"]
    assert bench_main(["cava", "--tiny", "--out", str(out), *args]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert (out / "report.md").read_text().startswith("# CAVA")
    assert doc["command"].startswith("python -m thaw_bench cava")

    # Workloads: every one ran under every policy asked for.
    wl = doc["workloads"]
    assert set(wl["described"]) == {"W1", "W5"}
    sizes = {p: f["size"] for w in wl["files"].values() for p, f in w.items()}
    runs = {(r["workload"], r["policy"]): r for r in wl["runs"]}
    for w in ("W1", "W5"):
        for pol in ("no-cache", "lru", "cava"):
            _check_run(runs[(w, pol)], sizes)
            used = {x["policy"] for x in runs[(w, pol)]["cache"]["workers"]}
            assert used == {policies.POLICIES[pol].cache_policy}, used
        # The decisions: No-Cache reads leave nothing in memory; LRU caches
        # what it reads; the master classifies the applications it measured.
        nc = runs[(w, "no-cache")]
        assert nc["hit_ratio"] == 0.0 and nc["cache"]["hot_cached_bytes"] == 0
        assert runs[(w, "lru")]["cache"]["hot_cached_bytes"] > 0
        classes = {a["class"] for a in runs[(w, "cava")]["apps"]}
        assert classes & set(workloads.CLASSES), classes
        cell = wl["summary"]["table"][w]
        assert cell["no-cache"]["normalized"] == 1.0 and cell["lru"]["normalized"] > 0
        assert set(cell["cava"]["kind_normalized"]) <= set(workloads.APPS)
    assert wl["summary"]["means"]["cava"]["workloads"] == 2
    assert doc["timeline"]["workload"] == "W5" and "cava" in doc["timeline"]["runs"]
    assert doc["figure"] and (out / doc["figure"]).is_file()

    assert "trace" not in doc

    # Affinity: the hot runs read all of their input from memory, the cold
    # ones none of it; the master measured each kind and classified it as the
    # decision tree says for its figures against its thresholds.
    for kind, k in doc["affinity"]["kinds"].items():
        assert k["runtime_cold"] > 0 and k["runtime_hot"] > 0, kind
        assert k["hit_ratio_hot"] == 1.0 and k["hit_ratio_cold"] == 0.0, kind
        assert k["benefit"] is not None and 0.0 <= k["benefit"] <= 1.0
        cold = next(r for r in k["runs"] if "-cold-" in r["run"])["apps"][0]["master"]
        assert cold["source"] == "measured", (kind, cold)
        above = (cold["cpu_util"] > cold["cpu_threshold"]) + (cold["write_rate"] > cold["write_threshold"])
        assert cold["class"] == workloads.CLASSES[above], (kind, cold)
    # Grep neither computes nor writes much: high affinity.
    assert doc["affinity"]["kinds"]["grep"]["class_cold"] == ["high"]


def test_a_run_that_fails_is_recorded_with_its_error(tmp_path: Path) -> None:
    class NoDask:
        def register_plugin(self, *_: Any, **__: Any) -> None:
            raise RuntimeError("no scheduler here")

    ctx = runner.Context(workloads.PRESETS["tiny"], NoDask(), tmp_path)
    wl = workloads.Workload("W0", [], {})
    run = runner.run_on_fresh_cluster(ctx, wl, policies.POLICIES["lru"], "wl-W0-lru-r0")
    assert "no scheduler here" in run["failed"]
    summary = report.summarize([run], [policies.POLICIES["no-cache"], policies.POLICIES["lru"]])
    assert "failed" in summary["table"]["W0"]["lru"] and summary["means"]["lru"]["workloads"] == 0
