"""The harness's report: the papers' tables and figures from one results document.

Tables follow the papers' shapes so numbers can be read side by side: mean job
duration and speedup w.r.t. cold (Ignem, Table I, DYRS, Table I), map
tasks (Ignem, Table II, DYRS, Fig 6), jobs binned by input size
(Ignem, Fig 5, DYRS, Fig 5), the two bounds and the memory footprint
(:mod:`thaw_bench.bounds`: inputs in RAM, what the disks could reach in each
job's lead time; Ignem, Fig 7), runtime per interference pattern (DYRS,
Table II), per-variant rows for single-job experiments (Ignem, Fig 8,
DYRS, Fig 11) and per-query rows for SQL (DYRS, Fig 4). Speedup is
``1 - mean / mean_cold``, as the papers print it; the share of the upper bound
is a speedup over the inputs-in-RAM speedup (Ignem, section IV-C1: "nearly 60% of the
upper bound").

:func:`check_accounting` says whether a run's numbers can be trusted at all:
every input block read by exactly one map task of its job, bytes as expected.

The figures are drawn by :mod:`thaw_bench.figures`.
``python -m thaw_bench.report RESULTS.json [--out DIR] [--paper PAPER.json]``
re-renders a report from a saved results file.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import bounds
from .figures import write_figures
from .results import (
    CONFIG_ORDER,
    MIGRATED,
    MiB,
    Results,
    Run,
    block_size,
    first_label,
    group_runs,
    map_tasks,
    natural,
)

Paper = dict[str, dict[str, float]]

BASELINE = "cold"
UPPER_BOUND = "ram"
MEM_SOURCES = frozenset({"mem", "mem-remote"})
#: Job-size bins in blocks (Ignem, section IV-C2: <= 64 MB, 64-512 MB, > 512 MB
#: with 64 MB blocks).
BINS: tuple[tuple[str, str], ...] = (
    ("small", "small (<= 1 block)"),
    ("medium", "medium (2-8 blocks)"),
    ("large", "large (> 8 blocks)"),
)


# ---------------------------------------------------------------- helpers


def _mean(xs: Iterable[float]) -> float | None:
    vals = list(xs)
    return sum(vals) / len(vals) if vals else None


def _speedup(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base <= 0:
        return None
    return 1.0 - value / base


def _share(speedup: float | None, upper: float | None) -> float | None:
    """Share of the upper bound; undefined when inputs-in-RAM did not help."""
    if speedup is None or upper is None or upper <= 0:
        return None
    return speedup / upper


def job_blocks(job: dict[str, Any], bs: int | None) -> int:
    """A job's input size in blocks (what the size bins are made of)."""
    if bs:
        return math.ceil(int(job.get("input_bytes") or 0) / bs)
    return len(job.get("blocks") or [])


def size_bin(job: dict[str, Any], bs: int | None) -> str:
    n = job_blocks(job, bs)
    return "small" if n <= 1 else "medium" if n <= 8 else "large"


# ---------------------------------------------------------------- summary


def _config_stats(runs: list[Run], bs: int | None) -> dict[str, Any]:
    jobs = [j for r in runs for j in r.get("jobs", [])]
    maps = [t for r in runs for t in map_tasks(r)]
    reads = [t for t in maps if t.get("read_end") is not None]
    sources = Counter(str(t.get("source", "?")) for t in maps)
    outcomes = Counter(
        str(m.get("outcome", "?")).split(":")[0] for r in runs for m in r.get("migrations") or []
    )
    bins: dict[str, dict[str, Any]] = {}
    for name, _ in BINS:
        members = [j["duration"] for j in jobs if size_bin(j, bs) == name]
        bins[name] = {"jobs": len(members), "mean_s": _mean(members)}
    preloads = [float(r["preload"]["seconds"]) for r in runs if r.get("preload")]
    return {
        "config_label": first_label(runs, "config_label", runs[0].get("config", "?")),
        "runs": [r.get("run") for r in runs],
        "jobs": len(jobs),
        "failed_tasks": sum(int(j.get("failed_tasks") or 0) for j in jobs),
        "mean_job_s": _mean(j["duration"] for j in jobs),
        # Each run's own mean job duration: the spread of repeats.
        "run_means": [_mean(j["duration"] for j in r["jobs"]) for r in runs if r.get("jobs")],
        "maps": len(maps),
        "mean_map_s": _mean(t["end"] - t["start"] for t in maps),
        "mean_read_s": _mean(t["read_end"] - t["start"] for t in reads),
        "mem_read_share": (sum(sources[s] for s in MEM_SOURCES) / len(maps)) if maps else None,
        "reads_by_source": dict(sources),
        "blocks_migrated": sum(n for o, n in outcomes.items() if o in MIGRATED),
        "migrations_by_outcome": dict(outcomes),
        "bins": bins,
        "wall_s": _mean(float(r.get("wall_s") or 0.0) for r in runs),  # per run (repeats, variants)
        "preload_s": sum(preloads) if preloads else None,
        # Map tasks that read their block from memory on their own node.
        "mem_local_share": (sources["mem"] / len(maps)) if maps else None,
        # Share of the machine's cores busy over the runs, and of each group.
        **{
            f"cpu_{k}": _mean(float(r["cpu"][k]) for r in runs if r.get("cpu"))
            for k in ("busy_share", "dask_workers_share", "thaw_share", "scheduler_and_harness_share")
        },
    }


