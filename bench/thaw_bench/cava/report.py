"""CAVA's results as tables: per workload and policy the medians of the runs
(runtime normalized to No-Cache, its spread over the repeats, each kind's runtime
and hit ratio, hot data cached, hit ratio, memory-local reads, classes given)
and their means over the workloads beside the paper's (CAVA, Figs. 5-6, Table
IV), the cached-bytes timeline (Fig. 7), the Markdown report and the summary
printed at the end."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

from .policies import BASELINE, POLICIES, Policy
from .workloads import APPS, MiB, Workload

#: CAVA, section V-B: improvement over No-Cache averaged over W1-W6, and the share of
#: hot data cached at the end (Fig. 6).
PAPER_IMPROVEMENT = {"lru": 0.054, "static-ca": 0.109, "ca-only": 0.107, "cava": 0.156}
PAPER_HOT_SHARE = {"static-ca": 0.506, "ca-only": 0.561, "cava": 0.812}
#: CAVA, Table IV: each application's average improvement under CAVA over No-Cache.
PAPER_KIND_IMPROVEMENT = {
    "grep": 0.33,
    "wordcount": 0.13,
    "aggregation": 0.17,
    "join": 0.15,
    "selection": 0.19,
}


def median(xs: list[float]) -> float | None:
    """The median, None of nothing."""
    return statistics.median(xs) if xs else None


def _classes(rs: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per kind: how many of its runs ended in each class."""
    out: dict[str, Counter[str]] = {k: Counter() for k in APPS}
    for r in rs:
        for a in r["apps"]:
            out[a["kind"]][str(a["class"])] += 1
    return {k: dict(c) for k, c in out.items() if c}


