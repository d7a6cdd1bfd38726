"""The benchmark report on synthetic results (no cluster): summary numbers,
the accounting check, and the files write_report leaves."""

from __future__ import annotations

import copy
import json
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

from thaw_bench import figures, report

BS = 1 << 20
INTERFERENCE = [{"t": 1.0, "node": "node0", "on": True}, {"t": 3.0, "node": "node0", "on": False}]


def _job(name: str, i: int, duration: float, blocks: list[int]) -> dict[str, Any]:
    return {
        "job": name, "kind": "swim", "submit": float(i), "end": i + duration, "duration": duration,
        "input_bytes": len(blocks) * BS, "shuffle_bytes": 0, "output_bytes": 0, "maps": len(blocks),
        "blocks": blocks, "failed_tasks": 0, "migration": None, "trace": {"id": name},
        "variant": "", "lead_time_added": 0.0,
    }  # fmt: skip


def _map(job: str, block: int, k: int, start: float, map_s: float, source: str) -> dict[str, Any]:
    return {
        "job": job, "kind": "map", "node": f"node{block % 3}", "path": f"/inputs/{job}/part-00000",
        "offset": k * BS, "block": block, "bytes": BS, "expected": BS, "source": source, "stats": {},
        "start": start, "read_end": start + map_s / 2, "end": start + map_s,
    }  # fmt: skip


def _run(
    config: str, scenario: str, durations: list[float], map_s: float, source: str, **extra: Any
) -> dict[str, Any]:
    """One run of len(durations) jobs: 1, 2, ... blocks, the last one 12 (so the
    sizes span the bins); every block read by one map task taking ``map_s``,
    half of it reading; one "done" migration per block under ignem/dyrs."""
    jobs, tasks, migrations = [], [], []
    block = 1000
    for i, d in enumerate(durations):
        name = f"job{i}"
        n = 12 if i == len(durations) - 1 else i + 1
        blocks = list(range(block, block + n))
        block += n
        jobs.append(_job(name, i, d, blocks))
        for k, b in enumerate(blocks):
            start = i + 0.1 * k
            tasks.append(_map(name, b, k, start, map_s, source))
            if config in ("ignem", "dyrs"):
                migrations.append(
                    {"block_id": b, "worker_id": 1, "node": f"node{b % 3}", "source": "disk",
                     "start": start - 1, "end": start - 0.5, "bytes": BS, "outcome": "done"}
                )  # fmt: skip
        tasks.append(
            {"job": name, "kind": "reduce", "node": "node0", "reducer": 0, "shuffled": 0, "written": 0,
             "start": i + d - 0.1, "end": i + d}
        )  # fmt: skip
    if config in ("ignem", "dyrs"):
        migrations.append(
            {"block_id": 1, "worker_id": 1, "node": "node1", "source": "disk", "start": 0.0, "end": 0.1,
             "bytes": BS, "outcome": "failed: disk gone"}
        )  # fmt: skip
    samples = [
        {"t": t * 0.25, "node": f"node{k}", "alive": True,
         "mem_used": (t % 4) * BS if config != "cold" else 0, "buffer_used": 0,
         "estimate_ns_per_byte": 0.0 if t == 0 else 5.0 + k + (t % 3), "queued": 1,
         "active": 1, "interference": 2 if k == 0 else 0}
        for t in range(20)
        for k in range(3)
    ]  # fmt: skip
    run = {
        "run": f"{scenario}-{config}", "config": config, "config_label": config.upper(), "scenario": scenario,
        "scenario_label": f"{scenario} label", "policy": "none" if config == "cold" else "dyrs",
        "priority": None, "wall_s": 30.0, "pages_dropped": 10, "preload": None, "jobs": jobs, "tasks": tasks,
        "samples": samples, "interference": INTERFERENCE, "migrations": migrations,
    }  # fmt: skip
    if config == "ram":
        run["preload"] = {"seconds": 4.0, "job": {}}
    run.update(extra)
    return run


def _results(runs: list[dict[str, Any]], experiment: str = "swim") -> dict[str, Any]:
    return {
        "experiment": experiment, "title": "SWIM replay", "date": "2026-11-23",
        "command": "python -m thaw_bench swim --jobs 3", "params": {"block_size": BS, "nodes": 3},
        "runs": runs,
    }  # fmt: skip