def _relative(st: dict[str, Any], base: dict[str, Any] | None, ub: dict[str, Any] | None) -> None:
    """Fills speedups w.r.t. cold and shares of the upper bound into ``st``."""

    def pair(key: str, b: dict[str, Any] | None) -> float | None:
        return _speedup(st[key], b[key]) if b else None

    st["speedup"] = pair("mean_job_s", base)
    st["upper_bound_share"] = _share(
        st["speedup"], _speedup(ub["mean_job_s"], base["mean_job_s"]) if ub and base else None
    )
    st["map_speedup"] = pair("mean_map_s", base)
    ub_map = _speedup(ub["mean_map_s"], base["mean_map_s"]) if ub and base else None
    st["map_upper_bound_share"] = _share(st["map_speedup"], ub_map)
    st["read_speedup"] = pair("mean_read_s", base)
    for name, b in st["bins"].items():
        cold = base["bins"][name]["mean_s"] if base else None
        ram = ub["bins"][name]["mean_s"] if ub else None
        b["speedup"] = _speedup(b["mean_s"], cold)
        b["upper_bound_share"] = _share(b["speedup"], _speedup(ram, cold))


def _map_phase(run: Run, job: str) -> float | None:
    """First map start to last map end (DYRS, Fig 11a's map-phase duration)."""
    maps = [t for t in map_tasks(run) if t.get("job") == job]
    return max(t["end"] for t in maps) - min(t["start"] for t in maps) if maps else None


def _variants(by_config: dict[str, list[Run]]) -> list[dict[str, Any]]:
    """Rows per (variant, extra lead-time, config) for single-job experiments.
    A row's baseline is cold without extra lead-time (Ignem, Fig 8's
    "Ignem+10s" is compared with plain HDFS): cold's row of the same variant,
    else of the same input size, both without added lead; else cold's row of
    the same variant whatever its lead."""
    rows: dict[tuple[str, float, str], dict[str, Any]] = {}
    for cfg, runs in by_config.items():
        for run in runs:
            for job in run.get("jobs", []):
                if not job.get("variant"):
                    continue
                lead = float(job.get("lead_time_added") or 0.0)
                row = rows.setdefault(
                    (str(job["variant"]), lead, cfg),
                    {"variant": str(job["variant"]), "config": cfg, "lead_time_added": lead,
                     "input_bytes": int(job.get("input_bytes") or 0), "durations": [], "map_phases": []},
                )  # fmt: skip
                row["durations"].append(float(job["duration"]))
                phase = _map_phase(run, job["job"])
                if phase is not None:
                    row["map_phases"].append(phase)
    out: list[dict[str, Any]] = []
    for row in rows.values():
        row["jobs"] = len(row["durations"])
        row["mean_s"] = _mean(row.pop("durations"))
        row["map_phase_s"] = _mean(row.pop("map_phases"))
        out.append(row)

    def ref(row: dict[str, Any], cfg: str) -> dict[str, Any] | None:
        mine = [r for r in out if r["config"] == cfg]
        for match in (
            lambda r: r["variant"] == row["variant"] and not r["lead_time_added"],
            lambda r: r["input_bytes"] == row["input_bytes"] and not r["lead_time_added"],
            lambda r: r["variant"] == row["variant"],
        ):
            found = [r for r in mine if match(r)]
            if found:
                return min(found, key=lambda r: r["lead_time_added"])
        return None

    for row in out:
        cold, ram = ref(row, BASELINE), ref(row, UPPER_BOUND)
        row["speedup"] = _speedup(row["mean_s"], cold["mean_s"] if cold else None)
        ram_speedup = _speedup(ram["mean_s"], cold["mean_s"]) if ram and cold else None
        row["upper_bound_share"] = _share(row["speedup"], ram_speedup)
        row["map_phase_speedup"] = _speedup(row["map_phase_s"], cold["map_phase_s"] if cold else None)
    order = list(by_config)
    out.sort(
        key=lambda r: (
            r["input_bytes"],
            natural(r["variant"]),
            order.index(r["config"]),
            r["lead_time_added"],
        )
    )
    return out