def summarize(runs: list[dict[str, Any]], policies: list[Policy]) -> dict[str, Any]:
    """Per workload and policy: median total runtime, its ratio to No-Cache,
    each kind's mean application runtime over No-Cache's, median hot share
    cached, hit ratio, mean app runtime, classes given, drops; and the means
    over workloads (improvement = 1 - normalized runtime)."""
    done = [r for r in runs if "failed" not in r]
    names = sorted({r["workload"] for r in runs}, key=lambda s: (len(s), s))
    table: dict[str, dict[str, dict[str, Any]]] = {}

    def kind_runtime(rs: list[dict[str, Any]], kind: str) -> float | None:
        xs = [a["runtime"] for r in rs for a in r["apps"] if a["kind"] == kind]
        return statistics.mean(xs) if xs else None

    def kind_hits(rs: list[dict[str, Any]], kind: str) -> float | None:
        tasks = sum(a["tasks"] for r in rs for a in r["apps"] if a["kind"] == kind)
        hits = sum(a["blocks_hit"] for r in rs for a in r["apps"] if a["kind"] == kind)
        return round(hits / tasks, 4) if tasks else None

    def local_share(rs: list[dict[str, Any]]) -> float | None:
        mem = sum(a["bytes_mem"] for r in rs for a in r["apps"])
        local = sum(a.get("bytes_local_mem", 0) for r in rs for a in r["apps"])
        return round(local / mem, 4) if mem else None

    for w in names:
        table[w] = {}
        base_runs = [r for r in done if r["workload"] == w and r["policy"] == BASELINE]
        base = median([r["wall_s"] for r in base_runs])
        for p in policies:
            rs = [r for r in done if r["workload"] == w and r["policy"] == p.name]
            if not rs:
                why = next((r["failed"] for r in runs if r["workload"] == w and r["policy"] == p.name), None)
                table[w][p.name] = {"failed": why or "not run"}
                continue
            wall = median([r["wall_s"] for r in rs])
            kinds = {}
            for k in APPS:
                mine, theirs = kind_runtime(rs, k), kind_runtime(base_runs, k)
                if mine is not None and theirs:
                    kinds[k] = round(mine / theirs, 4)
            walls = [r["wall_s"] for r in rs]
            delays = [r["placement"]["delay_median"] for r in rs if (r.get("placement") or {}).get("placed")]
            table[w][p.name] = {
                "runs": len(rs),
                "wall_s": round(wall, 3) if wall is not None else None,
                "wall_range": [round(min(walls), 3), round(max(walls), 3)],
                "normalized": round(wall / base, 4) if base and wall is not None else None,
                "normalized_range": [round(x / base, 4) for x in (min(walls), max(walls))] if base else None,
                "kind_normalized": kinds,
                "kind_hit_ratio": {k: v for k in APPS if (v := kind_hits(rs, k)) is not None},
                "local_mem_share": local_share(rs),
                "memory_local_launches": median(
                    [r["placement"]["memory_local"] for r in rs if (r.get("placement") or {}).get("placed")]
                ),
                "placement_delay_median": median(delays),
                "hot_cached_share": median(
                    [r["cache"]["hot_cached_share"] for r in rs if r["cache"]["hot_cached_share"] is not None]
                ),
                "hit_ratio": median([r["hit_ratio"] for r in rs if r["hit_ratio"] is not None]),
                "worker_hit_ratio": median(
                    [r["worker_hit_ratio"] for r in rs if r["worker_hit_ratio"] is not None]
                ),
                "mean_app_runtime": median([r["mean_app_runtime"] for r in rs if r["mean_app_runtime"]]),
                "drops": median([r["drops"] for r in rs]),
                "skipped": median([r["skipped"] for r in rs]),
                "evictions": median([r["evictions"] for r in rs]),
                "classes": _classes(rs),
                "failed_apps": sum(len(r["failed_apps"]) for r in rs),
            }
    means: dict[str, dict[str, Any]] = {}
    for p in policies:
        cells = [table[w][p.name] for w in names if "failed" not in table[w][p.name]]

        def mean(key: str, cells: list[dict[str, Any]] = cells) -> float | None:
            xs = [c[key] for c in cells if c.get(key) is not None]
            return round(statistics.mean(xs), 4) if xs else None

        norm = mean("normalized")
        kinds, kind_hits_mean = {}, {}
        for k in APPS:
            xs = [c["kind_normalized"][k] for c in cells if k in c["kind_normalized"]]
            if xs:
                kinds[k] = round(statistics.mean(xs), 4)
            hs = [c["kind_hit_ratio"][k] for c in cells if k in c.get("kind_hit_ratio", {})]
            if hs:
                kind_hits_mean[k] = round(statistics.mean(hs), 4)
        means[p.name] = {
            "workloads": len(cells),
            "normalized": norm,
            "improvement": round(1 - norm, 4) if norm is not None else None,
            "kind_normalized": kinds,
            "kind_hit_ratio": kind_hits_mean,
            "hot_cached_share": mean("hot_cached_share"),
            "hit_ratio": mean("hit_ratio"),
            "local_mem_share": mean("local_mem_share"),
            "memory_local_launches": mean("memory_local_launches"),
            "mean_app_runtime": mean("mean_app_runtime"),
            "paper_improvement": PAPER_IMPROVEMENT.get(p.name),
            "paper_hot_share": PAPER_HOT_SHARE.get(p.name),
        }
    return {"table": table, "means": means, "by_repeat": _by_repeat(done, names, policies)}


def _by_repeat(runs: list[dict[str, Any]], names: list[str], policies: list[Policy]) -> dict[str, Any]:
    """Per policy, each repeat's mean over the workloads of its total runtime
    normalized to the same repeat's No-Cache run (runs of one repeat ran side by
    side, so this is the spread of the mean, not of single runs), and the
    range over the repeats."""
    wall = {(r["workload"], r["policy"], r.get("repeat", 0)): r["wall_s"] for r in runs}
    repeats = sorted({r.get("repeat", 0) for r in runs})
    out: dict[str, Any] = {}
    for p in policies:
        per = []
        for k in repeats:
            xs = [
                wall[(w, p.name, k)] / wall[(w, BASELINE, k)]
                for w in names
                if (w, p.name, k) in wall and wall.get((w, BASELINE, k))
            ]
            if xs and len(xs) == len(names):
                per.append(round(statistics.mean(xs), 4))
        out[p.name] = {
            "normalized": per,
            "improvement": [round(1 - x, 4) for x in per],
            "range": [round(1 - max(per), 4), round(1 - min(per), 4)] if per else None,
        }
    return out


