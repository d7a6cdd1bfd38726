"""CAVA's workloads (CAVA, section V, Table III scaled down): the three kinds of
application and the affinity class each stands for, the workload shapes W1-W6,
the cluster and workload sizes (:data:`PRESETS`), and the workloads generated
from them or from a SWIM trace, written as input files into the under-store."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thaw.sizes import parse_size

from ..workloads import swim_jobs

MiB = 1 << 20

#: CAVA, section V-A's off-line profiled affinities of the applications ours stand for.
PAPER_AFFINITY = {"grep": 0.377, "sort": 0.146, "pagerank": 0.041}


@dataclass(frozen=True)
class AppKind:
    """A kind of application and the affinity class its paper counterpart has."""

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
    #: Emulated hosts with a network (``thaw netlab``'s SPEC; :mod:`.network`),
    #: or None: every worker on loopback.
    network: str | None = None

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
