"""CAVA, section V on this machine: cache-affinity-aware replacement against LRU, LFU
and No-Cache, on a small emulated cluster (``python -m thaw_bench cava``).

The cluster is a :class:`thaw.LocalCluster` (2 workers by default) with a small
MEM tier, blocks of a few MiB and an emulated under-store (``device_model``, e.g.
``ufs=40MiB/s,penalty=0.3``), so a cold block costs real device time and a
memory hit costs almost nothing. Reads cache on read (the client's
``read_cache="mem"``); No-Cache reads with ``read_cache="none"``. Migration is
off (``migration_policy="none"``): only what reads leave in memory is ever
cached, so the cache policy (``LocalCluster(cache_policy=...)``) alone decides
what stays: ``lru``, ``lfu``, ``ca`` (CA-Only, and Static-CA with declared
affinities) or ``cava``.

Applications are Dask graphs (one submission each, one task per input block,
annotated ``thaw_job`` = the application's run, ``thaw_app`` = its kind, and
for Static-CA ``thaw_cache_affinity``), run with :func:`thaw.dask.install`
(whose worker plugin measures each job's task CPU and writes for the master's
classifier) on Dask workers of one thread each, so that each task's CPU and
writes are its own. Each application first waits ``startup`` (the
``thaw_start_after`` annotation: its launch, holding no slot and measured in
its runtime, not in its tasks' figures). Three kinds, placed as CAVA,
Table I's applications are by the classifier (thresholds: the mean of the
applications measured lately):

- ``grep`` (high affinity): counts a byte pattern; little CPU, no output;
- ``sort`` (medium): sorts the block's 8-byte keys in :data:`PIECES` runs (CPU
  below the mean), writing each run through to the under-store as a map
  task's spill (writes above the mean);
- ``pagerank`` (low): many PageRank iterations over the block read as an edge
  list (CPU well above the mean), writing its ranks every quarter of them, at
  a little above sort's rate.

Writes go out while a task runs, not all at its end: the master counts them
from the workers' heartbeats and stops reclassifying an application once its
last input is read, so writes at the very end would not count.

Experiments (each optional, ``--experiments``):

- ``affinity``: each kind alone on one cluster, cold (No-Cache reads) and with
  its input already in memory: the measured benefit ``1 - R_hot / R_cold``
  (CAVA, section V-A's Static-CA values), the CPU and write figures the master
  measured and the class it gave each kind. The kinds run once cold before the
  measured runs, so that the classifier's thresholds are the mean of the three
  (as Table I's average is) when the measured runs are classified.
- ``workloads``: W1-W6 of Table III scaled down: ``apps`` applications, at most
  ``concurrency`` running at once (the next starts when one ends), kinds in the
  70/20/10 (CA-H) or 20/70/10 (CA-M) mix for high/medium/low affinity, hot files
  (read more than three times) holding more (HD-H) or less (HD-L) than half of
  the distinct input, shared across affinity classes (W1, W4, W5) or within one
  (W2, W3, W6), the distinct input larger than the cluster's memory. Each runs
  under every policy (:data:`POLICIES`) on a fresh cluster: total runtime
  normalized to No-Cache, each kind's mean runtime normalized to No-Cache
  (Table IV), share of hot data cached at the end, hit ratio, the classes the
  master gave, the workers' drops; for one workload (W5) cached bytes of each
  hot file and of the cold files every 0.5 s (CAVA, Fig. 7).
- ``trace``: the first jobs of a SWIM trace (sizes from the trace, scaled to
  blocks), their inputs recurring by a Zipf popularity (the trace names no
  files), under the same policies: hit ratio and mean job runtime.

A run that fails (the cluster does not start, an application errs, the run
times out) is recorded with its error and left out of the tables' means.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

import thaw.dask as td
from thaw.client import Client
from thaw.cluster import LocalCluster
from thaw.sizes import parse_size

from .runner import stop_dask

MiB = 1 << 20

#: CAVA, section V-A's off-line profiled affinities of the applications ours stand for.
PAPER_AFFINITY = {"grep": 0.377, "sort": 0.146, "pagerank": 0.041}
#: CAVA, section V-B: improvement over No-Cache averaged over W1-W6, and the share of
#: hot data cached at the end (Fig. 6).
PAPER_IMPROVEMENT = {"lru": 0.054, "static-ca": 0.109, "ca-only": 0.107, "cava": 0.156}
PAPER_HOT_SHARE = {"static-ca": 0.506, "ca-only": 0.561, "cava": 0.812}


# ------------------------------------------------------------------ definitions


@dataclass(frozen=True)
class AppKind:
    name: str
    affinity: str  # the class CAVA, Table I gives its paper counterpart: high, medium, low
    #: Output written per input byte (through to the under-store).
    write_ratio: float
    like: str


APPS: dict[str, AppKind] = {
    a.name: a
    for a in (
        AppKind("grep", "high", 0.0, "Grep (CPU 7%, writes 4 KB/s)"),
        AppKind("sort", "medium", 1.0, "Sort (CPU 17%, writes 2.9 MB/s)"),
        AppKind("pagerank", "low", 4.0, "Pagerank (CPU 36%, writes 1.8 MB/s)"),
    )
}
KIND_OF_CLASS = {a.affinity: a.name for a in APPS.values()}
CLASSES = ("high", "medium", "low")


@dataclass(frozen=True)
class Policy:
    name: str
    label: str
    cache_policy: str  # LocalCluster's
    read_cache: str = "mem"
    #: Static-CA: each application declares its affinity (annotation).
    declare: bool = False


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("no-cache", "No-Cache", "lru", read_cache="none"),
        Policy("lru", "LRU", "lru"),
        Policy("lfu", "LFU", "lfu"),
        Policy("ca-only", "CA-Only", "ca"),
        Policy("static-ca", "Static-CA", "ca", declare=True),
        Policy("cava", "CAVA", "cava"),
    )
}
BASELINE = "no-cache"


@dataclass(frozen=True)
class Shape:
    """A workload of CAVA, Table III: affinity mix, hot-data share, sharing."""

    name: str
    mix: str  # "CA-H" or "CA-M"
    hot: str  # "HD-H" or "HD-L"
    cross: bool

    def weights(self) -> dict[str, float]:
        return (
            {"high": 0.7, "medium": 0.2, "low": 0.1}
            if self.mix == "CA-H"
            else {"high": 0.2, "medium": 0.7, "low": 0.1}
        )


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("W1", "CA-H", "HD-H", True),
        Shape("W2", "CA-H", "HD-H", False),
        Shape("W3", "CA-H", "HD-L", False),
        Shape("W4", "CA-M", "HD-H", True),
        Shape("W5", "CA-M", "HD-L", True),
        Shape("W6", "CA-M", "HD-L", False),
    )
}
EXPERIMENTS = ("affinity", "workloads", "trace")


@dataclass
class Scale:
    """The cluster and the workloads' size. Memory and files are counted in
    blocks, so the presets differ by block size and counts alone."""

    workers: int = 2
    block_size: int = 4 * MiB
    mem_blocks: int = 8  # per worker
    ufs: str = "40MiB/s"
    penalty: float = 0.3
    #: Dask workers (one thread each: a task's CPU and writes are its own).
    dask_workers: int = 4
    apps: int = 16
    concurrency: int = 3
    workloads: tuple[str, ...] = tuple(SHAPES)
    trace_jobs: int = 24
    trace_max_blocks: int = 8
    affinity_blocks: int = 8
    #: PageRank iterations over each block (its CPU cost).
    pagerank_iters: int = 250
    #: Each application's launch before its tasks run (thaw_start_after), in
    #: block read times of the under-store alone: it dilutes what memory hits
    #: save as the papers' job overheads do.
    startup: float = 6.0
    cache_window: str = "10m"
    sample_interval: float = 0.5
    heartbeat_ms: int = 200
    timeout: float = 900.0

    @property
    def mem_capacity(self) -> int:
        return self.mem_blocks * self.block_size

    @property
    def cluster_blocks(self) -> int:
        return self.mem_blocks * self.workers

    def device_model(self) -> str:
        return f"ufs={self.ufs},penalty={self.penalty}"

    @property
    def startup_s(self) -> float:
        bandwidth = parse_size(self.ufs.removesuffix("/s"))
        return round(self.startup * self.block_size / bandwidth, 4) if bandwidth > 0 else 0.0


PRESETS: dict[str, Scale] = {
    "full": Scale(),
    "quick": Scale(
        block_size=2 * MiB,
        mem_blocks=8,
        apps=12,
        workloads=("W1", "W3", "W5"),
        trace_jobs=12,
        trace_max_blocks=10,
        affinity_blocks=4,
    ),
    "tiny": Scale(
        block_size=1 * MiB,
        mem_blocks=8,
        ufs="32MiB/s",
        apps=6,
        concurrency=2,
        workloads=("W1", "W5"),
        trace_jobs=10,
        # Three waves of tasks: the first ones' writes reach the master (with
        # the workers' heartbeats) before the application ends.
        affinity_blocks=12,
        pagerank_iters=120,
        sample_interval=0.25,
        timeout=120.0,
    ),
}


@dataclass
class FileSpec:
    path: str
    blocks: int
    size: int
    reads: int = 0
    readers: list[str] = field(default_factory=list)  # app kinds, in order

    @property
    def hot(self) -> bool:
        """Hot: read more than three times (CAVA, section V-A)."""
        return self.reads > 3


@dataclass
class AppSpec:
    name: str
    kind: str
    path: str


@dataclass
class Workload:
    name: str
    apps: list[AppSpec]
    files: dict[str, FileSpec]
    shape: dict[str, Any] = field(default_factory=dict)

    def describe(self, scale: Scale) -> dict[str, Any]:
        distinct = sum(f.size for f in self.files.values())
        hot = sum(f.size for f in self.files.values() if f.hot)
        classes: dict[str, set[str]] = {}
        for a in self.apps:
            classes.setdefault(a.path, set()).add(APPS[a.kind].affinity)
        hot_paths = [p for p, f in self.files.items() if f.hot]
        return {
            "name": self.name,
            **self.shape,
            "apps": len(self.apps),
            "kinds": {k: sum(1 for a in self.apps if a.kind == k) for k in APPS},
            "files": len(self.files),
            "hot_files": len(hot_paths),
            "distinct_input_bytes": distinct,
            "total_read_bytes": sum(self.files[a.path].size for a in self.apps),
            "cluster_memory_bytes": scale.cluster_blocks * scale.block_size,
            "hot_share_of_input": round(hot / distinct, 4) if distinct else 0.0,
            "hot_shared_across_classes": any(len(classes.get(p, ())) > 1 for p in hot_paths),
        }


# ------------------------------------------------------------------ the applications' work


#: Pieces a task writes its output in: a map task's spills (sort), PageRank's
#: iterations each writing their ranks; so writes go out (and are counted for
#: the classifier) while the task runs, not all at its end.
PIECES = 4


def _grep(data: bytes, _iters: int) -> Iterator[bytes]:
    data.count(b"\x00\x01\x02")
    yield from ()


def _sort(data: bytes, _iters: int) -> Iterator[bytes]:
    keys = np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint64)
    for run in np.array_split(keys, PIECES):
        yield bytes(run[np.argsort(run, kind="stable")].tobytes())


def _pagerank(data: bytes, iters: int) -> Iterator[bytes]:
    words = np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint32)
    n = 1 << 14
    src, dst = words[0::2] & (n - 1), words[1::2] & (n - 1)
    degree = np.bincount(src, minlength=n).astype(np.float64)
    degree[degree == 0] = 1.0
    rank = np.full(n, 1.0 / n)
    size = max(1, int(len(data) * APPS["pagerank"].write_ratio) // PIECES // 4)
    for i in range(iters):
        rank = 0.15 / n + 0.85 * np.bincount(dst, weights=(rank / degree)[src], minlength=n)
        if (i + 1) % max(1, iters // PIECES) == 0:
            yield bytes(np.resize(rank.astype(np.float32), size).tobytes())


_WORK: dict[str, Callable[[bytes, int], Iterator[bytes]]] = {
    "grep": _grep,
    "sort": _sort,
    "pagerank": _pagerank,
}


def app_task(
    master: str,
    job: str,
    kind: str,
    path: str,
    offset: int,
    length: int,
    read_cache: str,
    output: str | None,
    iters: int,
) -> dict[str, Any]:
    """One task of an application: reads one block (carrying the job id,
    caching on read unless ``read_cache`` is "none"), does the kind's work,
    writing each piece of its output through to the under-store as it comes.
    Returns what happened."""
    start = time.time()
    cpu0 = time.thread_time()
    client = Client(master, job, read_cache=read_cache)
    with client.open(path) as f:
        f.seek(offset)
        data = f.read(length)
        stats = f.stats()
    written = 0
    for k, out in enumerate(_WORK[kind](data, iters)):
        if output is not None:
            client.write_bytes(f"{output}-{k}", out, write_type="through")
            written += len(out)
    mem = stats.get("short_circuit", 0) + stats.get("zero_copy", 0) + stats.get("remote_mem", 0)
    return {
        "offset": offset,
        "bytes": len(data),
        "bytes_mem": mem,
        "bytes_ufs": stats.get("under_store", 0) + stats.get("remote_disk", 0),
        "written": written,
        "cpu_s": round(time.thread_time() - cpu0, 4),
        "start": start,
        "end": time.time(),
    }


def collect(*records: dict[str, Any]) -> list[dict[str, Any]]:
    return list(records)


# ------------------------------------------------------------------ workloads


def _kinds(n: int, weights: dict[str, float], rng: random.Random) -> list[str]:
    """``n`` kinds in the mix's proportions (largest remainders), in a random
    order: a stratified draw, so a small workload still has its mix."""
    raw = {c: n * w for c, w in weights.items()}
    counts = {c: int(v) for c, v in raw.items()}
    for c in sorted(raw, key=lambda c: raw[c] - counts[c], reverse=True)[: n - sum(counts.values())]:
        counts[c] += 1
    kinds = [KIND_OF_CLASS[c] for c in CLASSES for _ in range(counts[c])]
    rng.shuffle(kinds)
    return kinds


def _split_blocks(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` blocks over ``parts`` files, each at least one, sizes varying."""
    parts = max(1, parts)
    total = max(total, parts)
    weights = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    sizes = [max(1, int(total * w / sum(weights))) for w in weights]
    i = 0
    while sum(sizes) < total:
        sizes[i % parts] += 1
        i += 1
    return sizes