def timeline(run: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """CAVA, Fig. 7's series: cached bytes of each hot file and of all cold
    files together, over time."""
    hot = sorted(p for p, f in workload.files.items() if f.hot)
    series: dict[str, list[float]] = {p: [] for p in hot}
    series["cold files"] = []
    ts = []
    for s in run.get("timeline") or []:
        ts.append(s["t"])
        for p in hot:
            series[p].append(s["files"].get(p, 0))
        series["cold files"].append(
            sum(v for p, v in s["files"].items() if p in workload.files and p not in hot)
        )
    return {"t": ts, "series": series}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def mib(x: float | None) -> str:
    return "-" if x is None else f"{x / MiB:.1f}"


def render_markdown(doc: dict[str, Any]) -> str:
    lines = [f"# {doc['title']}", "", f"`{doc['command']}` ({doc['started']})", ""]
    p = doc["params"]
    placed = "the Thaw plugin places the reading tasks by memory locality (CAVA, Algorithm 1)"
    lines += [
        f"Cluster: {p['workers']} emulated nodes on {p.get('racks', 1)} racks, each a Thaw worker with MEM "
        f"{p['mem_capacity'] // MiB} MiB ({p['cluster_memory'] // MiB} MiB in all) and a Dask worker of "
        f"{p.get('slots', 1)} slot(s); blocks {p['block_size'] // MiB} MiB, under-store "
        f"`{p['device_model']}` per node; "
        f"{placed if p.get('placement') else 'Dask places the tasks (placement off)'}; "
        f"{p['apps']} apps per workload, {p['concurrency']} at once, each starting up {p['startup_s']} s; "
        f"PageRank {p['pagerank_iters']} iterations; seed {p['seed']}.",
        "",
    ]
    aff = doc.get("affinity")
    if aff and "failed" in aff:
        lines += ["## Cache affinity of each application", "", f"Failed: {aff['failed']}", ""]
    elif aff:
        lines += [
            "## Cache affinity of each application (alone: cold vs input in memory)",
            "",
            "CPU (cores per task) and writes as the master measured them in the cold runs, against its"
            " thresholds (the mean of the applications measured lately).",
            "",
            "| app | paper class | cold (s) | hot (s) | benefit 1-R_hot/R_cold | paper CA | CPU (threshold) |"
            " writes MiB/s (threshold) | class cold | class hot |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        for k, v in aff["kinds"].items():
            lines.append(
                f"| {k} | {v['expected_class']} | {num(v['runtime_cold'])} | {num(v['runtime_hot'])} | "
                f"{num(v['benefit'], '{:.3f}')} | {v['paper_affinity']} | "
                f"{num(v['cpu_util_cold'])} ({num(v['cpu_threshold'])}) | "
                f"{mib(v['write_rate_cold'])} ({mib(v['write_threshold'])}) | "
                f"{', '.join(v['class_cold']) or '-'} | {', '.join(v['class_hot']) or '-'} |"
            )
        lines.append("")
    wl = doc.get("workloads")
    if wl:
        pols = [x for x in doc["params"]["policies"]]
        labels = [POLICIES[x].label for x in pols]
        lines += [
            "## Workloads",
            "",
            "| workload | mix | hot | cross | apps (high/medium/low) | kinds | files (hot) | "
            "distinct input / memory | hot share |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | ---: |",
        ]
        for name, d in wl["described"].items():
            c = d.get("classes") or {}
            kinds = ", ".join(f"{k} {n}" for k, n in d["kinds"].items() if n)
            lines.append(
                f"| {name} | {d['mix']} | {d['hot']} | {'yes' if d['cross'] else 'no'} | "
                f"{d['apps']} ({c.get('high', 0)}/{c.get('medium', 0)}/{c.get('low', 0)}) | {kinds} | "
                f"{d['files']} ({d['hot_files']}) | "
                f"{d['distinct_input_bytes'] // MiB} / {d['cluster_memory_bytes'] // MiB} MiB | "
                f"{pct(d['hot_share_of_input'])} |"
            )
        table, means = wl["summary"]["table"], wl["summary"]["means"]

        def grid(
            title: str, key: str, fmt: Callable[[Any], str], mean_key: str, paper: dict[str, float]
        ) -> None:
            nonlocal lines
            lines += [
                "",
                f"### {title}",
                "",
                "| workload | " + " | ".join(labels) + " |",
                "| --- |" + " ---: |" * len(labels),
            ]
            for w, row in table.items():
                cells = [fmt(row[x].get(key)) if "failed" not in row[x] else "failed" for x in pols]
                lines.append(f"| {w} | " + " | ".join(cells) + " |")
            if mean_key:
                lines.append("| mean | " + " | ".join(fmt(means[x].get(mean_key)) for x in pols) + " |")
            if paper:
                lines.append(
                    "| paper | " + " | ".join(pct(paper.get(x)) if x in paper else "" for x in pols) + " |"
                )

        grid(
            "Total runtime normalized to No-Cache (CAVA, Fig. 5)",
            "normalized",
            lambda v: num(v, "{:.3f}"),
            "normalized",
            {},
        )
        lines.append("| improvement | " + " | ".join(pct(means[x].get("improvement")) for x in pols) + " |")
        by_rep = wl["summary"].get("by_repeat") or {}
        lines.append(
            "| improvement, range over repeats | "
            + " | ".join(
                f"{pct(by_rep[x]['range'][0])} to {pct(by_rep[x]['range'][1])}"
                if (by_rep.get(x) or {}).get("range")
                else "-"
                for x in pols
            )
            + " |"
        )
        lines.append(
            "| paper improvement | "
            + " | ".join(pct(PAPER_IMPROVEMENT.get(x)) if x in PAPER_IMPROVEMENT else "" for x in pols)
            + " |"
        )
        grid(
            "Share of hot data cached at the end (CAVA, Fig. 6)",
            "hot_cached_share",
            pct,
            "hot_cached_share",
            PAPER_HOT_SHARE,
        )
        grid("Hit ratio (blocks read from memory)", "hit_ratio", pct, "hit_ratio", {})
        grid(
            "Memory reads from the task's own node (short-circuit) of all memory reads",
            "local_mem_share",
            pct,
            "local_mem_share",
            {},
        )
        grid("Total runtime (s, median)", "wall_s", num, "", {})
        grid(
            "Tasks the plugin launched on the node holding their blocks in memory (CAVA, Algorithm 1)",
            "memory_local_launches",
            pct,
            "memory_local_launches",
            {},
        )
        lines += [
            "",
            "### Mean runtime of each kind normalized to No-Cache (CAVA, Table IV), over the workloads",
            "",
            "| kind | " + " | ".join(labels) + " | paper, CAVA (1 - average improvement) |",
            "| --- |" + " ---: |" * (len(labels) + 1),
        ]
        for k in APPS:
            cells = [num(means[x]["kind_normalized"].get(k), "{:.3f}") for x in pols]
            paper = PAPER_KIND_IMPROVEMENT.get(k)
            cells.append(num(1 - paper, "{:.2f}") if paper is not None else "-")
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "### Hit ratio of each kind (its tasks' blocks read from memory), over the workloads",
            "",
            "| kind | class (Table I) | " + " | ".join(labels) + " |",
            "| --- | --- |" + " ---: |" * len(labels),
        ]
        for k in APPS:
            cells = [pct(means[x].get("kind_hit_ratio", {}).get(k)) for x in pols]
            lines.append(f"| {k} | {APPS[k].affinity} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "### Classes the master gave (kind: class x runs) and the workers' dropped fills / skipped",
            "",
            "| workload | policy | " + " | ".join(APPS) + " | drops | skipped | evictions |",
            "| --- | --- |" + " --- |" * len(APPS) + " ---: | ---: | ---: |",
        ]
        for w, row in table.items():
            for x in pols:
                c = row[x]
                if "failed" in c or x == BASELINE:
                    continue
                cls = [
                    ", ".join(f"{n} x{m}" for n, m in sorted(c["classes"].get(k, {}).items())) or "-"
                    for k in APPS
                ]
                lines.append(
                    f"| {w} | {POLICIES[x].label} | " + " | ".join(cls) + " | "
                    f"{num(c['drops'], '{:.0f}')} | {num(c['skipped'], '{:.0f}')} | "
                    f"{num(c['evictions'], '{:.0f}')} |"
                )
        failed = [f"{r['run']}: {r['failed']}" for r in wl["runs"] if "failed" in r]
        if failed:
            lines += ["", "Failed runs: " + "; ".join(failed)]
    tr = doc.get("trace")
    if tr:
        lines += [
            "",
            "## Trace replay (SWIM sizes, Zipf recurrence)",
            "",
            f"{tr['described']['apps']} jobs over {tr['described']['files']} files "
            f"({tr['described']['hot_files']} hot), distinct input "
            f"{tr['described']['distinct_input_bytes'] // MiB} MiB vs memory "
            f"{tr['described']['cluster_memory_bytes'] // MiB} MiB.",
            "",
            "| policy | total (s) | mean job runtime (s) | hit ratio (tasks) | hit ratio (workers) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for x in doc["params"]["policies"]:
            c = tr["summary"]["table"].get("trace", {}).get(x, {})
            if "failed" in c:
                lines.append(f"| {POLICIES[x].label} | failed | | | |")
                continue
            lines.append(
                f"| {POLICIES[x].label} | {num(c.get('wall_s'))} | {num(c.get('mean_app_runtime'))} | "
                f"{pct(c.get('hit_ratio'))} | {pct(c.get('worker_hit_ratio'))} |"
            )
    if doc.get("figure"):
        lines += [
            "",
            f"## Cached bytes over time ({doc['timeline']['workload']}, CAVA, Fig. 7)",
            "",
            f"![cached over time]({doc['figure']})",
        ]
    return "\n".join(lines) + "\n"


def print_summary(doc: dict[str, Any], say: Callable[[str], None] = print) -> None:
    say(f"command: {doc['command']}")
    for k, v in (doc.get("affinity") or {}).get("kinds", {}).items():
        say(
            f"  {k:9s} benefit {num(v['benefit'], '{:.3f}')} (paper {v['paper_affinity']}), "
            f"class cold {v['class_cold'] or '-'} hot {v['class_hot'] or '-'} "
            f"(expected {v['expected_class']})"
        )
    for section in ("workloads", "trace"):
        if not doc.get(section):
            continue
        means = doc[section]["summary"]["means"]
        say(f"{section}: policy: normalized runtime (improvement), hot cached, hit ratio, mean app runtime")
        for pol, m in means.items():
            if not m["workloads"]:
                say(f"  {POLICIES[pol].label:10s} failed")
                continue
            say(
                f"  {POLICIES[pol].label:10s} {num(m['normalized'], '{:.3f}')} ({pct(m['improvement'])}), "
                f"hot {pct(m['hot_cached_share'])}, hits {pct(m['hit_ratio'])}, "
                f"app {num(m['mean_app_runtime'])}s"
            )
