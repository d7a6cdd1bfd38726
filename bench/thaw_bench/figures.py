"""The harness's figures, drawn from one results document (matplotlib, no
display): reads per node by source, the migration estimate against what
happened, the last reads of each run, memory use over time, job-duration CDFs.
:func:`thaw_bench.report.write_report` writes them beside the report."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from .results import MIGRATED, MiB, Results, Run, block_size, first_label, group_runs, map_tasks, natural

#: Figure files (stable names: reports and notebooks link to them).
FIGURES: dict[str, str] = {
    "reads": "reads-per-node.png",
    "estimate": "migration-estimate.png",
    "last_reads": "last-reads.png",
    "memory": "memory-use.png",
    "cdf": "job-duration-cdf.png",
}
_CONFIG_COLORS = {
    "cold": "#7f7f7f",
    "ram": "#2ca02c",
    "ignem": "#ff7f0e",
    "dyrs": "#1f77b4",
    "dyrs-sjf": "#9467bd",
}
_SOURCE_COLORS = {"mem": "#1f77b4", "mem-remote": "#9ecae1", "disk": "#d62728", "ufs": "#8c564b"}
_LAST_READS = 30


def panels(n: int, ncols: int, width: float = 5.0, height: float = 3.2, **kw: Any) -> tuple[Any, list[Any]]:
    """A figure of ``n`` panels (no pyplot: no global state, no backend switch;
    ``Figure.savefig`` renders with Agg)."""
    from matplotlib.figure import Figure

    n = max(1, n)
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])


def _color(cfg: str, i: int) -> str:
    return _CONFIG_COLORS.get(cfg, f"C{(i + 5) % 10}")


def _runs_by_panel(results: Results) -> list[tuple[str, str, Run]]:
    return [
        (s, c, r) for s, by_cfg in group_runs(results).items() for c, runs in by_cfg.items() for r in runs
    ]


def _title(run: Run) -> str:
    return (
        f"{run.get('config_label') or run.get('config')}: {run.get('scenario_label') or run.get('scenario')}"
    )


def _bars(ax: Any, nodes: list[str], counts: dict[str, Counter[str]], ylabel: str) -> None:
    """Grouped bars: nodes on x, one bar per config."""
    width = 0.8 / max(1, len(counts))
    for i, (cfg, c) in enumerate(counts.items()):
        xs = [k + (i - (len(counts) - 1) / 2) * width for k in range(len(nodes))]
        ax.bar(xs, [c.get(n, 0) for n in nodes], width, label=cfg, color=_color(cfg, i))
    ax.set_xticks(range(len(nodes)), nodes, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)


def _fig_reads(results: Results, path: Path) -> None:
    groups = group_runs(results)
    fig, axes = panels(2 * len(groups), 2, width=6.0)
    for k, (scen, by_cfg) in enumerate(groups.items()):
        reads = {
            c: Counter(str(t.get("node")) for r in runs for t in map_tasks(r)) for c, runs in by_cfg.items()
        }
        migr = {
            c: Counter(
                str(m.get("node"))
                for r in runs
                for m in r.get("migrations") or []
                if m.get("outcome") in MIGRATED
            )
            for c, runs in by_cfg.items()
        }
        migr = {c: m for c, m in migr.items() if m}
        label = next(
            (r.get("scenario_label") for rs in by_cfg.values() for r in rs if r.get("scenario_label")), scen
        )
        for ax, counts, what in (
            (axes[2 * k], reads, "map reads"),
            (axes[2 * k + 1], migr, "blocks migrated"),
        ):
            nodes = sorted({n for c in counts.values() for n in c}, key=natural)
            if nodes:
                _bars(ax, nodes, counts, what)
            else:
                _empty(ax, what)
            ax.set_title(f"{what} per node: {label}", fontsize=9)
    if not groups:
        _empty(axes[0], "runs")
    fig.savefig(path, dpi=100)


def _intervals(events: list[dict[str, Any]], end: float) -> dict[str, list[tuple[float, float]]]:
    """Interference-on intervals per node from the on/off log."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    since: dict[str, float] = {}
    for e in sorted(events, key=lambda e: e["t"]):
        node = str(e["node"])
        if e.get("on") and node not in since:
            since[node] = float(e["t"])
        elif not e.get("on") and node in since:
            out[node].append((since.pop(node), float(e["t"])))
    for node, t in since.items():
        out[node].append((t, max(end, t)))
    return out


