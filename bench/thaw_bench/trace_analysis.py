"""The papers' trace analyses, over the SWIM traces (Ignem, section II-C; DYRS,
section II): is there lead-time to migrate a job's input before its tasks read
it, residual disk bandwidth to migrate with, and memory to hold what was
migrated until it is read? ``python -m thaw_bench traces`` runs it (pure
computation, no cluster) and writes ``OUT/traces/results.json`` and ``report.md``.

The papers answer over the Google cluster trace, which records when every task
was scheduled, ran and blocked on disk. A SWIM trace records per job only its
submission time and its map input, shuffle and reduce output bytes (SWIM's
workloads repository); it names the cluster's size (FB-2009: 600 machines,
FB-2010: 3000) but not its servers. What the Google trace measured, a model
computes here; every assumption is a field of :class:`Model`, and the report
prints them:

- **Cluster**: the trace's machine count, each machine one of the papers'
  servers (Ignem IV-A, DYRS V-A: 128 GB RAM, one HDD), the HDD at 100 MiB/s
  (the papers give no rate), 12 map slots (the servers' 12 hyperthreads).
- **Jobs** (the trace has no durations): one map task per 64 MiB block of input
  (Ignem's HDFS block, II-B), at least one (a job without shuffle: per block of
  input or output, whichever is larger). A map task takes 0.28 s plus its
  bytes at 10.4 MiB/s: Ignem's Table II measured SWIM map tasks at 6.44 s
  reading their 64 MB block from HDD and 0.28 s from RAM. Map tasks queue FIFO
  (Hadoop's default scheduler) for the map slots, none before the job's start-up
  (3 s, Hadoop's heartbeat, the platform overhead Ignem II-C1 names). A job with
  shuffle runs one reducer per 64 MiB of its shuffle or output, whichever is
  larger (at most one per slot), in reduce slots of their own (Hadoop 1's), one
  wave after its last map, each reading its share of the shuffle and writing its
  share of the output at the map tasks' rate; a job without shuffle writes its
  output from the maps. Tasks keep their rate when the disks saturate (the
  report counts the windows where they would), so there the model is optimistic.
- **Lead-time** (the trace has none): start-up plus queueing in that model. The
  papers took the Google trace's job queueing time (Ignem II-C1: "job queueing
  time and lead-time are identical").
- **Read-time** (the trace has no IO time): the job's input at one disk's rate,
  the papers' own assumption ("served by one disk on a single machine"); also,
  not the papers', spread over up to one disk per map task and machine.
- **Disk utilization** (the trace names no machine): the bytes the model's tasks
  move (input read, shuffle written and read, output written three times) over
  every disk's rate, per 5-minute window (the papers' averaging), cluster-wide;
  the papers' samples are per server.
- **Memory** (Ignem II-C2, DYRS II-C2; the papers give a worst case, 50 or 56
  tasks each holding a 256 MB block): over the trace, the inputs migration holds
  (a) from each job's submission to its end (Ignem's hypothetical instant
  migration, IV-C4) and (b) each block from its job's submission until its map
  task has read it (what must stay in memory "until it is accessed"), per second,
  against the cluster's memory; per machine assumes blocks spread evenly.
  Beyond the papers: bound (b), the byte-weighted shares (the papers count
  jobs) and the papers' worst-case formula evaluated on the model, since a
  migration at submission holds a whole job's input, not only its running tasks'.
- **Not computable from a SWIM trace**: DYRS Fig. 1's heterogeneity between
  machines (no machine is named).
"""

from __future__ import annotations

import argparse
import datetime
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thaw.sizes import parse_size

from .record import write_json
from .results import checkout_commit, command_line
from .workloads import SWIM_TRACES, TraceJob, find_trace, read_trace

MiB, GiB, TiB = 1 << 20, 1 << 30, 1 << 40

#: Machines of the cluster each SWIM trace comes from (SWIM's workloads repository).
CLUSTER_NODES = {"FB-2009": 600, "FB-2010": 3000}

#: The BENCHMARKS.md heading the results sit under.
SECTION = "Memory sufficiency over the SWIM traces (Ignem, section II-C; DYRS, section II)"


