"""CAVA's workloads (CAVA, section V, Table III scaled down): the workload shapes
W1-W6, the cluster and workload sizes (:data:`PRESETS`), and the workloads
generated from them or from a SWIM trace, written as input files of their types
into the under-store. The kinds of application are :mod:`.kinds`' registry
(``APPS`` here is the same dict)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thaw.sizes import parse_size

from ..workloads import swim_jobs
from .kinds import KINDS, make_input

MiB = 1 << 20

#: The registry of kinds (:data:`.kinds.KINDS`), by the name the harness used first.
APPS = KINDS
#: CAVA, section V-A's off-line profiled affinities of the kinds.
PAPER_AFFINITY = {k.name: k.paper_affinity for k in KINDS.values()}
CLASSES = ("high", "medium", "low")
#: The kinds of each class, in registry order.
KINDS_OF_CLASS = {c: [k.name for k in KINDS.values() if k.affinity == c] for c in CLASSES}


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
    blocks, so the presets differ by block size and counts alone.

    The cluster: ``workers`` emulated nodes (:mod:`thaw_bench.cluster`, host
    ``node<i>``, on ``racks`` racks), each a Thaw worker with its own MEM tier
    and its own emulated link to the under-store, and a Dask worker of
    ``slots`` threads beside it (``THAW_HOST``: its tasks' reads are local to
    its node). ``placement``: the Thaw Dask plugin places the reading tasks by
    memory locality (CAVA, Algorithm 1); off, Dask places them."""

    workers: int = 4
    racks: int = 2
    block_size: int = 2 * MiB
    mem_blocks: int = 4  # per worker
    #: Each node's link to the under-store: slow, so that the read is what a
    #: cold high-affinity task waits for on this shared machine, as the
    #: paper's VMs waited for their shared disks.
    ufs: str = "10MiB/s"
    penalty: float = 0.3
    #: Task slots per node: Dask worker threads (one: a task's CPU and writes
    #: are its own).
    slots: int = 1
    placement: bool = True
    #: Applications per workload (14: enough for every kind in either mix).
    apps: int = 14
    concurrency: int = 3
    workloads: tuple[str, ...] = tuple(SHAPES)
    trace_jobs: int = 24
    trace_max_blocks: int = 8
    affinity_blocks: int = 8
    #: PageRank iterations over each block (its CPU cost).
    pagerank_iters: int = 30
    #: Each application's launch before its tasks run (thaw_start_after), in
    #: block read times of the under-store alone: it dilutes what memory hits
    #: save as the papers' job overheads do.
    startup: float = 2.0
    cache_window: str = "10m"
    sample_interval: float = 0.5
    heartbeat_ms: int = 200
    timeout: float = 900.0
    #: Emulated hosts with a network (``thaw netlab``'s SPEC; see :mod:`.runner`),
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
        block_size=1 * MiB,
        mem_blocks=8,
        apps=12,
        workloads=("W1", "W3", "W5"),
        trace_jobs=12,
        trace_max_blocks=10,
        affinity_blocks=4,
    ),
    "tiny": Scale(
        workers=2,
        block_size=1 * MiB,
        mem_blocks=8,
        ufs="16MiB/s",
        slots=2,
        apps=8,
        concurrency=2,
        workloads=("W1", "W5"),
        trace_jobs=10,
        # Three waves of tasks: the first ones' writes reach the master (with
        # the workers' heartbeats) before the application ends.
        affinity_blocks=12,
        pagerank_iters=30,
        sample_interval=0.25,
        timeout=180.0,
    ),
}


@dataclass
class FileSpec:
    path: str
    blocks: int
    size: int
    reads: int = 0
    readers: list[str] = field(default_factory=list)  # app kinds, in order
    #: Its type (CAVA, Table II): only kinds of this type read it.
    file_type: str = "text"

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
            "classes": {c: sum(1 for a in self.apps if APPS[a.kind].affinity == c) for c in CLASSES},
            "files": len(self.files),
            "hot_files": len(hot_paths),
            "distinct_input_bytes": distinct,
            "total_read_bytes": sum(self.files[a.path].size for a in self.apps),
            "cluster_memory_bytes": scale.cluster_blocks * scale.block_size,
            "hot_share_of_input": round(hot / distinct, 4) if distinct else 0.0,
            "hot_shared_across_classes": any(len(classes.get(p, ())) > 1 for p in hot_paths),
        }


