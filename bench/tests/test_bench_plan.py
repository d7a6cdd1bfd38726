"""Which runs an experiment makes: the single-job sweep runs the baselines
only without added lead-time, and the SQL experiment repeats every
configuration, each repeat starting one configuration later (no cluster: the
run itself is replaced by a recorder); and the section's tables are made from
a run's record as the results file says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from thaw_bench import sql
from thaw_bench.configs import CONFIGS, SCENARIOS
from thaw_bench.experiments import configs_at_lead


def test_baselines_run_without_added_lead_time_only() -> None:
    configs = ["cold", "ram", "ignem", "dyrs"]
    assert configs_at_lead(configs, 0.0, [0.0, 5.0]) == configs
    assert configs_at_lead(configs, 5.0, [0.0, 5.0]) == ["ignem", "dyrs"]
    # Without a run at no added lead-time the baselines keep their own rows.
    assert configs_at_lead(configs, 5.0, [5.0, 10.0]) == configs
    assert configs_at_lead(["cold"], 5.0, [0.0, 5.0]) == ["cold"]


def test_sql_repeats_every_configuration_in_rotated_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def run_config(cluster: Any, data: Any, config: Any, scenario: Any, *rest: Any) -> dict[str, Any]:
        calls.append(config.name)
        return {"run": f"sql-{scenario.name}-{config.name}", "config": config.name, "jobs": []}

    monkeypatch.setattr(sql, "run_config", run_config)
    monkeypatch.setattr(sql, "reference_rows", lambda *a, **k: {})
    configs = [CONFIGS[c] for c in ("cold", "ignem", "dyrs")]
    runs = sql.run_sql(
        object(),
        configs,
        SCENARIOS["slow-node"],
        tmp_path,
        queries=[6],
        data=object(),
        repeats=3,  # type: ignore[arg-type]
    )
    assert calls == ["cold", "ignem", "dyrs", "ignem", "dyrs", "cold", "dyrs", "cold", "ignem"]
    assert [r["run"] for r in runs][:3] == [
        "sql-slow-node-cold-r0",
        "sql-slow-node-ignem-r0",
        "sql-slow-node-dyrs-r0",
    ]
    assert sorted(r["repeat"] for r in runs) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert len({r["run"] for r in runs}) == 9
    assert len(list(tmp_path.glob("sql-*.json"))) == 9


def _run(config: str, duration: float, source: str, lead: float = 0.0, rep: int = 0) -> dict[str, Any]:
    return {
        "run": f"{config}-{lead}-{rep}",
        "config": config,
        "config_label": config,
        "scenario": "homogeneous",
        "cpu": {"busy_share": 0.5},
        "migrations": [{"outcome": "done"}, {"outcome": "failed: no room"}],
        "jobs": [{"job": "sort-8MiB", "duration": duration, "variant": "8MiB, +0s", "lead_time_added": lead}],
        "tasks": [
            {"job": "sort-8MiB", "kind": "map", "start": 1.0, "read_end": 1.5, "end": 2.0, "source": source},
            {"job": "sort-8MiB", "kind": "map", "start": 2.0, "read_end": 2.1, "end": 3.0, "source": "disk"},
        ],
    }


def test_classic_tables_medians_ranges_and_relative_to_cold(tmp_path: Path) -> None:
    from thaw_bench.scripts import classic_tables

    runs = [_run("cold", d, "disk", rep=i) for i, d in enumerate((10.0, 12.0, 11.0))]
    runs += [_run("dyrs", d, "mem", rep=i) for i, d in enumerate((8.0, 8.8, 9.0))]
    runs += [_run("dyrs", d, "mem", lead=5.0, rep=i) for i, d in enumerate((13.0, 14.0, 16.0))]
    src = tmp_path / "results.json"
    src.write_text(json.dumps({"experiment": "sort", "runs": runs}))
    out = tmp_path / "t.json"
    args = [str(src), "--title", "t", "--section", "s", "--command", "c", "--commit", "abc", "--date", "d"]
    assert classic_tables.main([*args, "--machine", "m", "--out", str(out)]) == 0
    rows = {r["configuration"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["cold"]["job (s), median"] == "11.0" and rows["cold"]["job vs cold"] == ""
    assert rows["dyrs"]["job (s), median"] == "8.80" and rows["dyrs"]["job (s), range"] == "8.00-9.00"
    assert rows["dyrs"]["job vs cold"] == "-20%"
    assert rows["dyrs +5s"]["job vs cold"] == "+27%"
    assert rows["dyrs"]["map reads from memory"] == "50%"
    assert rows["dyrs"]["map read (s), mean"] == "0.300"
    assert rows["dyrs"]["map phase (s), median"] == "2.00"
    assert rows["dyrs"]["migrations done, median"] == "1"
