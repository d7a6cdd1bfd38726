"""CAVA's experiments (``affinity``, ``workloads``, ``trace``; see
:mod:`thaw_bench.cava`) and :func:`cava`, which runs the chosen ones and writes
``results.json``, ``report.md`` and the timeline figure."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from thaw.client import Client

from ..record import write_json
from ..results import new_document
from .figure import write_figure
from .policies import BASELINE, PAPER_POLICIES, POLICIES, Policy
from .report import median, mib, pct, render_markdown, summarize, timeline
from .runner import Context, environment, run_apps, run_on_fresh_cluster, thaw_cluster
from .workloads import (
    APPS,
    PAPER_AFFINITY,
    SHAPES,
    AppSpec,
    FileSpec,
    Scale,
    Workload,
    generate_workload,
    trace_workload,
    write_inputs,
)

EXPERIMENTS = ("affinity", "workloads", "trace")


def affinity_experiment(ctx: Context, repeats: int, seed: int) -> dict[str, Any]:
    """Each kind alone over a file of its own type, on one LRU cluster: first
    every kind once cold (so the classifier's thresholds average all seven), then
    ``repeats`` measured cold runs of each (No-Cache reads), then ``repeats``
    hot runs of each (its file read into memory by the harness first, so every
    block is a hit). ``benefit = max(0, 1 - R_hot / R_cold)`` of the medians;
    the classes and figures are the master's at the end of each run (inputs
    not in memory: CPU and writes decide; mostly in memory: writes alone)."""
    scale = ctx.scale
    files = {
        k: FileSpec(
            f"/cava/affinity/{k}",
            scale.affinity_blocks,
            scale.affinity_blocks * scale.block_size,
            1,
            file_type=APPS[k].file_type,
        )
        for k in APPS
    }
    write_inputs(ctx.ufs, {f.path: f for f in files.values()}, seed)
    cold_policy = replace(POLICIES["lru"], read_cache="none")
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {(k, m): [] for k in APPS for m in ("cold", "hot")}
    with thaw_cluster(ctx, POLICIES["lru"]) as (cluster, client):

        def once(kind: str, mode: str, r: int | str) -> dict[str, Any]:
            app = AppSpec(f"aff-{kind}-{mode}-r{r}", kind, files[kind].path)
            wl = Workload(app.name, [app], {app.path: files[kind]})
            if mode == "hot":
                warm(client.master, files[kind], scale.block_size, [n.name for n in cluster.nodes])
            run = run_apps(
                ctx, client, wl, POLICIES["lru"] if mode == "hot" else cold_policy, app.name, concurrency=1
            )
            if run["failed_apps"]:
                raise RuntimeError(f"{app.name} failed: {run['apps'][0]['error']}")
            return run

        for kind in APPS:
            once(kind, "cold", "prime")
        for mode in ("cold", "hot"):
            for r in range(repeats):
                for kind in APPS:
                    runs[(kind, mode)].append(once(kind, mode, r))
    out: dict[str, Any] = {"kinds": {}}
    for kind in APPS:
        cold_runs, hot_runs = runs[(kind, "cold")], runs[(kind, "hot")]
        cold = median([x["apps"][0]["runtime"] for x in cold_runs])
        hot = median([x["apps"][0]["runtime"] for x in hot_runs])
        benefit = max(0.0, 1 - hot / cold) if cold and hot is not None else None

        def master(rs: list[dict[str, Any]], key: str) -> float | None:
            vals = [
                x["apps"][0]["master"][key] for x in rs if (x["apps"][0]["master"] or {}).get(key) is not None
            ]
            return round(statistics.median(vals), 4) if vals else None

        out["kinds"][kind] = {
            "expected_class": APPS[kind].affinity,
            "paper_affinity": PAPER_AFFINITY[kind],
            "runtime_cold": round(cold, 3) if cold else None,
            "runtime_hot": round(hot, 3) if hot is not None else None,
            "benefit": round(benefit, 4) if benefit is not None else None,
            "cpu_util_cold": master(cold_runs, "cpu_util"),
            "write_rate_cold": master(cold_runs, "write_rate"),
            "cpu_threshold": master(cold_runs, "cpu_threshold"),
            "write_threshold": master(cold_runs, "write_threshold"),
            "hit_ratio_hot": median([x["hit_ratio"] for x in hot_runs if x["hit_ratio"] is not None]),
            "hit_ratio_cold": median([x["hit_ratio"] for x in cold_runs if x["hit_ratio"] is not None]),
            "class_cold": [str(x["apps"][0]["class"]) for x in cold_runs],
            "class_hot": [str(x["apps"][0]["class"]) for x in hot_runs],
            "runs": [{k: v for k, v in x.items() if k != "timeline"} for x in cold_runs + hot_runs],
        }
        k = out["kinds"][kind]
        ctx.say(
            f"  affinity {kind}: cold {cold:.2f}s hot {hot:.2f}s benefit {benefit:.3f},"
            f" cpu {k['cpu_util_cold']} writes {mib(k['write_rate_cold'])} MiB/s,"
            f" classes cold {k['class_cold']} hot {k['class_hot']}"
        )
    return out


def warm(master: str, f: FileSpec, block_size: int, nodes: list[str]) -> None:
    """Reads ``f`` into memory, block ``i`` by a client on node ``i`` modulo the
    nodes (each fills its node's memory), so the file spreads over the cluster's
    memory as the tasks' own reads spread it."""
    for i, offset in enumerate(range(0, f.size, block_size)):
        c = Client(master, host=nodes[i % len(nodes)], read_cache="mem")
        with c.open(f.path) as h:
            h.seek(offset)
            h.read(min(block_size, f.size - offset))


def run_workload_set(
    ctx: Context, workloads: list[Workload], policies: list[Policy], repeats: int, tag: str
) -> list[dict[str, Any]]:
    """Every workload under every policy, ``repeats`` times (policy order
    rotating per repeat), each run on a fresh cluster."""
    runs: list[dict[str, Any]] = []
    for wl in workloads:
        write_inputs(ctx.ufs, wl.files)
        for r in range(repeats):
            k = r % len(policies)
            for pol in policies[k:] + policies[:k]:
                run = run_on_fresh_cluster(ctx, wl, pol, f"{tag}-{wl.name}-{pol.name}-r{r}")
                run["repeat"] = r
                runs.append(run)
                if "failed" not in run:
                    ctx.say(
                        f"  {wl.name} {pol.label}: {run['wall_s']:.2f}s, hit ratio {run['hit_ratio']:.2f}, "
                        f"hot cached {pct(run['cache']['hot_cached_share'])}, drops {run['drops']}"
                        + (f", FAILED {run['failed_apps']}" if run["failed_apps"] else "")
                    )
    return runs


def cava(
    out: Path,
    scale: Scale,
    *,
    experiments: tuple[str, ...] = EXPERIMENTS,
    policies: list[str] | None = None,
    repeats: int = 1,
    affinity_repeats: int | None = None,
    seed: int = 0,
    static_affinity: str = "paper",
    timeline_workload: str = "W5",
    trace: str = "FB-2009_samples_24_times_1hr_0.tsv",
    root: str | None = None,
    say: Callable[[str], None] = print,
    command: str | None = None,
) -> dict[str, Any]:
    """Runs the chosen experiments; writes ``OUT/results.json`` and
    ``OUT/report.md`` (and the timeline figure); returns the document."""
    pols = [POLICIES[n] for n in policies or PAPER_POLICIES]
    if BASELINE not in [p.name for p in pols]:
        pols.insert(0, POLICIES[BASELINE])
    doc = new_document(
        "cava",
        "CAVA cache management (CAVA, section V) on an emulated cluster",
        {
            **{k: v for k, v in asdict(scale).items() if k != "workloads"},
            "workloads": list(scale.workloads),
            "mem_capacity": scale.mem_capacity,
            "cluster_memory": scale.cluster_blocks * scale.block_size,
            "startup_s": scale.startup_s,
            "device_model": scale.device_model(),
            "policies": [p.name for p in pols],
            "experiments": list(experiments),
            "repeats": repeats,
            "seed": seed,
            "static_affinity": static_affinity,
        },
        command,
    )
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with environment(scale, root) as (cluster, dask_client):
        ctx = Context(scale, dask_client, cluster, say)
        if "affinity" in experiments:
            say("affinity: each application alone, cold and hot")
            try:
                doc["affinity"] = affinity_experiment(ctx, affinity_repeats or max(1, repeats), seed)
            except Exception as e:
                say(f"  affinity: FAILED ({e!r:.300})")
                doc["affinity"] = {"failed": repr(e)[:1000]}
            if static_affinity == "measured" and "kinds" in doc["affinity"]:
                ctx.affinity = {
                    k: float(v["benefit"])
                    for k, v in doc["affinity"]["kinds"].items()
                    if v["benefit"] is not None
                }
        doc["params"]["static_affinities"] = dict(ctx.affinity)
        if "workloads" in experiments:
            wls = [generate_workload(SHAPES[w], scale, seed) for w in scale.workloads]
            say(f"workloads: {', '.join(w.name for w in wls)} under {', '.join(p.label for p in pols)}")
            runs = run_workload_set(ctx, wls, pols, repeats, "wl")
            doc["workloads"] = {
                "described": {w.name: w.describe(scale) for w in wls},
                "apps": {w.name: [asdict(a) for a in w.apps] for w in wls},
                "files": {w.name: _files_doc(w) for w in wls},
                "summary": summarize(runs, pols),
                "runs": [
                    _slim(r, w.name == timeline_workload)
                    for r in runs
                    for w in wls
                    if r["workload"] == w.name
                ],
            }
            chosen = next((w for w in wls if w.name == timeline_workload), None)
            if chosen is not None:
                doc["timeline"] = {
                    "workload": chosen.name,
                    "memory_bytes": scale.cluster_blocks * scale.block_size,
                    "runs": {
                        r["policy"]: timeline(r, chosen)
                        for r in runs
                        if r["workload"] == chosen.name
                        and "failed" not in r
                        and r.get("repeat") == 0
                        and r["policy"] != BASELINE
                    },
                }
        if "trace" in experiments:
            tw = trace_workload(scale, seed, trace)
            say(f"trace: {len(tw.apps)} jobs over {len(tw.files)} files")
            runs = run_workload_set(ctx, [tw], pols, repeats, "tr")
            doc["trace"] = {
                "described": tw.describe(scale),
                "apps": [asdict(a) for a in tw.apps],
                "files": _files_doc(tw),
                "summary": summarize(runs, pols),
                "runs": [_slim(r, False) for r in runs],
            }
    doc["seconds"] = round(time.time() - t0, 1)
    doc["figure"] = write_figure(doc, out)
    write_json(out / "results.json", doc)
    (out / "report.md").write_text(render_markdown(doc))
    say(f"cava: {doc['seconds']:.0f}s; wrote {out / 'results.json'} and {out / 'report.md'}")
    return doc


def _files_doc(w: Workload) -> dict[str, dict[str, Any]]:
    return {p: {**asdict(f), "hot": f.hot} for p, f in w.files.items()}


def _slim(run: dict[str, Any], keep_timeline: bool) -> dict[str, Any]:
    return run if keep_timeline else {k: v for k, v in run.items() if k != "timeline"}