def _queries(by_config: dict[str, list[Run]]) -> list[dict[str, Any]]:
    """Per-query rows of a SQL experiment, by input size (DYRS, Fig 4)."""
    per: dict[str, dict[str, Any]] = {}
    for cfg, runs in by_config.items():
        for run in runs:
            for job in run.get("jobs", []):
                if job.get("kind") != "sql":
                    continue
                row = per.setdefault(
                    job["job"], {"job": job["job"], "input_bytes": int(job.get("input_bytes") or 0), "s": {}}
                )
                row["s"].setdefault(cfg, []).append(float(job["duration"]))
    rows = []
    for row in per.values():
        means = {c: _mean(v) for c, v in row.pop("s").items()}
        cold = means.get(BASELINE)
        row["configs"] = {c: {"mean_s": m, "speedup": _speedup(m, cold)} for c, m in means.items()}
        rows.append(row)
    return sorted(rows, key=lambda r: (r["input_bytes"], natural(r["job"])))


def summarize(results: Results) -> dict[str, Any]:
    """Per scenario, per config: job, map-task and read means with speedups
    w.r.t. the scenario's cold run and shares of its inputs-in-RAM speedup,
    reads from memory, blocks migrated, size bins, wall time; plus per-variant
    rows (single-job experiments) and per-query rows (SQL). JSON-able."""
    bs = block_size(results)
    scenarios: dict[str, Any] = {}
    for scen, by_config in group_runs(results).items():
        stats = {cfg: _config_stats(runs, bs) for cfg, runs in by_config.items()}
        for cfg, st in stats.items():
            _relative(st, stats.get(BASELINE), stats.get(UPPER_BOUND))
            st["bounds"] = bounds.config_bounds(by_config[cfg], results.get("params") or {})
        runs = [r for rs in by_config.values() for r in rs]
        scenarios[scen] = {
            "label": first_label(runs, "scenario_label", scen),
            "configs": stats,
            "variants": _variants(by_config),
            "queries": _queries(by_config),
        }
    return {
        "experiment": results.get("experiment"),
        "title": results.get("title"),
        "date": results.get("date"),
        "command": results.get("command"),
        "block_size": bs,
        "scenarios": scenarios,
    }


# ---------------------------------------------------------------- accounting


