"""The migration and small-job tables (``thaw_bench.scripts.swim_migrations``):
copies counted on the interfered node, the last 30 copies' share there, drops,
and small jobs' reads from memory, from a hand-made results file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from thaw_bench.scripts import swim_migrations


def _run(config: str, slow_copies: int, fast_copies: int, dropped: int) -> dict[str, Any]:
    migs = [
        {"outcome": "done", "node": "node0", "start": 1.0 + i, "end": 1.5 + i, "jobs": ["big"]}
        for i in range(slow_copies)
    ] + [
        {"outcome": "done", "node": "node1", "start": 0.02 * i, "end": 0.02 * i + 0.05, "jobs": ["small"]}
        for i in range(fast_copies)
    ]  # fmt: skip
    migs += [{"outcome": "read-first", "node": "0", "start": 0.0, "end": 0.2, "jobs": ["big"]}] * dropped
    jobs = [
        {"job": "small", "submit": 0.0, "duration": 1.0, "blocks": [1]},
        {"job": "big", "submit": 0.0, "duration": 4.0, "blocks": [2, 3, 4]},
    ]
    tasks = [
        {"job": "small", "kind": "map", "source": "mem"},
        {"job": "big", "kind": "map", "source": "disk"},
    ]
    return {
        "config": config, "config_label": config.upper(), "scenario": "slow-node",
        "interference": [{"t": 0.0, "node": "node0", "on": True}],
        "jobs": jobs, "tasks": tasks, "migrations": migs,
    }  # fmt: skip


def test_tables_count_where_copies_went_and_small_jobs(tmp_path: Path) -> None:
    doc = {"runs": [_run("dyrs", 2, 40, 3), _run("naive", 10, 40, 1), _run("cold", 0, 0, 0)]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    migr, small = swim_migrations.tables(swim_migrations.load(path), "slow-node")
    assert [r["configuration"] for r in migr] == ["DYRS", "NAIVE"]  # cold has no migrations row
    dyrs, naive = migr
    assert dyrs["migrations per run"] == "42" and dyrs["on the slow node, per run"] == "2"
    assert dyrs["copy time there, median (s)"] == "0.500"
    assert dyrs["copy time elsewhere, median (s)"] == "0.050"
    # The slow node's copies end last (1.5 s and later): all of them are among the last 30.
    assert dyrs["of the last 30, on the slow node"] == "2"
    assert naive["of the last 30, on the slow node"] == "10"
    assert dyrs["dropped, read first, per run"] == "3"
    assert [r["configuration"] for r in small] == ["COLD", "DYRS", "NAIVE"]
    assert small[1]["small jobs (s)"] == "1.00" and small[1]["small jobs' map tasks from memory"] == "100%"
    assert small[1]["submission to its block's copy, median (s)"] == "0.390"
    assert "| configuration |" in swim_migrations.markdown(migr)
