"""The tables of BENCHMARKS.md's sort, wordcount, interference and TPC-H section
(Ignem, Table III and Fig. 8; DYRS, Table II and Figs. 4 and 11) from a run's
``results.json``, as a results file (results/README.md's format): one row per
(scenario, input, added lead-time, configuration), with the median job
duration over the repeats and its range, the median relative to cold's (same
scenario and input, no added lead-time), and what explains it, measured from
the run's own record: the map phase (first map start to last map end), the
mean time a map task spent reading its block, the share of map tasks that read
from memory, the migrations done (the master's events of the run, the
inputs-in-RAM preload's included), and the share of the machine's cores busy.

SQL rows are one per (query, configuration): the query's run time (from
leaving the queue to its end, DYRS, Fig. 4's query duration), and its time
from submission (the queue wait in it), plus an "all queries" row with
the mean of the per-query speedups (DYRS, Fig. 4's "36% faster on average").

``python -m thaw_bench.scripts.classic_tables bench-out/sort/results.json
--title T --section S --table T --command CMD --commit C --date D --machine M
--out results/NAME.json``
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..results import MIGRATED, map_tasks

MEM = frozenset({"mem", "mem-remote"})


def _s(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _pct(x: float) -> str:
    return f"{x * 100:+.0f}%"


def _median_range(xs: list[float]) -> tuple[str, str]:
    return _s(statistics.median(xs)), f"{_s(min(xs))}-{_s(max(xs))}"


def _key(run: dict[str, Any], job: dict[str, Any]) -> tuple[str, str, float, str]:
    variant = str(job.get("variant") or "").split(",")[0]
    return run["scenario"], variant, float(job.get("lead_time_added") or 0.0), run["config"]


def job_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per (scenario, input, added lead-time, configuration) of a
    sort, wordcount or interference run (one job per run)."""
    groups: dict[tuple[str, str, float, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    labels: dict[str, str] = {}
    for run in doc["runs"]:
        labels[run["config"]] = run.get("config_label", run["config"])
        maps = map_tasks(run)
        migrated = sum(
            1 for m in run.get("migrations") or [] if str(m.get("outcome", "")).split(":")[0] in MIGRATED
        )
        for job in run["jobs"]:
            g = groups[_key(run, job)]
            mine = [t for t in maps if t.get("job") == job["job"]]
            g["duration"].append(float(job["duration"]))
            if mine:
                g["map_phase"].append(max(t["end"] for t in mine) - min(t["start"] for t in mine))
                reads = [t["read_end"] - t["start"] for t in mine if t.get("read_end") is not None]
                if reads:
                    g["read"].append(sum(reads) / len(reads))
                g["mem"].append(sum(1 for t in mine if t.get("source") in MEM) / len(mine))
            g["migrated"].append(float(migrated))
            if run.get("cpu"):
                g["busy"].append(float(run["cpu"]["busy_share"]))
    rows = []
    for (scenario, variant, lead, config), g in groups.items():
        base = groups.get((scenario, variant, 0.0, "cold"))
        med, rng = _median_range(g["duration"])
        row = {
            "scenario": scenario,
            "input": variant,
            "configuration": labels[config] + (f" +{lead:g}s" if lead else ""),
            "runs": str(len(g["duration"])),
            "job (s), median": med,
            "job (s), range": rng,
            "job vs cold": "",
            "map phase (s), median": _s(statistics.median(g["map_phase"])) if g["map_phase"] else "-",
            "map phase vs cold": "",
            "map read (s), mean": f"{statistics.mean(g['read']):.3f}" if g["read"] else "-",
            "map reads from memory": f"{statistics.mean(g['mem']) * 100:.0f}%" if g["mem"] else "-",
            "migrations done, median": f"{statistics.median(g['migrated']):.0f}",
            "cores busy": f"{statistics.mean(g['busy']) * 100:.0f}%" if g["busy"] else "-",
        }
        if base and not (config == "cold" and lead == 0.0):
            row["job vs cold"] = _pct(
                statistics.median(g["duration"]) / statistics.median(base["duration"]) - 1
            )
            if g["map_phase"] and base["map_phase"]:
                row["map phase vs cold"] = _pct(
                    statistics.median(g["map_phase"]) / statistics.median(base["map_phase"]) - 1
                )
        rows.append(row)
    return rows


def query_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per (query, configuration) of a SQL run (run time, time from
    submission, bytes the workers served it from memory, the share of its
    input in memory when it left the queue), then one per
    configuration over all queries (the mean of the queries' speedups)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    mem: dict[tuple[str, str], list[float]] = defaultdict(list)
    waited: dict[tuple[str, str], list[float]] = defaultdict(list)
    at_start: dict[tuple[str, str], list[float]] = defaultdict(list)
    sizes: dict[str, int] = {}
    labels: dict[str, str] = {}
    for run in doc["runs"]:
        labels[run["config"]] = run.get("config_label", run["config"])
        for job in run["jobs"]:
            groups[(job["job"], run["config"])].append(float(job.get("run_s") or job["duration"]))
            waited[(job["job"], run["config"])].append(float(job["duration"]))
            sizes[job["job"]] = int(job.get("input_bytes") or 0)
            if job.get("in_memory_at_start") is not None:
                at_start[(job["job"], run["config"])].append(float(job["in_memory_at_start"]))
            st = job.get("job_stats") or {}
            if st.get("bytes_read"):
                mem[(job["job"], run["config"])].append(st["bytes_from_memory"] / st["bytes_read"])
    rows = []
    speedups: dict[str, list[float]] = defaultdict(list)
    for (query, config), ds in sorted(groups.items(), key=lambda kv: (sizes[kv[0][0]], kv[0][0])):
        med, rng = _median_range(ds)
        base = groups.get((query, "cold"))
        rel = ""
        if base and config != "cold":
            ratio = statistics.median(ds) / statistics.median(base) - 1
            speedups[config].append(ratio)
            rel = _pct(ratio)
        rows.append(
            {
                "query": query,
                "input (MiB)": f"{sizes[query] / 2**20:.1f}",
                "configuration": labels[config],
                "runs": str(len(ds)),
                "query run (s), median": med,
                "query run (s), range": rng,
                "vs cold": rel,
                "from submission (s), median": _s(statistics.median(waited[(query, config)])),
                "bytes read from memory": f"{statistics.mean(mem[(query, config)]) * 100:.0f}%"
                if mem[(query, config)]
                else "-",
                "input in memory at its start": f"{statistics.mean(at_start[(query, config)]) * 100:.0f}%"
                if at_start[(query, config)]
                else "-",
            }
        )
    for config, rs in speedups.items():
        rows.append(
            {"query": "all queries (mean of per-query changes)", "configuration": labels[config],
             "vs cold": _pct(statistics.mean(rs))}
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m thaw_bench.scripts.classic_tables", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("results", type=Path, help="a run's results.json")
    for name in ("title", "section", "table", "commit", "date", "machine"):
        p.add_argument(f"--{name}", required=name != "table")
    p.add_argument("--command", action="append", required=True, help="the command run (repeatable)")
    p.add_argument(
        "--paper", type=json.loads, default=None, help="the paper's figures (JSON), kept beside the rows"
    )
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    doc = json.loads(a.results.read_text())
    if not doc.get("runs"):
        p.error(f"{a.results}: no runs")
    rows = query_rows(doc) if doc.get("experiment") == "sql" else job_rows(doc)
    out: dict[str, Any] = {"title": a.title, "section": a.section}
    if a.table:
        out["table"] = a.table
    out |= {"command": a.command, "commit": a.commit, "commit_is": "the build measured", "date": a.date}
    out |= {"machine": a.machine}
    if a.paper:
        out["paper"] = a.paper
    out["rows"] = rows
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    for r in rows:
        print(" | ".join(r.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
