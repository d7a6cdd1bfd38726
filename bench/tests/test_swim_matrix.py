"""The table over several SWIM replays (``thaw_bench.scripts.swim_matrix``):
each replay named from its parameters, its bounds beside each configuration,
and the DYRS-vs-Ignem verdict judged on the spread of the repeats, not on the
mean alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from thaw_bench.scripts import swim_matrix

MiB = 1 << 20


def _run(config: str, rep: int, durations: list[float], source: str) -> dict[str, Any]:
    jobs = [
        {"job": f"j{i}", "duration": d, "submit": 0.0, "input_bytes": MiB * (1 if i else 20),
         "blocks": [f"b{i}"] * (1 if i else 20), "holders": [["node0"]]}
        for i, d in enumerate(durations)
    ]  # fmt: skip
    tasks = [
        {"job": j["job"], "kind": "map", "start": 1.0, "read_end": 1.1, "end": 1.2, "source": source,
         "bytes": j["input_bytes"]}
        for j in jobs
    ]  # fmt: skip
    return {
        "run": f"slow-node-{config}-r{rep}", "config": config, "config_label": config.upper(),
        "scenario": "slow-node", "scenario_label": "slow node", "jobs": jobs, "tasks": tasks,
        "migrations": [],
    }  # fmt: skip


def _doc(tmp: Path, name: str, params: dict[str, Any], runs: list[dict[str, Any]]) -> Path:
    d = tmp / name / "swim-startup1s"
    d.mkdir(parents=True)
    doc = {"experiment": "swim", "params": {"disk": "12MiB/s", "penalty": 0.3, "block_size": MiB, **params}}
    (d / "results.json").write_text(json.dumps(doc | {"runs": runs}))
    return tmp / name


def test_verdicts_need_every_repeat_ahead_and_name_the_replay(tmp_path: Path) -> None:
    # Replay A: DYRS's repeats all under Ignem's; its small jobs slower.
    fb10 = {"trace": "FB-2010_samples_24_times_1hr_0.tsv", "nodes": 4, "byte_scale": 1 / 128}
    a = _doc(tmp_path, "a", fb10, [
        *[_run("cold", r, [10.0, 3.0], "disk") for r in range(3)],
        *[_run("ram", r, [2.0, 1.0], "mem") for r in range(3)],
        *[_run("ignem", r, [6.0 + r, 1.5], "mem") for r in range(3)],
        *[_run("dyrs", r, [4.0 + r * 0.5, 1.8], "mem") for r in range(3)],
    ])  # fmt: skip
    # Replay B: DYRS ahead on the mean only (one repeat over an Ignem one).
    fb09 = {"trace": "FB-2009_samples_24_times_1hr_0.tsv", "nodes": 7, "byte_scale": 1 / 256}
    b = _doc(tmp_path, "b", fb09, [
        *[_run("cold", r, [10.0, 3.0], "disk") for r in range(2)],
        *[_run("ignem", r, [d, 1.5], "mem") for r, d in enumerate((5.0, 7.0))],
        *[_run("dyrs", r, [d, 1.0], "mem") for r, d in enumerate((4.0, 5.5))],
    ])  # fmt: skip
    out = tmp_path / "m.json"
    args = [
        "--title",
        "t",
        "--section",
        "s",
        "--command",
        "c",
        "--commit",
        "abc",
        "--date",
        "d",
        "--machine",
        "m",
    ]
    assert swim_matrix.main([str(a), str(b), *args, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    v = {x["replay"]: x for x in doc["derived"]["dyrs_vs_ignem"]}
    assert set(v) == {"FB-2010, 4 nodes, bytes 1/128", "FB-2009, 7 nodes, bytes 1/256"}
    va, vb = v["FB-2010, 4 nodes, bytes 1/128"], v["FB-2009, 7 nodes, bytes 1/256"]
    assert va["dyrs_ahead_beyond_spread"] and not va["dyrs_small_no_slower"]
    assert vb["dyrs_ahead_on_mean"] and not vb["dyrs_ahead_beyond_spread"] and vb["dyrs_small_no_slower"]
    rows = [r for r in doc["rows"] if r["replay"].startswith("FB-2010")]
    assert [r["configuration"] for r in rows] == ["COLD", "RAM", "IGNEM", "DYRS"]
    dyrs = rows[3]
    assert dyrs["repeats' means (s)"] == "2.90-3.40" and dyrs["read from memory"] == "100%"
    # (6.5 - 3.15) / (6.5 - 1.5): the time DYRS saves over cold as a share of what RAM saves.
    assert dyrs["share of RAM bound"] == "67%" and rows[2]["share of RAM bound"] == "45%"
    assert rows[0]["share of RAM bound"] == "" and dyrs["small jobs (s)"] == "1.80"
