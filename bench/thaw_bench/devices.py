"""Ignem, Figs. 1-2 (section II-B): the time a map task takes to read one block,
and the map task's runtime, with the inputs on a hard disk, on an SSD, and in
memory.

The paper ran SWIM with HDFS on an HDD, on an SSD and in RAM: block reads from
RAM were 160x faster on average than from the HDD (hurt by concurrent reads)
and 7x faster than from the SSD; map tasks reading RAM ran 23x faster than
those reading the HDD. Here one map-only job (SWIM's map task: read the block,
checksum it) of ``blocks`` blocks runs on the emulated cluster, ``slots`` map
tasks at a time per node so a disk serves several streams at once, three ways
on the very same placed blocks:

- ``hdd``: the DISK tiers behind the harness's hard-disk model (``--disk``,
  default 12 MiB/s, ``--penalty`` 0.3: ``n`` concurrent streams share
  ``bandwidth / (1 + 0.3 (n - 1))``), pages dropped before the run;
- ``ssd``: the same DISK tiers behind an SSD model, :data:`SSD` by default: a
  SATA SSD (~500 MB/s sequential reads, 4x a 7.2K HDD's ~120 MB/s) scaled by
  the factor that makes the HDD 12 MiB/s (1/10), and no concurrency penalty
  (flash serves concurrent reads from parallel chips); pages dropped;
- ``ram``: every input block migrated into the MEM tier before the run (the
  inputs-in-RAM configuration), read by short-circuit on the block's node or
  streamed from another node's memory.

A block read is a task's open and read of its block through the Thaw client
(``read_end - start`` in the task log); a task's runtime is its whole function
(read, checksum). Each device runs ``repeats`` times, in a rotated order.

The ratios are not the paper's by construction: the HDD's and SSD's rates are
the model's (a choice, stated), and the RAM path's per-block cost is what it
is on this machine (a client's open, a gRPC call, a short-circuit map or a
loopback stream of 1 MiB: milliseconds, against the paper's 64 MB from RAM at
memory bandwidth). The report gives, beside each ratio, the model's own
prediction for a disk read at the slots' concurrency and the RAM path's
local and remote costs, so a difference can be told apart.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from thaw.sizes import parse_size

from .configs import CONFIGS, SCENARIOS
from .experiments import Bench, _document, _place, emulated
from .record import finish_document
from .report import check_accounting
from .results import map_tasks
from .workloads import JobSpec

#: The SSD model (see the module doc): a SATA SSD's ~500 MB/s scaled as the HDD is.
SSD = "48MiB/s,penalty=0"

#: The paper's averages (Ignem, section II-B): RAM's speedup over each device.
PAPER = {"block_read_hdd": 160.0, "block_read_ssd": 7.0, "task_hdd": 23.0}

DEVICES = ("hdd", "ssd", "ram")


def parse_model(spec: str) -> tuple[str, float]:
    """``"48MiB/s,penalty=0"`` (or just a rate) -> (rate, penalty)."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise ValueError("empty device model: expected RATE[,penalty=P], e.g. 48MiB/s,penalty=0")
    rate, penalty = parts[0], 0.0
    parse_size(rate.removesuffix("/s"))  # a bad rate is an error here, not in a worker
    for p in parts[1:]:
        key, _, value = p.partition("=")
        if key != "penalty":
            raise ValueError(f"unknown device model field {key!r} in {spec!r}: expected penalty=P")
        penalty = float(value)
    return rate, penalty


def _job(blocks: int, block_size: int) -> JobSpec:
    """A map-only job: SWIM's map task over ``blocks`` blocks, no shuffle, no output."""
    return JobSpec("scan", "swim", 0.0, blocks * block_size, 0, 0)