@dataclass(frozen=True)
class Model:
    """What the SWIM trace does not say, assumed (the module's doc gives each
    one's source). Rates in bytes/s, sizes in bytes, times in s."""

    nodes: int
    mem_per_node: int = 128 * GiB
    slots: int = 12
    block_size: int = 64 * MiB
    disk_rate: float = 100 * MiB
    startup: float = 3.0
    task_overhead: float = 0.28
    task_rate: float = 64 * MiB / (6.44 - 0.28)
    window: float = 300.0


@dataclass
class Schedule:
    """The model's run of a trace: per job (submission order) its submission, first
    map start, map tasks and end (s after the first submission); per second the
    input bytes held under each memory bound; per window the bytes disks moved."""

    submit: np.ndarray
    first_start: np.ndarray
    maps: np.ndarray
    end: np.ndarray
    held_to_end: np.ndarray
    held_to_read: np.ndarray
    disk_bytes: np.ndarray


class _Series:
    """Values added at times, binned by ``step`` seconds from 0; grows as needed."""

    def __init__(self, step: float = 1.0) -> None:
        self.step, self.bins = step, np.zeros(1 << 17)

    def add(self, times: Any, values: Any) -> None:
        idx = (np.asarray(times, dtype=float) / self.step).astype(np.int64)
        top = int(idx.max()) + 1 if idx.size else 0
        if top > self.bins.size:
            self.bins = np.concatenate([self.bins, np.zeros(max(top, 2 * self.bins.size) - self.bins.size)])
        np.add.at(self.bins, idx, values)

    def spread(self, t0: float, t1: float, value: float) -> None:
        """``value`` spread evenly over [t0, t1)."""
        if t1 <= t0:
            self.add([t0], [value])
            return
        edges = np.arange(math.floor(t0 / self.step), math.ceil(t1 / self.step) + 1) * self.step
        edges[0], edges[-1] = t0, t1
        self.add(edges[:-1], value * np.diff(edges) / (t1 - t0))

    def until(self, t: float) -> np.ndarray:
        return self.bins[: max(1, math.ceil(t / self.step))]


def assign(free: np.ndarray, n: int, duration: float, release: float) -> np.ndarray:
    """Start times of ``n`` tasks of ``duration`` s under FIFO list scheduling:
    each task, in turn, on the slot that frees first, none before ``release``.
    Updates ``free`` (each slot's next free time). Start times in no order."""
    if n == 1:
        i = int(np.argmin(free))
        s = max(float(free[i]), release)
        free[i] = s + duration
        return np.array([s])
    ready = np.flatnonzero(free <= release)
    if ready.size >= n:  # every task starts at the release
        free[ready[:n]] = release + duration
        return np.full(n, release)
    # Only the n slots that free first can take a task: any other frees no
    # earlier than the n-th of them, and one of those is still unused.
    idx = np.argpartition(free, n - 1)[:n] if n < free.size else np.arange(free.size)
    a = np.maximum(free[idx], release)
    if n <= free.size and a.max() <= a.min() + duration:
        free[idx] = a + duration  # no slot frees twice before the last task starts
        return a
    return _waves(free, idx, a, n, duration)


def _waves(free: np.ndarray, idx: np.ndarray, a: np.ndarray, n: int, d: float) -> np.ndarray:
    """:func:`assign` when a slot takes several tasks: the n starts are the n
    smallest of a_i + j*d (slot i, its j-th task), found by bisecting on the
    last start instead of one task at a time."""

    def count(t: float) -> float:
        c = np.floor((t - a) / d) + 1
        return float(c[c > 0].sum())

    lo, hi = float(a.min()), float(a.min()) + n * d  # count(hi) >= n
    if count(lo) >= n:
        hi = lo
    while hi - lo > d * 1e-9:  # count(lo) < n <= count(hi)
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if count(mid) >= n else (mid, hi)
    per_slot = np.maximum(0, np.floor((hi - a) / d) + 1).astype(np.int64)
    excess = int(per_slot.sum()) - n
    if excess > 0:  # starts tied within (lo, hi]: at most one per slot; the latest go
        last = np.where(per_slot > 0, a + (per_slot - 1) * d, -np.inf)
        per_slot[np.argsort(-last, kind="stable")[:excess]] -= 1
    used = per_slot > 0
    free[idx[used]] = a[used] + per_slot[used] * d
    first = np.repeat(np.cumsum(per_slot) - per_slot, per_slot)
    return np.repeat(a, per_slot) + d * (np.arange(n) - first)