def _class_counts(n: int, weights: dict[str, float]) -> dict[str, int]:
    """``n`` applications over the classes in the mix's proportions (largest
    remainders): a stratified draw, so a small workload still has its mix."""
    raw = {c: n * w for c, w in weights.items()}
    counts = {c: int(v) for c, v in raw.items()}
    for c in sorted(raw, key=lambda c: raw[c] - counts[c], reverse=True)[: n - sum(counts.values())]:
        counts[c] += 1
    return counts


class _Picker:
    """Picks a kind for each application slot: of the slot's class, of a file
    type if the slot's file has one, the least used so far (ties at random), so
    a workload runs every kind its mix allows."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used = dict.fromkeys(KINDS, 0)

    def pick(self, cls: str, file_type: str | None = None) -> str:
        fits = [k for k in KINDS_OF_CLASS[cls] if file_type is None or KINDS[k].file_type == file_type]
        low = min(self.used[k] for k in fits)
        kind = self.rng.choice([k for k in fits if self.used[k] == low])
        self.used[kind] += 1
        return kind


def _types_of(cls_a: str, cls_b: str | None = None) -> list[str]:
    """The file types that kinds of both classes read."""
    return [
        t
        for t in ("text", "db", "graph")
        if any(KINDS[k].file_type == t for k in KINDS_OF_CLASS[cls_a])
        and (cls_b is None or any(KINDS[k].file_type == t for k in KINDS_OF_CLASS[cls_b]))
    ]


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


def _hot_groups(
    shape: Shape, counts: dict[str, int], per_file: list[int], rng: random.Random
) -> list[tuple[str, list[str]]]:
    """The hot files' readers, as (file type, the readers' classes): a file is
    read by kinds of its type only (CAVA, Table II). With ``shape.cross``, each by
    two classes (one reader of the largest other class that reads the same
    type, the rest of the largest class, so that later files find readers of
    both too); else by one class (the largest).
    Takes the readers out of ``counts``; stops at a file that would have fewer
    than four readers (not hot)."""
    groups: list[tuple[str, list[str]]] = []
    for g, reads in enumerate(per_file):
        left = {c: n for c, n in counts.items() if n > 0}
        if shape.cross:
            # The largest class and the largest other one whose kinds read a
            # file type in common with it.
            big = max(left, key=lambda c: left[c], default=None)
            others = [c for c in sorted(left, key=lambda c: -left[c]) if c != big and _types_of(big, c)]
            if big is None or not others or left[big] + 1 < max(4, reads):
                break
            types = _types_of(big, others[0])
            members = [others[0], *[big] * (min(reads, left[big] + 1) - 1)]
        else:
            big = max(left, key=lambda c: left[c], default=None)
            if big is None or left[big] < 4:
                break
            types = _types_of(big)
            members = [big] * min(reads, left[big])
        for c in members:
            counts[c] -= 1
        groups.append((types[g % len(types)], members))
    return groups


def generate_workload(shape: Shape, scale: Scale, seed: int = 0, root: str = "/cava") -> Workload:
    """A workload of ``shape``: classes in its mix, each slot's kind the least
    used of its class (so every kind runs); hot files (each read at least four
    times, by kinds of its file type) taking about 70% (HD-H) or 67% (HD-L) of
    the reads; every other application reads a cold file of its own, of its
    kind's type. HD-H: the hot files are 90% of the cluster's memory, the cold
    ones 75% (hot: 55% of the distinct input); HD-L: 50% and 220% (hot: 19%).
    So the distinct input exceeds the memory, and under HD-H every cold read
    competes with hot blocks. With ``shape.cross`` every hot file is read by
    more than one affinity class, else by one class only. Applications run in
    a random order. Seeded: the same arguments give the same workload."""
    rng = random.Random(f"{seed}-{shape.name}")
    n = scale.apps
    counts = _class_counts(n, shape.weights())
    m = scale.cluster_blocks
    hh = shape.hot == "HD-H"
    want_reads = max(4, round(n * (0.7 if hh else 0.67)))
    n_hot = max(1, min(3 if hh else 2, want_reads // 4))
    per_file = [want_reads // n_hot + (1 if i < want_reads % n_hot else 0) for i in range(n_hot)]
    groups = _hot_groups(shape, counts, per_file, rng)
    picker = _Picker(rng)
    # (kind, hot group index or None)
    slots: list[tuple[str, int | None]] = []
    for g, (file_type, members) in enumerate(groups):
        slots += [(picker.pick(c, file_type), g) for c in members]
    rest = [c for c in CLASSES for _ in range(counts[c])]
    slots += [(picker.pick(c), None) for c in rest]
    rng.shuffle(slots)
    n_cold = sum(1 for _, g in slots if g is None)
    hot_total = max(len(groups), math.ceil(m * (0.9 if hh else 0.5)))
    cold_total = max(n_cold, math.ceil(m * (0.75 if hh else 2.2)))
    # The distinct input must not fit in memory.
    if hot_total + cold_total <= m:
        cold_total = m + 1 - hot_total
    hot_sizes = _split_blocks(hot_total, len(groups), rng) if groups else []
    cold_sizes = _split_blocks(cold_total, n_cold, rng) if n_cold else []
    files: dict[str, FileSpec] = {}
    hot_paths = []
    for k, ((file_type, _), blocks) in enumerate(zip(groups, hot_sizes, strict=True)):
        path = f"{root}/{shape.name}/hot-{k}"
        files[path] = FileSpec(path, blocks, blocks * scale.block_size, file_type=file_type)
        hot_paths.append(path)
    apps = []
    cold_k = 0
    for i, (kind, g) in enumerate(slots):
        if g is None:
            path = f"{root}/{shape.name}/cold-{cold_k:02d}"
            blocks = cold_sizes[cold_k]
            files[path] = FileSpec(path, blocks, blocks * scale.block_size, file_type=KINDS[kind].file_type)
            cold_k += 1
        else:
            path = hot_paths[g]
        f = files[path]
        f.reads += 1
        f.readers.append(kind)
        apps.append(AppSpec(f"{shape.name}-a{i:02d}-{kind}", kind, path))
    return Workload(shape.name, apps, files, {"mix": shape.mix, "hot": shape.hot, "cross": shape.cross})


def trace_workload(
    scale: Scale, seed: int = 0, trace: str = "FB-2009_samples_24_times_1hr_0.tsv", root: str = "/cava"
) -> Workload:
    """The first ``scale.trace_jobs`` jobs with input of a SWIM trace, in trace
    order, each reading one file. Sizes: the trace's input bytes on a log scale,
    their range mapped onto 1 to ``trace_max_blocks`` blocks. The trace names no
    files, so inputs recur by popularity: each job reads file ``k`` of a pool of
    half as many files with probability ~ 1/(k+1) (Zipf), a file's size being
    that of its first reader, its type its first reader's. Kinds: high, medium
    and low classes 50/35/15%, evenly within a class, of the file's type once
    it has one; seeded."""
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
        path = f"{root}/trace/f{k:02d}"
        kinds = [x for x in APPS if path not in files or APPS[x].file_type == files[path].file_type]
        share = {c: w / len(KINDS_OF_CLASS[c]) for c, w in (("high", 0.5), ("medium", 0.35), ("low", 0.15))}
        kind = rng.choices(kinds, [share[APPS[x].affinity] for x in kinds])[0]
        if path not in files:
            at = (logs[i] - lo) / (hi - lo) if hi > lo else 0.5
            blocks = 1 + round(at * (scale.trace_max_blocks - 1))
            files[path] = FileSpec(path, blocks, blocks * scale.block_size, file_type=APPS[kind].file_type)
        files[path].reads += 1
        files[path].readers.append(kind)
        apps.append(AppSpec(f"trace-{j.name.removeprefix('swim-')}-{i:02d}-{kind}", kind, path))
    return Workload("trace", apps, files, {"trace": trace, "pool": pool})


def write_inputs(ufs: Path, files: dict[str, FileSpec], seed: int = 0) -> int:
    """Writes the input files, each of its type (:func:`.kinds.make_input`),
    into the under-store directory (cold to Thaw)."""
    total = 0
    for f in files.values():
        p = ufs / f.path.lstrip("/")
        if p.is_file() and p.stat().st_size == f.size:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(make_input(f.file_type, f.size, f"{seed}-{f.path}"))
        total += f.size
    return total