def _fig_estimate(results: Results, path: Path) -> None:
    bs = block_size(results)
    runs = [
        r
        for _, cfg, r in _runs_by_panel(results)
        if not r.get("preload")
        and (r.get("policy") in ("dyrs", "ignem") or cfg in ("ignem", "dyrs", "dyrs-sjf"))
    ]
    fig, axes = panels(len(runs), 2, width=6.0, sharey=True)
    for ax, run in zip(axes, runs, strict=False):
        samples = run.get("samples") or []
        nodes = sorted({str(s["node"]) for s in samples}, key=natural)
        colors = {n: f"C{i % 10}" for i, n in enumerate(nodes)}
        end = max([float(s["t"]) for s in samples] + [float(run.get("wall_s") or 0.0)])
        for node, spans in _intervals(run.get("interference") or [], end).items():
            for a, b in spans:
                ax.axvspan(a, b, color=colors.get(node, "#999999"), alpha=0.15, lw=0)
        for node in nodes:
            pts = sorted(
                (float(s["t"]), float(s.get("estimate_ns_per_byte") or 0.0))
                for s in samples
                if s["node"] == node
            )
            # No estimate yet (0) is not "free": leave a gap.
            ys = [(v * bs / 1e9 if bs else v) if v > 0 else math.nan for _, v in pts]
            ax.plot([t for t, _ in pts], ys, label=node, color=colors[node], lw=1.2)
        ax.set_title(_title(run), fontsize=9)
        ax.set_xlabel("Time (s)")
        ax.set_ylabel("Migration time (s/block)" if bs else "Migration time (ns/byte)")
        if nodes:
            ax.legend(fontsize=7, ncols=2)
        else:
            _empty(ax, "samples")
    if not runs:
        _empty(axes[0], "runs with migration (ignem, dyrs)")
    fig.savefig(path, dpi=100)


def _fig_last_reads(results: Results, path: Path) -> None:
    from matplotlib.patches import Patch

    groups = group_runs(results)
    ncols = max((len(c) for c in groups.values()), default=1)
    shown = _runs_by_panel(results)
    fig, axes = panels(len(shown), ncols, width=4.5, height=4.0)
    for ax, (_, _, run) in zip(axes, shown, strict=False):
        reads = sorted(
            (t for t in map_tasks(run) if t.get("read_end") is not None), key=lambda t: t["read_end"]
        )
        last = reads[-_LAST_READS:]
        ax.set_title(_title(run), fontsize=9)
        if not last:
            _empty(ax, "map reads")
            continue
        ref = last[-1]["read_end"]
        ax.barh(
            range(len(last)),
            [t["read_end"] - t["start"] for t in last],
            left=[t["start"] - ref for t in last],
            height=0.8,
            color=[_SOURCE_COLORS.get(t.get("source"), "#444444") for t in last],
        )
        ax.set_yticks(range(len(last)), [str(t.get("node")) for t in last], fontsize=6)
        ax.set_xlabel("Time relative to the last read (s)")
        used = sorted({str(t.get("source")) for t in last})
        ax.legend(handles=[Patch(color=_SOURCE_COLORS.get(s, "#444444"), label=s) for s in used], fontsize=7)
    if not shown:
        _empty(axes[0], "runs")
    fig.savefig(path, dpi=100)


def _fig_memory(results: Results, path: Path) -> None:
    shown = [
        (r, [s["mem_used"] / MiB for s in r.get("samples") or [] if s.get("mem_used")])
        for _, _, r in _runs_by_panel(results)
    ]
    shown = [(r, v) for r, v in shown if v]
    fig, axes = panels(len(shown), 3, width=4.5)
    top = max((max(v) for _, v in shown), default=1.0)
    for ax, (run, vals) in zip(axes, shown, strict=False):
        ax.hist(
            vals,
            bins=30,
            range=(0.0, top),
            weights=[1 / len(vals)] * len(vals),
            color=_color(str(run.get("config")), 0),
        )
        ax.set_yscale("log")
        ax.set_title(_title(run), fontsize=9)
        ax.set_xlabel("Memory used per worker (MiB)")
        ax.set_ylabel("Relative frequency")
    if not shown:
        _empty(axes[0], "non-zero memory samples")
    fig.savefig(path, dpi=100)


def _fig_cdf(results: Results, path: Path) -> None:
    groups = group_runs(results)
    fig, axes = panels(len(groups), 2, width=5.5)
    for ax, (scen, by_cfg) in zip(axes, groups.items(), strict=False):
        durations: list[float] = []
        for i, (cfg, runs) in enumerate(by_cfg.items()):
            ds = sorted(float(j["duration"]) for r in runs for j in r.get("jobs", []))
            if not ds:
                continue
            durations += ds
            ys = [0.0] + [(k + 1) / len(ds) for k in range(len(ds))]
            ax.step(
                [ds[0], *ds],
                ys,
                where="post",
                label=first_label(runs, "config_label", cfg),
                color=_color(cfg, i),
            )
        label = next(
            (r.get("scenario_label") for rs in by_cfg.values() for r in rs if r.get("scenario_label")), scen
        )
        ax.set_title(f"Job durations: {label}", fontsize=9)
        if not durations:
            _empty(ax, "jobs")
            continue
        positive = [d for d in durations if d > 0]
        if positive and max(positive) / min(positive) > 100:
            ax.set_xscale("log")
        ax.set_xlabel("Job duration (s)")
        ax.set_ylabel("CDF")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7)
    if not groups:
        _empty(axes[0], "runs")
    fig.savefig(path, dpi=100)


def write_figures(results: Results, out_dir: str | Path) -> dict[str, str]:
    """Writes every figure of :data:`FIGURES` (a "no data" panel when the
    experiment has none of it, so the file set is stable). Returns key -> file
    name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    draw = {
        "reads": _fig_reads,
        "estimate": _fig_estimate,
        "last_reads": _fig_last_reads,
        "memory": _fig_memory,
        "cdf": _fig_cdf,
    }
    for key, fn in draw.items():
        fn(results, out / FIGURES[key])
    return dict(FIGURES)