def _stats(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"n": 0, "mean": None, "median": None, "p90": None}
    s = sorted(xs)
    return {
        "n": len(s),
        "mean": statistics.fmean(s),
        "median": statistics.median(s),
        "p90": s[min(len(s) - 1, int(0.9 * len(s)))],
    }


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """Per device: block-read and task-runtime statistics over every repeat
    (mean, median, p90), each repeat's means (the spread), read sources; RAM's
    speedups over the disks beside the paper's, and what explains them."""
    per: dict[str, Any] = {}
    for dev in DEVICES:
        runs = [r for r in doc["runs"] if r["device"] == dev]
        if not runs:
            continue
        maps = [t for r in runs for t in map_tasks(r)]
        reads = [t["read_end"] - t["start"] for t in maps]
        tasks = [t["end"] - t["start"] for t in maps]
        sources: dict[str, int] = {}
        for t in maps:
            sources[t["source"]] = sources.get(t["source"], 0) + 1
        per[dev] = {
            "block_read_s": _stats(reads),
            "task_s": _stats(tasks),
            "repeat_read_means": [
                statistics.fmean(t["read_end"] - t["start"] for t in map_tasks(r)) for r in runs
            ],
            "repeat_task_means": [
                statistics.fmean(t["end"] - t["start"] for t in map_tasks(r)) for r in runs
            ],
            "job_s": [r["jobs"][0]["duration"] for r in runs],
            "sources": sources,
            # The machine's cores busy over the runs (every process, not only these).
            "busy_share": statistics.fmean(float((r.get("cpu") or {}).get("busy_share", 0.0)) for r in runs),
            # CPU the Dask workers spent per map task (its read, checksum, bookkeeping).
            "task_cpu_s": statistics.fmean(
                float((r.get("cpu") or {}).get("dask_workers_cpu_s", 0.0)) / max(1, len(map_tasks(r)))
                for r in runs
            ),
        }
        if dev == "ram":
            for src in ("mem", "mem-remote"):
                own = [t["read_end"] - t["start"] for t in maps if t["source"] == src]
                per[dev][f"block_read_{src}_s"] = _stats(own)
    ratios: dict[str, Any] = {}

    def ratio(dev: str, what: str) -> dict[str, Any] | None:
        if dev not in per or "ram" not in per:
            return None
        key = "block_read_s" if what == "read" else "task_s"
        rep = "repeat_read_means" if what == "read" else "repeat_task_means"
        pairs = list(zip(per[dev][rep], per["ram"][rep], strict=False))
        each = [a / b for a, b in pairs if b > 0]
        mean = per[dev][key]["mean"] / per["ram"][key]["mean"] if per["ram"][key]["mean"] else None
        return {"ratio": mean, "repeat_min": min(each, default=None), "repeat_max": max(each, default=None)}

    ratios["block_read_hdd"] = ratio("hdd", "read")
    ratios["block_read_ssd"] = ratio("ssd", "read")
    ratios["task_hdd"] = ratio("hdd", "task")
    ratios["task_ssd"] = ratio("ssd", "task")
    params = doc["params"]
    bs = params["block_size"]
    model = {}
    for dev, (rate, penalty) in params["models"].items():
        bw = parse_size(rate.removesuffix("/s"))
        n = params["slots"]
        # A block read with every slot of the node reading the same disk: n
        # streams share bandwidth / (1 + penalty (n - 1)).
        model[dev] = {"alone_s": bs / bw, "at_slots_s": n * bs * (1 + penalty * (n - 1)) / bw}
    return {"devices": per, "ratios": ratios, "paper": PAPER, "model": model}


def _f(x: float | None, unit: str = "s") -> str:
    if x is None:
        return "-"
    if unit == "ms":
        return f"{x * 1000:.1f}"
    return f"{x:.3f}"


def _x(r: dict[str, Any] | None) -> str:
    if not r or r["ratio"] is None:
        return "-"
    return f"{r['ratio']:.1f}x ({r['repeat_min']:.1f}-{r['repeat_max']:.1f})"


def table_lines(doc: dict[str, Any]) -> list[str]:
    """The per-device table (ms) and the ratio table beside the paper's, Markdown."""
    s = doc["summary"]
    out = [
        "| device | block read: mean / median / p90, ms | task: mean / median / p90, ms "
        "| repeats' mean read, ms | reads from |",
        "|---|---:|---:|---:|---|",
    ]
    for dev, d in s["devices"].items():
        b, t = d["block_read_s"], d["task_s"]
        spread = "-".join(
            f"{x * 1000:.1f}" for x in (min(d["repeat_read_means"]), max(d["repeat_read_means"]))
        )
        src = ", ".join(f"{k} {v}" for k, v in sorted(d["sources"].items()))
        out.append(
            f"| {dev} | {_f(b['mean'], 'ms')} / {_f(b['median'], 'ms')} / {_f(b['p90'], 'ms')} "
            f"| {_f(t['mean'], 'ms')} / {_f(t['median'], 'ms')} / {_f(t['p90'], 'ms')} | {spread} | {src} |"
        )
    r = s["ratios"]
    out += [
        "",
        "| RAM faster than | Thaw (mean; repeats' range) | paper |",
        "|---|---:|---:|",
        f"| HDD, block read | {_x(r['block_read_hdd'])} | {PAPER['block_read_hdd']:.0f}x |",
        f"| SSD, block read | {_x(r['block_read_ssd'])} | {PAPER['block_read_ssd']:.0f}x |",
        f"| HDD, map task | {_x(r['task_hdd'])} | {PAPER['task_hdd']:.0f}x |",
        f"| SSD, map task | {_x(r['task_ssd'])} | - (Fig. 2 only) |",
    ]
    return out