def check_accounting(run: Run) -> list[str]:
    """What is wrong with a run's reads (empty: nothing). Every block of a job is
    read by exactly one map task of that job, the map bytes add up to the job's
    input, and every task read the bytes it was given. A SQL query without task
    records is not checked block by block (its engine reads on its own), but a
    failed or wrong query is reported."""
    problems: list[str] = []
    maps_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in map_tasks(run):
        maps_of[str(t.get("job"))].append(t)
    names = set()
    for job in run.get("jobs", []):
        name = str(job.get("job"))
        names.add(name)
        maps = maps_of.get(name, [])
        if job.get("kind") == "sql" and not maps:
            if job.get("error") or job.get("failed_tasks"):
                problems.append(f"job {name}: failed: {job.get('error') or 'see the run log'}")
            if job.get("correct") is False:
                problems.append(f"job {name}: result differs from the reference")
            continue
        blocks = list(job.get("blocks") or [])
        reads = Counter(t.get("block") for t in maps)
        for b in blocks:
            n = reads.get(b, 0)
            if n == 0:
                problems.append(f"job {name}: block {b} was not read by any map task")
            elif n > 1:
                problems.append(f"job {name}: block {b} was read by {n} map tasks (expected 1)")
        listed = set(blocks)
        for b, n in reads.items():
            if b not in listed:
                problems.append(
                    f"job {name}: block {b} read by {n} map task(s) is not an input block of the job"
                )
        total = sum(int(t.get("bytes") or 0) for t in maps)
        want = int(job.get("input_bytes") or 0)
        if total != want:
            problems.append(f"job {name}: map tasks read {total} bytes, input is {want} bytes")
        for t in maps:
            if t.get("bytes") != t.get("expected"):
                problems.append(
                    f"job {name}: block {t.get('block')}: map task on {t.get('node')}"
                    f" read {t.get('bytes')} bytes, expected {t.get('expected')}"
                )
        if job.get("failed_tasks"):
            problems.append(f"job {name}: {job['failed_tasks']} task(s) failed")
        if job.get("correct") is False:
            problems.append(f"job {name}: result differs from the reference")
    for name in sorted(set(maps_of) - names):
        problems.append(f"job {name}: {len(maps_of[name])} map task(s) of a job the run does not list")
    return problems


# ---------------------------------------------------------------- markdown


def _s(x: float | None) -> str:
    """Seconds with the papers' precision (147, 14.4, 6.44, 0.28)."""
    if x is None:
        return "-"
    a = abs(x)
    return f"{x:.0f}" if a >= 100 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 1 else f"{x:.3f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def _rel(cfg: str, x: float | None) -> str:
    """A relative number; blank on the baseline's own row, as in the papers."""
    return "" if cfg == BASELINE else _pct(x)


def _mib(n: float | None) -> str:
    return "-" if n is None else f"{n / MiB:.3g}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    def cell(v: str) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _split_paper(paper: Paper | None, summary: dict[str, Any]) -> tuple[Paper, Paper, Paper]:
    """Paper entries for the job table, the map table and the interference
    table. An entry none of whose rows is a configuration is keyed by scenario
    (names or labels) and goes with the interference table (DYRS, Table
    II); one named "Table II" or mentioning maps with the map table (Ignem,
    Table II); any other with the job table (Ignem, Tables I and III,
    DYRS, Table I)."""
    jobs: Paper = {}
    maps: Paper = {}
    scen: Paper = {}
    configs = set(CONFIG_ORDER) | {c for sc in summary["scenarios"].values() for c in sc["configs"]}
    for name, entry in (paper or {}).items():
        if entry and not set(entry) & configs:
            scen[name] = entry
        elif re.search(r"\btable ii\b", name, re.IGNORECASE) or "map" in name.lower():
            maps[name] = entry
        else:
            jobs[name] = entry
    return jobs, maps, scen


def _mentions(name: str, scenario: str, label: str) -> bool:
    n = name.lower()
    return any(k and k.lower() in n for k in (scenario, scenario.replace("-", " "), label))


def _for_scenario(entries: Paper, scenario: str, summary: dict[str, Any]) -> Paper:
    """The entries a scenario's tables show: those whose name mentions it
    ("ignem Table I (homogeneous)", "dyrs Table I (one slow node)"), and those
    that mention no scenario of the results."""
    scenarios = summary["scenarios"]

    def mentions(name: str, s: str) -> bool:
        return _mentions(name, s, scenarios[s]["label"])

    return {
        name: e
        for name, e in entries.items()
        if mentions(name, scenario) or not any(mentions(name, s) for s in scenarios)
    }


def _paper_seconds(name: str) -> str:
    """A paper column's header, with the unit unless the name gives it."""
    return f"Paper {name}" if re.search(r"\(s\)|\bs\)", name) else f"Paper {name} (s)"


def _paper_headers(entries: Paper) -> list[str]:
    out: list[str] = []
    for name in entries:
        out += [_paper_seconds(name), f"Paper {name} speedup"]
    return out


def _paper_cells(entries: Paper, cfg: str) -> list[str]:
    out: list[str] = []
    for entry in entries.values():
        v = entry.get(cfg)
        out += [_s(v), _rel(cfg, _speedup(v, entry.get(BASELINE)))]
    return out