@pytest.fixture
def swim() -> dict[str, Any]:
    # Means: cold 10, ram 6 (40% faster), dyrs 8 (20%: half the upper bound).
    return _results(
        [
            _run("cold", "homogeneous", [4.0, 10.0, 16.0], 2.0, "disk"),
            _run("ram", "homogeneous", [2.0, 6.0, 10.0], 0.5, "mem"),
            _run("dyrs", "homogeneous", [3.0, 8.0, 13.0], 1.0, "mem-remote"),
        ]
    )


def test_summary_speedups_and_upper_bound_share(swim: dict[str, Any]) -> None:
    s = report.summarize(swim)
    sc = s["scenarios"]["homogeneous"]
    configs = sc["configs"]
    assert list(configs) == ["cold", "ram", "dyrs"]
    assert configs["cold"]["mean_job_s"] == pytest.approx(10.0)
    assert configs["dyrs"]["speedup"] == pytest.approx(0.2)
    assert configs["ram"]["speedup"] == pytest.approx(0.4)
    assert configs["dyrs"]["upper_bound_share"] == pytest.approx(0.5)
    assert configs["ram"]["upper_bound_share"] == pytest.approx(1.0)
    # Maps: 2 s cold, 0.5 s ram (75%), 1 s dyrs (50%: two thirds of the bound).
    assert configs["dyrs"]["mean_map_s"] == pytest.approx(1.0)
    assert configs["dyrs"]["map_speedup"] == pytest.approx(0.5)
    assert configs["dyrs"]["map_upper_bound_share"] == pytest.approx(2 / 3)
    assert configs["dyrs"]["mean_read_s"] == pytest.approx(0.5)
    assert configs["dyrs"]["read_speedup"] == pytest.approx(0.5)
    assert configs["dyrs"]["mem_read_share"] == pytest.approx(1.0)
    assert configs["cold"]["mem_read_share"] == pytest.approx(0.0)
    # 1 + 2 + 12 blocks, one "done" migration each; the failed one is not counted.
    assert configs["dyrs"]["maps"] == 15
    assert configs["dyrs"]["blocks_migrated"] == 15
    assert configs["dyrs"]["migrations_by_outcome"] == {"done": 15, "failed": 1}
    # Bins: job0 1 block (small), job1 2 blocks (medium), job2 12 blocks (large).
    bins = configs["dyrs"]["bins"]
    assert {k: b["jobs"] for k, b in bins.items()} == {"small": 1, "medium": 1, "large": 1}
    assert bins["small"]["speedup"] == pytest.approx(0.25)
    assert bins["large"]["speedup"] == pytest.approx(1 - 13 / 16)
    assert bins["small"]["upper_bound_share"] == pytest.approx(0.5)
    assert configs["ram"]["preload_s"] == 4.0
    assert configs["dyrs"]["wall_s"] == 30.0
    assert sc["variants"] == []  # swim jobs carry variant "": no per-variant rows
    json.dumps(s)  # JSON-able


def test_no_baseline_gives_no_speedup(swim: dict[str, Any]) -> None:
    swim["runs"] = [r for r in swim["runs"] if r["config"] != "cold"]
    configs = report.summarize(swim)["scenarios"]["homogeneous"]["configs"]
    assert configs["dyrs"]["speedup"] is None
    assert configs["dyrs"]["upper_bound_share"] is None


def test_bins_by_input_size_in_blocks() -> None:
    assert report.size_bin({"input_bytes": BS}, BS) == "small"
    assert report.size_bin({"input_bytes": 0}, BS) == "small"
    assert report.size_bin({"input_bytes": BS + 1}, BS) == "medium"
    assert report.size_bin({"input_bytes": 8 * BS}, BS) == "medium"
    assert report.size_bin({"input_bytes": 8 * BS + 1}, BS) == "large"
    assert report.size_bin({"blocks": [1, 2, 3]}, None) == "medium"  # no block size: count the blocks