def simulate(jobs: Sequence[TraceJob], m: Model) -> Schedule:
    """Runs ``jobs`` (in submission order) through the model (the module's doc),
    time 0 at the first submission."""
    if not jobs:
        raise ValueError("the trace has no jobs")
    slots = m.nodes * m.slots
    free = np.zeros(slots)
    t0 = min(j.submit for j in jobs)
    n_jobs = len(jobs)
    submit, first, maps, end = (np.zeros(n_jobs) for _ in range(4))
    to_end, to_read, disk = _Series(), _Series(), _Series(m.window)
    for k, j in enumerate(jobs):
        out = j.output if j.shuffle == 0 else 0  # a map-only job's maps write its output
        n = max(1, math.ceil(max(j.input, out) / m.block_size))
        d = m.task_overhead + (j.input + out) / n / m.task_rate
        t = j.submit - t0
        starts = assign(free, n, d, t + m.startup)
        maps_end = float(starts.max()) + d
        job_end = maps_end
        disk.add(starts + d / 2, np.full(n, (j.input + j.shuffle + 3 * out) / n))
        if j.shuffle > 0:
            r = min(slots, max(1, math.ceil(max(j.shuffle, j.output) / m.block_size)))
            job_end += m.task_overhead + (j.shuffle + j.output) / r / m.task_rate
            disk.spread(maps_end, job_end, j.shuffle + 3 * j.output)
        submit[k], first[k], maps[k], end[k] = t, starts.min(), n, job_end
        if j.input:
            to_end.add([t, job_end], [j.input, -j.input])
            to_read.add([t], [j.input])
            to_read.add(starts + d, np.full(n, -j.input / n))
    horizon = float(end.max())
    return Schedule(
        submit, first, maps, end,
        np.cumsum(to_end.until(horizon)), np.cumsum(to_read.until(horizon)), disk.until(horizon),
    )  # fmt: skip


def _memory(held: np.ndarray, m: Model) -> dict[str, float]:
    cluster = m.nodes * m.mem_per_node
    peak = float(held.max())
    return {
        "peak_bytes": peak,
        "mean_bytes": float(held.mean()),
        "p99_bytes": float(np.percentile(held, 99)),
        "peak_share_of_cluster": peak / cluster,
        "peak_per_node_bytes": peak / m.nodes,
        "seconds_over_cluster_memory": int((held > cluster).sum()),
    }


def analyse(jobs: Sequence[TraceJob], m: Model) -> dict[str, Any]:
    """The papers' figures for one trace under ``m`` (keys name each one)."""
    jobs = sorted(jobs, key=lambda j: j.submit)  # FIFO: in submission order
    s = simulate(jobs, m)
    inp = np.array([j.input for j in jobs], dtype=float)
    lead = s.first_start - s.submit
    one = inp / m.disk_rate
    disks = np.minimum(s.maps, m.nodes)
    util = s.disk_bytes / (m.nodes * m.disk_rate * m.window)
    total = float(inp.sum())
    top = np.sort(inp)[::-1][: max(1, math.ceil(len(inp) / 100))]
    return {
        "jobs": len(jobs),
        "span_s": float(s.end.max()),
        "input_bytes": total,
        "jobs_at_most_one_block": float((inp <= m.block_size).mean()),
        "jobs_without_input": float((inp == 0).mean()),
        "largest_input_bytes": float(inp.max()),
        "input_share_of_largest_1pct": float(top.sum()) / total if total else 0.0,
        "lead_mean_s": float(lead.mean()),
        "lead_median_s": float(np.median(lead)),
        "lead_p90_s": float(np.percentile(lead, 90)),
        "jobs_queued": float((lead > m.startup + 1e-9).mean()),
        "jobs_lead_ge_read_one_disk": float((lead >= one).mean()),
        "jobs_lead_ge_read_spread": float((lead >= one / disks).mean()),
        "jobs_input_within_startup_one_disk": float((inp <= m.startup * m.disk_rate).mean()),
        # Had every job the Google trace's mean lead-time, or Ignem's testbed's minimum.
        "jobs_input_within_8_8s_one_disk": float((inp <= 8.8 * m.disk_rate).mean()),
        "jobs_input_within_10s_one_disk": float((inp <= 10 * m.disk_rate).mean()),
        "bytes_within_lead_one_disk": float(np.minimum(inp, lead * m.disk_rate).sum()) / total
        if total
        else 1.0,
        "bytes_within_lead_spread": (
            float(np.minimum(inp, lead * disks * m.disk_rate).sum()) / total if total else 1.0
        ),
        "disk_util_mean": float(util.mean()),
        "disk_windows_under_4pct": float((util < 0.04).mean()),
        "disk_util_p80": float(np.percentile(util, 80)),
        "disk_util_max": float(util.max()),
        "disk_windows_over_100pct": float((util > 1).mean()),
        "cluster_memory_bytes": float(m.nodes * m.mem_per_node),
        "held_to_end": _memory(s.held_to_end, m),
        "held_to_read": _memory(s.held_to_read, m),
        "papers_worst_case_per_node_bytes": float(m.slots * m.block_size),
    }