def _config_rows(configs: dict[str, Any], entries: Paper) -> list[str]:
    """Our configs, then configs only the paper has."""
    extra = [c for e in entries.values() for c in e if c not in configs]
    return list(configs) + sorted(set(extra), key=extra.index)


def _job_table(configs: dict[str, Any], entries: Paper) -> str:
    failed = any(st["failed_tasks"] for st in configs.values())
    headers = [
        "Configuration",
        "Jobs",
        "Absolute Duration (s)",
        "Speedup w.r.t cold",
        "Share of upper bound",
        "Per run (s): min-max",
        "Wall (s)",
        "CPU busy: all / Dask workers / Thaw / scheduler",
    ]
    headers += ["Failed tasks"] if failed else []
    rows = []
    for cfg in _config_rows(configs, entries):
        st = configs.get(cfg)
        if st:
            row = [st["config_label"], str(st["jobs"]), _s(st["mean_job_s"]), _rel(cfg, st["speedup"])]
            row += [_rel(cfg, st["upper_bound_share"]), _spread(st), _s(st["wall_s"]), _cpu(st)] + (
                [str(st["failed_tasks"])] if failed else []
            )
        else:
            row = [cfg] + ["-"] * (len(headers) - 1)
        rows.append(row + _paper_cells(entries, cfg))
    return _table(headers + _paper_headers(entries), rows)


def _spread(st: dict[str, Any]) -> str:
    means = [m for m in st.get("run_means") or [] if m is not None]
    if len(means) < 2:
        return "-"
    return f"{min(means):.2f}-{max(means):.2f} ({len(means)} runs)"


def _cpu(st: dict[str, Any]) -> str:
    keys = ("cpu_busy_share", "cpu_dask_workers_share", "cpu_thaw_share", "cpu_scheduler_and_harness_share")
    if st.get(keys[0]) is None:
        return "-"
    return " / ".join(f"{st[k]:.0%}" if st.get(k) is not None else "-" for k in keys)


def _map_table(configs: dict[str, Any], entries: Paper) -> str:
    headers = [
        "Configuration",
        "Map tasks",
        "Absolute Duration (s)",
        "Speedup w.r.t cold",
        "Share of upper bound",
    ]
    headers += ["Mean read (s)", "Read speedup", "Reads from memory", "Memory-local", "Blocks migrated"]
    rows = []
    for cfg in _config_rows(configs, entries):
        st = configs.get(cfg)
        if st:
            row = [st["config_label"], str(st["maps"]), _s(st["mean_map_s"]), _rel(cfg, st["map_speedup"])]
            row += [
                _rel(cfg, st["map_upper_bound_share"]),
                _s(st["mean_read_s"]),
                _rel(cfg, st["read_speedup"]),
            ]
            row += [_pct(st["mem_read_share"]), _pct(st["mem_local_share"]), str(st["blocks_migrated"])]
        else:
            row = [cfg] + ["-"] * (len(headers) - 1)
        rows.append(row + _paper_cells(entries, cfg))
    return _table(headers + _paper_headers(entries), rows)


def _bin_table(configs: dict[str, Any]) -> str:
    headers = [
        "Input size",
        "Configuration",
        "Jobs",
        "Mean duration (s)",
        "Speedup w.r.t cold",
        "Share of upper bound",
    ]
    rows = []
    for name, label in BINS:
        if not any(st["bins"][name]["jobs"] for st in configs.values()):
            continue
        for cfg, st in configs.items():
            b = st["bins"][name]
            rows.append([label, st["config_label"], str(b["jobs"]), _s(b["mean_s"]), _rel(cfg, b["speedup"])])
            rows[-1].append(_rel(cfg, b["upper_bound_share"]))
    return _table(headers, rows)