def test_variants_rows_and_added_lead_time() -> None:
    def single(config: str, size: int, duration: float, lead: float = 0.0) -> dict[str, Any]:
        run = _run(config, "homogeneous", [duration], 1.0, "disk", run=f"{size}MiB-lead{lead:g}-{config}")
        run["jobs"][0].update(variant=f"{size} MiB, +{lead:g}s", input_bytes=size * BS, lead_time_added=lead)
        return run

    res = _results(
        [
            single("cold", 1, 10.0),
            single("ram", 1, 6.0),
            single("ignem", 1, 8.0),
            single("cold", 1, 20.0, lead=10.0),
            single("ignem", 1, 7.0, lead=10.0),
            single("cold", 4, 40.0),
            single("ignem", 4, 30.0),
        ],
        experiment="wordcount",
    )
    rows = report.summarize(res)["scenarios"]["homogeneous"]["variants"]
    got = {(r["variant"], r["config"]): r for r in rows}
    assert got[("1 MiB, +0s", "ignem")]["speedup"] == pytest.approx(0.2)
    assert got[("1 MiB, +0s", "ignem")]["upper_bound_share"] == pytest.approx(0.5)
    # Extra lead-time is measured against cold without it (Ignem's "Ignem+10s").
    assert got[("1 MiB, +10s", "ignem")]["speedup"] == pytest.approx(0.3)
    assert got[("1 MiB, +10s", "cold")]["speedup"] == pytest.approx(-1.0)
    assert got[("4 MiB, +0s", "ignem")]["speedup"] == pytest.approx(0.25)
    assert got[("4 MiB, +0s", "ignem")]["upper_bound_share"] is None  # no inputs-in-RAM run of 4 MiB
    # Map phase: first map start (0) to last map end (12 maps 0.1 s apart, 1 s each).
    assert got[("1 MiB, +0s", "ignem")]["map_phase_s"] == pytest.approx(2.1)
    assert [r["input_bytes"] for r in rows] == sorted(r["input_bytes"] for r in rows)


def test_accounting_clean(swim: dict[str, Any]) -> None:
    for run in swim["runs"]:
        assert report.check_accounting(run) == []


def test_accounting_catches_double_read_missing_block_and_bytes(swim: dict[str, Any]) -> None:
    run = copy.deepcopy(swim["runs"][0])
    maps = [t for t in run["tasks"] if t["kind"] == "map"]
    job1 = next(t for t in maps if t["job"] == "job1")
    run["tasks"].append(dict(job1))  # job1's first block read twice
    lost = next(t for t in maps if t["job"] == "job2")
    run["tasks"].remove(lost)  # job2 misses a block
    job0 = next(t for t in maps if t["job"] == "job0")
    job0["bytes"] = BS - 10  # a short read
    problems = report.check_accounting(run)
    assert f"job job1: block {job1['block']} was read by 2 map tasks (expected 1)" in problems
    assert f"job job1: map tasks read {3 * BS} bytes, input is {2 * BS} bytes" in problems
    assert f"job job2: block {lost['block']} was not read by any map task" in problems
    assert (
        f"job job0: block {job0['block']}: map task on {job0['node']} read {BS - 10} bytes, expected {BS}"
        in problems
    )
    assert f"job job0: map tasks read {BS - 10} bytes, input is {BS} bytes" in problems
    assert len(problems) == 6  # and job2's byte sum


def test_accounting_of_sql_queries() -> None:
    run: dict[str, Any] = {
        "run": "q",
        "tasks": [],
        "jobs": [
            {"job": "q1", "kind": "sql", "duration": 1.0, "input_bytes": 5, "blocks": [1], "correct": True}
        ],
    }
    assert report.check_accounting(run) == []  # the engine read on its own: no task records to check
    run["jobs"][0]["correct"] = False
    assert report.check_accounting(run) == ["job q1: result differs from the reference"]
    run["jobs"][0]["kind"] = "swim"  # a map-reduce job without its map tasks is wrong
    assert report.check_accounting(run)[:2] == [
        "job q1: block 1 was not read by any map task",
        "job q1: map tasks read 0 bytes, input is 5 bytes",
    ]