def trace_label(trace: str) -> str:
    """A trace's name as reports give it: its file name up to the first ``_``
    (``FB-2009``)."""
    return Path(trace).name.split("_")[0].removesuffix(".tsv")


def model_for(trace: str, nodes: int | None = None, **kw: Any) -> Model:
    """The model of ``trace``'s cluster: ``nodes`` machines, or the count SWIM
    gives for the trace."""
    if nodes is None:
        nodes = CLUSTER_NODES.get(trace_label(trace))
        if nodes is None:
            raise ValueError(
                f"no machine count known for trace {trace_label(trace)!r} (known: "
                f"{', '.join(CLUSTER_NODES)}): give --nodes"
            )
    if nodes < 1 or kw.get("slots", 1) < 1:
        raise ValueError("nodes and slots must be at least 1")
    return Model(nodes=nodes, **kw)


# The report: the papers' figures (Google trace) beside each trace's.


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _size(b: float) -> str:
    for unit, k in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB)):
        if b >= k:
            return f"{b / k:.3g} {unit}" if b / k < 1000 else f"{b / k:,.0f} {unit}"
    return f"{b:.0f} B"


def _held(h: dict[str, float]) -> tuple[str, str]:
    return (
        f"{_size(h['peak_bytes'])} / {_size(h['p99_bytes'])} / {_size(h['mean_bytes'])}",
        f"{_size(h['peak_per_node_bytes'])} / {_pct(h['peak_share_of_cluster'])}",
    )