def _variant_table(variants: list[dict[str, Any]], configs: dict[str, Any]) -> str:
    headers = ["Variant", "Configuration", "Jobs", "Input (MiB)", "Job duration (s)", "Speedup w.r.t cold"]
    headers += ["Share of upper bound", "Map phase (s)", "Map-phase speedup"]
    rows = []
    for v in variants:
        label = configs[v["config"]]["config_label"] if v["config"] in configs else v["config"]
        if v["lead_time_added"]:
            label += f"+{v['lead_time_added']:g}s"
        # Cold with extra lead-time is not the baseline: its relative cells show.
        cfg = v["config"] if not v["lead_time_added"] else ""
        row = [
            v["variant"],
            label,
            str(v["jobs"]),
            _mib(v["input_bytes"]),
            _s(v["mean_s"]),
            _rel(cfg, v["speedup"]),
        ]
        row += [_rel(cfg, v["upper_bound_share"]), _s(v["map_phase_s"]), _rel(cfg, v["map_phase_speedup"])]
        rows.append(row)
    return _table(headers, rows)


def _query_table(queries: list[dict[str, Any]], configs: dict[str, Any]) -> str:
    headers = ["Query", "Input (MiB)"]
    for cfg, st in configs.items():
        headers += [f"{st['config_label']} (s)"] + (
            [] if cfg == BASELINE else [f"{st['config_label']} speedup"]
        )
    rows = []
    for q in queries:
        row = [q["job"], _mib(q["input_bytes"])]
        for cfg in configs:
            c = q["configs"].get(cfg, {"mean_s": None, "speedup": None})
            row += [_s(c["mean_s"])] + ([] if cfg == BASELINE else [_pct(c["speedup"])])
        rows.append(row)
    return _table(headers, rows)


def _interference_table(summary: dict[str, Any], entries: Paper) -> str:
    """Rows per interference pattern, a runtime column per config (DYRS,
    Table II: pattern vs sort job runtime)."""
    configs: dict[str, str] = {}
    for sc in summary["scenarios"].values():
        for cfg, st in sc["configs"].items():
            configs.setdefault(cfg, st["config_label"])
    headers = ["Interference pattern", "Scenario"] + [
        f"{label} job runtime (s)" for label in configs.values()
    ]
    headers += [_paper_seconds(name) for name in entries]
    rows = []
    for name, sc in summary["scenarios"].items():
        row = [sc["label"], name]
        row += [_s(sc["configs"][c]["mean_job_s"]) if c in sc["configs"] else "-" for c in configs]
        row += [_s(e.get(name, e.get(sc["label"]))) for e in entries.values()]
        rows.append(row)
    return _table(headers, rows)


def _caption(configs: dict[str, Any]) -> str:
    """One line per scheme in the papers' words (Ignem, Table I caption)."""
    lines = []
    for cfg, st in configs.items():
        if cfg in (BASELINE, UPPER_BOUND) or st["speedup"] is None:
            continue
        verb = "improves the mean job duration by" if st["speedup"] >= 0 else "slows the mean job down by"
        line = f"{st['config_label']} {verb} {_pct(abs(st['speedup']))} w.r.t. cold"
        if st["upper_bound_share"] is not None:
            line += f"; it realizes {_pct(st['upper_bound_share'])} of the upper bound"
        lines.append(line + ".")
    ram = configs.get(UPPER_BOUND)
    if ram and ram["preload_s"] is not None:
        lines.append(
            f"Inputs-in-RAM preload took {_s(ram['preload_s'])} s before the run (not in job durations)."
        )
    return "\n".join(f"{line}  " for line in lines) + ("\n" if lines else "")


