"""Where a SWIM replay's migrations went and how its small jobs fared, per
configuration, from one ``python -m thaw_bench swim`` results file: the two
tables of BENCHMARKS.md under "The papers' bound and ablations" (DYRS, Fig. 10's
naive load balancing against DYRS with a slow node; why a small job's block is
or is not in memory when its one map task reads it).

Migrations: per run, the copies done, those on the interfered (slow) node, the
median copy time there and elsewhere, how many of the run's last 30 copies ran
there (Fig. 10's tail), and the blocks dropped because their job read them
first. Small jobs (one block): their mean and per-run means, the share of their
map tasks that read memory, and the median delay from a small job's submission
to its block's copy starting.

``python -m thaw_bench.scripts.swim_migrations RESULTS_OR_DIR [--scenario slow-node]``
prints both tables as markdown.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from .swim_matrix import ORDER, load


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _slow_nodes(run: dict[str, Any]) -> set[str]:
    return {e["node"] for e in run.get("interference") or [] if e.get("on")}


def migrations_row(runs: list[dict[str, Any]]) -> dict[str, str]:
    """One configuration's migrations over its runs (one scenario)."""
    done_n, slow_n, last30, dropped = [], [], [], []
    there: list[float] = []
    elsewhere: list[float] = []
    for run in runs:
        slow = _slow_nodes(run)
        done = [m for m in run.get("migrations") or [] if m["outcome"] == "done"]
        done_n.append(len(done))
        slow_n.append(sum(m["node"] in slow for m in done))
        for m in done:
            (there if m["node"] in slow else elsewhere).append(m["end"] - m["start"])
        tail = sorted(done, key=lambda m: m["end"])[-30:]
        last30.append(sum(m["node"] in slow for m in tail))
        dropped.append(sum(m["outcome"] == "read-first" for m in run.get("migrations") or []))
    return {
        "configuration": runs[0]["config_label"],
        "migrations per run": ", ".join(map(str, done_n)),
        "on the slow node, per run": ", ".join(map(str, slow_n)),
        "copy time there, median (s)": _f(_median(there)),
        "copy time elsewhere, median (s)": _f(_median(elsewhere)),
        "of the last 30, on the slow node": ", ".join(map(str, last30)),
        "dropped, read first, per run": ", ".join(map(str, dropped)),
    }


def small_jobs_row(runs: list[dict[str, Any]]) -> dict[str, str]:
    """One configuration's one-block jobs over its runs (one scenario)."""
    per_run: list[float] = []
    all_d: list[float] = []
    mem = total = 0
    delays: list[float] = []
    for run in runs:
        small = {j["job"]: j for j in run["jobs"] if len(j.get("blocks") or []) <= 1}
        ds = [j["duration"] for j in small.values() if j.get("duration") is not None]
        all_d += ds
        if ds:
            per_run.append(statistics.fmean(ds))
        for t in run["tasks"]:
            if t.get("kind") == "map" and t["job"] in small:
                total += 1
                mem += str(t.get("source", "")).startswith("mem")
        for m in run.get("migrations") or []:
            if m["outcome"] == "done" and len(m["jobs"]) == 1 and m["jobs"][0] in small:
                delays.append(m["start"] - small[m["jobs"][0]]["submit"])
    return {
        "configuration": runs[0]["config_label"],
        "small jobs (s)": _f(statistics.fmean(all_d) if all_d else None, 2),
        "per run (s)": ", ".join(f"{x:.2f}" for x in per_run),
        "small jobs' map tasks from memory": f"{100 * mem / total:.0f}%" if total else "-",
        "submission to its block's copy, median (s)": _f(_median(delays)),
    }


def tables(doc: dict[str, Any], scenario: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(migrations rows, small-job rows) for one scenario, configurations in
    :data:`ORDER`, cold left out of the migrations table."""
    by_cfg: dict[str, list[dict[str, Any]]] = {}
    for run in doc["runs"]:
        if run["scenario"] == scenario:
            by_cfg.setdefault(run["config"], []).append(run)
    order = sorted(by_cfg, key=lambda c: ORDER.index(c) if c in ORDER else len(ORDER))
    migr = [migrations_row(by_cfg[c]) for c in order if c != "cold"]
    small = [small_jobs_row(by_cfg[c]) for c in order]
    return migr, small


def markdown(rows: list[dict[str, str]]) -> str:
    heads = list(rows[0]) if rows else []
    out = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    return "\n".join(out + ["| " + " | ".join(r[h] for h in heads) + " |" for r in rows]) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m thaw_bench.scripts.swim_migrations", description=__doc__)
    p.add_argument("results", type=Path, help="a swim output directory or its results.json")
    p.add_argument("--scenario", default="slow-node")
    a = p.parse_args(argv)
    migr, small = tables(load(a.results), a.scenario)
    print(markdown(migr))
    print(markdown(small))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