def why_lines(doc: dict[str, Any]) -> list[str]:
    """What the ratios are made of, measured: the model's disk read time at the
    slots' concurrency against the measured one, and the RAM path's cost."""
    s = doc["summary"]
    d, m = s["devices"], s["model"]
    lines = []
    for dev in ("hdd", "ssd"):
        if dev in d and dev in m:
            lines.append(
                f"- {dev.upper()}: the model gives a block {_f(m[dev]['alone_s'], 'ms')} ms alone, "
                f"{_f(m[dev]['at_slots_s'], 'ms')} ms with {doc['params']['slots']} streams on the disk; "
                f"measured mean {_f(d[dev]['block_read_s']['mean'], 'ms')} ms (streams per disk vary: "
                "a task reads whichever replica its client picks)."
            )
    if "ram" in d:
        loc, rem = d["ram"].get("block_read_mem_s", {}), d["ram"].get("block_read_mem-remote_s", {})
        lines.append(
            f"- RAM: a block read costs {_f(loc.get('mean'), 'ms')} ms by short-circuit on its node "
            f"({loc.get('n', 0)} reads) and {_f(rem.get('mean'), 'ms')} ms streamed from another node's "
            f"memory ({rem.get('n', 0)} reads): a fixed cost per block (open, a metadata call, the map or "
            "the stream) that the paper's 64 MB blocks spread over 64 times the bytes."
        )
    if "ram" in d:
        cores = max((int((r.get("cpu") or {}).get("cores", 0)) for r in doc["runs"]), default=0)
        n = doc["params"]["nodes"] * doc["params"]["slots"]
        lines.append(
            f"- CPU: the Dask workers spent {_f(d['ram']['task_cpu_s'], 'ms')} ms of CPU per RAM map task; "
            f"{n} tasks run at once on {cores} cores, so a read from memory also waits its turn for a core "
            f"(about {n / max(1, cores):.0f} tasks per core), where the paper's servers gave each map slot "
            "a core."
        )
    busy = ", ".join(
        f"{dev.upper()} {d[dev]['busy_share'] * 100:.0f}%" for dev in d if "busy_share" in d[dev]
    )
    lines.append(f"- The machine's cores were busy (every process on it): {busy} of the runs' time.")
    return lines


def _figure(doc: dict[str, Any], out: Path) -> str | None:
    """Fig. 1's histograms (block read time per device, log scale) and Fig. 2's
    CDF of map-task runtimes."""
    try:
        import numpy as np

        from .figures import panels
    except ImportError:
        return None
    runs = doc["runs"]
    fig, axes = panels(4, 4, width=3.6, height=3.0)
    reads = {
        dev: [t["read_end"] - t["start"] for r in runs if r["device"] == dev for t in map_tasks(r)]
        for dev in DEVICES
    }
    every = [x for xs in reads.values() for x in xs if x > 0]
    if not every:
        return None
    bins = np.logspace(np.log10(min(every)) - 0.05, np.log10(max(every)) + 0.05, 40)
    for ax, dev in zip(axes[:3], DEVICES, strict=True):
        ax.hist(reads[dev], bins=bins, color={"hdd": "#d62728", "ssd": "#ff7f0e", "ram": "#2ca02c"}[dev])
        ax.set_xscale("log")
        ax.set_title(f"Fig. 1: block reads, {dev.upper()}", fontsize=9)
        ax.set_xlabel("block read time, s")
        ax.set_ylabel("map tasks")
    ax = axes[3]
    for dev in DEVICES:
        xs = sorted(t["end"] - t["start"] for r in runs if r["device"] == dev for t in map_tasks(r))
        if xs:
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=dev.upper())
    ax.set_xscale("log")
    ax.set_title("Fig. 2: map task runtime CDF", fontsize=9)
    ax.set_xlabel("task runtime, s")
    ax.legend(fontsize=8)
    name = "devices.png"
    fig.savefig(out / name, dpi=110)
    return name