def generate_workload(shape: Shape, scale: Scale, seed: int = 0, root: str = "/cava") -> Workload:
    """A workload of ``shape``: kinds in its mix; hot files (each read at least
    four times) taking about 70% (HD-H) or 67% (HD-L) of the reads; every other
    application reads a cold file of its own. HD-H: the hot files are 90% of
    the cluster's memory, the cold ones 75% (hot: 55% of the distinct input);
    HD-L: 50% and 220% (hot: 19%). So the distinct input exceeds the memory,
    and under HD-H every cold read competes with hot blocks. With
    ``shape.cross`` every hot file is read by more than one affinity class,
    else by one class only. Seeded: the same arguments give the same workload."""
    rng = random.Random(f"{seed}-{shape.name}")
    n = scale.apps
    kinds = _kinds(n, shape.weights(), rng)
    m = scale.cluster_blocks
    hh = shape.hot == "HD-H"
    want_reads = max(4, round(n * (0.7 if hh else 0.67)))
    n_hot = max(1, min(3 if hh else 2, want_reads // 4))
    per_file = [want_reads // n_hot + (1 if i < want_reads % n_hot else 0) for i in range(n_hot)]
    unassigned = list(range(n))
    rng.shuffle(unassigned)
    groups: list[list[int]] = []
    for reads in per_file:
        by_class: dict[str, list[int]] = {}
        for i in unassigned:
            by_class.setdefault(APPS[kinds[i]].affinity, []).append(i)
        if shape.cross:
            # One reader of each of two classes first (the sharing), the rest at random.
            firsts = [v[0] for _, v in sorted(by_class.items(), key=lambda kv: -len(kv[1]))[:2]]
            rest = [i for i in unassigned if i not in firsts]
            chosen = (firsts + rest)[:reads]
        else:
            big = max(by_class.values(), key=len, default=[])
            if len(big) < 4:
                break
            chosen = big[: max(4, min(reads, len(big)))]
        if len(chosen) < 4:
            break
        groups.append(chosen)
        unassigned = [i for i in unassigned if i not in chosen]
    cold = sorted(unassigned)
    hot_total = max(len(groups), math.ceil(m * (0.9 if hh else 0.5)))
    cold_total = max(len(cold), math.ceil(m * (0.75 if hh else 2.2)))
    # The distinct input must not fit in memory.
    if hot_total + cold_total <= m:
        cold_total = m + 1 - hot_total
    hot_sizes = _split_blocks(hot_total, len(groups), rng) if groups else []
    cold_sizes = _split_blocks(cold_total, len(cold), rng) if cold else []
    files: dict[str, FileSpec] = {}
    path_of: dict[int, str] = {}
    for k, (members, blocks) in enumerate(zip(groups, hot_sizes, strict=True)):
        path = f"{root}/{shape.name}/hot-{k}"
        files[path] = FileSpec(path, blocks, blocks * scale.block_size)
        for i in members:
            path_of[i] = path
    for k, (i, blocks) in enumerate(zip(cold, cold_sizes, strict=True)):
        path = f"{root}/{shape.name}/cold-{k:02d}"
        files[path] = FileSpec(path, blocks, blocks * scale.block_size)
        path_of[i] = path
    apps = []
    for i in range(n):
        f = files[path_of[i]]
        f.reads += 1
        f.readers.append(kinds[i])
        apps.append(AppSpec(f"{shape.name}-a{i:02d}-{kinds[i]}", kinds[i], f.path))
    return Workload(shape.name, apps, files, {"mix": shape.mix, "hot": shape.hot, "cross": shape.cross})


def trace_workload(
    scale: Scale, seed: int = 0, trace: str = "FB-2009_samples_24_times_1hr_0.tsv", root: str = "/cava"
) -> Workload:
    """The first ``scale.trace_jobs`` jobs with input of a SWIM trace, in trace
    order, each reading one file. Sizes: the trace's input bytes on a log scale,
    their range mapped onto 1 to ``trace_max_blocks`` blocks. The trace names no
    files, so inputs recur by popularity: each job reads file ``k`` of a pool of
    half as many files with probability ~ 1/(k+1) (Zipf), a file's size being
    that of its first reader. Kinds: 50% grep, 35% sort, 15% pagerank, seeded."""
    from .workloads import swim_jobs

    rng = random.Random(f"{seed}-trace")
    jobs = [j for j in swim_jobs(trace, jobs=scale.trace_jobs * 4, byte_scale=1.0) if j.input_bytes > 0]
    jobs = jobs[: scale.trace_jobs]
    logs = [math.log10(j.input_bytes) for j in jobs]
    lo, hi = min(logs, default=0.0), max(logs, default=0.0)
    pool = max(4, math.ceil(0.5 * len(jobs)))
    weights = [1.0 / (k + 1) for k in range(pool)]
    files: dict[str, FileSpec] = {}
    apps: list[AppSpec] = []
    for i, j in enumerate(jobs):
        k = rng.choices(range(pool), weights)[0]
        kind = rng.choices(list(APPS), [0.5, 0.35, 0.15])[0]
        path = f"{root}/trace/f{k:02d}"
        if path not in files:
            at = (logs[i] - lo) / (hi - lo) if hi > lo else 0.5
            blocks = 1 + round(at * (scale.trace_max_blocks - 1))
            files[path] = FileSpec(path, blocks, blocks * scale.block_size)
        files[path].reads += 1
        files[path].readers.append(kind)
        apps.append(AppSpec(f"trace-{j.name.removeprefix('swim-')}-{i:02d}-{kind}", kind, path))
    return Workload("trace", apps, files, {"trace": trace, "pool": pool})


def write_inputs(ufs: Path, files: dict[str, FileSpec], seed: int = 0) -> int:
    """Writes the input files into the under-store directory (cold to Thaw)."""
    total = 0
    for f in files.values():
        p = ufs / f.path.lstrip("/")
        if p.is_file() and p.stat().st_size == f.size:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(random.Random(f"{seed}-{f.path}").randbytes(f.size))
        total += f.size
    return total


# ------------------------------------------------------------------ running applications


def start_thaw(scale: Scale, policy: Policy, ufs: Path) -> LocalCluster:
    """A fresh cluster for one run under ``policy`` (memory empty)."""
    return LocalCluster(
        ufs=ufs, workers=scale.workers, mem_capacity=scale.mem_capacity, block_size=scale.block_size,
        device_model=scale.device_model(), migration_policy="none", heartbeat_ms=scale.heartbeat_ms,
        cache_policy=policy.cache_policy, cache_window=scale.cache_window,
    )  # fmt: skip


def cache_snapshot(client: Client) -> dict[str, Any]:
    """``Client.cache_report()`` as the harness keeps it: cached bytes per file
    (files the report does not list have none), the applications (with their
    classes) and the workers' MEM counters."""
    rep = client.cache_report(max_files=1000)
    return {
        "files": {str(f["path"]): int(f["cached_bytes"]) for f in rep["files"]},
        "apps": list(rep["apps"]),
        "workers": list(rep["workers"]),
        "file_details": list(rep["files"]),
    }


#: The figures of an application kept from the cache report.
APP_FIELDS = ("class", "affinity", "source", "cpu_util", "write_rate", "cached_fraction", "probability")
APP_FIELDS += ("tasks", "wall_seconds", "cpu_threshold", "write_threshold")


class Sampler(threading.Thread):
    """Samples the cache report every ``interval`` seconds: cached bytes per
    file, and the latest figures and class of each application."""

    def __init__(self, client: Client, t0: float, interval: float):
        super().__init__(daemon=True, name="thaw-bench-cava-sampler")
        self.client, self.t0, self.interval = client, t0, interval
        self.samples: list[dict[str, Any]] = []
        self.apps: dict[str, dict[str, Any]] = {}
        self.errors: list[str] = []
        self._stop_evt = threading.Event()

    def sample(self) -> dict[str, Any]:
        snap = cache_snapshot(self.client)
        for a in snap["apps"]:
            self.apps[str(a["job_id"])] = {k: a.get(k) for k in APP_FIELDS}
        self.samples.append({"t": round(time.time() - self.t0, 3), "files": snap["files"]})
        return snap

    def run(self) -> None:
        while not self._stop_evt.wait(self.interval):
            try:
                self.sample()
            except Exception as e:  # one missed sample; the run goes on
                self.errors = [*self.errors[-4:], repr(e)[:300]]

    def stop(self) -> None:
        self._stop_evt.set()
        self.join(10)


@dataclass
class Context:
    """What every run shares: the scale, the Dask client, the under-store."""

    scale: Scale
    dask: Any
    ufs: Path
    say: Callable[[str], None] = print
    affinity: dict[str, float] = field(default_factory=lambda: dict(PAPER_AFFINITY))


def _graph(
    app: AppSpec, run_id: str, master: str, policy: Policy, ctx: Context, size: int, out_root: str
) -> Any:
    """One application: a task per block of its input, then one collecting
    task; every reading task annotated with the job, the application's kind,
    its range of the input, its start-up and, for Static-CA, the declared
    affinity."""
    import dask

    bs = ctx.scale.block_size
    notes: dict[str, Any] = {
        td.JOB_ANNOTATION: app.name,
        td.APP_ANNOTATION: app.kind,  # a run starts from the class the last one got
        td.START_ANNOTATION: time.time() + ctx.scale.startup_s,
    }
    if policy.declare:
        notes[td.AFFINITY_ANNOTATION] = float(ctx.affinity[app.kind])
    parts = []
    for i, offset in enumerate(range(0, size, bs)):
        length = min(bs, size - offset)
        output = f"{out_root}/{app.name}/part-{i:04d}" if APPS[app.kind].write_ratio > 0 else None
        with dask.annotate(**notes, **{td.INPUTS_ANNOTATION: [(app.path, offset, length)]}):
            parts.append(
                dask.delayed(app_task, pure=False)(
                    master, app.name, app.kind, app.path, offset, length, policy.read_cache, output,
                    ctx.scale.pagerank_iters, dask_key_name=f"{run_id}-{app.name}-{i}",
                )
            )  # fmt: skip
    return dask.delayed(collect, pure=False)(*parts, dask_key_name=f"{run_id}-{app.name}-done")


@contextlib.contextmanager
def thaw_cluster(ctx: Context, policy: Policy) -> Iterator[tuple[LocalCluster, Client]]:
    """A fresh cluster under ``policy`` with the Thaw Dask plugins installed for
    it (and removed before it stops, so that they do not report to a master
    that is gone)."""
    cluster = start_thaw(ctx.scale, policy, ctx.ufs)
    try:
        td.install(ctx.dask, cluster.master, eviction="implicit", placement=False, lease=60.0)
        try:
            yield cluster, Client(cluster.master, read_cache="mem")
        finally:
            with contextlib.suppress(Exception):
                ctx.dask.unregister_worker_plugin(td.ThawUsage.name)
            with contextlib.suppress(Exception):
                ctx.dask.unregister_scheduler_plugin(td.ThawSchedulerPlugin.name)
    finally:
        cluster.close()


def run_apps(
    ctx: Context,
    client: Client,
    workload: Workload,
    policy: Policy,
    run_id: str,
    *,
    concurrency: int,
) -> dict[str, Any]:
    """Runs ``workload``'s applications on the cluster ``client`` talks to,
    under ``policy``, at most ``concurrency`` at once, each next one submitted
    when one ends."""
    from distributed import as_completed

    master = client.master
    out_root = f"/cava-out/{run_id}"
    t0 = time.time()
    sampler = Sampler(client, t0, ctx.scale.sample_interval)
    sampler.sample()
    sampler.start()
    queue = list(workload.apps)
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    records: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    futures = as_completed()
    by_key: dict[str, AppSpec] = {}

    def submit(app: AppSpec) -> None:
        graph = _graph(app, run_id, master, policy, ctx, workload.files[app.path].size, out_root)
        started[app.name] = time.time()
        fut = ctx.dask.compute(graph)
        by_key[fut.key] = app
        futures.add(fut)

    try:
        while queue and len(started) < concurrency:
            submit(queue.pop(0))
        deadline = t0 + ctx.scale.timeout
        for fut in futures:
            app = by_key.pop(fut.key)
            ended[app.name] = time.time()
            try:
                records[app.name] = fut.result()
            except Exception as e:
                errors[app.name] = repr(e)[:500]
            fut.release()
            if time.time() > deadline:
                raise TimeoutError(f"{run_id}: still running after {ctx.scale.timeout:.0f}s")
            if queue:
                submit(queue.pop(0))
        wall = time.time() - t0
        time.sleep(2 * ctx.scale.heartbeat_ms / 1000)  # the workers' last counters reach the master
    finally:
        sampler.stop()
    final = sampler.sample()
    with contextlib.suppress(Exception):
        client.rm(out_root, recursive=True)
    shutil.rmtree(ctx.ufs / out_root.lstrip("/"), ignore_errors=True)
    return _run_record(workload, policy, run_id, t0, wall, started, ended, records, errors, sampler, final)


def _run_record(
    workload: Workload,
    policy: Policy,
    run_id: str,
    t0: float,
    wall: float,
    started: dict[str, float],
    ended: dict[str, float],
    records: dict[str, list[dict[str, Any]]],
    errors: dict[str, str],
    sampler: Sampler,
    final: dict[str, Any],
) -> dict[str, Any]:
    apps = []
    for a in workload.apps:
        rs = records.get(a.name, [])
        runtime = ended.get(a.name, t0) - started.get(a.name, t0)
        seen = sampler.apps.get(a.name) or {}
        apps.append(
            {
                "app": a.name,
                "kind": a.kind,
                "path": a.path,
                "hot_file": workload.files[a.path].hot,
                "start": round(started.get(a.name, t0) - t0, 3),
                "end": round(ended.get(a.name, t0) - t0, 3),
                "runtime": round(runtime, 3),
                "tasks": len(rs),
                "blocks_hit": sum(1 for r in rs if r["bytes_ufs"] == 0),
                "bytes": sum(r["bytes"] for r in rs),
                "bytes_mem": sum(r["bytes_mem"] for r in rs),
                "bytes_ufs": sum(r["bytes_ufs"] for r in rs),
                "written": sum(r["written"] for r in rs),
                "cpu_s": round(sum(r["cpu_s"] for r in rs), 3),
                "task_s": round(sum(r["end"] - r["start"] for r in rs), 3),
                # What the master measured and concluded (cache report).
                "class": seen.get("class"),
                "master": seen or None,
                "error": errors.get(a.name),
            }
        )
    tasks = sum(a["tasks"] for a in apps)
    read = sum(a["bytes"] for a in apps)
    files = final["files"]
    hot = [f for f in workload.files.values() if f.hot]
    cold = [f for f in workload.files.values() if not f.hot]
    hot_bytes = sum(f.size for f in hot)
    hot_cached = sum(min(f.size, files.get(f.path, 0)) for f in hot)
    workers = final["workers"]
    hits = sum(int(w.get("hits") or 0) for w in workers)
    misses = sum(int(w.get("misses") or 0) for w in workers)
    return {
        "run": run_id,
        "workload": workload.name,
        "policy": policy.name,
        "policy_label": policy.label,
        "wall_s": round(wall, 3),
        "mean_app_runtime": round(statistics.mean(a["runtime"] for a in apps), 3) if apps else None,
        "failed_apps": sorted(errors),
        "hit_ratio": round(sum(a["blocks_hit"] for a in apps) / tasks, 4) if tasks else None,
        "byte_hit_ratio": round(sum(a["bytes_mem"] for a in apps) / read, 4) if read else None,
        "worker_hit_ratio": round(hits / (hits + misses), 4) if hits + misses else None,
        "drops": sum(int(w.get("drops") or 0) for w in workers),
        "skipped": sum(int(w.get("skipped") or 0) for w in workers),
        "evictions": sum(int(w.get("evictions") or 0) for w in workers),
        "apps": apps,
        "cache": {
            "hot_bytes": hot_bytes,
            "hot_cached_bytes": hot_cached,
            "hot_cached_share": round(hot_cached / hot_bytes, 4) if hot_bytes else None,
            "cold_cached_bytes": sum(min(f.size, files.get(f.path, 0)) for f in cold),
            "files": {p: files.get(p, 0) for p in workload.files},
            "workers": workers,
            "apps_seen": final["apps"],
            "file_details": final["file_details"],
        },
        "timeline": sampler.samples,
        "sample_errors": sampler.errors,
    }


def run_on_fresh_cluster(ctx: Context, workload: Workload, policy: Policy, run_id: str) -> dict[str, Any]:
    """``workload`` under ``policy`` on a cluster of its own; a run that fails
    is recorded as failed, with its error."""
    try:
        with thaw_cluster(ctx, policy) as (_, client):
            return run_apps(ctx, client, workload, policy, run_id, concurrency=ctx.scale.concurrency)
    except Exception as e:
        ctx.say(f"  {workload.name} {policy.label}: FAILED ({e!r:.300})")
        return {
            "run": run_id,
            "workload": workload.name,
            "policy": policy.name,
            "policy_label": policy.label,
            "failed": repr(e)[:1000],
        }


# ------------------------------------------------------------------ experiments


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def affinity_experiment(ctx: Context, repeats: int, seed: int) -> dict[str, Any]:
    """Each kind alone over a file of its own, on one LRU cluster: first every
    kind once cold (so the classifier's thresholds average all three), then
    ``repeats`` measured cold runs of each (No-Cache reads), then ``repeats``
    hot runs of each (its file read into memory by the harness first, so every
    block is a hit). ``benefit = max(0, 1 - R_hot / R_cold)`` of the medians;
    the classes and figures are the master's at the end of each run (inputs
    not in memory: CPU and writes decide; mostly in memory: writes alone)."""
    scale = ctx.scale
    files = {
        k: FileSpec(f"/cava/affinity/{k}", scale.affinity_blocks, scale.affinity_blocks * scale.block_size, 1)
        for k in APPS
    }
    write_inputs(ctx.ufs, {f.path: f for f in files.values()}, seed)
    cold_policy = replace(POLICIES["lru"], read_cache="none")
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {(k, m): [] for k in APPS for m in ("cold", "hot")}
    with thaw_cluster(ctx, POLICIES["lru"]) as (_, client):

        def once(kind: str, mode: str, r: int | str) -> dict[str, Any]:
            app = AppSpec(f"aff-{kind}-{mode}-r{r}", kind, files[kind].path)
            wl = Workload(app.name, [app], {app.path: files[kind]})
            if mode == "hot":
                client.cat(app.path)
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
        cold = _median([x["apps"][0]["runtime"] for x in cold_runs])
        hot = _median([x["apps"][0]["runtime"] for x in hot_runs])
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
            "hit_ratio_hot": _median([x["hit_ratio"] for x in hot_runs if x["hit_ratio"] is not None]),
            "hit_ratio_cold": _median([x["hit_ratio"] for x in cold_runs if x["hit_ratio"] is not None]),
            "class_cold": [str(x["apps"][0]["class"]) for x in cold_runs],
            "class_hot": [str(x["apps"][0]["class"]) for x in hot_runs],
            "runs": [{k: v for k, v in x.items() if k != "timeline"} for x in cold_runs + hot_runs],
        }
        k = out["kinds"][kind]
        ctx.say(
            f"  affinity {kind}: cold {cold:.2f}s hot {hot:.2f}s benefit {benefit:.3f},"
            f" cpu {k['cpu_util_cold']} writes {_mib(k['write_rate_cold'])} MiB/s,"
            f" classes cold {k['class_cold']} hot {k['class_hot']}"
        )
    return out


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
                        f"hot cached {_pct(run['cache']['hot_cached_share'])}, drops {run['drops']}"
                        + (f", FAILED {run['failed_apps']}" if run["failed_apps"] else "")
                    )
    return runs


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

    for w in names:
        table[w] = {}
        base_runs = [r for r in done if r["workload"] == w and r["policy"] == BASELINE]
        base = _median([r["wall_s"] for r in base_runs])
        for p in policies:
            rs = [r for r in done if r["workload"] == w and r["policy"] == p.name]
            if not rs:
                why = next((r["failed"] for r in runs if r["workload"] == w and r["policy"] == p.name), None)
                table[w][p.name] = {"failed": why or "not run"}
                continue
            wall = _median([r["wall_s"] for r in rs])
            kinds = {}
            for k in APPS:
                mine, theirs = kind_runtime(rs, k), kind_runtime(base_runs, k)
                if mine is not None and theirs:
                    kinds[k] = round(mine / theirs, 4)
            table[w][p.name] = {
                "runs": len(rs),
                "wall_s": round(wall, 3) if wall is not None else None,
                "normalized": round(wall / base, 4) if base and wall is not None else None,
                "kind_normalized": kinds,
                "hot_cached_share": _median(
                    [r["cache"]["hot_cached_share"] for r in rs if r["cache"]["hot_cached_share"] is not None]
                ),
                "hit_ratio": _median([r["hit_ratio"] for r in rs if r["hit_ratio"] is not None]),
                "worker_hit_ratio": _median(
                    [r["worker_hit_ratio"] for r in rs if r["worker_hit_ratio"] is not None]
                ),
                "mean_app_runtime": _median([r["mean_app_runtime"] for r in rs if r["mean_app_runtime"]]),
                "drops": _median([r["drops"] for r in rs]),
                "skipped": _median([r["skipped"] for r in rs]),
                "evictions": _median([r["evictions"] for r in rs]),
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
        kinds = {}
        for k in APPS:
            xs = [c["kind_normalized"][k] for c in cells if k in c["kind_normalized"]]
            if xs:
                kinds[k] = round(statistics.mean(xs), 4)
        means[p.name] = {
            "workloads": len(cells),
            "normalized": norm,
            "improvement": round(1 - norm, 4) if norm is not None else None,
            "kind_normalized": kinds,
            "hot_cached_share": mean("hot_cached_share"),
            "hit_ratio": mean("hit_ratio"),
            "mean_app_runtime": mean("mean_app_runtime"),
            "paper_improvement": PAPER_IMPROVEMENT.get(p.name),
            "paper_hot_share": PAPER_HOT_SHARE.get(p.name),
        }
    return {"table": table, "means": means}


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


# ------------------------------------------------------------------ report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _mib(x: float | None) -> str:
    return "-" if x is None else f"{x / MiB:.1f}"


def write_figure(doc: dict[str, Any], out: Path) -> str | None:
    """The timeline figure (matplotlib PNG; an SVG drawn here without it)."""
    tl = doc.get("timeline") or {}
    runs = tl.get("runs") or {}
    if not runs:
        return None
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return _svg_figure(tl, out)
    n = len(runs)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(4.6 * ncols, 3.2 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax, (pol, data) in zip(axes, runs.items(), strict=False):
        for i, (name, ys) in enumerate(data["series"].items()):
            style = "--" if name == "cold files" else "-"
            ax.plot(data["t"], [y / MiB for y in ys], style, label=name.rsplit("/", 1)[-1], color=f"C{i}")
        ax.axhline(tl.get("memory_bytes", 0) / MiB, color="#999999", lw=0.8)
        ax.set_title(f"{tl.get('workload')}: {POLICIES[pol].label if pol in POLICIES else pol}", fontsize=9)
        ax.set_xlabel("Time (s)")
        ax.set_ylabel("Cached (MiB)")
        ax.legend(fontsize=7)
    name = "cached-over-time.png"
    fig.savefig(out / name, dpi=100)
    return name


def _svg_figure(tl: dict[str, Any], out: Path) -> str:
    w, h, pad = 420, 220, 30
    parts = []
    top = max([1.0] + [max(ys, default=0) for d in tl["runs"].values() for ys in d["series"].values()])
    for k, (pol, data) in enumerate(tl["runs"].items()):
        x0, y0 = 0, k * (h + 20)
        tmax = max(data["t"], default=1.0) or 1.0
        parts.append(f'<text x="{x0 + pad}" y="{y0 + 15}" font-size="12">{tl.get("workload")}: {pol}</text>')
        for i, (name, ys) in enumerate(data["series"].items()):
            pts = " ".join(
                f"{x0 + pad + (w - 2 * pad) * t / tmax:.1f},{y0 + h - pad - (h - 2 * pad) * y / top:.1f}"
                for t, y in zip(data["t"], ys, strict=False)
            )
            color = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"][i % 5]
            parts.append(
                f'<polyline fill="none" stroke="{color}" points="{pts}"><title>{name}</title></polyline>'
            )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{len(tl["runs"]) * (h + 20)}">'
        + "".join(parts)
        + "</svg>"
    )
    (out / "cached-over-time.svg").write_text(svg)
    return "cached-over-time.svg"


def render_markdown(doc: dict[str, Any]) -> str:
    lines = [f"# {doc['title']}", "", f"`{doc['command']}` ({doc['started']})", ""]
    p = doc["params"]
    lines += [
        f"Cluster: {p['workers']} Thaw workers, MEM {p['mem_capacity'] // MiB} MiB each "
        f"({p['cluster_memory'] // MiB} MiB), blocks {p['block_size'] // MiB} MiB, under-store "
        f"`{p['device_model']}`; Dask {p['dask_workers']} single-thread workers; "
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
                f"| {k} | {v['expected_class']} | {_num(v['runtime_cold'])} | {_num(v['runtime_hot'])} | "
                f"{_num(v['benefit'], '{:.3f}')} | {v['paper_affinity']} | "
                f"{_num(v['cpu_util_cold'])} ({_num(v['cpu_threshold'])}) | "
                f"{_mib(v['write_rate_cold'])} ({_mib(v['write_threshold'])}) | "
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
            "| workload | mix | hot | cross | apps (g/s/p) | files (hot) | "
            "distinct input / memory | hot share |",
            "| --- | --- | --- | --- | --- | --- | --- | ---: |",
        ]
        for name, d in wl["described"].items():
            k = d["kinds"]
            lines.append(
                f"| {name} | {d['mix']} | {d['hot']} | {'yes' if d['cross'] else 'no'} | "
                f"{d['apps']} ({k['grep']}/{k['sort']}/{k['pagerank']}) | {d['files']} ({d['hot_files']}) | "
                f"{d['distinct_input_bytes'] // MiB} / {d['cluster_memory_bytes'] // MiB} MiB | "
                f"{_pct(d['hot_share_of_input'])} |"
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
                    "| paper | " + " | ".join(_pct(paper.get(x)) if x in paper else "" for x in pols) + " |"
                )

        grid(
            "Total runtime normalized to No-Cache (CAVA, Fig. 5)",
            "normalized",
            lambda v: _num(v, "{:.3f}"),
            "normalized",
            {},
        )
        lines.append("| improvement | " + " | ".join(_pct(means[x].get("improvement")) for x in pols) + " |")
        lines.append(
            "| paper improvement | "
            + " | ".join(_pct(PAPER_IMPROVEMENT.get(x)) if x in PAPER_IMPROVEMENT else "" for x in pols)
            + " |"
        )
        grid(
            "Share of hot data cached at the end (CAVA, Fig. 6)",
            "hot_cached_share",
            _pct,
            "hot_cached_share",
            PAPER_HOT_SHARE,
        )
        grid("Hit ratio (blocks read from memory)", "hit_ratio", _pct, "hit_ratio", {})
        grid("Total runtime (s, median)", "wall_s", _num, "", {})
        lines += [
            "",
            "### Mean runtime of each kind normalized to No-Cache (CAVA, Table IV), over the workloads",
            "",
            "| kind | " + " | ".join(labels) + " |",
            "| --- |" + " ---: |" * len(labels),
        ]
        for k in APPS:
            cells = [_num(means[x]["kind_normalized"].get(k), "{:.3f}") for x in pols]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "### Classes the master gave (kind: class x runs) and the workers' dropped fills / skipped",
            "",
            "| workload | policy | grep | sort | pagerank | drops | skipped | evictions |",
            "| --- | --- | --- | --- | --- | ---: | ---: | ---: |",
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
                    f"{_num(c['drops'], '{:.0f}')} | {_num(c['skipped'], '{:.0f}')} | "
                    f"{_num(c['evictions'], '{:.0f}')} |"
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
                f"| {POLICIES[x].label} | {_num(c.get('wall_s'))} | {_num(c.get('mean_app_runtime'))} | "
                f"{_pct(c.get('hit_ratio'))} | {_pct(c.get('worker_hit_ratio'))} |"
            )
    if doc.get("figure"):
        lines += [
            "",
            f"## Cached bytes over time ({doc['timeline']['workload']}, CAVA, Fig. 7)",
            "",
            f"![cached over time]({doc['figure']})",
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ entry point


def _dask_cluster(scale: Scale) -> tuple[Any, Any]:
    import logging

    import dask
    from distributed import Client as DaskClient
    from distributed import LocalCluster as DaskCluster

    dask.config.set({"distributed.admin.tick.limit": "10s"})
    cluster = DaskCluster(
        n_workers=scale.dask_workers, threads_per_worker=1, processes=True, dashboard_address=None,
        memory_limit=0, silence_logs=logging.ERROR, env={"OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"},
    )  # fmt: skip
    client = DaskClient(cluster)
    return cluster, client


@contextlib.contextmanager
def _environment(scale: Scale, root: str | None) -> Iterator[tuple[Path, Any]]:
    """The under-store directory (in a scratch directory removed at the end)
    and a Dask client."""
    base = Path(tempfile.mkdtemp(prefix="thaw-cava-", dir=root))
    ufs = base / "ufs"
    ufs.mkdir()
    dask_cluster = dask_client = None
    try:
        dask_cluster, dask_client = _dask_cluster(scale)
        yield ufs, dask_client
    finally:
        stop_dask(dask_cluster, dask_client)
        shutil.rmtree(base, ignore_errors=True)


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
    pols = [POLICIES[n] for n in policies or POLICIES]
    if BASELINE not in [p.name for p in pols]:
        pols.insert(0, POLICIES[BASELINE])
    doc: dict[str, Any] = {
        "experiment": "cava",
        "title": "CAVA cache management (CAVA, section V) on an emulated cluster",
        "date": datetime.date.today().isoformat(),
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": command or "python -m thaw_bench " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "params": {
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
    }
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with _environment(scale, root) as (ufs, dask_client):
        ctx = Context(scale, dask_client, ufs, say)
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
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    (out / "report.md").write_text(render_markdown(doc))
    say(f"cava: {doc['seconds']:.0f}s; wrote {out / 'results.json'} and {out / 'report.md'}")
    return doc


def _files_doc(w: Workload) -> dict[str, dict[str, Any]]:
    return {p: {**asdict(f), "hot": f.hot} for p, f in w.files.items()}


def _slim(run: dict[str, Any], keep_timeline: bool) -> dict[str, Any]:
    return run if keep_timeline else {k: v for k, v in run.items() if k != "timeline"}


def print_summary(doc: dict[str, Any], say: Callable[[str], None] = print) -> None:
    say(f"command: {doc['command']}")
    for k, v in (doc.get("affinity") or {}).get("kinds", {}).items():
        say(
            f"  {k:9s} benefit {_num(v['benefit'], '{:.3f}')} (paper {v['paper_affinity']}), "
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
                f"  {POLICIES[pol].label:10s} {_num(m['normalized'], '{:.3f}')} ({_pct(m['improvement'])}), "
                f"hot {_pct(m['hot_cached_share'])}, hits {_pct(m['hit_ratio'])}, "
                f"app {_num(m['mean_app_runtime'])}s"
            )


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``cava`` subcommand of ``python -m thaw_bench``."""
    c = sub.add_parser(
        "cava",
        help="CAVA, section V: No-Cache, LRU, LFU, CA-Only, Static-CA, CAVA over W1-W6-like workloads, "
        "a trace replay and per-application affinity",
    )
    size = c.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="W1, W3, W5; 2 MiB blocks, 12 apps per workload (a few minutes)"
    )
    size.add_argument("--tiny", action="store_true", help="test-sized: W1 and W5, 6 apps, 1 MiB blocks")
    c.add_argument("--out", type=Path, default=Path("bench-out/cava"), help="default %(default)s")
    c.add_argument("--experiments", default=",".join(EXPERIMENTS), help="some of " + ", ".join(EXPERIMENTS))
    c.add_argument("--policies", default=",".join(POLICIES), help="some of " + ", ".join(POLICIES))
    c.add_argument("--workloads", default=None, help="some of W1..W6 (default: the preset's)")
    c.add_argument("--repeats", type=int, default=1, help="runs of every (workload, policy); medians")
    c.add_argument("--affinity-repeats", type=int, default=None, help="default: 3 (1 with --quick, --tiny)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--static-affinity",
        choices=["paper", "measured"],
        default="paper",
        help="Static-CA's declared affinities: CAVA's, or this run's affinity experiment's",
    )
    c.add_argument(
        "--timeline", default="W5", help="the workload sampled for the figure (default %(default)s)"
    )
    c.add_argument("--apps", type=int, default=None, help="applications per workload")
    c.add_argument("--concurrency", type=int, default=None, help="applications running at once")
    c.add_argument("--workers", type=int, default=None, help="Thaw workers")
    c.add_argument("--mem-blocks", type=int, default=None, help="MEM tier per worker, in blocks")
    c.add_argument("--block-size", default=None, help="e.g. 4MiB")
    c.add_argument(
        "--ufs", default=None, help="the under-store's emulated bandwidth per worker, e.g. 40MiB/s"
    )
    c.add_argument("--penalty", type=float, default=None)
    c.add_argument("--dask-workers", type=int, default=None)
    c.add_argument("--trace-jobs", type=int, default=None)
    c.add_argument(
        "--startup",
        type=float,
        default=None,
        help="each application's launch, in block read times of the under-store (default 6)",
    )
    c.add_argument("--pagerank-iters", type=int, default=None, help="PageRank's iterations per block")
    c.add_argument("--cache-window", default=None, help="LocalCluster(cache_window=...), default 10m")
    c.add_argument("--trace", default="FB-2009_samples_24_times_1hr_0.tsv")
    c.add_argument("--root", default=None, help="where the under-store directory goes (default: /tmp)")
    return c


def _items(s: str, known: Any, what: str) -> list[str]:
    items = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in items if x not in known]
    if bad:
        raise SystemExit(f"unknown {what} {', '.join(bad)}: expected some of {', '.join(known)}")
    return items


def scale_from_args(a: argparse.Namespace) -> Scale:
    scale = replace(PRESETS["tiny" if a.tiny else "quick" if a.quick else "full"])
    overrides = {
        "apps": a.apps, "concurrency": a.concurrency, "workers": a.workers, "mem_blocks": a.mem_blocks,
        "ufs": a.ufs, "penalty": a.penalty, "dask_workers": a.dask_workers, "trace_jobs": a.trace_jobs,
        "startup": a.startup, "pagerank_iters": a.pagerank_iters, "cache_window": a.cache_window,
    }  # fmt: skip
    scale = replace(scale, **{k: v for k, v in overrides.items() if v is not None})
    if a.block_size:
        scale = replace(scale, block_size=parse_size(a.block_size))
    if a.workloads:
        scale = replace(scale, workloads=tuple(_items(a.workloads, SHAPES, "workload")))
    return scale


def main_args(a: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Runs ``python -m thaw_bench cava`` as parsed into ``a`` (``argv``: the
    arguments, for the command recorded in the results; default sys.argv)."""
    scale = scale_from_args(a)
    command = "python -m thaw_bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    t0 = time.time()

    def say(msg: str) -> None:
        print(f"[{time.time() - t0:7.1f}s] {msg}", flush=True)

    doc = cava(
        a.out,
        scale,
        experiments=tuple(_items(a.experiments, EXPERIMENTS, "experiment")),
        policies=_items(a.policies, POLICIES, "policy"),
        repeats=a.repeats,
        affinity_repeats=a.affinity_repeats or (1 if a.tiny or a.quick else 3),
        seed=a.seed,
        static_affinity=a.static_affinity,
        timeline_workload=a.timeline,
        trace=a.trace,
        root=a.root,
        say=say,
        command=command,
    )
    print_summary(doc)
    return 0