def render_markdown(
    results: Results,
    summary: dict[str, Any],
    problems: dict[str, list[str]],
    figures: dict[str, str],
    paper: Paper | None = None,
) -> str:
    """The report's text; figures are file names relative to the report."""
    job_entries, map_entries, scen_entries = _split_paper(paper, summary)
    out = [f"# {results.get('title') or results.get('experiment') or 'Thaw benchmark'}\n"]
    out.append(f"- Experiment: {results.get('experiment', '-')}")
    out.append(f"- Date: {results.get('date', '-')}")
    out.append(f"- Command: `{results.get('command', '-')}`")
    out.append(f"- Runs: {len(results.get('runs', []))}\n")
    for s in results.get("skipped", []):
        out.append(f"- Skipped {s['run']}: {s['why']}\n")
    params = results.get("params") or {}
    if params:
        out.append("## Parameters\n")
        out.append(
            _table(
                ["Parameter", "Value"],
                [[k, json.dumps(v) if not isinstance(v, str) else v] for k, v in params.items()],
            )
        )
    out.append("## Accounting\n")
    bad = {run: p for run, p in problems.items() if p}
    if not bad:
        out.append(
            f"No problems in {len(problems)} run(s): every input block was read by exactly one map task"
            " of its job, map bytes add up to the job's input, every task read its expected bytes.\n"
        )
    for run, msgs in bad.items():
        out.append(f"**{run}**: {len(msgs)} problem(s)\n")
        out += [f"- {m}" for m in msgs] + [""]
    if results.get("experiment") == "interference" or len(summary["scenarios"]) > 1 or scen_entries:
        out.append("## Table II: job runtime per interference pattern (DYRS, Table II)\n")
        out.append(_interference_table(summary, scen_entries))
    for name, sc in summary["scenarios"].items():
        configs = sc["configs"]
        out.append(f"## Scenario {name}: {sc['label']}\n")
        out.append("### Table I: mean job duration (Ignem, Table I, DYRS, Table I)\n")
        out.append(_job_table(configs, _for_scenario(job_entries, name, summary)))
        caption = _caption(configs)
        if sc["variants"]:
            caption += "All variants pooled; see the per-variant rows below.\n"
        if caption:
            out.append(caption)
        if any(st["maps"] for st in configs.values()):
            out.append("### Table II: map tasks (Ignem, Table II, DYRS, Fig 6)\n")
            out.append(_map_table(configs, _for_scenario(map_entries, name, summary)))
        if sum(st["jobs"] for st in configs.values()) > len(configs):
            out.append("### Jobs binned by input size (Ignem, Fig 5, DYRS, Fig 5)\n")
            out.append(_bin_table(configs))
        if any(st["bounds"]["reachable_share"] is not None for st in configs.values()):
            out.append("### Bounds: reachable in lead time, memory footprint (Ignem, Fig. 7)\n")
            out.append(bounds.DEFINITION)
            out.append(bounds.bounds_table(configs))
        if sc["variants"]:
            out.append("### Per variant (Ignem, Fig 8, DYRS, Fig 11)\n")
            out.append(_variant_table(sc["variants"], configs))
        if sc["queries"]:
            out.append("### Per query, by input size (DYRS, Fig 4)\n")
            out.append(_query_table(sc["queries"], configs))
    out.append("## Figures\n")
    captions = {
        "reads": "Map reads and migrations per node (DYRS, Fig 8)",
        "estimate": "Migration time estimate per node, interference shaded (DYRS, Fig 9)",
        "last_reads": "Timeline of the last 30 blocks read (DYRS, Fig 10)",
        "memory": "Memory used per worker, non-zero samples (Ignem, Fig 7, DYRS, Fig 7)",
        "cdf": "Job duration CDF (DYRS, Fig 6)",
    }
    for key, file in figures.items():
        out.append(f"**{captions.get(key, key)}**\n\n![{captions.get(key, key)}]({file})\n")
    return "\n".join(out).rstrip() + "\n"


def write_report(
    results: Results, out_dir: str | Path, paper: Paper | None = None, figures: bool = True
) -> Path:
    """Writes ``report.md``, ``summary.json`` and (unless ``figures`` is False)
    the figures into ``out_dir``. ``paper`` maps a paper table's name to its
    rows ({config or scenario: seconds}); they are shown, with the paper's own
    speedups, beside ours. Returns the report's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(results)
    problems = {str(run.get("run")): check_accounting(run) for run in results.get("runs", [])}
    drawn = write_figures(results, out) if figures else {}
    report = out / "report.md"
    report.write_text(render_markdown(results, summary, problems, drawn, paper))
    (out / "summary.json").write_text(json.dumps(dict(summary, accounting=problems), indent=1))
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m thaw_bench.report", description="Re-render a report from a saved results file."
    )
    ap.add_argument("results", type=Path, help="results JSON written by python -m thaw_bench")
    ap.add_argument(
        "--out", type=Path, default=None, help="output directory (default: beside the results file)"
    )
    ap.add_argument(
        "--paper", type=Path, default=None, help='JSON of paper numbers, e.g. {"Table I": {"cold": 14.4}}'
    )
    args = ap.parse_args(argv)
    results = json.loads(args.results.read_text())
    paper = json.loads(args.paper.read_text()) if args.paper else None
    path = write_report(results, args.out or args.results.parent, paper)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