def write_report(doc: dict[str, Any], out: Path) -> Path:
    """``report.md`` (and the figure) for a devices results document."""
    figure = _figure(doc, out)
    p = doc["params"]
    problems = {r["run"]: check_accounting(r) for r in doc["runs"]}
    bad = {k: v for k, v in problems.items() if v}
    text = [
        f"# {doc['title']}",
        "",
        f"{doc['date']} · `{doc['command']}` · {p['nodes']} nodes, {p['slots']} map slots each, "
        f"{p['blocks']} blocks of {p['block_size'] // 1024} KiB, {p['repeats']} repeats; "
        f"HDD {p['models']['hdd'][0]} (penalty {p['models']['hdd'][1]}), "
        f"SSD {p['models']['ssd'][0]} (penalty {p['models']['ssd'][1]}).",
        "",
        *table_lines(doc),
        "",
        "What the ratios are made of:",
        "",
        *why_lines(doc),
        "",
        "Accounting: " + ("no problems (every block read once, bytes as expected)." if not bad else str(bad)),
    ]
    if figure:
        text += ["", f"![Figs. 1-2]({figure})"]
    report = out / "report.md"
    report.write_text("\n".join(text) + "\n")
    return report


def devices(
    bench: Bench,
    quick: bool = False,
    *,
    nodes: int = 4,
    slots: int = 4,
    blocks: int = 96,
    repeats: int = 3,
    ssd: str = SSD,
) -> Path:
    """Runs the job on HDD, SSD and RAM ``repeats`` times each (rotated order)
    on ``nodes`` nodes of ``slots`` map slots; writes ``devices/results.json``
    and ``report.md``; returns the report's path. ``quick``: 2 nodes of 2
    slots, 16 blocks, one repeat (CI's smoke test, well under 40 s)."""
    if quick:
        nodes, slots, blocks, repeats = 2, 2, 16, 1
    if blocks < 1 or repeats < 1 or nodes < 1 or slots < 1:
        raise ValueError("devices: blocks, repeats, nodes and slots must be at least 1")
    spec = dataclasses.replace(bench.spec, nodes=nodes, slots=slots, racks=min(bench.spec.racks, nodes))
    models = {"hdd": (spec.disk, spec.penalty), "ssd": parse_model(ssd)}
    bench = dataclasses.replace(bench, spec=spec)
    results_dir = bench.out / "devices"
    doc = _document(
        "devices",
        "Ignem, Figs. 1-2: block reads and map tasks from HDD, SSD and RAM",
        bench,
        {"blocks": blocks, "repeats": repeats, "models": models, "quick": quick},
    )
    bs = parse_size(spec.block_size)
    job = _job(blocks, bs)
    config = {"hdd": CONFIGS["cold"], "ssd": CONFIGS["cold"], "ram": CONFIGS["ram"]}
    with emulated(bench, results_dir) as (cluster, runner):
        doc["params"].update(_place(cluster, [job], bench))
        for rep in range(repeats):
            order = list(DEVICES[rep % 3 :] + DEVICES[: rep % 3])
            for dev in order:
                rate, penalty = models.get(dev, models["hdd"])
                for n in cluster.nodes:
                    n.disk, n.penalty = rate, penalty
                name = f"{dev}-r{rep}"
                bench.say(
                    f"{name}: {dev.upper()} ({rate}, penalty {penalty})" if dev != "ram" else f"{name}: RAM"
                )
                res = runner.run([job], config[dev], SCENARIOS["homogeneous"], name, progress=bench.say)
                res.update(device=dev, repeat=rep, model=f"{rate},penalty={penalty}")
                reads = [t["read_end"] - t["start"] for t in map_tasks(res)]
                took, mean = res["jobs"][0]["duration"], statistics.fmean(reads) * 1000
                bench.say(f"  job {took:.2f}s, mean block read {mean:.1f} ms")
                doc["runs"].append(res)
    return finish_document(doc, results_dir, bench.say, summarize, write_report, table_lines)


def add_parser(sub: Any, common: Any) -> None:
    """``python -m thaw_bench devices``."""
    d = sub.add_parser(
        "devices",
        parents=[common],
        help="Ignem, Figs. 1-2: block reads and map tasks from HDD, SSD and RAM",
    )
    d.add_argument("--blocks", type=int, default=96, help="blocks of the map-only job (default %(default)s)")
    d.add_argument(
        "--ssd", default=SSD, help="the SSD's device model, RATE[,penalty=P] (default %(default)s)"
    )
    d.add_argument("--quick", action="store_true", help="CI's smoke configuration (under 40 s)")
    d.set_defaults(nodes=4, slots=4, repeats=3)
