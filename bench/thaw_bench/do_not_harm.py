"""Ignem's do-not-harm rule (section III-A3) at job level: memory too small for
the queued jobs' inputs, Ignem with the rule on and off, beside cold.

The rule: a migrated block *A* is never evicted to make room for a block *B*
read later; keeping *A* is a sure hit, evicting it a sure miss for a possible
hit, and the disk bandwidth spent on *A* is wasted. The workers' switch is
``thaw worker --do-not-harm on|off`` (:mod:`thaw-worker`'s
``migration::harm``): off, a migration that finds the buffer full evicts the
migrated blocks least recently used (arrived or read), which under Ignem's
queue order are the ones the earliest jobs will read first.

Set-up: ``jobs`` map-only jobs (SWIM's map task: read a block, checksum it) of
``job_blocks`` blocks each, all submitted at once, each with a start-up of
``lead`` seconds (its tasks held, its inputs migrating), then queued behind one
another for the ``nodes x slots`` task slots; each node's MEM tier is ``mem``
(its migration buffer 80% of it), so the buffers hold well under the queued
inputs. Three configurations on the same placed blocks, ``repeats`` times in a
rotated order: ``cold`` (no migration), ``ignem`` (rule on) and
``ignem-harm-off``. Migrations read the disks as one more stream
(``--migration-io normal``, the papers' setting) so a wasted migration costs
the jobs disk bandwidth; with the harness's default ``idle`` they would only
use it while no job reads. Recorded per run: each job's time, map tasks that
read memory, blocks migrated, and blocks migrated then evicted unread (the
workers' ``evicted unread`` events). The master migrates a block a job still
expects again once its memory copy is gone, so without the rule the churn goes
on while the jobs run.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from thaw.sizes import parse_size

from .configs import CONFIGS, SCENARIOS, Config
from .experiments import Bench, _document, _place, emulated
from .record import finish_document
from .report import MEM_SOURCES, check_accounting
from .results import map_tasks
from .workloads import JobSpec

#: The configurations compared, with each one's ``--do-not-harm`` (None: no migration).
RULE: dict[str, str | None] = {"cold": None, "ignem": "on", "ignem-harm-off": "off"}
LABELS = {
    "cold": "cold (no migration)",
    "ignem": "Ignem, do-not-harm on",
    "ignem-harm-off": "Ignem, do-not-harm off (LRU among migrated blocks)",
}
EVICTED_UNREAD = "evicted unread"


def _config(name: str, migration_io: str) -> Config:
    if RULE[name] is None:
        return CONFIGS["cold"]
    return Config(name, "ignem", label=LABELS[name], plugin="migrate", migration_io=migration_io)


def _jobs(n: int, blocks: int, block_size: int, lead: float) -> list[JobSpec]:
    return [
        JobSpec(
            f"q{i}", "swim", 0.0, blocks * block_size, 0, 0, lead_time=lead, variant=f"job {i + 1} of {n}"
        )
        for i in range(n)
    ]


def run_stats(run: dict[str, Any]) -> dict[str, Any]:
    """One run's figures: job times, memory reads, migrations done, blocks
    evicted unread (and their bytes)."""
    maps = map_tasks(run)
    events = run.get("migrations") or []
    done = [e for e in events if e.get("outcome") == "done" and int(e.get("bytes") or 0) > 0]
    unread = [e for e in events if e.get("outcome") == EVICTED_UNREAD]
    jobs = sorted(run["jobs"], key=lambda j: j["job"])
    return {
        "job_s": {j["job"]: j["duration"] for j in jobs},
        "mean_job_s": statistics.fmean(j["duration"] for j in jobs),
        "maps": len(maps),
        "mem_reads": sum(1 for t in maps if t["source"] in MEM_SOURCES),
        "mem_reads_by_job": {
            j["job"]: sum(1 for t in maps if t["job"] == j["job"] and t["source"] in MEM_SOURCES)
            for j in jobs
        },
        "migrated": len(done),
        "migrated_bytes": sum(int(e["bytes"]) for e in done),
        "evicted_unread": len(unread),
        "evicted_unread_bytes": sum(int(e.get("bytes") or 0) for e in unread),
    }


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """Per configuration: the medians and ranges over repeats of each run's
    figures, per job too; and, per repeat, each Ignem's mean job time over cold's."""
    per: dict[str, Any] = {}
    for name in RULE:
        stats = [r["stats"] for r in doc["runs"] if r["config"] == name]
        if not stats:
            continue
        row: dict[str, Any] = {"label": LABELS[name], "repeats": len(stats)}
        for k in ("mean_job_s", "mem_reads", "migrated", "evicted_unread", "evicted_unread_bytes"):
            xs = [s[k] for s in stats]
            row[k] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
        row["maps"] = stats[0]["maps"]
        row["job_s"] = {j: statistics.median(s["job_s"][j] for s in stats) for j in stats[0]["job_s"]}
        row["mem_reads_by_job"] = {
            j: statistics.median(s["mem_reads_by_job"][j] for s in stats)
            for j in stats[0]["mem_reads_by_job"]
        }
        per[name] = row
    vs_cold: dict[str, list[float]] = {}
    by_rep = {(r["config"], r["repeat"]): r["stats"] for r in doc["runs"]}
    for name in ("ignem", "ignem-harm-off"):
        vs_cold[name] = [
            by_rep[(name, rep)]["mean_job_s"] / by_rep[("cold", rep)]["mean_job_s"]
            for (c, rep) in by_rep
            if c == name and ("cold", rep) in by_rep
        ]
    return {"configs": per, "vs_cold": vs_cold}


def _m(x: dict[str, Any], fmt: str = "{:.2f}") -> str:
    med, lo, hi = (fmt.format(x[k]) for k in ("median", "min", "max"))
    return f"{med} ({lo}-{hi})"


def table_lines(doc: dict[str, Any]) -> list[str]:
    """The job table (medians over repeats, ranges in brackets) and per-job
    times, Markdown."""
    s = doc["summary"]
    out = [
        "| configuration | mean job, s | vs cold (per repeat) | map tasks reading memory | blocks migrated "
        "| migrated then evicted unread |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in s["configs"].items():
        ratios = s["vs_cold"].get(name)
        vs = "-" if not ratios else " / ".join(f"{x:.2f}" for x in ratios)
        mem = f"{_m(row['mem_reads'], '{:.0f}')} of {row['maps']}"
        out.append(
            f"| {row['label']} | {_m(row['mean_job_s'])} | {vs} | {mem} "
            f"| {_m(row['migrated'], '{:.0f}')} | {_m(row['evicted_unread'], '{:.0f}')} |"
        )
    jobs = list(next(iter(s["configs"].values()))["job_s"])
    out += ["", "| job (median s; memory reads) | " + " | ".join(jobs) + " |", "|---|" + "---:|" * len(jobs)]
    for name, row in s["configs"].items():
        cells = [f"{row['job_s'][j]:.2f}; {row['mem_reads_by_job'][j]:.0f}" for j in jobs]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def write_report(doc: dict[str, Any], out: Path) -> Path:
    p = doc["params"]
    bad = {r["run"]: v for r in doc["runs"] if (v := check_accounting(r))}
    text = [
        f"# {doc['title']}",
        "",
        f"{doc['date']} · `{doc['command']}` · {p['nodes']} nodes x {p['slots']} slots, "
        f"MEM {p['mem_capacity']} per node, {p['jobs']} jobs x {p['job_blocks']} blocks of "
        f"{p['block_size'] // 1024} KiB submitted at once, {p['lead']:g} s start-up each, "
        f"migrations `--migration-io {p['migration_io']}`, "
        f"disk {p['disk']} (penalty {p['penalty']}), {p['repeats']} repeats.",
        "",
        *table_lines(doc),
        "",
        "Accounting: " + ("no problems (every block read once, bytes as expected)." if not bad else str(bad)),
    ]
    report = out / "report.md"
    report.write_text("\n".join(text) + "\n")
    return report


def do_not_harm(
    bench: Bench,
    quick: bool = False,
    *,
    nodes: int = 3,
    slots: int = 2,
    mem: str = "8MiB",
    jobs: int = 4,
    job_blocks: int = 12,
    lead: float = 2.0,
    migration_io: str = "normal",
    repeats: int = 3,
) -> Path:
    """Runs cold, Ignem and Ignem without the rule ``repeats`` times (rotated
    order); writes ``do-not-harm/results.json`` and ``report.md``; returns the
    report's path. ``quick``: 2 nodes, 4 MiB of MEM each, 3 jobs of 6 blocks,
    1 s start-up, one repeat (CI's smoke test)."""
    if quick:
        nodes, mem, jobs, job_blocks, lead, repeats = 2, "4MiB", 3, 6, 1.0, 1
    if min(nodes, slots, jobs, job_blocks, repeats) < 1 or lead < 0:
        raise ValueError(
            "do-not-harm: nodes, slots, jobs, job blocks and repeats must be at least 1, lead >= 0"
        )
    if migration_io not in ("idle", "normal"):
        raise ValueError(f"do-not-harm: --migration-io {migration_io!r}: expected idle or normal")
    spec = dataclasses.replace(
        bench.spec, nodes=nodes, slots=slots, mem_capacity=mem, racks=min(bench.spec.racks, nodes)
    )
    bench = dataclasses.replace(bench, spec=spec)
    bs = parse_size(spec.block_size)
    results_dir = bench.out / "do-not-harm"
    doc = _document(
        "do-not-harm",
        "Ignem: the do-not-harm rule, on and off, with memory short of the queued inputs",
        bench,
        {
            "jobs": jobs, "job_blocks": job_blocks, "lead": lead, "repeats": repeats,
            "migration_io": migration_io, "quick": quick, "configs": list(RULE),
        },
    )  # fmt: skip
    specs = _jobs(jobs, job_blocks, bs, lead)
    names = list(RULE)
    with emulated(bench, results_dir) as (cluster, runner):
        doc["params"].update(_place(cluster, specs, bench))
        for rep in range(repeats):
            for name in names[rep % 3 :] + names[: rep % 3]:
                rule = RULE[name]
                cluster.spec = dataclasses.replace(
                    spec, worker_args=[*spec.worker_args, *(["--do-not-harm", rule] if rule else [])]
                )
                run_name = f"{name}-r{rep}"
                bench.say(f"{run_name}: {LABELS[name]}")
                res = runner.run(specs, _config(name, migration_io), SCENARIOS["homogeneous"], run_name)
                res.update(repeat=rep, do_not_harm=rule)
                res["stats"] = st = run_stats(res)
                bench.say(
                    f"  mean job {st['mean_job_s']:.2f}s, {st['mem_reads']}/{st['maps']} maps from memory, "
                    f"{st['migrated']} migrated, {st['evicted_unread']} evicted unread"
                )
                doc["runs"].append(res)
    return finish_document(doc, results_dir, bench.say, summarize, write_report, table_lines)


def add_parser(sub: Any, common: Any) -> None:
    """``python -m thaw_bench do-not-harm``."""
    d = sub.add_parser(
        "do-not-harm",
        parents=[common],
        help="Ignem, section III-A3: the do-not-harm rule on and off, memory short of the queued inputs",
    )
    d.add_argument("--jobs", type=int, default=4, help="jobs submitted at once (default %(default)s)")
    d.add_argument("--job-blocks", type=int, default=12, help="blocks per job (default %(default)s)")
    d.add_argument("--lead", type=float, default=2.0, help="each job's start-up, s (default %(default)s)")
    d.add_argument("--quick", action="store_true", help="CI's smoke configuration (under 40 s)")
    d.set_defaults(nodes=3, slots=2, repeats=3, mem="8MiB", migration_io="normal")