#: (measure, the papers' figure, the trace's figure from its analysis).
MEASURES: list[tuple[str, str, Any]] = [
    ("jobs", "", lambda f: f"{f['jobs']:,}"),
    ("input read over the trace", "", lambda f: _size(f["input_bytes"])),
    (
        "jobs reading at most one 64 MiB block",
        "85% of Ignem's 200-job replay (IV-B1, 64 MB)",
        lambda f: _pct(f["jobs_at_most_one_block"]),
    ),
    ("input read by the largest 1% of jobs", "", lambda f: _pct(f["input_share_of_largest_1pct"])),
    ("the largest job's input", "", lambda f: _size(f["largest_input_bytes"])),
    (
        "job lead-time, mean / median (s)",
        "8.8 / 1.8 (Google, Ignem II-C1; DYRS II-C1: mean 8.8)",
        lambda f: f"{f['lead_mean_s']:.2f} / {f['lead_median_s']:.2f}",
    ),
    ("jobs that queued for slots", "", lambda f: _pct(f["jobs_queued"])),
    (
        "jobs whose lead-time >= read-time, input from one disk",
        "81% (Ignem Fig. 3, DYRS Fig. 2)",
        lambda f: _pct(f["jobs_lead_ge_read_one_disk"]),
    ),
    (
        "the same, input read from one disk per map task (up to one per machine)",
        "",
        lambda f: _pct(f["jobs_lead_ge_read_spread"]),
    ),
    (
        "jobs one disk reads within the start-up alone",
        "",
        lambda f: _pct(f["jobs_input_within_startup_one_disk"]),
    ),
    (
        "jobs one disk reads within 8.8 s (Google's mean lead-time) / 10 s (Ignem's testbed)",
        "",
        lambda f: (
            f"{_pct(f['jobs_input_within_8_8s_one_disk'])} / {_pct(f['jobs_input_within_10s_one_disk'])}"
        ),
    ),
    (
        "input bytes migratable within lead-time: one disk / one per map task",
        "",
        lambda f: f"{_pct(f['bytes_within_lead_one_disk'])} / {_pct(f['bytes_within_lead_spread'])}",
    ),
    (
        "disk utilization, mean over the trace",
        "3.1% over 24 h, all servers (Ignem II-C1, DYRS II-C2)",
        lambda f: _pct(f["disk_util_mean"]),
    ),
    (
        "5-minute windows under 4% disk utilization",
        "80% of samples (DYRS Fig. 3, 40 servers)",
        lambda f: _pct(f["disk_windows_under_4pct"]),
    ),
    (
        "busiest 5-minute window (windows whose tasks ask more than the disks give)",
        "at most 5%, the 40 servers' mean (Ignem Fig. 4)",
        lambda f: f"{_pct(f['disk_util_max'])} ({_pct(f['disk_windows_over_100pct'])})",
    ),
    (
        "memory, inputs from submission to job end (instant migration): peak / p99 / mean",
        "",
        lambda f: _held(f["held_to_end"])[0],
    ),
    (
        "the same, to job end: peak per machine / share of the cluster's memory",
        "worst case per server 12.5 GB (Ignem: 50 tasks x 256 MB), 14.3 GB (DYRS: 56 x 256 MB), "
        "against 128 GB",
        lambda f: _held(f["held_to_end"])[1],
    ),
    (
        "the papers' worst case with this model's slots and block (slots x block)",
        "",
        lambda f: _size(f["papers_worst_case_per_node_bytes"]),
    ),
    (
        "memory, each block from submission until its map has read it: peak / p99 / mean",
        "",
        lambda f: _held(f["held_to_read"])[0],
    ),
    (
        "the same, until read: peak per machine / share of the cluster's memory",
        "",
        lambda f: _held(f["held_to_read"])[1],
    ),
    (
        "seconds needing more than the cluster's memory (either bound)",
        "none (the worst case fits)",
        lambda f: str(max(f[k]["seconds_over_cluster_memory"] for k in ("held_to_end", "held_to_read"))),
    ),
    (
        "heterogeneity between machines (DYRS Fig. 1)",
        "node 1 at 13x and 5x the utilization of nodes 2 and 3",
        lambda f: "not in the trace (it names no machine)",
    ),
]

PAPERS = "papers (Google trace unless named)"


def _assumptions(models: dict[str, Model]) -> list[dict[str, str]]:
    """The model's assumptions beside what the papers had, one row each."""

    def each(fn: Any) -> dict[str, str]:
        return {label: fn(m, label) for label, m in models.items()}

    def machines(m: Model, label: str) -> str:
        return f"{m.nodes:,} ({'SWIM' if CLUSTER_NODES.get(label) == m.nodes else 'given'})"

    rows = [
        ("machines", "Google: 12,000+ servers; testbeds: 8", machines),
        ("memory per machine", "128 GB (testbeds), hundreds of GB", lambda m, _l: _size(m.mem_per_node)),
        ("disk per machine", "one 1 TB HDD (rate not given)", lambda m, _l: f"one, {_size(m.disk_rate)}/s"),
        ("map slots per machine", "10 tasks on average (Google), at most 50-56", lambda m, _l: f"{m.slots}"),
        ("block", "64 MB (Ignem's HDFS); 256 MB in the worst case", lambda m, _l: _size(m.block_size)),
        (
            "map task",
            "6.44 s from HDD, 0.28 s from RAM (Ignem Table II)",
            lambda m, _l: f"{m.task_overhead:g} s + bytes at {_size(m.task_rate)}/s",
        ),
        (
            "job duration",
            "measured",
            lambda m, _l: (
                "map waves in FIFO order, then one wave of reducers (one per block of shuffle "
                "or output, in slots of their own) at the map tasks' rate"
            ),
        ),
        (
            "lead-time",
            "job queueing time, measured",
            lambda m, _l: f"{m.startup:g} s start-up + FIFO queueing for the slots",
        ),
        ("read-time", "tasks' disk IO time, measured, one disk", lambda m, _l: "input at one disk's rate"),
        (
            "disk utilization",
            "per server, tasks' IO time, 5-min averages",
            lambda m, _l: f"cluster-wide, the tasks' bytes, {m.window / 60:g}-min windows",
        ),
    ]
    return [{"assumption": a, PAPERS: p, **each(fn)} for a, p, fn in rows]