def test_write_report(swim: dict[str, Any], tmp_path: Path) -> None:
    # A second scenario makes the interference table appear.
    swim["runs"].append(_run("dyrs", "slow-node", [5.0, 9.0, 14.0], 1.5, "disk"))
    bad = swim["runs"][0]["tasks"]
    bad.append(dict(next(t for t in bad if t["kind"] == "map")))
    paper = {
        "ignem Table I (homogeneous)": {"cold": 14.4, "ignem": 12.7, "ram": 11.4},
        "ignem Table II, map tasks (homogeneous)": {"cold": 6.44, "ram": 0.28},
        "dyrs Table I (one slow node)": {"cold": 31.5, "dyrs": 20.9},
        "dyrs Table II (sort runtime, s)": {"slow-node": 137.0, "alt10": 127.0},
    }
    path = report.write_report(swim, tmp_path / "out", paper=paper)
    assert path == tmp_path / "out" / "report.md"
    text = path.read_text()
    home, slow = text.split("## Scenario slow-node")
    assert (
        "| Configuration | Jobs | Absolute Duration (s) | Speedup w.r.t cold | Share of upper bound |" in home
    )
    assert "| COLD | 3 | 10.0 |  |  |" in home  # the baseline's relative cells are blank, as in the papers
    assert "| DYRS | 3 | 8.00 | 20% | 50% |" in home
    assert (
        "DYRS improves the mean job duration by 20% w.r.t. cold; it realizes 50% of the upper bound." in home
    )
    assert (
        "| DYRS | 15 | 1.00 | 50% | 67% | 0.500 | 50% | 100% | 0% | 15 |" in home
    )  # map tasks (read remotely: not memory-local)
    assert "| small (<= 1 block) | DYRS | 1 | 3.00 | 25% | 50% |" in home
    # Paper numbers with the paper's own speedups (12%, 21%, 96%), paper-only rows,
    # each entry in the scenario its name mentions.
    assert "| 12.7 | 12% |" in home and "| 11.4 | 21% |" in home
    assert "| ignem | - |" in home
    assert "| 0.280 | 96% |" in home
    assert "dyrs Table I (one slow node)" not in home
    assert "| 20.9 | 34% |" in slow and "ignem Table I" not in slow
    # The interference table comes before the scenarios; the paper's column is keyed by scenario.
    assert "DYRS, Table II" in home and "| slow-node label | slow-node | - | - | 9.33 | 137 |" in home
    assert "python -m thaw_bench swim --jobs 3" in home and "2026-11-23" in home
    assert "**homogeneous-cold**: 2 problem(s)" in home and "was read by 2 map tasks" in home
    for name in figures.FIGURES.values():
        assert (tmp_path / "out" / name).stat().st_size > 1000, name
        assert f"]({name})" in text
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["accounting"]["homogeneous-dyrs"] == []
    assert summary["scenarios"]["homogeneous"]["configs"]["dyrs"]["speedup"] == pytest.approx(0.2)


def test_write_report_sql_without_tasks(tmp_path: Path) -> None:
    def sql(config: str, durations: dict[str, float]) -> dict[str, Any]:
        jobs = [
            {"job": q, "kind": "sql", "duration": d, "input_bytes": i * BS, "blocks": [], "failed_tasks": 0}
            for i, (q, d) in enumerate(durations.items(), 1)
        ]
        return {"run": f"h-{config}", "config": config, "scenario": "homogeneous", "wall_s": 1.0,
                "jobs": jobs, "tasks": [], "samples": [], "interference": [], "migrations": []}  # fmt: skip

    res = _results(
        [sql("cold", {"q15": 4.0, "q3": 2.0}), sql("dyrs", {"q15": 2.0, "q3": 1.5})], experiment="sql"
    )
    text = report.write_report(res, tmp_path).read_text()
    assert "Per query, by input size" in text
    assert "| q15 | 1 | 4.00 | 2.00 | 50% |" in text
    assert "| q3 | 2 | 2.00 | 1.50 | 25% |" in text
    assert "Table II: map tasks" not in text
    assert all((tmp_path / n).stat().st_size > 1000 for n in figures.FIGURES.values())


def test_cli_rerenders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "results.json"
    src.write_text(json.dumps(_results([_run("cold", "homogeneous", [1.0], 1.0, "disk")])))
    paper = tmp_path / "paper.json"
    paper.write_text(json.dumps({"Table I": {"cold": 14.4, "ignem": 12.7}}))
    assert report.main([str(src), "--paper", str(paper)]) == 0  # beside the results by default
    assert "| Paper Table I (s) |" in (tmp_path / "report.md").read_text()
    # `python -m thaw_bench.report` reaches main (in-process, --help: no second render).
    monkeypatch.setattr(sys, "argv", ["report", "--help"])
    monkeypatch.delitem(sys.modules, "thaw_bench.report")  # as `-m` finds it: not imported yet
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("thaw_bench.report", run_name="__main__")
    assert exit_.value.code == 0
    assert "--out" in capsys.readouterr().out
