"""The papers' experiments, each a function that sets up the emulated cluster,
places the inputs once, runs every configuration of its table in one
invocation, and returns a results document (see :mod:`thaw_bench.report`).

- :func:`swim`: the first 200 SWIM jobs (Ignem, Tables I-II and Fig. 5,
  DYRS, Table I and Figs. 5-7), homogeneous and with one slow node.
- :func:`single`: a sort or wordcount job over a range of input sizes and
  added lead-times (Ignem, Table III and Fig. 8, DYRS, Fig. 11).
- :func:`interference`: a sort job under DYRS with interference persistent or
  switching on and off on one or two nodes (DYRS, Table II and Fig. 9).
- :func:`sql`: TPC-H queries on DuckDB, queued (DYRS, Fig. 4).

``python -m thaw_bench paper`` runs them with the other papers' experiments
(:mod:`thaw_bench.paper`).

Scaling (all configurable; BENCHMARKS.md explains the choice): input sizes
are scaled by 1/256, shuffle and output by 1/1024, trace times by 1/800;
blocks are 1 MiB (the papers' 64-128 MB blocks scaled) and each node's disk
gives 12 MiB/s, so a block takes ~85 ms from disk against a few ms from
memory, about the papers' ratio between a map task reading from disk and from
memory. Lead-time comes from queueing for task slots: Dask has no per-job
start-up like Tez's, so arrivals are compressed until jobs queue. ``swim(...,
startup=1.0)`` adds the papers' other source, a fixed start-up per job (their
~10 s scaled by the block read time), as a separate, labelled experiment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thaw.dask.placement import Delays
from thaw.sizes import parse_size

from .cluster import ClusterSpec, EmulatedCluster
from .configs import CONFIGS, SCENARIOS, Scenario
from .netdask import start_dask_on
from .record import InputsExceedMemory, write_json
from .results import new_document
from .runner import Runner, stop_dask
from .workloads import DEFAULT_TRACE, JobSpec, place_inputs, single_job, swim_jobs, trace_label, trace_tag

MiB = 1 << 20


def size_label(n: int) -> str:
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m:
            v = n / m
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{n}B"


@dataclass
class Bench:
    """What every experiment shares: the cluster's shape, where results go,
    how to report progress."""

    spec: ClusterSpec = field(default_factory=ClusterSpec)
    out: Path = Path("bench-out")
    say: Callable[[str], None] = print
    root: str | None = None
    #: The plugin's placement waits (CAVA, Algorithm 1) in placed configurations.
    delays: Delays = field(default_factory=Delays)
    #: ``python -m thaw_bench paper --repeats N``: every section's repeats (None:
    #: each section's own; :mod:`thaw_bench.paper`).
    repeats: int | None = None
    #: Whether reports draw their figures (``paper --quick`` does not: a smoke test).
    figures: bool = True

    def params(self) -> dict[str, Any]:
        params = {k: v for k, v in dataclasses.asdict(self.spec).items() if k != "node_disks"}
        params["block_size"] = parse_size(self.spec.block_size)
        params["node_disks"] = {str(k): v for k, v in self.spec.node_disks.items()}
        params["placement_delays"] = dataclasses.asdict(self.delays)
        return params


@contextlib.contextmanager
def emulated(bench: Bench, results_dir: Path) -> Iterator[tuple[EmulatedCluster, Runner]]:
    """The emulated cluster (Thaw processes and a Dask cluster beside them), on
    loopback or, with ``bench.spec.network``, on emulated hosts."""
    cluster = EmulatedCluster(bench.spec, root=bench.root)
    dask_cluster = dask_client = None
    try:
        cluster.start("none")
        dask_cluster, dask_client = start_dask_on(cluster, bench.spec.slots)
        yield cluster, Runner(cluster, dask_client, results_dir, bench.delays)
    finally:
        stop_dask(dask_cluster, dask_client)
        cluster.close()


def _document(experiment: str, title: str, bench: Bench, params: dict[str, Any]) -> dict[str, Any]:
    return {**new_document(experiment, title, {**bench.params(), **params}), "runs": []}


def _place(cluster: EmulatedCluster, jobs: list[JobSpec], bench: Bench) -> dict[str, Any]:
    t = time.time()
    written = place_inputs(
        cluster.client(), jobs, parse_size(bench.spec.block_size), [n.name for n in cluster.nodes]
    )
    took = time.time() - t
    bench.say(
        f"placed {size_label(written)} of input ({len(jobs)} jobs, 3 replicas on DISK tiers) in {took:.1f}s"
    )
    return {"input_bytes": written, "place_s": round(took, 2)}


def _run_all(
    bench: Bench,
    doc: dict[str, Any],
    runner: Runner,
    jobs: list[JobSpec],
    configs: list[str],
    scenarios: list[Scenario],
    prefix: str = "",
    repeats: int = 1,
) -> None:
    for scenario in scenarios:
        for rep in range(repeats):
            # Each repeat starts one configuration later, so no configuration
            # always runs first (or last) on a machine that drifts.
            for name in configs[rep % len(configs) :] + configs[: rep % len(configs)]:
                config = CONFIGS[name]
                run_name = f"{prefix}{scenario.name}-{name}" + (f"-r{rep}" if repeats > 1 else "")
                bench.say(f"{run_name}: {config.label}, {scenario.label}")
                try:
                    res = runner.run(jobs, config, scenario, run_name, progress=bench.say)
                except InputsExceedMemory as e:
                    bench.say(f"  skipped: {e}")
                    doc.setdefault("skipped", []).append({"run": run_name, "why": str(e)})
                    continue
                res["repeat"] = rep
                mean = sum(j["duration"] for j in res["jobs"]) / max(1, len(res["jobs"]))
                bench.say(
                    f"  wall {res['wall_s']:.1f}s, mean job {mean:.3f}s, {len(res['migrations'])} migrations"
                )
                doc["runs"].append(res)


def _finish(bench: Bench, doc: dict[str, Any], results_dir: Path, paper: dict[str, Any] | None) -> Path:
    doc["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    write_json(results_dir / "results.json", doc)
    from .report import write_report

    report = write_report(doc, results_dir, paper=paper, figures=bench.figures)
    bench.say(f"results: {results_dir / 'results.json'}; report: {report}")
    return report


#: The papers' numbers our tables stand next to (seconds; see report.md).
PAPER_SWIM = {
    "ignem Table I (homogeneous)": {"cold": 14.4, "ignem": 12.7, "ram": 11.4},
    "ignem Table II, map tasks (homogeneous)": {"cold": 6.44, "ignem": 4.03, "ram": 0.28},
    "dyrs Table I (one slow node)": {"cold": 31.5, "ram": 16.9, "ignem": 66.4, "dyrs": 20.9},
}
PAPER_SORT = {"ignem Table III (sort)": {"cold": 147, "ignem": 114, "ram": 75}}
PAPER_INTERFERENCE = {
    "dyrs Table II (sort runtime, s)": {
        "slow-node": 137,
        "alt10": 127,
        "alt20": 129,
        "alt10x2": 135,
        "alt20x2": 137,
    }
}


def swim_name(trace: str, jobs: int, startup: float) -> tuple[str, str]:
    """A SWIM replay's results directory and title: the trace by name (its tag
    after ``swim`` unless it is the default), the start-up if any."""
    name = "swim" + (f"-{trace_tag(trace)}" if trace_tag(trace) else "")
    title = f"SWIM: the first {jobs} jobs of {trace_label(trace)}"
    if startup > 0:
        name += f"-startup{startup:g}s"
        title += f", {startup:g} s job start-up"
    return name, title


def swim(
    bench: Bench,
    jobs: int = 200,
    byte_scale: float = 1 / 256,
    time_scale: float = 1 / 800,
    write_scale: float = 0.25,
    configs: list[str] | None = None,
    scenarios: list[str] | None = None,
    trace: str | None = None,
    repeats: int = 1,
    startup: float = 0.0,
) -> Path:
    """The SWIM replay: every configuration under every scenario, one invocation.

    ``startup`` gives every job a fixed start-up delay between submission (the
    migrate call) and its first task, as a Tez or YARN application master's
    launch does on the papers' clusters (Ignem, section IV: "the minimum lead-time
    for all blocks is 10 s"). With 0 the only lead-time is queueing for slots.
    Results go to ``swim`` or ``swim-startup<N>s`` so the two never mix, with
    the trace's tag after ``swim`` for a trace other than FB-2009
    (``swim-FB-2010-startup1s``); the title names the trace."""
    configs = configs or ["cold", "ram", "ignem", "dyrs", "dyrs-place"]
    scenarios = scenarios or ["homogeneous", "slow-node"]
    trace = trace or DEFAULT_TRACE
    specs = swim_jobs(trace, jobs, byte_scale, time_scale, write_scale)
    name, title = swim_name(trace, len(specs), startup)
    if startup > 0:
        specs = [dataclasses.replace(s, lead_time=startup) for s in specs]
    results_dir = bench.out / name
    doc = _document(
        name,
        title,
        bench,
        {
            "jobs": jobs,
            "byte_scale": byte_scale,
            "time_scale": time_scale,
            "configs": configs,
            "scenarios": scenarios,
            "startup": startup,
            "trace": Path(trace).name,
        },
    )
    with emulated(bench, results_dir) as (cluster, runner):
        doc["params"].update(_place(cluster, specs, bench))
        _run_all(bench, doc, runner, specs, configs, [SCENARIOS[s] for s in scenarios], repeats=repeats)
    return _finish(bench, doc, results_dir, PAPER_SWIM)


def configs_at_lead(configs: list[str], lead: float, leads: list[float]) -> list[str]:
    """The configurations :func:`single` runs at an added lead-time: all of
    them without one; with one, only those the lead-time can help (the plugin
    migrates during it), when a run without added lead-time gives the others'
    rows."""
    if lead == 0 or 0 not in leads:
        return list(configs)
    helped = [c for c in configs if CONFIGS[c].plugin != "off"]
    return helped or list(configs)


def single(
    bench: Bench,
    kind: str = "sort",
    sizes: list[int] | None = None,
    leads: list[float] | None = None,
    configs: list[str] | None = None,
    scenario: str = "homogeneous",
    repeats: int = 1,
) -> Path:
    """One sort or wordcount job per (size, added lead-time), under each
    configuration: how the gain depends on input size and lead-time.

    The configurations without the plugin (cold, inputs-in-RAM) run only
    without added lead-time when 0 is among ``leads``: for them an added
    lead-time only delays the submission, and the papers compare every
    "+lead" run with plain HDFS without it (Ignem, Fig. 8's "Ignem+10s";
    DYRS, Fig. 11), which is the row the report takes as the baseline."""
    sizes = sizes or [128 * MiB, 256 * MiB, 512 * MiB]
    leads = leads if leads is not None else [0.0]
    configs = configs or ["cold", "ram", "ignem", "dyrs"]
    results_dir = bench.out / kind
    doc = _document(
        kind,
        f"{kind}: input size x added lead-time",
        bench,
        {"sizes": sizes, "leads": leads, "configs": configs, "scenario": scenario},
    )
    base = [single_job(kind, size, name=f"{kind}-{size_label(size)}") for size in sizes]
    with emulated(bench, results_dir) as (cluster, runner):
        doc["params"].update(_place(cluster, base, bench))
        for job in base:
            for lead in leads:
                variant = dataclasses.replace(
                    job, lead_time=lead, variant=f"{size_label(job.input_bytes)}, +{lead:g}s"
                )
                at_lead = configs_at_lead(configs, lead, leads)
                _run_all(
                    bench, doc, runner, [variant], at_lead, [SCENARIOS[scenario]],
                    prefix=f"{size_label(job.input_bytes)}-lead{lead:g}-", repeats=repeats,
                )  # fmt: skip
    return _finish(bench, doc, results_dir, PAPER_SORT if kind == "sort" else None)


def interference(
    bench: Bench,
    size: int = 512 * MiB,
    lead: float = 10.0,
    period_scale: float = 0.2,
    scenarios: list[str] | None = None,
    config: str = "dyrs",
    repeats: int = 1,
) -> Path:
    """DYRS, Table II: a sort job under DYRS with the same total interference
    spread differently in time. The paper's 10 s and 20 s periods are scaled by
    ``period_scale`` with the job (its sort ran ~130 s; ours runs ~20-30 s)."""
    names = scenarios or ["slow-node", "alt10", "alt20", "alt10x2", "alt20x2"]
    scaled = [dataclasses.replace(SCENARIOS[n], period=SCENARIOS[n].period * period_scale) for n in names]
    results_dir = bench.out / "interference"
    doc = _document(
        "interference",
        "Sort under DYRS with interference patterns (DYRS, Table II)",
        bench,
        {"size": size, "lead": lead, "period_scale": period_scale, "scenarios": names, "config": config},
    )
    job = single_job("sort", size, name=f"sort-{size_label(size)}", lead_time=lead)
    with emulated(bench, results_dir) as (cluster, runner):
        doc["params"].update(_place(cluster, [job], bench))
        for rep in range(repeats):
            # Each repeat starts one pattern later (no pattern always first).
            for scenario in scaled[rep % len(scaled) :] + scaled[: rep % len(scaled)]:
                run_name = f"{scenario.name}-{config}" + (f"-r{rep}" if repeats > 1 else "")
                bench.say(f"{run_name}: {scenario.label} (period {scenario.period:g}s)")
                res = runner.run([job], CONFIGS[config], scenario, run_name, progress=bench.say)
                res["repeat"] = rep
                bench.say(f"  job {res['jobs'][0]['duration']:.2f}s")
                doc["runs"].append(res)
    return _finish(bench, doc, results_dir, PAPER_INTERFERENCE)


def sql(
    bench: Bench,
    sf: float = 0.1,
    queries: list[int] | None = None,
    configs: list[str] | None = None,
    scenario: str = "slow-node",
    ahead: float = 2.0,
    repeats: int = 1,
) -> Path:
    """TPC-H queries on DuckDB, queued one at a time, the migrate call right
    after each query is planned (the papers' Hive hook; DYRS, Fig. 4 ran its
    queries with one slow node); every configuration ``repeats`` times, on the
    same placed tables."""
    from . import sql as sqlmod

    configs = configs or ["cold", "ram", "ignem", "dyrs"]
    queries = queries or list(sqlmod.DEFAULT_QUERIES)
    results_dir = bench.out / "sql"
    doc = _document(
        "sql",
        f"TPC-H on DuckDB (sf {sf:g}), queries queued, migrate after planning",
        bench,
        {
            "sf": sf,
            "queries": queries,
            "configs": configs,
            "scenario": scenario,
            "ahead": ahead,
            "repeats": repeats,
        },
    )
    cluster = EmulatedCluster(bench.spec, root=bench.root)
    try:
        cluster.start("none")
        doc["runs"] = sqlmod.run_sql(
            cluster,
            [CONFIGS[c] for c in configs],
            SCENARIOS[scenario],
            results_dir,
            sf=sf,
            queries=queries,
            ahead=ahead,
            progress=bench.say,
            repeats=repeats,
        )
    finally:
        cluster.close()
    return _finish(bench, doc, results_dir, None)