def table(rows: list[dict[str, str]]) -> str:
    """A Markdown table of ``rows`` (keys: the column headers)."""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r[h] for h in head) + " |" for r in rows]
    return "\n".join(lines)


def run(
    traces: Sequence[str], out: Path, command: str, nodes: int | None = None, **kw: Any
) -> dict[str, Any]:
    """Analyses each trace, writes ``out/traces/results.json`` and ``report.md``,
    returns the results (``rows``: the report's table, as printed)."""
    models = {trace_label(t): model_for(t, nodes, **kw) for t in traces}
    if len(models) < len(traces):
        raise ValueError(f"two traces with one name: {', '.join(traces)}")
    figures: dict[str, Any] = {}
    for t, (label, m) in zip(traces, models.items(), strict=True):
        path = find_trace(t)
        figures[label] = {"file": path.name, "model": asdict(m), "figures": analyse(read_trace(path), m)}
    rows = [
        {"measure": name, PAPERS: paper, **{k: fn(v["figures"]) for k, v in figures.items()}}
        for name, paper, fn in MEASURES
    ]
    doc = {
        "title": "Lead-time, disk utilization and memory for migration over the SWIM traces, "
        "beside the papers' Google-trace figures (modelled: the traces give sizes and submissions only)",
        "section": SECTION,
        "command": [command],
        "commit": checkout_commit(),
        "commit_is": "the build that computed it",
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
        "machine": "any: a computation over the trace files, no cluster and no timing",
        "rows": rows,
        "assumptions": _assumptions(models),
        "traces": figures,
    }
    d = out / "traces"
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / "results.json", doc)
    (d / "report.md").write_text(report(doc))
    return doc


def report(doc: dict[str, Any]) -> str:
    """The report: the papers' figures beside each trace's, then the model."""
    return (
        f"# {doc['title']}\n\n{table(doc['rows'])}\n\n"
        f"What the model assumes where the traces are silent (thaw_bench.trace_analysis):\n\n"
        f"{table(doc['assumptions'])}\n"
    )


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``traces`` subcommand of ``python -m thaw_bench``."""
    d = Model(nodes=1)
    t = sub.add_parser(
        "traces",
        help="the papers' trace analyses (Ignem II-C, DYRS II: lead-time, disk utilization, memory) "
        "over the SWIM traces; no cluster",
    )
    t.add_argument(
        "--traces", default=",".join(SWIM_TRACES), help="SWIM trace files, comma-separated (default: both)"
    )
    t.add_argument(
        "--out", type=Path, default=Path("bench-out"), help="writes OUT/traces/ (default %(default)s)"
    )
    known = ", ".join(f"{k} {v}" for k, v in CLUSTER_NODES.items())
    t.add_argument(
        "--nodes", type=int, default=None, help=f"machines (default: the trace's cluster, {known})"
    )
    t.add_argument(
        "--mem", type=parse_size, default=d.mem_per_node, help="memory per machine (default 128GiB)"
    )
    t.add_argument("--slots", type=int, default=d.slots, help="map slots per machine (default %(default)s)")
    t.add_argument("--block-size", type=parse_size, default=d.block_size, help="default 64MiB")
    t.add_argument("--disk", default="100MiB/s", help="each machine's disk (default %(default)s)")
    t.add_argument(
        "--startup", type=float, default=d.startup, help="each job's start-up before its tasks, s (default 3)"
    )
    return t


def main_args(a: argparse.Namespace, argv: list[str] | None = None) -> int:
    try:
        disk = parse_size(a.disk.removesuffix("/s"))
    except ValueError as e:
        raise SystemExit(f"traces: --disk {a.disk!r}: {e}") from None
    if disk <= 0 or a.mem <= 0 or a.block_size <= 0 or a.startup < 0:
        raise SystemExit("--disk, --mem and --block-size must be positive, --startup not negative")
    traces = [t.strip() for t in a.traces.split(",") if t.strip()]
    try:
        doc = run(
            traces, a.out, command_line(argv), a.nodes, mem_per_node=a.mem, slots=a.slots,
            block_size=a.block_size, disk_rate=float(disk), startup=a.startup,
        )  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"traces: {e}") from None
    print(report(doc))
    print(f"results: {a.out / 'traces' / 'results.json'}")
    return 0
